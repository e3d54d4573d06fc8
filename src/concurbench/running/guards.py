"""Resource guards: what a variant run opens, checked against what the server and this machine hold.

`check_scenario` runs before any connection, from the scenario alone (also in `validate`);
`check_server` runs once a server is up, with the server's own figures. Three limits:

- connections: every session of a variant run (each pool's clients at the sweep point, the
  background sessions, the samplers' connection and the harness's admin connection) against the
  server's connection limit: for a server concurbench starts, the scenario's max_connections (the
  server's default, 100, when unset); once connected, the server's own value, less the slots
  reserved for superusers when the harness is not one, less the sessions others have open;
- file descriptors: the sessions of the busiest worker process (sessions are dealt round-robin over
  the worker processes, one per CPU unless --processes) and the parent's own, against the limit
  every process inherits (`ulimit -n`);
- memory: an estimate per session on both sides, the harness's session and (when the server runs
  on this machine) its backend, against the memory available now.

The figures were measured with benchmarks/session_memory.py (PostgreSQL 18.6, 100 sessions of the
row-lock transaction, zipfian keys over 100,000 rows), as memory a process holds of its own (USS):
a server backend held 1.33 MiB on average and 1.52 MiB at most, so 2 MiB is counted; a harness
session held 5.2 MiB, which its parts add up to: one HdrHistogram per statement and one per
transaction (264 KiB each: 1 ns to 1 h at 3 significant digits), a zipfian parameter's table of
cumulative weights (40 bytes per value measured, a float and its place in a list; ranges over
200,000 values draw without a table), and the connection with the session's own objects (31 KiB
measured with a one-statement pool; 64 KiB counted). A worker process itself, once it has imported
what it needs, held 31 to 33 MiB: 40 MiB is counted for each.
"""

from __future__ import annotations

import math
import os
import resource
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import psutil

from ..engines.registry import spec
from ..errors import ConfigError, EngineError
from ..scenario.distributions import ZIPFIAN
from ..scenario.model import BackgroundKind, Pool, Scenario, Variant
from ..scenario.yamlpos import Checker, Problem, join

if TYPE_CHECKING:  # the registry imports every target's code; the guards need only what a spec says
    from ..provisioners.registry import TargetSpec

WORKER_BASE_FDS = 32  # a spawned worker holds 13 before its first session (measured); the rest is headroom
PARENT_BASE_FDS = 32  # 15 measured (admin and sampler connections come on top)
FDS_PER_WORKER = 4  # the parent's pipes and sentinel of each worker process
BACKEND_BYTES = 2 << 20
CONNECTION_BYTES = 64 << 10
HISTOGRAM_BYTES = 33792 * 8  # counts of an HdrHistogram(1 ns, 1 h, 3 digits), 8 bytes each
ZIPF_TABLE_LIMIT = 200_000  # workload.distributions draws larger ranges without a table
ZIPF_BYTES_PER_VALUE = 40  # a Python float and its place in a list
WORKER_BYTES = 40 << 20  # a worker process before its sessions


@dataclass(frozen=True)
class Sessions:
    """What one variant run opens: each pool's sessions, and the harness's own connections."""

    variant: Variant
    point: int | None
    pools: dict[str, int]
    own: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.pools.values()) + sum(self.own.values())

    @property
    def clients(self) -> int:
        return sum(self.pools.values())

    @property
    def biggest(self) -> str:
        """The pool with the most sessions: the one to point at."""
        return max(self.pools, key=lambda name: self.pools[name])

    def describe(self) -> str:
        own = ", ".join(f"{n} {what}" for what, n in self.own.items() if n)
        pools = ", ".join(f"{name}: {n:,}" for name, n in self.pools.items())
        return f"pool{'s' if len(self.pools) > 1 else ''} {pools}" + (f"; the harness's own: {own}" if own else "")


