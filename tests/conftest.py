"""Shared test helpers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from concurbench.cli.main import main

ROOT = Path(__file__).resolve().parent.parent


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
