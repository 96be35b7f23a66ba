"""The admin-tools shim, and the pages without admin-tools installed."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import django.utils
import pytest
from django.test import Client, modify_settings
from django.urls import reverse

pytestmark = pytest.mark.django_db(transaction=True, databases="__all__")

ADMIN_TOOLS_APPS = [
    "admin_tools",
    "admin_tools.theming",
    "admin_tools.menu",
    "admin_tools.dashboard",
]


def test_django_utils_itercompat_is_importable_for_admin_tools() -> None:
    itercompat = importlib.import_module("django.utils.itercompat")
    assert itercompat.is_iterable([1]) and itercompat.is_iterable("ab")
    assert not itercompat.is_iterable(3)
    modules = importlib.import_module("admin_tools.dashboard.modules")
    assert modules.is_iterable is itercompat.is_iterable


def test_the_shim_is_installed_when_django_reads_installed_apps() -> None:
    """In a fresh interpreter: ``django.setup()`` alone makes admin_tools importable."""
    script = (
        "import django, sys; assert 'django.utils.itercompat' not in sys.modules;"
        "django.setup(); import admin_tools.dashboard.modules;"
        "print(sys.modules['django.utils.itercompat'].__name__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        env={"DJANGO_SETTINGS_MODULE": "tests.settings", "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(__import__("pathlib").Path(__file__).resolve().parents[2]),
    )
    assert done.returncode == 0, done.stderr
    # Django 5.2 still ships the module, and the real one wins over the shim.
    ships_it = (Path(django.utils.__file__).parent / "itercompat.py").is_file()
    expected = "django.utils.itercompat" if ships_it else "later_django.compat.itercompat"
    assert done.stdout.strip() == expected


def test_the_pages_work_without_admin_tools(manager_client: Client, later_db: str) -> None:
    with modify_settings(INSTALLED_APPS={"remove": ADMIN_TOOLS_APPS}):
        index = manager_client.get(reverse("admin:index"))
        assert index.status_code == 200
        assert "dashboard-container" not in index.content.decode()
        page = manager_client.get(reverse("later_django:dashboard"))
        assert page.status_code == 200
        assert 'id="later-panel-stages"' in page.content.decode()
