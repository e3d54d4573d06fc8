"""Live progress for `run`: a rich status line on a terminal, plain lines otherwise."""

from __future__ import annotations

import time

from rich.console import Console


class Progress:
    def __init__(self, console: Console):
        self.console = console
        self.live = console.is_terminal
        self.status = None
        self._last_plain = 0.0
        self.label = ""
        self.repeat = ""

    def __call__(self, event: dict) -> None:
        kind = event["event"]
        if kind == "provisioning":
            self._line(f"starting the {event['target']} server")
        elif kind == "server":
            self._line(f"server {event.get('engine', 'PostgreSQL')} {event['version']} at {event['connection']}")
        elif kind == "setup":
            self._line(f"setup: {event['origin']}")
        elif kind == "variant":
            clients = ", ".join(f"{p}={n}" for p, n in event["clients"].items())
            what = "transactions per client" if event["fixed"] else f"{event['duration']:g} s"
            self.label = f"{event['variant']}" + (f" @ {event['point']}" if event["point"] is not None else "") \
                + self.repeat
            self._line(f"variant {self.label}: clients {clients}; warm-up {event['warmup']:g} s, {what}")
        elif kind == "tick":
            phase = event["phase"]
            text = (f"  {self.label}: warm-up {-event['elapsed']:.1f} s left" if phase == "warmup" else
                    f"  {self.label}: {event['elapsed']:.1f} s, {event['transactions']:,} txns, "
                    f"{event['tps']:,.0f} tps now")
            if self.live:
                self._status(text)
            elif time.monotonic() - self._last_plain >= 5:
                self._last_plain = time.monotonic()
                self.console.print(text, highlight=False)
        elif kind == "variant_done":
            r = event["result"]
            parts = [f"{name} {pool.metrics.get('tps') or 0:,.0f} tps" for name, pool in r.pools.items()]
            status = "" if r.complete else f" ({r.status})"
            self._line(f"  done {self.label}{status} in {r.elapsed_s:.1f} s: " + "; ".join(parts))
        elif kind == "repeat":
            where = f" on {event['server']}" if event.get("server") else ""
            self.repeat = where + (f" (repeat {event['repeat']}/{event['of']})" if event["of"] > 1 else "")
        elif kind == "pull":
            layer = f" {event['layer']}" if event.get("layer") else ""
            text = f"  pulling {event['image']}{layer}: {event.get('status') or ''}"
            if self.live:
                self._status(text)
            elif not event.get("layer"):
                self.console.print(text, highlight=False)
        elif kind == "restart":
            settings = ", ".join(f"{k}={v}" for k, v in event["settings"].items()) or "the scenario's own"
            self._line(f"restarting the server with settings: {settings}")
        elif kind == "warning":
            self._line(f"warning: {event['message']}")
        elif kind == "stopping":
            self._line("stopping the server")

    def _status(self, text: str) -> None:
        if self.status is None:
            self.status = self.console.status(text)
            self.status.start()
        else:
            self.status.update(text)

    def _line(self, text: str) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None
        self.console.print(text, highlight=False)

    def close(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None
