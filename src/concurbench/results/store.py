"""The run directory: created when a run starts, written once when it ends, read back by `load_run`.

    <out>/<UTC timestamp>-<scenario>/
        manifest.json   format version, scenario file and hash, parameters, servers, host, harness, times
        summary.json    format version, every variant run: metrics, sampler summaries, encoded histograms;
                        published figures, claims' verdicts, skipped variants
        summary.csv     one row per variant run and pool, flat metric columns
        samples/*.csv   periodic sampler time series, one file per sampler
        report.md       the comparison tables (written by the caller, report.render.write_report)

While the run goes, manifest.json says `"status": "running"` and the variant runs that finished are
in variant-runs.jsonl (results/journal.py); the final files replace them at the end, the manifest
last (each file is written to a temporary name and renamed, so a kill leaves a whole file or none).
When the directory cannot take them (a full disk), `save_run` writes them to a fallback directory
instead and says where.

Writing never changes the Run it writes. `load_run` is the one reader: it checks the format version
of both JSON files, migrates older formats (results/migrate.py), refuses newer ones, and turns any
unreadable or malformed file into a ConfigError naming it. A directory whose run is still going or
was killed is read from its journal, with status `running` or `killed`.
"""

from __future__ import annotations

import csv
import io
import json
import os
import platform
import re
import socket
import subprocess
import sys
import tempfile
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable

import psutil

from ..errors import ConfigError
from . import journal
from .migrate import migrate
from .model import FORMAT_VERSION, FormatProblem, Run, RunStatus, SAMPLE_KEYS, VariantRun

MANIFEST, SUMMARY, SUMMARY_CSV, SAMPLES = "manifest.json", "summary.json", "summary.csv", "samples"


def host_info() -> dict:
    info = {"hostname": socket.gethostname(), "platform": platform.platform(), "machine": platform.machine(),
            "cpu_count": os.cpu_count(), "python": sys.version.split()[0]}
    model = cpu_model()
    if model:
        info["cpu_model"] = model
    try:
        info["memory_bytes"] = psutil.virtual_memory().total
    except Exception:  # noqa: BLE001 - optional detail
        pass
    return info


