"""`history`: a store of runs over time, their series and change points, and a CI gate on them.

    concurbench history init PATH|URL
    concurbench history add RUN_DIR... [--store S] [--label KEY=VALUE ...] [--create]
    concurbench history show [--store S] [--scenario NAME] [--metric GLOB] [--since WHEN] [--format F]
    concurbench history check [--store S] [--run RUN_ID ...] [--gate FILE] [--junit FILE] [--summary FILE]
    concurbench history ack FINDING... --reason TEXT   |   ack --commit SHA|--release VERSION --reason TEXT
    concurbench history label RUN_ID... --set KEY=VALUE ... [--unset KEY ...]
    concurbench history merge SOURCE [--store TARGET]

`init`, `add`, `ack`, `label` and `merge` live here, `show` and `check` in history_report.py (imported when called:
`add` stays well under a second). Exit codes: 0 fine, 5 `check` found a regression, 2 bad input (a path
that is not a run directory, a store that cannot be read or written, an empty or foreign file where a
store belongs, a label with a control character, a finding that does not exist, a merge of two copies
holding different runs under one id); `run --history` exits 6 when the run ended well but could not be
added.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import replace
from datetime import datetime, timezone
from pathlib import Path

import click

from ..errors import ConfigError
from ..history.analysis import analyse, major, version_key
from ..history.causes import line_ranks
from ..history.expect import WINDOW, covers
from ..history.findings import Expectation, FindingState, parse_finding
from ..history.merge import merge as merge_stores
from ..history.records import check_labels, read_run
from ..history.schema import SCHEMA_VERSION
from ..history.store import DEFAULT_STORE, LogAction, init_store, open_store, shown
from .console import err, out
from .lazy import LazyGroup

STORE_HELP = f"The history store: an SQLite file (default {DEFAULT_STORE} here) or a postgresql:// URL."


def parse_pairs(values: tuple[str, ...], what: str, allowed: tuple[str, ...] | None = None) -> dict[str, str]:
    """KEY=VALUE options as a dict; a ConfigError names the one that is not of that form."""
    out_: dict[str, str] = {}
    for text in values:
        key, sep, value = text.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"{what} {text!r}: expected KEY=VALUE")
        value = value.strip()
        if allowed is not None and value not in allowed:
            raise ConfigError(f"{what} {text!r}: the value must be one of {', '.join(allowed)}")
        out_[key.strip()] = value
    return out_


def parse_labels(values: tuple[str, ...], what: str = "--label") -> dict[str, str]:
    """`--label KEY=VALUE` options, checked as the history keeps labels (records.check_labels)."""
    labels = parse_pairs(values, what)
    check_labels(labels, what)
    return labels


def add_runs(store: str | None, run_dirs, labels: dict[str, str], *, init: bool = False) \
        -> list[tuple[str, bool, int]]:
    """Read every run directory first (a bad one stops all before anything is written), then add each in
    its own transaction: (run id, added, points) per run. `init`: an empty file is taken as a new store."""
    read = [read_run(path, labels) for path in run_dirs]
    done = []
    with open_store(store, create=True, init=init) as s:
        for record, points in read:
            done.append((record.run_id, s.add(record, points), len(points)))
    return done


def add_to_history(store: str, run_dir: Path, labels: dict[str, str]) -> bool:
    """`run --history` and `claims --history`: add the run that just ended. A failure is reported (the run
    directory stays as it is) and returns False: the command then ends with EXIT_HISTORY_NOT_ADDED, so a
    nightly job never gates on a store that lacks tonight's run."""
    try:
        for run_id, added, points in add_runs(store, [run_dir], labels):
            err.print(f"history: {'added' if added else 'already held'} {run_id} ({points} figures) in "
                      f"{shown(store)}", highlight=False, soft_wrap=True)
        return True
    except ConfigError as exc:
        err.print(f"[red]history:[/red] the run was not added: {exc.message} (add it later with `concurbench "
                  f"history add {run_dir} --store {shown(store)}`)", highlight=False, soft_wrap=True)
        return False


