"""What a run tells while it goes: one frozen dataclass per kind of progress event, and the Listener
that receives them, one method per kind (as Locust's event hooks).

The runner, the provisioners (an image pull) and the API (a run's start and end) call the listener's
methods; the command line's progress display (cli/progress.py) is one listener, a script may pass its
own. `Listener` does nothing with any event: subclass it and override the methods you need, or
`on_any`, which every method calls. `Recorder` keeps every event in a list.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..engines.registry import POSTGRES
from ..provisioners.base import ImagePull
from ..results.model import RunStatus, VariantRun
from ..workload.pool import LoadProgress
from .plan import PlannedRun

__all__ = ["CheckLook", "ImagePull", "Listener", "Planned", "Provisioning", "Recorder", "Restarting",
           "RepeatStarted", "RunEnded", "RunStarted", "RunWarning", "ServerUp", "SetupStep", "Stopping", "Tick",
           "VariantDone", "VariantStarted", "WarmPass"]


@dataclass(frozen=True)
class RunStarted:
    """A scenario's run begins (before its plan)."""

    scenario: str


@dataclass(frozen=True)
class RunEnded:
    """A scenario's run ended: `status` as the run records it (ok, incomplete, interrupted, failed)."""

    scenario: str
    status: RunStatus


@dataclass(frozen=True)
class Planned:
    """The variant runs to come, finished ones first (again whenever the plan grows or shrinks): a shard's
    share (`shard` "I/N" of a run of `of`), and whether --check may add rounds."""

    runs: tuple[PlannedRun, ...]
    shard: str | None = None
    of: int | None = None
    check: bool = False


@dataclass(frozen=True)
class CheckLook:
    """--check looked at the claims after `runs` runs (look `look` of `of`): `open` are still undecided."""

    look: int
    of: int
    open: int
    runs: int


@dataclass(frozen=True)
class Provisioning:
    """A server of `target` is being started (or, on a server concurbench does not own, connected to)."""

    target: str
    owns_server: bool = True  # the target starts its own server (provisioners/registry.py's TargetSpec)


@dataclass(frozen=True)
class ServerUp:
    """A server is up: its short version, where it is (never a password) and its engine's name."""

    version: str
    connection: str
    engine: str = POSTGRES.display


@dataclass(frozen=True)
class SetupStep:
    """The scenario's setup SQL from `origin` (a file or the scenario's line) runs."""

    origin: str


@dataclass(frozen=True)
class VariantStarted:
    """A variant run begins: clients per pool, warm-up and window in seconds, or a fixed transaction count."""

    variant: str
    point: int | None
    clients: dict[str, int]
    duration: float
    warmup: float
    fixed: bool


@dataclass(frozen=True)
class Tick:
    """Twice a second in a variant run: `phase` warmup (`elapsed` negative: seconds to the window) or
    measure, with the transactions so far and the rate over the last tick."""

    variant: str
    point: int | None
    phase: str
    elapsed: float
    transactions: int
    tps: float

    @classmethod
    def of(cls, variant: str, point: int | None, load: LoadProgress) -> "Tick":
        return cls(variant, point, load.phase, load.elapsed, load.transactions, load.tps)


@dataclass(frozen=True)
class VariantDone:
    """A variant run finished, with its result."""

    result: VariantRun


@dataclass(frozen=True)
class RepeatStarted:
    """The next variant run is repeat `repeat` of `of`, on `server` (a version matrix) or None."""

    repeat: int
    of: int
    server: str | None = None


@dataclass(frozen=True)
class WarmPass:
    """A variant's unmeasured warm-up pass of `transactions` per client begins."""

    variant: str
    transactions: int
    after_restart: bool = False


@dataclass(frozen=True)
class Restarting:
    """The server restarts with these settings (empty: the scenario's own), or as it is, for the reason `why`."""

    settings: dict[str, str] = field(default_factory=dict)
    why: str = ""


@dataclass(frozen=True)
class RunWarning:
    """Something the user should know that does not stop the run."""

    message: str


@dataclass(frozen=True)
class Stopping:
    """The run lets a server of `target` go (a server concurbench does not own is left as it was)."""

    target: str
    owns_server: bool = True


class Listener:
    """Receives a run's progress events, one method per kind; each does nothing but call `on_any`."""

    def on_any(self, event) -> None:
        """Called by every other method with its event; does nothing here."""

    def on_run_started(self, event: RunStarted) -> None:
        self.on_any(event)

    def on_run_ended(self, event: RunEnded) -> None:
        self.on_any(event)

    def on_plan(self, event: Planned) -> None:
        self.on_any(event)

    def on_check(self, event: CheckLook) -> None:
        self.on_any(event)

    def on_provisioning(self, event: Provisioning) -> None:
        self.on_any(event)

    def on_pull(self, event: ImagePull) -> None:
        self.on_any(event)

    def on_server(self, event: ServerUp) -> None:
        self.on_any(event)

    def on_setup(self, event: SetupStep) -> None:
        self.on_any(event)

    def on_variant(self, event: VariantStarted) -> None:
        self.on_any(event)

    def on_tick(self, event: Tick) -> None:
        self.on_any(event)

    def on_variant_done(self, event: VariantDone) -> None:
        self.on_any(event)

    def on_repeat(self, event: RepeatStarted) -> None:
        self.on_any(event)

    def on_warm_pass(self, event: WarmPass) -> None:
        self.on_any(event)

    def on_restart(self, event: Restarting) -> None:
        self.on_any(event)

    def on_warning(self, event: RunWarning) -> None:
        self.on_any(event)

    def on_stopping(self, event: Stopping) -> None:
        self.on_any(event)


class Recorder(Listener):
    """Keeps every event, in order (for tests and scripts): `of(kind)` lists those of one class."""

    def __init__(self):
        self.events: list = []

    def on_any(self, event) -> None:
        self.events.append(event)

    def of(self, kind: type) -> list:
        return [e for e in self.events if isinstance(e, kind)]
