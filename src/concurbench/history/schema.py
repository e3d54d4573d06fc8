"""The history store's tables, written once for SQLite and PostgreSQL, and the steps between versions.

    history_meta          key/value: `schema_version`
    history_runs          one row per run directory added (its RunRecord); `run_id` unique
    history_series        one row per series: scenario, variant, pool, clients, point, server, metric; unique
    history_points        one row per run and series: status, mean, its standard error and degrees of freedom
                          (or, for a claim's figure, the 95% interval its verdict gave), n, each repeat's value
    history_findings      one row per regression the gate found: the series (its key, with the line it runs
                          on: a track, a server version or every version), the first run after the change,
                          what moved and how sure, and its state (new, acknowledged, resolved) with who
                          acted, why and when
    history_expectations  changes announced before they are found: a commit or a server release whose
                          findings are acknowledged when they start at its first runs, with the reason
                          given, and when its window lapsed
    history_log           what people did to the store besides adding runs: relabelled runs, merged stores
                          (when, what, and the detail as JSON), so a merge can replay it

A store written by an older concurbench is brought up to SCHEMA_VERSION by MIGRATIONS, one step per
version, inside the transaction that first opens it; a newer store is refused. Version 1 keyed a
series without its client count (two client counts of one variant collided); version 2 keys it with
it and adds the findings and expectations. Version 3 keeps with each point the count and the
transactions it is out of (a rare event's rate is judged as a count with its exposure), with each run
the machine it ran on and how busy it was, the server settings in effect and its kind (a run of the
series, or a confirming run that never joins a series' level); with each finding its kind (a change
on a line, or an upgrade judged against the previous major), the runs its change could start at, its
present size, the thresholds it was found with and its confirmation; expectations say when their
window lapsed; and a log of relabelled runs and merged stores.
"""

from __future__ import annotations

SCHEMA_VERSION = 3

# where a series was measured: the columns a series and a finding share (the series then has its server,
# the finding the line its series runs on)
_WHERE = """    scenario TEXT NOT NULL,
    variant TEXT NOT NULL,
    pool TEXT NOT NULL,
    clients INTEGER NOT NULL,
    point INTEGER NOT NULL,
"""

_CORE = """
CREATE TABLE history_meta (
    key TEXT PRIMARY KEY,
    value TEXT NOT NULL
);
CREATE TABLE history_runs (
    id {serial},
    run_id TEXT NOT NULL UNIQUE,
    digest TEXT NOT NULL,
    scenario TEXT NOT NULL,
    scenario_sha256 TEXT NOT NULL,
    parameters TEXT NOT NULL,
    quick INTEGER NOT NULL,
    started TEXT NOT NULL,
    ended TEXT NOT NULL,
    status TEXT NOT NULL,
    error TEXT,
    host TEXT NOT NULL,
    cpu_model TEXT NOT NULL,
    harness TEXT NOT NULL,
    commit_id TEXT NOT NULL,
    dirty INTEGER,
    target TEXT NOT NULL,
    servers TEXT NOT NULL,
    format_version INTEGER NOT NULL,
    labels TEXT NOT NULL,
    added TEXT NOT NULL{runs_v3}
);
CREATE TABLE history_series (
    id {serial},
{where}    server TEXT NOT NULL,
    metric TEXT NOT NULL,
    UNIQUE (scenario, variant, pool, clients, point, server, metric)
);
CREATE TABLE history_points (
    run INTEGER NOT NULL REFERENCES history_runs (id),
    series INTEGER NOT NULL REFERENCES history_series (id),
    status TEXT NOT NULL,
    mean {real} NOT NULL,
    se {real},
    df {real},
    low {real},
    high {real},
    n INTEGER NOT NULL,
    vals TEXT NOT NULL{points_v3},
    PRIMARY KEY (series, run)
);
CREATE INDEX history_series_scenario ON history_series (scenario, metric);
CREATE INDEX history_runs_scenario ON history_runs (scenario, started);
"""


_FINDINGS = """
CREATE TABLE history_findings (
    id {serial},
{where}    line TEXT NOT NULL,
    metric TEXT NOT NULL,
    first_run INTEGER NOT NULL REFERENCES history_runs (id),
    before_run INTEGER NOT NULL REFERENCES history_runs (id),
    change {real},
    p {real} NOT NULL,
    before_mean {real} NOT NULL,
    before_low {real},
    before_high {real},
    before_n INTEGER NOT NULL,
    after_mean {real} NOT NULL,
    state TEXT NOT NULL,
    found TEXT NOT NULL,
    reason TEXT,
    acted TEXT,
    resolved_run INTEGER REFERENCES history_runs (id){findings_v3}
);
CREATE INDEX history_findings_series ON history_findings (scenario, metric, state);
CREATE TABLE history_expectations (
    id {serial},
    commit_id TEXT NOT NULL,
    release TEXT NOT NULL,
    reason TEXT NOT NULL,
    added TEXT NOT NULL{expectations_v3}
);
"""

