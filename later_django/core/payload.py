"""Arguments and return values: JSON-compatible only (Django's rule for tasks).

Checked at enqueue, before anything is written, so a bad value never reaches
the database, and by the worker on what a task returns; the error names where
the value sits, the value, its type, and says it is not JSON serializable.
A value or dict key of a type JSON cannot hold starts its message with Django's
own phrase :data:`UNSUPPORTED` (what ``django.tasks`` raises for it), so code
and tests written against Django's message keep working.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

#: What the errors state the rule as.
RULE = (
    "task arguments and return values must be JSON-compatible "
    "(None, bool, int, finite float, str, list, dict with str keys)"
)


#: Django's phrase for a type ``django.tasks`` cannot store (``normalize_json``).
UNSUPPORTED = "Unsupported type"


#: The types :func:`_plain` passes as they are (exactly these: a subclass, e.g. an
#: ``IntEnum``, takes the full check).
_SCALARS = frozenset({str, int, bool, type(None)})


class _NotPlain(Exception):
    """:func:`_plain` met something it does not decide: the full check takes over."""


def json_compatible(value: Any, where: str) -> Any:
    """``value`` with tuples as lists; ``TypeError`` naming ``where`` (e.g. ``args[1]``),
    the value and its type for anything JSON cannot hold: other types, non-string
    dict keys, and NaN or infinite floats (JSON has no literal for them)."""
    try:
        return _plain(value)
    except _NotPlain:
        return _checked(value, where)


def json_compatible_call(args: Any, kwargs: Any) -> tuple[list[Any], dict[str, Any]]:
    """A task call's arguments checked: ``json_compatible(list(args), "args")`` and
    ``json_compatible(dict(kwargs), "kwargs")``, with the same results and errors, in
    one call for the common case (a tuple or list, and a dict, of plain values)."""
    if type(kwargs) is dict and (type(args) is tuple or type(args) is list):
        try:
            return _plain(args), (_plain(kwargs) if kwargs else {})
        except _NotPlain:
            pass
    return json_compatible(list(args), "args"), json_compatible(dict(kwargs), "kwargs")


def _plain(value: Any) -> Any:
    """:func:`json_compatible` for values made only of the exact built-in types (what
    arguments nearly always are), without building each item's ``where``; raises
    ``_NotPlain`` for anything else (then the full check runs, and names the value)."""
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is list or kind is tuple:
        return [item if type(item) in _SCALARS else _plain(item) for item in value]
    if kind is dict:
        result = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _NotPlain
            result[key] = item if type(item) in _SCALARS else _plain(item)
        return result
    if kind is float and value - value == 0.0:  # finite: inf - inf and NaN give NaN
        return value
    raise _NotPlain


def _checked(value: Any, where: str) -> Any:
    """:func:`json_compatible`, every value checked and named where it sits."""
    match value:
        case None | bool() | int() | str():
            return value
        case float():
            if not math.isfinite(value):
                raise TypeError(
                    f"{where} is {value!r}, which is not JSON serializable "
                    f"(JSON has no NaN or Infinity); {RULE}"
                )
            return value
        case list() | tuple():
            return [_checked(item, f"{where}[{index}]") for index, item in enumerate(value)]
        case dict():  # before Mapping: an ABC check costs several times more
            return _mapping(value, where)
        case Mapping():
            return _mapping(value, where)
        case _:
            raise TypeError(
                f"{UNSUPPORTED}: {where} is {value!r} of type {type(value).__module__}."
                f"{type(value).__qualname__}, which is not JSON serializable; {RULE}"
            )


def _mapping(value: Mapping[Any, Any], where: str) -> dict[str, Any]:
    """A dict of the checked items of ``value``; its keys must be strings."""
    result = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise TypeError(
                f"{UNSUPPORTED}: {where} has the key {key!r} of type {type(key).__name__}; "
                "task arguments must be JSON-compatible (dict keys are strings)"
            )
        result[key] = _checked(item, f"{where}[{key!r}]")
    return result
