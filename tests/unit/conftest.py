"""Unit-tier helpers: the simulated verdict rates, printed at the end of the test run."""

from __future__ import annotations

import pytest

_RATES: list[str] = []


@pytest.fixture()
def simulated_rates():
    """Lines of simulated rates (error and power of the decision rule) for the end-of-run summary."""
    return _RATES.append


def pytest_terminal_summary(terminalreporter):
    if _RATES:
        terminalreporter.section("simulated verdict rates (tests/unit/test_decision_rule.py)")
        for line in _RATES:
            terminalreporter.write_line(line)
