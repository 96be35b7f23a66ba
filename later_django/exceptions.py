"""Errors a caller can act on. Messages name the value and the rule it broke."""


class LaterError(Exception):
    """Base class of later_django's own errors."""


class RecordDecodeError(LaterError):
    """A stored record or queue message could not be decoded."""


class ParentFailed(LaterError):
    """Recorded as the error of a continuation whose parent failed (``on="success"``)."""


class WorkerLost(LaterError):
    """Recorded as the error of an attempt whose worker stopped renewing its lease."""
