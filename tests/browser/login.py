"""Logging a browser page in to the example project's admin as the demo superuser."""

from __future__ import annotations

USERNAME, PASSWORD = "demo", "demo-password"


def log_in(page, base: str) -> None:
    """Logs ``page`` in to the admin at ``base`` and waits for the admin index."""
    page.goto(f"{base}/admin/login/?next=/admin/")
    page.fill("input[name=username]", USERNAME)
    page.fill("input[name=password]", PASSWORD)
    page.click("input[type=submit], button[type=submit]")
    page.wait_for_url(f"{base}/admin/")