def own_connections(variant: Variant) -> dict[str, int]:
    """The harness's connections beside the pools during a variant run: its control (admin) connection, the
    samplers' one, and the background sessions' and observers': a held transaction and its release_when
    poller, a timed statement and the connection that reads its waits, one for a log drain or a trace."""
    background = sum(2 if b.kind is BackgroundKind.STATEMENT else 1 + (1 if b.release_when else 0)
                     for b in variant.background)
    return {"admin": 1, "sampler": 1 if variant.samplers else 0, "background": background}


def sessions(variant: Variant, point: int | None) -> Sessions:
    return Sessions(variant, point, {p.name: p.clients_at(point) for p in variant.pools}, own_connections(variant))


def worst(variant: Variant) -> Sessions:
    """The sweep point that opens the most sessions."""
    return max((sessions(variant, point) for point in variant.sweep), key=lambda s: s.total)


# Limits -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ConnectionLimit:
    """How many connections a server gives the harness, why that many, and what raises it."""

    allowed: int
    why: str  # "max_connections is 100 (the server's default)"
    fix: str = ""  # "raise max_connections on the server"


def configured_limit(scenario: Scenario, variant: Variant) -> ConnectionLimit | None:
    """The limit of a server concurbench starts, from the scenario's settings (the variant's first)."""
    name = spec(scenario.engine).connection_setting
    settings = {**dict(scenario.settings), **dict(variant.settings)}
    default = spec(scenario.engine).default_connections
    if name not in settings:
        return ConnectionLimit(default, f"{name} is {default:,} (the server's default)") if default else None
    try:
        value = int(str(settings[name]).strip())
    except ValueError:
        return None  # the server refuses it at start, with its own message
    if value <= 0:  # SQL Server: 0 means its maximum
        return ConnectionLimit(default, f"{name} is {value} (the server's maximum, {default:,})") if default else None
    where = "the variant's server.settings" if name in dict(variant.settings) else "server.settings"
    return ConnectionLimit(value, f"{name} is {value:,} ({where})")


