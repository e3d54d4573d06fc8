"""concurbench: database concurrency experiments as one YAML file and one command.

    import concurbench
    run = concurbench.load("results/20261122T034512Z-row-lock-vs-advisory")
    run.frame()                  # one tidy row per server x variant x point x pool x repeat x metric
    run.samples("wait_events")   # one sampler's periodic samples

    outcome = concurbench.run("scenarios/postgres/row-lock-vs-advisory.yaml", quick=True)
    table = concurbench.claims(["scenarios/postgres/lock-queue.yaml"], target=concurbench.Target("binaries"))

`run`, `claims` and `Target` come from concurbench.api (with `probe`: `concurbench.probe` names the probe's
own package, so the API's is `concurbench.api.probe`); they are imported when first used, so that
`import concurbench` stays light. See docs/results.md for the model (Run, VariantRun, PoolResult,
ClaimVerdict) and docs/api.md for the API.
"""

__version__ = "0.1.0"

from .results.store import load_run as load  # noqa: E402 - after __version__, which the model records

__all__ = ["Target", "claims", "load", "run", "__version__"]

_FROM_API = ("Target", "claims", "run")


def __getattr__(name: str):
    """`run`, `claims` and `Target` on first use (concurbench.api loads the runner and the provisioners)."""
    if name in _FROM_API:
        from . import api  # noqa: PLC0415 - deferred so that `import concurbench` does not load the runner

        value = globals()[name] = getattr(api, name)
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
