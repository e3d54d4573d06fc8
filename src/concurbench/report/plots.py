"""Charts of a stored run, ready to paste into a post (PNG at 150 dpi and SVG with real text).

    throughput-<group>.png         TPS against client count, one line per variant (and server); sweep groups only
    latency-<group>.png            p50/p95/p99 per variant run of the group, in ms
    <sampler>-<group>[-<N>clients].png
                                   a periodic sampler over time, one panel per variant run (wait events:
                                   stacked sessions by wait, top 8 waits and "other")
    wait-profile-<group>.png       share of sampled sessions by wait, one horizontal bar per variant run

With repeats, bars and points are means and error bars their 95% intervals; time series show the
first repeat. matplotlib is optional: it is imported when plots are asked for, with the Agg backend.
"""

from __future__ import annotations

import csv
import math
import re
from pathlib import Path

from ..errors import ConfigError
from ..results.model import Run, VariantRun
from ..results.store import load_run
from .repeats import cell_stats, collapse
from .tables import ENGINE_NAMES

FIGSIZE = (8.0, 4.5)
DPI = 150
TOP_WAITS = 8
OTHER = "other"
PERCENTILES = (("p50_ms", "p50"), ("p95_ms", "p95"), ("p99_ms", "p99"))
KEY_COLUMNS = ("variant", "point", "server", "t_s")


def write_plots(run_dir: Path, out_dir: Path | None = None, formats=("png", "svg")) -> list[Path]:
    """Write every chart that applies to the run in `run_dir`; returns the files written."""
    run_dir = Path(run_dir)
    formats = tuple(formats)
    unknown = [f for f in formats if f not in ("png", "svg", "pdf")]
    if not formats or unknown:
        raise ConfigError(f"plot formats must be among png, svg, pdf (got {', '.join(map(str, formats)) or 'none'})")
    run = _load(run_dir)
    results = collapse(run.variant_runs)  # repeats folded: means, with their intervals as error bars
    first = [r for r in run.variant_runs if r.repeat == 1]  # time series: the first repeat's
    plt = _pyplot()
    out_dir = Path(out_dir) if out_dir is not None else run_dir / "plots"
    out_dir.mkdir(parents=True, exist_ok=True)
    ctx = _Context(run, results)
    written: list[Path] = []
    rc = {"svg.fonttype": "none", "font.size": 9, "axes.titlesize": 10, "figure.titlesize": 11,
          "axes.spines.top": False, "axes.spines.right": False}
    with plt.rc_context(rc):
        figures = []
        for group in ctx.groups:
            runs = [r for r in results if r.group == group]
            figures.append((f"throughput-{_slug(group)}", _throughput(plt, ctx, group, runs)))
            figures.append((f"latency-{_slug(group)}", _latency(plt, ctx, group, runs)))
        series_ctx = _Context(run, first)
        for name, rows in _samples(run_dir).items():
            rows = [row for row in rows if str(row.get("repeat") or 1) == "1"]
            if rows:
                figures.extend(_timeseries(plt, series_ctx, name, rows))
        for group in ctx.groups:
            figures.append((f"wait-profile-{_slug(group)}",
                            _wait_profile(plt, ctx, group, [r for r in results if r.group == group])))
        for stem, fig in figures:
            if fig is None:
                continue
            try:
                for fmt in formats:
                    path = out_dir / f"{stem}.{fmt}"
                    fig.savefig(path, format=fmt, dpi=DPI if fmt == "png" else None)
                    written.append(path)
            finally:
                plt.close(fig)
    return written


# Loading ---------------------------------------------------------------------------------------------

def _pyplot():
    try:
        import matplotlib
    except ImportError as exc:
        raise ConfigError("plots need matplotlib: pip install matplotlib", cause=exc) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _load(run_dir: Path) -> Run:
    run = load_run(run_dir)
    if not run.variant_runs:
        raise ConfigError(f"{run_dir / 'summary.json'}: no variant runs to plot (empty `results`)")
    return run


