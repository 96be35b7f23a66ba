"""The ``LATER`` settings as one validated object with defaults.

Every key is optional. :func:`later_settings` reads ``settings.LATER`` each time
it is called (cheap), so tests may override it with ``override_settings``.
Problems are reported by the system checks in :mod:`later_django.checks`; code
that needs a valid value calls :func:`later_settings` and gets
``ImproperlyConfigured`` naming the key.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from later_django.core.keys import RESERVED_PREFIX
from later_django.core.limits import QueueLimit, queue_limits
from later_django.core.retry import RetryPolicy
from later_django.core.task_policy import TaskPolicies, task_policies, task_policy_problems

DEFAULT_NAMESPACE = "default"
#: A namespace prefixes every key as "<namespace>-"; without "-" in it no
#: namespace's keys can fall inside another's prefix range.
NAMESPACE_PATTERN = re.compile(r"[A-Za-z0-9_.]{1,200}")
DEFAULT_RETENTION_SECONDS = {"success": 86_400, "failed": 7 * 86_400, "cancelled": 7 * 86_400}
#: Topic names: stored in table columns (never in keys); names starting with
#: ``__later`` are reserved for later_django's own topics.
TOPIC_NAME_PATTERN = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
MAX_TOPIC_PARTITIONS = 4096
#: Every top-level key of ``LATER`` (``RECURRING`` is checked by the engine's rule).
KNOWN_KEYS = (
    "NAMESPACE",
    "DATABASE",
    "RETENTION",
    "VACUUM_INTERVAL",
    "RETRY",
    "WORKER_SYNCHRONOUS_COMMIT",
    "WORKER_PREPARED_STATEMENTS",
    "WORKER_POLL_INTERVAL",
    "TOPICS",
    "MAINTENANCE_MODULES",
    "RECURRING",
    "TIMEOUT",
    "QUEUE_LIMITS",
    "METRICS",
    "TRACING",
    "TASK_POLICIES",
    "RESULT_MAX_BYTES",
)
#: The options of ``LATER["METRICS"]`` (the metrics view, :mod:`later_django.metrics`).
METRICS_OPTIONS = ("TOKEN", "NAMESPACES")
#: A bearer token shorter than this is refused (check E015): a guessable token would
#: expose the figures.
MIN_METRICS_TOKEN_LENGTH = 24
#: ``LATER["WORKER_POLL_INTERVAL"]``'s default, in seconds: how often an idle worker
#: on MySQL/MariaDB (no notifications) asks whether anything is ready. Measured in
#: docs/storage.md ("Waking on MariaDB"): the idle cost per process and the start latency.
DEFAULT_WORKER_POLL_INTERVAL = 0.05
#: The bounds of ``WORKER_POLL_INTERVAL``: below a millisecond the poll is a busy
#: loop; above a minute a job waits longer than any operator expects.
WORKER_POLL_INTERVAL_RANGE = (0.001, 60.0)
#: ``LATER["RESULT_MAX_BYTES"]``'s default: the most bytes a job's return value may
#: take, encoded as its record stores it (MessagePack).
DEFAULT_RESULT_MAX_BYTES = 1_000_000


@dataclass(frozen=True)
class LaterSettings:
    """The resolved ``LATER`` settings."""

    namespace: str = DEFAULT_NAMESPACE
    database: str = "default"
    retention_seconds: dict[str, int] = field(
        default_factory=lambda: dict(DEFAULT_RETENTION_SECONDS)
    )
    vacuum_interval_seconds: float | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    worker_synchronous_commit: bool = False
    #: ``LATER["WORKER_PREPARED_STATEMENTS"]``: a worker's own PostgreSQL session keeps
    #: its repeated statements prepared on the server (see ``worker.session``).
    worker_prepared_statements: bool = True
    #: ``LATER["WORKER_POLL_INTERVAL"]``: seconds between an idle worker's looks at the
    #: queue where the database cannot wake it (MySQL/MariaDB; ``worker.wakeup``).
    worker_poll_interval: float = DEFAULT_WORKER_POLL_INTERVAL
    #: Seconds a job may run before it is recorded failed by ``TaskTimeout`` (None: no
    #: limit); a task's own ``timeout`` option wins.
    timeout_seconds: float | None = None
    #: queue name -> its limits across the namespace (``LATER["QUEUE_LIMITS"]``, and
    #: those ``LATER["TASK_POLICIES"]`` entries give their queue).
    queue_limits: dict[str, QueueLimit] = field(default_factory=dict)
    #: ``LATER["TASK_POLICIES"]``, parsed (``core.task_policy``; applied by
    #: ``engine.task_policy``).
    task_policies: TaskPolicies = field(default_factory=TaskPolicies)
    #: topic name → fixed partition count (``LATER["TOPICS"]``).
    topics: dict[str, int] = field(default_factory=dict)
    #: modules that register maintenance passes (``LATER["MAINTENANCE_MODULES"]``).
    maintenance_modules: tuple[str, ...] = ()
    #: The metrics view's bearer token (``LATER["METRICS"]["TOKEN"]``); None: staff only.
    metrics_token: str | None = None
    #: The namespaces the metrics view reports; empty: ``namespace`` alone.
    metrics_namespaces: tuple[str, ...] = ()
    #: ``LATER["TRACING"]``: False turns the OpenTelemetry spans off even where
    #: opentelemetry-api is installed and a tracer provider is set
    #: (:mod:`later_django.engine.tracing`).
    tracing: bool = True
    #: ``LATER["RESULT_MAX_BYTES"]``: a return value whose encoding is longer fails its
    #: job at the finish, without retry (``ResultTooLarge``).
    result_max_bytes: int = DEFAULT_RESULT_MAX_BYTES


def topic_problems(raw_topics: Any) -> list[str]:
    """Messages for every invalid entry of ``LATER["TOPICS"]`` (check later_django.E008)."""
    if not isinstance(raw_topics, dict):
        return [f"LATER['TOPICS'] must be a dict of topic name to options, got {raw_topics!r}."]
    problems = []
    for name, options in raw_topics.items():
        if not isinstance(name, str) or not TOPIC_NAME_PATTERN.fullmatch(name):
            problems.append(
                f"LATER['TOPICS'] key {name!r} must be 1 to 200 letters, digits, "
                f"'_', '.', ':' or '-'."
            )
            continue
        if name.startswith(RESERVED_PREFIX):
            problems.append(
                f"LATER['TOPICS'] key {name!r} starts with {RESERVED_PREFIX!r}, "
                f"which is reserved for later_django's own topics."
            )
            continue
        partitions = options.get("partitions") if isinstance(options, dict) else None
        if (
            isinstance(partitions, bool)
            or not isinstance(partitions, int)
            or not 1 <= partitions <= MAX_TOPIC_PARTITIONS
        ):
            problems.append(
                f"LATER['TOPICS'][{name!r}] must be a dict with 'partitions': an integer "
                f"from 1 to {MAX_TOPIC_PARTITIONS}, got {options!r}."
            )
        elif unknown := sorted(set(options) - {"partitions"}):
            problems.append(
                f"LATER['TOPICS'][{name!r}] has unknown option(s) {unknown}; "
                f"allowed: ['partitions']."
            )
    return problems


#: One rule of :func:`setting_problems`: ``(check id, message)`` for each problem of ``raw``.
SettingRule = Callable[[dict[str, Any]], list[tuple[str, str]]]


def _unknown_key_problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
    """E011: a key that is not a ``LATER`` setting (a typo would otherwise be ignored
    and its setting silently take its default)."""
    problems = []
    for key in raw:
        if key in KNOWN_KEYS:
            continue
        close = difflib.get_close_matches(str(key), KNOWN_KEYS, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        problems.append(
            (
                "later_django.E011",
                f"LATER has unknown key {key!r}{hint}; known keys: {', '.join(KNOWN_KEYS)}.",
            )
        )
    return problems


def _namespace_problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
    namespace = raw.get("NAMESPACE", DEFAULT_NAMESPACE)
    if isinstance(namespace, str) and NAMESPACE_PATTERN.fullmatch(namespace):
        return []
    return [
        (
            "later_django.E002",
            f"LATER['NAMESPACE'] must be 1 to 200 letters, digits, '_' or '.' "
            f"(keys are '<namespace>-...', so a '-' could reach into another "
            f"namespace's keys), got {namespace!r}.",
        )
    ]


def _database_problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
    database = raw.get("DATABASE", "default")
    if database in settings.DATABASES:
        return []
    return [
        (
            "later_django.E003",
            f"LATER['DATABASE'] is {database!r}, which is not a key of DATABASES.",
        )
    ]


def _retention_problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
    retention = raw.get("RETENTION", {})
    if not isinstance(retention, dict):
        return [("later_django.E004", f"LATER['RETENTION'] must be a dict, got {retention!r}.")]
    problems = []
    for key, value in retention.items():
        if key not in DEFAULT_RETENTION_SECONDS:
            problems.append(
                (
                    "later_django.E004",
                    f"LATER['RETENTION'] has unknown key {key!r}; "
                    f"allowed: {sorted(DEFAULT_RETENTION_SECONDS)}.",
                )
            )
        elif isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            problems.append(
                (
                    "later_django.E004",
                    f"LATER['RETENTION'][{key!r}] must be a positive number of seconds, "
                    f"got {value!r}.",
                )
            )
    return problems


def _vacuum_problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
    vacuum = raw.get("VACUUM_INTERVAL")
    if vacuum is None or (
        not isinstance(vacuum, bool) and isinstance(vacuum, int | float) and vacuum > 0
    ):
        return []
    return [
        (
            "later_django.E005",
            f"LATER['VACUUM_INTERVAL'] must be None or a positive number of seconds, "
            f"got {vacuum!r}.",
        )
    ]


def _boolean_rule(key: str, check_id: str, default: bool) -> SettingRule:
    """The rule of a key that must be True or False (``default`` when absent)."""

    def problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
        value = raw.get(key, default)
        if isinstance(value, bool):
            return []
        return [(check_id, f"LATER[{key!r}] must be True or False, got {value!r}.")]

    return problems


_synchronous_commit_problems = _boolean_rule(
    "WORKER_SYNCHRONOUS_COMMIT", "later_django.E007", False
)
_prepared_statements_problems = _boolean_rule(
    "WORKER_PREPARED_STATEMENTS", "later_django.E017", True
)


def _poll_interval_problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
    """E023: ``WORKER_POLL_INTERVAL`` is a number of seconds within its range."""
    value = raw.get("WORKER_POLL_INTERVAL", DEFAULT_WORKER_POLL_INTERVAL)
    low, high = WORKER_POLL_INTERVAL_RANGE
    if not isinstance(value, bool) and isinstance(value, int | float) and low <= value <= high:
        return []
    return [
        (
            "later_django.E023",
            f"LATER['WORKER_POLL_INTERVAL'] must be a number of seconds from {low} to "
            f"{high:g}, got {value!r}.",
        )
    ]


def _topics_problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
    return [("later_django.E008", message) for message in topic_problems(raw.get("TOPICS", {}))]


def _maintenance_modules_problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
    modules = raw.get("MAINTENANCE_MODULES", [])
    if isinstance(modules, list | tuple) and all(
        isinstance(module, str) and module for module in modules
    ):
        return []
    return [
        (
            "later_django.E010",
            f"LATER['MAINTENANCE_MODULES'] must be a list of dotted module paths, got {modules!r}.",
        )
    ]


def timeout_problem(value: Any, where: str) -> str | None:
    """Why ``value`` cannot be a timeout (None, or a positive number of seconds)."""
    if value is None or (
        not isinstance(value, bool) and isinstance(value, int | float) and 0 < value < 10**9
    ):
        return None
    return f"{where} must be None or a positive number of seconds, got {value!r}"


def _timeout_problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
    problem = timeout_problem(raw.get("TIMEOUT"), "LATER['TIMEOUT']")
    return [] if problem is None else [("later_django.E013", f"{problem}.")]


def _queue_limits_problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
    try:
        queue_limits(raw.get("QUEUE_LIMITS"))
    except ValueError as error:
        return [("later_django.E014", f"{error}.")]
    return []


def _metrics_problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
    """E015: ``METRICS`` is a dict of ``TOKEN`` (None or a string of at least
    MIN_METRICS_TOKEN_LENGTH characters) and ``NAMESPACES`` (namespace names)."""
    value = raw.get("METRICS", {})
    where = "LATER['METRICS']"
    if not isinstance(value, dict):
        return [("later_django.E015", f"{where} must be a dict, got {value!r}.")]
    problems = []
    if unknown := sorted(set(value) - set(METRICS_OPTIONS)):
        allowed = list(METRICS_OPTIONS)
        problems.append(f"{where} has unknown option(s) {unknown}; allowed: {allowed}")
    token = value.get("TOKEN")
    if token is not None and (not isinstance(token, str) or len(token) < MIN_METRICS_TOKEN_LENGTH):
        shown = f"a string of length {len(token)}" if isinstance(token, str) else repr(token)
        problems.append(
            f"{where}['TOKEN'] must be None or a string of at least "
            f"{MIN_METRICS_TOKEN_LENGTH} characters, got {shown}"
        )
    namespaces = value.get("NAMESPACES", [])
    if not isinstance(namespaces, list | tuple) or not all(
        isinstance(name, str) and NAMESPACE_PATTERN.fullmatch(name) for name in namespaces
    ):
        problems.append(
            f"{where}['NAMESPACES'] must be a list of namespace names "
            f"(1 to 200 letters, digits, '_' or '.'), got {namespaces!r}"
        )
    return [("later_django.E015", f"{problem}.") for problem in problems]


_tracing_problems = _boolean_rule("TRACING", "later_django.E016", True)


def _retry_problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
    try:
        RetryPolicy.from_mapping(raw.get("RETRY", {}), "LATER['RETRY']")
    except (TypeError, ValueError) as error:
        return [("later_django.E006", f"{error}.")]
    return []


def _task_policies_problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
    """E019: a bad ``LATER["TASK_POLICIES"]`` entry, or a queue's limits declared twice
    (``QUEUE_LIMITS``' own problems are E014's)."""
    try:
        limits = queue_limits(raw.get("QUEUE_LIMITS"))
    except ValueError:
        limits = {}
    problems = task_policy_problems(raw.get("TASK_POLICIES"), limits)
    return [("later_django.E019", f"{problem}.") for problem in problems]


def _result_max_bytes_problems(raw: dict[str, Any]) -> list[tuple[str, str]]:
    """E021: ``RESULT_MAX_BYTES`` is an integer of at least 1 (bytes)."""
    value = raw.get("RESULT_MAX_BYTES", DEFAULT_RESULT_MAX_BYTES)
    if not isinstance(value, bool) and isinstance(value, int) and value >= 1:
        return []
    return [
        (
            "later_django.E021",
            f"LATER['RESULT_MAX_BYTES'] must be an integer number of bytes >= 1, got {value!r}.",
        )
    ]


_RULES: tuple[SettingRule, ...] = (
    _unknown_key_problems,
    _namespace_problems,
    _database_problems,
    _retention_problems,
    _vacuum_problems,
    _synchronous_commit_problems,
    _prepared_statements_problems,
    _poll_interval_problems,
    _topics_problems,
    _maintenance_modules_problems,
    _retry_problems,
    _timeout_problems,
    _queue_limits_problems,
    _metrics_problems,
    _tracing_problems,
    _task_policies_problems,
    _result_max_bytes_problems,
)
#: Rules of keys whose validation lives above conf (``RECURRING``: the engine's,
#: check E009), added by :mod:`later_django.checks` when it is imported (the app's
#: ``ready``), so conf never imports the engine.
_ADDED_RULES: list[SettingRule] = []


def add_setting_rule(rule: SettingRule) -> None:
    """Makes :func:`setting_problems` (and so :func:`later_settings`) apply ``rule``
    too, after conf's own rules; adding a rule twice keeps one."""
    if rule not in _ADDED_RULES:
        _ADDED_RULES.append(rule)