def fd_limit() -> int:
    """The soft limit on open files every process of the run inherits."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 30


def available_memory() -> int:
    return psutil.virtual_memory().available


def workers(processes: int | None, clients: int) -> int:
    """Worker processes a run with this many pool sessions starts (as LoadGenerator decides)."""
    return max(1, min(processes or os.cpu_count() or 1, clients))


def harness_bytes(pool: Pool) -> int:
    """Memory one session of this pool holds in its worker process."""
    histograms = len(pool.statement_names) + 1
    tables = 0
    for _name, dist in pool.params:
        if dist.kind is ZIPFIAN:
            n = int(dist.args[1]) - int(dist.args[0]) + 1
            tables += n * ZIPF_BYTES_PER_VALUE if n <= ZIPF_TABLE_LIMIT else 0
    return CONNECTION_BYTES + histograms * HISTOGRAM_BYTES + tables


# Checks -------------------------------------------------------------------------------------------

def check_scenario(scenario: Scenario, variants: list[Variant] | None = None, *, processes: int | None = None,
                   target: TargetSpec | None = None, fds: int | None = None, memory: int | None = None) -> None:
    """Raise a ConfigError (file, line, pool and limit) when a variant run would open more than the server
    or this machine can hold. `target` says whose the server is and where it runs (None: a server concurbench
    starts on this machine, as the default target does); `fds` and `memory` default to this machine's; tests
    pass small ones."""
    owned = target is None or target.owns_server
    local = target is None or target.on_this_machine
    checker = Checker(scenario.path)
    fds = fd_limit() if fds is None else fds
    memory = available_memory() if memory is None else memory
    per_fd = spec(scenario.engine).fds_per_session
    for variant in variants if variants is not None else scenario.variants:
        need = worst(variant)
        where = _where(scenario, need)
        limit = configured_limit(scenario, variant) if owned else None
        if limit is not None and need.total > limit.allowed:
            checker.problems.append(where(
                f"{_clients(need)} make {need.total:,} connections ({need.describe()}), more than the server "
                f"allows: {limit.why}; lower the clients or raise {spec(scenario.engine).connection_setting}"))
        n_workers = workers(processes, need.clients)
        per_worker = math.ceil(need.clients / n_workers)
        worker_fds = WORKER_BASE_FDS + per_fd * per_worker
        parent_fds = PARENT_BASE_FDS + per_fd * sum(need.own.values()) + FDS_PER_WORKER * n_workers
        if worker_fds > fds:
            checker.problems.append(where(
                f"{_clients(need)} over {n_workers} worker process{'es' if n_workers > 1 else ''} are up to "
                f"{per_worker:,} sessions in one process, which needs {worker_fds:,} open files, and a process "
                f"may open {fds:,} (ulimit -n); raise the limit (ulimit -n {worker_fds}), use more worker "
                f"processes (--processes), or lower the clients"))
        elif parent_fds > fds:
            checker.problems.append(where(
                f"{n_workers} worker processes need {parent_fds:,} open files in the harness's own process, and a "
                f"process may open {fds:,} (ulimit -n); raise the limit or use fewer worker processes (--processes)"))
        harness = sum(harness_bytes(p) * need.pools[p.name] for p in variant.pools) + n_workers * WORKER_BYTES
        server = BACKEND_BYTES * need.total if local else 0
        if harness + server > memory:
            sides = f"{_size(harness)} in the harness" + (f" and {_size(server)} of server backends ({_size(BACKEND_BYTES)} "
                                                           f"each)" if server else "")
            checker.problems.append(where(
                f"{_clients(need)} need about {_size(harness + server)} of memory ({sides}), more than the "
                f"{_size(memory)} available on this machine; lower the clients"))
    checker.fail()


def _clients(need: Sessions) -> str:
    text = f"{need.clients:,} client{'s' if need.clients != 1 else ''}"
    return text + (f" (sweep point {need.point})" if need.point is not None and len(need.variant.sweep) > 1 else "")


def _where(scenario: Scenario, need: Sessions):
    """A function making the Problem for this variant run, placed at its biggest pool's `clients`."""
    path = join(join(join("variants", need.variant.name), "pools"), need.biggest)
    field_path = join(path, "clients")
    line, col = (scenario.extras.get("positions") or {}).get(field_path, (1, 1))
    return lambda message: Problem(str(scenario.path), line, col, field_path, message)


def _size(n: float) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:,.1f} {unit}"
    return f"{n:.0f} B"


# Once connected ------------------------------------------------------------------------------------

LIMIT_SQL = {
    # superuser_reserved_connections are kept from roles that are not superusers, reserved_connections (16 and
    # later) from those without pg_use_reserved_connections; CONNECTION LIMIT of the role and the database binds
    # all but superusers. Sessions of other roles show no backend_type to a role without pg_read_all_stats:
    # those with a database are counted as connections ("hidden").
    "postgres": "SELECT current_setting('max_connections')::int AS max_connections, "
                "current_setting('superuser_reserved_connections')::int AS superuser_reserved, "
                "coalesce(current_setting('reserved_connections', true), '0')::int AS reserved, "
                "r.rolsuper AS superuser, r.rolname AS role, r.rolconnlimit AS role_limit, "
                "coalesce((SELECT pg_has_role(current_user, oid, 'MEMBER') FROM pg_roles "
                "WHERE rolname = 'pg_use_reserved_connections'), false) AS uses_reserved, "
                "d.datname AS database, d.datconnlimit AS database_limit, "
                "(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                "AND pid <> pg_backend_pid())::int AS others, "
                "(SELECT count(*) FROM pg_stat_activity WHERE backend_type IS NULL "
                "AND datid IS NOT NULL)::int AS hidden, "
                "(SELECT count(*) FROM pg_stat_activity WHERE usesysid = r.oid AND backend_type = 'client backend' "
                "AND pid <> pg_backend_pid())::int AS role_sessions, "
                "(SELECT count(*) FROM pg_stat_activity WHERE datid = d.oid AND pid <> pg_backend_pid() "
                "AND (backend_type = 'client backend' OR backend_type IS NULL))::int AS database_sessions "
                "FROM pg_roles r, pg_database d WHERE r.rolname = current_user AND d.datname = current_database()",
    # @@MAX_CONNECTIONS is `user connections` (32,767 when 0); without VIEW SERVER STATE a login sees only its
    # own sessions, and sys.dm_os_sys_info (the workers `max worker threads` gives) not at all
    "mssql": "SELECT @@MAX_CONNECTIONS AS max_connections, HAS_PERMS_BY_NAME(NULL, NULL, 'VIEW SERVER STATE') "
             "AS sees_all, (SELECT COUNT(*) FROM sys.dm_exec_sessions WHERE is_user_process = 1 "
             "AND session_id <> @@SPID) AS others",
}
MSSQL_WORKERS_SQL = "SELECT max_workers_count FROM sys.dm_os_sys_info"


