"""One self-contained HTML page of a stored run: the report lines, every table, its notes, the
warnings and the charts, with the style inline and the charts embedded (SVG as markup, PNG as a
base64 data URI), so the file can be mailed or attached on its own.
"""

from __future__ import annotations

import base64
import re
from html import escape
from pathlib import Path

from .. import __version__
from ..results.model import Run
from .render import numeric_columns
from .tables import Report, build_report

NO_MATPLOTLIB = "matplotlib is not installed (concurbench's install brings it; pip install 'matplotlib>=3.7' adds it)"

STYLE = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d1d1f;
       max-width: 1200px; margin: 2em auto; padding: 0 1em; }
h1 { font-size: 1.5em; margin-bottom: .3em; }
h2 { font-size: 1.15em; margin: 1.6em 0 .4em; }
ul.lines { list-style: none; padding: 0; color: #444; }
table { border-collapse: collapse; margin: .3em 0; font-variant-numeric: tabular-nums; }
th, td { border-bottom: 1px solid #ddd; padding: .25em .6em; text-align: left; vertical-align: top; }
th { border-bottom: 2px solid #999; }
.num { text-align: right; white-space: nowrap; }
p.note { color: #555; font-style: italic; margin: .3em 0; }
.warnings li { color: #8a4b00; }
figure { margin: 1.5em 0; }
figure svg, figure img { max-width: 100%; height: auto; }
figcaption { color: #555; font-size: .9em; }
footer { margin-top: 3em; color: #888; font-size: .85em; }
"""


def html_page(run: Run, *, plots: list[Path] | None, no_charts_reason: str | None = None) -> str:
    """The page as text. `plots` are the chart files written (PNG and/or SVG; SVG is preferred when
    both exist); None means no charts were drawn, for `no_charts_reason` (default: no matplotlib)."""
    report = build_report(run)
    out = page_head(report)
    source = run.scenario.source
    url = source.url or ""
    if url.startswith(("https://", "http://")):
        out.append(f'<li>Source: <a href="{escape(url)}">{escape(source.title or url)}</a></li>')
    out.append("</ul>")
    for table in report.tables:
        if table.rows:
            out += table_html(table)
    if report.warnings:
        out += ["<h2>Warnings</h2>", '<ul class="warnings">']
        out += [f"<li>{escape(w)}</li>" for w in report.warnings]
        out.append("</ul>")
    out += _charts(plots, no_charts_reason)
    out += [f"<footer>concurbench {escape(__version__)}, run directory {escape(Path(run.path or '').name)}</footer>",
            "</body>", "</html>", ""]
    return "\n".join(out)


def report_page(report: Report) -> str:
    """Any report (its lines, tables and notes) as one self-contained page."""
    out = page_head(report) + ["</ul>"]
    for table in report.tables:
        if table.rows:
            out += table_html(table)
    out += [f"<footer>concurbench {escape(__version__)}</footer>", "</body>", "</html>", ""]
    return "\n".join(out)


def page_head(report: Report) -> list[str]:
    """The page's head and title, and its report lines as an open list."""
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
           f"<title>{escape(report.title)}</title>", f"<style>{STYLE}</style>", "</head>", "<body>",
           f"<h1>{escape(report.title)}</h1>", '<ul class="lines">']
    return out + [f"<li>{escape(line)}</li>" for line in report.lines]


def table_html(table) -> list[str]:
    numeric = numeric_columns(table)
    out = [f"<h2>{escape(table.title)}</h2>", "<table>", "<thead><tr>"]
    out += [f'<th{_num(n)}>{escape(str(c))}</th>' for c, n in zip(table.columns, numeric)]
    out += ["</tr></thead>", "<tbody>"]
    for i, row in enumerate(table.rows):
        out.append("<tr>" + "".join(f"<td{_num(n)}>{_cell(c, table.links.get((i, j)))}</td>"
                                    for j, (c, n) in enumerate(zip(row, numeric))) + "</tr>")
    out += ["</tbody>", "</table>"]
    out += [f'<p class="note">{escape(note)}</p>' for note in table.notes]
    return out


def _cell(text, link: str | None) -> str:
    """A cell's text, a link where the table gives the cell one."""
    if link is None:
        return escape(str(text))
    return f'<a href="{escape(link, quote=True)}">{escape(str(text))}</a>'


def _num(numeric: bool) -> str:
    return ' class="num"' if numeric else ""


def chart_files(plots: list[Path]) -> list[Path]:
    """One file per chart, in the order written: the SVG when there is one, else the PNG."""
    by_stem: dict[str, Path] = {}
    for path in plots:
        path = Path(path)
        if path.suffix in (".svg", ".png") and (path.stem not in by_stem or path.suffix == ".svg"):
            by_stem[path.stem] = path
    return list(by_stem.values())


def _charts(plots: list[Path] | None, reason: str | None) -> list[str]:
    out = ["<h2>Charts</h2>"]
    if plots is None:
        return out + [f'<p class="note">Charts not drawn: {escape(reason or NO_MATPLOTLIB)}.</p>']
    files = chart_files(plots)
    if not files:
        return out + ['<p class="note">No chart applies to this run.</p>']
    for n, path in enumerate(files, 1):
        if path.suffix == ".svg":
            body = inline_svg(path.read_text(encoding="utf-8"), f"c{n}-")
        else:
            data = base64.b64encode(path.read_bytes()).decode("ascii")
            body = f'<img alt="{escape(_caption(path.stem))}" src="data:image/png;base64,{data}">'
        out += ["<figure>", body,
                f"<figcaption>{escape(_caption(path.stem))} ({escape(path.parent.name)}/{escape(path.name)})"
                "</figcaption>", "</figure>"]
    return out


def inline_svg(text: str, prefix: str) -> str:
    """The <svg> element alone (no XML prolog, doctype or metadata), its ids prefixed so that several
    charts on one page do not share ids."""
    start = text.find("<svg")
    svg = text[start:] if start >= 0 else text
    svg = re.sub(r"<metadata>.*?</metadata>\s*", "", svg, flags=re.S)
    svg = re.sub(r'\bid="([^"]+)"', rf'id="{prefix}\1"', svg)
    svg = re.sub(r"url\(#([^)]+)\)", rf"url(#{prefix}\1)", svg)
    return re.sub(r'((?:xlink:)?href)="#([^"]+)"', rf'\1="#{prefix}\2"', svg)


CAPTIONS = (("throughput-", "Throughput against client count, group {}"),
            ("latency-", "Latency percentiles (p50, p95, p99) per variant run, group {}"),
            ("wait-profile-", "Wait-event profile per variant run, group {}"),
            ("over-time-", "Throughput and mean latency per 100 ms with the timeline's events, group {}"))


def _caption(stem: str) -> str:
    for prefix, text in CAPTIONS:
        if stem.startswith(prefix):
            return text.format(stem[len(prefix):])
    sampler, _, rest = stem.partition("-")
    rest = re.sub(r"-(\d+)clients$", r", \1 clients", rest)
    return f"{sampler.replace('_', ' ').capitalize()} over time, group {rest}" if rest else stem
