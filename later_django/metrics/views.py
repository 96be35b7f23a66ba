"""The metrics endpoint: who may read it, and what it answers.

A staff user's session, or ``Authorization: Bearer <LATER["METRICS"]["TOKEN"]>``
(compared in constant time), reads the figures; anyone else gets 401 (no
credentials: the ``WWW-Authenticate`` challenge) or 403 (a signed-in user who
is not staff, or a wrong token). GET only; nothing is written.
"""

from __future__ import annotations

import hmac

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from later_django.conf import later_settings
from later_django.metrics.exposition import CONTENT_TYPE, render


def _bearer(request: HttpRequest) -> str | None:
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def _refusal(request: HttpRequest, token: str | None) -> HttpResponse | None:
    """None when the request may read the figures, else the response that refuses it."""
    user = getattr(request, "user", None)
    if user is not None and user.is_active and user.is_staff:
        return None
    offered = _bearer(request)
    if offered is not None and token is not None:
        if hmac.compare_digest(offered.encode(), token.encode()):
            return None
        return HttpResponse("wrong token\n", status=403, content_type="text/plain")
    if user is not None and user.is_authenticated:
        return HttpResponse("staff only\n", status=403, content_type="text/plain")
    response = HttpResponse(
        "sign in as staff or send Authorization: Bearer <token>\n",
        status=401,
        content_type="text/plain",
    )
    response["WWW-Authenticate"] = 'Bearer realm="later_django metrics"'
    return response


@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    """The Prometheus text of every configured namespace."""
    settings = later_settings()
    refused = _refusal(request, settings.metrics_token)
    if refused is not None:
        return refused
    namespaces = settings.metrics_namespaces or (settings.namespace,)
    response = HttpResponse(render(namespaces), content_type=CONTENT_TYPE)
    response["Cache-Control"] = "no-store"
    return response
