"""A sampler's figures become records where it measured them: the sampler driver around a short window on the
embedded PostgreSQL, its summaries, and the records it makes of them (names, values, units, scope and place)."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest

from concurbench.figures import Place, Scope
from concurbench.samplers.base import SamplerDriver
from concurbench.samplers.registry import build
from concurbench.scenario.model import SamplerSpec

pytestmark = pytest.mark.integration


def test_the_driver_makes_each_samplers_records_from_its_summary(server, admin):
    _, connection = server
    version_num = int(admin.execute("SHOW server_version_num").fetchone()[0])
    admin.execute("CREATE TABLE IF NOT EXISTS sampler_records (id int PRIMARY KEY, v int)")
    admin.execute("INSERT INTO sampler_records SELECT g, 0 FROM generate_series(1, 10) g ON CONFLICT DO NOTHING")
    driver = SamplerDriver(build([SamplerSpec("wait_events"), SamplerSpec("wal")]),
                           lambda: psycopg.connect(connection.conninfo, autocommit=True), version_num, warmup=1.0)
    driver.open()
    start = time.perf_counter_ns()
    driver.window_set(start, None)
    sleeper = threading.Thread(target=lambda: psycopg.connect(connection.conninfo, autocommit=True)
                               .execute("SELECT pg_sleep(0.4)").close())
    sleeper.start()  # a session the wait sampler sees waiting
    with psycopg.connect(connection.conninfo, autocommit=True) as work:
        for _ in range(20):
            work.execute("UPDATE sampler_records SET v = v + 1 WHERE id = 3")
    sleeper.join()
    driver.measurement_ended(time.perf_counter_ns())
    driver.close()
    summaries, failures = driver.summaries((time.perf_counter_ns() - start) / 1e9)
    assert failures == []

    place = Place("v", "", 3, "18", 2)
    records = driver.records(summaries, 20, place)
    by_name = {m.name: m for m in records}
    assert all(m.scope is Scope.SAMPLER and m.place == place for m in records)
    wal = summaries["wal"]["bytes"]
    assert wal > 0 and by_name["wal.bytes"].value == wal and by_name["wal.bytes"].unit == "B"
    assert by_name["wal.bytes_per_txn"].value == round(wal / 20, 1) and by_name["wal.bytes_per_txn"].unit == "B"
    waits = {m.name.removeprefix("waits."): m.value for m in records if m.name.startswith("waits.")}
    assert waits == summaries["wait_events"]["share"] and "Timeout:PgSleep" in waits
    assert {by_name[f"waits.{w}"].unit for w in waits} == {"share"}
    names = [m.name for m in records]
    assert names.index("wal.bytes") < min(names.index(f"waits.{w}") for w in waits)  # WAL first, waits last
