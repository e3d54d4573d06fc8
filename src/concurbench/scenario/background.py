"""A variant's `background:` sessions: held transactions, timed statements, the log drain, Extended
Events sessions and SQL Traces, with their times in the measurement window and their options."""

from __future__ import annotations

from ..util import parse_rate, suggest
from .context import Context
from .model import Background, BackgroundKind, XeTarget
from .yamlpos import Checker, describe, join

BACKGROUND_KEYS = ["name", "kind", "isolation", "sql", "release_after", "release_when", "rate", "options",
                   "start_after", "stop_after", "at"]
HOLD, STATEMENT, DRAIN = BackgroundKind.HOLD_TRANSACTION, BackgroundKind.STATEMENT, BackgroundKind.LOG_DRAIN
BACKGROUND_KINDS = {"postgres": [HOLD, STATEMENT, DRAIN],
                    "mssql": [HOLD, BackgroundKind.XEVENTS, BackgroundKind.SQL_TRACE]}
POSTGRES_ONLY_KINDS = {STATEMENT: "it samples the statement's wait event from pg_stat_activity"}
ISOLATION = {"postgres": ["read committed", "repeatable read", "serializable"],
             "mssql": ["read uncommitted", "read committed", "repeatable read", "snapshot", "serializable"]}
OBSERVER_OPTIONS = {BackgroundKind.XEVENTS: ["target", "no_event_loss", "events", "file", "max_memory_kb",
                                             "max_file_size_mb", "max_rollover_files", "max_events_limit"],
                    BackgroundKind.SQL_TRACE: ["events", "file", "max_file_size_mb", "max_files", "columns"]}


def read_background(ctx: Context, vnode, vpath: str, duration: float) -> tuple[Background, ...]:
    """The variant's sessions; `duration` is its measurement window in seconds."""
    check = ctx.check
    out = []
    for i, item, sub in check.mappings(vnode, "background", join(vpath, "background"), what="sessions"):
        check.known_keys(item, sub, BACKGROUND_KEYS, required=("kind",))
        kind = _kind(check, ctx.engine, item, sub)  # None: not a kind of this engine (the checker says so)
        isolation = (check.string(item, "isolation", sub, default="read committed") or "").lower()
        levels = ISOLATION[ctx.engine]
        if isolation not in levels:
            check.add(item, "isolation", join(sub, "isolation"),
                      f"unknown isolation level '{isolation}'{suggest(isolation, levels)}; known: {', '.join(levels)}")
        sql = _sql(check, item, sub)
        if kind is None:
            continue  # what the other keys take depends on the kind
        options = _observer_options(check, item, kind, sub)
        rate = _drain_rate(check, vnode["background"], i, item, kind, sub)
        start_after, release_after, at = _times(check, item, kind, sub, duration)
        if kind is STATEMENT and not sql:
            check.add(vnode["background"], i, join(sub, "sql"), "a statement needs its 'sql'")
        out.append(Background(
            name=check.string(item, "name", sub, default=f"{kind}{i + 1}") or kind, kind=kind,
            isolation=isolation, sql=tuple(sql), release_after=release_after, start_after=start_after, at=at,
            release_when=check.string(item, "release_when", sub, default=None), rate=rate, options=options))
    return tuple(out)


def _kind(check: Checker, engine: str, item, sub: str) -> BackgroundKind | None:
    written = check.string(item, "kind", sub, default=HOLD.value) or HOLD.value
    kinds = BACKGROUND_KINDS[engine]
    try:
        kind = BackgroundKind(written)
    except ValueError:
        kind = None
    if kind in kinds:
        return kind
    if kind in POSTGRES_ONLY_KINDS:
        check.add(item, "kind", join(sub, "kind"), f"kind {written} is PostgreSQL-only for now "
                                                   f"({POSTGRES_ONLY_KINDS[kind]}); on SQL Server "
                                                   f"use a one-client pool instead")
    else:
        names = [k.value for k in kinds]
        check.add(item, "kind", join(sub, "kind"), f"unknown background kind '{written}' for engine "
                                                   f"{engine}{suggest(written, names)}; known: {', '.join(names)}")
    return None


def _sql(check: Checker, item, sub: str) -> list[str]:
    sql = item.get("sql", [])
    sql = [sql] if isinstance(sql, str) else sql
    if not isinstance(sql, list) or not all(isinstance(s, str) for s in sql):
        check.add(item, "sql", join(sub, "sql"), "must be SQL text or a list of SQL texts")
        return []
    return sql


