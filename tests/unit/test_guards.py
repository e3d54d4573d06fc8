"""Resource guards, before any connection: connections, open files per worker process, memory.

The machine's limits are passed in small (a few hundred at most), so nothing here depends on this
machine's ulimit or memory; `validate` and `run` use the real ones (tests/unit/test_bad_inputs.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from concurbench.running import guards
from concurbench.check import CheckPolicy
from concurbench.errors import ConfigError
from concurbench.provisioners.registry import DSN
from concurbench.results.shards import Shard
from concurbench.running.runner import Runner
from concurbench.running.load import load_scenario

BIG = 1 << 40  # more memory or files than any case here needs


def scenario(tmp_path: Path, body: str, engine: str = "postgres"):
    path = tmp_path / "s.yaml"
    path.write_text(f"name: s\nengine: {engine}\nduration: 1s\n" + body)
    return load_scenario(path)


def problems(s, **kwargs) -> list[str]:
    """What check_scenario finds; by default with plenty of files and memory."""
    kwargs = {"fds": BIG, "memory": BIG, **kwargs}
    try:
        guards.check_scenario(s, **kwargs)
    except ConfigError as exc:
        return [str(p) for p in exc.problems]
    return []


POOLS = """variants:
  v:
    samplers: [wait_events]
    background:
      - {kind: hold_transaction, sql: SELECT 1, release_when: SELECT true}
    pools:
      p: {clients: 6, transaction: [SELECT 1]}
      q:
        clients: 3
        transaction: [SELECT 1]
