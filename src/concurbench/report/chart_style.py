"""What every chart of a run shares: sizes, the title naming scenario and servers, run labels,
a grid of panels, stable colours, and matplotlib itself (imported when a chart is drawn, Agg backend)."""

from __future__ import annotations

import math
import re

from ..engines.registry import spec
from ..errors import ConfigError
from ..results.model import Run, VariantRun

FIGSIZE = (8.0, 4.5)
DPI = 150
OTHER = "other"
RC = {"svg.fonttype": "none", "font.size": 9, "axes.titlesize": 10, "figure.titlesize": 11,
      "axes.spines.top": False, "axes.spines.right": False}


def pyplot():
    try:
        import matplotlib
    except ImportError as exc:
        raise ConfigError("plots need matplotlib, which concurbench's install brings: pip install 'matplotlib>=3.7'",
                          cause=exc) from exc
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


class Context:
    """The run's facts every chart's title and labels need."""

    def __init__(self, run: Run, results: list[VariantRun]):
        scen = run.scenario
        self.scenario = scen.name + (" (quick)" if scen.quick else "")
        versions = [s.version_short or "?" for s in run.servers]
        if not versions:
            versions = sorted({str(r.server) for r in results if r.server})
        engine = spec(scen.engine or "postgres").display
        self.server_label = f"{engine} " + ", ".join(versions) if versions else "server not recorded"
        self.repeats = run.repeat
        self.results = results
        self.multi_server = len({r.server for r in results}) > 1
        self.groups: list[str] = []
        for r in results:
            if r.group not in self.groups:
                self.groups.append(r.group)

    def title(self, what: str, *, means: bool = False, intervals: bool = False, note: str = "") -> str:
        """`scenario: what` over a line naming the servers; with repeats, `means` says the figures are
        means over them and `intervals` that error bars are their 95% intervals."""
        second = self.server_label
        if means and self.repeats > 1:
            second += f"; means of {self.repeats} repeats" + (", bars: 95% interval" if intervals else "")
        return f"{self.scenario}: {what}\n{second}" + (f"; {note}" if note else "")

    def run_label(self, r: VariantRun, with_point: bool = True) -> str:
        label = r.variant
        if with_point and r.point is not None:
            label += f" @ {r.point} client{'' if r.point == 1 else 's'}"
        if self.multi_server and r.server:
            label += f" ({r.server})"
        return label


def grid(plt, n: int, title: str, *, sharey: bool = True):
    """A figure of `n` panels in two columns (one when n is 1); returns (figure, panels, rows of axes)."""
    ncols = 1 if n == 1 else 2
    nrows = math.ceil(n / ncols)
    height = max(FIGSIZE[1], 2.4 * nrows + 1.2)
    fig, axes = plt.subplots(nrows, ncols, figsize=(FIGSIZE[0], height), sharex=True, sharey=sharey,
                             squeeze=False, layout="constrained")
    flat = [ax for row in axes for ax in row]
    for ax in flat[n:]:
        ax.set_visible(False)
    for ax in flat[:n]:  # panels above a hidden one keep their tick labels
        ax.tick_params(labelbottom=True)
    fig.suptitle(title)
    return fig, flat[:n], axes


def colors(plt, keys: list[str]) -> dict[str, object]:
    """tab10 in order (its grey kept for "other")."""
    palette = [c for i, c in enumerate(plt.get_cmap("tab10").colors) if i != 7]
    out, i = {}, 0
    for k in keys:
        if k == OTHER:
            out[k] = "#b0b0b0"
        else:
            out[k] = palette[i % len(palette)]
            i += 1
    return out


def top_keys(totals: dict[str, float], n: int) -> tuple[list[str], list[str]]:
    """The n largest keys (ties by name), and the keys to draw: those, then "other" when more remain."""
    ranked = sorted((k for k, v in totals.items() if v), key=lambda k: (-totals[k], k))
    top = ranked[:n]
    return top, top + ([OTHER] if len(ranked) > n else [])


def thousands():
    from matplotlib.ticker import FuncFormatter

    return FuncFormatter(lambda v, _: f"{v:,.0f}")


def slug(text) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(text)).strip("_") or "all"


def wrap(label: str) -> str:
    return label.replace(" @ ", "\n@ ") if len(label) > 18 else label
