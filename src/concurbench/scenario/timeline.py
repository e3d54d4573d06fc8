"""A pool's rate and timeline keys: `rate`, `arrivals`, `latency_limit`, `start_after`, `stop_after`, `phases`.

Read and checked apart from the rest of a pool, with file, line and field for every problem.
"""

from __future__ import annotations

from .model import Arrivals, Phase
from .yamlpos import Checker, describe, join

TIMELINE_KEYS = ["rate", "arrivals", "latency_limit", "start_after", "stop_after", "phases"]
PHASE_KEYS = ["duration", "rate", "clients"]


def parse_tps(value) -> float | None:
    """Transactions per second from `1000`, `2.5` or `1000/s`; None when it is not one (or not above 0)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().endswith("/s"):
        value = value.strip()[:-2]
    try:
        rate = float(value)
    except (TypeError, ValueError):
        return None
    return rate if rate > 0 and rate != float("inf") else None


def _rate(check: Checker, node: dict, path: str) -> float | None:
    if node.get("rate") is None:
        return None
    rate = parse_tps(node["rate"])
    if rate is None:
        check.add(node, "rate", join(path, "rate"), f"must be a number of transactions per second above 0 "
                                                    f"such as 1000 or 1000/s, got {describe(node['rate'])}")
    return rate


def read_timeline(check: Checker, pnode: dict, path: str, *, think: float, clients: int | None) -> dict:
    """The pool's timeline fields (the keyword arguments of Pool) from its YAML mapping."""
    rate = _rate(check, pnode, path)
    written = check.string(pnode, "arrivals", path, default=Arrivals.POISSON.value) or Arrivals.POISSON.value
    try:
        arrivals = Arrivals(written)
    except ValueError:
        check.add(pnode, "arrivals", join(path, "arrivals"), f"must be one of {', '.join(Arrivals)}, got "
                                                            f"{describe(pnode['arrivals'])}")
        arrivals = Arrivals.POISSON
    start = check.duration(pnode, "start_after", path, default=None)
    stop = check.duration(pnode, "stop_after", path, default=None)
    if stop is not None and stop <= (start or 0.0):
        check.add(pnode, "stop_after", join(path, "stop_after"),
                  f"must be later than start_after ({start or 0:g} s), got {stop:g} s")
        stop = None
    phases = tuple(_phases(check, pnode, path, clients))
    paced = rate is not None or any(p.rate is not None for p in phases)
    if phases and rate is None and phases[0].rate is None and paced:
        check.add(pnode["phases"], 0, join(path, "phases[0]"),
                  "needs a rate: a later phase sets one, and neither the pool nor the first phase does")
    if paced and think:
        check.add(pnode, "think", join(path, "think"), "cannot be used with a rate: a rate-driven pool's "
                                                      "clients wait for the schedule, not for a think time")
    limit = check.duration(pnode, "latency_limit", path, default=None)
    if limit is not None and not paced:
        check.add(pnode, "latency_limit", join(path, "latency_limit"),
                  "needs a rate: it counts transactions that finish too long after their scheduled start")
        limit = None
    if limit == 0:
        check.add(pnode, "latency_limit", join(path, "latency_limit"), "must be longer than 0 s")
        limit = None
    if "arrivals" in pnode and not paced:
        check.add(pnode, "arrivals", join(path, "arrivals"), "needs a rate (rate: on the pool or its phases)")
    if phases and stop is not None and (start or 0.0) + sum(p.duration for p in phases) > stop + 1e-9:
        check.add(pnode, "phases", join(path, "phases"),
                  f"last {sum(p.duration for p in phases):g} s from start_after ({start or 0:g} s), past "
                  f"stop_after ({stop:g} s)")
    return {"rate": rate, "arrivals": arrivals, "latency_limit": limit, "start_after": start, "stop_after": stop,
            "phases": phases}


def _phases(check: Checker, pnode: dict, path: str, clients: int | None):
    sub_path = join(path, "phases")
    items = check.mappings(pnode, "phases", sub_path, what="phases", item="a mapping with 'duration' and "
                                                                             "'rate' or 'clients'")
    if "phases" in pnode and isinstance(pnode["phases"], list) and not pnode["phases"]:
        check.add(pnode, "phases", sub_path, "must list at least one phase")
    for _i, item, sub in items:
        check.known_keys(item, sub, PHASE_KEYS, required=("duration",))
        duration = check.duration(item, "duration", sub, default=None)
        if duration == 0:
            check.add(item, "duration", join(sub, "duration"), "must be longer than 0 s")
        rate = _rate(check, item, sub)
        n = check.integer(item, "clients", sub, minimum=1, default=None)
        if n is not None and clients is not None and n > clients:
            check.add(item, "clients", join(sub, "clients"), f"must be at most the pool's clients ({clients}): "
                                                           f"every session is connected before the window, got {n}")
            n = None
        if n is not None and clients is None:
            check.add(item, "clients", join(sub, "clients"), "cannot be set in a pool with 'clients: sweep'")
            n = None
        if rate is None and n is None and "rate" not in item and "clients" not in item:
            check.add(item, None, sub, "needs 'rate' or 'clients' (what changes at the phase's start)")
        if duration:
            yield Phase(duration, rate, n)


def check_window(check: Checker, pnode: dict, path: str, pool, duration: float) -> None:
    """The pool's times against its variant's measurement window (`duration` seconds)."""
    def late(key: str, seconds: float, what: str) -> None:
        check.add(pnode, key, join(path, key), f"{what} ({seconds:g} s) is beyond the measurement window "
                                               f"({duration:g} s)")

    if pool.start_after is not None and pool.start_after >= duration:
        late("start_after", pool.start_after, "start_after")
    if pool.stop_after is not None and pool.stop_after > duration:
        late("stop_after", pool.stop_after, "stop_after")
    total = (pool.start_after or 0.0) + sum(p.duration for p in pool.phases)
    if pool.phases and total > duration + 1e-9:
        check.add(pnode, "phases", join(path, "phases"), f"phases last {total:g} s from the window's start "
                                                         f"(with start_after), longer than the duration "
                                                         f"({duration:g} s)")

