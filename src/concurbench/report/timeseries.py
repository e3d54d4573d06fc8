"""Periodic samplers over time: one figure per sampler, group and sweep point.

A sampler whose rows count something by category (wait_events: `wait`, `sessions`; tempdb_latches:
`latch`, `tasks`) is drawn as stacked areas, one panel per variant run: at each sample time the
layers are the counts of the top categories (over the figure's panels) and "other" for the rest.
A sampler of numeric columns only (mssql_counters, snapshot_transactions) gets one panel per
column, since each column has its own unit, with one line per variant run.

A run with repeats shows its first repeat (the title says so): each variant run's samples are its
own, never the repeats one after the other.
"""

from __future__ import annotations

import pandas as pd

from ..errors import ConfigError
from ..results.model import Run, VariantRun
from .chart_style import OTHER, Context, colors, grid, slug, top_keys

TOP = 8  # categories drawn before "other"
TIME = "t_s"
TIME_LABEL = "time in measurement window (s)"
UNITS = {"sessions": "sessions (count)", "tasks": "waiting tasks (count)"}


def series_figures(plt, ctx: Context, run: Run) -> list[tuple[str, object]]:
    first = [r for r in run.variant_runs if r.repeat == 1]
    names: list[str] = []
    for r in first:
        names.extend(n for n in r.samples if r.samples[n] and n not in names)
    figures = []
    for name in names:
        for group in ctx.groups:
            runs = [r for r in first if r.group == group and r.samples.get(name)]
            for point in dict.fromkeys(r.point for r in runs):
                panels = [(r, pd.DataFrame.from_records(r.samples[name])) for r in runs if r.point == point]
                stem = f"{slug(name)}-{slug(group)}" + (f"-{point}clients" if point is not None else "")
                what = f"{name.replace('_', ' ')} over time — {group}" + (
                    f", {point} clients" if point is not None else "")
                title = ctx.title(what, note=f"repeat 1 of {run.repeat}" if run.repeat > 1 else "")
                figures.extend(_figures(plt, ctx, name, stem, title, panels))
    return figures


def _figures(plt, ctx: Context, name: str, stem: str, title: str, panels: list[tuple[VariantRun, pd.DataFrame]]):
    rows = pd.concat([frame for _, frame in panels], ignore_index=True)
    if TIME not in rows.columns:
        raise ConfigError(f"samples/{name}.csv: cannot plot it, missing column {TIME}")
    columns = [c for c in rows.columns if c != TIME]
    numeric = [c for c in columns if pd.api.types.is_numeric_dtype(rows[c]) and rows[c].notna().any()]
    category = [c for c in columns if c not in numeric and not pd.api.types.is_numeric_dtype(rows[c])]
    if not numeric:
        raise ConfigError(f"samples/{name}.csv: no numeric column to plot")
    if len(category) == 1:
        return [(stem + (f"-{slug(value)}" if len(numeric) > 1 else ""),
                 stacked(plt, ctx, panels, category[0], value, title)) for value in numeric]
    return [(stem, lines(plt, ctx, panels, numeric, title))]


def stacked_frame(frame: pd.DataFrame, category: str, value: str) -> pd.DataFrame:
    """Sample time x category: the value summed per time and category, 0 where a category was not seen."""
    return frame.pivot_table(index=TIME, columns=category, values=value, aggfunc="sum", fill_value=0, sort=True)


def stacked(plt, ctx: Context, panels, category: str, value: str, title: str):
    wide = [(r, stacked_frame(frame, category, value)) for r, frame in panels]
    totals: dict[str, float] = {}
    for _, table in wide:
        for key, total in table.sum().items():
            totals[key] = totals.get(key, 0.0) + float(total)
    top, keys = top_keys(totals, TOP)
    palette = colors(plt, keys)
    fig, axes, rows = grid(plt, len(wide), title)
    highest = 0.0
    for ax, (r, table) in zip(axes, wide):
        layers = table.reindex(columns=top, fill_value=0)
        if OTHER in keys:
            layers[OTHER] = table.drop(columns=top, errors="ignore").sum(axis=1)
        # each sample holds until halfway to the next: a count seen at an instant, not a slope between two
        ax.stackplot(layers.index.to_numpy(dtype=float), layers.to_numpy(dtype=float).T, labels=keys,
                     colors=[palette[k] for k in keys], linewidth=0, step="mid")
        highest = max(highest, float(layers.sum(axis=1).max()))
        ax.set_title(ctx.run_label(r, with_point=False), fontsize=9)
        ax.grid(True, alpha=0.3)
    # the panels share their y axis: its limits come from the highest stack of all, not the first panel's
    axes[0].set_ylim(0, highest * 1.05 or 1)
    for row in rows:
        row[0].set_ylabel(UNITS.get(value, value))
    for ax in rows[-1]:
        ax.set_xlabel(TIME_LABEL)
    handles = [plt.Rectangle((0, 0), 1, 1, color=palette[k]) for k in keys]
    fig.legend(handles, keys, loc="outside right upper", frameon=False, title=category)
    return fig


def lines(plt, ctx: Context, panels, numeric: list[str], title: str):
    fig, axes, rows = grid(plt, len(numeric), title, sharey=False)
    palette = colors(plt, [ctx.run_label(r, with_point=False) for r, _ in panels])
    for ax, column in zip(axes, numeric):
        for r, frame in panels:
            label = ctx.run_label(r, with_point=False)
            if column in frame.columns:
                data = frame.sort_values(TIME)
                ax.plot(data[TIME].to_numpy(dtype=float), data[column].to_numpy(dtype=float), label=label,
                        color=palette[label], marker="." if len(data) < 30 else None)
        ax.set_title(column.replace("_", " "), fontsize=9)
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    for ax in rows[-1]:
        ax.set_xlabel(TIME_LABEL)
    fig.legend(*axes[0].get_legend_handles_labels(), loc="outside right upper", frameon=False, title="variant run")
    return fig
