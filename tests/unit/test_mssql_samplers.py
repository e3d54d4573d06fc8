"""Pure SQL Server sampler logic: page types, page resources, counter arithmetic, wait deltas.

no SQL Server here: every DMV row below is written by hand in the shape the server returns.
"""

from __future__ import annotations

import pytest

from concurbench.samplers.mssql_rows import (BENIGN_WAITS, OBSERVER_WAITS, PERF_AVERAGE_BULK,
                                              PERF_COUNTER_BULK_COUNT, PERF_COUNTER_COUNTER,
                                              PERF_COUNTER_LARGE_RAWCOUNT, PERF_LARGE_RAW_BASE,
                                              PERF_LARGE_RAW_FRACTION, counter_rates, page_type,
                                              parse_pagelatch_resource, wait_deltas)


# -- page types --------------------------------------------------------------------------------------
@pytest.mark.parametrize("page, expected", [
    (0, "other"),  # file header, although 0 % 8088 == 0
    (1, "PFS"),  # also matches the SGAM rule (1 - 1) % 511232 == 0: PFS wins
    (2, "GAM"),
    (3, "SGAM"),
    (4, "other"),
    (8088, "PFS"),
    (16176, "PFS"),
    (8089, "other"),
    (511232, "GAM"),
    (511233, "SGAM"),
    (1022464, "GAM"),
    (1022465, "SGAM"),
    (511231, "other"),
])
def test_page_type(page, expected):
    assert page_type(page) == expected


def test_page_type_negative():
    with pytest.raises(ValueError):
        page_type(-1)


@pytest.mark.parametrize("text, expected", [
    ("2:1:511232", (2, 1, 511232)),
    ("2:1:1", (2, 1, 1)),
    ("PAGE: 5:1:104", (5, 1, 104)),
    ("page:2:3:8088 ", (2, 3, 8088)),
    ("2:1:1 (PFS)", (2, 1, 1)),
])
def test_parse_pagelatch_resource(text, expected):
    assert parse_pagelatch_resource(text) == expected


@pytest.mark.parametrize("text", ["", "2:1", "KEY: 5:72057594044284928 (3300a4f361aa)", "RID: 5:1:104:3",
                                  "TAB: 5:261575970:1", "a:b:c", None])
def test_parse_pagelatch_resource_rejects(text):
    with pytest.raises(ValueError):
        parse_pagelatch_resource(text)


# -- performance counters ----------------------------------------------------------------------------
def pad(text: str, width: int = 128) -> str:
    """sys.dm_os_performance_counters returns nchar(128): values come padded with spaces."""
    return text.ljust(width)


def row(obj, counter, instance, value, kind):
    return {"object_name": pad(obj), "counter_name": pad(counter), "instance_name": pad(instance),
            "cntr_value": value, "cntr_type": kind}


