"""A run in progress: who runs it, and the variant runs that finished so far.

A run directory's final files are written once, at the end (store.write_run). Until then its
manifest says `"status": "running"` and names the process that runs it (`owner`: pid, host and the
process's start time), and every variant run that finishes is appended, as one JSON line, to
`variant-runs.jsonl`: its summary.json entry and its periodic samples. A run killed with SIGKILL
therefore still says what it was and keeps what finished; `load_run` reads such a directory as
status `running` (its process is still there) or `killed` (it is gone). When the final files are
written the journal is removed: a finished directory has none.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import psutil

from .migrate import result_v2_to_v3
from .model import FORMAT_VERSION, FormatProblem, VariantRun

JOURNAL = "variant-runs.jsonl"
JOURNAL_BEFORE = 2  # the format before this one, whose runs in progress are read too (a kill loses nothing)


def owner() -> dict:
    """This process, as a running manifest names it."""
    try:
        created = psutil.Process().create_time()
    except psutil.Error:
        created = None
    return {"pid": os.getpid(), "host": socket.gethostname(), "created": created}


def owner_alive(found: dict | None) -> bool | None:
    """True while the process a running manifest names is there; False once it is gone; None when it ran
    on another host (this machine cannot tell)."""
    if not isinstance(found, dict) or not isinstance(found.get("pid"), int):
        return False
    if found.get("host") not in (None, socket.gethostname()):
        return None
    try:
        proc = psutil.Process(found["pid"])
        if proc.status() == psutil.STATUS_ZOMBIE:
            return False
        created = found.get("created")
        return not (isinstance(created, (int, float)) and abs(proc.create_time() - created) > 1)
    except psutil.Error:
        return False


def append(path: Path, run: VariantRun) -> str | None:
    """Add one finished variant run; returns why it could not be written (a full disk), or None."""
    line = json.dumps({"format_version": FORMAT_VERSION, "result": run.as_dict(), "samples": run.samples},
                      default=str)
    try:
        with open(Path(path) / JOURNAL, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
        return None
    except OSError as exc:
        return f"{Path(path) / JOURNAL}: {exc.strerror or exc}"


def read(path: Path) -> tuple[list[VariantRun], list[str]]:
    """The variant runs the journal kept, and what could not be read of it (a line cut short by a kill)."""
    file = Path(path) / JOURNAL
    runs: list[VariantRun] = []
    problems: list[str] = []
    try:
        lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
    except FileNotFoundError:
        return runs, problems
    except OSError as exc:
        return runs, [f"{file}: cannot read it: {exc.strerror or exc}"]
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line)
            version = entry.get("format_version")
            if version == JOURNAL_BEFORE:  # a run in progress the previous format wrote, killed before it ended
                entry = {**entry, "result": result_v2_to_v3(entry["result"])}
            elif version != FORMAT_VERSION:
                problems.append(f"{file}:{number}: format version {version!r}, not {FORMAT_VERSION}; left out")
                continue
            runs.append(VariantRun.from_dict(entry["result"], f"{JOURNAL}:{number}", samples=entry.get("samples")))
        except (ValueError, KeyError, TypeError, AttributeError, FormatProblem) as exc:
            cut = number == len(lines)
            problems.append(f"{file}:{number}: {'cut short (the run was killed while writing it)' if cut else exc}; "
                            f"left out")
    return runs, problems


def remove(path: Path) -> None:
    try:
        (Path(path) / JOURNAL).unlink()
    except FileNotFoundError:
        pass
