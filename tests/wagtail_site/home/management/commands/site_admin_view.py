"""Opens Wagtail's admin home page (``/admin/``) as four users, through Django's test
client in this process, and prints one JSON object per user: whether the "Background
jobs" menu item and the jobs panel are there, and the panel's figures.

The users (made here when missing): ``boss`` (a superuser), ``operator`` (staff with
the jobs' view permission and Wagtail's admin access), ``clerk`` (staff with Wagtail's
admin access, not the jobs' permission) and ``editor`` (Wagtail's admin access only, not
staff)."""

from __future__ import annotations

import json
import re
from typing import Any

from django.contrib.auth.models import Permission, User
from django.core.management.base import BaseCommand
from django.test import Client

DASHBOARD = "/django-admin/later_django/"


def _user(name: str, *, staff: bool, superuser: bool, permissions: list[str]) -> User:
    user, _ = User.objects.get_or_create(
        username=name, defaults={"is_staff": staff, "is_superuser": superuser}
    )
    for codename in permissions:
        user.user_permissions.add(Permission.objects.get(codename=codename))
    return user


def admin_views() -> dict[str, Any]:
    """What ``/admin/`` shows each user (the module's docstring), by user name."""
    users = {
        "boss": _user("boss", staff=True, superuser=True, permissions=[]),
        "operator": _user(
            "operator",
            staff=True,
            superuser=False,
            permissions=["access_admin", "view_jobindexentry"],
        ),
        "clerk": _user("clerk", staff=True, superuser=False, permissions=["access_admin"]),
        "editor": _user("editor", staff=False, superuser=False, permissions=["access_admin"]),
    }
    seen = {}
    for name, user in users.items():
        client = Client()
        client.force_login(user)
        response = client.get("/admin/")
        html = response.content.decode()
        seen[name] = {
            "status": response.status_code,
            "menu": "Background jobs" in html and DASHBOARD in html,
            "panel": 'id="later-jobs' in html,
            "stages": {
                stage: int(count)
                for stage, count in re.findall(
                    r'data-later-stage="(\w+)" data-later-count="(\d+)"', html
                )
            },
            "failed_last_hour": [
                int(value) for value in re.findall(r'data-later-failed-last-hour="(\d+)"', html)
            ],
            "dashboard_status": client.get(DASHBOARD).status_code,
        }
    return seen


class Command(BaseCommand):
    def handle(self, *args: Any, **options: Any) -> None:
        self.stdout.write(json.dumps(admin_views()))
