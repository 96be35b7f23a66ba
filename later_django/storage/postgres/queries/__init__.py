"""The postgres driver's statements, one module per store (imported for their registration)."""

from later_django.storage.postgres.queries import kv

__all__ = ["kv"]
