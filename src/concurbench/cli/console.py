"""The two consoles every command prints to: tables and results on standard output, the rest on
standard error. Wide enough for the comparison tables when the output is a file or a pipe."""

from __future__ import annotations

from rich.console import Console


def make_console(stderr: bool = False) -> Console:
    console = Console(stderr=stderr, highlight=False)
    if not console.is_terminal:
        console = Console(stderr=stderr, highlight=False, width=200)
    return console


out = make_console()
err = make_console(stderr=True)
