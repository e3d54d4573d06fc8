"""The one error hierarchy. Only the CLI turns these into messages and exit codes."""

from __future__ import annotations


class ConcurbenchError(Exception):
    """Base error: a message for the user and, optionally, the cause behind it."""

    exit_code = 1

    def __init__(self, message: str, cause: BaseException | None = None):
        super().__init__(message)
        self.message = message
        self.cause = cause

    def __str__(self) -> str:
        return self.message


class ConfigError(ConcurbenchError):
    """A scenario or command-line value is wrong. Raised before any server is touched."""

    exit_code = 2

    def __init__(self, message: str, problems: list | None = None, cause: BaseException | None = None):
        super().__init__(message, cause)
        self.problems = list(problems or [])


class ProvisionError(ConcurbenchError):
    """A server could not be started, configured or stopped."""


class EngineError(ConcurbenchError):
    """Talking to the server failed outside the measured workload (setup, samplers, sessions)."""


class Unsupported(EngineError):
    """The server cannot do what a variant asks (SQL Trace on SQL Server on Linux): the variant is skipped."""


class RunError(ConcurbenchError):
    """The run could not be completed."""


class Interrupted(ConcurbenchError):
    """The user interrupted the run (Ctrl-C, SIGTERM or SIGHUP); measured results were kept."""

    exit_code = 130