def _samples(run_dir: Path) -> dict[str, list[dict]]:
    out = {}
    for path in sorted((run_dir / "samples").glob("*.csv")):
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            rows = list(reader)
            columns = reader.fieldnames or []
        missing = [c for c in ("variant", "point", "t_s") if c not in columns]
        if missing:
            raise ConfigError(f"{path}: cannot plot it, missing column(s) {', '.join(missing)}")
        if rows:
            out[path.stem] = rows
    return out


class _Context:
    def __init__(self, run: Run, results: list[VariantRun]):
        scen = run.scenario
        self.scenario = scen.name + (" (quick)" if scen.quick else "")
        versions = [s.version_short or "?" for s in run.servers]
        if not versions:
            versions = sorted({str(r.server) for r in results if r.server})
        engine = ENGINE_NAMES.get(scen.engine or "postgres", "")
        self.server_label = f"{engine} " + ", ".join(versions) if versions else "server not recorded"
        if run.repeat > 1:
            self.server_label += f"; means of {run.repeat} repeats, bars: 95% interval"
        self.results = results
        self.multi_server = len({r.server for r in results}) > 1
        self.groups: list[str] = []
        for r in results:
            if r.group not in self.groups:
                self.groups.append(r.group)

    def title(self, what: str) -> str:
        return f"{self.scenario}: {what}\n{self.server_label}"

    def run_label(self, r: VariantRun, with_point: bool = True) -> str:
        label = r.variant
        if with_point and r.point is not None:
            label += f" @ {r.point} client{'' if r.point == 1 else 's'}"
        if self.multi_server and r.server:
            label += f" ({r.server})"
        return label


# Charts ----------------------------------------------------------------------------------------------

def _half(r: dict, pool: str, metric: str) -> float:
    s = cell_stats(r, pool, metric)
    return float(s["ci95"]) if s and s.get("ci95") is not None else 0.0


def _measured(r: VariantRun) -> list[tuple[str, dict]]:
    pools = [(p, d.metrics) for p, d in r.pools.items() if d.measure]
    return pools or [(r.first_measured().name, r.first_measured().metrics)]


def _throughput(plt, ctx: _Context, group: str, runs: list[dict]):
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
    for label, xy in lines.items():
        xy.sort()
        errors = [e for _, _, e in xy]
        ax.errorbar([x for x, _, _ in xy], [y for _, y, _ in xy], yerr=errors if any(errors) else None,
                    marker="o", capsize=3, label=label)
    ax.set_xlabel("clients (concurrent sessions)")
    ax.set_ylabel("throughput (transactions/s)")
    ax.set_xticks(sorted(points))
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.yaxis.set_major_formatter(_thousands())
    ax.set_title(ctx.title(f"throughput against clients — {group}"))
    fig.legend(loc="outside right upper", frameon=False)
    return fig


def _latency(plt, ctx: _Context, group: str, runs: list[dict]):
    bars = []
    for r in runs:
        pools = _measured(r)
        for pool, metrics in pools:
            lat = metrics.get("latency") or {}
            values = [lat.get(key) for key, _ in PERCENTILES]
            if all(v is None for v in values):
                continue
            label = ctx.run_label(r) + (f" [{pool}]" if len(pools) > 1 else "")
            bars.append((label, [v if v is not None else math.nan for v in values],
                         [_half(r, pool, f"latency.{key}") for key, _ in PERCENTILES]))
    if not bars:
        return None
    fig, ax = plt.subplots(figsize=FIGSIZE, layout="constrained")
    width = 0.8 / len(PERCENTILES)
    for i, (_, name) in enumerate(PERCENTILES):
        xs = [j + (i - (len(PERCENTILES) - 1) / 2) * width for j in range(len(bars))]
        errors = [b[2][i] for b in bars]
        ax.bar(xs, [b[1][i] for b in bars], width, label=name, yerr=errors if any(errors) else None, capsize=2)
    finite = [v for _, vals, _ in bars for v in vals if v == v and v > 0]
    log = bool(finite) and max(finite) / min(finite) > 50
    if log:
        from matplotlib.ticker import FuncFormatter

        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_ylabel("transaction latency (ms" + (", log scale)" if log else ")"))
    ax.set_xlabel("variant run")
    ax.set_xticks(range(len(bars)))
    ax.set_xticklabels([_wrap(b[0]) for b in bars], rotation=30 if len(bars) > 4 else 0,
                       ha="right" if len(bars) > 4 else "center")
    ax.grid(True, axis="y", alpha=0.3)
    ax.set_title(ctx.title(f"latency percentiles — {group}"))
    fig.legend(loc="outside right upper", frameon=False, title="percentile")
    return fig


