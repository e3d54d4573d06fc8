"""Clean up after killed runs: servers whose owner process is gone, containers, half-written caches.

A run that is killed (SIGKILL, a crashed terminal, an OOM kill) cannot stop its server: the server
runs in a session of its own and outlives the Python process. Every local server has a state file,
`home_dir()/servers/<run_id>/state.json`, naming the process that owns it; `collect()` stops the
servers whose owner is gone (pg_ctl stop -m fast as the server's user, then a kill if the postmaster
is still there) and removes their directories. Servers of live runs are left alone unless forced.
Containers (labelled concurbench.run_id by the docker target) go the same way when a label names
their owner process (concurbench.owner_pid, and concurbench.host when the engine is shared) and it
is gone; a container without an owner label may belong to a live run and is only removed when forced.
Runs killed without ending are named with what of them finished (liveruns.py); their run directories
stay. Nothing here prints: the CLI shows the returned actions.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import time
from dataclasses import dataclass, field
from enum import StrEnum
from datetime import datetime, timezone
from pathlib import Path

import psutil

from ..running import liveruns
from ..errors import ConcurbenchError
from ..provisioners import docker_engine
from ..provisioners.base import home_dir
from ..provisioners.containers import LABEL_RUN
from ..provisioners.local import LocalPostgres

STALE_STAGING_S = 3600  # a download or initdb left half-done this long ago belongs to no live run


@dataclass(frozen=True)
class ServerState:
    """One server directory under home_dir()/servers, as its state file describes it."""

    run_id: str
    root: Path
    state: dict
    owner_alive: bool
    postmaster_pid: int | None
    postmaster_alive: bool

    @property
    def orphaned(self) -> bool:
        return not self.owner_alive

    def describe(self) -> str:
        kind = self.state.get("kind", "server")
        port = self.state.get("port")
        owner = self.state.get("owner_pid")
        parts = [f"{kind}", f"port {port}" if port else "no port yet",
                 f"owner pid {owner} {'running' if self.owner_alive else 'gone'}"]
        if self.postmaster_pid:
            parts.append(f"postmaster {self.postmaster_pid} {'running' if self.postmaster_alive else 'gone'}")
        return ", ".join(parts)


class GcOutcome(StrEnum):
    """What gc did about one thing (the words it prints)."""

    REMOVED = "removed"
    WOULD_REMOVE = "would remove"  # --dry-run, or a dsn server's leftover without --yes
    LEFT_ALONE = "left alone"
    FAILED = "failed"
    KILLED = "killed"  # a run: its process ended without finishing it
    BY_HAND = "left for an administrator"  # what only an administrator on the server can remove


@dataclass
class Action:
    kind: str      # server, container, staging, run
    name: str
    detail: str
    outcome: GcOutcome
    notes: list[str] = field(default_factory=list)


def _process(pid: int | None, created_before: float | None = None) -> psutil.Process | None:
    """The live process with this pid; None when gone, a zombie, or a newer process reusing the pid."""
    if not pid:
        return None
    try:
        proc = psutil.Process(int(pid))
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        if created_before is not None and proc.create_time() > created_before + 1:
            return None
        return proc
    except (psutil.Error, ValueError):
        return None


def _postmaster(pid: int | None, data: str) -> psutil.Process | None:
    """The postmaster process, only if it really is a server on this data directory."""
    proc = _process(pid)
    if proc is None:
        return None
    try:
        cmdline = " ".join(proc.cmdline())
    except psutil.Error:
        return None
    return proc if data and data in cmdline else None


def _pid_file(data: Path) -> int | None:
    try:
        return int((data / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def find_servers(home: Path | None = None) -> list[ServerState]:
    """Every server directory with what is known about its owner and postmaster."""
    base = (home or home_dir()) / "servers"
    found = []
    if not base.is_dir():
        return found
    for root in sorted(base.iterdir()):
        if not root.is_dir():
            continue
        try:
            state = json.loads((root / "state.json").read_text())
        except (OSError, ValueError):
            state = {}
        data = str(state.get("data") or root / "data")
        owner = _process(state.get("owner_pid"), state.get("started"))
        if not state:  # a directory without a state file: created by no run we can ask about
            age = time.time() - root.stat().st_mtime
            owner_alive = age < 60
        else:
            owner_alive = owner is not None
        pid = state.get("postmaster_pid") or _pid_file(Path(data))
        found.append(ServerState(root.name, root, state, owner_alive, pid, _postmaster(pid, data) is not None))
    return found


def _orphan_clients(server: ServerState) -> list[psutil.Process]:
    """Worker processes of the killed run still connected to its server (their parent is gone).

    They would otherwise wait for the run's planned end; found before the server stops, since
    afterwards nothing ties them to it.
    """
    port = server.state.get("port")
    owner = server.state.get("owner_pid")
    if server.owner_alive or not port:
        return []
    try:
        connections = psutil.net_connections(kind="tcp")
    except psutil.Error:
        return []
    found = {}
    for conn in connections:
        if not (conn.pid and conn.raddr and conn.raddr.port == port and conn.pid != os.getpid()):
            continue
        try:
            proc = psutil.Process(conn.pid)
            parent = proc.ppid()
            worker = "multiprocessing" in " ".join(proc.cmdline())
        except psutil.Error:
            continue
        if worker and (parent in (1, owner) or _process(parent) is None):
            found[proc.pid] = proc
    return list(found.values())


def _end_processes(procs: list[psutil.Process]) -> int:
    for proc in procs:
        with contextlib.suppress(psutil.Error):
            proc.terminate()
    gone, alive = psutil.wait_procs(procs, timeout=3)
    for proc in alive:
        with contextlib.suppress(psutil.Error):
            proc.kill()
    return len(procs)


def _stop_server(server: ServerState) -> list[str]:
    """pg_ctl stop -m fast (then immediate) as the server's user, a kill if needed, remove the directory."""
    notes = []
    clients = _orphan_clients(server) if server.postmaster_alive else []
    data = str(server.state.get("data") or server.root / "data")
    install = Path(server.state.get("install") or "/nonexistent")
    local = LocalPostgres(install, name=server.state.get("kind", "embedded"), run_id=server.run_id)
    if local.root != server.root:  # a state file from another home: act on the directory we found
        local.root, local.data = server.root, Path(data)
    if server.postmaster_alive:
        local.stop()  # fast, then immediate, then SIGKILL; removes the directory
        proc = _postmaster(server.postmaster_pid, data)
        if proc is not None:
            try:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
                notes.append(f"postmaster {server.postmaster_pid} killed")
            except psutil.Error:
                pass
        else:
            notes.append(f"postmaster {server.postmaster_pid} stopped")
    if clients:
        notes.append(f"{_end_processes(clients)} orphaned worker process(es) ended")
    if server.root.exists():
        shutil.rmtree(server.root, ignore_errors=True)
    if server.root.exists():
        raise OSError(f"could not remove {server.root}")
    notes.append(f"{server.root} removed")
    return notes