def cpu_model() -> str | None:
    """The CPU's model name as /proc/cpuinfo gives it (speed figures move between machines); None elsewhere."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip() or None
    except OSError:
        return None
    return None


def checkout_of(path: Path | str | None) -> dict:
    """The git commit of the checkout a file sits in, and whether the checkout had changes; {} when the
    file is outside a git checkout or git is not installed (runs and the history record it)."""
    if not path:
        return {}
    folder = Path(path).resolve().parent
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}  # reading only: never take the index lock
    try:
        head = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=10, env=env)
        if head.returncode != 0:
            return {}
        status = subprocess.run(["git", "-C", str(folder), "status", "--porcelain", "--untracked-files=no"],
                                capture_output=True, text=True, timeout=10, env=env)
    except (OSError, subprocess.SubprocessError):
        return {}
    return {"commit": head.stdout.strip(), "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None}


def now_iso() -> str:
    return datetime.now(timezone.utc).isoformat()


def create_run_dir(out_dir: Path, scenario_name: str) -> Path:
    """A new, empty directory `<UTC timestamp>-<scenario>` under `out_dir` (with `-N` if the name is taken).
    An `out_dir` that cannot hold one (a file, /proc, a read-only place) is a ConfigError naming it."""
    out_dir = Path(out_dir)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for n in range(1000):
            path = out_dir / (f"{stamp}-{scenario_name}" + (f"-{n}" if n else ""))
            try:
                path.mkdir()
                return path
            except FileExistsError:
                continue
    except OSError as exc:
        raise ConfigError(f"{out_dir}: cannot create a run directory there: {_why(exc, out_dir)}", cause=exc) from exc
    raise ConfigError(f"{out_dir}: cannot create a run directory there: 1,000 runs named {stamp}-{scenario_name} "
                      f"already exist")


def _why(exc: OSError, path: Path) -> str:
    """An OSError as a reason, naming the part of the path at fault when it is not `path` itself."""
    reason = exc.strerror or str(exc)
    culprit = Path(exc.filename) if getattr(exc, "filename", None) else None
    if isinstance(exc, NotADirectoryError):
        for parent in [path, *path.parents]:
            if parent.exists() and not parent.is_dir():
                return f"{parent} is a file, not a directory"
    if culprit is not None and culprit != path:
        return f"{culprit}: {reason}"
    return reason


# Writing ---------------------------------------------------------------------------------------------

def start_run(run: Run, planned: int | None = None) -> None:
    """Mark `run.path` as a run in progress: a manifest with status "running", the process running it,
    and how many variant runs are planned. An unwritable directory is a ConfigError naming it."""
    manifest = {**run.manifest_dict(), "status": RunStatus.RUNNING, "owner": journal.owner(), "planned_runs": planned}
    try:
        _write_json(run.path / MANIFEST, manifest)
    except OSError as exc:
        raise ConfigError(f"{run.path / MANIFEST}: cannot write the run directory: {_why(exc, run.path)}",
                          cause=exc) from exc


record_variant_run = journal.append  # (path, variant_run) -> why it could not be kept, or None


def write_run(run: Run, path: Path | None = None) -> Path:
    """Write the run's data files into `path` (default `run.path`), the manifest last; then drop the
    journal of the run in progress. Returns the directory."""
    path = Path(path or run.path)
    _write_json(path / SUMMARY, run.summary_dict())
    _write_text(path / SUMMARY_CSV, csv_text(run))
    samples: dict[str, list[dict]] = {}
    for r in run.variant_runs:
        for name, rows in r.samples.items():
            key = {"variant": r.variant, "point": r.point, "server": r.server, "repeat": r.repeat}
            samples.setdefault(name, []).extend({**key, **row} for row in rows)
    if samples:
        (path / SAMPLES).mkdir(exist_ok=True)
        for name, rows in samples.items():
            _write_text(path / SAMPLES / f"{name}.csv", _csv(rows))
    _write_json(path / MANIFEST, run.manifest_dict())
    journal.remove(path)
    return path


def fallback_dir(run: Run) -> Path:
    """Where a run goes when its own directory cannot take it: the system's temporary folder."""
    return Path(tempfile.gettempdir()) / "concurbench-unsaved" / Path(run.path).name


def save_run(run: Run, also: Callable[[Run], object] | None = None) -> tuple[Run, str | None]:
    """Write the run (and `also(run)`, such as report.md) into its directory; when that fails (a full
    disk, a directory gone read-only), into `fallback_dir(run)`. Returns the run as written (its
    `path` is where it went) and what went wrong, or None."""
    try:
        write_run(run)
        if also is not None:
            also(run)
        return run, None
    except OSError as exc:
        failed = f"cannot write the run directory {run.path}: {_why(exc, Path(run.path))}"
    moved = replace(run, path=fallback_dir(run))
    try:
        moved.path.mkdir(parents=True, exist_ok=True)
        write_run(moved)
        if also is not None:
            also(moved)
    except OSError as exc:
        return run, f"{failed}; nor into {moved.path}: {_why(exc, moved.path)}; the tables printed are all " \
                    f"that is left of the results"
    _leave_note(run, moved.path, failed)
    return moved, f"{failed}; the results were written to {moved.path} instead"


def _leave_note(run: Run, moved_to: Path, failed: str) -> None:
    """Best effort: the first directory's manifest says where its run went (the journal makes room)."""
    journal.remove(run.path)
    note = replace(run, status=RunStatus.FAILED, error=f"{failed}; the results were written to {moved_to} instead")
    try:
        _write_json(Path(run.path) / MANIFEST, note.manifest_dict())
    except OSError:
        pass


