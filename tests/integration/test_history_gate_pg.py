"""The gate on a history store in PostgreSQL (the shared embedded server): two checks of one night at the same
moment make one finding, as on SQLite (tests/unit/test_history_gate_nights.py): the analysis and the write
are one transaction under the store's advisory lock."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from concurbench.history import gate
from concurbench.history.gatefile import GateSpec
from concurbench.history.store import open_store

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from history_nights import FLAT, Nights, slower  # noqa: E402

DB = "history_gate_checks"


@pytest.fixture()
def pg_url(server):
    conninfo = server[1].conninfo
    parts = conninfo_to_dict(conninfo)
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {DB}")
    user = parts.get("user", "postgres")
    password = f":{parts['password']}" if parts.get("password") else ""
    yield f"postgresql://{user}{password}@{parts.get('host', '127.0.0.1')}:{parts['port']}/{DB}"
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {DB} WITH (FORCE)")


def test_two_checks_at_once_make_one_finding_on_postgresql(pg_url):
    nights = Nights(pg_url, seed=20)
    for _ in range(12):
        nights.add(FLAT)
    runs = [nights.add(slower(FLAT, "a", 0.3)) for _ in range(3)]
    both_in = threading.Barrier(2, timeout=2)
    evaluate = gate.evaluate

    def slow_evaluate(*args, **kwargs):
        try:  # both checks analysed the store at once, before either wrote: the race the lock prevents
            both_in.wait()
        except threading.BrokenBarrierError:
            pass
        return evaluate(*args, **kwargs)

    results, errors = [], []

    def one():
        try:
            with open_store(pg_url) as s:
                held = {r.id for r in s.runs() if r.record.run_id == runs[-1]}
                results.append(gate.check(s, GateSpec(), runs=held, checked=[runs[-1]]))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    gate.evaluate = slow_evaluate
    try:
        threads = [threading.Thread(target=one) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        gate.evaluate = evaluate
    assert not errors, errors
    with open_store(pg_url) as s:
        findings = s.findings()
    assert len(results) == 2 and len(findings) == 2  # tps and latency of variant a, once
    assert sorted(len(r.made) for r in results) == [0, 2]
