"""The embedded provisioner: a fresh server per run, settings applied, nothing left behind."""

from __future__ import annotations

import psutil
import psycopg
import pytest

from concurbench.errors import ProvisionError
from concurbench.provisioners.embedded import EmbeddedPostgres

pytestmark = pytest.mark.integration


def postgres_processes_under(path) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            if proc.info["name"] == "postgres" and str(path) in " ".join(proc.info["cmdline"] or []):
                found.append(proc)
        except psutil.Error:
            continue
    return found


def test_settings_applied_and_everything_removed_on_stop():
    pg = EmbeddedPostgres({"max_connections": "123", "work_mem": "7MB"})
    conn_info = pg.start()
    try:
        with psycopg.connect(conn_info.conninfo) as conn:
            assert conn.execute("SHOW max_connections").fetchone()[0] == "123"
            assert conn.execute("SHOW work_mem").fetchone()[0] == "7MB"
            assert conn.execute("SELECT current_database()").fetchone()[0] == "concurbench"
        assert postgres_processes_under(pg.data)
        assert "password" not in conn_info.safe
    finally:
        pg.stop()
    assert not pg.root.exists()
    assert postgres_processes_under(pg.data) == []


def test_bad_setting_fails_with_the_server_log():
    pg = EmbeddedPostgres({"shared_buffers": "lots"})
    with pytest.raises(ProvisionError) as info:
        pg.start()
    pg.stop()
    assert "shared_buffers" in info.value.message
    assert not pg.root.exists()


def test_each_run_gets_a_fresh_data_directory():
    a, b = EmbeddedPostgres(), EmbeddedPostgres()
    try:
        ca, cb = a.start(), b.start()
        with psycopg.connect(ca.conninfo, autocommit=True) as conn:
            conn.execute("CREATE TABLE only_in_a (x int)")
        with psycopg.connect(cb.conninfo) as conn:
            assert conn.execute("SELECT to_regclass('only_in_a')").fetchone()[0] is None
        assert a.data != b.data and a.port != b.port
    finally:
        a.stop()
        b.stop()
