"""What every engine shares: error classes (used by reports and claims too), and values made JSON-ready."""

import decimal

DEADLOCK = "deadlock"
SERIALIZATION = "serialization"
LOCK_NOT_AVAILABLE = "lock_not_available"
CONNECTION = "connection"
OTHER = "other"
RETRYABLE = frozenset({DEADLOCK, SERIALIZATION})
SUCCESS = (None, None)  # the outcome of a statement that worked, the same object for every engine
ALL = (DEADLOCK, SERIALIZATION, LOCK_NOT_AVAILABLE, CONNECTION, OTHER)

# What servers say when they turn a connection away for want of room: PostgreSQL's "sorry, too many
# clients already" and "remaining connection slots are reserved for ..." (no SQLSTATE reaches a client
# that never connected), SQL Server's error 17809 "... the maximum number of 'N' user connections has
# already been reached".
_REFUSALS = ("too many clients", "remaining connection slots are reserved", "user connections has already been reached")


def refused(message: str) -> bool:
    """The server refused a new connection because it has no room for it."""
    text = message.lower()
    return any(r in text for r in _REFUSALS)


def plain(value):
    """A value read from a server as JSON keeps it: numbers stay numbers (decimals become floats), the rest text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, decimal.Decimal):
        return float(value)
    return str(value)