def csv_rows(run: Run) -> list[dict]:
    """summary.csv: one row per variant run and pool, its flat metrics as columns (error texts left out)."""
    rows = []
    for r in run.variant_runs:
        for name, pool in r.pools.items():
            flat = {k: v for k, v in r.figures(name).items() if not k.startswith("error_messages")}
            rows.append({"variant": r.variant, "group": r.group, "point": r.point, "repeat": r.repeat,
                         "server": r.server, "pool": name, "measured": pool.measure, "clients": pool.clients,
                         "status": r.status, **flat})
    return rows


def csv_text(run: Run) -> str:
    return _csv(csv_rows(run))


def _write_json(path: Path, data) -> None:
    _write_text(path, json.dumps(data, indent=2, default=str) + "\n")


def _write_text(path: Path, text: str) -> None:
    """Write to a temporary name beside `path`, then rename: a reader (or a kill) sees all of it or none."""
    temporary = path.with_name(f".{path.name}.tmp")
    try:
        with open(temporary, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.replace(temporary, path)
    except OSError:
        try:
            temporary.unlink()
        except OSError:
            pass
        raise


def _csv(rows: list[dict]) -> str:
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns)
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


# Reading ---------------------------------------------------------------------------------------------

def load_run(path: Path | str) -> Run:
    """The run stored in `path`, in the current model whatever format it was written in."""
    path = Path(path)
    if not path.is_dir():
        raise ConfigError(f"{path}: no such run directory")
    docs, versions = [], []
    for name in (MANIFEST, SUMMARY):
        file = path / name
        if not file.is_file():
            raise ConfigError(f"{path}: not a run directory (no {name})")
        data = _read_json(file)
        docs.append(data)
        versions.append(_version(data, file))
        if name == MANIFEST and data.get("status") == RunStatus.RUNNING:
            return _unfinished(path, data, versions[0])
    if versions[0] != versions[1]:
        raise ConfigError(f"{path}: {MANIFEST} is format version {versions[0]} but {SUMMARY} is {versions[1]}: "
                          f"the files come from different runs or were edited")
    manifest, summary = migrate(docs[0], docs[1], versions[0])
    try:
        run = Run.from_dicts(manifest, summary, path=path, format_version=versions[0])
    except FormatProblem as exc:
        file, where = (MANIFEST, exc.where[len("manifest"):]) if exc.where.startswith("manifest") else \
            (SUMMARY, exc.where[len("summary"):])
        where = where.lstrip(".")
        raise ConfigError(f"{path / file}: {where + ': ' if where else ''}{exc.problem}; "
                          f"not a run directory concurbench can read", cause=exc) from exc
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{path}: not a run directory concurbench can read ({exc})", cause=exc) from exc
    samples = _read_samples(path / SAMPLES, run.variant_runs)
    if any(samples):
        run = replace(run, variant_runs=[replace(r, samples=s) if s else r for r, s in zip(run.variant_runs, samples)])
    return run


def _unfinished(path: Path, manifest: dict, version: int) -> Run:
    """A run still going or killed: its manifest and the variant runs its journal kept."""
    if version not in (journal.JOURNAL_BEFORE, FORMAT_VERSION):
        raise ConfigError(f"{path / MANIFEST}: a run in progress written in format version {version}; this "
                          f"concurbench reads runs in progress of versions {journal.JOURNAL_BEFORE} and "
                          f"{FORMAT_VERSION} only")
    runs, problems = journal.read(path)
    owner = manifest.get("owner")
    alive = journal.owner_alive(owner)
    planned = manifest.get("planned_runs")
    finished = f"{len(runs)}{f' of {planned}' if isinstance(planned, int) else ''} variant runs finished"
    who = f"pid {owner.get('pid')}" + (f" on {owner.get('host')}" if alive is None else "") \
        if isinstance(owner, dict) else "its process"
    if alive is False:
        status, error = RunStatus.KILLED, f"{who} ended without finishing the run; {finished}"
    else:
        status, error = RunStatus.RUNNING, f"still running ({who}){' or killed on that host' if alive is None else ''}; " \
                                   f"{finished} so far"
    if problems:
        error += "; " + "; ".join(problems)
    try:
        run = Run.from_dicts(manifest, {"format_version": version, "results": []}, path=path, format_version=version)
    except FormatProblem as exc:
        raise ConfigError(f"{path / MANIFEST}: {exc}; not a run directory concurbench can read", cause=exc) from exc
    return replace(run, status=status, error=error, variant_runs=runs)


