"""Charts of a stored run: the files written, their size and text, and the errors (no server needed).

The fixture is a quick row-lock-vs-advisory run (histograms stripped to keep it small).
"""

from __future__ import annotations

import json
import shutil
import struct
import sys
from pathlib import Path

import pytest

from concurbench.errors import ConfigError
from concurbench.report.plots import write_plots

FIXTURE = Path(__file__).parent / "fixtures" / "run_rowlock"
EXPECTED = ["throughput-locks", "latency-locks", "latency-bystander", "latency-multixact",
            "wait_events-locks-4clients", "wait_events-locks-32clients", "wait_events-bystander",
            "wait_events-multixact", "wait-profile-locks", "wait-profile-bystander", "wait-profile-multixact"]


def _copy_run(tmp: Path) -> Path:
    run = tmp / "run"
    shutil.copytree(FIXTURE, run)
    return run


@pytest.fixture(scope="module")
def plotted(tmp_path_factory):
    pytest.importorskip("matplotlib", reason="plots need matplotlib")
    run = _copy_run(tmp_path_factory.mktemp("plots"))
    return run, write_plots(run)


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()[:24]
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    assert data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


def test_expected_files_in_both_formats(plotted):
    run, paths = plotted
    assert sorted(p.name for p in paths) == sorted(f"{stem}.{fmt}" for stem in EXPECTED for fmt in ("png", "svg"))
    for path in paths:
        assert path.parent == run / "plots"
        assert path.stat().st_size > 1000, f"{path.name} is nearly empty"


def test_pngs_are_8_by_4_5_inches_at_150_dpi(plotted):
    _, paths = plotted
    for path in paths:
        if path.suffix != ".png":
            continue
        width, height = _png_size(path)
        if path.stem.startswith(("throughput-", "latency-", "wait_events-locks-")):
            assert (width, height) == (1200, 675), path.name
        else:  # panels of three runs or more wrap onto a second row: taller, same width
            assert width == 1200 and height >= 675, path.name


def test_png_decodes(plotted):
    from matplotlib.image import imread

    run, _ = plotted
    image = imread(run / "plots" / "throughput-locks.png")
    assert image.shape[:2] == (675, 1200)
    assert image.std() > 0.01  # not a blank canvas


def test_svgs_carry_labels_title_and_server(plotted):
    run, _ = plotted
    plots = run / "plots"
    throughput = (plots / "throughput-locks.svg").read_text()
    for text in ("row-lock-vs-advisory (quick)", "PostgreSQL 18.6", "clients (concurrent sessions)",
                 "throughput (transactions/s)", "for_update", "advisory"):
        assert text in throughput, text
    latency = (plots / "latency-locks.svg").read_text()
    assert "transaction latency (ms" in latency and "p99" in latency and "row-lock-vs-advisory" in latency
    waits = (plots / "wait_events-locks-32clients.svg").read_text()
    for text in ("time in measurement window (s)", "sessions (count)", "Lock:tuple", "Lock:advisory",
                 "row-lock-vs-advisory"):
        assert text in waits, text
    profile = (plots / "wait-profile-bystander.svg").read_text()
    assert "share of sampled non-idle sessions (%)" in profile and "bystander_beside_advisory" in profile


def test_run_without_sweep_has_no_throughput_chart(tmp_path):
    pytest.importorskip("matplotlib")
    run = _copy_run(tmp_path)
    summary = json.loads((run / "summary.json").read_text())
    summary["results"] = [r for r in summary["results"] if r["point"] is None]
    (run / "summary.json").write_text(json.dumps(summary))
    out = tmp_path / "out"
    names = {p.name for p in write_plots(run, out, formats=("png",))}
    assert not any(n.startswith("throughput-") for n in names)
    assert {"latency-bystander.png", "wait-profile-multixact.png", "wait_events-bystander.png"} <= names
    assert not any("locks" in n for n in names)


def test_missing_run_dir_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="no such run directory"):
        write_plots(tmp_path / "nope")


def test_directory_without_summary_is_a_config_error(tmp_path):
    (tmp_path / "manifest.json").write_text((FIXTURE / "manifest.json").read_text())
    with pytest.raises(ConfigError, match="summary.json"):
        write_plots(tmp_path)


def test_empty_results_is_a_config_error(tmp_path):
    run = _copy_run(tmp_path)
    (run / "summary.json").write_text(json.dumps({"format_version": 1, "results": []}))
    with pytest.raises(ConfigError, match="no variant runs"):
        write_plots(run)


def test_samples_without_time_column_is_a_config_error(tmp_path):
    pytest.importorskip("matplotlib")
    run = _copy_run(tmp_path)
    (run / "samples" / "wait_events.csv").write_text("variant,point,wait,sessions\nfor_update,4,CPU,1\n")
    with pytest.raises(ConfigError, match="t_s"):
        write_plots(run, tmp_path / "out")


def test_unknown_format_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="formats"):
        write_plots(_copy_run(tmp_path), formats=("gif",))


def test_missing_matplotlib_says_how_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ConfigError, match="pip install 'matplotlib>=3.7'"):
        write_plots(_copy_run(tmp_path))
