"""The cluster's parts that need no engine (cluster/): sessions dealt over hosts, the hosts' statistics merged, a host's
gate turning the coordinator's start into its own clock. The gate's queue, variable and event are stand-ins for the
engine's named objects (the engine itself runs in tests/e2e/test_cluster.py)."""

from __future__ import annotations

import random
import subprocess
import sys

import pytest

from concurbench.cluster.breakdown import host_row, merge
from concurbench.cluster.deal import deal
from concurbench.cluster.hosts import LoadHost, differs
from concurbench.cluster.share import READY, HostGate, ShareSpec
from concurbench.errors import RunError
from concurbench.scenario.model import Pool, Statement
from concurbench.workload.stats import PoolStats
from needs import need_cluster


def pool(name: str, clients: int, measure: bool = True) -> Pool:
    return Pool(name, clients, (Statement("s", "SELECT 1"),), measure=measure)


def test_equal_weights_deal_round_robin_and_carry_the_rotation_over_pools():
    shares = deal([pool("a", 5), pool("b", 1), pool("c", 1)], {"h1": 1, "h2": 1})
    assert shares == {"h1": {"a": (0, 2, 4), "c": (0,)}, "h2": {"a": (1, 3), "b": (0,)}}


def test_weights_give_each_host_its_share_of_every_pool_within_one_session():
    pools = [pool("a", 30), pool("b", 7)]
    shares = deal(pools, {"big": 3, "small": 1, "mid": 2})
    for p in pools:
        given = {h: len(s.get(p.name, ())) for h, s in shares.items()}
        assert sorted(i for s in shares.values() for i in s.get(p.name, ())) == list(range(p.clients))
        for host, weight in {"big": 3, "small": 1, "mid": 2}.items():
            assert abs(given.get(host, 0) - p.clients * weight / 6) <= 1


def test_a_host_dealt_nothing_is_left_out_and_weights_must_be_positive():
    assert deal([pool("a", 1)], {"h1": 1, "h2": 1}) == {"h1": {"a": (0,)}}
    with pytest.raises(ValueError):
        deal([pool("a", 1)], {"h1": 0})


def stats(name: str, values: list[int], ends: list[int]) -> PoolStats:
    s = PoolStats(name, sessions=1, transactions=len(values))
    for v, e in zip(values, ends):
        s.txn.record(v)
        s.ends.append(e)
    return s


def report(pools: dict[str, PoolStats], cpu: float = 0.5) -> dict:
    return {"pools": {n: s.to_dict() for n, s in pools.items()}, "worker_cpu_s": [cpu], "worker_wall_s": [1.0],
            "worker_wait_s": [0.1], "messages": [], "workers": 1, "reported": 1, "stopped": None, "loop": "python",
            "late_ns": 0}


def test_merged_percentiles_are_those_of_the_hosts_histograms_added_not_averaged():
    rng = random.Random(7)
    fast = [rng.randint(100_000, 300_000) for _ in range(900)]
    slow = [rng.randint(5_000_000, 9_000_000) for _ in range(300)]
    a, b = stats("w", fast, [i * 1_000_000 for i in range(900)]), stats("w", slow, [i * 3_000_000 for i in range(300)])
    merged = merge([pool("w", 2)], {"h2": report({"w": b}), "h1": report({"w": a})})
    by_hand = stats("w", fast + slow, [i * 1_000_000 for i in range(900)] + [i * 3_000_000 for i in range(300)])
    by_hand.flush()
    w = merged.pools["w"]
    assert w.transactions == 1200 and w.txn.count == 1200
    for pct in (50.0, 95.0, 99.0):
        assert w.txn.percentile_ms(pct) == by_hand.txn.percentile_ms(pct)
    assert list(w.series.count) == list(by_hand.series.count)
    averaged = (stats("w", fast, [0] * 900).txn.percentile_ms(95.0) + stats("w", slow, [0] * 300).txn.percentile_ms(95.0)) / 2
    assert w.txn.percentile_ms(95.0) != pytest.approx(averaged, rel=0.05)
    assert merged.workers == merged.reported == 2 and merged.worker_cpu_s == [0.5, 0.5]


