"""The load hosts of a cluster as the coordinator sees them at the start of a run: each host's name,
address, concurbench and Python versions, CPUs, and its clock's offset to the coordinator's.

A host whose concurbench (or Python major.minor) differs from the coordinator's is refused: the run stops
before any server is touched. The clock offset is measured as NTP does, over CLOCK_ROUNDS calls: the
coordinator's wall clock before (t0) and after (t1) a call that reads the host's (th); the call with the
shortest round trip gives offset = th - (t0 + t1) / 2, within half that round trip.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
import time
from dataclasses import asdict, dataclass

from .. import __version__
from ..errors import ConfigError
from . import engine

CLOCK_ROUNDS = 15


def host_facts() -> dict:
    """What a host says of itself (run on the host)."""
    return {"version": __version__, "python": "%d.%d" % sys.version_info[:2], "hostname": socket.gethostname(),
            "cpus": os.cpu_count() or 1, "cpu_model": cpu_model(), "pid": os.getpid()}


def cpu_model() -> str:
    """The CPU's model name (Linux's /proc/cpuinfo; else the platform's word for it)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def wall_ns() -> int:
    """The host's wall clock (run on the host)."""
    return time.time_ns()


@dataclass(frozen=True)
class LoadHost:
    """One load host: `offset_ns` is its wall clock minus the coordinator's, measured within `rtt_ns` / 2."""

    name: str
    address: str
    version: str
    python: str
    hostname: str
    cpus: int
    cpu_model: str
    offset_ns: int = 0
    rtt_ns: int = 0
    weight: float = 1.0

    def manifest(self) -> dict:
        """The manifest's `load_hosts` entry."""
        out = asdict(self)
        out["clock_offset_ms"] = round(out.pop("offset_ns") / 1e6, 3)
        out["clock_uncertainty_ms"] = round(out.pop("rtt_ns") / 2e6, 3)
        return out


def differs(name: str, host: dict, coordinator: dict, role: str = "the coordinator") -> str | None:
    """Why a host with these facts is refused by `coordinator`'s (its concurbench or Python differs), or None."""
    if (host["version"], host["python"]) == (coordinator["version"], coordinator["python"]):
        return None
    return (f"load host {name} runs concurbench {host['version']} on Python {host['python']}, {role} "
            f"concurbench {coordinator['version']} on Python {coordinator['python']}")


def refused(facts: dict[str, dict]) -> list[str]:
    """Why each host whose concurbench or Python differs from this process's is refused."""
    mine = host_facts()
    return [why for name, f in sorted(facts.items()) if (why := differs(name, f, mine)) is not None]


def offset(client, address: str, rounds: int = CLOCK_ROUNDS) -> tuple[int, int]:
    """(offset, round trip) in ns of the host at `address`'s wall clock to this process's (the shortest trip's)."""
    best: tuple[int, int] | None = None
    for _ in range(rounds):
        t0 = time.time_ns()
        theirs = client.run(wall_ns, workers=[address])[address]
        t1 = time.time_ns()
        trip = t1 - t0
        if best is None or trip < best[1]:
            best = (theirs - (t0 + t1) // 2, trip)
    return best


class Cluster:
    """A connection to a cluster's scheduler and its load hosts, checked and measured (connect())."""

    def __init__(self, address: str, client, hosts: list[LoadHost]):
        self.address = address
        self.client = client
        self.hosts = hosts

    def alive(self) -> set[str]:
        """The addresses of the hosts the scheduler still has."""
        return set(self.client.scheduler_info(n_workers=-1)["workers"])

    def host(self, name: str) -> LoadHost:
        return next(h for h in self.hosts if h.name == name)

    def manifest(self) -> list[dict]:
        return [host.manifest() for host in self.hosts]

    def close(self) -> None:
        self.client.close(timeout=engine.CONNECT_S)


def workers_of(client) -> dict[str, str]:
    """address -> name of every worker the scheduler has."""
    return {address: str(info.get("name") or address)
            for address, info in client.scheduler_info(n_workers=-1)["workers"].items()}


def connect(address: str, weights: dict[str, float] | None = None, timeout_s: float = engine.CONNECT_S) -> Cluster:
    """The cluster at `address`, its hosts checked (ConfigError: none, a version that differs, a weight for a
    host it lacks) and their clocks measured."""
    client = engine.client(address, timeout_s)
    try:
        workers = workers_of(client)
        if not workers:
            raise ConfigError(f"--cluster {address}: the cluster has no load host; join one with `concurbench "
                              f"cluster join {address}`")
        weights = dict(weights or {})
        unknown = sorted(set(weights) - set(workers.values()))
        if unknown:
            raise ConfigError(f"--host-weight {unknown[0]}: the cluster at {address} has no load host of that name; "
                              f"it has {', '.join(sorted(workers.values()))}")
        try:
            facts = client.run(host_facts, workers=list(workers), wait=True)
        except Exception as exc:  # noqa: BLE001 - a host that cannot run concurbench's code: say which call failed
            raise ConfigError(f"--cluster {address}: the load hosts could not tell their concurbench version "
                              f"({type(exc).__name__}: {exc}); is concurbench installed on every host?", cause=exc) \
                from None
        by_name = {workers[a]: f for a, f in facts.items()}
        problems = refused(by_name)
        if problems:
            raise ConfigError(f"--cluster {address}: refused at start: {'; '.join(problems)}; install the "
                              f"coordinator's version on every host, or stop those hosts")
        hosts = []
        for a in sorted(workers, key=lambda a: workers[a]):
            f = facts[a]
            off, trip = offset(client, a)
            hosts.append(LoadHost(workers[a], a, f["version"], f["python"], f["hostname"], int(f["cpus"]),
                                  f["cpu_model"], off, trip, float(weights.get(workers[a], 1.0))))
        return Cluster(address, client, hosts)
    except BaseException:
        client.close(timeout=engine.CONNECT_S)
        raise
