"""A PostgreSQL server run from a folder of binaries on this machine (embedded or cached majors).

Each run gets a fresh data directory (copied from an initdb template kept per binary folder), a
free port on 127.0.0.1, and the scenario's settings in an included file. The server runs as an
unprivileged user when we are root (initdb refuses root), in a session of its own so a Ctrl-C at
the terminal reaches the harness, which then stops it, and not the server directly. A small state
file next to the data directory lets a later `gc` find servers of runs that were killed.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

import psycopg

from ..errors import ProvisionError
from .base import Connection, home_dir
from .owned import comment_sql

SERVICE_USER = "concurbench"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def _as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _service_ids() -> tuple[int, int] | None:
    """uid/gid of the unprivileged user the server runs as, created on first use (root only)."""
    if not _as_root():
        return None

    try:
        entry = pwd.getpwnam(SERVICE_USER)
    except KeyError:
        try:
            subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin",
                            SERVICE_USER], check=True, capture_output=True, text=True)
        except (OSError, subprocess.CalledProcessError) as exc:
            detail = getattr(exc, "stderr", "") or str(exc)
            raise ProvisionError(f"running as root, the server needs an unprivileged user, and "
                                 f"'useradd {SERVICE_USER}' failed: {detail.strip()}", exc) from exc
        entry = pwd.getpwnam(SERVICE_USER)
    return entry.pw_uid, entry.pw_gid


def _chown_tree(path: Path, ids: tuple[int, int] | None) -> None:
    if ids is None:
        return
    for root, dirs, files in os.walk(path):
        os.chown(root, *ids)
        for name in files:
            os.chown(os.path.join(root, name), *ids, follow_symlinks=False)


class LocalPostgres:
    """Start and stop one PostgreSQL server from `install` (a folder with bin/, lib/, share/)."""

    def __init__(self, install: Path, settings: dict[str, str] | None = None, *, name: str = "embedded",
                 run_id: str | None = None, database: str = "concurbench", keep: bool = False, mark: bool = True):
        self.name = name
        self.install = Path(install)
        self.settings = dict(settings or {})
        self.run_id = run_id or uuid.uuid4().hex[:12]
        self.database = database
        self.mark = mark  # the database it creates carries concurbench's marker (owned.py); False: a stand-in user's
        self.keep = keep
        self.home = home_dir()
        self.root = self.home / "servers" / self.run_id
        self.data = self.root / "data"
        self.log_file = self.root / "server.log"
        self.port: int | None = None
        self._ids = _service_ids()
        self._started = False

    # -- commands ----------------------------------------------------------
    def _bin(self, tool: str) -> str:
        return str(self.install / "bin" / tool)

    def _run(self, args: list[str], *, timeout: float = 120) -> subprocess.CompletedProcess:
        kwargs: dict = {}
        if self._ids is not None:
            kwargs.update(user=self._ids[0], group=self._ids[1], extra_groups=[])
        env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
        env.pop("PGDATA", None)
        try:
            return subprocess.run(args, capture_output=True, text=True, timeout=timeout, check=True, env=env,
                                  start_new_session=True, cwd=str(self.root), stdin=subprocess.DEVNULL, **kwargs)
        except subprocess.CalledProcessError as exc:
            tail = (exc.stderr or exc.stdout or "").strip().splitlines()[-5:]
            raise ProvisionError(f"{Path(args[0]).name} failed (exit {exc.returncode}): " + " / ".join(tail), exc) from exc
        except subprocess.TimeoutExpired as exc:
            raise ProvisionError(f"{Path(args[0]).name} did not finish within {timeout:.0f} s; "
                                 f"last server log lines:\n{self.logs(10)}", exc) from exc
        except OSError as exc:
            raise ProvisionError(f"cannot run {args[0]}: {exc}", exc) from exc

    def version(self) -> str:
        out = subprocess.run([self._bin("postgres"), "--version"], capture_output=True, text=True, check=False)
        return out.stdout.strip().split()[-1] if out.returncode == 0 else "unknown"

    # -- template ------------------------------------------------------------
    def _template(self) -> Path:
        """An initdb'd cluster per binary folder, copied for each run (initdb takes seconds)."""
        key = f"{self.name}-{self.version()}"
        template = self.home / "templates" / key
        if (template / "PG_VERSION").exists():
            return template
        template.parent.mkdir(parents=True, exist_ok=True)
        staging = self.home / "templates" / f".{key}.{uuid.uuid4().hex[:6]}"
        staging.mkdir(mode=0o700)
        _chown_tree(staging, self._ids)
        self.root.mkdir(parents=True, exist_ok=True)
        _chown_tree(self.root, self._ids)
        try:
            self._run([self._bin("initdb"), "-D", str(staging), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                       "--locale=C", "--no-sync"])
            try:
                staging.rename(template)
            except OSError:  # another run made it first
                shutil.rmtree(staging, ignore_errors=True)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        return template

    # -- life cycle ------------------------------------------------------------
    def start(self) -> Connection:
        if not (self.install / "bin" / "postgres").exists():
            raise ProvisionError(f"no PostgreSQL server binaries under {self.install}")
        self.root.mkdir(parents=True, exist_ok=True)
        os.chmod(self.home, 0o755)
        (self.home / "servers").chmod(0o755)
        self._write_state(None)
        template = self._template()
        shutil.copytree(template, self.data, symlinks=True)
        os.chmod(self.data, 0o700)
        _chown_tree(self.root, self._ids)
        self.port = free_port()
        self._write_conf()
        self._pg_ctl_start()
        self._started = True
        self._write_state(self._postmaster_pid())
        return self._create_database()

    def _write_conf(self) -> None:
        lines = ["listen_addresses = '127.0.0.1'", f"port = {self.port}",
                 f"unix_socket_directories = '{self.root}'", "logging_collector = off"]
        lines += [f"{k} = '{str(v).replace(chr(39), chr(39) * 2)}'" for k, v in self.settings.items()]
        conf = self.data / "concurbench.conf"
        conf.write_text("\n".join(lines) + "\n")
        main = self.data / "postgresql.conf"
        text = main.read_text()
        if "include_if_exists = 'concurbench.conf'" not in text:
            main.write_text(text + "\ninclude_if_exists = 'concurbench.conf'\n")
        _chown_tree(self.data, self._ids)

    def _pg_ctl_start(self) -> None:
        try:
            self._run([self._bin("pg_ctl"), "-D", str(self.data), "-l", str(self.log_file), "-w", "-t", "60",
                       "start"], timeout=90)
        except ProvisionError as exc:
            raise ProvisionError(f"the {self.name} PostgreSQL server did not start: {exc.message}\n"
                                 f"last server log lines:\n{self.logs(15)}", exc.cause) from exc

    def _create_database(self) -> Connection:
        admin = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"
        try:
            with psycopg.connect(admin, autocommit=True, connect_timeout=10) as conn:
                exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (self.database,)).fetchone()
                if not exists:
                    conn.execute(f'CREATE DATABASE "{self.database}"')
                    if self.mark:
                        conn.execute(comment_sql(self.database, temporary=False))
        except psycopg.Error as exc:
            raise ProvisionError(f"cannot prepare database {self.database}: {exc}", exc) from exc
        info = f"host=127.0.0.1 port={self.port} user=postgres dbname={self.database}"
        return Connection(info, f"postgresql://postgres@127.0.0.1:{self.port}/{self.database}")

    def restart(self, settings: dict[str, str] | None = None) -> Connection:
        """Restart the server; given settings replace the previous ones (None keeps them)."""
        if settings is not None:
            self.settings = dict(settings)
            self._write_conf()
        self._run([self._bin("pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "60", "stop"], timeout=90)
        self._pg_ctl_start()
        self._write_state(self._postmaster_pid())
        return self._create_database()

    def _postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def _write_state(self, pid: int | None) -> None:
        state = {"run_id": self.run_id, "kind": self.name, "owner_pid": os.getpid(), "postmaster_pid": pid,
                 "data": str(self.data), "install": str(self.install), "port": self.port,
                 "started": time.time()}
        (self.root / "state.json").write_text(json.dumps(state))

    def stop(self) -> None:
        """Stop the server (fast, then immediate, then a kill) and remove its directory. Idempotent."""
        if self.keep:
            return
        pid = self._postmaster_pid()
        if self.data.exists() and pid:
            for mode in ("fast", "immediate"):
                try:
                    self._run([self._bin("pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "-t", "30", "stop"],
                              timeout=45)
                    break
                except ProvisionError:
                    continue
            else:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        shutil.rmtree(self.root, ignore_errors=True)
        self._started = False

    def logs(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no server log)"

    def describe(self) -> dict:
        return {"target": self.name, "install": str(self.install), "port": self.port}

    def connect_hint(self) -> str:
        return (f"psql 'host=127.0.0.1 port={self.port} user=postgres dbname={self.database}' "
                f"(data {self.data}; stop it with: {self._bin('pg_ctl')} -D {self.data} stop, "
                f"or concurbench gc)")
