"""Samplers the probe could not read before the setup, read again after it.

The probe reads each sampler first on a connection of its own, as the runner's driver does. A
sampler that needs what the setup creates (`index_physical_stats` of a table, `table_stats` of named
tables) fails there on a fresh server, since the probe runs the setup only inside a transaction it
rolls back. Such a sampler is read once more on the setup's connection, inside that transaction,
right after the setup of a variant that has it, where the objects exist; the rollback takes away
whatever the reading left. Only when it fails there too is it a failed check, with the words of that
second reading (the run reads its samplers after the setup, so those are the words a run would meet).

The engine's half of the probe calls `read(conn, variant, guard)` at that point; `guard()` is its
context manager that undoes a failed reading without ending the probe's transaction (a savepoint).
"""

from __future__ import annotations

from typing import Callable

from ..util import first_line
from ..samplers.registry import build as build_samplers
from .report import Check, failed, ok


def spec_key(spec) -> tuple:
    """The key under which a sampler is read once for all the variants that use it alike."""
    return spec.name, repr(spec.options)


class DeferredSamplers:
    """The samplers whose first reading failed, keyed like the probe's readings, with that first failure's words."""

    def __init__(self, version_num: int, fix: Callable[[str, str], str]):
        self.version_num = version_num
        self.fix = fix  # the engine side's advice for an error's words
        self.waiting: dict[tuple, tuple[object, str]] = {}  # key -> (spec, words of the first reading)

    def add(self, spec, words: str) -> None:
        self.waiting[spec_key(spec)] = (spec, words)

    def read(self, conn, variant, guard) -> list[Check]:
        """Read this variant's waiting samplers on `conn`, inside the probe's transaction, after its setup."""
        checks = []
        for spec in variant.samplers:
            if spec_key(spec) not in self.waiting:
                continue
            _, before = self.waiting.pop(spec_key(spec))
            sampler = build_samplers([spec])[0]
            name = f"sampler {sampler.name}"
            try:
                with guard():
                    sampler.prepare(conn, self.version_num)
                    sampler.read(conn)
            except Exception as exc:  # noqa: BLE001 - a driver error is the server's answer
                words = first_line(exc)
                checks.append(failed(name, words if words == before else f"{words} (before the setup: {before})",
                                     self.fix(words, "read the sampler's views")))
                continue
            checks.append(ok(name, f"read once after {variant.name}'s setup, inside the probe's rolled-back "
                                   f"transaction (before the setup: {before})"))
        return checks

    def unread(self) -> list[Check]:
        """The samplers the setup never got to (it failed first): failed with the first reading's words."""
        checks = [failed(f"sampler {spec.name}", words, self.fix(words, "read the sampler's views") or
                         "the setup stopped before the probe could read it after the setup; fix the setup first")
                  for spec, words in self.waiting.values()]
        self.waiting.clear()
        return checks
