"""The mysql driver's statements (issue 36: being written store by store).

Only ``kv`` exists so far. Unlike SQLite's and PostgreSQL's packages this one does
not import every module of :data:`~later_django.storage.queries.STORE_QUERY_MODULES`:
a store without statements here is still constructed by ``stores_for`` and fails on
its first statement (``Driver.queries`` raises ``LookupError``)."""

from importlib import import_module

#: The stores whose MySQL statements exist (a subset of ``STORE_QUERY_MODULES``).
WRITTEN = ("kv",)

for _store in WRITTEN:
    import_module(f"{__name__}.{_store}")
