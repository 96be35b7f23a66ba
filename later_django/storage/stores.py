"""The storage of one database alias: its driver and every store on it.

:func:`driver_for` is the one place that looks at the database vendor.
:func:`stores_for` is what the engine, the worker and the surfaces hold: a
:class:`Stores` bundle whose members satisfy the ports of
:mod:`later_django.storage.ports`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from importlib import import_module

from django.db import connections

from later_django.storage.batch import BatchStores, BatchWriter
from later_django.storage.dashboard import DashboardReads
from later_django.storage.driver import Driver
from later_django.storage.execution import ExecutionStore
from later_django.storage.job_index import JobIndexStore
from later_django.storage.kv import KeyValueStore
from later_django.storage.log import LogStore
from later_django.storage.metrics import MetricsStore
from later_django.storage.partitions import PartitionStore
from later_django.storage.ports.dashboard import DashboardPort
from later_django.storage.ports.execution import ExecutionPort
from later_django.storage.ports.job_index import JobIndexPort
from later_django.storage.ports.kv import KeyValuePort
from later_django.storage.ports.log import LogPort
from later_django.storage.ports.metrics import MetricsPort
from later_django.storage.ports.partitions import PartitionPort
from later_django.storage.ports.queue import QueuePort
from later_django.storage.ports.topics import TopicPort
from later_django.storage.ports.upkeep import UpkeepPort
from later_django.storage.queue import SqlDeliveryQueue
from later_django.storage.topics import TopicStore
from later_django.storage.upkeep import UpkeepStore

#: Each supported vendor's driver: its package and class. The package and its
#: ``queries`` (whose modules register their statements with the driver) are
#: imported when an alias of that vendor is first used, so a process that only
#: talks to SQLite never loads the PostgreSQL statements, nor the other way round.
_DRIVERS: dict[str, tuple[str, str]] = {
    "mysql": ("later_django.storage.mysql", "MysqlDriver"),
    "postgresql": ("later_django.storage.postgres", "PostgresDriver"),
    "sqlite": ("later_django.storage.sqlite", "SqliteDriver"),
}


@cache
def driver_class(vendor: str) -> type[Driver]:
    """The driver class of ``vendor``, its statements registered; ``KeyError`` for a
    vendor later_django does not support."""
    package, name = _DRIVERS[vendor]
    import_module(f"{package}.queries")
    driver: type[Driver] = getattr(import_module(package), name)
    return driver


@cache
def driver_for(using: str) -> Driver:
    """The driver of the database alias ``using``; ``ImproperlyConfigured``-style
    ``LookupError`` naming the vendor when later_django does not support it."""
    vendor = connections[using].vendor
    try:
        return driver_class(vendor)(using)
    except KeyError:
        raise LookupError(
            f"database {using!r} is {vendor!r}; later_django supports {sorted(_DRIVERS)}"
        ) from None


@dataclass(frozen=True)
class Stores:
    """Every store on one database alias, sharing its driver (and connection).

    Members are typed by their port (``storage.ports``): code above storage sees
    what it may ask, not how a store does it. ``batch`` writes a transaction's
    changes to several stores at once.
    """

    driver: Driver
    kv: KeyValuePort
    index: JobIndexPort
    metrics: MetricsPort
    upkeep: UpkeepPort
    executions: ExecutionPort
    queue: QueuePort
    partitions: PartitionPort
    log: LogPort
    dashboard: DashboardPort
    topics: TopicPort
    batch: BatchWriter

    @property
    def using(self) -> str:
        return self.driver.using


@cache
def stores_for(using: str) -> Stores:
    """The stores of the database alias ``using`` (made once per alias)."""
    driver = driver_for(using)
    kv, index = KeyValueStore(driver), JobIndexStore(driver)
    executions, queue = ExecutionStore(driver), SqlDeliveryQueue(driver)
    return Stores(
        driver=driver,
        kv=kv,
        index=index,
        metrics=MetricsStore(driver),
        upkeep=UpkeepStore(driver),
        executions=executions,
        queue=queue,
        partitions=PartitionStore(driver),
        log=LogStore(driver),
        dashboard=DashboardReads(driver),
        topics=TopicStore(driver),
        batch=BatchWriter(BatchStores(driver, kv, index, executions, queue)),
    )