def _read_json(file: Path) -> dict:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{file}: not valid JSON ({exc}); the file may be truncated or not written by "
                          f"concurbench", cause=exc) from exc
    except OSError as exc:
        raise ConfigError(f"{file}: cannot read it: {exc}", cause=exc) from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: not a concurbench run file (a JSON object is expected, found "
                          f"{type(data).__name__})")
    return data


def _version(data: dict, file: Path) -> int:
    version = data.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        found = "no format version" if version is None else f"format version {version!r}"
        raise ConfigError(f"{file}: {found}, not one concurbench writes (this concurbench reads 1 to "
                          f"{FORMAT_VERSION})")
    if version > FORMAT_VERSION:
        raise ConfigError(f"{file}: format version {version} is newer than this concurbench reads "
                          f"({FORMAT_VERSION}); upgrade concurbench")
    return version


def _read_samples(folder: Path, runs: list[VariantRun]) -> list[dict[str, list[dict]]]:
    """Each variant run's rows of every samples/*.csv, matched by the key columns the file has
    (variant, point, server, repeat; older files lack the last two: then in order of appearance)."""
    out: list[dict[str, list[dict]]] = [{} for _ in runs]
    if not folder.is_dir():
        return out
    for file in sorted(folder.glob("*.csv")):
        try:
            with file.open(newline="", encoding="utf-8") as fh:
                reader = csv.DictReader(fh)
                rows = list(reader)
                columns = list(reader.fieldnames or [])
        except (OSError, UnicodeDecodeError, csv.Error) as exc:
            raise ConfigError(f"{file}: cannot read it: {exc}", cause=exc) from exc
        if not rows:
            continue
        missing = [c for c in ("variant", "point", "t_s") if c not in columns]
        if missing:
            raise ConfigError(f"{file}: not a samples file concurbench wrote: missing column(s) {', '.join(missing)}")
        keys = [k for k in SAMPLE_KEYS if k in columns]
        blocks: list[tuple[tuple, list[dict]]] = []
        for line, row in enumerate(rows, 2):
            key = tuple(row.get(k) or "" for k in keys)
            if not blocks or blocks[-1][0] != key:
                blocks.append((key, []))
            blocks[-1][1].append({c: _cell(row.get(c)) for c in columns if c not in SAMPLE_KEYS})
        taken: set[int] = set()
        for key, block in blocks:  # rows of no variant run in summary.json (an edited summary) are left out
            found = next((i for i, r in enumerate(runs) if i not in taken and _matches(r, dict(zip(keys, key)))), None)
            if found is not None:
                taken.add(found)
                out[found].setdefault(file.stem, []).extend(block)
    return out


def _matches(r: VariantRun, key: dict[str, str]) -> bool:
    wanted = {"variant": r.variant, "point": "" if r.point is None else str(r.point),
              "server": r.server or "", "repeat": str(r.repeat)}
    return all(value == wanted[k] or (k == "repeat" and value == "" and r.repeat == 1) for k, value in key.items())


_INT = re.compile(r"-?\d+")
_FLOAT = re.compile(r"-?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def _cell(text):
    """A CSV cell as the value it was written from: None, int, float, bool or text."""
    if text is None or text == "":
        return None
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    return {"True": True, "False": False}.get(text, text)
