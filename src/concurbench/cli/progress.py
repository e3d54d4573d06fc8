"""Live progress for `run`: which variant run of how many, time elapsed and time left.

On a terminal, a progress bar of the whole run stays at the bottom (run i/n, the variant, elapsed,
time left, the current throughput) while the steps are printed above it; otherwise plain lines,
the throughput every 5 seconds. The plan and the time left come from plan.PlanClock, fed by the
runner's `Planned` events (sent again when the plan grows or shrinks) and its variant runs.
"""

from __future__ import annotations

import time
from typing import Callable

from rich.console import Console
from rich.progress import BarColumn, ProgressColumn, TextColumn
from rich.progress import Progress as Bar
from rich.text import Text

from ..workload.pool import WARMUP
from ..running.plan import PlanClock, clock_text
from ..running.progress_events import CheckLook, ImagePull, Listener, Planned, Provisioning, RepeatStarted, \
    Restarting, RunEnded, RunStarted, RunWarning, ServerUp, SetupStep, Stopping, Tick, VariantDone, VariantStarted, \
    WarmPass

PLAIN_TICK_S = 5.0


class _Times(ProgressColumn):
    """Elapsed and left, computed at every refresh (the estimate moves while a run goes)."""

    def __init__(self, plan: PlanClock):
        super().__init__()
        self.plan = plan

    def render(self, task) -> Text:
        return Text(f"{clock_text(self.plan.elapsed())} elapsed, about {clock_text(self.plan.left())} left")


class Progress(Listener):
    """The progress display: a Listener of the run's events that prints them on `console`."""

    def __init__(self, console: Console, clock: Callable[[], float] = time.monotonic):
        self.console = console
        self.live = console.is_terminal
        self.plan = PlanClock(clock)
        self.clock = clock
        self.bar: Bar | None = None
        self.task = None
        self._last_plain = 0.0
        self.label = ""
        self.repeat = ""
        self.runs = 0  # runs begun (RunStarted)

    def on_run_started(self, event: RunStarted) -> None:
        """A run begins; the second and later (`claims` runs one scenario after another) get a plan, a clock
        and labels of their own, as the first has from the start."""
        self.close()
        if self.runs:
            self.plan = PlanClock(self.clock)
            self._last_plain = 0.0
            self.label = self.repeat = ""
        self.runs += 1

    def on_run_ended(self, event: RunEnded) -> None:
        self.close()

    def on_plan(self, event: Planned) -> None:
        again = bool(self.plan.runs)
        self.plan.plan(event.runs)
        share = f" (shard {event.shard} of a run of {event.of})" if event.shard else ""
        more = "; --check adds rounds while claims are open" if event.check and not again else ""
        self._line(f"plan: {'now ' if again else ''}{self.plan.total} variant run"
                   f"{'s' if self.plan.total != 1 else ''}{share}, about {clock_text(self.plan.left())}"
                   f"{' left' if again else ''}{more}")

    def on_check(self, event: CheckLook) -> None:
        self._line(f"check: {event.open} claim{'s' if event.open != 1 else ''} open after {event.runs} "
                   f"runs (look {event.look} of {event.of})")

    def on_provisioning(self, event: Provisioning) -> None:
        self._line(f"starting the {event.target} server" if event.owns_server else
                   f"connecting to the {event.target} server")

    def on_server(self, event: ServerUp) -> None:
        self._line(f"server {event.engine} {event.version} at {event.connection}")

    def on_setup(self, event: SetupStep) -> None:
        self._line(f"setup: {event.origin}")

    def on_variant(self, event: VariantStarted) -> None:
        self.plan.run_started()
        clients = ", ".join(f"{p}={n}" for p, n in event.clients.items())
        what = "transactions per client" if event.fixed else f"{event.duration:g} s"
        self.label = event.variant + (f" @ {event.point}" if event.point is not None else "") + self.repeat
        self._line(f"variant {self.label}: clients {clients}; warm-up {event.warmup:g} s, {what}{self._where()}")
        if self.live:
            self._status("connecting")

    def on_tick(self, event: Tick) -> None:
        text = (f"  {self.label}: warm-up {-event.elapsed:.1f} s left" if event.phase == WARMUP else
                f"  {self.label}: {event.elapsed:.1f} s, {event.transactions:,} txns, {event.tps:,.0f} tps now")
        if self.live:
            self._status(text.strip())
        elif self.clock() - self._last_plain >= PLAIN_TICK_S:
            self._last_plain = self.clock()
            self.console.print(text, highlight=False)

    def on_variant_done(self, event: VariantDone) -> None:
        self.plan.run_finished()
        r = event.result
        parts = [f"{name} {r.own(name).get('tps') or 0:,.0f} tps" for name in r.pools]
        status = "" if r.complete else f" ({r.status})"
        self._line(f"  done {self.label}{status} in {r.elapsed_s:.1f} s: " + "; ".join(parts))

    def on_repeat(self, event: RepeatStarted) -> None:
        where = f" on {event.server}" if event.server else ""
        self.repeat = where + (f" (repeat {event.repeat}/{event.of})" if event.of > 1 else "")

    def on_pull(self, event: ImagePull) -> None:
        layer = f" {event.layer}" if event.layer else ""
        text = f"pulling {event.image}{layer}: {event.status or ''}"
        if self.live:
            self._status(text)
        elif not event.layer:
            self.console.print("  " + text, highlight=False)

    def on_warm_pass(self, event: WarmPass) -> None:
        after = " after the restart" if event.after_restart else ""
        self._line(f"  {event.variant}: warm-up pass{after}, {event.transactions} transactions per client "
                   f"(not measured)")

    def on_restart(self, event: Restarting) -> None:
        if event.why:
            self._line(f"restarting the server: {event.why}")
            return
        settings = ", ".join(f"{k}={v}" for k, v in event.settings.items()) or "the scenario's own"
        self._line(f"restarting the server with settings: {settings}")

    def on_warning(self, event: RunWarning) -> None:
        self._line(f"warning: {event.message}")

    def on_stopping(self, event: Stopping) -> None:
        self._line("stopping the server" if event.owns_server else
                   f"leaving the {event.target} server (its settings as they were)")

    def _where(self) -> str:
        """`; run 3 of 12, 1:10 elapsed, about 3:20 left` (plain lines carry what the bar shows)."""
        if not self.plan.total:
            return ""
        return (f"; run {self.plan.current} of {self.plan.total}, {clock_text(self.plan.elapsed())} elapsed, "
                f"about {clock_text(self.plan.left())} left")

    def _status(self, detail: str) -> None:
        """The bar at the bottom of a terminal: run i/n, the variant, elapsed and left, `detail`."""
        if self.bar is None:
            self.bar = Bar(TextColumn("{task.description}"), BarColumn(), _Times(self.plan),
                           TextColumn("{task.fields[detail]}"), console=self.console, transient=True)
            self.task = self.bar.add_task("", total=1000, detail="")
            self.bar.start()
        run = f"run {self.plan.current}/{self.plan.total} " if self.plan.total else ""
        self.bar.update(self.task, description=f"{run}{self.label}", completed=int(self.plan.fraction() * 1000),
                        detail=detail)

    def _line(self, text: str) -> None:
        self.console.print(text, highlight=False)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
