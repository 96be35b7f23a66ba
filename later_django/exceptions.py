"""Errors a caller can act on. Messages name the value and the rule it broke."""


class LaterError(Exception):
    """Base class of later_django's own errors."""


class RecordDecodeError(LaterError):
    """A stored record or queue message could not be decoded."""


class ParentFailed(LaterError):
    """Recorded as the error of a continuation whose parent failed (``on="success"``)."""


class WorkerLost(LaterError):
    """Recorded as the error of an attempt whose worker stopped renewing its lease."""


class StaleLease(LaterError):
    """A consumer committed an offset of a retained-log partition whose lease it no
    longer holds (released, or taken over with a higher epoch); nothing was changed."""