def _drain_rate(check: Checker, sessions, i: int, item, kind: BackgroundKind, sub: str) -> float | None:
    """A log drain's `rate` in bytes per second (other kinds take none), and the keys a drain does not take."""
    if kind is not DRAIN:
        if "rate" in item:
            check.add(item, "rate", join(sub, "rate"), "applies only to kind log_drain", of_key=True)
        return None
    for key in ("isolation", "sql", "release_when"):
        if key in item:
            check.add(item, key, join(sub, key), "does not apply to kind log_drain", of_key=True)
    rate = None
    try:
        rate = parse_rate(item["rate"]) if "rate" in item else None
    except ValueError as exc:
        check.add(item, "rate", join(sub, "rate"), str(exc))
    if "rate" not in item:
        check.add(sessions, i, join(sub, "rate"), "a log_drain needs a 'rate', such as 32kB/s")
    return rate


def _times(check: Checker, item, kind: BackgroundKind, sub: str, duration: float) -> tuple:
    """A session's times in the window: (start_after, release_after, at), each checked against its kind
    and the variant's duration. `stop_after` is the shared name of `release_after`."""
    keys = ("start_after", "stop_after", "release_after", "at")
    times = {key: check.duration(item, key, sub, default=None) for key in keys}
    takes = {HOLD: ("start_after", "stop_after", "release_after"), STATEMENT: ("at",)}
    for key in times:
        if key in item and key not in takes.get(kind, ()):
            takers = [k for k, keys in takes.items() if key in keys]
            check.add(item, key, join(sub, key), f"does not apply to kind {kind} (only to "
                                                 f"{' and '.join(takers)})", of_key=True)
            times[key] = None
    if kind is STATEMENT and "at" not in item:
        check.add(item, None, join(sub, "at"), "a statement needs 'at', the time in the measurement "
                                               "window to run it, such as 500ms")
    if times["stop_after"] is not None and times["release_after"] is not None:
        check.add(item, "stop_after", join(sub, "stop_after"), "give stop_after or release_after, not both (on a "
                                                               "held transaction they are the same: when it "
                                                               "commits)", of_key=True)
    for key in keys:
        if times[key] is not None and times[key] >= duration:
            check.add(item, key, join(sub, key), f"{times[key]:g} s is beyond the measurement window "
                                                 f"({duration:g} s)")
    stop = times["stop_after"] if times["stop_after"] is not None else times["release_after"]
    start = times["start_after"]
    if start is not None and stop is not None and stop <= start:
        key = "stop_after" if times["stop_after"] is not None else "release_after"
        check.add(item, key, join(sub, key), f"{stop:g} s is not after start_after ({start:g} s)")
    if kind is STATEMENT:
        for key in ("isolation", "release_when"):
            if key in item:
                check.add(item, key, join(sub, key), "does not apply to kind statement (its SQL runs in "
                                                     "autocommit; put BEGIN in it for a transaction)", of_key=True)
    return start, stop, times["at"]


def _observer_options(check: Checker, item, kind: BackgroundKind, sub: str) -> dict:
    """`options:` of an Extended Events session or a SQL Trace (other kinds take none)."""
    node = item.get("options")
    if node is None:
        return {}
    allowed = OBSERVER_OPTIONS.get(kind)
    if allowed is None:
        check.add(item, "options", join(sub, "options"), f"applies only to kinds {', '.join(OBSERVER_OPTIONS)}",
                  of_key=True)
        return {}
    if not isinstance(node, dict):
        check.add(item, "options", join(sub, "options"), f"must be a mapping, got {describe(node)}")
        return {}
    path = join(sub, "options")
    check.known_keys(node, path, allowed)
    if kind is BackgroundKind.XEVENTS and "target" in node and node["target"] not in [t.value for t in XeTarget]:
        check.add(node, "target", join(path, "target"), f"must be {' or '.join(XeTarget)}, got "
                                                        f"{describe(node['target'])}")
    if "no_event_loss" in node and not isinstance(node["no_event_loss"], bool):
        check.add(node, "no_event_loss", join(path, "no_event_loss"), "must be true or false")
    if "events" in node and (not isinstance(node["events"], list) or not node["events"]):
        check.add(node, "events", join(path, "events"), f"must be a non-empty list, got {describe(node['events'])}")
    return {str(k): (list(v) if isinstance(v, list) else v) for k, v in node.items() if k in allowed}
