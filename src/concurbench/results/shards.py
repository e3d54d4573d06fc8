"""Shards: one run cut into shares that separate machines run, and `concurbench merge` joins again.

A run is a list of combinations: server (its place in `--server-version`, 0 for the first), repeat
(1..`--repeat`), variant (scenario order, after `--variant`) and sweep point (the variant's order).
`run --shard I/N` runs shard I of N, by this rule:

    number the combinations 0..C-1 in the order server, repeat, variant, point (server outermost);
    combination k belongs to shard  floor(k * N / C) + 1.

So every combination is in exactly one shard, the shards are contiguous blocks whose sizes differ
by at most one, and the rule depends on nothing but the plan (no timing, no coordination). Every
server has the same number of combinations, so N equal to the number of servers gives one server a
shard, and N equal to servers x repeats one repeat of one server a shard (every variant and point).
More shards than combinations is refused.

This module is the rule only; the runner applies it and results/join.py checks it when joining.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ..errors import ConfigError

_SHARD = re.compile(r"^\s*(\d+)\s*/\s*(\d+)\s*$")


def refuse_with_check(shard: "Shard | None", checked: bool) -> None:
    """A shard and --check do not go together: ConfigError (the one place it is said)."""
    if shard is not None and checked:
        raise ConfigError("--shard cannot be used with --check: the sequential check decides from all the data, and "
                          "a shard has only its share; run the shards without --check, then `concurbench merge "
                          "SHARD_DIR... -o DIR --check` judges the claims on the merged data")


@dataclass(frozen=True)
class Combination:
    """One variant run of the plan: server position, repeat, variant and sweep point."""

    server: int
    repeat: int
    variant: str
    point: int | None

    def label(self, versions: list[str | None] | None = None) -> str:
        """`for_update@32 repeat 2 on 16.4` (or `on server 2` when its version is not known)."""
        version = versions[self.server] if versions and self.server < len(versions) else None
        where = version or f"server {self.server + 1}"
        return f"{self.variant}{'' if self.point is None else f'@{self.point}'} repeat {self.repeat} on {where}"


@dataclass(frozen=True)
class Plan:
    """What the unsharded run would run: how many servers, which variants at which points, how many repeats."""

    servers: int
    variants: tuple[tuple[str, tuple[int | None, ...]], ...]
    repeat: int

    @classmethod
    def of(cls, servers: int, variants, repeat: int) -> "Plan":
        """From the run's server count, its variants (objects with `name` and `sweep`) and `--repeat`."""
        return cls(servers, tuple((v.name, tuple(v.sweep)) for v in variants), max(1, repeat))

    def combinations(self) -> list[Combination]:
        """Every combination, in the order the rule numbers them."""
        return [Combination(server, repeat, name, point) for server in range(self.servers)
                for repeat in range(1, self.repeat + 1) for name, points in self.variants for point in points]

    def as_dict(self) -> dict:
        return {"servers": self.servers, "repeat": self.repeat,
                "variants": [{"variant": name, "points": list(points)} for name, points in self.variants]}

    @classmethod
    def from_dict(cls, data: dict) -> "Plan":
        """Raises ValueError (or KeyError, TypeError) on a shape that is not a plan."""
        variants = tuple((str(v["variant"]), tuple(v["points"])) for v in data["variants"])
        servers, repeat = int(data["servers"]), int(data["repeat"])
        if servers < 1 or repeat < 1 or not variants:
            raise ValueError("a plan has at least one server, one repeat and one variant")
        return cls(servers, variants, repeat)


@dataclass(frozen=True)
class Shard:
    """`--shard INDEX/COUNT`: shard INDEX (1-based) of COUNT."""

    index: int
    count: int

    def __post_init__(self):
        if not 1 <= self.index <= self.count:
            raise ConfigError(f"--shard {self}: expected I/N with 1 <= I <= N, such as 1/2")

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, text: str) -> "Shard":
        m = _SHARD.match(str(text))
        if not m:
            raise ConfigError(f"--shard {text}: expected I/N (shard I of N), such as 1/2")
        return cls(int(m.group(1)), int(m.group(2)))

    def combinations(self, plan: Plan) -> list[Combination]:
        """This shard's combinations, in the rule's order; ConfigError when the plan has fewer than COUNT."""
        every = plan.combinations()
        if self.count > len(every):
            raise ConfigError(f"--shard {self}: the run has only {len(every)} combination"
                              f"{'s' if len(every) != 1 else ''} of server, variant, point and repeat, so it "
                              f"cannot be cut into {self.count} shards; use at most {len(every)}")
        return [c for k, c in enumerate(every) if shard_number(k, len(every), self.count) == self.index]


def shard_number(k: int, total: int, count: int) -> int:
    """The shard (1..count) of the k-th of `total` combinations: contiguous blocks of near-equal size."""
    return k * count // total + 1


def describe(combinations: list[Combination], versions: list[str | None] | None = None, most: int = 6) -> str:
    """A few combinations by name, and how many more."""
    names = [c.label(versions) for c in combinations[:most]]
    more = len(combinations) - len(names)
    return ", ".join(names) + (f" and {more} more" if more > 0 else "")
