"""Helpers of the fault-injection tier (tests/faults): a run of the command, its processes, the server.

The tier: real runs of the `concurbench` command, hurt on purpose while they go.

Faults are injected from outside, as they happen to users: backends terminated with
pg_terminate_backend, processes killed with SIGKILL, Ctrl-C (SIGINT to the process group), a
postmaster stopped with SIGSTOP and woken with SIGCONT, a run directory on a file system that fills
up. Everything talks to loopback only, and every test is bounded: the command has a deadline, and
each test a pytest timeout.

Most runs use the dsn target against a server this module starts (`server`), so that after the run
the test can see the server itself: no session of the harness left, no transaction open. Every
process a run starts carries CONCURBENCH_TEST_TAG in its environment, so leftovers are found by it
and other runs on the machine are not counted.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
from pathlib import Path

import psutil
import psycopg
import pytest

from concurbench.provisioners.embedded import EmbeddedPostgres
from processes import is_worker
from waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]


class Run:
    """One `concurbench run` in a process group of its own, its stderr read line by line as it comes."""

    def __init__(self, args: list[str], cwd: Path, env: dict):
        self.tag = env["CONCURBENCH_TEST_TAG"]
        self.proc = subprocess.Popen([sys.executable, "-m", "concurbench.cli.main", "run", *args], cwd=cwd,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                     start_new_session=True)
        self.lines: list[str] = []
        self.out: list[str] = []
        self._readers = [threading.Thread(target=self._read, args=(stream, into), daemon=True)
                         for stream, into in ((self.proc.stderr, self.lines), (self.proc.stdout, self.out))]
        for reader in self._readers:
            reader.start()

    @staticmethod
    def _read(stream, into: list[str]) -> None:
        for line in stream:
            into.append(line)

    @property
    def stderr(self) -> str:
        return "".join(self.lines)

    def wait_for(self, pattern: str, timeout: float = 60) -> re.Match:
        """The first stderr line matching `pattern` (a regular expression); fails the test after `timeout`."""
        regex = re.compile(pattern)

        def found():
            return next((m for m in map(regex.search, list(self.lines)) if m), None)

        match = wait_until(found, timeout)
        assert match, f"no line matching {pattern!r} within {timeout} s:\n{self.stderr[-3000:]}"
        return match

    def interrupt(self) -> None:
        """Ctrl-C as a terminal sends it: SIGINT to the whole process group."""
        os.killpg(self.proc.pid, signal.SIGINT)

    def finish(self, timeout: float = 90) -> int:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=10)
            pytest.fail(f"the run did not end within {timeout} s:\n{self.stderr[-3000:]}")
        for reader in self._readers:
            reader.join(timeout=10)
        return self.proc.returncode

    @property
    def stdout(self) -> str:
        return "".join(self.out)

    @property
    def run_dir(self) -> Path:
        return Path(self.stdout.strip().splitlines()[-1])

    def manifest(self) -> dict:
        return json.loads((self.run_dir / "manifest.json").read_text())

    def summary(self) -> dict:
        return json.loads((self.run_dir / "summary.json").read_text())

    def children(self) -> list[psutil.Process]:
        try:
            return psutil.Process(self.proc.pid).children(recursive=True)
        except psutil.Error:
            return []

    def workers(self) -> list[psutil.Process]:
        """The worker processes of the variant run going on (found by their name)."""
        return [child for child in self.children() if is_worker(child)]


def dsn(server: "Server") -> list[str]:
    """The options that run against `server` as a dsn target."""
    return ["--target", "dsn", "--dsn", server.conninfo]


class Server:
    """The server the dsn runs go to, and what the tests look at on it."""

    def __init__(self, pg: EmbeddedPostgres, conninfo: str):
        self.pg = pg
        self.conninfo = conninfo

    @property
    def postmaster(self) -> int:
        return self.pg._postmaster_pid()

    def query(self, sql: str, *args):
        with psycopg.connect(self.conninfo, autocommit=True, application_name="faults:test") as conn:
            return conn.execute(sql, args or None).fetchall()

    def terminate(self, application_name: str) -> list[str]:
        """pg_terminate_backend on every session whose application_name matches (LIKE); returns their names."""
        rows = self.query("SELECT application_name, pg_terminate_backend(pid) FROM pg_stat_activity "
                          "WHERE application_name LIKE %s", application_name)
        return [r[0] for r in rows]

    def harness_sessions(self) -> list[tuple]:
        return self.query("SELECT application_name, state, xact_start IS NOT NULL FROM pg_stat_activity "
                          "WHERE application_name LIKE 'concurbench:%%'")

    def assert_nothing_left(self) -> None:
        """No session of the harness on the server, so no transaction of it open (backends end asynchronously)."""
        left = wait_until(lambda: not self.harness_sessions(), 15) or self.harness_sessions()
        assert left is True, f"sessions left on the server: {left}"
