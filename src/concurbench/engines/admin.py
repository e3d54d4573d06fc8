"""The harness's own connection to a server: setup, probes, teardown, server facts, configuration.

It survives what the load sessions survive. It stands in for the engine's connection (the engine's
functions take it as they take a connection: everything but `execute` goes to the connection
itself); when a statement fails because the connection is gone (its backend terminated, the server
restarted under it), it connects again, once, runs that statement again, and says so in `notes`.
A statement the server never ran (the connection was found gone when it was sent, or the backend
was terminated while it ran, which rolls it back) is safe to run again. A connection that cannot
be made again is an EngineError that says the admin connection was lost.
"""

from __future__ import annotations

from typing import Callable

from ..errors import EngineError
from .base import Engine


class AdminSession:
    def __init__(self, engine: Engine, conninfo: str, *, application_name: str = "concurbench:admin",
                 on_note: Callable[[str], None] | None = None):
        self.engine = engine
        self.conninfo = conninfo
        self.application_name = application_name
        self.notes: list[str] = []  # reconnections, for the variant run that follows
        self.on_note = on_note or (lambda text: None)  # and as they happen (a warning on the terminal)
        self.conn = engine.connect(conninfo, application_name=application_name)

    def execute(self, *args, **kwargs):
        try:
            return self.conn.execute(*args, **kwargs)
        except Exception as exc:  # noqa: BLE001 - only a lost connection is handled here; the rest is the caller's
            if not self._lost(exc):
                raise
            self._reconnect(self.engine.error_text(exc))
        return self.conn.execute(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self.conn, name)

    def _lost(self, exc: BaseException) -> bool:
        broken = getattr(self.conn, "broken", None)  # psycopg knows; for pyodbc the engine reads the error
        if broken is not None:
            return bool(broken or getattr(self.conn, "closed", False))
        return self.engine.is_connection_error(exc)

    def _reconnect(self, lost: str) -> None:
        self._close()
        try:
            self.conn = self.engine.connect(self.conninfo, application_name=self.application_name)
        except EngineError as exc:
            raise EngineError(f"the harness's admin connection was lost ({lost}) and could not be made again: "
                              f"{exc.message}", exc.cause) from exc
        self.notes.append(f"the admin connection was lost ({lost}) and made again")
        self.on_note(self.notes[-1])

    def take_notes(self) -> list[str]:
        notes, self.notes = self.notes, []
        return notes

    def _close(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - closing a broken connection
            pass

    def close(self) -> None:
        self._close()
