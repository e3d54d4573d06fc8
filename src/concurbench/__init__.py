"""concurbench: database concurrency experiments as one YAML file and one command.

    import concurbench
    run = concurbench.load("results/20261122T034512Z-row-lock-vs-advisory")
    run.frame()                  # one tidy row per server x variant x point x pool x repeat x metric
    run.samples("wait_events")   # one sampler's periodic samples

See docs/results.md for the model (Run, VariantRun, PoolResult, ClaimVerdict).
"""

__version__ = "0.1.0"

from .results.store import load_run as load  # noqa: E402 - after __version__, which the model records

__all__ = ["load", "__version__"]
