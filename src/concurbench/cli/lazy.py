"""A click group whose commands are imported on first use, so that a light command (`history add`,
`validate`) does not pay for loading the runner, the provisioners, pandas or SciPy."""

from __future__ import annotations

import importlib

import click


class LazyGroup(click.Group):
    """`where` maps each command's name to `module:attribute`, the module relative to concurbench.cli."""

    def __init__(self, *args, where: dict[str, str], **kwargs):
        super().__init__(*args, **kwargs)
        self.where = dict(where)

    def list_commands(self, ctx) -> list[str]:
        return sorted(self.where)

    def get_command(self, ctx, name: str):
        spot = self.where.get(name)
        if spot is None:
            return None
        module, attr = spot.split(":")
        return getattr(importlib.import_module(f"{__package__}.{module}"), attr)
