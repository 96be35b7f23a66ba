"""``LATER["TASK_POLICIES"]``: options for tasks you did not write, by module path.

    LATER = {"TASK_POLICIES": {
        "wagtail.tasks.update_reference_index_task": {"unique": {"key": "arguments"}},
        "wagtail.*": {"queue": "wagtail", "concurrency": 2, "retry": {"max_retries": 1}},
    }}

A key is a task's module path, or an ``fnmatch`` pattern of paths (``*``, ``?``,
``[...]``, case-sensitive). Its value sets any of :data:`POLICY_KEYS`:

* ``queue`` / ``priority``: where and how urgently the task's jobs go, applied at
  enqueue where the task still has Django's default (``"default"`` / 0);
* ``retry``: the mapping of ``@task(retry=...)``, parsed by
  :meth:`RetryPolicy.from_mapping`; ``timeout``: seconds, or None for no limit;
* ``unique``: ``{"key": ..., "for_seconds": ..., "while": [...]}`` as
  ``@task(unique=...)``, except that ``key`` is ``"arguments"`` (the default: one
  live job per task and arguments), ``"task"`` (one per task) or the dotted path of a
  function given the job's arguments that returns the key (settings hold no lambda);
* ``concurrency`` / ``rate``: the limits of ``LATER["QUEUE_LIMITS"]``, for the entry's
  own ``queue`` (required with them): the queue is limited, shared by every task
  routed to it, and declared once (not also in ``QUEUE_LIMITS`` or another entry).

A task takes each key from the most specific entry that sets it: its exact path
first, then the matching patterns, longest first (equal lengths: settings order).
``None`` as a value sets the key to nothing (the task's own or the global default;
for ``timeout``, no limit). Pure values: the engine applies them
(:mod:`later_django.engine.task_policy`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from later_django.core.keys import RESERVED_PREFIX
from later_django.core.limits import QueueLimit, queue_limit
from later_django.core.retry import RetryPolicy
from later_django.core.unique import UniqueOption

WHERE = "LATER['TASK_POLICIES']"
#: Keys a task resolves (each from its most specific entry setting it).
TASK_KEYS = ("queue", "priority", "retry", "timeout", "unique")
#: Every key of an entry: the task's keys and its queue's limits.
POLICY_KEYS = (*TASK_KEYS, "concurrency", "rate")
#: Django's priority range (``django.tasks.base.TASK_MIN_PRIORITY``/``MAX``).
MIN_PRIORITY, MAX_PRIORITY = -100, 100
#: ``unique``'s ``key`` values that are not a function's path.
ARGUMENTS, WHOLE_TASK = "arguments", "task"
_PATH = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
_PATTERN = re.compile(r"[A-Za-z0-9_.*?\[\]!-]{1,500}")
_WILDCARDS = frozenset("*?[")


@dataclass(frozen=True)
class TaskPolicy:
    """What one entry sets (``sets``: the keys present), or, merged, what one task
    gets; ``origin`` names, per key set, the entry it came from."""

    sets: frozenset[str] = frozenset()
    origin: Mapping[str, str] = field(default_factory=dict)
    queue: str | None = None
    priority: int | None = None
    retry: RetryPolicy | None = None
    timeout: float | None = None
    #: ``key`` None: a digest of the arguments; a str: that fixed key.
    unique: UniqueOption | None = None
    #: The dotted path of the unique key's function (imported by the engine).
    unique_key_function: str | None = None
    #: The limits this entry gives its ``queue`` (never merged into a task's policy).
    limit: QueueLimit | None = None


#: The policy of a task no entry matches.
NO_POLICY = TaskPolicy()


def is_pattern(key: str) -> bool:
    return not _WILDCARDS.isdisjoint(key)


def merged(policies: Sequence[tuple[str, TaskPolicy]]) -> TaskPolicy:
    """One task's policy from its matching ``(settings key, entry)``, most specific
    first: each key whole from the first entry that sets it."""
    values: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for key, policy in policies:
        for name in TASK_KEYS:
            if name in policy.sets and name not in origin:
                origin[name] = key
                values[name] = getattr(policy, name)
                if name == "unique":
                    values["unique_key_function"] = policy.unique_key_function
    return TaskPolicy(sets=frozenset(origin), origin=origin, **values)


@dataclass(frozen=True)
class TaskPolicies:
    """The parsed entries; :meth:`for_path` is cached per path (one dict read per
    enqueue once a path was seen)."""

    exact: Mapping[str, TaskPolicy] = field(default_factory=dict)
    #: ``(pattern, entry)``, longest pattern first (stable: settings order on ties).
    patterns: tuple[tuple[str, TaskPolicy], ...] = ()
    _cache: dict[str, TaskPolicy] = field(default_factory=dict, compare=False, repr=False)

    def for_path(self, path: str) -> TaskPolicy:
        """The policy of the task at ``path`` (:data:`NO_POLICY` when none matches)."""
        found = self._cache.get(path)
        if found is None:
            matching = [(key, p) for key, p in self.patterns if fnmatch.fnmatchcase(path, key)]
            if path in self.exact:
                matching.insert(0, (path, self.exact[path]))
            found = merged(matching) if matching else NO_POLICY
            self._cache[path] = found
        return found

    def keys(self) -> list[str]:
        return [*self.exact, *(key for key, _ in self.patterns)]

    def queue_limits(self) -> dict[str, QueueLimit]:
        """queue -> the limits an entry gives it."""
        entries = [*self.exact.values(), *(policy for _, policy in self.patterns)]
        return {p.queue: p.limit for p in entries if p.limit is not None and p.queue is not None}


def task_policy(key: Any, raw: Any) -> TaskPolicy:
    """One entry, checked; ``ValueError`` naming the entry, the value and the rule."""
    if not isinstance(key, str) or not _PATTERN.fullmatch(key):
        raise ValueError(
            f"{WHERE} key {key!r} must be a task's module path or a pattern of them "
            "(letters, digits, '_', '.', '-' and the wildcards * ? [ ])"
        )
    where = f"{WHERE}[{key!r}]"
    if not isinstance(raw, Mapping) or not raw:
        raise ValueError(f"{where} must be a dict of some of {list(POLICY_KEYS)}, got {raw!r}")
    if unknown := sorted(str(name) for name in raw if name not in POLICY_KEYS):
        raise ValueError(f"{where} has unknown key(s) {unknown}; allowed: {list(POLICY_KEYS)}")
    queue = _queue(raw.get("queue"), f"{where}['queue']")
    unique, key_function = _unique(raw.get("unique"), f"{where}['unique']")
    return TaskPolicy(
        sets=frozenset(raw),
        origin=dict.fromkeys(raw, key),
        queue=queue,
        priority=_priority(raw.get("priority"), f"{where}['priority']"),
        retry=_retry(raw.get("retry"), f"{where}['retry']"),
        timeout=_timeout(raw.get("timeout"), f"{where}['timeout']"),
        unique=unique,
        unique_key_function=key_function,
        limit=_limit(raw, queue, where),
    )


def task_policies(raw: Any, queue_limits: Mapping[str, QueueLimit]) -> TaskPolicies:
    """Every entry of ``LATER["TASK_POLICIES"]``; ``ValueError`` at the first problem of
    :func:`task_policy_problems`."""
    problems = task_policy_problems(raw, queue_limits)
    if problems:
        raise ValueError(problems[0])
    exact: dict[str, TaskPolicy] = {}
    patterns: list[tuple[str, TaskPolicy]] = []
    for key, value in (raw or {}).items():
        policy = task_policy(key, value)
        if is_pattern(key):
            patterns.append((key, policy))
        else:
            exact[key] = policy
    patterns.sort(key=lambda pair: -len(pair[0]))
    return TaskPolicies(exact=exact, patterns=tuple(patterns))


def task_policy_problems(raw: Any, queue_limits: Mapping[str, QueueLimit]) -> list[str]:
    """A message per bad entry (its first problem), and per queue whose limits are
    declared twice (in ``QUEUE_LIMITS`` as well, or by two entries)."""
    if raw is None:
        return []
    if not isinstance(raw, Mapping):
        return [f"{WHERE} must be a dict of task paths or patterns, got {raw!r}"]
    problems: list[str] = []
    limited_by: dict[str, str] = {}
    for key, value in raw.items():
        try:
            policy = task_policy(key, value)
        except (TypeError, ValueError) as error:
            problems.append(str(error))
            continue
        if policy.limit is None or policy.queue is None:
            continue
        if policy.queue in queue_limits:
            problems.append(
                f"{WHERE}[{key!r}] limits queue {policy.queue!r}, which LATER['QUEUE_LIMITS'] "
                "limits too; declare a queue's limits in one place"
            )
        elif policy.queue in limited_by:
            problems.append(
                f"{WHERE}[{key!r}] limits queue {policy.queue!r}, which "
                f"{WHERE}[{limited_by[policy.queue]!r}] limits too; declare a queue's "
                "limits in one place"
            )
        else:
            limited_by[policy.queue] = key
    return problems


def _queue(value: Any, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value or len(value) > 200:
        raise ValueError(f"{where} must be a queue name (1 to 200 characters), got {value!r}")
    if value.startswith(RESERVED_PREFIX):
        raise ValueError(f"{where} {value!r} starts with {RESERVED_PREFIX!r}, which is reserved")
    return value


def _priority(value: Any, where: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{where} must be a whole number, got {value!r}")
    if not MIN_PRIORITY <= value <= MAX_PRIORITY:
        raise ValueError(f"{where} must be from {MIN_PRIORITY} to {MAX_PRIORITY}, got {value!r}")
    return value


def _retry(value: Any, where: str) -> RetryPolicy | None:
    """``@task(retry=...)``'s mapping, parsed by ``RetryPolicy.from_mapping`` alone."""
    return None if value is None else RetryPolicy.from_mapping(value, where)


