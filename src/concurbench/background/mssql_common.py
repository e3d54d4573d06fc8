"""What the SQL Server observers share: their connection, the lock that keeps the end of the
measurement and `close()` apart, close-once bookkeeping, where they run (`ObserverScope`), and small
helpers (first lines of errors, the first row of a batch, paths in the server's data directory,
typed options).

The observers themselves are in `xevents.py` (Extended Events) and `sqltrace.py` (SQL Trace); both
are started before the measurement, stopped once the measurement window is closed and the samplers
have taken their last reading (`ends_after_samplers`), and stopped and dropped by `close()`, which
never raises and also runs after a failed start or an interrupted run.

Every name an observer makes carries the run's id (engines/mssql_names.py: the session
`concurbench_<run id>_<observer>`, the trace `concurbench-<run id>_<observer>-<time>.trc`, its
sessions' program `concurbench:observer:<run id>_<observer>`), so an observer starting up drops a
leftover of its own run only, never another run's.

On a server concurbench does not own (`ObserverScope.guest`: the dsn target) an observer captures only
the run's own database (the Extended Events session's predicate on `sqlserver.database_id`, the trace's
filter on DatabaseID), and its files are smaller (2 of 20 MB). Microsoft's "Query Profiling
Infrastructure" page says that query_post_execution_showplan and the Showplan XML trace events turn on
the standard profiling of every query of the server while they run, whatever a predicate keeps: the
filter limits what is captured and written, not what a running session costs the server's other
queries, which is why a session that a killed harness leaves must stop by itself.

The files they write on the server (.xel, .trc; bounded in size and number) are removed by `close()`
when the provisioner can remove files on the server (`remove_files`: a container concurbench runs);
on any other server they stay, and `describe()` lists them in `note` for the user to delete.

Each carries a dead-man switch, so a harness that is killed (SIGKILL, a lost connection, a crashed
machine) does not leave it capturing on the server: it ends by itself `lifetime_s` (the variant's
warm-up and duration, which the runner passes) plus MARGIN_S after it started (`stops_after_s`), the
trace by its @stoptime on every version, the Extended Events session by MAX_DURATION where the server has
it (SQL Server 2025). SQL Server 2019 and 2022 have no server-side limit for a session, so on a server
concurbench does not own an Extended Events observer starts there only when the user accepts that a kill
leaves it running (`ObserverScope.unbounded_xe`, --allow-xe-without-max-duration); what is left is found
and removed by the next run from the same machine, or by `concurbench gc --target dsn`.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from typing import Callable

from ..workload.events import Event
from ..engines.quoting import simple_name
from ..util import first_line
from ..engines import mssql_names as names
from ..engines import sqlserver
from ..errors import ConfigError, EngineError
from ..scenario.model import BackgroundKind
from .base import close_quietly

LINUX_DATA_DIR = "/var/opt/mssql/data/"
GUEST_FILE_SIZE_MB = 20  # the files of an observer on a server concurbench does not own: at most 2 of 20 MB
GUEST_FILES = 2
MARGIN_S = 300  # the dead-man switch's margin past the window's planned end (connecting, the last readings)
_MAJOR = re.compile(r" - (\d+)\.\d+\.\d+")  # @@VERSION: "Microsoft SQL Server 2022 (RTM-CU15) ... - 16.0.4145.4"


def major_of(version: str | None) -> int | None:
    """The major version in @@VERSION's text (16 for 2022, 17 for 2025), or None."""
    m = _MAJOR.search(version or "")
    return int(m.group(1)) if m else None


def connect_to_server(conninfo, application_name: str):
    return sqlserver.connect(conninfo, application_name=application_name)


def last_row(cur):
    """The first row of the first result set a batch returns (skipping row counts and empty sets)."""
    while True:
        if cur.description:
            return cur.fetchone()
        if not cur.nextset():
            return None


def join_path(directory: str, name: str) -> str:
    """`directory` + `name` with the directory's own separator (a Windows data path uses backslashes)."""
    sep = "\\" if ("\\" in directory and "/" not in directory) else "/"
    return directory.rstrip("/\\") + sep + name


def options_of(spec) -> dict:
    return dict(getattr(spec, "options", None) or {})


def positive_int(opts: dict, key: str, who: str, minimum: int = 1) -> int | None:
    value = opts.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{who}: {key} must be an integer of at least {minimum}, got {value!r}")
    return value


@dataclass(frozen=True)
class ObserverScope:
    """Where an observer runs: the run's id (in every name it makes), whether the server is one concurbench does not
    own (`guest`: the run's database only, small files), and whether the user accepted an Extended Events session
    that a kill would leave running there (`unbounded_xe`: SQL Server 2019 and 2022 have no MAX_DURATION)."""

    run_id: str = ""
    guest: bool = False
    unbounded_xe: bool = False


