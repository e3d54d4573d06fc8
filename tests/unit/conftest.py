"""Unit-tier helpers: the simulated rates (verdicts, change points), printed at the end of the test run."""

from __future__ import annotations

import pytest

_RATES: list[str] = []
_HISTORY_RATES: list[str] = []


@pytest.fixture()
def simulated_rates():
    """Lines of simulated rates (error and power of the decision rule) for the end-of-run summary."""
    return _RATES.append


@pytest.fixture()
def history_rates():
    """Lines of simulated change-point rates (error and power of the history's detector)."""
    return _HISTORY_RATES.append


def pytest_terminal_summary(terminalreporter):
    for title, lines in (("simulated verdict rates (tests/unit/test_decision_rule.py)", _RATES),
                         ("simulated change-point rates (tests/unit/test_history_detect.py)", _HISTORY_RATES)):
        if lines:
            terminalreporter.section(title)
            for line in lines:
                terminalreporter.write_line(line)
