"""The harness's own connection to a server: setup, probes, teardown, server facts, configuration.

It survives what the load sessions survive. Before each use it checks that its backend is still
there (one round trip); when the backend is gone (terminated, or the server restarted under it) it
connects again, once, and says so in `notes`. A failure on a live connection is the caller's error;
a connection that cannot be made again is an EngineError that says the admin connection was lost.
"""

from __future__ import annotations

from typing import Callable

from ..errors import EngineError

PING = "SELECT 1"


class AdminSession:
    def __init__(self, engine, conninfo: str, *, application_name: str = "concurbench:admin",
                 on_note: Callable[[str], None] | None = None):
        self.engine = engine
        self.conninfo = conninfo
        self.application_name = application_name
        self.notes: list[str] = []  # reconnections, for the variant run that follows
        self.on_note = on_note or (lambda text: None)  # and as they happen (a warning on the terminal)
        self.conn = engine.connect(conninfo, application_name=application_name)

    def call(self, fn: Callable, *args, **kwargs):
        """`fn(connection, *args, **kwargs)` on a live connection."""
        self.ensure()
        return fn(self.conn, *args, **kwargs)

    def run_script(self, sql: str, origin: str, what: str = "setup SQL") -> None:
        self.call(self.engine.run_script, sql, origin, what=what)

    def query_rows(self, sql: str, what: str) -> list[dict]:
        return self.call(self.engine.query_rows, sql, what)

    def ensure(self) -> None:
        """Reconnect once when the backend is gone."""
        try:
            self.engine.scalar(self.conn, PING)
            return
        except Exception as exc:  # noqa: BLE001 - any failure of a ping means the connection is not usable
            lost = self.engine.first_line(exc)
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
