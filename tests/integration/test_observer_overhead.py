"""The observer-overhead scenario, quick, through the command: its claims hold and the slow log path
(a FIFO drained by a helper process) leaves no drain process, no FIFO and no server behind, also
after a Ctrl-C in the middle of the slow-log variant."""

from __future__ import annotations

import glob
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from concurbench.errors import EngineError
from concurbench.background.log_drain import DIR_PREFIX, LogDrain
from concurbench.scenario.model import Background

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "scenarios" / "postgres" / "observer-overhead.yaml"
pytestmark = pytest.mark.integration


def leftovers() -> set[str]:
    """Log drain processes and FIFO directories present now."""
    found = {str(p) for p in glob.glob(os.path.join(tempfile.gettempdir(), DIR_PREFIX + "*"))}
    for proc in psutil.process_iter(["name", "cmdline"]):
        try:
            cmd = " ".join(proc.info["cmdline"] or [])
        except psutil.Error:
            continue
        if "concurbench.background.drain_process" in cmd:
            found.add(f"drain pid {proc.pid}")
    return found


def server_ports_open(run_dir: Path) -> list[int]:
    """Ports of the run's servers that still accept connections (none should, once the run is over)."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    open_ports = []
    for server in manifest.get("servers") or []:
        port = int(str(server["connection"]).rsplit(":", 1)[-1].split("/")[0])
        with socket.socket() as sock:
            sock.settimeout(2)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                open_ports.append(port)
    return open_ports


def test_quick_run_contradicts_no_claim_and_leaves_no_drain_or_fifo(tmp_path):
    """One quick run of every variant: no claim fails (whether each is decided in one run depends on the
    machine's noise; the versions tier and benchmarks/claims_under_noise.py check that they pass)."""
    before = leftovers()
    result = subprocess.run([sys.executable, "-m", "concurbench.cli.main", "run", str(SCENARIO), "--quick",
                             "--out", str(tmp_path)], capture_output=True, text=True, cwd=ROOT,
                            timeout=300)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    run_dir = Path(result.stdout.strip().splitlines()[-1])
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["claims"] and not [c for c in summary["claims"] if c["verdict"] == "fail"], summary["claims"]
    runs = {r["variant"]: r for r in summary["results"] if r["repeat"] == 1}
    drain = runs["slow_log"]["background"][0]
    assert drain["kind"] == "log_drain" and drain["drain_bytes"] > 0 and "notes" not in drain, drain
    assert not os.path.exists(drain["fifo"]) and not os.path.exists(os.path.dirname(drain["fifo"]))
    # every variant ran with its own observer only (read from the server), and the last one with the
    # scenario's settings again
    observers = {name: r["probes"]["observers"]["before"][0] for name, r in runs.items()}
    assert observers["auto_explain_timing"]["preload"] == "auto_explain"
    assert observers["auto_explain_timing"]["explain_timing"] == "on"
    assert observers["auto_explain_no_timing"]["explain_timing"] == "off"
    assert observers["log_min_duration"]["preload"] == "" and observers["log_min_duration"]["log_min_duration"] == "0"
    assert observers["slow_log"]["log_statement"] == "all"
    assert observers["baseline_again"] == observers["baseline"]
    assert observers["baseline"]["preload"] == "" and observers["baseline"]["log_statement"] == "none"
    assert observers["baseline_again"]["log_directory"] == "log"  # the log_drain's ALTER SYSTEM was undone
    assert leftovers() - before == set() and server_ports_open(run_dir) == []


def test_ctrl_c_in_the_slow_log_variant_stops_drain_fifo_and_server(tmp_path):
    before = leftovers()
    proc = subprocess.Popen([sys.executable, "-m", "concurbench.cli.main", "run", str(SCENARIO), "--variant",
                             "slow_log", "--param", "payments=20000", "--out", str(tmp_path)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    seen = ""
    while "variant slow_log" not in seen and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        seen += line
    assert "variant slow_log" in seen, seen
    deadline = time.monotonic() + 30  # in the warm-up: sessions are queued behind the throttled log
    while not leftovers() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers() - before, "the drain should be running now"
    stopped = time.monotonic()
    os.killpg(proc.pid, signal.SIGINT)  # what a terminal does on Ctrl-C
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr[-2000:]
    assert time.monotonic() - stopped < 30
    run_dir = Path(stdout.strip().splitlines()[-1])
    assert json.loads((run_dir / "manifest.json").read_text())["status"] == "interrupted"
    deadline = time.monotonic() + 15  # the drain's process may take a moment to be reaped on a busy machine
    while leftovers() - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert leftovers() - before == set()
    assert server_ports_open(run_dir) == []


def test_log_drain_refuses_a_server_without_the_logging_collector(server):
    before = leftovers()
    drain = LogDrain(Background("slow", "log_drain", "read committed", (), rate=32768.0), server[1].conninfo)
    with pytest.raises(EngineError, match="logging_collector = on"):
        drain.start()
    drain.close()
    assert leftovers() - before == set()
