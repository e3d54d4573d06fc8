"""Shared test helpers."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest

from concurbench.cli.main import main

ROOT = Path(__file__).resolve().parent.parent

# A test run started in the background by a non-interactive shell (`cmd &` in a script) inherits
# SIGINT ignored, and so would every harness it starts: the Ctrl-C tests would then send a signal
# nobody hears. An ignored signal stays ignored across exec, a handled one is reset to the default,
# so handling it here gives the harnesses the Ctrl-C a terminal gives them.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture()
def cli_main(monkeypatch, capsys):
    """Runs `concurbench ARGS...` in this process, as the command does; returns (exit code, stdout, stderr)."""

    def run(*args) -> tuple[int, str, str]:
        monkeypatch.setattr(sys, "argv", ["concurbench", *map(str, args)])
        code = 0
        try:
            main()
        except SystemExit as exited:
            code = exited.code
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run
