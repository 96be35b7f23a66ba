"""The mysql driver's statements, one module per store of
:data:`~later_django.storage.queries.STORE_QUERY_MODULES` (imported for their
registration with the driver; a store without its module here fails at import)."""

from importlib import import_module

from later_django.storage.queries import STORE_QUERY_MODULES

for _store in STORE_QUERY_MODULES:
    import_module(f"{__name__}.{_store}")
