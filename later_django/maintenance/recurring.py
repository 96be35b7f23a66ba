"""The ``recurring`` pass (every second): due occurrences of recurring jobs, one
transaction per page (:mod:`later_django.engine.recurring_pass`)."""

from __future__ import annotations

from later_django.engine.recurring_pass import recurring_pass, recurring_wanted
from later_django.maintenance.definition import MaintenancePass

RECURRING = MaintenancePass(
    "recurring",
    1.0,
    recurring_pass,
    max_run_seconds=5.0,
    wanted=recurring_wanted,
    unit=("occurrence enqueued", "occurrences enqueued"),
)
