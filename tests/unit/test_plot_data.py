"""The charts draw the run's data: values read back from the matplotlib figures (the stacked areas,
the lines, the bars and the error bars) against figures computed here from the run (no server)."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import pytest

from concurbench.report.chart_style import OTHER, RC
from concurbench.results.model import PoolResult, Run, ScenarioInfo, ServerInfo, VariantRun
from concurbench.results.store import load_run

matplotlib = pytest.importorskip("matplotlib", reason="plots need matplotlib")
from matplotlib.container import BarContainer  # noqa: E402 - after the skip

from concurbench.report.chart_style import pyplot  # noqa: E402
from concurbench.report.plots import figures  # noqa: E402
from figured import figured

T_975_DF1 = 12.7062  # Student's t, 97.5% quantile, 1 degree of freedom (two repeats)
TIMES = [0.1, 0.2, 0.3, 0.4, 0.5]
MINOR = [f"LWLock:minor{i}" for i in range(9)]  # nine small waits: the top 8 leave some to "other"
FIXTURE_RUN = Path(__file__).resolve().parents[1] / "fixtures" / "runs" / "temp-table-churn"


def sessions(variant: str, point: int, repeat: int, t: float, wait: str) -> int:
    """A distinct, known count per run, time and wait (a repeat of 2 would show if repeats were mixed)."""
    step = TIMES.index(t)
    if wait == "Lock:tuple":
        return (1 if variant == "a" else 3) * point // 4 + step + 10 * (repeat - 1)  # b, drawn second, is higher
    if wait == "CPU":
        return 2 + step % 2 + (5 if repeat == 2 else 0)
    return (step + MINOR.index(wait)) % 2  # 0 or 1


def latency(tps: float) -> dict:
    return {"mean_ms": 1000 / tps, "p50_ms": 800 / tps, "p95_ms": 2500 / tps, "p99_ms": 4000 / tps,
            "max_ms": 9000 / tps}


def variant_run(variant: str, point: int, repeat: int) -> VariantRun:
    tps = {"a": 1000.0, "b": 700.0}[variant] * (1 + point / 64) * (1.0 if repeat == 1 else 1.1)
    waits = [{"t_s": t, "wait": w, "sessions": sessions(variant, point, repeat, t, w)}
             for t in TIMES for w in ("Lock:tuple", "CPU", *MINOR)]
    counters = [{"t_s": t, "lock_requests_per_s": round(tps * (1 + i / 10), 3), "version_store_kb": 64 * i + repeat}
                for i, t in enumerate(TIMES)]
    share = {"Lock:tuple": 0.6 if variant == "a" else 0.3, "CPU": 0.3 if variant == "a" else 0.6, "IO:WalSync": 0.1}
    metrics = {"sessions": point, "transactions": int(tps * 2), "tps": tps, "failed": 0, "retries": 0,
               "errors": {}, "latency": latency(tps), "statements": {}, "statements_executed": int(tps * 2),
               "error_messages": {}}
    return figured(VariantRun(variant, "locks", point, server="17.2", repeat=repeat, elapsed_s=2.0,
                              pools={"lockers": PoolResult("lockers", True, point)},
                              samplers={"wait_events": {"samples": len(TIMES), "share": share}},
                              samples={"wait_events": waits, "mssql_counters": counters}), {"lockers": metrics})


@pytest.fixture(scope="module")
def run() -> Run:
    runs = [variant_run(v, p, r) for r in (1, 2) for v in ("a", "b") for p in (4, 32)]  # interleaved
    return Run(ScenarioInfo("demo", "Demo", quick=True), servers=[ServerInfo("PostgreSQL 17.2", version_short="17.2")],
               repeat=2, variant_runs=runs)


@pytest.fixture(scope="module")
def charts(run):
    plt = pyplot()
    with plt.rc_context(RC):
        drawn = dict(figures(plt, run))
    yield drawn
    for fig in drawn.values():
        plt.close(fig)


def first(run: Run, variant: str, point: int) -> VariantRun:
    return next(r for r in run.variant_runs if (r.variant, r.point, r.repeat) == (variant, point, 1))


def test_every_chart_kind_is_drawn(charts):
    assert sorted(charts) == ["latency-locks", "mssql_counters-locks-32clients", "mssql_counters-locks-4clients",
                              "throughput-locks", "wait-profile-locks", "wait_events-locks-32clients",
                              "wait_events-locks-4clients"]


@pytest.mark.parametrize("point", [4, 32])
def test_wait_events_are_stacked_by_wait_one_panel_per_variant_run_of_the_first_repeat(run, charts, point):
    fig = charts[f"wait_events-locks-{point}clients"]
    assert "repeat 1 of 2" in fig._suptitle.get_text()
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["a", "b"]
    runs = [first(run, variant, point) for variant in ("a", "b")]
    totals: dict[str, int] = {}
    for r in runs:
        for row in r.samples["wait_events"]:
            totals[row["wait"]] = totals.get(row["wait"], 0) + row["sessions"]
    top = sorted(totals, key=lambda w: (-totals[w], w))[:8]  # the 8 largest over both panels, then "other"
    assert len(totals) == 11 and top[:2] == ["Lock:tuple", "CPU"]
    for ax, r in zip(panels, runs):
        layers = [c for c in ax.collections if c.get_label() and not c.get_label().startswith("_")]
        assert [c.get_label() for c in layers] == top + [OTHER]
        data = r.samples["wait_events"]
        for t in TIMES:
            counts = {row["wait"]: row["sessions"] for row in data if row["t_s"] == t}
            values = [counts[w] for w in top] + [sum(v for w, v in counts.items() if w not in top)]
            bottom = 0
            for layer, value in zip(layers, values):
                _assert_spans(layer, t, bottom, bottom + value, f"{r.variant}@{point} {layer.get_label()} t={t}")
                bottom += value
            assert bottom == sum(counts.values())
        low, high = ax.get_ylim()
        assert low == 0 and high >= max(sum(row["sessions"] for row in data if row["t_s"] == t) for t in TIMES)


def _assert_spans(layer, t: float, bottom: float, top: float, what: str) -> None:
    """The layer's area at time t covers [bottom, top] and nothing just above it."""
    path = layer.get_paths()[0]
    eps = 0.02
    if top > bottom:
        assert path.contains_point((t, bottom + eps)) and path.contains_point((t, top - eps)), what
    else:
        assert not path.contains_point((t, bottom + eps)), f"{what}: drawn although 0"
    assert not path.contains_point((t, top + eps)), f"{what}: reaches above {top}"


