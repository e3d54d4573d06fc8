"""What a probe found: one `Check` per step, and the report that holds them and becomes JSON.

A check's status is `ok`, `failed` (the scenario's run would fail here, or leave something behind)
or `skipped` (the probe could not try it safely and says why; it does not fail the probe).
`server_says` holds the server's own words where the server answered (an error's first line, a
setting's value), and `fix` what to do when the check failed."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from pathlib import Path

from ..errors import ConfigError

FORMAT = "concurbench-probe/1"


class CheckStatus(StrEnum):
    """How a check of the probe ended (its word in the JSON)."""

    OK = "ok"
    FAILED = "failed"
    SKIPPED = "skipped"


OK, FAILED, SKIPPED = CheckStatus


@dataclass(frozen=True)
class Check:
    check: str
    status: CheckStatus
    server_says: str = ""
    fix: str = ""

    @property
    def failed(self) -> bool:
        return self.status is FAILED


def ok(check: str, server_says: str = "") -> Check:
    return Check(check, OK, server_says)


def failed(check: str, server_says: str, fix: str = "") -> Check:
    return Check(check, FAILED, server_says, fix)


def skipped(check: str, why: str) -> Check:
    return Check(check, SKIPPED, why)


@dataclass
class ProbeReport:
    scenario: str
    file: str
    engine: str
    target: str
    connection: str = ""
    server: str = ""
    elapsed_s: float = 0.0
    checks: list[Check] = field(default_factory=list)

    @property
    def failures(self) -> list[Check]:
        return [c for c in self.checks if c.failed]

    @property
    def ok(self) -> bool:
        return not self.failures

    def add(self, *checks: Check) -> None:
        self.checks.extend(checks)

    def as_dict(self) -> dict:
        return {"format": FORMAT, "scenario": self.scenario, "file": self.file, "engine": self.engine,
                "target": self.target, "connection": self.connection, "server": self.server, "ok": self.ok,
                "failed": len(self.failures), "elapsed_s": round(self.elapsed_s, 2),
                "checks": [asdict(c) for c in self.checks]}

    def write(self, path: Path) -> Path:
        """The report as JSON at `path` (its folder made when missing)."""
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(self.as_dict(), indent=2) + "\n")
        except OSError as exc:
            raise ConfigError(f"cannot write the probe's JSON to {path}: {exc.strerror or exc}", cause=exc) from exc
        return path
