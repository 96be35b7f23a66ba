"""The site with later_django's apps left out of INSTALLED_APPS (a forgotten line):
Wagtail builds its tasks' backend while the apps load, and check E018 must say what is
missing (tests/test_wagtail_site.py)."""

from tests.wagtail_site.settings import *  # noqa: F403
from tests.wagtail_site.settings import INSTALLED_APPS

INSTALLED_APPS = [app for app in INSTALLED_APPS if not app.startswith("later_django")]
