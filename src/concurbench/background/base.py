"""What every background part of a variant shares: on a failed start it is closed (so nothing it made
stays behind) and the failure becomes one EngineError that names it."""

from __future__ import annotations

import contextlib
from typing import Callable

from ..errors import EngineError


@contextlib.contextmanager
def closed_on_failure(observer, prefix: str, error_text: Callable[[BaseException], str], *,
                      wrap_engine_errors: bool = True):
    """Run a start-up; on any error close `observer` and raise `EngineError("<prefix>: <first line>")`.

    With `wrap_engine_errors=False` an EngineError raised inside (already worded for the user, or an
    Unsupported the runner must see) passes through as it is."""
    try:
        yield
    except Exception as exc:
        observer.close()
        if isinstance(exc, EngineError) and not wrap_engine_errors:
            raise
        raise EngineError(f"{prefix}: {error_text(exc)}", exc) from exc


def close_quietly(conn) -> None:
    """Close a connection that may already be broken."""
    if conn is None:
        return
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - closing a broken connection
        pass