def test_counter_rates_default_instance():
    before = [
        row("SQLServer:Locks", "Lock Requests/sec", "_Total", 1_000, PERF_COUNTER_BULK_COUNT),
        row("SQLServer:Access Methods", "Skipped Ghosted Records/sec", "", 50, PERF_COUNTER_BULK_COUNT),
        row("SQLServer:Transactions", "Version Store Size (KB)", "", 64, PERF_COUNTER_LARGE_RAWCOUNT),
        row("SQLServer:Buffer Manager", "Buffer cache hit ratio", "", 90, PERF_LARGE_RAW_FRACTION),
        row("SQLServer:Buffer Manager", "Buffer cache hit ratio base", "", 100, PERF_LARGE_RAW_BASE),
        row("SQLServer:Locks", "Average Wait Time (ms)", "_Total", 400, PERF_AVERAGE_BULK),
        row("SQLServer:Locks", "Average Wait Time Base", "_Total", 10, PERF_LARGE_RAW_BASE),
    ]
    after = [
        row("SQLServer:Locks", "Lock Requests/sec", "_Total", 61_000, PERF_COUNTER_BULK_COUNT),
        row("SQLServer:Access Methods", "Skipped Ghosted Records/sec", "", 350, PERF_COUNTER_BULK_COUNT),
        row("SQLServer:Transactions", "Version Store Size (KB)", "", 1024, PERF_COUNTER_LARGE_RAWCOUNT),
        row("SQLServer:Buffer Manager", "Buffer cache hit ratio", "", 198, PERF_LARGE_RAW_FRACTION),
        row("SQLServer:Buffer Manager", "Buffer cache hit ratio base", "", 200, PERF_LARGE_RAW_BASE),
        row("SQLServer:Locks", "Average Wait Time (ms)", "_Total", 1_000, PERF_AVERAGE_BULK),
        row("SQLServer:Locks", "Average Wait Time Base", "_Total", 30, PERF_LARGE_RAW_BASE),
    ]
    out = counter_rates(before, after, 6.0)
    assert out["Locks/Lock Requests/sec/_Total"] == pytest.approx(10_000)
    assert out["Access Methods/Skipped Ghosted Records/sec"] == pytest.approx(50)
    assert out["Transactions/Version Store Size (KB)"] == 1024
    assert out["Buffer Manager/Buffer cache hit ratio"] == pytest.approx(99.0)
    assert out["Locks/Average Wait Time (ms)/_Total"] == pytest.approx(30.0)  # 600 ms over 20 waits
    assert not any(k.lower().endswith("base") or "base/" in k.lower() for k in out)


def test_counter_rates_named_instance_and_32bit_rate():
    before = [row("MSSQL$BENCH:Locks", "Lock Requests/sec", "Object", 10, PERF_COUNTER_COUNTER),
              row("MSSQL$BENCH:Databases", "Transactions/sec", "tempdb", 5, PERF_COUNTER_BULK_COUNT)]
    after = [row("MSSQL$BENCH:Locks", "Lock Requests/sec", "Object", 30, PERF_COUNTER_COUNTER),
             row("MSSQL$BENCH:Databases", "Transactions/sec", "tempdb", 25, PERF_COUNTER_BULK_COUNT)]
    out = counter_rates(before, after, 2)
    assert out == {"Locks/Lock Requests/sec/Object": 10.0, "Databases/Transactions/sec/tempdb": 10.0}


def test_counter_rates_zero_bases_and_missing_rows():
    before = [row("SQLServer:Locks", "Average Wait Time (ms)", "_Total", 5, PERF_AVERAGE_BULK),
              row("SQLServer:Locks", "Average Wait Time Base", "_Total", 1, PERF_LARGE_RAW_BASE)]
    after = [row("SQLServer:Locks", "Average Wait Time (ms)", "_Total", 5, PERF_AVERAGE_BULK),
             row("SQLServer:Locks", "Average Wait Time Base", "_Total", 1, PERF_LARGE_RAW_BASE),
             row("SQLServer:Buffer Manager", "Buffer cache hit ratio", "", 0, PERF_LARGE_RAW_FRACTION),
             row("SQLServer:Buffer Manager", "Buffer cache hit ratio base", "", 0, PERF_LARGE_RAW_BASE),
             row("SQLServer:Databases", "Transactions/sec", "newdb", 7, PERF_COUNTER_BULK_COUNT),
             row("SQLServer:Plan Cache", "Cache Hit Ratio", "_Total", 3, PERF_LARGE_RAW_FRACTION)]
    out = counter_rates(before, after, 1)
    assert out["Locks/Average Wait Time (ms)/_Total"] is None  # no waits in the interval
    assert out["Buffer Manager/Buffer cache hit ratio"] is None
    assert "Databases/Transactions/sec/newdb" not in out  # appeared during the interval: no delta
    assert "Plan Cache/Cache Hit Ratio/_Total" not in out  # no base row