def server_limit(engine: str, query) -> ConnectionLimit | None:
    """The connections a server gives the harness now; `query(sql)` returns rows as dicts. None when the
    server does not say (a view the harness's user may not read): then the load finds out."""
    try:
        rows = query(LIMIT_SQL[engine])
    except (EngineError, KeyError):
        return None
    if not rows:
        return None
    return LIMIT_OF[engine](rows[0], query)


def _in_use(n: int) -> str:
    return f"{n:,} {'is' if n == 1 else 'are'} in use by other sessions"


def _postgres_limit(row: dict, query=None) -> ConnectionLimit:
    total, superuser = int(row["max_connections"]), bool(row["superuser"])
    kept = 0 if superuser else int(row["superuser_reserved"] or 0) + (
        0 if row.get("uses_reserved") else int(row.get("reserved") or 0))
    others, hidden = int(row["others"] or 0), int(row.get("hidden") or 0)
    parts = [f"max_connections is {total:,}"] + ([f"{kept} are reserved for superusers"] if kept else [])
    parts.append(_in_use(others + hidden) + (f" ({hidden:,} of other roles whose kind this role may not see, "
                                             f"pg_read_all_stats, counted as connections)" if hidden else ""))
    limits = [ConnectionLimit(total - kept - others - hidden, ", ".join(parts), "raise max_connections on the server")]
    for what, key, name in (("role", "role_limit", "role"), ("database", "database_limit", "database")):
        limit = row.get(key)
        if limit is None or int(limit) < 0 or superuser:
            continue
        open_ = int(row.get(f"{what}_sessions") or 0)
        limits.append(ConnectionLimit(int(limit) - open_, f"{what} {row[name]} has CONNECTION LIMIT {int(limit):,} "
                                      f"and {open_:,} other session{'s' if open_ != 1 else ''} open",
                                      f"ALTER {what.upper()} {row[name]} CONNECTION LIMIT <more> (or -1)"))
    return _tightest(limits)


def _mssql_limit(row: dict, query) -> ConnectionLimit:
    total, others = int(row["max_connections"]), int(row["others"] or 0)
    sees = bool(row.get("sees_all"))
    limits = [ConnectionLimit(total - others, f"user connections allows {total:,}, " + (
        _in_use(others) if sees else "sessions of other logins unknown (VIEW SERVER STATE)"),
        "raise `user connections` (sp_configure; it takes a restart)")]
    try:
        workers = query(MSSQL_WORKERS_SQL)
    except EngineError:
        workers = []
    if workers:
        n = int(workers[0]["max_workers_count"])
        limits.append(ConnectionLimit(n, f"max worker threads gives {n:,} workers, so at most {n:,} requests run "
                                         f"at once", "raise `max worker threads` (sp_configure)"))
    else:
        limits[0] = ConnectionLimit(limits[0].allowed, limits[0].why + "; max worker threads unknown (VIEW SERVER "
                                    "STATE)", limits[0].fix)
    return _tightest(limits)


