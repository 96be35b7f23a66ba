"""Which database alias and namespace an overview read is of (defaults from ``LATER``)."""

from __future__ import annotations

from later_django.conf import later_settings


def resolve_target(using: str | None, namespace: str | None) -> tuple[str, str]:
    """``(alias, namespace)``: the given ones, else ``LATER["DATABASE"]``/``["NAMESPACE"]``."""
    settings = later_settings()
    return using or settings.database, namespace or settings.namespace
