"""Engines by the names scenarios use (`engine: postgres` or `engine: mssql`).

An engine is a module that meets the `Engine` protocol (engines/base.py); it is imported when asked for.
"""

from __future__ import annotations

import importlib
from typing import cast

from .base import Engine

ENGINES = {"postgres": "postgres", "mssql": "sqlserver"}


def get_engine(name: str) -> Engine:
    if name not in ENGINES:
        raise ValueError(f"unknown engine {name}")
    return cast(Engine, importlib.import_module(f"{__package__}.{ENGINES[name]}"))
