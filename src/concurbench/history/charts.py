"""Charts of the series that have a change point: each run's mean with its 95% interval, the levels
between change points as steps, a vertical line at each change (dashed when confirmed, dotted for a
candidate), and the runs that failed or ended early as grey crosses on the level they reported."""

from __future__ import annotations

import io
from html import escape
from pathlib import Path

from ..report.chart_style import DPI, RC, pyplot, slug
from ..report.html import inline_svg, page_head, table_html
from ..report.tables import Report
from .analysis import Analysis, Order, Series
from .render import label

FIGSIZE = (8.0, 3.6)
MAX_TICKS = 14


def charted(a: Analysis) -> list[Series]:
    return [s for s in a.series if s.changes]


def figure(plt, s: Series, order: str):
    fig, ax = plt.subplots(figsize=FIGSIZE, dpi=DPI)
    xs = list(range(len(s.points)))
    kept = [(x, p) for x, p in zip(xs, s.points) if p.included]
    left = [(x, p) for x, p in zip(xs, s.points) if not p.included]
    if kept:
        means = [p.mean for _, p in kept]
        low = [p.mean - (p.low if p.low is not None else p.mean) for _, p in kept]
        high = [(p.high if p.high is not None else p.mean) - p.mean for _, p in kept]
        ax.errorbar([x for x, _ in kept], means, yerr=[low, high], fmt="o", ms=3.5, lw=0.8, capsize=2,
                    color="#1f5fa8", label="run mean, 95% interval")
    if left:
        ax.plot([x for x, _ in left], [p.mean for _, p in left], "x", color="#999999",
                label="failed or ended early (left out)")
    positions = [x for x, _ in kept]
    cuts = [0, *[c.index for c in s.changes], len(kept)]
    for i in range(len(cuts) - 1):
        seg = kept[cuts[i]:cuts[i + 1]]
        if seg:
            level = sum(p.mean for _, p in seg) / len(seg)
            ax.hlines(level, seg[0][0] - 0.4, seg[-1][0] + 0.4, colors="#d1495b", lw=1.4,
                      label="level between changes" if i == 0 else None)
    for c in s.changes:
        x = (positions[c.index - 1] + positions[c.index]) / 2
        ax.axvline(x, color="#d1495b", lw=1, ls="--" if c.confirmed else ":")
        ax.annotate(f"{c.status} {_pct(c.change)}", (x, 1), xycoords=("data", "axes fraction"), fontsize=7,
                    ha="left", va="top", rotation=90, color="#d1495b")
    step = max(1, len(xs) // MAX_TICKS)
    ax.set_xticks(xs[::step])
    ax.set_xticklabels([_tick(p, order) for p in s.points][::step], rotation=30, ha="right", fontsize=7)
    ax.set_ylabel(s.key.metric if len(s.key.metric) < 40 else s.key.metric[:37] + "...")
    ax.set_title(f"{label(s.key)}\n{s.key.metric}", fontsize=9)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    return fig


def _tick(p, order: str) -> str:
    when = p.run.record.started[5:16].replace("T", " ")
    return p.server if order is Order.VERSION else f"{when} {p.server}" if order is Order.TRACK else when


def _pct(change) -> str:
    return "from 0" if change is None else f"{change:+.0%}"


def write_charts(a: Analysis, out_dir: Path, formats=("png", "svg")) -> list[Path]:
    """One chart per series with a change point, under out_dir; the files written."""
    plt = pyplot()
    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    with plt.rc_context(RC):
        for n, s in enumerate(charted(a), 1):
            fig = figure(plt, s, a.order)
            stem = f"{n:03d}-{slug(label(s.key))}-{slug(s.key.metric)}"[:120]
            for fmt in formats:
                path = out_dir / f"{stem}.{fmt}"
                fig.savefig(path, format=fmt)
                written.append(path)
            plt.close(fig)
    return written


def html_page(a: Analysis, report: Report) -> str:
    """The report's tables and every chart, inline SVG, as one self-contained page."""
    findings, changes = report.tables[0], report.tables[1]
    out = page_head(report) + ["</ul>"] + (table_html(findings) if findings.rows else []) + table_html(changes)
    series = charted(a)
    out.append("<h2>Series with a change point</h2>")
    if not series:
        out.append('<p class="note">None: no chart to draw.</p>')
    else:
        plt = pyplot()
        with plt.rc_context(RC):
            for n, s in enumerate(series, 1):
                fig = figure(plt, s, a.order)
                buf = io.StringIO()
                fig.savefig(buf, format="svg")
                plt.close(fig)
                out += ["<figure>", inline_svg(buf.getvalue(), f"s{n}-"),
                        f"<figcaption>{escape(label(s.key))}: {escape(s.key.metric)}</figcaption>", "</figure>"]
    for table in report.tables[2:]:
        if table.rows:
            out += table_html(table)
    out += ["</body>", "</html>", ""]
    return "\n".join(out)
