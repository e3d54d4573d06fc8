"""Error classes shared by every engine's classifier (and by reports and claims)."""

DEADLOCK = "deadlock"
SERIALIZATION = "serialization"
LOCK_NOT_AVAILABLE = "lock_not_available"
CONNECTION = "connection"
OTHER = "other"
RETRYABLE = frozenset({DEADLOCK, SERIALIZATION})
ALL = (DEADLOCK, SERIALIZATION, LOCK_NOT_AVAILABLE, CONNECTION, OTHER)