def _stale_staging(home: Path) -> list[Path]:
    """Half-written downloads, unpacked releases and templates (dot names) older than an hour."""
    found = []
    for folder in (home / "installs", home / "templates"):
        if folder.is_dir():
            for entry in folder.iterdir():
                try:
                    old = time.time() - entry.stat().st_mtime > STALE_STAGING_S
                except OSError:
                    continue
                if entry.name.startswith(".") and old:
                    found.append(entry)
    return sorted(found)


OWNER_LABEL = "concurbench.owner_pid"  # labels a container may carry to tell whose run it belongs to
HOST_LABEL = "concurbench.host"


def _created(attrs: dict) -> float | None:
    try:
        return datetime.strptime(str(attrs.get("Created", ""))[:19], "%Y-%m-%dT%H:%M:%S").replace(
            tzinfo=timezone.utc).timestamp()
    except ValueError:
        return None


def _container_owner(labels: dict, created: float | None, force: bool) -> str | None:
    """None when the container may go; otherwise why it is left alone."""
    host = labels.get(HOST_LABEL)
    owner = labels.get(OWNER_LABEL)
    if force:
        return None
    if host and host != socket.gethostname():
        return f"its run was started on {host}; --force removes it anyway"
    if not owner or not str(owner).isdigit():
        return "no owner process is recorded on it, so it may belong to a live run; --force removes it"
    if _process(int(owner), created) is not None:
        return f"its run (pid {owner}) is still going; --force removes it anyway"
    return None


