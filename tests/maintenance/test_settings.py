"""``LATER["MAINTENANCE_MODULES"]``: validated (check later_django.E010) and imported."""

from __future__ import annotations

import sys

import pytest
from django.test import override_settings

from later_django.conf import later_settings, setting_problems
from later_django.maintenance import registered_passes, unregister_pass


@pytest.mark.parametrize("value", ["tests.maintenance.probe_pass", [""], [3], {"a": 1}])
def test_maintenance_modules_must_be_a_list_of_module_paths(value: object) -> None:
    problems = setting_problems({"MAINTENANCE_MODULES": value})
    assert [check_id for check_id, _ in problems] == ["later_django.E010"]
    assert "LATER['MAINTENANCE_MODULES'] must be a list of dotted module paths" in problems[0][1]


def test_the_modules_listed_are_imported_and_their_passes_registered() -> None:
    sys.modules.pop("tests.maintenance.probe_pass", None)
    unregister_pass("overlap_probe")
    try:
        with override_settings(LATER={"MAINTENANCE_MODULES": ["tests.maintenance.probe_pass"]}):
            names = [p.name for p in registered_passes(later_settings())]
        assert "overlap_probe" in names
    finally:
        unregister_pass("overlap_probe")
        sys.modules.pop("tests.maintenance.probe_pass", None)
