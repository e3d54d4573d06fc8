"""A statement channel for drivers that only block (pyodbc), fitted to the worker's event loop.

The worker process steps its sessions from one epoll loop over sockets. A blocking driver has no
socket to wait on, so each session gets a thread that runs its statements one at a time and, when
one ends, writes a byte to a pipe: the pipe's read end is the session's file descriptor in the
loop, and the calls release the GIL while the server works. The channel keeps the same
interface as the PostgreSQL one: send(i, values), receive(), in_transaction(), broken(),
send_rollback(), cancel(), close().
"""

from __future__ import annotations

import os
import queue
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable

from .classes import CONNECTION, SUCCESS

_PARAM_REF = re.compile(r"(?<![:\w@]):([A-Za-z_][A-Za-z0-9_]*)\b")


@dataclass(frozen=True)
class Dialect:
    """What differs between drivers: placeholders, transaction words, error classes, cancelling."""

    marker: str  # the placeholder the driver takes: "?" for pyodbc, "%s" for psycopg
    begin: str
    commit: str
    rollback: str  # safe to send whatever the state (SQL Server: IF @@TRANCOUNT > 0 ROLLBACK)
    classify: Callable[[BaseException], str]
    error_key: Callable[[BaseException], str]
    cancel: Callable[[Any, Any], None]  # (connection, cursor): stop the running statement


def placeholders(sql: str, names, marker: str) -> tuple[str, tuple[str, ...]]:
    """Rewrite :name references (declared names only) as the driver's marker; return the argument order.

    A name used twice takes two arguments, as positional markers need."""
    order: list[str] = []

    def repl(match: re.Match) -> str:
        name = match.group(1)
        if name not in names:
            return match.group(0)
        order.append(name)
        return marker

    return _PARAM_REF.sub(repl, sql), tuple(order)


class BlockingChannel:
    def __init__(self, conn, statements: list[tuple[str, str]], params, dialect: Dialect):
        self.conn = conn
        self.dialect = dialect
        names = set(params)
        self.texts = [placeholders(sql, names, dialect.marker) for _name, sql in statements]
        self.cursor = conn.cursor()
        self._read, self._write = os.pipe()
        os.set_blocking(self._read, False)
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._outcome = SUCCESS
        self._open = False  # inside an explicit transaction, as far as we know
        self._broken = False
        self._busy = False
        self._thread = threading.Thread(target=self._work, name="concurbench-statement", daemon=True)
        self._thread.start()

    def fileno(self) -> int:
        return self._read

    def send(self, index: int, values: dict | None) -> None:
        text, order = self.texts[index]
        self._submit(text, [values[n] for n in order] if order else None)

    def _submit(self, text: str, args) -> None:
        self._busy = True
        self._jobs.put((text, args))

    def _work(self) -> None:
        cursor = self.cursor
        begin, commit, rollback = self.dialect.begin, self.dialect.commit, self.dialect.rollback
        while True:
            job = self._jobs.get()
            if job is None:
                return
            text, args = job
            try:
                if args is None:
                    cursor.execute(text)
                else:
                    cursor.execute(text, args)
                while True:  # read every result of the batch, as the PostgreSQL channel does
                    if cursor.description is not None:
                        cursor.fetchall()
                    if not cursor.nextset():
                        break
                if text == begin:
                    self._open = True
                elif text in (commit, rollback):
                    self._open = False
                outcome = SUCCESS
            except Exception as exc:  # noqa: BLE001 - every driver error becomes an outcome
                kind = self.dialect.classify(exc)
                self._open = text != rollback or self._open  # after an error, assume a transaction may be open
                if kind == CONNECTION:
                    self._broken = True
                outcome = (kind, self.dialect.error_key(exc))
            self._outcome = outcome
            try:
                os.write(self._write, b"x")
            except OSError:  # closed while the statement ran
                return

    def receive(self):
        """None while the statement runs; SUCCESS; or a (class, key) pair for a failure."""
        try:
            if not os.read(self._read, 1):
                return None
        except BlockingIOError:
            return None
        self._busy = False
        return self._outcome

    def in_transaction(self) -> bool:
        return self._open

    def broken(self) -> bool:
        return self._broken

    def send_rollback(self) -> None:
        self._submit(self.dialect.rollback, None)

    def cancel(self) -> None:
        try:
            self.dialect.cancel(self.conn, self.cursor)
        except Exception:  # noqa: BLE001 - best effort at shutdown
            pass

    def close(self) -> None:
        """Stop the thread; one still in a statement (its cancel did not end it) is not waited for."""
        self._jobs.put(None)
        self._thread.join(timeout=0 if self._busy else 5)
        if self._thread.is_alive():  # stuck in the driver: leave its pipe open rather than risk a reused fd
            return
        for fd in (self._read, self._write):
            try:
                os.close(fd)
            except OSError:
                pass
