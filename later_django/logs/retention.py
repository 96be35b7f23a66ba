"""``retention_pass(topic, ...)``: the maintenance pass that compacts and cleans up
one topic's retained log (later_django registers none by itself)."""

from __future__ import annotations

import random

from later_django.engine.topics import topic_partitions
from later_django.logs.topic import appended_before_ms, check_retention_limits
from later_django.maintenance import MaintenancePass, PassContext
from later_django.storage.stores import stores_for


def retention_pass(
    topic: str,
    *,
    compact: bool = True,
    older_than_seconds: float | None = None,
    keep_last: int | None = None,
    interval_seconds: float = 300.0,
    max_run_seconds: float = 30.0,
) -> MaintenancePass:
    """A maintenance pass (``later_django.maintenance.MaintenancePass``) named
    ``log_retention.<topic>`` that compacts ``topic`` (when ``compact``) and cleans
    it up by ``older_than_seconds`` / ``keep_last`` (when given), partition by
    partition (from a random one) until its budget is spent, about every ``interval_seconds``.

    later_django registers none by itself (retention is yours to choose); register
    it from a module listed in ``LATER["MAINTENANCE_MODULES"]``::

        register_pass(retention_pass("audit", older_than_seconds=30 * 86400))
    """
    if not compact and older_than_seconds is None and keep_last is None:
        raise ValueError("retention_pass needs compact=True, older_than_seconds or keep_last")
    check_retention_limits(older_than_seconds, keep_last)
    cleans = older_than_seconds is not None or keep_last is not None

    def run(context: PassContext) -> int:
        partitions = topic_partitions(context.settings, topic)
        store = stores_for(context.using).log
        before_ms = appended_before_ms(older_than_seconds)
        removed = 0
        start = random.randrange(partitions)  # a spent budget must not starve the last ones
        for partition in [*range(start, partitions), *range(start)]:
            if context.out_of_time():
                break
            if compact:
                removed += store.compact(context.namespace, topic, partition)
            if cleans:
                removed += store.cleanup(
                    context.namespace, topic, partition, before_ms, keep_last or 0
                )
        return removed

    name = "log_retention." + "".join(c if c.isalnum() or c == "_" else "_" for c in topic)
    return MaintenancePass(name, interval_seconds, run, max_run_seconds=max_run_seconds)
