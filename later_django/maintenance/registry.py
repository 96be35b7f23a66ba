"""The registry of maintenance passes: later_django's own, then the project's.

later_django's passes are listed here (:data:`BUILTIN_PASSES`, in the order they
run) and registered when this module is imported. A project registers its own
with one line at import time of a module it lists in
``LATER["MAINTENANCE_MODULES"]``; :func:`registered_passes` imports those
modules (named by configuration, so they can only be imported by name) before
it answers.
"""

from __future__ import annotations

import importlib

from later_django.conf import LaterSettings
from later_django.maintenance.definition import MaintenancePass
from later_django.maintenance.promote import PROMOTE
from later_django.maintenance.purge import PURGE
from later_django.maintenance.queue_sample import QUEUE_SAMPLE
from later_django.maintenance.reconcile import RECONCILE
from later_django.maintenance.recurring import RECURRING
from later_django.maintenance.sweep import SWEEP
from later_django.maintenance.vacuum import VACUUM
from later_django.maintenance.wal_checkpoint import WAL_CHECKPOINT
from later_django.maintenance.workflows import WORKFLOWS

#: later_django's own passes, in the order they run.
BUILTIN_PASSES: tuple[MaintenancePass, ...] = (
    PROMOTE,
    RECURRING,
    SWEEP,
    WAL_CHECKPOINT,
    VACUUM,
    RECONCILE,
    QUEUE_SAMPLE,
    PURGE,
    WORKFLOWS,
)

_REGISTRY: dict[str, MaintenancePass] = {p.name: p for p in BUILTIN_PASSES}


def register_pass(maintenance_pass: MaintenancePass, *, replace: bool = False) -> MaintenancePass:
    """Adds ``maintenance_pass`` to the registry (passes run in registration order).

    Registering the very same object again is a no-op (a module imported twice);
    another pass under a taken name raises ``ValueError`` unless ``replace``.
    Returns the pass, so it can be used as an expression.
    """
    if not isinstance(maintenance_pass, MaintenancePass):
        raise TypeError(f"register_pass() takes a MaintenancePass, got {maintenance_pass!r}")
    existing = _REGISTRY.get(maintenance_pass.name)
    if existing is not None and existing is not maintenance_pass and not replace:
        raise ValueError(
            f"a maintenance pass named {maintenance_pass.name!r} is already registered "
            f"({existing.run!r}); pass replace=True to replace it"
        )
    _REGISTRY[maintenance_pass.name] = maintenance_pass
    return maintenance_pass


def unregister_pass(name: str) -> None:
    """Removes the pass ``name`` (absent names are ignored); for tests and projects
    that replace a built-in pass with their own."""
    _REGISTRY.pop(name, None)


def load_pass_modules(settings: LaterSettings) -> None:
    """Imports the project's ``LATER["MAINTENANCE_MODULES"]`` (cheap once done)."""
    for module in settings.maintenance_modules:
        importlib.import_module(module)


def registered_passes(settings: LaterSettings | None = None) -> list[MaintenancePass]:
    """The registered passes in registration order (the project's pass modules loaded
    first when ``settings`` is given)."""
    if settings is not None:
        load_pass_modules(settings)
    return list(_REGISTRY.values())
