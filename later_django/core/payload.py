"""Arguments and return values: JSON-compatible only (Django's rule for tasks).

Checked at enqueue, before anything is written, so a bad value never reaches
the database, and by the worker on what a task returns; the error names where
the value sits, the value, its type, and says it is not JSON serializable.
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


def json_compatible(value: Any, where: str) -> Any:
    """``value`` with tuples as lists; ``TypeError`` naming ``where`` (e.g. ``args[1]``),
    the value and its type for anything JSON cannot hold: other types, non-string
    dict keys, and NaN or infinite floats (JSON has no literal for them)."""
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
            return [json_compatible(item, f"{where}[{index}]") for index, item in enumerate(value)]
        case dict():  # before Mapping: an ABC check costs several times more
            return _mapping(value, where)
        case Mapping():
            return _mapping(value, where)
        case _:
            raise TypeError(
                f"{where} is {value!r} of type {type(value).__module__}."
                f"{type(value).__qualname__}, which is not JSON serializable; {RULE}"
            )


def _mapping(value: Mapping[Any, Any], where: str) -> dict[str, Any]:
    """A dict of the checked items of ``value``; its keys must be strings."""
    result = {}
    for key, item in value.items():
        if not isinstance(key, str):
            raise TypeError(
                f"{where} has the key {key!r} of type {type(key).__name__}; "
                "task arguments must be JSON-compatible (dict keys are strings)"
            )
        result[key] = json_compatible(item, f"{where}[{key!r}]")
    return result