class ServerObserver:
    """Connection, lock and close-once bookkeeping shared by both observers.

    `ends_after_samplers`: the runner ends the measurement for the samplers first and only then for
    this observer, so stopping it and counting what it captured (reading .xel files can take long)
    stays outside the samplers' span.
    """

    kind: BackgroundKind | None = None  # each observer's own
    ends_after_samplers = True
    DATA_DIR = "SELECT CAST(SERVERPROPERTY('InstanceDefaultDataPath') AS nvarchar(4000)) AS data_dir"
    DATABASE_ID = "SELECT DB_ID() AS database_id"
    SERVER = ("SELECT CAST(SERVERPROPERTY('EngineEdition') AS int) AS engine_edition, "
              "CAST(@@VERSION AS nvarchar(4000)) AS version")

    def __init__(self, spec, conninfo, *, connect: Callable | None = None,
                 clock: Callable[[], float] = time.time, remove_files: Callable[[list[str]], None] | None = None,
                 lifetime_s: float | None = None, scope: ObserverScope | None = None):
        self.spec = spec
        self.scope = scope or ObserverScope()
        self.key = names.observer_key(self.scope.run_id, spec.name)  # in every name it makes on the server
        self.lifetime_s = lifetime_s  # how long the window it observes may last (None: a start and a stop)
        self.conninfo = conninfo
        self._connect = connect or connect_to_server
        self.clock = clock
        self.remove_files = remove_files
        self.files: dict = {}  # what became of the files written on the server, for describe()
        self.conn = None
        self.error: str | None = None
        self.closed = False
        self._touched = False  # we reached the server: close() must look for what to drop
        self._lock = threading.Lock()
        try:
            simple_name(spec.name, "observer name")
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc

    @property
    def stops_after_s(self) -> int:
        """Seconds after its start at which the observer stops by itself, whatever becomes of the harness."""
        return int(round((self.lifetime_s or 0) + MARGIN_S))

    def _open(self):
        self.conn = self._connect(self.conninfo, application_name=names.observer_program(self.key))
        self._touched = True
        return self.conn

    def _query_one(self, sql: str, *params):
        return self.conn.execute(sql, *params).fetchone()

    def _database_id(self) -> int:
        """The id of the connection's database (the run's): what a guest's observer captures."""
        row = self._query_one(self.DATABASE_ID)
        if not row or row[0] is None:
            raise EngineError(f"{self.kind} {self.spec.name}: the server did not say the id of the run's database")
        return int(row[0])

    def _data_dir(self) -> str:
        row = self._query_one(self.DATA_DIR)
        path = row[0] if row else None
        return path or LINUX_DATA_DIR

    def close(self) -> None:
        """Stop and drop whatever this observer made; never raises; a second call does nothing."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            if self._touched:
                failure = None
                for attempt in (0, 1):  # the second time on a fresh connection (ours may have died)
                    try:
                        if attempt == 1 or self.conn is None:
                            self._reconnect()
                        self._teardown()
                        failure = None
                        break
                    except Exception as exc:  # noqa: BLE001 - close must not raise
                        failure = exc
                if failure is not None:
                    self.error = "; ".join(filter(None, (self.error, f"cleanup: {first_line(failure)}")))
                self._release_files()
            close_quietly(self.conn)
            self.conn = None

    def _release_files(self) -> None:
        """Remove the files this observer wrote (when the provisioner can), or list them for the user."""
        patterns = self.written()
        if not patterns:
            return
        self.files = {"files": patterns, "files_removed": False}
        if self.remove_files is not None:
            try:
                self.remove_files(patterns)
                self.files["files_removed"] = True
                return
            except Exception as exc:  # noqa: BLE001 - close must not raise
                self.error = "; ".join(filter(None, (self.error, f"removing files: {first_line(exc)}")))
        self.files["note"] = (f"left {', '.join(patterns)} on the server; delete these files when you no longer "
                              f"need them")

    def written(self) -> list[str]:
        """Patterns (`*` as wildcard) of the files written on the server; none by default."""
        return []

    def _reconnect(self) -> None:
        close_quietly(self.conn)
        self.conn = None
        self.conn = self._connect(self.conninfo, application_name=names.observer_program(self.key) + ":cleanup")

    def _teardown(self) -> None:
        raise NotImplementedError

    def timeline(self) -> list[Event]:
        return []  # an observer records no events of its own

    def window_set(self, measure_from_ns: int, planned_end_ns: int | None) -> None:
        pass
