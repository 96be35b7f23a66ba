"""The demo page: buttons (POST with CSRF) that enqueue jobs, and what became of them."""

from __future__ import annotations

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from demo import actions, status


@require_GET
def index(request: HttpRequest) -> HttpResponse:
    """Renders the buttons, live stage counts, recent jobs and the recurring jobs."""
    return render(
        request,
        "demo/index.html",
        {
            "stage_counts": status.stage_counts(),
            "recent_jobs": status.recent_jobs(),
            "recurring_jobs": status.recurring_jobs(),
            "orders_topic": actions.ORDERS_TOPIC,
            "burst_size": f"{actions.BURST_SIZE:,}",
            "order_count": actions.ORDER_COUNT,
        },
    )


@require_POST
def enqueue(request: HttpRequest, action: str) -> HttpResponse:
    """Runs the button's action and returns to the page with what it did."""
    run = actions.ACTIONS.get(action)
    if run is None:
        messages.error(request, f"Unknown action {action!r}; known: {sorted(actions.ACTIONS)}.")
        return redirect("demo:index")
    messages.success(request, run())
    return redirect("demo:index")