def _containers(dry_run: bool, force: bool) -> list[Action]:
    """Containers of killed runs, through the docker target when it is installed and the engine answers.

    A container is removed when the process that started it is gone (the owner label), or with force.
    """
    try:
        import docker  # the Docker SDK is optional: without it there are no containers to look for
    except ImportError:
        return []
    try:
        if not docker_engine.engine_status().get("reachable"):
            return []
        client = docker.from_env(timeout=30)
        try:
            found = [(c.name, c.labels, _created(c.attrs)) for c in
                     client.containers.list(all=True, filters={"label": LABEL_RUN})]
        finally:
            client.close()
    except Exception as exc:  # noqa: BLE001 - an engine problem must not stop the local clean-up
        return [Action("container", "-", f"listing containers failed: {exc}", GcOutcome.FAILED)]
    actions, doomed, names = [], set(), {}
    for name, labels, created in found:
        run_id = labels.get(LABEL_RUN, "?")
        detail = f"run {run_id}, {labels.get('concurbench.kind', 'container')}"
        why = _container_owner(labels, created, force)
        if why is not None:
            actions.append(Action("container", name, detail, GcOutcome.LEFT_ALONE, [why]))
        elif dry_run:
            actions.append(Action("container", name, detail, GcOutcome.WOULD_REMOVE))
        else:
            doomed.add(run_id)
            names[name] = detail
    if doomed:
        try:
            removed = set(docker_engine.remove_leftover_containers(doomed))
        except Exception as exc:  # noqa: BLE001 - reported as a failed action, the rest goes on
            return actions + [Action("container", n, d, GcOutcome.FAILED, [str(exc)]) for n, d in names.items()]
        for name, detail in names.items():
            done = GcOutcome.REMOVED if name in removed else GcOutcome.FAILED
            actions.append(Action("container", name, detail, done))
    return actions


def collect(*, dry_run: bool = False, force: bool = False, home: Path | None = None,
            containers: bool = True) -> list[Action]:
    """Stop and remove what killed runs left; with dry_run only say what would go."""
    home = home or home_dir()
    actions: list[Action] = []
    for server in find_servers(home):
        detail = server.describe()
        if server.owner_alive and not force:
            actions.append(Action("server", server.run_id, detail, GcOutcome.LEFT_ALONE,
                                  ["its run is still going; --force stops it anyway"]))
            continue
        if dry_run:
            actions.append(Action("server", server.run_id, detail, GcOutcome.WOULD_REMOVE))
            continue
        try:
            notes = _stop_server(server)
            actions.append(Action("server", server.run_id, detail, GcOutcome.REMOVED, notes))
        except (ConcurbenchError, OSError) as exc:
            actions.append(Action("server", server.run_id, detail, GcOutcome.FAILED, [str(exc)]))
    for path in _stale_staging(home):
        if dry_run:
            actions.append(Action("staging", path.name, str(path), GcOutcome.WOULD_REMOVE))
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        done = GcOutcome.FAILED if path.exists() else GcOutcome.REMOVED
        actions.append(Action("staging", path.name, str(path), done))
    if containers:
        actions.extend(_containers(dry_run, force))
    for run in liveruns.killed(home):
        actions.append(Action("run", str(run.run_dir), run.detail, GcOutcome.KILLED))
        if not dry_run:
            liveruns.unregister(run.note)
    return actions