def test_counter_rates_irregular_base_name():
    after = [row("SQLServer:Access Methods", "Worktables From Cache Ratio", "", 30, PERF_LARGE_RAW_FRACTION),
             row("SQLServer:Access Methods", "Worktables From Cache Base", "", 40, PERF_LARGE_RAW_BASE)]
    assert counter_rates([], after, 1) == {"Access Methods/Worktables From Cache Ratio": 75.0}


def test_counter_rates_rejects_bad_interval():
    with pytest.raises(ValueError):
        counter_rates([], [], 0)


# -- wait statistics ---------------------------------------------------------------------------------
def wait(name, tasks, ms, signal):
    return {"wait_type": name, "waiting_tasks_count": tasks, "wait_time_ms": ms, "signal_wait_time_ms": signal}


BEFORE = [wait("PAGELATCH_UP", 10, 100, 5), wait("PAGELATCH_EX", 20, 300, 10), wait("XE_TIMER_EVENT", 5, 50_000, 0),
          wait("LCK_M_X", 0, 0, 0), wait("LAZYWRITER_SLEEP", 100, 90_000, 10), wait("SQLTRACE_WAIT_ENTRIES", 1, 10, 0)]
AFTER = [wait("PAGELATCH_UP", 110, 2_100, 55), wait("PAGELATCH_EX", 70, 1_300, 30),
         wait("XE_TIMER_EVENT", 9, 58_000, 0),
         wait("LCK_M_X", 0, 0, 0), wait("LAZYWRITER_SLEEP", 110, 99_000, 12), wait("SQLTRACE_WAIT_ENTRIES", 3, 40, 0),
         wait("WRITELOG", 4, 8, 1)]


def test_wait_deltas_excludes_benign_and_sorts():
    rows = wait_deltas(BEFORE, AFTER)
    assert [r["wait_type"] for r in rows] == ["PAGELATCH_UP", "PAGELATCH_EX", "WRITELOG"]
    up = rows[0]
    assert (up["waiting_tasks_count"], up["wait_time_ms"], up["signal_wait_time_ms"]) == (100, 2_000, 50)
    assert up["resource_wait_time_ms"] == 1_950
    assert sum(r["share"] for r in rows) == pytest.approx(1.0)
    assert rows[2] == {"wait_type": "WRITELOG", "waiting_tasks_count": 4, "wait_time_ms": 8,
                       "signal_wait_time_ms": 1, "resource_wait_time_ms": 7, "share": pytest.approx(8 / 3_008)}


def test_wait_deltas_keep_everything_or_some():
    every = wait_deltas(BEFORE, AFTER, top=None, exclude=())
    assert [r["wait_type"] for r in every][:2] == ["LAZYWRITER_SLEEP", "XE_TIMER_EVENT"]
    assert "LCK_M_X" not in {r["wait_type"] for r in every}  # did not grow
    observed = wait_deltas(BEFORE, AFTER, keep=OBSERVER_WAITS)
    names = [r["wait_type"] for r in observed]
    assert names[0] == "XE_TIMER_EVENT" and "SQLTRACE_WAIT_ENTRIES" in names and "LAZYWRITER_SLEEP" not in names


def test_wait_deltas_top_and_padding():
    rows = wait_deltas([wait("PAGELATCH_EX ", 0, 0, 0)], [wait("pagelatch_ex", 1, 5, 0), wait("CXPACKET", 1, 9, 0)],
                       top=1)
    assert [r["wait_type"] for r in rows] == ["CXPACKET"]
    assert wait_deltas([], [wait("PAGELATCH_EX", 2, 4, 1)])[0]["wait_time_ms"] == 4


def test_benign_list_contents():
    assert {"XE_TIMER_EVENT", "LAZYWRITER_SLEEP", "SLEEP_TASK", "REQUEST_FOR_DEADLOCK_SEARCH"} <= BENIGN_WAITS
    assert not {"PAGELATCH_EX", "PAGELATCH_UP", "LCK_M_X", "WRITELOG", "TRACEWRITE"} & BENIGN_WAITS
