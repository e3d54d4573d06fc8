"""The seam between Python and the compiled loop: the structs they pass each other, named and versioned.

What crosses to _fastloop.c as numbers is packed into a struct that both sides declare by name: a
`Layout` here (its C struct's name, its version, its fields in order; native byte order, standard
sizes, no padding), and the struct of that name in _fastloop.c. Python packs and reads by field name,
C by member. A struct with a head starts with two fields: `interface`, the extension's INTERFACE
(stated only in _fastloop.c; read here from the built module, 0 when none is built), and `layout`,
the struct's version; each side refuses a struct whose head or size is not its own. The extension
exports its side as LAYOUTS (each struct's version, size and every member's offset and size, from
offsetof); fastloop.bind refuses a build whose LAYOUTS are not `describe()`, so a build of other
sources is never called, and tests/unit/test_seam.py holds the two to each other.

Change a struct here and in _fastloop.c together, with its version: a change of what a field means
(or of how C draws from it) changes the version even when no field moves, so an extension built
before it is refused. What crosses as Python objects (a session's statements and draw spec, the
engine's functions that name a failure) is read by C by attribute (fastloop.py).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

try:
    from . import _fastloop as extension
except ImportError as exc:  # not built (no compiler at install), or built for another Python
    extension = None
    WHY = "not built" if "_fastloop" in str(exc) and "cannot import name" in str(exc) else str(exc)
else:
    WHY = ""

# the extension's INTERFACE, as the module says (never stated in Python); 0: none built, or one built before it
INTERFACE = getattr(extension, "INTERFACE", 0)
HEAD = (("interface", "I"), ("layout", "I"))


@dataclass(frozen=True)
class Layout:
    """One struct of the seam: `fields` are (name, struct format code) in order; `head`: it starts with
    HEAD (interface and version), which pack fills and read checks."""

    name: str
    version: int
    fields: tuple[tuple[str, str], ...]
    head: bool = True
    _struct: struct.Struct = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        fields = (HEAD + self.fields) if self.head else self.fields
        object.__setattr__(self, "fields", fields)
        object.__setattr__(self, "_struct", struct.Struct("=" + "".join(code for _name, code in fields)))

    @property
    def size(self) -> int:
        return self._struct.size

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for name, _code in self.fields)

    def describe(self) -> tuple:
        """(version, size, ((field, offset, size), ...)): as the extension's LAYOUTS gives its struct."""
        out, offset = [], 0
        for name, code in self.fields:
            size = struct.calcsize("=" + code)
            out.append((name, offset, size))
            offset += size
        return self.version, self.size, tuple(out)

    def pack(self, **values) -> bytes:
        """The struct from its fields by name; a head gets this build's INTERFACE and the version unless given."""
        if self.head:
            values = {"interface": INTERFACE, "layout": self.version, **values}
        missing = [name for name in self.names if name not in values]
        unknown = [name for name in values if name not in self.names]
        if missing or unknown:
            raise TypeError(f"{self.name}: " + "; ".join(
                part for part in (f"missing {', '.join(missing)}" if missing else "",
                                  f"no field {', '.join(unknown)}" if unknown else "") if part))
        return self._struct.pack(*(values[name] for name in self.names))

    def unpack(self, data, offset: int = 0) -> dict:
        """The struct at `offset` of `data`, by field name, unchecked."""
        return dict(zip(self.names, self._struct.unpack_from(data, offset)))

    def read(self, data, exact: bool = True) -> dict:
        """The struct at the start of `data`, its head checked against this side's (`exact`: nothing after it)."""
        if len(data) < self.size or (exact and len(data) != self.size):
            raise ValueError(f"a {self.name} of {len(data)} bytes; this side reads {self.size}")
        got = self.unpack(data)
        if self.head and got["interface"] != INTERFACE:
            raise ValueError(f"a {self.name} packed for interface {got['interface']}; the extension here is "
                            f"interface {INTERFACE} (built from other sources: rebuild it)")
        if self.head and got["layout"] != self.version:
            raise ValueError(f"a {self.name} of layout {got['layout']}; this side reads layout {self.version}")
        return got


