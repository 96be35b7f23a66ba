"""The mysql driver's statements (issue 36: being written store by store).

Unlike SQLite's and PostgreSQL's packages this one imports the modules that exist
here, a subset of :data:`~later_django.storage.queries.STORE_QUERY_MODULES`: a store
without statements here is still constructed by ``stores_for`` and fails on its
first statement (``Driver.queries`` raises ``LookupError``)."""

from importlib import import_module
from pkgutil import iter_modules

from later_django.storage.queries import STORE_QUERY_MODULES

#: The stores whose MySQL statements exist (a subset of ``STORE_QUERY_MODULES``).
WRITTEN = tuple(
    name for name in STORE_QUERY_MODULES if name in {m.name for m in iter_modules(__path__)}
)

for _store in WRITTEN:
    import_module(f"{__name__}.{_store}")
