"""Who sees later_django in Wagtail's admin, and where the links go.

The dashboard's pages are Django admin pages (``admin.site.admin_view``: active staff
only), so the menu item and the panel are shown to a user who can open them *and* may
look at jobs: an active staff user with ``later_django.view_jobindexentry`` (the jobs'
view permission) or ``later_django.manage_jobs``; superusers have both. A Wagtail editor
who is not staff sees neither: the link would only lead to the admin's login.
"""

from __future__ import annotations

from typing import Any

from django.urls import NoReverseMatch, reverse

VIEW_PERMISSION = "later_django.view_jobindexentry"
MANAGE_PERMISSION = "later_django.manage_jobs"


def may_view_jobs(user: Any) -> bool:
    """Whether ``user`` may open the dashboard and look at jobs (the module's rule)."""
    if not (user.is_active and user.is_staff):
        return False
    return bool(user.has_perm(VIEW_PERMISSION) or user.has_perm(MANAGE_PERMISSION))


def dashboard_url() -> str | None:
    """The dashboard's URL, or ``None`` when the project's URLs do not include
    ``later_django.admin.urls`` (check ``later_django.W004`` says so)."""
    try:
        return reverse("later_django:dashboard")
    except NoReverseMatch:
        return None


def failures_url(since: str) -> str | None:
    """The failed jobs' list filtered to those that failed in ``since`` (``"1h"``)."""
    try:
        return f"{reverse('later_django:job_list', args=['failed'])}?since={since}"
    except NoReverseMatch:
        return None
