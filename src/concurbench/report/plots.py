"""Charts of a stored run, ready to paste into a post (PNG at 150 dpi and SVG with real text).

    throughput-<group>.png         TPS against client count, one line per variant (and server); sweep groups only
    latency-<group>.png            p50/p95/p99 per variant run of the group, in ms
    over-time-<group>[-<N>clients].png
                                   throughput and mean latency per 100 ms of each pool, a row per variant run,
                                   the timeline's events as labelled vertical lines (report/overtime.py);
                                   the same figures in over-time-<group>[-<N>clients].csv
    <sampler>-<group>[-<N>clients].png
                                   a periodic sampler over time (report/timeseries.py): wait events as
                                   sessions stacked by wait (top 8 and "other"), one panel per variant run
    wait-profile-<group>.png       share of sampled sessions by wait, one horizontal bar per variant run

With repeats, bars and points are means and error bars their 95% intervals; time series show the
first repeat. matplotlib, a base dependency, is imported when plots are asked for, with the Agg backend.
"""

from __future__ import annotations

import math
from pathlib import Path

from ..errors import ConfigError
from ..results.model import Run, VariantRun
from ..samplers.postgres import WaitEvents
from ..results.store import load_run
from .chart_style import DPI, FIGSIZE, OTHER, RC, Context, colors, pyplot, slug, thousands, top_keys, wrap
from .repeats import cell_stats, collapse
from .overtime import over_time_figures, over_time_tables
from .timeseries import series_figures

TOP_WAITS = 8
PERCENTILES = (("p50_ms", "p50"), ("p95_ms", "p95"), ("p99_ms", "p99"))


def write_plots(run_dir: Path, out_dir: Path | None = None, formats=("png", "svg")) -> list[Path]:
    """Write every chart that applies to the run in `run_dir`; returns the files written."""
    run_dir = Path(run_dir)
    formats = tuple(formats)
    unknown = [f for f in formats if f not in ("png", "svg", "pdf")]
    if not formats or unknown:
        raise ConfigError(f"plot formats must be among png, svg, pdf (got {', '.join(map(str, formats)) or 'none'})")
    run = load_run(run_dir)
    plt = pyplot()
    out_dir = Path(out_dir) if out_dir is not None else run_dir / "plots"
    out_dir.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    with plt.rc_context(RC):
        for stem, fig in figures(plt, run):
            try:
                for fmt in formats:
                    path = out_dir / f"{stem}.{fmt}"
                    fig.savefig(path, format=fmt, dpi=DPI if fmt == "png" else None)
                    written.append(path)
            finally:
                plt.close(fig)
    for stem, table in over_time_tables(run):
        path = out_dir / f"{stem}.csv"
        table.to_csv(path, index=False)
        written.append(path)
    return written


def figures(plt, run: Run) -> list[tuple[str, object]]:
    """Every chart that applies to the run, as (file stem, matplotlib figure); the caller closes them."""
    if not run.variant_runs:
        raise ConfigError(f"{Path(run.path or '') / 'summary.json'}: no variant runs to plot (empty `results`)")
    results = collapse(run.variant_runs)  # repeats folded: means, with their intervals as error bars
    ctx = Context(run, results)
    out = []
    for group in ctx.groups:
        runs = [r for r in results if r.group == group]
        out.append((f"throughput-{slug(group)}", _throughput(plt, ctx, group, runs)))
        out.append((f"latency-{slug(group)}", _latency(plt, ctx, group, runs)))
    first = Context(run, [r for r in run.variant_runs if r.repeat == 1])
    out.extend(over_time_figures(plt, first, run))
    out.extend(series_figures(plt, first, run))
    for group in ctx.groups:
        out.append((f"wait-profile-{slug(group)}", _wait_profile(plt, ctx, group,
                                                                 [r for r in results if r.group == group])))
    return [(stem, fig) for stem, fig in out if fig is not None]


def _half(r: VariantRun, pool: str, metric: str) -> float:
    s = cell_stats(r, pool, metric)
    return float(s["ci95"]) if s and s.get("ci95") is not None else 0.0


def _no_negative(values: list[float], halves: list[float]):
    """Error bars of quantities that cannot be negative (throughput, latency): an interval reaching below
    0 stops at 0. None when there are none (single runs)."""
    if not any(halves):
        return None
    return [[min(h, v) if v == v else 0.0 for v, h in zip(values, halves)], list(halves)]


def _measured(r: VariantRun) -> list[tuple[str, dict]]:
    """The measured pools (the first pool where none is), each with its own figures by name."""
    pools = [p for p, d in r.pools.items() if d.measure] or [r.first_measured().name]
    return [(p, r.own(p)) for p in pools]