def test_numeric_sampler_gets_a_panel_per_column_and_a_line_per_variant_run(run, charts):
    fig = charts["mssql_counters-locks-4clients"]
    panels = [ax for ax in fig.axes if ax.get_visible()]
    assert [ax.get_title() for ax in panels] == ["lock requests per s", "version store kb"]
    for ax, column in zip(panels, ("lock_requests_per_s", "version_store_kb")):
        lines = {line.get_label(): line.get_xydata().tolist() for line in ax.get_lines()}
        assert set(lines) == {"a", "b"}
        for variant in ("a", "b"):
            rows = first(run, variant, 4).samples["mssql_counters"]
            assert lines[variant] == [[row["t_s"], row[column]] for row in rows]


def test_throughput_points_and_error_bars_are_the_means_and_intervals_of_the_repeats(run, charts):
    ax = charts["throughput-locks"].axes[0]
    containers = {c.get_label(): c for c in ax.containers}
    assert set(containers) == {"a", "b"}
    for variant, container in containers.items():
        line, _caps, (bars,) = container.lines
        for (x, y), segment, point in zip(line.get_xydata(), bars.get_segments(), (4, 32)):
            values = [r.own("lockers")["tps"] for r in run.variant_runs
                      if (r.variant, r.point) == (variant, point)]
            mean, half = statistics.mean(values), T_975_DF1 * statistics.stdev(values) / math.sqrt(2)
            assert x == pytest.approx(point, abs=1.0)  # set a little apart from the other line
            assert y == pytest.approx(mean)
            (x0, low), (x1, high) = segment
            assert x0 == x1 == pytest.approx(x)
            assert high == pytest.approx(mean + half, rel=1e-4)
            assert low == pytest.approx(max(0.0, mean - half), rel=1e-4, abs=1e-6)


def test_latency_bars_are_the_mean_percentiles(run, charts):
    ax = charts["latency-locks"].axes[0]
    labels = [t.get_text().replace("\n", " ") for t in ax.get_xticklabels()]
    assert labels == ["a @ 4 clients", "a @ 32 clients", "b @ 4 clients", "b @ 32 clients"]
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    assert [c.get_label() for c in bars] == ["p50", "p95", "p99"]
    for container, key in zip(bars, ("p50_ms", "p95_ms", "p99_ms")):
        heights = [p.get_height() for p in container.patches]
        expected = [statistics.mean(r.own("lockers")[f"latency.{key}"] for r in run.variant_runs
                                    if (r.variant, r.point) == (v, p)) for v, p in (("a", 4), ("a", 32), ("b", 4),
                                                                                  ("b", 32))]
        assert heights == pytest.approx(expected, rel=1e-3)


def test_wait_profile_bars_are_the_shares(run, charts):
    ax = charts["wait-profile-locks"].axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["a @ 4 clients", "a @ 32 clients", "b @ 4 clients", "b @ 32 clients"]
    widths = {c.get_label(): [p.get_width() for p in c.patches] for c in ax.containers}
    assert widths["Lock:tuple"] == pytest.approx([60, 60, 30, 30])
    assert widths["CPU"] == pytest.approx([30, 30, 60, 60])
    assert widths["IO:WalSync"] == pytest.approx([10, 10, 10, 10])
    assert "means of 2 repeats" in ax.get_title() and "interval" not in ax.get_title()  # no error bars here


def test_stored_run_chart_reads_the_stored_samples():
    """A real stored run (format 1): the stacked layers at each time add up to the sessions sampled."""
    run = load_run(FIXTURE_RUN)
    plt = pyplot()
    with plt.rc_context(RC):
        drawn = dict(figures(plt, run))
    try:
        fig = drawn["wait_events-main"]
        panels = [ax for ax in fig.axes if ax.get_visible()]
        assert [ax.get_title() for ax in panels] == ["dynamic", "static", "reuse"]
        for ax, r in zip(panels, run.variant_runs):
            layers = [c for c in ax.collections if c.get_label() and not c.get_label().startswith("_")]
            totals: dict = {}
            for row in r.samples["wait_events"]:
                totals[row["t_s"]] = totals.get(row["t_s"], 0) + row["sessions"]
            paths = [layer.get_paths()[0] for layer in layers]
            for t, total in totals.items():
                assert any(p.contains_point((t, total - 0.02)) for p in paths), (r.variant, t)
                assert not any(p.contains_point((t, total + 0.02)) for p in paths), (r.variant, t)
    finally:
        for fig in drawn.values():
            plt.close(fig)
