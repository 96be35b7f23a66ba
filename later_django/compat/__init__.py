"""Compatibility shims for third-party packages later_django works with.

:func:`install_itercompat` brings back ``django.utils.itercompat``: Django 6.0
removed it, and django-admin-tools 0.9.3 (its latest release) still imports
``is_iterable`` from it. The shim is installed when ``later_django.apps`` is
imported, which Django does while it reads ``INSTALLED_APPS`` in order; so
``"later_django"`` must come before the ``admin_tools`` apps.
"""

from __future__ import annotations

import importlib.util
import sys

from later_django.compat import itercompat

SHIM_NAME = "django.utils.itercompat"


def install_itercompat() -> bool:
    """Makes ``import django.utils.itercompat`` work; ``True`` if the shim was installed.

    Does nothing when Django still ships the module (before 6.0) or when it is
    already importable: the real module always wins over the shim.
    """
    if SHIM_NAME in sys.modules:
        return False
    if importlib.util.find_spec(SHIM_NAME) is not None:
        return False
    sys.modules[SHIM_NAME] = itercompat
    import django.utils

    django.utils.itercompat = itercompat
    return True
