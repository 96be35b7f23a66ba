"""Arguments and return values: JSON-compatible only (Django's rule for tasks).

Checked at enqueue, before anything is written, so a bad value never reaches
the database; the error names where the value sits and its type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def json_compatible(value: Any, where: str) -> Any:
    """``value`` with tuples as lists; ``TypeError`` naming ``where`` (e.g. ``args[1]``)
    for anything JSON cannot hold: other types, non-string keys, NaN is allowed
    as Python's json allows it."""
    match value:
        case None | bool() | int() | float() | str():
            return value
        case list() | tuple():
            return [json_compatible(item, f"{where}[{index}]") for index, item in enumerate(value)]
        case Mapping():
            result = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise TypeError(
                        f"{where} has the key {key!r} of type {type(key).__name__}; "
                        "task arguments must be JSON-compatible (dict keys are strings)"
                    )
                result[key] = json_compatible(item, f"{where}[{key!r}]")
            return result
        case _:
            raise TypeError(
                f"{where} is {value!r} of type {type(value).__module__}."
                f"{type(value).__qualname__}; task arguments and return values must be "
                "JSON-compatible (None, bool, int, float, str, list, dict with str keys)"
            )