"""


def test_every_connection_of_a_variant_run_is_counted(tmp_path):
    s = scenario(tmp_path, POOLS)
    need = guards.worst(s.variants[0])
    # 9 pool sessions, the admin connection, the samplers' one, a held transaction and its release_when poller
    assert need.pools == {"p": 6, "q": 3} and need.own == {"admin": 1, "sampler": 1, "background": 2}
    assert need.total == 13


@pytest.mark.parametrize("limit,refused", [(13, False), (12, True)])
def test_max_connections_from_the_scenario_settings(tmp_path, limit, refused):
    s = scenario(tmp_path, f"server:\n  settings: {{max_connections: {limit}}}\n" + POOLS)
    found = problems(s)
    assert bool(found) == refused
    if refused:
        assert found == [f"{s.path}:12:20: variants.v.pools.p.clients: 9 clients make 13 connections (pools p: 6, "
                         f"q: 3; the harness's own: 1 admin, 1 sampler, 2 background), more than the server allows: "
                         f"max_connections is 12 (server.settings); lower the clients or raise max_connections"]


def test_the_servers_default_when_unset_a_variants_own_setting_and_a_dsn_target(tmp_path):
    body = ("sweep: [50, 120]\nvariants:\n  big:\n    pools:\n      p: {clients: sweep, transaction: [SELECT 1]}\n"
            "  own:\n    server:\n      settings: {max_connections: 500}\n    pools:\n"
            "      p: {clients: 300, transaction: [SELECT 1]}\n")
    s = scenario(tmp_path, body)
    found = problems(s)
    assert len(found) == 1 and "variants.big.pools.p.clients: 120 clients (sweep point 120) make 121 connections" \
        in found[0] and "max_connections is 100 (the server's default)" in found[0]
    assert problems(s, target=DSN) == []  # the server says, once connected (guards.check_server)


def test_open_files_per_worker_process(tmp_path):
    s = scenario(tmp_path, "variants:\n  v:\n    pools:\n      p: {clients: 400, transaction: [SELECT 1]}\n")
    # 400 sessions over 2 worker processes: 200 in each, beside the worker's own files (a dsn target: the
    # server's max_connections is checked once connected)
    need = guards.WORKER_BASE_FDS + 200
    assert problems(s, target=DSN, processes=2, fds=need) == []
    found = problems(s, target=DSN, processes=2, fds=need - 1)
    assert len(found) == 1
    assert (f"400 clients over 2 worker processes are up to 200 sessions in one process, which needs {need} open "
            f"files, and a process may open {need - 1} (ulimit -n)") in found[0]
    assert problems(s, target=DSN, processes=4, fds=need - 1) == []  # more processes, fewer sessions each


def test_open_files_of_the_harness_own_process(tmp_path):
    s = scenario(tmp_path, "variants:\n  v:\n    pools:\n      p: {clients: 400, transaction: [SELECT 1]}\n")
    # one session in each of 400 worker processes: the parent holds pipes to every one of them
    found = problems(s, target=DSN, processes=400, fds=1000)
    assert len(found) == 1 and "400 worker processes need 1,633 open files in the harness's own process" in found[0]


def test_sql_server_sessions_hold_three_files_each(tmp_path):
    body = "variants:\n  v:\n    pools:\n      p: {clients: 10, transaction: [SELECT 1]}\n"
    s = scenario(tmp_path, body, engine="mssql")
    assert problems(s, target=DSN, processes=1, fds=guards.WORKER_BASE_FDS + 30) == []
    assert problems(s, target=DSN, processes=1, fds=guards.WORKER_BASE_FDS + 29) != []


def test_memory_on_both_sides(tmp_path, monkeypatch):
    body = ("variants:\n  v:\n    pools:\n      p:\n        clients: 10\n        atomic: true\n"
            "        params: {aid: 'zipfian(1, 100000, 1.1)'}\n"
            "        transaction: [SELECT :aid, SELECT :aid + 1]\n")
    s = scenario(tmp_path, body)
    pool = s.variants[0].pools[0]
    monkeypatch.setattr(guards.os, "cpu_count", lambda: 2)
    # begin, two statements, commit and the transaction: five histograms; a table of 100,000 weights
    assert guards.harness_bytes(pool) == guards.CONNECTION_BYTES + 5 * guards.HISTOGRAM_BYTES + 100_000 * 40
    harness = 10 * guards.harness_bytes(pool) + 2 * guards.WORKER_BYTES  # one worker process per CPU (2 here)
    server = 11 * guards.BACKEND_BYTES  # the pool's sessions and the admin connection
    assert problems(s, memory=harness + server) == []
    found = problems(s, memory=harness + server - 1)
    assert len(found) == 1 and "10 clients need about" in found[0] and "of server backends (2.0 MiB each)" in found[0]
    # on a dsn target the server may be elsewhere: only the harness's side counts
    assert problems(s, memory=harness, target=DSN) == []


def test_a_wide_zipfian_range_draws_without_a_table(tmp_path):
    body = ("variants:\n  v:\n    pools:\n      p:\n        clients: 1\n"
            "        params: {aid: 'zipfian(1, 10000000, 1.1)'}\n        transaction: [SELECT :aid]\n")
    pool = scenario(tmp_path, body).variants[0].pools[0]
    assert guards.harness_bytes(pool) == guards.CONNECTION_BYTES + 2 * guards.HISTOGRAM_BYTES


def test_the_histogram_size_is_what_the_workers_allocate():
    from concurbench.workload.stats import new_histogram

    hist = new_histogram()
    assert guards.HISTOGRAM_BYTES == hist.counts_len * hist.word_size


def test_worker_processes_count_in_memory(tmp_path):
    """--processes 1000 with 1000 clients would start 1000 Python processes of about 32 MiB each."""
    s = scenario(tmp_path, "variants:\n  v:\n    pools:\n      p: {clients: 1000, transaction: [SELECT 1]}\n")
    found = problems(s, target=DSN, processes=1000, memory=20 << 30)
    assert len(found) == 1 and "1,000 clients need about 39.6 GiB of memory (39.6 GiB in the harness)" in found[0]
    assert problems(s, target=DSN, processes=2, memory=20 << 30) == []


class NeverStarted:
    """A provisioner the guards must stop the run before: starting it fails the test."""

    def start(self):
        raise AssertionError("a server was started for a run the guards refuse")


@pytest.mark.parametrize("how", [{"repeat": 3}, {"check": CheckPolicy(max_repeats=4)}, {"shard": Shard(2, 2)}],
                         ids=["repeats", "check-rounds", "other-shard"])
def test_repeats_check_rounds_and_every_shard_are_guarded_as_their_variant_is(tmp_path, how):
    """The check is per variant, so extra runs of it (repeats, the rounds --check adds) need no other; a shard
    checks the whole run's variants, so shard 2/2 (only w) is refused for v as shard 1/2 would be."""
    s = scenario(tmp_path, "server:\n  settings: {max_connections: 12}\n" + POOLS
                 + "  w:\n    pools:\n      p: {clients: 1, transaction: [SELECT 1]}\n"
                 + "expect:\n  - check: \"v: tps > w: tps\"\n")
    with pytest.raises(ConfigError, match=r"9 clients make 13 connections .* max_connections is 12"):
        Runner(s, NeverStarted(), out_dir=tmp_path / "runs", **how).run()
    assert not (tmp_path / "runs").exists()
