"""`concurbench cluster start`: a scheduler and N load hosts on this machine, each in a process group of its
own, until stop() (SIGTERM or Ctrl-C at the command line), which ends every group and leaves no process.

The scheduler is the engine's own command; each host is `concurbench cluster join`, as a host on another
machine would be (it checks its version against the scheduler's, then becomes the engine's worker). Their
logs go to files in a directory of the cluster's own, removed at the end; the last lines of one are shown
when a part does not start.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..errors import RunError
from . import engine
from .hosts import workers_of

START_S = 60.0  # the longest wait for the scheduler's address, then for every host to join
STOP_S = 10.0  # after SIGTERM, the wait before a part's process group is killed


class LocalCluster:
    """A scheduler at `host`:`port` (0: a free one) and `hosts` load hosts named local-1, local-2, ..."""

    def __init__(self, hosts: int, *, host: str = "127.0.0.1", port: int = 0, tls: dict[str, str] | None = None,
                 python: str = sys.executable):
        self.count = hosts
        self.host = host
        self.port = port
        self.tls = tls
        self.python = python
        self.workdir = Path(tempfile.mkdtemp(prefix="concurbench-cluster-"))
        self.scheduler: subprocess.Popen | None = None
        self.hosts: dict[str, subprocess.Popen] = {}
        self.address = ""

    def start(self) -> str:
        """Start the scheduler and the hosts; the cluster's address once every host has joined (RunError, with
        the failing part's last log lines, otherwise; whatever started is stopped then)."""
        try:
            file = self.workdir / "scheduler.json"
            self.scheduler = self._spawn("scheduler", engine.scheduler_command(self.host, self.port, str(file),
                                                                                   self.tls))
            self.address = self._await_address(file)
            for i in range(1, self.count + 1):
                self.add_host(f"local-{i}")
            self._await_hosts()
            return self.address
        except BaseException:
            self.stop()
            raise

    def add_host(self, name: str, env: dict[str, str] | None = None) -> subprocess.Popen:
        """One more load host, `concurbench cluster join` in a process group of its own (`env`: its environment)."""
        command = [self.python, "-m", "concurbench.cli.main", "cluster", "join", self.address, "--name", name,
                   "--host", self.host, "--local-directory", str(self.workdir / name)]
        for key, value in (self.tls or {}).items():
            command += [f"--tls-{key}", value]
        proc = self.hosts[name] = self._spawn(name, command, env)
        return proc

    def _spawn(self, name: str, command: list[str], env: dict[str, str] | None = None) -> subprocess.Popen:
        log = open(self.workdir / f"{name}.log", "wb")  # noqa: SIM115 - the child keeps it; closed below
        try:
            return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True, env=env)
        finally:
            log.close()

    def log_tail(self, name: str, lines: int = 12) -> str:
        try:
            text = (self.workdir / f"{name}.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _await_address(self, file: Path) -> str:
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline:
            if self.scheduler.poll() is not None:
                raise RunError(f"the cluster's scheduler exited ({self.scheduler.returncode}) before it answered; "
                               f"its last log lines:\n{self.log_tail('scheduler')}")
            with contextlib.suppress(OSError, ValueError):
                return json.loads(file.read_text())["address"]
            time.sleep(0.05)
        raise RunError(f"the cluster's scheduler gave no address within {START_S:g} s; its last log lines:\n"
                       f"{self.log_tail('scheduler')}")

    def _await_hosts(self) -> None:
        client = engine.client(self.address)
        try:
            deadline = time.monotonic() + START_S
            while True:
                joined = set(workers_of(client).values())
                if joined >= set(self.hosts):
                    return
                for name, proc in self.hosts.items():
                    if proc.poll() is not None:
                        raise RunError(f"load host {name} exited ({proc.returncode}) before it joined; its last log "
                                       f"lines:\n{self.log_tail(name)}")
                if time.monotonic() > deadline:
                    late = sorted(set(self.hosts) - joined)
                    raise RunError(f"load hosts {', '.join(late)} did not join within {START_S:g} s; the last log "
                                   f"lines of {late[0]}:\n{self.log_tail(late[0])}")
                time.sleep(0.1)
        finally:
            client.close(timeout=engine.CONNECT_S)

    def ended(self) -> list[str]:
        """The parts that have exited, each with its exit status."""
        parts = [("scheduler", self.scheduler)] if self.scheduler is not None else []
        return [f"{name} ({proc.returncode})" for name, proc in [*parts, *self.hosts.items()] if proc.poll() is not None]

    def scheduler_ended(self) -> bool:
        return self.scheduler is not None and self.scheduler.poll() is not None

    def stop(self) -> None:
        """SIGTERM to every host's process group, then to the scheduler's (a host leaves while its scheduler still
        answers: at once), SIGKILL to a group still there after STOP_S; then the cluster's directory goes."""
        for parts in (list(self.hosts.values()), [self.scheduler] if self.scheduler is not None else []):
            for proc in parts:
                _signal_group(proc, signal.SIGTERM)
            deadline = time.monotonic() + STOP_S
            for proc in parts:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            for proc in parts:  # what is left of a group (the load's worker processes of a host) goes too
                _signal_group(proc, signal.SIGKILL)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=STOP_S)
        shutil.rmtree(self.workdir, ignore_errors=True)


def _signal_group(proc: subprocess.Popen, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)