def setting_problems(raw: Any) -> list[tuple[str, str]]:
    """Returns ``(check id, message)`` for every invalid value in ``raw``: conf's own
    rules in key order, then the added ones (:func:`add_setting_rule`)."""
    if not isinstance(raw, dict):
        return [("later_django.E001", f"LATER must be a dict, got {type(raw).__name__}.")]
    return [problem for rule in (*_RULES, *_ADDED_RULES) for problem in rule(raw)]


_cache: tuple[Any, LaterSettings] | None = None
_NO_SETTINGS: dict[str, Any] = {}


def later_settings() -> LaterSettings:
    """Returns the validated settings; raises ``ImproperlyConfigured`` naming a bad key."""
    global _cache
    raw = getattr(settings, "LATER", None) or _NO_SETTINGS
    if _cache is not None and _cache[0] is raw:
        return _cache[1]
    problems = setting_problems(raw)
    if problems:
        raise ImproperlyConfigured("; ".join(message for _, message in problems))
    retention = dict(DEFAULT_RETENTION_SECONDS)
    retention.update(raw.get("RETENTION", {}))
    limits = queue_limits(raw.get("QUEUE_LIMITS"))
    policies = task_policies(raw.get("TASK_POLICIES"), limits)
    resolved = LaterSettings(
        namespace=raw.get("NAMESPACE", DEFAULT_NAMESPACE),
        database=raw.get("DATABASE", "default"),
        retention_seconds=retention,
        vacuum_interval_seconds=raw.get("VACUUM_INTERVAL"),
        retry=RetryPolicy.from_mapping(raw.get("RETRY", {}), "LATER['RETRY']"),
        worker_synchronous_commit=raw.get("WORKER_SYNCHRONOUS_COMMIT", False),
        worker_prepared_statements=raw.get("WORKER_PREPARED_STATEMENTS", True),
        worker_poll_interval=float(raw.get("WORKER_POLL_INTERVAL", DEFAULT_WORKER_POLL_INTERVAL)),
        topics={name: options["partitions"] for name, options in raw.get("TOPICS", {}).items()},
        maintenance_modules=tuple(raw.get("MAINTENANCE_MODULES", ())),
        timeout_seconds=raw.get("TIMEOUT"),
        queue_limits={**limits, **policies.queue_limits()},
        task_policies=policies,
        metrics_token=raw.get("METRICS", {}).get("TOKEN"),
        metrics_namespaces=tuple(raw.get("METRICS", {}).get("NAMESPACES", ())),
        tracing=raw.get("TRACING", True),
        result_max_bytes=raw.get("RESULT_MAX_BYTES", DEFAULT_RESULT_MAX_BYTES),
    )
    # Keyed on the settings object itself: override_settings installs a new one.
    _cache = (raw, resolved)
    return resolved
