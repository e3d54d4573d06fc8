"""A harness in another process, talking to a SQL Server stand-in in the test's process, so that the harness can be
killed with SIGKILL as a user's is (an OOM kill, a `kill -9`), and what it left on the server looked at afterwards.

No SQL Server can run where concurbench is built. The stand-in (mssql_dsn_standin.StandInDsnServer) stays in the
test's process; `Harness` forks a child that runs concurbench's own code (the runner, the dsn provisioner, the
observers) with pyodbc replaced by connections that send each statement over a pipe to the test's process and take
the stand-in's answer back. The test's process registers each of the child's connections as a session of the
server (sys.dm_exec_sessions: program name, host, process id, database), and ends them when the child's end of the
pipe closes, as SQL Server ends the sessions of a client whose connection is gone. A child killed with SIGKILL
runs no cleanup: what it had made stays on the stand-in, as it would on a server.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import signal
import socket
import threading
from typing import Callable

from mssql_dsn_standin import StandInDsnServer
from mssql_standin import NoResultSet, StandInCursor, StandInSession, StandInSqlError

from concurbench.engines import odbc

_CONTEXT = multiprocessing.get_context("fork")
_SESSION_IDS = itertools.count(100)  # the server's session ids of the harnesses' connections


class Harness:
    """A child process running `body(ready)` against `server`; `ready()` tells the test the child got there."""

    def __init__(self, server: StandInDsnServer, body: Callable[[Callable[[], None]], None], lock: threading.Lock):
        self.server = server
        self.lock = lock  # one statement at a time on the stand-in, whichever harness sends it
        self.ready = threading.Event()
        self.error: str | None = None
        parent, child = _CONTEXT.Pipe()
        self.process = _CONTEXT.Process(target=_child, args=(child, body), daemon=True)
        self.process.start()
        child.close()
        self.pid = self.process.pid
        self.sessions: dict[int, tuple[object, StandInSession]] = {}
        self._thread = threading.Thread(target=self._serve, args=(parent,), daemon=True)
        self._thread.start()

    def kill(self) -> None:
        """SIGKILL, as a user's harness is killed: no cleanup runs; the server ends its sessions."""
        os.kill(self.pid, signal.SIGKILL)
        self.process.join(10)
        self._thread.join(10)
        assert not self._thread.is_alive(), "the stand-in did not see the killed harness's connections close"

    # -- the test's side ---------------------------------------------------------------------------------
    def _serve(self, pipe) -> None:
        try:
            while True:
                try:
                    request = pipe.recv()
                except (EOFError, OSError):
                    return
                with self.lock:
                    pipe.send(self._answer(request))
        finally:
            with self.lock:  # the client is gone: the server ends its sessions
                for _, session in self.sessions.values():
                    if session in self.server.sessions:
                        self.server.sessions.remove(session)
                self.sessions.clear()

    def _answer(self, request: tuple):
        kind = request[0]
        try:
            if kind == "ready":
                self.ready.set()
                return ("ok",)
            if kind == "failed":
                self.error = request[1]
                return ("ok",)
            if kind == "connect":
                conn = self.server.connect(request[1])
                pairs = {k.strip().upper(): v for k, v in odbc._split_conn(request[1])}
                number = next(_SESSION_IDS)
                session = StandInSession(number, conn.database, program=pairs.get("APP", ""), login="bench",
                                         host=socket.gethostname(), pid=self.pid)
                self.server.sessions.append(session)
                self.sessions[number] = (conn, session)
                return ("connected", number)
            if kind == "close":
                conn, session = self.sessions.pop(request[1], (None, None))
                if session in self.server.sessions:
                    self.server.sessions.remove(session)
                return ("ok",)
            conn, session = self.sessions[request[1]]
            cursor = conn.execute(request[2], *request[3])
            session.database = conn.database
            if isinstance(cursor, NoResultSet):
                return ("none",)
            columns = [d[0] for d in cursor.description] if cursor.description else None
            return ("rows", columns, cursor.fetchall() if columns else [])
        except StandInSqlError as exc:
            return ("error", exc.number, exc.args[1])
        except AssertionError as exc:  # a statement the stand-in does not know: the test fails on it
            self.error = f"{exc}"
            return ("error", 50000, f"stand-in: {exc}")


class RemoteStandIn:
    """Harnesses against one stand-in server (one lock for all of them)."""

    def __init__(self, server: StandInDsnServer):
        self.server = server
        self.lock = threading.Lock()

    def harness(self, body: Callable[[Callable[[], None]], None]) -> Harness:
        return Harness(self.server, body, self.lock)


# -- the child's side ------------------------------------------------------------------------------------
class _Link:
    def __init__(self, pipe):
        self.pipe = pipe
        self.lock = threading.Lock()

    def ask(self, *request):
        with self.lock:
            self.pipe.send(request)
            return self.pipe.recv()


class _RemoteConnection:
    def __init__(self, link: _Link, number: int):
        self.link, self.number, self.closed = link, number, False

    def execute(self, sql: str, *params):
        if self.closed:
            raise StandInSqlError(10054, "the connection is closed")
        answer = self.link.ask("execute", self.number, sql, params)
        if answer[0] == "error":
            raise StandInSqlError(answer[1], answer[2])
        if answer[0] == "none":
            return NoResultSet()
        return StandInCursor(answer[1], answer[2])

    def cursor(self):
        return self

    def rollback(self):
        pass

    def close(self):
        if not self.closed:
            self.closed = True
            self.link.ask("close", self.number)


def _child(pipe, body) -> None:
    link = _Link(pipe)

    def connect(conn_str: str, autocommit: bool = True, timeout: int = 10):
        answer = link.ask("connect", conn_str)
        if answer[0] == "error":
            raise StandInSqlError(answer[1], answer[2])
        return _RemoteConnection(link, answer[1])

    odbc.connect = connect
    from concurbench.running import servers
    servers.start_workers_early = lambda: None  # no fork server: the load is a stand-in too
    code = 0
    try:
        body(lambda: link.ask("ready"))
    except BaseException as exc:  # noqa: BLE001 - told to the test, which fails on it
        import traceback
        link.ask("failed", "".join(traceback.format_exception(exc)))
        code = 1
    finally:
        os._exit(code)
