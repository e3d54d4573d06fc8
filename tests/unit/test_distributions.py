"""Parameter distributions: parsing, bounds, sequences, and zipfian frequencies against exact probabilities."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest

from concurbench.scenario.distributions import Distribution, parse_distribution
from concurbench.workload.distributions import _TABLE_LIMIT, make_drawer, zipf_probabilities


def draws(text: str, n: int, seed: int = 12345, **kwargs) -> list:
    draw = make_drawer(parse_distribution(text), random.Random(seed), **kwargs)
    return [draw() for _ in range(n)]


def chi_square(observed: Counter, probabilities: dict, n: int) -> float:
    """Pearson's statistic over the given bins (probabilities must sum to 1)."""
    assert math.isclose(math.fsum(probabilities.values()), 1.0, rel_tol=1e-12)
    return math.fsum((observed.get(k, 0) - n * p) ** 2 / (n * p) for k, p in probabilities.items())


def generous_critical(df: int) -> float:
    """Far beyond the 99.99th percentile of chi-square(df) (mean df, sd sqrt(2 df))."""
    return df + 8 * math.sqrt(2 * df)


# -- parsing ---------------------------------------------------------------------

@pytest.mark.parametrize("text, kind, args", [
    ("uniform(1, 100000)", "uniform", (1, 100000)),
    ("  zipfian( 1 , 100 , 1.1 ) ", "zipfian", (1, 100, 1.1)),
    ("zipfian(1, 100, 2)", "zipfian", (1, 100, 2)),
    ("sequence(1)", "sequence", (1,)),
    ("sequence(1, 1000)", "sequence", (1, 1000)),
    ("constant(5)", "constant", (5,)),
    ("constant(2.5)", "constant", (2.5,)),
    ("constant('abc')", "constant", ("abc",)),
    ("uniform(-5, 5)", "uniform", (-5, 5)),
])
def test_parse_accepts(text, kind, args):
    dist = parse_distribution(text)
    assert dist == Distribution(kind, args)


@pytest.mark.parametrize("value", [7, 2.5])
def test_parse_number_is_constant(value):
    assert parse_distribution(value) == Distribution("constant", (value,))


def test_str_round_trips():
    dist = parse_distribution("zipfian(1, 100, 1.1)")
    assert str(dist) == "zipfian(1, 100, 1.1)"
    assert parse_distribution(str(dist)) == dist


@pytest.mark.parametrize("value, fragment", [
    (True, "expected a distribution"),
    ("5", "expected a number or a distribution"),
    ("uniform", "expected a number or a distribution"),
    ("zipfan(1, 100, 1.1)", "unknown distribution 'zipfan' (did you mean 'zipfian'?)"),
    ("normal(0, 1)", "known: constant, uniform, zipfian, sequence"),
    ("uniform()", "uniform(...) takes 2 arguments, got 0"),
    ("uniform(1, 2, 3)", "uniform(...) takes 2 arguments, got 3"),
    ("zipfian(1, 100)", "zipfian(...) takes 3 arguments, got 2"),
    ("sequence(1, 2, 3)", "sequence(...) takes 1 or 2 arguments, got 3"),
    ("uniform(1, x)", "uniform(...) takes numbers, got '1, x'"),
    ("uniform(1.5, 3)", "bounds must be integers, got 1.5"),
    ("uniform(10, 1)", "needs min <= max, got 10 > 1"),
    ("zipfian(10, 1, 1.1)", "needs min <= max, got 10 > 1"),
    ("sequence(5, 1)", "needs start <= max, got 5 > 1"),
    ("zipfian(1, 100, 1.0)", "needs 1.001 <= s <= 1000"),
    ("zipfian(1, 100, 0.5)", "got 0.5"),
    ("zipfian(1, 100, 1000.5)", "got 1000.5"),
])
def test_parse_rejects(value, fragment):
    with pytest.raises(ValueError) as info:
        parse_distribution(value)
    assert fragment in str(info.value)


def test_zipfian_s_limits_are_inclusive():
    assert parse_distribution("zipfian(1, 10, 1.001)").args[2] == 1.001
    assert parse_distribution("zipfian(1, 10, 1000)").args[2] == 1000


# -- simple drawers --------------------------------------------------------------

def test_constant():
    assert set(draws("constant(42)", 100)) == {42}
    assert set(draws("constant('x')", 10)) == {"x"}


def test_uniform_stays_within_bounds_and_covers_them():
    values = draws("uniform(3, 7)", 20_000)
    assert min(values) == 3 and max(values) == 7
    assert set(values) == {3, 4, 5, 6, 7}
    counts = Counter(values)
    assert all(3_500 < c < 4_500 for c in counts.values())


@pytest.mark.parametrize("low, high", [(1, 1), (1, 2), (1, 10), (-5000, 5000), (1, 1_000_000), (0, 2**40 + 3)])
def test_uniform_draws_what_randint_draws(low, high):
    """The fast drawer gives randint's values for the same seed, so seeded runs stay reproducible."""
    ours = make_drawer(parse_distribution(f"uniform({low}, {high})"), random.Random("s:p:3"))
    theirs = random.Random("s:p:3")
    assert [ours() for _ in range(2_000)] == [theirs.randint(low, high) for _ in range(2_000)]


