"""What the SQL Server observers share: their connection, the lock that keeps the end of the
measurement and `close()` apart, close-once bookkeeping, and small helpers (first lines of errors,
the first row of a batch, paths in the server's data directory, typed options).

The observers themselves are in `xevents.py` (Extended Events) and `sqltrace.py` (SQL Trace); both
are started before the measurement, stopped once the measurement window is closed and the samplers
have taken their last reading (`ends_after_samplers`), and stopped and dropped by `close()`, which
never raises and also runs after a failed start or an interrupted run.

The files they write on the server (.xel, .trc; bounded in size and number) are removed by `close()`
when the provisioner can remove files on the server (`remove_files`: a container concurbench runs);
on any other server they stay, and `describe()` lists them in `note` for the user to delete.

Each carries a dead-man switch, so a harness that is killed (SIGKILL, a lost connection, a crashed
machine) does not leave it capturing on the server: it ends by itself `lifetime_s` (the variant's
warm-up and duration, which the runner passes) plus MARGIN_S after it started (`stops_after_s`), the
trace by its @stoptime, the Extended Events session by MAX_DURATION where the server has it (SQL
Server 2025); what is left is found and removed by `concurbench gc --target dsn`.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Callable

from ..engines import sqlserver
from ..errors import ConfigError
from ..samplers.mssql_logic import check_name
from .base import close_quietly

LINUX_DATA_DIR = "/var/opt/mssql/data/"
MARGIN_S = 300  # the dead-man switch's margin past the window's planned end (connecting, the last readings)
_MAJOR = re.compile(r" - (\d+)\.\d+\.\d+")  # @@VERSION: "Microsoft SQL Server 2022 (RTM-CU15) ... - 16.0.4145.4"


def major_of(version: str | None) -> int | None:
    """The major version in @@VERSION's text (16 for 2022, 17 for 2025), or None."""
    m = _MAJOR.search(version or "")
    return int(m.group(1)) if m else None


def first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


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


class ServerObserver:
    """Connection, lock and close-once bookkeeping shared by both observers.

    `ends_after_samplers`: the runner ends the measurement for the samplers first and only then for
    this observer, so stopping it and counting what it captured (reading .xel files can take long)
    stays outside the samplers' span.
    """

    kind = ""
    ends_after_samplers = True
    DATA_DIR = "SELECT CAST(SERVERPROPERTY('InstanceDefaultDataPath') AS nvarchar(4000)) AS data_dir"
    SERVER = ("SELECT CAST(SERVERPROPERTY('EngineEdition') AS int) AS engine_edition, "
              "CAST(@@VERSION AS nvarchar(4000)) AS version")

    def __init__(self, spec, conninfo, *, connect: Callable | None = None,
                 clock: Callable[[], float] = time.time, remove_files: Callable[[list[str]], None] | None = None,
                 lifetime_s: float | None = None):
        self.spec = spec
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
            check_name(spec.name, "observer name")
        except ValueError as exc:
            raise ConfigError(str(exc)) from exc

    @property
    def stops_after_s(self) -> int:
        """Seconds after its start at which the observer stops by itself, whatever becomes of the harness."""
        return int(round((self.lifetime_s or 0) + MARGIN_S))

    def _open(self):
        self.conn = self._connect(self.conninfo, application_name=f"concurbench:observer:{self.spec.name}")
        self._touched = True
        return self.conn

    def _query_one(self, sql: str, *params):
        return self.conn.execute(sql, *params).fetchone()

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
        self.conn = self._connect(self.conninfo, application_name=f"concurbench:observer:{self.spec.name}:cleanup")

    def _teardown(self) -> None:
        raise NotImplementedError

    def window_set(self, measure_from_ns: int, planned_end_ns: int | None) -> None:
        pass