def _throughput(plt, ctx: Context, group: str, runs: list[VariantRun]):
    points = {r.point for r in runs if r.point is not None}
    if len(points) < 2:
        return None
    lines: dict[str, list[tuple[float, float, float]]] = {}
    for r in runs:
        if r.point is None:
            continue
        for pool, metrics in _measured(r):
            tps = metrics.get("tps")
            if tps is None:
                continue
            label = r.variant + (f" [{pool}]" if len(_measured(r)) > 1 else "")
            if ctx.multi_server:
                label += f" ({r.server or '?'})"
            lines.setdefault(label, []).append((r.point, tps, _half(r, pool, "tps")))
    if not lines:
        raise ConfigError(f"group {group}: a sweep but no TPS figures to plot")
    fig, ax = plt.subplots(figsize=FIGSIZE, layout="constrained")
    # error bars of several lines at one client count are set a little apart, so that each can be read
    step = 0.012 * (max(points) - min(points)) if any(e for xy in lines.values() for _, _, e in xy) else 0.0
    for i, (label, xy) in enumerate(lines.items()):
        xy.sort()
        errors = [e for _, _, e in xy]
        shift = (i - (len(lines) - 1) / 2) * step
        ys = [y for _, y, _ in xy]
        ax.errorbar([x + shift for x, _, _ in xy], ys, yerr=_no_negative(ys, errors), marker="o", capsize=3,
                    label=label)
    ax.set_xlabel("clients (concurrent sessions)")
    ax.set_ylabel("throughput (transactions/s)")
    ax.set_xticks(sorted(points))
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.yaxis.set_major_formatter(thousands())
    ax.set_title(ctx.title(f"throughput against clients — {group}", means=True, intervals=True))
    fig.legend(loc="outside right upper", frameon=False)
    return fig


def _latency(plt, ctx: Context, group: str, runs: list[VariantRun]):
    bars = []
    for r in runs:
        pools = _measured(r)
        for pool, metrics in pools:
            values = [metrics.get(f"latency.{key}") for key, _ in PERCENTILES]
            if all(v is None for v in values):
                continue
            label = ctx.run_label(r) + (f" [{pool}]" if len(pools) > 1 else "")
            bars.append((label, [v if v is not None else math.nan for v in values],
                         [_half(r, pool, f"latency.{key}") for key, _ in PERCENTILES]))
    if not bars:
        return None
    # a percentile no run could give (too few transactions beyond it) gets no empty slot or legend entry
    shown = [i for i in range(len(PERCENTILES)) if any(b[1][i] == b[1][i] for b in bars)]
    fig, ax = plt.subplots(figsize=FIGSIZE, layout="constrained")
    width = 0.8 / len(shown)
    for slot, i in enumerate(shown):
        xs = [j + (slot - (len(shown) - 1) / 2) * width for j in range(len(bars))]
        values = [b[1][i] for b in bars]
        errors = [b[2][i] for b in bars]
        ax.bar(xs, values, width, label=PERCENTILES[i][1], yerr=_no_negative(values, errors), capsize=2,
               color=f"C{i}")
    finite = [v for _, vals, _ in bars for v in vals if v == v and v > 0]
    log = bool(finite) and max(finite) / min(finite) > 50
    if log:
        from matplotlib.ticker import FuncFormatter, LogLocator

        ax.set_yscale("log")
        ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))  # 1 2 5 10 20 50...: values can be read
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,g}"))
    else:
        ax.yaxis.set_major_formatter(thousands())
        ax.set_ylim(bottom=0)
    ax.set_ylabel("transaction latency (ms" + (", log scale)" if log else ")"))
    ax.set_xlabel("variant run")
    ax.set_xticks(range(len(bars)))
    ax.set_xticklabels([wrap(b[0]) for b in bars], rotation=30 if len(bars) > 4 else 0,
                       ha="right" if len(bars) > 4 else "center")
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(ctx.title(f"latency percentiles — {group}", means=True, intervals=True))
    fig.legend(loc="outside right upper", frameon=False, title="percentile")
    return fig


def _wait_profile(plt, ctx: Context, group: str, runs: list[VariantRun]):
    shares = []
    for r in runs:
        share = WaitEvents.shares(r.whole())
        if share:
            shares.append((ctx.run_label(r), share))
    if not shares:
        return None
    totals: dict[str, float] = {}
    for _, share in shares:
        for w, s in share.items():
            totals[w] = totals.get(w, 0.0) + s
    top, keys = top_keys(totals, TOP_WAITS)
    palette = colors(plt, keys)
    height = max(FIGSIZE[1], 0.45 * len(shares) + 1.6)
    fig, ax = plt.subplots(figsize=(FIGSIZE[0], height), layout="constrained")
    ys = list(range(len(shares)))[::-1]  # first run on top
    left = [0.0] * len(shares)
    for k in keys:
        widths = [100 * (sum(s for w, s in share.items() if w not in top) if k == OTHER else share.get(k, 0.0))
                  for _, share in shares]
        ax.barh(ys, widths, left=left, color=palette[k], label=k, height=0.7)
        for y, x0, w in zip(ys, left, widths):
            if w >= 10:  # narrower segments have no room for their label
                ax.text(x0 + w / 2, y, f"{w:.0f}%", ha="center", va="center", fontsize=7,
                        color="white" if k != OTHER else "black")
        left = [a + b for a, b in zip(left, widths)]
    ax.set_yticks(ys)
    ax.set_yticklabels([label for label, _ in shares])
    if len(shares) < 3:  # one or two bars would fill the whole height
        ax.set_ylim(-1, len(shares))
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of sampled non-idle sessions (%)")
    ax.set_ylabel("variant run")
    ax.set_title(ctx.title(f"wait-event profile — {group}", means=True))
    fig.legend(loc="outside right upper", frameon=False, title="wait")
    return fig


