"""The ports: every store of ``stores_for`` satisfies its port on both drivers, and the
conformance suite in ``tests/storage`` (and the feature suites beside it) exercises
every method a port names.

Like River's ``riverdrivertest``: one suite of behaviour, run against each driver
(SQLite and PostgreSQL), is what makes a store an implementation of its port. A
port method that no test calls would be a contract nobody checks; the second test
fails when a port grows a method without a test.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

from later_django.storage import ports, queries
from later_django.storage.ports.dashboard import DashboardPort
from later_django.storage.ports.execution import ExecutionPort
from later_django.storage.ports.job_index import JobIndexPort
from later_django.storage.ports.kv import KeyValuePort
from later_django.storage.ports.leases import LeasePort
from later_django.storage.ports.log import LogPort
from later_django.storage.ports.metrics import MetricsPort
from later_django.storage.ports.partitions import PartitionPort
from later_django.storage.ports.queue import QueuePort
from later_django.storage.ports.topics import TopicPort
from later_django.storage.ports.upkeep import UpkeepPort
from later_django.storage.stores import stores_for

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

#: Bundle member -> the port it must satisfy.
MEMBERS = {
    "kv": KeyValuePort,
    "index": JobIndexPort,
    "metrics": MetricsPort,
    "upkeep": UpkeepPort,
    "executions": ExecutionPort,
    "queue": QueuePort,
    "partitions": PartitionPort,
    "log": LogPort,
    "dashboard": DashboardPort,
    "topics": TopicPort,
}

TESTS = Path(__file__).resolve().parent.parent


def port_methods(port: type) -> list[str]:
    return [
        name
        for name, member in inspect.getmembers(port)
        if not name.startswith("_") and (inspect.isfunction(member) or isinstance(member, property))
    ]


def test_every_store_of_the_bundle_satisfies_its_port(db_alias: str) -> None:
    stores = stores_for(db_alias)
    for member, port in MEMBERS.items():
        store = getattr(stores, member)
        assert isinstance(store, port), f"stores.{member} ({type(store).__name__}) is no {port}"
        missing = [name for name in port_methods(port) if not hasattr(store, name)]
        assert not missing, (member, missing)
    assert isinstance(stores.partitions.leases, LeasePort)
    assert isinstance(stores.log.leases, LeasePort)


def test_the_suite_calls_every_method_of_every_port() -> None:
    sources = "\n".join(path.read_text() for path in TESTS.rglob("test_*.py"))
    sources += "\n".join(path.read_text() for path in TESTS.rglob("support.py"))
    uncalled = {
        port.__name__: [
            name for name in port_methods(port) if not re.search(rf"\.{name}\b", sources)
        ]
        for port in [*MEMBERS.values(), LeasePort]
    }
    assert not any(uncalled.values()), uncalled


def test_every_port_module_declares_a_port_this_suite_checks() -> None:
    """A port added in a new module of ``storage/ports/`` must join ``MEMBERS`` (or be
    the lease port the stores hold), so the two tests above see it."""
    declared = {
        member
        for info in pkgutil.iter_modules(ports.__path__, f"{ports.__name__}.")
        for member in vars(importlib.import_module(info.name)).values()
        if inspect.isclass(member)
        and member.__module__ == info.name
        and getattr(member, "_is_protocol", False)
    }
    assert declared == {*MEMBERS.values(), LeasePort}


@pytest.mark.parametrize("vendor", ["postgres", "sqlite"])
def test_each_vendor_has_one_query_module_per_shared_store_module(vendor: str) -> None:
    """The vendor packages import STORE_QUERY_MODULES; a module outside that list
    would never be imported (its statements never registered)."""
    package = Path(queries.__file__).parent
    shared = {path.stem for path in package.glob("*.py")} - {"__init__"}
    own = {path.stem for path in (package.parent / vendor / "queries").glob("*.py")} - {"__init__"}
    assert shared == own == set(queries.STORE_QUERY_MODULES)