def _timeseries(plt, ctx: _Context, name: str, rows: list[dict]) -> list[tuple[str, object]]:
    """One figure per sampler, group and sweep point; one panel per variant run."""
    columns = [c for c in rows[0] if c not in KEY_COLUMNS]
    numeric = [c for c in columns if all(_number(r.get(c)) is not None for r in rows if r.get(c) not in ("", None))]
    category = [c for c in columns if c not in numeric]
    if not numeric:
        raise ConfigError(f"samples/{name}.csv: no numeric column to plot")
    series = _assign(rows, ctx)
    figures = []
    for group in ctx.groups:
        points: list = []
        for r, _ in series:
            if r.group == group and r.point not in points:
                points.append(r.point)
        for point in points:
            panels = [(r, rs) for r, rs in series if r.group == group and r.point == point]
            stem = f"{_slug(name)}-{_slug(group)}" + (f"-{point}clients" if point is not None else "")
            what = f"{name.replace('_', ' ')} over time — {group}" + (f", {point} clients" if point is not None else "")
            if len(category) == 1 and len(numeric) == 1:
                fig = _stacked_panels(plt, ctx, panels, category[0], numeric[0], what)
            else:
                fig = _line_panels(plt, ctx, panels, numeric, what)
            figures.append((stem, fig))
    return figures


def _assign(rows: list[dict], ctx: _Context) -> list[tuple[dict, list[dict]]]:
    """Match sample rows to variant runs: by server when the CSV says it, else by order of appearance
    (a version matrix writes the runs of one variant and point one after the other)."""
    results = ctx.results
    blocks: list[tuple[tuple, list[dict]]] = []
    for row in rows:
        key = (row["variant"], row.get("point") or "", row.get("server") or "")
        if not blocks or blocks[-1][0] != key:
            blocks.append((key, []))
        blocks[-1][1].append(row)
    used: set[int] = set()
    out = []
    for key, block in blocks:
        for i, r in enumerate(results):
            rkey = (r.variant, "" if r.point is None else str(r.point), str(r.server or "") if key[2] else "")
            if i not in used and rkey == key:
                used.add(i)
                out.append((r, block))
                break
    return out


def _grid(plt, n: int, what: str, ctx: _Context):
    ncols = 1 if n == 1 else 2
    nrows = math.ceil(n / ncols)
    height = max(FIGSIZE[1], 2.4 * nrows + 1.2)
    fig, axes = plt.subplots(nrows, ncols, figsize=(FIGSIZE[0], height), sharex=True, sharey=True,
                             squeeze=False, layout="constrained")
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    fig.suptitle(ctx.title(what))
    return fig, flat[:n], axes


def _stacked_panels(plt, ctx, panels, cat: str, value: str, what: str):
    totals: dict[str, float] = {}
    for _, rows in panels:
        for row in rows:
            totals[row[cat]] = totals.get(row[cat], 0.0) + (_number(row[value]) or 0.0)
    ranked = sorted(totals, key=lambda k: (-totals[k], k))
    top = ranked[:TOP_WAITS]
    keys = top + ([OTHER] if len(ranked) > TOP_WAITS else [])
    colors = _colors(plt, keys)
    fig, axes, grid = _grid(plt, len(panels), what, ctx)
    for ax, (r, rows) in zip(axes, panels):
        times = sorted({_number(row["t_s"]) for row in rows})
        index = {t: i for i, t in enumerate(times)}
        stack = {k: [0.0] * len(times) for k in keys}
        for row in rows:
            k = row[cat] if row[cat] in top else OTHER
            stack[k][index[_number(row["t_s"])]] += _number(row[value]) or 0.0
        ax.stackplot(times, [stack[k] for k in keys], colors=[colors[k] for k in keys], labels=keys, linewidth=0)
        ax.set_title(ctx.run_label(r, with_point=False), fontsize=9)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    unit = "sessions" if value == "sessions" else value
    for row in grid:
        row[0].set_ylabel(f"{unit} (count)" if unit == "sessions" else unit)
    for ax in grid[-1]:
        ax.set_xlabel("time in measurement window (s)")
    for ax in axes:  # panels above a hidden one keep their tick labels
        ax.tick_params(labelbottom=True)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[k]) for k in keys]
    fig.legend(handles, keys, loc="outside right upper", frameon=False, title=cat)
    return fig


