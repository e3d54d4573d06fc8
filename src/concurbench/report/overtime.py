"""Each pool over the measurement window, per 100 ms: throughput and mean latency, with the timeline's
events (a release, a statement's start and end, a phase change) marked as labelled vertical lines.

The figures come from the per-interval series every pool keeps (workload/stats.py Series, stored
under the pool's `stats`): one figure per group and sweep point, a row of two panels (throughput,
mean latency) per variant run, one line per pool. `over_time_frame` gives the same figures as a
table; plots.py writes it beside each chart as CSV. A run with repeats shows its first repeat.
"""

from __future__ import annotations

import math

import pandas as pd

from ..workload.events import Event
from ..results.model import Run, VariantRun
from .chart_style import Context, colors, grid, slug
from .event_tables import in_window
from .timeseries import TIME_LABEL

COLUMNS = ["pool", "t_s", "tps", "mean_ms", "failed"]


def over_time_frame(r: VariantRun) -> pd.DataFrame:
    """One row per pool and 100 ms interval of the window: its start (s), transactions/s, mean latency (ms,
    empty when none completed) and failures. Intervals past the window's end are left out."""
    rows = []
    for name, pool in r.pools.items():
        series = (pool.stats or {}).get("series")
        if not series or not series.get("count"):
            continue
        bucket_s = series["bucket_ns"] / 1e9
        length = max(1, math.ceil(r.elapsed_s / bucket_s - 1e-9))
        counts, sums = series["count"][:length], series["txn_ns"][:length]
        failed = series.get("failed") or []
        for i, count in enumerate(counts):
            rows.append([name, round(i * bucket_s, 3), count / bucket_s,
                         sums[i] / count / 1e6 if count else math.nan, failed[i] if i < len(failed) else 0])
    return pd.DataFrame(rows, columns=COLUMNS)


def _panels(run: Run):
    """(stem, title, [(variant run, frame)]) per group and sweep point, first repeats with a series."""
    first = [r for r in run.variant_runs if r.repeat == 1]
    out = []
    for group in dict.fromkeys(r.group for r in first):
        runs = [(r, over_time_frame(r)) for r in first if r.group == group]
        runs = [(r, frame) for r, frame in runs if not frame.empty]
        for point in dict.fromkeys(r.point for r, _ in runs):
            stem = f"over-time-{slug(group)}" + (f"-{point}clients" if point is not None else "")
            what = f"throughput and latency per 100 ms — {group}" + (f", {point} clients" if point is not None else "")
            out.append((stem, what, [(r, frame) for r, frame in runs if r.point == point]))
    return out


def over_time_tables(run: Run) -> list[tuple[str, pd.DataFrame]]:
    """The over-time figures as tables, one per chart (variant run columns first)."""
    out = []
    for stem, _, panels in _panels(run):
        frames = [frame.assign(variant=r.variant, point=r.point, server=r.server) for r, frame in panels]
        table = pd.concat(frames, ignore_index=True)
        out.append((stem, table[["variant", "point", "server", *COLUMNS]]))
    return out


def over_time_figures(plt, ctx: Context, run: Run) -> list[tuple[str, object]]:
    figures = []
    for stem, what, panels in _panels(run):
        title = ctx.title(what, note=f"repeat 1 of {run.repeat}" if run.repeat > 1 else "")
        figures.append((stem, _figure(plt, ctx, title, panels)))
    return figures


def _figure(plt, ctx: Context, title: str, panels: list[tuple[VariantRun, pd.DataFrame]]):
    fig, axes, rows = grid(plt, 2 * len(panels), title, sharey=False)
    pools = list(dict.fromkeys(p for _, frame in panels for p in frame["pool"]))
    palette = colors(plt, pools)
    for i, (r, frame) in enumerate(panels):
        tps_ax, lat_ax = axes[2 * i], axes[2 * i + 1]
        for pool, rows_of in frame.groupby("pool", sort=False):
            t = rows_of["t_s"].to_numpy(dtype=float)
            tps_ax.step(t, rows_of["tps"].to_numpy(dtype=float), where="post", label=pool, color=palette[pool])
            lat_ax.step(t, rows_of["mean_ms"].to_numpy(dtype=float), where="post", label=pool, color=palette[pool])
        label = ctx.run_label(r, with_point=False)
        tps_ax.set_title(f"{label}: throughput (transactions/s)", fontsize=9)
        lat_ax.set_title(f"{label}: mean latency (ms)", fontsize=9)
        for ax in (tps_ax, lat_ax):
            ax.set_ylim(bottom=0)
            ax.grid(True, alpha=0.3)
            mark_events(ax, in_window(r), labels=ax is tps_ax)
    for ax in rows[-1]:
        ax.set_xlabel(TIME_LABEL)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside right upper", frameon=False, title="pool")
    return fig


def mark_events(ax, events: list[Event], *, labels: bool) -> None:
    """A dashed vertical line at each event's time; with `labels`, its source and kind written along it
    (one label for events closer than 2% of the axis, which would otherwise print over each other)."""
    for e in events:
        ax.axvline(e.t_s, color="#555555", linestyle="--", linewidth=0.8, alpha=0.8)
    if labels and events:
        low, high = ax.get_xlim()
        for t, text in label_groups(events, 0.02 * (high - low)):
            ax.text(t, 0.98, f" {text}", transform=ax.get_xaxis_transform(), rotation=90, fontsize=6,
                    va="top", ha="right", color="#333333")


def label_groups(events: list[Event], close: float) -> list[tuple[float, str]]:
    """The events' labels, those within `close` seconds of the previous one joined into one: [(t_s, text)]."""
    groups: list[tuple[float, list[str]]] = []
    last = None
    for e in sorted(events, key=lambda e: e.t_s):
        text = f"{e.source.partition(':')[2]} {e.kind.replace('_', ' ')}"
        if last is not None and e.t_s - last <= close:
            if text not in groups[-1][1]:
                groups[-1][1].append(text)
        else:
            groups.append((e.t_s, [text]))
        last = e.t_s
    return [(t, "; ".join(texts)) for t, texts in groups]
