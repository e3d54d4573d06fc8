"""What an engine is: the `Engine` protocol that postgres.py and sqlserver.py (modules) both meet.

The runner, the worker sessions, background sessions and probes call an engine only through these
names, and every engine has every one of them: a capability one engine lacks is there all the same,
doing nothing or saying there is nothing (`flush_statistics` on SQL Server, `configurator` on
PostgreSQL), so no caller asks an engine what it has. tests/unit/test_engine_protocol.py holds both
engines to it, names and parameters.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


@dataclass(frozen=True)
class ChangePolicy:
    """What a run may change on the server its provisioner gives (provisioners/base.py's `policy()`)."""

    owned: bool = True  # a server concurbench started: any setting, and restarts
    allow_server_changes: bool = False  # a server it does not own: server-wide changes, put back at the end
    as_is: bool = False  # --server-settings as-is: what cannot be changed is left and recorded
    owns_database: bool = True  # the run's database is concurbench's: database options may be set there
    drops_database: bool = False  # and it goes when the run ends, so its options need no putting back
    xe_without_max_duration: bool = False  # SQL Server 2019/2022 not owned: an XE session a kill would leave running


class Channel(Protocol):
    """A pool session's statements on one connection (workload/session.py drives it): `send` puts
    statement `index` on the wire; `receive` is None while the server works, then the outcome."""

    def fileno(self) -> int: ...

    def send(self, index: int, values: dict | None) -> None: ...

    def receive(self) -> Any: ...

    def in_transaction(self) -> bool: ...

    def broken(self) -> bool: ...

    def send_rollback(self) -> None: ...

    def cancel(self) -> None: ...

    def close(self) -> None: ...


class Configurator(Protocol):
    """Server and database options applied over a connection, and put back at the end (SQL Server's
    `sqlserver.Configurator`); `apply` and `after_restart` as the runner calls them around a restart."""

    def needs_restart(self, current: dict, wanted: dict) -> bool: ...

    def apply(self, conn: Any, server: dict, database: dict) -> bool: ...

    def after_restart(self, conn: Any) -> list[str]: ...

    def restore(self, conn: Any) -> list[str]: ...


class Engine(Protocol):
    """An engine module, as `registry.get_engine` returns it. `conn` is the engine's own connection (or the
    runner's AdminSession standing in for it)."""

    BEGIN: str  # the words an atomic pool wraps its statements in
    COMMIT: str

    def connect(self, conninfo: str, *, autocommit: bool = True, application_name: str = "concurbench",
                connect_timeout: int = 10) -> Any:
        """A connection; EngineError when none can be made."""

    def error_text(self, exc: BaseException) -> str:
        """The first line of a driver's error, in the server's words, for messages."""

    def is_connection_error(self, exc: BaseException) -> bool:
        """Whether a statement failed because the connection is gone."""

    def run_script(self, conn: Any, sql: str, origin: str = "inline", *, what: str = "setup SQL") -> None:
        """Setup or teardown SQL, statement by statement (or batch by batch); EngineError naming where."""

    def query_rows(self, conn: Any, sql: str, what: str) -> list[dict]:
        """Rows as JSON-ready dicts; EngineError naming `what`."""

    def server_info(self, conn: Any, names: list[str]) -> dict:
        """version, version_num, version_short and the named settings, read from the server."""

    def setting_differences(self, conn: Any, settings: dict, database: dict, *, allowed: bool) -> list[dict]:
        """The scenario's settings a server concurbench does not own does not match."""

    def settings_in_effect(self, conn: Any) -> dict[str, str] | None:
        """The server's settings that differ from its defaults, name -> value, read-only; None where the engine
        cannot tell a default from a setting."""

    def configurator(self, policy: ChangePolicy, conninfo: str) -> Configurator | None:
        """What applies the scenario's options over a connection, as far as `policy` lets it, or None where the
        provisioner alone sets them (PostgreSQL: a restart with the settings)."""

    def flush_statistics(self, conn: Any, version_num: int) -> None:
        """Before a window: have the server count this session's activity so far, so that the window does
        not (nothing to do where the server counts as it goes or cannot be asked)."""

    def statement_channel(self, conn: Any, statements: list[tuple[str, str]], params: Any,
                          protocol: str) -> Channel:
        """A pool session's channel for its statements."""

    def init(self, conn: Any, sql: str) -> None:
        """A pool's per-session statement (SET ..., a temp table), run once after connecting."""

    def execute(self, conn: Any, sql: str) -> None:
        """One statement, its results read and dropped."""

    def scalar(self, conn: Any, sql: str) -> Any:
        """The first column of the first row, or None."""

    def begin_isolated(self, conn: Any, isolation: str) -> None:
        """An explicit transaction at an isolation level (a background session's)."""

    def session_id(self, conn: Any) -> int:
        """The server's id of the connection's session (backend pid, @@SPID)."""

    def sessions_named(self, conn: Any, names: list[str]) -> int:
        """How many sessions other than this connection's have one of these application names (the ones the
        server still lists: a closed session's backend may still be ending)."""
