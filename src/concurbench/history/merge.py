"""Two copies of a history store made one: what a source store holds and a target lacks, brought in.

    with open_store(theirs) as source, open_store("history.db", create=True) as target:
        merge(source, target)   # -> Merged: what came in (nothing, the second time)

The nightly job and a person who acknowledged a finding each hold a copy of the store; when the second
push finds the branch moved, the two copies are merged and the push tried again (docs/history.md).
What is brought in, in one transaction on the target (the source read in one consistent view):

- runs, by run id, with their series and points (when they went into a store kept); a run id the
  target holds with other files (another digest) is a conflict: refused, nothing written;
- findings: one is the same as the target's when its series (with its line), kind and first run agree,
  or when the runs its change could start at overlap those of the target's finding; then the two are
  one, in the furthest state (resolved over acknowledged over new; of two in one state, the later
  act's), with both reasons kept; otherwise it is added;
- expectations: one per commit and release; an expectation of both keeps both reasons, and lapses
  when either copy saw it lapse;
- the log: the entries the target lacks, in time order; a relabel among them gives its runs its labels
  unless the target relabelled them later.

Row ids differ between stores: every reference a finding holds (its first run, the run before, the runs
it could start at, the run that resolved it, the newest it was sized at) goes through the run's id.
Merging a second time changes nothing, and the merge itself is logged only when something came in.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace

from ..errors import ConfigError
from .findings import Expectation, Finding, FindingState, overlap
from .store import HistoryStore, LogAction, LogEntry, StoredRun

STATE_ORDER = {FindingState.NEW: 0, FindingState.ACKNOWLEDGED: 1, FindingState.RESOLVED: 2}
SHOWN_CONFLICTS = 5  # conflicting run ids named in the message


@dataclass(frozen=True)
class Merged:
    """What a merge brought into the target."""

    runs: int = 0
    points: int = 0
    findings_added: int = 0
    findings_changed: int = 0
    expectations: int = 0
    relabelled: int = 0
    log_entries: int = 0

    @property
    def anything(self) -> bool:
        """Something beyond the log came in (a merge that only copied log entries is not logged itself)."""
        return any((self.runs, self.findings_added, self.findings_changed, self.expectations, self.relabelled))


@dataclass(frozen=True)
class _Source:
    """Everything the source holds that a merge reads, from one consistent view of it."""

    runs: list[StoredRun]
    points: dict[str, list]  # run id -> its PointRecords (only the runs the target lacked when read)
    findings: list[Finding]
    expectations: list[Expectation]
    log: list[LogEntry]


def merge(source: HistoryStore, target: HistoryStore) -> Merged:
    """Bring into `target` what `source` holds and it lacks (the module's note says what and how)."""
    held = {r.record.run_id: r.record.digest for r in target.runs()}
    theirs = source.reading(lambda: _read(source, held), "reading the store to merge")
    return target.atomically(lambda: _write(theirs, target, source.name), "merging a store")


def _read(source: HistoryStore, held: dict[str, str]) -> _Source:
    runs = source.runs()
    missing = {r.id: r.record.run_id for r in runs if r.record.run_id not in held}
    return _Source(runs, source.run_points(missing), source.findings(), source.expectations(), source.logs())


def _write(theirs: _Source, target: HistoryStore, name: str) -> Merged:
    mine = {r.record.run_id: r for r in target.runs()}
    _refuse_conflicts(theirs.runs, mine, target, name)
    new = [r for r in theirs.runs if r.record.run_id not in mine]
    for run in new:  # runs are never taken out of a store: each the target lacks now, it lacked when read
        target.add(run.record, theirs.points[run.record.run_id], run.added)
    after = target.runs()
    ids = {r.record.run_id: r.id for r in after}
    to_mine = {r.id: ids[r.record.run_id] for r in theirs.runs}  # their row id -> ours
    place = {r.id: i for i, r in enumerate(sorted(after, key=lambda r: (r.record.started, r.record.run_id)))}
    added, changed = _findings(theirs.findings, target.findings(), to_mine, place)
    target.save_findings(added, changed)
    expectations_new, expectations_changed = _expectations(theirs.expectations, target.expectations())
    target.keep_expectations(expectations_new, expectations_changed)
    entries, relabelled = _log(theirs.log, target.logs(), {r.record.run_id: r for r in after}, target)
    out = Merged(len(new), sum(len(theirs.points[r.record.run_id]) for r in new), len(added), len(changed),
                 len(expectations_new) + len(expectations_changed), relabelled, entries)
    if out.anything:
        target.log(LogAction.MERGE.value, {"from": name, "runs": out.runs, "findings_added": out.findings_added,
                                           "findings_changed": out.findings_changed,
                                           "expectations": out.expectations, "relabelled": out.relabelled})
    return out


def _refuse_conflicts(runs: list[StoredRun], mine: dict[str, StoredRun], target: HistoryStore, name: str) -> None:
    """The same run id with other files in the two stores: nothing can say which is right."""
    clash = [r.record.run_id for r in runs if r.record.run_id in mine
             and mine[r.record.run_id].record.digest != r.record.digest]
    if clash:
        more = f" and {len(clash) - SHOWN_CONFLICTS} more" if len(clash) > SHOWN_CONFLICTS else ""
        raise ConfigError(f"history merge: {name} and {target.name} hold different runs under the same run id "
                          f"({', '.join(clash[:SHOWN_CONFLICTS])}{more}): their files differ, so nothing can say "
                          f"which is right; nothing was written (rename one run's directory and add it again)")


# -- findings
REFERENCES = ("first_run", "before_run", "resolved_run", "first_low", "first_high", "now_run")


def _findings(theirs: list[Finding], mine: list[Finding], to_mine: dict[int, int],
              place: dict[int, int]) -> tuple[list[Finding], list[Finding]]:
    """Their findings as ours: (to add, ours whose state changed). One that matches ours (or one added
    before it in this merge) is merged into it."""
    known: list[Finding] = list(mine)  # ours, as the merge leaves them (added ones with id None)
    for f in theirs:
        ours = replace(f, id=None, **{c: _mapped(getattr(f, c), to_mine) for c in REFERENCES})
        at = next((i for i, k in enumerate(known) if _same(k, ours, place)), None)
        if at is None:
            known.append(ours)
        else:
            known[at] = _joined(known[at], ours, place)
    added = [f for f in known if f.id is None]
    before = {f.id: f for f in mine}
    changed = [f for f in known if f.id is not None and f != before[f.id]]
    return added, changed


def _mapped(run: int | None, to_mine: dict[int, int]) -> int | None:
    return None if run is None else to_mine[run]


def _same(a: Finding, b: Finding, place: dict[int, int]) -> bool:
    """One finding: the same series on the same line, of one kind, starting at the same run, or where the
    runs their changes could start at overlap."""
    if a.key != b.key or a.kind is not b.kind:
        return False
    if a.first_run == b.first_run:
        return True
    return overlap(tuple(place[r] for r in a.starts), tuple(place[r] for r in b.starts))


def _joined(mine: Finding, theirs: Finding, place: dict[int, int]) -> Finding:
    """Our finding with their state where it went further (or, in the same state, was acted on later), both
    reasons kept, and the size measured at the newer run."""
    ahead = (STATE_ORDER[theirs.state], theirs.acted or "") > (STATE_ORDER[mine.state], mine.acted or "")
    win, lose = (theirs, mine) if ahead else (mine, theirs)
    out = replace(mine, state=win.state, acted=win.acted, resolved_run=win.resolved_run,
                  reason=_reasons(win.reason, lose.reason),
                  confirmation=win.confirmation if win.confirmation is not None else lose.confirmation)
    if theirs.now_run is not None and (mine.now_run is None or place[theirs.now_run] > place[mine.now_run]):
        out = replace(out, now_change=theirs.now_change, now_run=theirs.now_run)
    return out


def _reasons(first: str | None, second: str | None) -> str | None:
    """Both reasons, once each (one that holds the other stands for both)."""
    if not second or (first and second in first):
        return first
    if not first or first in second:
        return second
    return f"{first}; {second}"


# -- expectations
def _expectations(theirs: list[Expectation], mine: list[Expectation]) -> tuple[list[Expectation], list[Expectation]]:
    """Their expectations ours lack (one per commit and release), and ours that gain a reason or a lapse."""
    known = {(e.commit, e.release): e for e in mine}
    for e in theirs:
        ours = known.get((e.commit, e.release))
        known[(e.commit, e.release)] = replace(e, id=None) if ours is None else replace(
            ours, reason=_reasons(ours.reason, e.reason), lapsed=min((x for x in (ours.lapsed, e.lapsed) if x),
                                                                     default=None))
    before = {e.id: e for e in mine}
    return ([e for e in known.values() if e.id is None],
            [e for e in known.values() if e.id is not None and e != before[e.id]])


# -- the log
def _log(theirs: list[LogEntry], mine: list[LogEntry], runs: dict[str, StoredRun], target: HistoryStore) \
        -> tuple[int, int]:
    """Their entries ours lacks, kept in time order; a relabel among them applied to each run it names unless
    one of ours relabelled that run later. Returns (entries kept, runs relabelled)."""
    have = {_identity(e) for e in mine}
    absent = sorted((e for e in theirs if _identity(e) not in have), key=_identity)
    if not absent:
        return 0, 0
    latest: dict[str, tuple] = {}  # run id -> the identity of the newest entry that labelled it, and the labels
    for e in sorted([*mine, *absent], key=_identity):
        for run_id, labels in _labels(e).items():
            latest[run_id] = (_identity(e), labels)
    theirs_ids = {_identity(e) for e in absent}
    relabel = {runs[run_id].id: labels for run_id, (who, labels) in latest.items()
               if who in theirs_ids and run_id in runs and runs[run_id].record.labels != labels}
    target.set_labels(relabel)
    for e in absent:
        target.log(e.action, e.detail, e.at)
    return len(absent), len(relabel)


def _identity(e: LogEntry) -> tuple[str, str, str]:
    """An entry as two stores both know it: when, what, and its detail (row ids differ)."""
    return e.at, e.action, json.dumps(e.detail, sort_keys=True)


def _labels(e: LogEntry) -> dict[str, dict]:
    """The labels an entry gave, by run id (none for an entry that gave none)."""
    given = e.detail.get("labels")
    return {str(k): dict(v) for k, v in given.items() if isinstance(v, dict)} if isinstance(given, dict) else {}

