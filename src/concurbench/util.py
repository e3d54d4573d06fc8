"""Small helpers shared by the scenario loader, the commands and the engines: the first line of an error, a
did-you-mean for unknown names, and the duration and rate forms a scenario writes (`30s`, `500ms`; `32kB/s`)."""

from __future__ import annotations

import difflib
import re
from typing import Any

from .errors import ConcurbenchError

def first_line(error: BaseException | str | None) -> str:
    """The first line of an error (a ConcurbenchError's message, a driver's words) or of a text, for messages; the
    error's type when it says nothing."""
    if isinstance(error, str):
        text = error
    elif isinstance(error, ConcurbenchError):
        text = error.message
    else:
        text = str(error if error is not None else "")
    text = text.strip()
    return text.splitlines()[0] if text else type(error).__name__


def suggest(word: str, choices) -> str:
    """A did-you-mean suffix for an unknown name, or an empty string."""
    # never the word itself: a name that exists but has no value is another problem than a misspelling
    close = difflib.get_close_matches(str(word), [str(c) for c in choices if str(c) != str(word)], n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""


_TIME_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}


def parse_duration(value: Any) -> float | None:
    """'30s', '500ms', '2m', '1h' or a plain number of seconds."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if not isinstance(value, str):
        return None
    text = value.strip().lower()
    for unit in sorted(_TIME_UNITS, key=len, reverse=True):
        if text.endswith(unit):
            number = text[: -len(unit)].strip()
            try:
                return float(number) * _TIME_UNITS[unit]
            except ValueError:
                return None
    try:
        return float(text)
    except ValueError:
        return None


_RATE = re.compile(r"^\s*(\d+(?:\.\d*)?|\.\d+)\s*(B|kB|MB|GB)?\s*(?:/\s*s)?\s*$")
_BYTE_UNITS = {None: 1, "B": 1, "kB": 1024, "MB": 1024 ** 2, "GB": 1024 ** 3}


def parse_rate(value) -> float:
    """Bytes per second from `32kB/s`, `1MB/s`, `500B/s` or a plain number of bytes per second."""
    if isinstance(value, bool):
        raise ValueError(f"must be a rate such as 32kB/s, got {value}")
    if isinstance(value, (int, float)):
        rate = float(value)
    else:
        m = _RATE.match(str(value))
        if not m:
            raise ValueError(f"must be a rate such as 32kB/s (units B, kB, MB, GB per second), got '{value}'")
        rate = float(m.group(1)) * _BYTE_UNITS[m.group(2)]
    if rate < 64:
        raise ValueError(f"must be at least 64 B/s, got {value}")
    return rate
