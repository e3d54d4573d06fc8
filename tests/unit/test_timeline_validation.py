"""Validation of the rate and timeline keys of a pool: every bad value named with file, line and field."""

from __future__ import annotations

import pytest

from concurbench.errors import ConfigError
from concurbench.scenario.model import Phase
from concurbench.running.load import load_scenario

HEAD = """name: t
engine: postgres
duration: 2s
variants:
  a:
    pools:
      p:
        clients: 4
        transaction: SELECT 1
"""


def load(tmp_path, pool_lines: str):
    path = tmp_path / "s.yaml"
    path.write_text(HEAD + "".join(f"        {line}\n" for line in pool_lines.strip().splitlines()))
    return path, load_scenario(path)


def problems(tmp_path, pool_lines: str) -> list[tuple[int, str, str]]:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, pool_lines)
    return [(p.line, p.path, p.message) for p in info.value.problems]


def test_the_keys_load_into_the_pool(tmp_path):
    _path, scenario = load(tmp_path, """
rate: 1000/s
arrivals: fixed
latency_limit: 50ms
start_after: 0.5s
phases:
  - {duration: 500ms, rate: 500}
  - {duration: 0.5, clients: 2}""")
    p = scenario.variants[0].pools[0]
    assert (p.rate, p.arrivals, p.latency_limit, p.start_after, p.stop_after) == (1000.0, "fixed", 0.05, 0.5, None)
    assert p.phases == (Phase(0.5, rate=500.0), Phase(0.5, clients=2)) and p.paced and p.timed


@pytest.mark.parametrize("lines, expected", [
    ("rate: -5", (10, "variants.a.pools.p.rate", "must be a number of transactions per second above 0")),
    ("rate: 10\narrivals: bursty", (11, "variants.a.pools.p.arrivals", "must be one of poisson, fixed")),
    ("start_after: 3s", (10, "variants.a.pools.p.start_after", "(3 s) is beyond the measurement window (2 s)")),
    ("start_after: 1s\nstop_after: 0.5s", (11, "variants.a.pools.p.stop_after", "must be later than start_after")),
    ("phases:\n  - {duration: 1s, rate: 10}\n  - {duration: 1.5s, rate: 20}",
     (11, "variants.a.pools.p.phases", "phases last 2.5 s from the window's start (with start_after), longer than "
                                       "the duration (2 s)")),
    ("rate: 10\nthink: 5ms", (11, "variants.a.pools.p.think", "cannot be used with a rate")),
    ("latency_limit: 10ms", (10, "variants.a.pools.p.latency_limit", "needs a rate")),
    ("phases:\n  - {duration: 1s, clients: 9}", (11, "variants.a.pools.p.phases[0].clients",
                                                  "must be at most the pool's clients (4)")),
    ("phases:\n  - {duration: 1s}", (11, "variants.a.pools.p.phases[0]", "needs 'rate' or 'clients'")),
    ("phases:\n  - {duration: 1s, clients: 2}\n  - {duration: 1s, rate: 5}",
     (11, "variants.a.pools.p.phases[0]", "needs a rate: a later phase sets one")),
])
def test_a_bad_value_is_named_with_its_line_and_field(tmp_path, lines, expected):
    line, field, fragment = expected
    found = problems(tmp_path, lines)
    assert any(l == line and f == field and fragment in m for l, f, m in found), found


def test_the_message_names_the_file(tmp_path):
    with pytest.raises(ConfigError) as info:
        load(tmp_path, "rate: -5")
    assert str(tmp_path / "s.yaml") in str(info.value) and ":10:" in str(info.value)
