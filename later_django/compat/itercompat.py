"""``django.utils.itercompat`` as Django 5.x had it (removed in Django 6.0).

Installed under that name by :func:`later_django.compat.install_itercompat` so
that django-admin-tools 0.9.3 imports on Django 6.x.
"""

from __future__ import annotations

from typing import Any


def is_iterable(x: Any) -> bool:
    """An implementation independent way of checking for iterables (as Django had it)."""
    try:
        iter(x)
    except TypeError:
        return False
    return True
