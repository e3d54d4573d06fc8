"""The compiled event loop is optional at install: a wheel builds with a compiler (and carries the
extension) and without one (and does not), from a copy of the project's sources."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.e2e


def build_wheel(tmp_path: Path, env: dict) -> tuple[subprocess.CompletedProcess, list[str]]:
    project = tmp_path / "project"
    project.mkdir()
    for name in ("pyproject.toml", "setup.py", "README.md"):
        shutil.copy(ROOT / name, project / name)
    shutil.copytree(ROOT / "src", project / "src", ignore=shutil.ignore_patterns("*.so", "__pycache__", "*.egg-info"))
    out = tmp_path / "wheels"
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(out),
                           str(project)], capture_output=True, text=True, env={**os.environ, **env}, timeout=600)
    wheels = list(out.glob("*.whl"))
    names = zipfile.ZipFile(wheels[0]).namelist() if wheels else []
    return done, names


def test_wheel_without_a_compiler_has_no_extension_and_builds(tmp_path):
    done, names = build_wheel(tmp_path, {"CC": str(tmp_path / "no-such-compiler")})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "concurbench/workload/fastloop.py" in names
    assert not [n for n in names if "_fastloop" in n and n.endswith(".so")]


@pytest.mark.skipif(shutil.which("gcc") is None and shutil.which("cc") is None, reason="no C compiler here")
def test_wheel_with_a_compiler_carries_the_extension(tmp_path):
    done, names = build_wheel(tmp_path, {})
    assert done.returncode == 0, done.stdout + done.stderr
    assert [n for n in names if n.startswith("concurbench/workload/_fastloop") and n.endswith(".so")]
