"""The ``unique`` option of a task, and the key one job of it holds.

``@task(unique={"key": ..., "for_seconds": ..., "while": [stages]})``:

* ``key``: a string, or a callable given the job's ``*args, **kwargs`` that
  returns one; without it the key is a digest of the arguments (a second call
  with the same arguments is the duplicate). Keys are per task: two tasks never
  share one.
* ``for_seconds``: how long the key is held at most (a positive number); without
  it, for as long as the job holding it is in one of the ``while`` stages.
* ``while``: the stages during which a second enqueue is a duplicate (default:
  the live stages, so a finished job's key is free again).

Pure values: the engine's :mod:`~later_django.engine.unique` claims the keys.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from later_django.core import stages

OPTION_KEYS = frozenset({"key", "for_seconds", "while"})

#: The longest key a job may hold (it becomes part of a ``later_storage`` key).
MAX_KEY_LENGTH = 200


@dataclass(frozen=True)
class UniqueKey:
    """The key one job holds, for how long, and in which stages it counts."""

    key: str
    for_seconds: float | None
    while_stages: frozenset[str]


@dataclass(frozen=True)
class UniqueOption:
    """A task's ``unique`` option, checked (:meth:`from_mapping`)."""

    key: str | Callable[..., Any] | None
    for_seconds: float | None
    while_stages: frozenset[str]

    @classmethod
    def from_mapping(cls, option: Any, where: str) -> UniqueOption:
        """The option of ``option`` (a mapping of :data:`OPTION_KEYS`); ``ValueError``
        naming ``where``, the value and the rule."""
        if not isinstance(option, Mapping):
            raise ValueError(
                f"{where} must be a dict with keys {sorted(OPTION_KEYS)}, got {option!r}"
            )
        unknown = sorted(set(option) - OPTION_KEYS)
        if unknown:
            raise ValueError(f"{where} has unknown keys {unknown}; known: {sorted(OPTION_KEYS)}")
        key = option.get("key")
        if key is not None and not callable(key):
            check_key(key, f"{where}['key']")
        return cls(
            key=key,
            for_seconds=check_for_seconds(option.get("for_seconds"), f"{where}['for_seconds']"),
            while_stages=check_stages(option.get("while"), f"{where}['while']"),
        )

    def key_for(self, args: Sequence[Any], kwargs: Mapping[str, Any], where: str) -> UniqueKey:
        """The key a job with these (JSON-compatible) arguments holds."""
        if self.key is None:
            key = arguments_digest(args, kwargs)
        elif callable(self.key):
            key = check_key(self.key(*args, **kwargs), f"the key {where} computed")
        else:
            key = self.key
        return UniqueKey(key, self.for_seconds, self.while_stages)


#: What a task without a ``unique`` option gets from ``api.enqueue_unique``.
DEFAULT_OPTION = UniqueOption(
    key=None, for_seconds=None, while_stages=frozenset(stages.LIVE_STAGES)
)


def check_key(key: Any, where: str) -> str:
    if not isinstance(key, str) or not key:
        raise ValueError(f"{where} must be a non-empty string, got {key!r}")
    if len(key) > MAX_KEY_LENGTH:
        raise ValueError(f"{where} {key[:40]!r}… is longer than {MAX_KEY_LENGTH} characters")
    return key


def check_for_seconds(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ValueError(f"{where} must be a positive number of seconds, got {value!r}")
    return float(value)


def check_stages(value: Any, where: str) -> frozenset[str]:
    if value is None:
        return frozenset(stages.LIVE_STAGES)
    if isinstance(value, str) or not isinstance(value, Sequence | frozenset | set):
        raise ValueError(f"{where} must be a list of stages, got {value!r}")
    unknown = [stage for stage in value if stage not in stages.ALL_STAGES]
    if unknown or not value:
        raise ValueError(
            f"{where} must name at least one stage of {', '.join(stages.ALL_STAGES)}; "
            f"got {list(value)!r}"
        )
    return frozenset(value)


def arguments_digest(args: Sequence[Any], kwargs: Mapping[str, Any]) -> str:
    """A digest of the arguments that does not depend on the order of ``kwargs``."""
    text = json.dumps([list(args), dict(kwargs)], sort_keys=True, separators=(",", ":"))
    return "args:" + hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