def history_options(func):
    """`run` and `claims`: add the run to a history store when it ends."""
    func = click.option("--label", "labels", multiple=True, metavar="KEY=VALUE",
                        help="With --history: a label kept with the run (branch, CI run id); repeatable.")(func)
    return click.option("--history", default=None, metavar="PATH|URL",
                        help="Add the run to this history store when it ends (`concurbench history`).")(func)


@click.group(name="history", cls=LazyGroup,
             where={"init": "history:init", "add": "history:add", "show": "history_report:show",
                    "check": "history_report:check", "ack": "history:ack", "merge": "history:merge_into",
                    "label": "history:label"})
def history() -> None:
    """Runs over time: a store of runs, the change points of every series, and a CI gate on them."""


@click.command(name="init")
@click.argument("location", metavar="PATH|URL")
def init(location: str) -> None:
    """Make an empty history store on purpose: a missing or empty file, or a PostgreSQL database without the
    history tables. A store already there is left as it is (its runs are counted); another program's file
    is refused."""
    made, runs, migrated = init_store(location)
    held = f"{shown(location)} is a history store already ({runs} run{'' if runs == 1 else 's'})"
    if made:
        text = f"made an empty history store: {shown(location)}"
    elif migrated is not None:
        text = (f"{held}; it was brought from schema version {migrated} to {SCHEMA_VERSION}, as any command does, "
                f"and nothing else was changed")
    else:
        text = f"{held}; nothing was changed"
    out.print(text, highlight=False, soft_wrap=True)


@click.command(name="add")
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--store", default=None, metavar="PATH|URL", help=STORE_HELP)
@click.option("--label", "labels", multiple=True, metavar="KEY=VALUE",
              help="A label kept with the run (branch, CI run id, a server build's commit); repeatable.")
@click.option("--create", is_flag=True,
              help="Take an empty file as a new store (as `history init` does); without it an empty file, what a "
                   "failed copy leaves, is refused.")
def add(run_dirs: tuple[Path, ...], store: str | None, labels: tuple[str, ...], create: bool) -> None:
    """Add RUN_DIRs (run directories, merged shards included) to the history store. A run already there
    changes nothing; every run is added in one transaction of its own."""
    for run_id, added, points in add_runs(store, run_dirs, parse_labels(labels), init=create):
        out.print(f"{'added' if added else 'already held'}: {run_id} ({points} figures)", highlight=False)


@click.command(name="merge")
@click.argument("source", metavar="SOURCE")
@click.option("--store", default=None, metavar="PATH|URL",
              help=f"The store merged into: an SQLite file (default {DEFAULT_STORE} here) or a postgresql:// URL.")
def merge_into(source: str, store: str | None) -> None:
    """Bring into the store what SOURCE (another copy of it: a path or URL) holds and it lacks, in one
    transaction: runs, findings (one per change, in the furthest state), expectations and the log. A run
    id held with other files in the two is refused; merging again changes nothing."""
    with open_store(source) as theirs, open_store(store, create=True) as mine:
        done = merge_stores(theirs, mine)
        if not done.anything and not done.log_entries:
            out.print(f"nothing to merge: {mine.name} holds everything {theirs.name} holds", highlight=False,
                      soft_wrap=True)
            return
        out.print(f"merged {theirs.name} into {mine.name}: {done.runs} run(s) ({done.points} figures), "
                  f"{done.findings_added} finding(s) added, {done.findings_changed} finding(s) changed, "
                  f"{done.expectations} expectation(s), {done.relabelled} run(s) relabelled, {done.log_entries} "
                  f"log entr{'y' if done.log_entries == 1 else 'ies'}", highlight=False, soft_wrap=True)


@click.command(name="ack")
@click.argument("findings", nargs=-1, metavar="[FINDING]...")
@click.option("--reason", required=True, metavar="TEXT", help="Why: kept with each finding and shown by `show`.")
@click.option("--commit", default=None, metavar="SHA",
              help="Instead of FINDINGs: a change expected at this commit (7 characters or more, known to the store "
                   "or to the git checkout here): the findings that start at its first runs on a line, made and to "
                   "come, are acknowledged.")
