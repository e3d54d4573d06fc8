"""A pool's figures on hand-built PoolStats, and the Markdown report built from a small hand-made run."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import pytest

from concurbench.engines.classes import ALL as ERROR_CLASSES
from concurbench.report.tables import top_waits
from concurbench.figures import Place, Scope
from concurbench.results.metrics import nested, pool_figures, pool_records
from concurbench.results.model import (PoolResult, PublishedFigure, Run, ScenarioInfo, ServerInfo, Source,
                                       Unavailable, VariantRun)
from concurbench.report.render import markdown
from concurbench.report.tables import build_report, fmt, measured_value
from concurbench.workload.stats import PoolStats
from figured import figured

MS = 1_000_000


def pool_metrics(stats: PoolStats, elapsed_s: float) -> dict:
    """A pool's figures as summary.json nests them."""
    return nested(pool_figures(stats, elapsed_s))


def stats_for(pool: str, transactions: int, *, txn_ms: float = 2.0, statements=("lock", "update"),
              errors: Counter | None = None, sessions: int = 4, flush: bool = True) -> PoolStats:
    stats = PoolStats(pool, sessions=sessions, transactions=transactions, failed=sum((errors or {}).values()),
                      errors=errors or Counter())
    for i in range(transactions):
        stats.txn.record(int(txn_ms * MS) + i)
        for name in statements:
            stats.statement(name).record(int(txn_ms * MS / len(statements)))
    if flush:
        stats.flush()  # as the runner's stats are: merged from to_dict()/from_dict() of each worker
    return stats


# -- pool_metrics ----------------------------------------------------------------

def test_pool_metrics_figures():
    stats = stats_for("lockers", 500, errors=Counter(deadlock=3, serialization=2), sessions=8)
    stats.retries = 4
    stats.error_messages.update({"40P01: deadlock detected": 3, "40001: could not serialize access": 2})
    stats.statement("commit")  # declared but never run
    m = pool_metrics(stats, 2.5)
    assert m["sessions"] == 8
    assert m["transactions"] == 500
    assert m["tps"] == 200.0
    assert m["failed"] == 5 and m["retries"] == 4
    assert m["errors"] == {"deadlock": 3, "serialization": 2, "lock_not_available": 0, "connection": 0, "other": 0}
    assert list(m["errors"]) == list(ERROR_CLASSES)
    assert m["statements_executed"] == 1000 == sum(s["count"] for s in m["statements"].values())
    assert set(m["statements"]) == {"lock", "update", "commit"}
    assert m["statements"]["commit"] == {"count": 0, "mean_ms": None, "p50_ms": None, "p95_ms": None,
                                         "p99_ms": None, "max_ms": None}
    assert m["statements"]["lock"]["mean_ms"] == 1.0
    assert m["latency"]["mean_ms"] == pytest.approx(2.0, abs=1e-3)
    assert m["latency"]["p50_ms"] == pytest.approx(2.0, rel=1e-3)
    assert m["latency"]["max_ms"] == pytest.approx(2.0005, rel=1e-3)
    assert m["error_messages"] == {"40P01: deadlock detected": 3, "40001: could not serialize access": 2}
    json.dumps(m)  # results are written as JSON


def test_a_pools_records_are_made_from_its_statistics_with_units_scope_and_place():
    stats = stats_for("lockers", 500, errors=Counter(deadlock=3), sessions=8)
    stats.error_messages.update({"40P01: deadlock detected. Process 7 waits": 3})  # a text with a dot in it
    place = Place("advisory", "lockers", 8, "18.1", 2)
    records = pool_records(stats, 2.5, place)
    by_name = {m.name: m for m in records}
    assert all(m.scope is Scope.POOL and m.place == place for m in records)
    assert (by_name["tps"].value, by_name["tps"].unit) == (200.0, "1/s")
    assert by_name["latency.p95_ms"].unit == "ms" and by_name["statements.lock.count"].unit == "statements"
    assert (by_name["errors.deadlock"].value, by_name["errors.deadlock"].unit) == (3, "errors")
    figures = {m.name: m.value for m in records}
    assert nested(figures) == pool_metrics(stats, 2.5)  # summary.json's nested pool figures, made from the records
    assert nested(figures)["error_messages"] == {"40P01: deadlock detected. Process 7 waits": 3}


def test_pool_metrics_statement_counts_of_unflushed_stats():
    m = pool_metrics(stats_for("p", 50, flush=False), 1.0)
    assert m["statements_executed"] == 100
    assert {name: s["count"] for name, s in m["statements"].items()} == {"lock": 50, "update": 50}


def test_pool_metrics_tps_rounding_and_zero_elapsed():
    stats = stats_for("p", 10, statements=())
    assert pool_metrics(stats, 3.0)["tps"] == 3.333
    assert pool_metrics(stats, 0.0)["tps"] is None


def test_pool_metrics_suppresses_percentiles_of_small_samples():
    m = pool_metrics(stats_for("p", 10), 1.0)
    assert m["latency"]["p50_ms"] is not None
    assert m["latency"]["p95_ms"] is None and m["latency"]["p99_ms"] is None


