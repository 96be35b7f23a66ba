"""Maintenance passes: bounded upkeep that workers and ``later_maintenance`` share.

``from later_django.maintenance import MaintenancePass, register_pass`` and
register a pass with one line. What a pass is: :mod:`.definition`; the
registry and later_django's own passes (one module each: :mod:`.promote`,
:mod:`.recurring`, :mod:`.sweep`, :mod:`.wal_checkpoint`, :mod:`.vacuum`,
:mod:`.reconcile`, :mod:`.queue_sample`, :mod:`.purge`): :mod:`.registry`; how
processes share them (one lease per pass and namespace): :mod:`.framework`.
Nothing here is imported on the job path except by the worker loop.
"""

from later_django.maintenance.definition import LEASE_MARGIN_SECONDS, MaintenancePass, PassContext
from later_django.maintenance.framework import PassRun, PassRunner, run_due_passes
from later_django.maintenance.registry import (
    BUILTIN_PASSES,
    register_pass,
    registered_passes,
    unregister_pass,
)

__all__ = [
    "BUILTIN_PASSES",
    "LEASE_MARGIN_SECONDS",
    "MaintenancePass",
    "PassContext",
    "PassRun",
    "PassRunner",
    "register_pass",
    "registered_passes",
    "run_due_passes",
    "unregister_pass",
]
