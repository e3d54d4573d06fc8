"""Charts after the README's first command: `pip install -e .` brings everything the chart code imports, so
`concurbench report DIR --format html` draws them (tests/unit/test_report_golden.py checks the page embeds every
chart written), and the hint for an install that left matplotlib out names a command that installs it. Read from
pyproject.toml and the README as a new user would follow them; the modules the charts import are read from the
chart code itself."""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

from concurbench.report.html import NO_MATPLOTLIB

ROOT = Path(__file__).resolve().parents[2]
CHART_CODE = ("report/plots.py", "report/chart_style.py", "report/overtime.py", "report/timeseries.py",
              "history/charts.py")
NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")


def _name(requirement: str) -> str:
    return NAME.match(requirement).group(1).lower().replace("_", "-")


def installed_by(target: str) -> set[str]:
    """The distributions `pip install -e TARGET` asks for, TARGET the project's folder with its extras (".[a,b]")."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = re.fullmatch(r"\.(?:\[([^\]]*)\])?", target.strip("'\""))
    assert extras is not None, f"not an install of the project's folder: {target}"
    wanted = list(project["dependencies"])
    for extra in filter(None, (e.strip() for e in (extras.group(1) or "").split(","))):
        wanted += project["optional-dependencies"][extra]
    return {_name(r) for r in wanted}


def readme_install() -> str:
    """What the README's first command installs (`python3 -m pip install -e TARGET && ...`)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    first = re.search(r"```sh\n(.*?)\n", text).group(1)
    return re.search(r"pip install -e (\S+)", first).group(1)


def chart_imports() -> set[str]:
    """The top-level modules, not the standard library's nor the package's, that the chart code imports."""
    found = set()
    for rel in CHART_CODE:
        path = ROOT / "src" / "concurbench" / rel
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m != "__future__"}


def test_the_readmes_first_install_brings_everything_the_charts_import():
    """The old pyproject kept matplotlib in an extra (plots), so the README's `pip install -e .` drew no chart."""
    modules = chart_imports()
    assert "matplotlib" in modules
    distributions = packages_distributions()
    wanted = {_name(distributions[m][0]) for m in modules}
    missing = wanted - installed_by(readme_install())
    assert not missing, f"`pip install -e {readme_install()}` (the README's first command) does not install {missing}"


def test_the_hint_for_missing_charts_names_a_command_that_installs_matplotlib():
    commands = re.findall(r"pip install ((?:-e )?'[^']+'|\S+)", NO_MATPLOTLIB)
    assert commands, NO_MATPLOTLIB
    for command in commands:
        target = command.removeprefix("-e ").strip("'\"")
        names = installed_by(target) if target.startswith(".") else {_name(target)}
        assert "matplotlib" in names, f"{NO_MATPLOTLIB!r}: `pip install {command}` does not install matplotlib"