LIMIT_OF = {"postgres": _postgres_limit, "mssql": _mssql_limit}  # the limit from LIMIT_SQL's row, by engine


def _tightest(limits: list[ConnectionLimit]) -> ConnectionLimit:
    """The smallest limit, saying every one (the binding one first) and how to raise the binding one."""
    limits = sorted(limits, key=lambda limit: limit.allowed)
    return ConnectionLimit(limits[0].allowed, "; ".join(limit.why for limit in limits), limits[0].fix)


def check_server(scenario: Scenario, variants: list[Variant], limit: ConnectionLimit, server: str) -> None:
    """Raise a one-paragraph ConfigError when a variant run needs more connections than the server gives.
    Variants with a max_connections of their own are left to check_scenario (the server restarts for them)."""
    name = spec(scenario.engine).connection_setting
    over = [worst(v) for v in variants if name not in dict(v.settings)]
    over = [need for need in over if need.total > limit.allowed]
    if not over:
        return
    need = max(over, key=lambda s: s.total)
    others = f" ({len(over) - 1} other variant{'s' if len(over) > 2 else ''} too)" if len(over) > 1 else ""
    problem = _where(scenario, need)(
        f"{_clients(need)} make {need.total:,} connections ({need.describe()}), and the server at {server} gives "
        f"this run {max(limit.allowed, 0):,}: {limit.why}{others}. Nothing was run or changed on the server. Lower "
        f"the clients, or {limit.fix or f'raise {name} on the server'}")
    raise ConfigError(f"{problem}", problems=[problem])


def check_connected(scenario: Scenario, variants: list[Variant], query, server: str) -> None:
    """The connection check against a server the harness is connected to; `query(sql, what)` reads rows."""
    limit = server_limit(scenario.engine, lambda sql: query(sql, "reading the server's connection limit"))
    if limit is not None:
        check_server(scenario, variants, limit, server)


@dataclass(frozen=True)
class Capacity:
    """What the probe reports of the connections: `fits` (None: the server did not say), in words, and the fix."""

    fits: bool | None
    says: str
    fix: str = ""


def capacity(scenario: Scenario, variants: list[Variant], query, *, owned: bool) -> Capacity:
    """The most connections a variant run opens at once against what the server gives: for a server concurbench
    starts, the scenario's max_connections (the server is started with it, or with the server's default); for
    one it does not own, what the server says now (server_limit). `query(sql)` reads rows."""
    if not variants:
        return Capacity(True, "no variant to run")
    need = max((worst(v) for v in variants), key=lambda s: s.total)
    head = f"{need.total:,} at most ({need.variant.name}, {_clients(need)}: {need.describe()})"
    if owned:
        pairs = [(worst(v), configured_limit(scenario, v)) for v in variants]
        over = [(n, limit) for n, limit in pairs if limit is not None and n.total > limit.allowed]
        if over:
            n, limit = max(over, key=lambda pair: pair[0].total)
            return Capacity(False, f"{n.total:,} needed ({n.variant.name}, {_clients(n)}: {n.describe()}); the run "
                                   f"starts the server with {limit.why}",
                            f"lower the clients or raise {spec(scenario.engine).connection_setting}")
        limit = dict((n.variant.name, limit) for n, limit in pairs)[need.variant.name]
        if limit is None:
            return Capacity(None, f"{head}; the server's limit is not known before it starts")
        return Capacity(True, f"{head}; the run starts the server with {limit.why}")
    limit = server_limit(scenario.engine, query)
    if limit is None:
        return Capacity(None, f"{head}; the server's limit could not be read, so the load will find out")
    name = spec(scenario.engine).connection_setting
    checked = [worst(v) for v in variants if name not in dict(v.settings)]
    if checked and max(n.total for n in checked) > limit.allowed:
        return Capacity(False, f"{head}, and the server gives this run {max(limit.allowed, 0):,}: {limit.why}",
                        f"lower the clients, or {limit.fix}")
    return Capacity(True, f"{head}; the server gives this run {limit.allowed:,}: {limit.why}")
