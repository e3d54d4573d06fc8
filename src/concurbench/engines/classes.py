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


def plain(value):
    """A value read from a server as JSON keeps it: numbers stay numbers (decimals become floats), the rest text."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, decimal.Decimal):
        return float(value)
    return str(value)