@click.option("--release", default=None, metavar="VERSION",
              help="Instead of FINDINGs: a change expected with this server release (16.10; one the store holds, or "
                   "newer than its major's newest there): the findings that start at its first runs on a line, made "
                   "and to come, are acknowledged.")
@click.option("--store", default=None, metavar="PATH|URL", help=STORE_HELP)
def ack(findings: tuple[str, ...], reason: str, commit: str | None, release: str | None, store: str | None) -> None:
    """Acknowledge new findings (F12 ...) with a reason, or announce a change expected at a commit or release:
    `history check` is red while a finding is new, until someone acts."""
    for text in acknowledge(store, findings, reason, commit, release):
        out.print(text, highlight=False, soft_wrap=True)


def acknowledge(store: str | None, findings: tuple[str, ...], reason: str, commit: str | None,
                release: str | None) -> list[str]:
    """Acknowledge the findings, or keep an expectation and acknowledge what it covers; every finding named
    is checked before anything is written (one that does not exist, or is not new, is a ConfigError)."""
    if not reason.strip():
        raise ConfigError("--reason: say why (it is kept with the finding)")
    if bool(findings) + (commit is not None) + (release is not None) != 1:
        raise ConfigError("history ack: give FINDING ids, or --commit SHA, or --release VERSION (one of them)")
    if commit is not None and not re.fullmatch(r"[0-9a-fA-F]{7,40}", commit.strip()):
        raise ConfigError(f"--commit {commit!r}: give at least 7 hexadecimal characters of the commit (git rev-parse "
                          f"--short=7 HEAD prints them)")
    if release is not None and not re.fullmatch(r"[0-9][0-9A-Za-z.\-]*", release.strip()):
        raise ConfigError(f"--release {release!r}: give a server release as the runs name it, such as 16.10 or "
                          f"2022-CU14")
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    with open_store(store) as s:
        if findings:
            chosen = []
            for text in findings:
                number = parse_finding(text)
                f = s.finding(number)
                if f is None:
                    raise ConfigError(f"finding F{number} does not exist in {s.name} (`concurbench history show` lists "
                                      f"the findings)")
                if f.state is FindingState.ACKNOWLEDGED:
                    raise ConfigError(f"finding F{number} ({f.key.metric}) was already acknowledged on "
                                      f"{(f.acted or '')[:16].replace('T', ' ')}: {f.reason}; nothing was changed")
                if f.state is FindingState.RESOLVED:
                    raise ConfigError(f"finding F{number} ({f.key.metric}) was resolved on "
                                      f"{(f.acted or '')[:16].replace('T', ' ')} (the metric came back); nothing "
                                      f"to acknowledge")
                chosen.append(replace(f, state=FindingState.ACKNOWLEDGED, reason=reason.strip(), acted=now))
            s.save_findings([], chosen)
            return [f"acknowledged: {f.name} {f.key.metric}" for f in chosen]
        expectation = Expectation(None, (commit or "").strip().lower(), (release or "").strip(), reason.strip(), now)
        records = [r.record for r in s.runs()]
        _known_change(expectation, records, s.name)
        twin = next((e for e in s.expectations() if (e.commit, e.release) == (expectation.commit, expectation.release)),
                    None)
        if twin is not None:
            raise ConfigError(f"a change at {twin.what} is expected already (E{twin.id}, {twin.added[:10]}: "
                              f"{twin.reason}); nothing was changed")
        covered = [replace(f, state=FindingState.ACKNOWLEDGED, reason=f"expected: {reason.strip()}", acted=now)
                   for f in covered_findings(s, expectation)]
        s.expect(expectation, covered)
    return [f"expected: a change at {expectation.what}; the findings that start at its first {WINDOW} runs on a line "
            f"are acknowledged, those made and those to come"] + \
        [f"acknowledged: {f.name} {f.key.metric}" for f in covered]


