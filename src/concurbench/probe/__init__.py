"""`concurbench probe`: a short check of a target against a scenario, with no load.

It connects, reads each sampler once, starts and stops each background session, runs the setup
inside a transaction it rolls back (with the probe queries and the teardown), plans the server
settings without applying them, and checks the permissions the scenario needs. Every step is one
`Check` in a `ProbeReport`; nothing here prints. `core.probe` runs it; `postgres` and `mssql` hold
what differs by engine."""

from .core import probe
from .report import Check, ProbeReport

__all__ = ["Check", "ProbeReport", "probe"]
