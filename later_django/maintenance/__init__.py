"""Maintenance passes: bounded upkeep that workers and ``later_maintenance`` share.

``from later_django.maintenance import MaintenancePass, register_pass`` and
register a pass with one line; see :mod:`later_django.maintenance.framework`
for the contract and :mod:`later_django.maintenance.passes` for the built-in
passes. Nothing here is imported on the job path except by the worker loop.
"""

from later_django.maintenance.framework import (
    LEASE_MARGIN_SECONDS,
    PASS_MODULES,
    MaintenancePass,
    PassContext,
    PassRun,
    PassRunner,
    register_pass,
    registered_passes,
    run_due_passes,
    unregister_pass,
)

__all__ = [
    "LEASE_MARGIN_SECONDS",
    "PASS_MODULES",
    "MaintenancePass",
    "PassContext",
    "PassRun",
    "PassRunner",
    "register_pass",
    "registered_passes",
    "run_due_passes",
    "unregister_pass",
]