# version 3: columns added to the tables above (ALTER TABLE ... ADD COLUMN for a store of version 2), and the log
_V3_COLUMNS = {
    "history_runs": ["machine TEXT NOT NULL DEFAULT '{{}}'", "settings TEXT NOT NULL DEFAULT '{{}}'",
                     "kind TEXT NOT NULL DEFAULT 'run'"],
    "history_points": ["count {real}", "exposure {real}"],
    "history_findings": ["kind TEXT NOT NULL DEFAULT 'change'", "first_low INTEGER REFERENCES history_runs (id)",
                         "first_high INTEGER REFERENCES history_runs (id)", "now_change {real}",
                         "now_run INTEGER REFERENCES history_runs (id)", "min_change {real}", "better TEXT",
                         "family TEXT NOT NULL DEFAULT ''", "alpha {real}", "baseline TEXT", "confirmation TEXT"],
    "history_expectations": ["lapsed TEXT"],
}
_LOG = """
CREATE TABLE history_log (
    id {serial},
    at TEXT NOT NULL,
    action TEXT NOT NULL,
    detail TEXT NOT NULL
);
"""


def _inline(table: str) -> str:
    """The version-3 columns of a table as they stand in its CREATE TABLE (after the columns before them)."""
    return "".join(f",\n    {c}" for c in _V3_COLUMNS[table])

_TABLES = _CORE + _FINDINGS + _LOG
_INLINE = {"runs_v3": _inline("history_runs"), "points_v3": _inline("history_points"),
           "findings_v3": _inline("history_findings"), "expectations_v3": _inline("history_expectations")}
_NONE = {name: "" for name in _INLINE}  # the tables as versions 1 and 2 made them


def _split(text: str) -> list[str]:
    return [s.strip() for s in text.split(";") if s.strip()]


DIALECTS = {
    "sqlite": {"serial": "INTEGER PRIMARY KEY AUTOINCREMENT", "real": "REAL", "where": _WHERE},
    "postgresql": {"serial": "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", "real": "DOUBLE PRECISION",
                   "where": _WHERE},
}

# 1 -> 2: the series' unique key gains the client count. SQLite cannot change a table's constraint, so the
# table is made again under the same ids (with foreign keys off while the store is opened, as SQLite's own
# procedure for changing a table says; the store checks them before it commits); PostgreSQL drops the old
# constraint, whatever it was named, and adds the new one.
_SERIES_KEY_SQLITE = [
    _CORE[_CORE.index("CREATE TABLE history_series"):_CORE.index("CREATE TABLE history_points")]
    .replace("history_series (", "history_series_v2 (", 1).rstrip().rstrip(";"),
    "INSERT INTO history_series_v2 (id, scenario, variant, pool, clients, point, server, metric) "
    "SELECT id, scenario, variant, pool, clients, point, server, metric FROM history_series",
    "DROP TABLE history_series",
    "ALTER TABLE history_series_v2 RENAME TO history_series",
    "CREATE INDEX history_series_scenario ON history_series (scenario, metric)",
]
_SERIES_KEY_POSTGRESQL = [
    "DO $$ DECLARE c text; BEGIN "
    "FOR c IN SELECT conname FROM pg_constraint WHERE conrelid = 'history_series'::regclass AND contype = 'u' LOOP "
    "EXECUTE 'ALTER TABLE history_series DROP CONSTRAINT ' || quote_ident(c); END LOOP; END $$",
    "ALTER TABLE history_series ADD UNIQUE (scenario, variant, pool, clients, point, server, metric)",
]

# 2 -> 3: the new columns (each with a default or nullable, so the rows of version 2 read as before) and the log.
_ADD_V3 = [f"ALTER TABLE {table} ADD COLUMN {column}" for table, columns in _V3_COLUMNS.items() for column in columns] \
    + _split(_LOG)

# MIGRATIONS[v][dialect] takes a store from version v to v + 1 (statements in the dialect's form, as _TABLES).
MIGRATIONS: dict[int, dict[str, list[str]]] = {
    1: {"sqlite": _SERIES_KEY_SQLITE + _split(_FINDINGS), "postgresql": _SERIES_KEY_POSTGRESQL + _split(_FINDINGS)},
    2: {"sqlite": _ADD_V3, "postgresql": _ADD_V3},
}


def create_statements(dialect: str) -> list[str]:
    """The statements that create the current schema in an empty database."""
    return [_format(s, dialect, _INLINE) for s in _split(_TABLES)]


def migration_statements(dialect: str, version: int) -> list[str]:
    """The statements of the step from `version` to `version + 1`."""
    return [_format(s, dialect, _NONE) for s in MIGRATIONS[version][dialect]]


def _format(statement: str, dialect: str, inline: dict[str, str]) -> str:
    """A statement in the dialect's form, with the version-3 columns `inline` names put in its tables."""
    words = DIALECTS[dialect]
    return statement.format(**words, **{name: text.format(**words) for name, text in inline.items()})
