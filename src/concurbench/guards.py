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

import psutil

from .errors import ConfigError, EngineError
from .scenario.model import Pool, Scenario, Variant
from .scenario.yamlpos import Checker, Problem, join

DEFAULT_MAX_CONNECTIONS = {"postgres": 100, "mssql": 32767}  # the servers' own defaults
SETTING = {"postgres": "max_connections", "mssql": "user connections"}
FDS_PER_SESSION = {"postgres": 1, "mssql": 3}  # a socket; pyodbc sessions add the pipe that wakes the loop
WORKER_BASE_FDS = 32  # a spawned worker holds 13 before its first session (measured); the rest is headroom
PARENT_BASE_FDS = 32  # 15 measured (admin and sampler connections come on top)
FDS_PER_WORKER = 4  # the parent's pipes and sentinel of each worker process
BACKEND_BYTES = 2 << 20
CONNECTION_BYTES = 64 << 10
HISTOGRAM_BYTES = 33792 * 8  # counts of an HdrHistogram(1 ns, 1 h, 3 digits), 8 bytes each
ZIPF_TABLE_LIMIT = 200_000  # workload.distributions draws larger ranges without a table
ZIPF_BYTES_PER_VALUE = 40  # a Python float and its place in a list
WORKER_BYTES = 40 << 20  # a worker process before its sessions
LOCAL_TARGETS = ("embedded", "binaries", "docker")  # the server's memory is this machine's too


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
    """The harness's connections beside the pools during a variant run."""
    background = sum(1 + (1 if b.release_when else 0) for b in variant.background)
    return {"admin": 1, "sampler": 1 if variant.samplers else 0, "background": background}


def sessions(variant: Variant, point: int | None) -> Sessions:
    return Sessions(variant, point, {p.name: p.clients_at(point) for p in variant.pools}, own_connections(variant))


def worst(variant: Variant) -> Sessions:
    """The sweep point that opens the most sessions."""
    return max((sessions(variant, point) for point in variant.sweep), key=lambda s: s.total)


# Limits -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ConnectionLimit:
    """How many connections a server gives the harness, and why that many."""

    allowed: int
    why: str  # "max_connections is 100 (the server's default)"


def configured_limit(scenario: Scenario, variant: Variant) -> ConnectionLimit | None:
    """The limit of a server concurbench starts, from the scenario's settings (the variant's first)."""
    name = SETTING.get(scenario.engine)
    settings = {**dict(scenario.settings), **dict(variant.settings)}
    default = DEFAULT_MAX_CONNECTIONS.get(scenario.engine)
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
        if dist.kind == "zipfian":
            n = int(dist.args[1]) - int(dist.args[0]) + 1
            tables += n * ZIPF_BYTES_PER_VALUE if n <= ZIPF_TABLE_LIMIT else 0
    return CONNECTION_BYTES + histograms * HISTOGRAM_BYTES + tables


# Checks -------------------------------------------------------------------------------------------

def check_scenario(scenario: Scenario, variants: list[Variant] | None = None, *, processes: int | None = None,
                   target: str = "embedded", fds: int | None = None, memory: int | None = None) -> None:
    """Raise a ConfigError (file, line, pool and limit) when a variant run would open more than the server
    or this machine can hold. `fds` and `memory` default to this machine's; tests pass small ones."""
    checker = Checker(scenario.path)
    fds = fd_limit() if fds is None else fds
    memory = available_memory() if memory is None else memory
    per_fd = FDS_PER_SESSION.get(scenario.engine, 1)
    for variant in variants if variants is not None else scenario.variants:
        need = worst(variant)
        where = _where(scenario, need)
        limit = configured_limit(scenario, variant) if target != "dsn" else None
        if limit is not None and need.total > limit.allowed:
            checker.problems.append(where(
                f"{_clients(need)} make {need.total:,} connections ({need.describe()}), more than the server "
                f"allows: {limit.why}; lower the clients or raise {SETTING[scenario.engine]}"))
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
        server = BACKEND_BYTES * need.total if target in LOCAL_TARGETS else 0
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
    "postgres": "SELECT current_setting('max_connections')::int AS max_connections, "
                "current_setting('superuser_reserved_connections')::int "
                "+ coalesce(current_setting('reserved_connections', true), '0')::int AS reserved, "
                "(SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser, "
                "(SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'client backend' "
                "AND pid <> pg_backend_pid())::int AS others",
    "mssql": "SELECT @@MAX_CONNECTIONS AS max_connections, 0 AS reserved, 1 AS superuser, "
             "(SELECT COUNT(*) FROM sys.dm_exec_sessions WHERE is_user_process = 1 AND session_id <> @@SPID) AS others",
}


def server_limit(engine: str, query) -> ConnectionLimit | None:
    """The connections a server gives the harness now; `query(sql)` returns rows as dicts. None when the
    server does not say (a view the harness's user may not read): then the load finds out."""
    try:
        rows = query(LIMIT_SQL[engine])
    except (EngineError, KeyError):
        return None
    if not rows:
        return None
    row = rows[0]
    total, reserved, others = int(row["max_connections"]), int(row["reserved"] or 0), int(row["others"] or 0)
    superuser = bool(row["superuser"])
    allowed = total - others - (0 if superuser else reserved)
    parts = [f"{SETTING[engine]} is {total:,}"]
    if reserved and not superuser:
        parts.append(f"{reserved} are reserved for superusers")
    parts.append(f"{others:,} {'is' if others == 1 else 'are'} in use by other sessions")
    return ConnectionLimit(allowed, ", ".join(parts))


def check_server(scenario: Scenario, variants: list[Variant], limit: ConnectionLimit, server: str) -> None:
    """Raise a one-paragraph ConfigError when a variant run needs more connections than the server gives.
    Variants with a max_connections of their own are left to check_scenario (the server restarts for them)."""
    name = SETTING.get(scenario.engine)
    over = [worst(v) for v in variants if name not in dict(v.settings)]
    over = [need for need in over if need.total > limit.allowed]
    if not over:
        return
    need = max(over, key=lambda s: s.total)
    others = f" ({len(over) - 1} other variant{'s' if len(over) > 2 else ''} too)" if len(over) > 1 else ""
    problem = _where(scenario, need)(
        f"{_clients(need)} make {need.total:,} connections ({need.describe()}), and the server at {server} gives "
        f"this run {max(limit.allowed, 0):,}: {limit.why}{others}. Lower the clients, or raise "
        f"{name} on the server")
    raise ConfigError(f"{problem}", problems=[problem])


def check_connected(scenario: Scenario, variants: list[Variant], query, server: str) -> None:
    """The connection check against a server the harness is connected to; `query(sql, what)` reads rows."""
    limit = server_limit(scenario.engine, lambda sql: query(sql, "reading the server's connection limit"))
    if limit is not None:
        check_server(scenario, variants, limit, server)
