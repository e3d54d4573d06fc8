"""How the command line reports one of our errors: one paragraph on standard error, then its exit code."""

from __future__ import annotations

import sys

from rich.markup import escape

from ..errors import ConcurbenchError
from .console import err


def fail(exc: ConcurbenchError) -> None:
    text = exc.message
    cause = exc.cause
    if cause is not None and str(cause).strip() and str(cause).strip().splitlines()[0] not in text:
        text += f" ({str(cause).strip().splitlines()[0]})"
    err.print(f"[red]error:[/red] {escape(text)}", markup=True, highlight=False, soft_wrap=True)
    sys.exit(exc.exit_code)
