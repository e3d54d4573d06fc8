"""The `test` extra holds every requirement of the optional extras whose tests the default run has (cluster,
mssql; charts need no extra, matplotlib is a base dependency): .ci/run installs `.[test]` only, and with CI=true a missing extra fails its tests."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_test_extra_installs_the_optional_extras_the_tests_need():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    test = set(extras["test"])
    for name in ("cluster", "mssql"):
        missing = set(extras[name]) - test
        assert not missing, f"the test extra lacks the {name} extra's {sorted(missing)} (.ci/run installs .[test])"
    assert "pip install --quiet --disable-pip-version-check -e '.[test]'" in (ROOT / ".ci" / "run").read_text()