def _known_change(e: Expectation, records, store: str) -> None:
    """A commit the store or the git checkout here knows; a release the store holds, or one newer than every
    release of its major there (announced before its first run). Anything else is a ConfigError."""
    if e.commit:
        if any((r.commit or r.labels.get("commit", "")).lower().startswith(e.commit) for r in records):
            return
        done = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{e.commit}^{{commit}}"],
                              capture_output=True, text=True, check=False)
        if done.returncode == 0:
            return
        raise ConfigError(f"--commit {e.commit}: no run in the history store {store} has this commit, and the git "
                          f"checkout here does not know it; give a commit of the scenario checkout the nightly job "
                          f"runs (nothing was changed)")
    held = {v for r in records for v in r.servers}
    if e.release in held:
        return
    mine = [v for v in held if major(v) == major(e.release)]
    if mine and all(version_key(e.release) > version_key(v) for v in mine):
        return
    if not mine and any(version_key(major(e.release)) > version_key(major(v)) for v in held):
        return
    newest = max(mine, key=version_key) if mine else None
    raise ConfigError(f"--release {e.release}: the history store {store} holds no run of it"
                      + (f", and it is not newer than {newest}, the newest of its major there" if newest else
                         ", and no run of its major or of an earlier one")
                      + "; give the release as the runs name it (`concurbench history show` lists them); nothing was "
                        "changed")


def covered_findings(s, expectation: Expectation) -> list:
    """The new findings the expectation's window covers, judged on the lines of the store's series."""
    findings = [f for f in s.findings() if f.state is FindingState.NEW]
    if not findings:
        return []
    keys = {f.key for f in findings}
    a = analyse(s, select=lambda k: k.metric in {key.metric for key in keys}, groups=False)
    series = {x.key: x for x in a.series}
    ranks = line_ranks(a)
    return [f for f in findings if f.key in series
            and covers(expectation, f, series[f.key], ranks.get((f.key.scenario, f.key.server), {}))]


@click.command(name="label")
@click.argument("run_ids", nargs=-1, required=True, metavar="RUN_ID...")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Give the runs this label (repeatable).")
@click.option("--unset", "unsets", multiple=True, metavar="KEY", help="Take this label from the runs (repeatable).")
@click.option("--store", default=None, metavar="PATH|URL", help=STORE_HELP)
def label(run_ids: tuple[str, ...], sets: tuple[str, ...], unsets: tuple[str, ...], store: str | None) -> None:
    """Relabel stored runs (a `track` label puts them on another line: `--set track=main` joins a job's majors
    in one series). Every run and label is checked before anything is written; the change is logged in the
    store."""
    for text in relabel(store, run_ids, parse_labels(sets, "--set"), unsets):
        out.print(text, highlight=False, soft_wrap=True)


def relabel(store: str | None, run_ids: tuple[str, ...], sets: dict[str, str], unsets: tuple[str, ...]) -> list[str]:
    if not sets and not unsets:
        raise ConfigError("history label: give --set KEY=VALUE or --unset KEY (or both)")
    check_labels({key: "" for key in unsets}, "--unset")
    with open_store(store) as s:
        held = {r.record.run_id: r for r in s.runs()}
        missing = [r for r in run_ids if r not in held]
        if missing:
            raise ConfigError(f"history label: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not in the "
                              f"history store {s.name} (`concurbench history show --all` lists its runs); nothing was "
                              f"changed")
        chosen = [held[r] for r in dict.fromkeys(run_ids)]
        labels = {r.id: {**{k: v for k, v in r.record.labels.items() if k not in unsets}, **sets} for r in chosen}
        detail = {"runs": [r.record.run_id for r in chosen], "set": sets, "unset": list(unsets),
                  "before": {r.record.run_id: r.record.labels for r in chosen}}
        s.relabel([r.id for r in chosen], labels, (LogAction.RELABEL, detail))
    return [f"relabelled: {r.record.run_id} ({', '.join(f'{k}={v}' for k, v in sorted(labels[r.id].items())) or 'no labels'})"
            for r in chosen]
