"""Errors a caller can act on. Messages name the value and the rule it broke."""


class LaterError(Exception):
    """Base class of later_django's own errors."""


class RecordDecodeError(LaterError):
    """A stored record or queue message could not be decoded."""