def test_pool_metrics_counts_unknown_error_classes_nowhere():
    m = pool_metrics(stats_for("p", 1, errors=Counter(weird=2)), 1.0)
    assert sum(m["errors"].values()) == 0


# -- a hand-made run -----------------------------------------------------------------

def result(variant, group, point, pools, *, elapsed=10.0, samplers=None, status="ok", messages=()):
    """A variant run as the runner builds it: pools -> (stats, measure)."""
    figures = {name: pool_metrics(s, elapsed) for name, (s, _) in pools.items()}
    return figured(VariantRun(
        variant, group, point, status=status, elapsed_s=elapsed, started=0.0, messages=list(messages),
        pools={name: PoolResult(name, measure, s.sessions, s.to_dict()) for name, (s, measure) in pools.items()},
        samplers=samplers or {}), figures)


def written(run: Run) -> Run:
    """The run as a report reads it back from its JSON files."""
    return Run.from_dicts(json.loads(json.dumps(run.manifest_dict())), json.loads(json.dumps(run.summary_dict())))


@pytest.fixture
def run():
    results = [
        result("for_update", "locks", 10, {"lockers": (stats_for("lockers", 1000, sessions=10), True)},
               samplers={"wait_events": {"share": {"Lock:transactionid": 0.5, "CPU": 0.25, "IO:DataFileRead": 0.2,
                                                   "LWLock:WALWrite": 0.05}},
                         "wal": {"bytes": 250_000, "records": 1000, "fpi": 3},
                         "multixact": {"created": 0}}),
        result("advisory", "locks", 10, {"lockers": (stats_for("lockers", 2000, sessions=10), True)},
               samplers={"wal": {"bytes": 100_000, "records": None}}),
        result("bystander_beside", "bystander", None,
               {"bystanders": (stats_for("bystanders", 400, statements=("update",)), True),
                "lockers": (stats_for("lockers", 100, sessions=2,
                                      errors=Counter(deadlock=7)), False)},
               status="interrupted", messages=["stopped early"]),
    ]
    published = [
        PublishedFigure("advisory", "tps", 3446.0, unit="tps", clients=40, note="10 background lockers"),
        PublishedFigure("for_update", "statements.lock.mean_ms", 66.5, unit="ms", clients=90),
        PublishedFigure("missing_here", "tps", 1.0, note="not run"),
    ]
    return written(Run(
        ScenarioInfo("demo", "Demo of locks", quick=True,
                     baselines={"locks": "for_update", "bystander": "bystander_beside"},
                     source=Source(engine="PostgreSQL 12", hardware="4 cores")),
        servers=[ServerInfo("PostgreSQL 17.2 on x86_64", version_short="17.2")], target="embedded",
        host={"hostname": "box", "cpu_count": 8}, processes=2, variant_runs=results, published=published))


def table_rows(md: str, title: str) -> list[list[str]]:
    lines = md.splitlines()
    start = lines.index(f"## {title}")
    rows = []
    assert lines[start + 1] == "" and lines[start + 3].startswith("|---")
    for line in lines[start + 4:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split(" | ")])
    return rows


def test_figures_give_a_pools_and_the_runs_records_by_name(run):
    flat = run.variant_runs[0].figures("lockers")
    assert flat["tps"] == 100.0
    assert flat["errors.deadlock"] == 0
    assert flat["statements.lock.count"] == 1000
    assert flat["wal.bytes"] == 250_000 and flat["wal.bytes_per_txn"] == 250.0
    assert flat["wal.records"] == 1000 and flat["wal.fpi"] == 3
    assert flat["multixact.created"] == 0
    assert flat["waits.Lock:transactionid"] == 0.5
    assert flat["elapsed_s"] == 10.0
    assert top_waits(run.variant_runs[0], 2) == [("Lock:transactionid", 0.5), ("CPU", 0.25)]
    # WAL per transaction divides by every pool's transactions, background ones included
    assert run.variant_runs[1].figures("lockers")["wal.bytes_per_txn"] == 50.0


def test_markdown_report_tables(run):
    report = build_report(run)
    md = markdown(report)
    assert md.startswith("# Demo of locks\n")
    assert "- Scenario: demo (quick) — Demo of locks" in md
    assert "- Server: PostgreSQL 17.2 on x86_64 (embedded)" in md
    assert "- Host: box, 8 CPUs, 2 worker processes" in md
    assert "| Variant | Pool | Clients | TPS | vs base |" in md

    rows = table_rows(md, "locks: 10 clients")
    assert [r[0] for r in rows] == ["for_update", "advisory"]
    assert rows[0][1:5] == ["lockers", "10", "100.0", "base"]
    assert rows[1][1:5] == ["lockers", "10", "200.0", "2.00×"]
    assert rows[0][9] == "Lock:transactionid 50%, CPU 25%, IO:DataFileRead 20%"
    assert rows[0][10] == "250" and rows[1][10] == "50"
    assert rows[0][8] == "0"

    rows = table_rows(md, "bystander")
    assert rows[0][:5] == ["bystander_beside *", "bystanders", "4", "40.0", "base"]
    assert rows[1][:5] == ["bystander_beside *", "lockers (background)", "2", "10.0", "–"]
    assert rows[1][8] == "deadlock 7"
    assert "_* interrupted: figures cover the part that ran_" in md

    stmts = table_rows(md, "locks: mean latency per statement (ms)")
    assert ["for_update", "10", "lockers", "lock", "1.000", "1.000", "1,000"] in stmts
    assert ["advisory", "10", "lockers", "update", "1.000", "1.000", "2,000"] in stmts

    assert "## Warnings" in md
    assert "- bystander_beside: stopped early" in md


