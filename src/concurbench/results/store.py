"""The run directory: written once at the end of a run, with a versioned manifest.

    <out>/<UTC timestamp>-<scenario>/
        manifest.json   format version, scenario file and hash, parameters, server, host, harness, times
        summary.json    every variant run: metrics, sampler summaries, encoded histograms
        summary.csv     one row per variant run and measured pool, flat metric columns
        samples/*.csv   periodic sampler time series
        report.md       the comparison tables in Markdown
"""

from __future__ import annotations

import csv
import json
import os
import platform
import socket
import sys
from datetime import datetime, timezone
from pathlib import Path

from .. import __version__
from ..errors import ConcurbenchError
from ..scenario.model import Scenario

FORMAT_VERSION = 1


def host_info() -> dict:
    info = {"hostname": socket.gethostname(), "platform": platform.platform(), "machine": platform.machine(),
            "cpu_count": os.cpu_count(), "python": sys.version.split()[0]}
    try:
        import psutil

        info["memory_bytes"] = psutil.virtual_memory().total
    except Exception:  # noqa: BLE001 - optional detail
        pass
    return info


class RunWriter:
    def __init__(self, path: Path, scenario: Scenario, target: str, processes: int | None, repeat: int = 1):
        self.path = path
        self.repeat = repeat
        self.scenario = scenario
        self.target = target
        self.processes = processes
        self.started = datetime.now(timezone.utc)
        self.servers: list[dict] = []  # one per server the scenario ran on (a version matrix has several)

    @classmethod
    def create(cls, out_dir: Path, scenario: Scenario, *, target: str, processes: int | None,
               repeat: int = 1) -> "RunWriter":
        out_dir.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        for n in range(1000):
            name = f"{stamp}-{scenario.name}" + (f"-{n}" if n else "")
            try:
                (out_dir / name).mkdir()
                return cls(out_dir / name, scenario, target, processes, repeat)
            except FileExistsError:
                continue
        raise ConcurbenchError(f"cannot create a run directory under {out_dir}")

    def manifest(self, status: str, error: ConcurbenchError | None) -> dict:
        s = self.scenario
        return {
            "format_version": FORMAT_VERSION,
            "harness": {"name": "concurbench", "version": __version__},
            "status": status,
            "error": error.message if error else None,
            "scenario": {"name": s.name, "title": s.title, "file": str(s.path), "sha256": s.sha256,
                         "quick": s.quick, "parameters": dict(s.parameters), "engine": s.engine,
                         "variants": [v.name for v in s.variants], "seed": s.seed,
                         "baselines": dict(s.baselines),
                         "source": {"title": s.source.title, "url": s.source.url, "author": s.source.author,
                                    "engine": s.source.engine, "hardware": s.source.hardware}},
            "server": self.servers[0] if self.servers else {},
            "servers": self.servers,
            "target": self.target,
            "host": host_info(),
            "processes": self.processes or os.cpu_count(),
            "repeat": self.repeat,
            "started": self.started.isoformat(),
            "ended": datetime.now(timezone.utc).isoformat(),
        }

    def finish(self, results: list[dict], status: str, error: ConcurbenchError | None,
               claims: list[dict] | None = None, skipped: dict[str, str] | None = None) -> Path:
        from ..report.tables import build_report
        from ..report.render import markdown

        manifest = self.manifest(status, error)
        samples = {}
        for r in results:
            for name, rows in (r.pop("samples", None) or {}).items():
                for row in rows:
                    samples.setdefault(name, []).append({"variant": r["variant"], "point": r["point"],
                                                         "server": r.get("server"), "repeat": r.get("repeat", 1),
                                                         **row})
        published = [p.__dict__ for p in self.scenario.source.published]
        summary = {"format_version": FORMAT_VERSION, "results": results, "published": published,
                   "claims": claims or [], "skipped": dict(skipped or {})}
        _write_json(self.path / "manifest.json", manifest)
        _write_json(self.path / "summary.json", summary)
        _write_csv(self.path / "summary.csv", _csv_rows(results))
        if samples:
            (self.path / "samples").mkdir(exist_ok=True)
            for name, rows in samples.items():
                _write_csv(self.path / "samples" / f"{name}.csv", rows)
        (self.path / "report.md").write_text(markdown(build_report(manifest, summary)), encoding="utf-8")
        return self.path


def _csv_rows(results: list[dict]) -> list[dict]:
    from ..report.metrics import row_metrics

    rows = []
    for r in results:
        for pool, data in r["pools"].items():
            flat = {k: v for k, v in row_metrics(r, pool).items() if not k.startswith("error_messages")}
            rows.append({"variant": r["variant"], "group": r["group"], "point": r["point"],
                         "repeat": r.get("repeat", 1), "server": r.get("server"), "pool": pool,
                         "measured": data["measure"], "clients": data["clients"], "status": r["status"], **flat})
    return rows


def _write_json(path: Path, data) -> None:
    path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")


def _write_csv(path: Path, rows: list[dict]) -> None:
    columns: list[str] = []
    for row in rows:
        for key in row:
            if key not in columns:
                columns.append(key)
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow(row)


def load_run(path: Path) -> tuple[dict, dict]:
    manifest = json.loads((path / "manifest.json").read_text())
    summary = json.loads((path / "summary.json").read_text())
    return manifest, summary