def _line_panels(plt, ctx, panels, numeric: list[str], what: str):
    fig, axes, grid = _grid(plt, len(panels), what, ctx)
    for ax, (r, rows) in zip(axes, panels):
        times = [_number(row["t_s"]) for row in rows]
        for col in numeric:
            ax.plot(times, [_number(row.get(col)) for row in rows], label=col)
        ax.set_title(ctx.run_label(r, with_point=False), fontsize=9)
        ax.grid(True, alpha=0.3)
    for ax in grid[-1]:
        ax.set_xlabel("time in measurement window (s)")
    for row in grid:
        row[0].set_ylabel("value")
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside right upper", frameon=False)
    return fig


def _wait_profile(plt, ctx: _Context, group: str, runs: list[dict]):
    shares = []
    for r in runs:
        share = (r.samplers.get("wait_events") or {}).get("share")
        if share:
            shares.append((ctx.run_label(r), share))
    if not shares:
        return None
    totals: dict[str, float] = {}
    for _, share in shares:
        for w, s in share.items():
            totals[w] = totals.get(w, 0.0) + s
    ranked = sorted(totals, key=lambda k: (-totals[k], k))
    top = ranked[:TOP_WAITS]
    keys = top + ([OTHER] if len(ranked) > TOP_WAITS else [])
    colors = _colors(plt, keys)
    height = max(FIGSIZE[1], 0.45 * len(shares) + 1.6)
    fig, ax = plt.subplots(figsize=(FIGSIZE[0], height), layout="constrained")
    ys = list(range(len(shares)))[::-1]  # first run on top
    left = [0.0] * len(shares)
    for k in keys:
        widths = [100 * (sum(s for w, s in share.items() if w not in top) if k == OTHER else share.get(k, 0.0))
                  for _, share in shares]
        ax.barh(ys, widths, left=left, color=colors[k], label=k, height=0.7)
        for y, x0, w in zip(ys, left, widths):
            if w >= 8:
                ax.text(x0 + w / 2, y, f"{w:.0f}%", ha="center", va="center", fontsize=7,
                        color="white" if k != OTHER else "black")
        left = [a + b for a, b in zip(left, widths)]
    ax.set_yticks(ys)
    ax.set_yticklabels([label for label, _ in shares])
    ax.set_xlim(0, 100)
    ax.set_xlabel("share of sampled non-idle sessions (%)")
    ax.set_ylabel("variant run")
    ax.set_title(ctx.title(f"wait-event profile — {group}"))
    fig.legend(loc="outside right upper", frameon=False, title="wait")
    return fig


# Helpers ---------------------------------------------------------------------------------------------

def _colors(plt, keys: list[str]) -> dict[str, object]:
    palette = plt.get_cmap("tab10").colors
    out = {}
    i = 0
    for k in keys:
        if k == OTHER:
            out[k] = "#b0b0b0"
        else:
            out[k] = palette[i % len(palette)] if palette[i % len(palette)] != palette[7] else palette[9]
            i += 1
    return out


def _thousands():
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _: f"{v:,.0f}")


def _number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def _wrap(label: str) -> str:
    return label.replace(" @ ", "\n@ ") if len(label) > 18 else label


def _slug(text) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(text)).strip("_") or "all"
