"""The sqlite driver's statements, one module per store (imported for their registration)."""

from later_django.storage.sqlite.queries import kv

__all__ = ["kv"]
