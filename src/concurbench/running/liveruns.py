"""Runs in progress on this machine: one small file each under home_dir()/runs, naming the run
directory and the process running it, removed when the run ends. A run killed with SIGKILL leaves
its file behind, so `gc` can say which run was killed, and which of its variant runs finished (its
run directory keeps them: results/journal.py).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError
from ..provisioners.base import home_dir
from ..results import journal
from ..results.store import load_run


def _folder(home: Path | None = None) -> Path:
    return (home or home_dir()) / "runs"


def register(run_dir: Path, home: Path | None = None) -> Path | None:
    """Note a run in progress; returns its note (None when the home cannot take one: gc then cannot tell)."""
    note = _folder(home) / f"{uuid.uuid4().hex[:12]}.json"
    try:
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(json.dumps({"run_dir": str(Path(run_dir).resolve()), "owner": journal.owner()}))
    except OSError:
        return None
    return note


def unregister(note: Path | None) -> None:
    if note is not None:
        try:
            note.unlink()
        except OSError:
            pass


@dataclass(frozen=True)
class KilledRun:
    note: Path
    run_dir: Path
    pid: int | None
    detail: str  # what finished, from the run directory


def killed(home: Path | None = None) -> list[KilledRun]:
    """Runs whose process is gone without ending them."""
    folder = _folder(home)
    found = []
    for note in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        try:
            data = json.loads(note.read_text())
            owner, run_dir = data.get("owner"), Path(data["run_dir"])
        except (OSError, ValueError, KeyError, TypeError):
            found.append(KilledRun(note, note, None, "an unreadable note of a run in progress"))
            continue
        if journal.owner_alive(owner) is not False:
            continue
        found.append(KilledRun(note, run_dir, owner.get("pid"), _finished(run_dir)))
    return found


def _finished(run_dir: Path) -> str:
    try:
        run = load_run(run_dir)
    except ConfigError as exc:
        return f"its run directory cannot be read: {exc.message}"
    labels = [r.label for r in run.variant_runs]
    shown = ", ".join(labels[:8]) + (f" and {len(labels) - 8} more" if len(labels) > 8 else "")
    return (f"{run.error or run.status}" + (f" ({shown})" if labels else "")
            + f"; the run directory keeps what finished: concurbench report {run_dir}")
