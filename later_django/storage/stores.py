"""The storage of one database alias: its driver and every store on it.

:func:`driver_for` is the one place that looks at the database vendor.
:func:`stores_for` is what the engine, the worker and the surfaces hold: a
:class:`Stores` bundle whose members satisfy the ports of
:mod:`later_django.storage.ports`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, cached_property

from django.db import connections

from later_django.storage.batch import BatchStores, BatchWriter
from later_django.storage.dashboard import DashboardReads
from later_django.storage.driver import Driver
from later_django.storage.execution import ExecutionStore
from later_django.storage.job_index import JobIndexStore
from later_django.storage.kv import KeyValueStore
from later_django.storage.log import LogStore
from later_django.storage.partitions import PartitionStore

# The vendor query modules register their statements with their driver on import.
from later_django.storage.postgres import PostgresDriver
from later_django.storage.postgres import queries as _postgres_queries  # noqa: F401
from later_django.storage.queue import SqlDeliveryQueue
from later_django.storage.sqlite import SqliteDriver
from later_django.storage.sqlite import queries as _sqlite_queries  # noqa: F401
from later_django.storage.topics import TopicStore
from later_django.storage.upkeep import UpkeepStore

_DRIVERS: dict[str, type[Driver]] = {
    PostgresDriver.vendor: PostgresDriver,
    SqliteDriver.vendor: SqliteDriver,
}


@cache
def driver_for(using: str) -> Driver:
    """The driver of the database alias ``using``; ``ImproperlyConfigured``-style
    ``LookupError`` naming the vendor when later_django does not support it."""
    vendor = connections[using].vendor
    try:
        return _DRIVERS[vendor](using)
    except KeyError:
        raise LookupError(
            f"database {using!r} is {vendor!r}; later_django supports {sorted(_DRIVERS)}"
        ) from None


@dataclass(frozen=True)
class Stores:
    """Every store on one database alias, sharing its driver (and connection)."""

    driver: Driver
    kv: KeyValueStore
    index: JobIndexStore
    upkeep: UpkeepStore
    executions: ExecutionStore
    queue: SqlDeliveryQueue
    partitions: PartitionStore
    log: LogStore
    dashboard: DashboardReads
    topics: TopicStore

    @property
    def using(self) -> str:
        return self.driver.using

    @cached_property
    def batch(self) -> BatchWriter:
        """Writes a transaction's batch to several of these stores at once."""
        return BatchWriter(
            BatchStores(self.driver, self.kv, self.index, self.executions, self.queue)
        )


@cache
def stores_for(using: str) -> Stores:
    """The stores of the database alias ``using`` (made once per alias)."""
    driver = driver_for(using)
    return Stores(
        driver=driver,
        kv=KeyValueStore(driver),
        index=JobIndexStore(driver),
        upkeep=UpkeepStore(driver),
        executions=ExecutionStore(driver),
        queue=SqlDeliveryQueue(driver),
        partitions=PartitionStore(driver),
        log=LogStore(using),
        dashboard=DashboardReads(driver),
        topics=TopicStore(driver),
    )
