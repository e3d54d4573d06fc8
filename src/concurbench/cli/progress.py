"""Live progress for `run`: which variant run of how many, time elapsed and time left.

On a terminal, a progress bar of the whole run stays at the bottom (run i/n, the variant, elapsed,
time left, the current throughput) while the steps are printed above it; otherwise plain lines,
the throughput every 5 seconds. The plan and the time left come from plan.PlanClock, fed by the
runner's `plan` events (sent again when the plan grows or shrinks) and its variant runs.
"""

from __future__ import annotations

import time
from typing import Callable

from rich.console import Console
from rich.progress import BarColumn, ProgressColumn, TextColumn
from rich.progress import Progress as Bar
from rich.text import Text

from ..running.plan import PlanClock, clock_text

PLAIN_TICK_S = 5.0


class _Times(ProgressColumn):
    """Elapsed and left, computed at every refresh (the estimate moves while a run goes)."""

    def __init__(self, plan: PlanClock):
        super().__init__()
        self.plan = plan

    def render(self, task) -> Text:
        return Text(f"{clock_text(self.plan.elapsed())} elapsed, about {clock_text(self.plan.left())} left")


class Progress:
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

    def __call__(self, event: dict) -> None:
        kind = event["event"]
        if kind == "plan":
            again = bool(self.plan.runs)
            self.plan.plan(event["runs"])
            share = f" (shard {event['shard']} of a run of {event['of']})" if event.get("shard") else ""
            more = "; --check adds rounds while claims are open" if event.get("check") and not again else ""
            self._line(f"plan: {'now ' if again else ''}{self.plan.total} variant run"
                       f"{'s' if self.plan.total != 1 else ''}{share}, about {clock_text(self.plan.left())}"
                       f"{' left' if again else ''}{more}")
        elif kind == "check":
            self._line(f"check: {event['open']} claim{'s' if event['open'] != 1 else ''} open after {event['runs']} "
                       f"runs (look {event['look']} of {event['of']})")
        elif kind == "provisioning":
            self._line(f"connecting to the {event['target']} server" if event["target"] == "dsn" else
                       f"starting the {event['target']} server")
        elif kind == "server":
            self._line(f"server {event.get('engine', 'PostgreSQL')} {event['version']} at {event['connection']}")
        elif kind == "setup":
            self._line(f"setup: {event['origin']}")
        elif kind == "variant":
            self.plan.run_started()
            clients = ", ".join(f"{p}={n}" for p, n in event["clients"].items())
            what = "transactions per client" if event["fixed"] else f"{event['duration']:g} s"
            self.label = f"{event['variant']}" + (f" @ {event['point']}" if event["point"] is not None else "") \
                + self.repeat
            self._line(f"variant {self.label}: clients {clients}; warm-up {event['warmup']:g} s, {what}"
                       f"{self._where()}")
            if self.live:
                self._status("connecting")
        elif kind == "tick":
            phase = event["phase"]
            text = (f"  {self.label}: warm-up {-event['elapsed']:.1f} s left" if phase == "warmup" else
                    f"  {self.label}: {event['elapsed']:.1f} s, {event['transactions']:,} txns, "
                    f"{event['tps']:,.0f} tps now")
            if self.live:
                self._status(text.strip())
            elif self.clock() - self._last_plain >= PLAIN_TICK_S:
                self._last_plain = self.clock()
                self.console.print(text, highlight=False)
        elif kind == "variant_done":
            self.plan.run_finished()
            r = event["result"]
            parts = [f"{name} {pool.metrics.get('tps') or 0:,.0f} tps" for name, pool in r.pools.items()]
            status = "" if r.complete else f" ({r.status})"
            self._line(f"  done {self.label}{status} in {r.elapsed_s:.1f} s: " + "; ".join(parts))
        elif kind == "repeat":
            where = f" on {event['server']}" if event.get("server") else ""
            self.repeat = where + (f" (repeat {event['repeat']}/{event['of']})" if event["of"] > 1 else "")
        elif kind == "pull":
            layer = f" {event['layer']}" if event.get("layer") else ""
            text = f"pulling {event['image']}{layer}: {event.get('status') or ''}"
            if self.live:
                self._status(text)
            elif not event.get("layer"):
                self.console.print("  " + text, highlight=False)
        elif kind == "warm_pass":
            after = " after the restart" if event.get("after_restart") else ""
            self._line(f"  {event['variant']}: warm-up pass{after}, {event['transactions']} transactions per "
                       f"client (not measured)")
        elif kind == "restart":
            settings = ", ".join(f"{k}={v}" for k, v in event["settings"].items()) or "the scenario's own"
            self._line(f"restarting the server with settings: {settings}")
        elif kind == "warning":
            self._line(f"warning: {event['message']}")
        elif kind == "stopping":
            self._line("leaving the dsn server (its settings as they were)" if event.get("target") == "dsn" else
                       "stopping the server")

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
