"""pandas views of a Run, for analysis after the run (`Run.frame()`, `Run.samples(name)`).

pandas is imported where a frame is made, not with this module: the model imports it, and worker
processes and the command line load the model without needing pandas (about a second's start-up).

The tidy frame has one row per server x variant x point x pool x repeat x metric, from the variant run's
metric records (results/metric.py): the metric named as reports, summary.csv and claims name it, its
`unit` and `scope`; `value` is a float (NaN where the run has no figure) and `unavailable` the reason when
the server could not give the metric. Error texts are left out.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..errors import ConfigError
from .metric import Scope

if TYPE_CHECKING:
    import pandas as pd

    from .model import Run

KEYS = ["server", "variant", "group", "point", "pool", "measured", "clients", "repeat", "status"]
COLUMNS = KEYS + ["metric", "value", "unit", "scope", "unavailable"]
SAMPLE_KEYS = ["server", "variant", "group", "point", "repeat", "status"]
TEXTS = ("error_messages.",)  # a pool's texts, not figures


def tidy(run: Run) -> pd.DataFrame:
    import pandas as pd

    rows = []
    for r in run.variant_runs:
        for name, pool in r.pools.items():
            key = (r.server, r.variant, r.group, r.point, name, pool.measure, pool.clients, r.repeat, r.status)
            gone = {**r.unavailable, **pool.unavailable}  # figures the server could not give, and why
            for m in r.metrics:
                if (m.scope is Scope.POOL and m.pool != name) or m.name in gone or m.name.startswith(TEXTS):
                    continue
                rows.append((*key, m.name, _float(m.value), m.unit, m.scope.value, None))
            rows += [(*key, metric, float("nan"), "", "", reason) for metric, reason in gone.items()]
    return _typed(pd.DataFrame.from_records(rows, columns=COLUMNS))


def samples(run: Run, name: str) -> pd.DataFrame:
    import pandas as pd

    rows = [{"server": r.server, "variant": r.variant, "group": r.group, "point": r.point, "repeat": r.repeat,
             "status": r.status, **row} for r in run.variant_runs for row in r.samples.get(name) or []]
    if not rows:
        names = sorted({n for r in run.variant_runs for n in r.samples})
        raise ConfigError(f"{run.path or 'the run'}: no samples of a sampler named {name} "
                          f"({'the run has ' + ', '.join(names) if names else 'the run has no periodic samples'})")
    return _typed(pd.DataFrame.from_records(rows))


def of_runs(runs: list[tuple[Path, Run]]) -> pd.DataFrame:
    """The tidy frames of many runs in one, each row led by its run directory and scenario name."""
    import pandas as pd

    frames = []
    for path, run in runs:
        frame = tidy(run)
        frame.insert(0, "scenario", run.scenario.name)
        frame.insert(0, "run", str(path))
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["run", "scenario", *COLUMNS])


def _typed(frame: pd.DataFrame) -> pd.DataFrame:
    """Sweep points as nullable integers (a variant without a sweep has none)."""
    frame["point"] = frame["point"].astype("Int64")
    return frame


def _float(value) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else float("nan")
