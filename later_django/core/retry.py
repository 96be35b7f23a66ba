"""Retry policies: how many times a failed job runs again, after how long, and which
errors it gives up on at once.

A policy comes from ``LATER["RETRY"]`` (the server default) or from a task's
own ``retry`` option, and is resolved once, at the job's first failure, then
stored in the job's record so that later changes to settings do not alter a
job already retrying.

``give_up_on`` and ``retry_on`` name exception classes by their path
(``module.QualName``, as :func:`~later_django.exceptions.class_path` spells it) and
match a raised exception's class or any class it inherits from (its MRO), so a
policy can name classes of apps not yet loaded and nothing is imported to check it.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from later_django.exceptions import TaskTimeout, WorkerLost, class_path

#: ``immediate``: run again at once; ``fixed``: wait ``initial`` seconds every time;
#: ``exponential``: ``initial`` doubling per retry, capped at ``max`` (with
#: ``jitter`` a uniform draw from the upper half of that delay, so retries of
#: many jobs that failed together spread out but never exceed ``max``).
BACKOFFS = ("immediate", "fixed", "exponential")
_KEYS = ("max_retries", "backoff", "initial", "max", "jitter", "give_up_on", "retry_on")
#: The errors the worker records itself for an attempt (its worker stopped, it ran past
#: its timeout): ``retry_on`` does not restrict them (they are not the task's own
#: exceptions); ``give_up_on`` gives up on them when it names them (or a base class).
ENGINE_ERRORS = frozenset({class_path(WorkerLost), class_path(TaskTimeout)})


def lineage(kind: type[BaseException]) -> tuple[str, ...]:
    """The class paths of ``kind`` and of every class it inherits from, in MRO order
    (``object`` left out): what ``give_up_on`` and ``retry_on`` are matched against."""
    return tuple(f"{base.__module__}.{base.__qualname__}" for base in kind.__mro__[:-1])


_ENGINE_LINEAGES = {class_path(kind): lineage(kind) for kind in (WorkerLost, TaskTimeout)}


def recorded_lineage(path: str) -> tuple[str, ...]:
    """The lineage of an error known only by its recorded class path: the whole MRO
    for the worker's own errors (:data:`ENGINE_ERRORS`), else the path alone."""
    return _ENGINE_LINEAGES.get(path, (path,))


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    backoff: str = "exponential"
    initial: float = 1.0
    max: float = 600.0
    jitter: bool = True
    #: Exception class paths that fail the job at once, whatever retries remain.
    give_up_on: tuple[str, ...] = ()
    #: None: every error is retried; else only these classes (and their subclasses).
    retry_on: tuple[str, ...] | None = None

    def delay_seconds(self, retry_number: int, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry ``retry_number`` (1 for the first retry)."""
        if self.backoff == "immediate":
            return 0.0
        if self.backoff == "fixed":
            return min(self.initial, self.max)
        delay: float = min(self.max, self.initial * 2 ** (retry_number - 1))
        if self.jitter:
            delay = (rng or random).uniform(delay / 2, delay)
        return delay

    def give_up_rule(self, raised: Sequence[str]) -> str | None:
        """Why an attempt that raised the class whose :func:`lineage` is ``raised``
        (its own path first) is not retried, whatever retries remain; None when the
        rules let it be retried. ``give_up_on`` wins over ``retry_on``; ``retry_on``
        leaves :data:`ENGINE_ERRORS` to the retry count."""
        if not raised:
            return None
        own = raised[0]
        for path in raised:
            if path in self.give_up_on:
                if path == own:
                    return f"{own} is in the retry policy's give_up_on"
                return f"{own} is a {path}, which is in the retry policy's give_up_on"
        if self.retry_on is None or own in ENGINE_ERRORS:
            return None
        if any(path in self.retry_on for path in raised):
            return None
        return f"{own} is not in the retry policy's retry_on ({', '.join(self.retry_on)})"

    def to_dict(self) -> dict[str, Any]:
        """The policy as the record stores it. The exception rules appear only when
        set, so records of policies without them keep the keys every release reads."""
        stored = asdict(self)
        if not self.give_up_on:
            del stored["give_up_on"]
        else:
            stored["give_up_on"] = list(self.give_up_on)
        if self.retry_on is None:
            del stored["retry_on"]
        else:
            stored["retry_on"] = list(self.retry_on)
        return stored

    @classmethod
    def from_mapping(cls, raw: Any, where: str) -> RetryPolicy:
        """A policy from a mapping of its fields; ``ValueError`` names ``where``, the
        key and the rule for anything invalid. Missing keys take the defaults."""
        if isinstance(raw, RetryPolicy):
            return raw
        if not isinstance(raw, Mapping):
            raise ValueError(f"{where} must be a dict of retry options, got {raw!r}")
        unknown = sorted(set(raw) - set(_KEYS))
        if unknown:
            raise ValueError(
                f"{where} has unknown keys {unknown}; allowed: {', '.join(sorted(_KEYS))}"
            )
        policy = cls(**{key: raw[key] for key in raw})
        _check_numbers(policy, where)
        return cls(
            max_retries=policy.max_retries,
            backoff=policy.backoff,
            initial=float(policy.initial),
            max=float(policy.max),
            jitter=policy.jitter,
            give_up_on=_give_up_on(raw.get("give_up_on"), where),
            retry_on=_retry_on(raw.get("retry_on"), where),
        )


def _check_numbers(policy: RetryPolicy, where: str) -> None:
    """Raises ``ValueError`` for a count, a backoff, a delay or a jitter out of its rule."""
    max_retries = policy.max_retries
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ValueError(f"{where}['max_retries'] must be a whole number >= 0, got {max_retries!r}")
    if policy.backoff not in BACKOFFS:
        raise ValueError(
            f"{where}['backoff'] must be one of {', '.join(BACKOFFS)}, got {policy.backoff!r}"
        )
    for key in ("initial", "max"):
        value = getattr(policy, key)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise ValueError(f"{where}[{key!r}] must be a number of seconds >= 0, got {value!r}")
    if not isinstance(policy.jitter, bool):
        raise ValueError(f"{where}['jitter'] must be True or False, got {policy.jitter!r}")


def _give_up_on(value: Any, where: str) -> tuple[str, ...]:
    """The checked ``give_up_on``: None or absent is no class."""
    return () if value is None else _class_paths(value, f"{where}['give_up_on']")


def _retry_on(value: Any, where: str) -> tuple[str, ...] | None:
    """The checked ``retry_on``: None or absent is no rule (every error is retried);
    an empty list is refused, as it would retry nothing."""
    if value is None:
        return None
    paths = _class_paths(value, f"{where}['retry_on']")
    if not paths:
        raise ValueError(
            f"{where}['retry_on'] must name at least one exception class, got {value!r} "
            "(to retry nothing, set max_retries to 0; to retry every error, leave it out)"
        )
    return paths


def _class_paths(value: Any, where: str) -> tuple[str, ...]:
    """``value`` as a tuple of exception class paths: a list (or tuple) of dotted
    strings whose every part is a Python name, such as ``'builtins.KeyError'``."""
    example = "such as ['django.core.exceptions.ObjectDoesNotExist']"
    if not isinstance(value, list | tuple):
        raise ValueError(
            f"{where} must be a list of exception class paths ({example}), got {value!r}"
        )
    for position, path in enumerate(value):
        if not _is_class_path(path):
            raise ValueError(
                f"{where}[{position}] must be an exception class path, dotted as "
                f"module.QualName (such as 'builtins.KeyError'), got {path!r}"
            )
    return tuple(value)


def _is_class_path(path: Any) -> bool:
    if not isinstance(path, str):
        return False
    parts = path.split(".")
    return len(parts) >= 2 and all(part.isidentifier() or part == "<locals>" for part in parts)