def test_an_incomplete_run_is_marked_in_every_table_of_its_figures(run):
    partial = replace(run.variant_runs[1], status="incomplete", workers={"started": 2, "reported": 1},
                      messages=["worker process 2 of 2 (5 sessions of pool lockers) exited (killed by "
                                "SIGKILL) without sending its results: the figures leave out its sessions"])
    runs = list(run.variant_runs)
    runs[1] = partial
    md = markdown(build_report(replace(run, variant_runs=runs)))
    note = ("_* incomplete: a worker process sent no results, so figures leave out its sessions and claims on "
            "them are not evaluated_")
    assert [r[0] for r in table_rows(md, "locks: 10 clients")] == ["for_update", "advisory *"]
    statements = table_rows(md, "locks: mean latency per statement (ms)")
    assert {r[0] for r in statements if r[0].startswith("advisory")} == {"advisory *"}
    assert table_rows(md, "Published beside measured")[0][4] == "200.00 tps *"
    assert md.count(note) == 3
    assert "_* interrupted: figures cover the part that ran_" in md  # the other group keeps its own note
    assert "- advisory: worker process 2 of 2 (5 sessions of pool lockers) exited (killed by SIGKILL)" in md


def test_published_beside_measured(run):
    md = markdown(build_report(run))
    assert "## Published beside measured" in md
    rows = table_rows(md, "Published beside measured")
    assert rows[0] == ["advisory", "tps", "3,446 tps", "40", "200.00 tps", "10", "10 background lockers"]
    assert rows[1] == ["for_update", "statements.lock.mean_ms", "66.5 ms", "90", "1.00 ms", "10", ""]
    assert rows[2] == ["missing_here", "tps", "1.0", "–", "–", "–", "not run"]
    assert "_Article: PostgreSQL 12 on 4 cores. Here: PostgreSQL 17.2 on 8 CPUs" in md


def test_no_published_section_without_published_figures(run):
    md = markdown(build_report(replace(run, published=[])))
    assert "Published beside measured" not in md
    assert "for_update" in md and "advisory" in md


def test_measured_value_picks_the_nearest_sweep_point(run):
    results = run.variant_runs + [result("advisory", "locks", 40,
                                         {"lockers": (stats_for("lockers", 3000, sessions=40), True)})]
    value, r = measured_value(results, "advisory", "tps", clients=32)
    assert (value, r.point) == (300.0, 40)
    value, r = measured_value(results, "advisory", "tps", clients=12)
    assert (value, r.point) == (200.0, 10)
    assert measured_value(results, "advisory", "tps", pool="nope")[0] is None
    assert measured_value(results, "nothing", "tps") == (None, None)


def test_markdown_escapes_pipes():
    from concurbench.report.tables import Report, Table

    md = markdown(Report("T", [], [Table("t", ["A", "B"], [["a|b", "line\nbreak"]])]))
    assert "| a\\|b | line break |" in md
    assert "|---|---|" in md


@pytest.mark.parametrize("value, digits, text", [
    (None, 1, "–"), (0.0, 1, "0.0"), (3.14159, 2, "3.14"), (0.01234, 1, "0.0123"), (12345.6, 1, "12,346"),
    (1234567, 1, "1,234,567"), ("x", 1, "x"),
])
def test_fmt(value, digits, text):
    assert fmt(value, digits) == text


def test_an_unavailable_metric_reads_as_its_reason_in_lookups_tables_and_csv(run):
    from concurbench.results.store import csv_rows

    first = run.variant_runs[0]
    gone = replace(first, unavailable={"wal.bytes_per_txn": "not available on PostgreSQL 14"},
                   pools={"lockers": replace(first.pools["lockers"], unavailable={"latency.p99_ms": "too few"})})
    assert str(gone.metric("lockers", "wal.bytes_per_txn")) == "unavailable: not available on PostgreSQL 14"
    assert gone.metric("lockers", "latency.p99_ms") == Unavailable("too few")
    assert gone.metric("lockers", "tps") == 100.0
    run = written(replace(run, variant_runs=[gone, *run.variant_runs[1:]]))
    assert run.variant_runs[0] == gone, "unavailable metrics survive the JSON round trip"
    rows = table_rows(markdown(build_report(run)), "locks: 10 clients")
    assert rows[0][7] == "unavailable: too few" and rows[0][10] == "unavailable: not available on PostgreSQL 14"
    assert csv_rows(run)[0]["wal.bytes_per_txn"] == Unavailable("not available on PostgreSQL 14")
