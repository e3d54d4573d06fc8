"""Unit-tier helpers: the simulated rates (verdicts, change points), printed at the end of the test run; a script
of benchmarks/ imported as a module."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

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


@pytest.fixture(scope="module")
def benchmark_script(request):
    """The script benchmarks/NAME.py that the test module names in BENCHMARK, imported as a module for its
    functions (it does not run: its main is behind `if __name__ == "__main__"`)."""
    name = request.module.BENCHMARK
    spec = importlib.util.spec_from_file_location(name, BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def pytest_terminal_summary(terminalreporter):
    for title, lines in (("simulated verdict rates (tests/unit/test_decision_rule.py)", _RATES),
                         ("simulated change-point rates (tests/unit/test_history_detect.py)", _HISTORY_RATES)):
        if lines:
            terminalreporter.section(title)
            for line in lines:
                terminalreporter.write_line(line)