def test_same_seed_same_values_different_seed_different():
    assert draws("uniform(1, 1000000)", 50, seed=1) == draws("uniform(1, 1000000)", 50, seed=1)
    assert draws("uniform(1, 1000000)", 50, seed=1) != draws("uniform(1, 1000000)", 50, seed=2)


def test_sequence_without_max_is_unique_across_sessions():
    sessions = 4
    seen = []
    for i in range(sessions):
        values = draws("sequence(100)", 250, session=i, sessions=sessions)
        assert values == sorted(values)
        seen += values
    assert len(set(seen)) == len(seen) == 1000
    assert set(seen) == set(range(100, 1100))


def test_sequence_single_session_counts_from_start():
    assert draws("sequence(5)", 4) == [5, 6, 7, 8]


def test_sequence_with_max_wraps_and_stays_unique_until_it_wraps():
    # 3 sessions share 1..10: the first 10 values drawn (4 + 3 + 3) are exactly 1..10
    per_session = {0: 4, 1: 3, 2: 3}
    first = []
    for i, n in per_session.items():
        first += draws("sequence(1, 10)", n, session=i, sessions=3)
    assert sorted(first) == list(range(1, 11))
    # one session alone wraps at max back to start
    assert draws("sequence(1, 3)", 7) == [1, 2, 3, 1, 2, 3, 1]
    # every value stays in range, however long it runs
    for i in range(3):
        assert set(draws("sequence(1, 10)", 100, session=i, sessions=3)) <= set(range(1, 11))


# -- zipfian ---------------------------------------------------------------------

def test_zipf_probabilities_exact():
    p = zipf_probabilities(3, 2.0)
    total = 1 + 1 / 4 + 1 / 9
    assert p == pytest.approx([1 / total, 0.25 / total, (1 / 9) / total], rel=1e-12)
    assert math.fsum(zipf_probabilities(100, 1.1)) == pytest.approx(1.0, abs=1e-12)


def test_zipfian_table_sampler_matches_exact_probabilities():
    n, s, samples = 100, 1.1, 200_000
    counts = Counter(draws(f"zipfian(1, {n}, {s})", samples, seed=7))
    assert min(counts) >= 1 and max(counts) <= n
    probs = {k: p for k, p in enumerate(zipf_probabilities(n, s), start=1)}
    stat = chi_square(counts, probs, samples)
    assert stat < generous_critical(n - 1), stat
    # and the head is where it should be: P(1) ~ 0.19 for this law
    assert counts[1] / samples == pytest.approx(probs[1], abs=0.005)
    assert counts[1] > counts[2] > counts[3] > counts[10]


def test_zipfian_chi_square_detects_a_wrong_law():
    """The check above can fail: the same sample is far off a zipfian law with another s."""
    n, samples = 100, 200_000
    counts = Counter(draws(f"zipfian(1, {n}, 1.1)", samples, seed=7))
    wrong = {k: p for k, p in enumerate(zipf_probabilities(n, 1.2), start=1)}
    assert chi_square(counts, wrong, samples) > 10 * generous_critical(n - 1)


def test_zipfian_rejection_sampler_matches_exact_probabilities():
    n, s, samples, head = 300_000, 1.5, 200_000, 20
    assert n > _TABLE_LIMIT  # forces the rejection sampler
    values = draws(f"zipfian(1, {n}, {s})", samples, seed=11)
    assert min(values) >= 1 and max(values) <= n
    total = math.fsum(k ** -s for k in range(1, n + 1))
    probs = {k: k ** -s / total for k in range(1, head + 1)}
    probs["tail"] = 1.0 - math.fsum(probs.values())
    counts = Counter(v if v <= head else "tail" for v in values)
    stat = chi_square(counts, probs, samples)
    assert stat < generous_critical(head), stat
    assert counts[1] / samples == pytest.approx(probs[1], abs=0.005)


def test_zipfian_offset_range_shifts_values():
    base = draws("zipfian(1, 100, 1.1)", 5_000, seed=3)
    shifted = draws("zipfian(1001, 1100, 1.1)", 5_000, seed=3)
    assert shifted == [v + 1000 for v in base]
    assert min(shifted) >= 1001 and max(shifted) <= 1100
    assert Counter(shifted).most_common(1)[0][0] == 1001


def test_zipfian_offset_range_shifts_values_in_rejection_sampler():
    base = draws("zipfian(1, 300000, 1.5)", 2_000, seed=3)
    shifted = draws("zipfian(501, 300500, 1.5)", 2_000, seed=3)
    assert shifted == [v + 500 for v in base]


def test_zipfian_single_value_range():
    assert set(draws("zipfian(7, 7, 1.1)", 100)) == {7}


def test_zipfian_rejection_sampler_with_s_near_one():
    values = draws("zipfian(1, 1000000, 1.001)", 1_000, seed=5)
    assert all(1 <= v <= 1_000_000 for v in values)