# A timed pool's schedule in one worker (schedule.Pace.export): the head, then `n_segs` segments. `fixed`: fixed
# arrivals (else Poisson); `limit`: the latency limit (ns, 0: none); `measure_from`: the window's start; `seed`: of
# the stream of uniforms both loops draw arrivals from (so version 2 covers the way C draws them too).
PACE_HEAD = Layout("PaceHead", 2, (("n_segs", "I"), ("fixed", "i"), ("limit", "q"), ("measure_from", "q"),
                                   ("seed", "Q")))
# A segment: from `start` to `end` (ns), `per_ns` arrivals a nanosecond in this worker (0: none), its active clients.
PACE_SEGMENT = Layout("PaceSeg", 1, (("start", "q"), ("end", "q"), ("per_ns", "d"), ("clients", "q")), head=False)

# One session as the loop starts it (fastloop._Glue.spec): its connection (`conn`, the PGconn's address, and its
# socket `fd`), its slot in the shared arrays, `protocol` (its index in engines/postgres.py's PROTOCOLS),
# `n_params` and `n_statements` (the lengths of its draws and plans), `max_tries`, its `index` in the pool and
# whether the pool is `paced` (a rate), think time (ns), `transactions` (its count to run; -1: the window's) and
# the `latency_limit` (ns, 0: none).
SESSION = Layout("SessionSpec", 1, (("fd", "i"), ("slot", "i"), ("protocol", "i"), ("n_params", "i"),
                                     ("n_statements", "i"), ("max_tries", "i"), ("index", "i"), ("paced", "i"),
                                     ("conn", "Q"), ("think", "q"), ("transactions", "q"), ("latency_limit", "q")))

# One session as the loop hands it back (fastloop._Glue.sync), so the pure loop could go on from it: session.py's
# fields of those names, `connected` (it still has its connection), then `n_statements` bytes, 1 where that
# statement is prepared on the connection.
SYNC = Layout("SessionSync", 1, (("state", "i"), ("step", "i"), ("attempt", "i"), ("retries", "i"),
                                 ("connected", "i"), ("n_statements", "i"), ("counted", "q"), ("finished", "q"),
                                 ("t0", "q"), ("s0", "q"), ("wake_at", "q")))

# What a run of the loop is told once: session.py's states (the C keeps Python's numbers), the slot status of a
# finished session (pool.py), and `wait`: how it waits for a due time (an index of the extension's WAITS).
ENV = Layout("LoopEnv", 1, (("running", "i"), ("rolling_back", "i"), ("thinking", "i"), ("done", "i"),
                            ("slot_done", "i"), ("wait", "i")))

LAYOUTS = (PACE_HEAD, PACE_SEGMENT, SESSION, SYNC, ENV)


def describe() -> dict[str, tuple]:
    """Every struct of the seam as this side declares it, in the form of the extension's LAYOUTS."""
    return {layout.name: layout.describe() for layout in LAYOUTS}


def differences(theirs) -> list[str]:
    """Where the extension's LAYOUTS (`theirs`) differ from this side's: one line a struct."""
    ours = describe()
    if not isinstance(theirs, dict):
        return ["it describes no structs (built before they were named)"]
    out = []
    for name in sorted(set(ours) | set(theirs)):
        if name not in theirs:
            out.append(f"it has no {name}")
        elif name not in ours:
            out.append(f"its {name} is unknown here")
        elif tuple(theirs[name]) != ours[name]:
            (v1, s1, f1), (v2, s2, f2) = theirs[name], ours[name]
            if v1 != v2:
                out.append(f"its {name} is layout {v1}, this side's {v2}")
            else:
                out.append(f"its {name} is {s1} bytes ({', '.join(f'{n}@{o}' for n, o, _ in f1)}), this side's "
                           f"{s2} ({', '.join(f'{n}@{o}' for n, o, _ in f2)})")
    return out
