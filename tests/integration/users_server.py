"""A server run as a user's would be, for the dsn target's tests: Debian's PostgreSQL (the postgresql package;
`.ci/run` installs it where it is missing) as a cluster of its own on 127.0.0.1, `max_connections` 150 and the
default shared_buffers (128MB), reached over TCP by a role `bench` that is not a superuser, logs in with a
password (scram-sha-256) and may create databases (CREATEDB), as a DBA would set it up for concurbench.

The user's own database `app` holds the user's table `accounts` (two rows, owned by bench, as a table the user
made with that role would be): the name the README's scenario uses. `dsn` names no database (concurbench makes
its own), `app_dsn` names the user's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from concurbench.provisioners.local import LocalPostgres

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "As-Is-Secret-2718"


def debian_server() -> Path:
    """The newest Debian PostgreSQL server installed (/usr/lib/postgresql/N), or a skip (a failure in CI)."""
    found = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3]))
    if not found:
        reason = "Debian's PostgreSQL server is not installed (apt-get install postgresql; .ci/run does it)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true and {reason}", pytrace=False)
        pytest.skip(reason)
    return found[-1].parent.parent


@dataclass
class UsersServer:
    pg: LocalPostgres
    admin: str  # a superuser's connection to the user's database
    dsn: str  # bench, no database: concurbench's own
    app_dsn: str  # bench, the user's database

    def dump(self) -> str:
        """The user's database as pg_dump writes it (schema and rows), to compare before and after; without the
        \\restrict lines, whose key newer pg_dump releases draw at random for each dump."""
        text = subprocess.run([str(self.pg.install / "bin" / "pg_dump"), "--no-sync", self.admin], check=True,
                              capture_output=True, text=True).stdout
        return "\n".join(line for line in text.splitlines() if not line.startswith(("\\restrict", "\\unrestrict")))

    def databases(self) -> list[str]:
        with psycopg.connect(self.admin, autocommit=True) as conn:
            return [r[0] for r in conn.execute("SELECT datname FROM pg_database ORDER BY 1").fetchall()]

    def settings(self) -> dict:
        """Every setting of the server and what ALTER SYSTEM wrote, read as a superuser."""
        with psycopg.connect(self.admin, autocommit=True) as conn:
            return {"settings": conn.execute("SELECT name, setting FROM pg_settings ORDER BY 1").fetchall(),
                    "auto.conf": conn.execute("SELECT name, setting FROM pg_file_settings "
                                              "WHERE sourcefile LIKE '%%auto.conf' ORDER BY 1").fetchall()}

    def sql(self, statement: str) -> None:
        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(statement)


def start_users_server() -> UsersServer:
    pg = LocalPostgres(debian_server(), {"max_connections": "150"}, name="debian", database="app", mark=False)
    admin = pg.start().conninfo
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute("SET password_encryption = 'scram-sha-256'")
            conn.execute(f"CREATE ROLE bench LOGIN CREATEDB PASSWORD '{PASSWORD}'")
            conn.execute("GRANT CREATE ON SCHEMA public TO bench")
            conn.execute("CREATE TABLE accounts (aid integer PRIMARY KEY, owner text NOT NULL)")
            conn.execute("INSERT INTO accounts VALUES (1, 'ada'), (2, 'grace')")
            conn.execute("ALTER TABLE accounts OWNER TO bench")
            hba = pg.data / "pg_hba.conf"
            hba.write_text("host all bench 127.0.0.1/32 scram-sha-256\n" + hba.read_text())
            conn.execute("SELECT pg_reload_conf()")
    except BaseException:
        pg.stop()
        raise
    base = f"postgresql://bench@127.0.0.1:{pg.port}"
    return UsersServer(pg, admin, f"{base}/", f"{base}/app")


def concurbench(*args, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concurbench.cli.main", *map(str, args)], capture_output=True,
                          text=True, cwd=ROOT, env={**os.environ, "BENCH_PW": PASSWORD}, timeout=timeout)


def dsn_args(dsn: str, out: Path, *more) -> list:
    return ["--target", "dsn", "--dsn", dsn, "--password-env", "BENCH_PW", "--out", out, *more]


def run_dir(result: subprocess.CompletedProcess) -> Path:
    return Path(result.stdout.strip().splitlines()[-1])
