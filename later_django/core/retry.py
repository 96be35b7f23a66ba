"""Retry policies: how many times a failed job runs again, and after how long.

A policy comes from ``LATER["RETRY"]`` (the server default) or from a task's
own ``retry`` option, and is resolved once, at the job's first failure, then
stored in the job's record so that later changes to settings do not alter a
job already retrying.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

#: ``immediate``: run again at once; ``fixed``: wait ``initial`` seconds every time;
#: ``exponential``: ``initial`` doubling per retry, capped at ``max`` (with
#: ``jitter`` a uniform draw from the upper half of that delay, so retries of
#: many jobs that failed together spread out but never exceed ``max``).
BACKOFFS = ("immediate", "fixed", "exponential")


@dataclass(frozen=True)
class RetryPolicy:
    max_retries: int = 3
    backoff: str = "exponential"
    initial: float = 1.0
    max: float = 600.0
    jitter: bool = True

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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_mapping(cls, raw: Any, where: str) -> RetryPolicy:
        """A policy from a mapping of its fields; ``ValueError`` names ``where``, the
        key and the rule for anything invalid. Missing keys take the defaults."""
        if isinstance(raw, RetryPolicy):
            return raw
        if not isinstance(raw, Mapping):
            raise ValueError(f"{where} must be a dict of retry options, got {raw!r}")
        unknown = sorted(set(raw) - {"max_retries", "backoff", "initial", "max", "jitter"})
        if unknown:
            raise ValueError(
                f"{where} has unknown keys {unknown}; "
                "allowed: backoff, initial, jitter, max, max_retries"
            )
        policy = cls(**{key: raw[key] for key in raw})
        max_retries = policy.max_retries
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(
                f"{where}['max_retries'] must be a whole number >= 0, got {max_retries!r}"
            )
        if policy.backoff not in BACKOFFS:
            raise ValueError(
                f"{where}['backoff'] must be one of {', '.join(BACKOFFS)}, got {policy.backoff!r}"
            )
        for key in ("initial", "max"):
            value = getattr(policy, key)
            if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
                raise ValueError(
                    f"{where}[{key!r}] must be a number of seconds >= 0, got {value!r}"
                )
        if not isinstance(policy.jitter, bool):
            raise ValueError(f"{where}['jitter'] must be True or False, got {policy.jitter!r}")
        return cls(
            max_retries=max_retries,
            backoff=policy.backoff,
            initial=float(policy.initial),
            max=float(policy.max),
            jitter=policy.jitter,
        )