def test_a_host_row_counts_measured_pools_only_and_a_lost_host_has_no_figures():
    host = LoadHost("h1", "tcp://127.0.0.1:1", "0.1.0", "3.11", "vm", 2, "cpu", 40_000, 600_000)
    measured, background = stats("w", [200_000] * 50, [0] * 50), stats("bg", [100] * 10, [0] * 10)
    row = host_row(host, 3, [pool("w", 2), pool("bg", 1, measure=False)], report({"w": measured, "bg": background}),
                   2.0)
    assert (row["transactions"], row["tps"], row["p50_ms"], row["cpus_used"]) == (50, 25.0, 0.2001, 0.5)  # 200 us in a 3-digit histogram
    assert (row["clock_offset_ms"], row["clock_uncertainty_ms"]) == (0.04, 0.3)
    lost = host_row(host, 3, [pool("w", 2)], None, 2.0, "was lost")
    assert lost["status"] == "lost" and lost["why"] == "was lost" and "tps" not in lost


class Box:
    """A stand-in for the engine's queue, variable and event (one of each)."""

    def __init__(self, value=None, is_set=False):
        self.items, self.value, self.is_set = [], value, is_set

    def put(self, item, timeout=None):
        self.items.append(item)

    def get(self, timeout=None):
        if self.value is None:
            raise TimeoutError
        return self.value

    def wait(self, timeout=None):
        return self.is_set


def spec(offset_ns: int = 0, wait_s: float = 30.0) -> ShareSpec:
    return ShareSpec("k", "h1", "host=127.0.0.1", "postgres", [], {}, 0.0, 1.0, 1, None, "auto", offset_ns, wait_s)


def test_the_gate_starts_at_the_coordinators_moment_on_the_hosts_clock():
    need_cluster()  # the gate waits on a Dask event
    at = 1_000_000_000_000
    # the host's wall clock runs 5 ms ahead of the coordinator's; it is 100 ms before the start there
    up = Box()
    gate = HostGate(spec(offset_ns=5_000_000), queue=up, start=Box(at), stop=Box(), clock=lambda: 777,
                    wall=lambda: at + 5_000_000 - 100_000_000)
    assert gate.start_ns() == 777 + 100_000_000
    assert up.items == [{"host": "h1", "kind": READY}] and gate.late_ns == 0
    late = HostGate(spec(), queue=Box(), start=Box(at), stop=Box(), clock=lambda: 0, wall=lambda: at + 30_000_000)
    assert late.start_ns() == 1_000_000 and late.late_ns == 30_000_000


def test_the_gate_gives_up_when_stopped_or_never_started():
    need_cluster()  # the gate waits on a Dask event
    with pytest.raises(RunError, match="stopped the variant run before its window"):
        HostGate(spec(), queue=Box(), start=Box(), stop=Box(is_set=True)).start_ns()
    with pytest.raises(RunError, match="no start from the coordinator within 0 s"):
        HostGate(spec(wait_s=0), queue=Box(), start=Box(), stop=Box()).start_ns()


def test_a_host_of_another_version_or_python_differs():
    mine = {"version": "0.1.0", "python": "3.11"}
    assert differs("h", dict(mine), mine) is None
    assert "runs concurbench 0.2.0 on Python 3.11" in differs("h", {"version": "0.2.0", "python": "3.11"}, mine)
    assert differs("h", {"version": "0.1.0", "python": "3.12"}, mine) is not None


def test_without_the_extra_the_cluster_commands_say_what_to_install():
    """Dask hidden from a child process as if not installed: one error line with the install command whole (its
    brackets are not taken for the console's markup), exit 2, no traceback."""
    code = ("import sys; sys.modules['distributed'] = None; from concurbench.cli.main import main; "
            "sys.argv = ['concurbench', 'cluster', 'start', '--local', '1']; main()")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == ("error: the cluster needs Dask's distributed package, which is not installed: "
                                     "pip install 'concurbench[cluster]'")
