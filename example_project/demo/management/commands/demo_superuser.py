"""``manage.py demo_superuser``: the local demo's admin account, created or reset.

Idempotent: creates the user when absent, otherwise makes it an active
superuser again with the given password. For a local demo database only; the
default password is public.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

DEFAULT_USERNAME = "demo"
DEFAULT_PASSWORD = "demo-password"


class Command(BaseCommand):
    help = "Creates (or resets) the local demo superuser; prints its name and password."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default=DEFAULT_USERNAME)
        parser.add_argument("--password", default=DEFAULT_PASSWORD)

    def handle(self, *args: Any, **options: Any) -> None:
        username, password = options["username"], options["password"]
        user, created = get_user_model().objects.get_or_create(username=username)
        user.is_staff = user.is_superuser = user.is_active = True
        user.set_password(password)
        user.save()
        state = "created" if created else "already present, password reset"
        self.stdout.write(f"Demo superuser {state}: {username} / {password} (local only)")
