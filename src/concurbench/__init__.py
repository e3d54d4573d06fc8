"""concurbench: database concurrency experiments as one YAML file and one command.

    import concurbench
    run = concurbench.load("results/20261122T034512Z-row-lock-vs-advisory")
    run.frame()                  # one tidy row per server x variant x point x pool x repeat x metric
    run.samples("wait_events")   # one sampler's periodic samples

    outcome = concurbench.run("scenarios/postgres/row-lock-vs-advisory.yaml", quick=True)
    table = concurbench.claims(["scenarios/postgres/lock-queue.yaml"], target=concurbench.Target("binaries"))

`run`, `claims` and `Target` come from concurbench.api (with `probe`: `concurbench.probe` names the probe's
own package, so the API's is `concurbench.api.probe`); they are imported when first used, as `load` is, so that
`import concurbench` stays light. See docs/results.md for the model (Run, VariantRun, PoolResult,
ClaimVerdict) and docs/api.md for the API.
"""

__version__ = "0.1.0"

import importlib

__all__ = ["Target", "claims", "load", "run", "__version__"]

# Each name's module and attribute, imported on first use: `import concurbench` (and so every
# `python -m concurbench.…` program, such as the log drain) loads neither numpy nor the runner.
_LAZY = {"load": ("results.store", "load_run"), "Target": ("api", "Target"), "claims": ("api", "claims"),
         "run": ("api", "run")}


def __getattr__(name: str):
    """`load`, `run`, `claims` and `Target` on first use."""
    if name in _LAZY:
        module, attribute = _LAZY[name]
        value = globals()[name] = getattr(importlib.import_module(f".{module}", __name__), attribute)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
