"""The example project with the dashboard's live refresh every second, for
``tests/browser/test_live_refresh.py``.

The interval is the template variable ``later_refresh_seconds`` (docs/dashboard.md:
default 5, at least 1), set here by a context processor as a project would. Users keep
5 s; the tests wait on the timer, and at 1 s each waits a fifth as long.
"""

from example_project.settings import *  # noqa: F403
from example_project.settings import TEMPLATES as EXAMPLE_TEMPLATES

REFRESH_SECONDS = 1


def refresh_interval(request: object) -> dict[str, int]:
    """The context processor that sets the live refresh's interval."""
    return {"later_refresh_seconds": REFRESH_SECONDS}


TEMPLATES = [
    {
        **EXAMPLE_TEMPLATES[0],
        "OPTIONS": {
            **EXAMPLE_TEMPLATES[0]["OPTIONS"],
            "context_processors": [
                *EXAMPLE_TEMPLATES[0]["OPTIONS"]["context_processors"],
                "tests.browser.quick_refresh_settings.refresh_interval",
            ],
        },
    }
]