def _timeout(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 10**9:
        raise ValueError(f"{where} must be None or a positive number of seconds, got {value!r}")
    return float(value)


def _unique(value: Any, where: str) -> tuple[UniqueOption | None, str | None]:
    """The option (its ``key`` None for ``"arguments"``) and the key function's path."""
    if value is None:
        return None, None
    if not isinstance(value, Mapping):
        raise ValueError(f"{where} must be a dict with keys key, for_seconds, while; got {value!r}")
    key = value.get("key", ARGUMENTS)
    if key not in (ARGUMENTS, WHOLE_TASK) and not (isinstance(key, str) and _PATH.fullmatch(key)):
        raise ValueError(
            f"{where}['key'] must be {ARGUMENTS!r} (one live job per arguments), "
            f"{WHOLE_TASK!r} (one per task) or the dotted path of a function given the "
            f"job's arguments that returns the key; got {key!r}"
        )
    fixed = WHOLE_TASK if key == WHOLE_TASK else None
    option = UniqueOption.from_mapping({**value, "key": fixed}, where)
    return option, (key if key not in (ARGUMENTS, WHOLE_TASK) else None)


def _limit(raw: Mapping[str, Any], queue: str | None, where: str) -> QueueLimit | None:
    given = {name: raw[name] for name in ("concurrency", "rate") if raw.get(name) is not None}
    if not given:
        return None
    if queue is None:
        raise ValueError(
            f"{where} sets {sorted(given)} without 'queue': limits are a queue's, so the "
            "entry must name the queue its tasks go to"
        )
    return queue_limit(given, where)
