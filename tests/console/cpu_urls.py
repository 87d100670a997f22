"""URLs for tests/console/test_cpu_budget.py: a view that burns CPU in Python, and one that only waits."""

from __future__ import annotations

import time

from django.http import HttpResponse, JsonResponse
from django.urls import include, path

OUTCOME: dict[str, object] = {}


def burn(request):
    """Spins for up to 30 s of wall time; records whether it ran to the end."""
    OUTCOME["finished"] = False
    end, n = time.monotonic() + 30, 0
    while time.monotonic() < end:
        n += 1
    OUTCOME["finished"] = True
    return JsonResponse({"n": n})


def wait(request):
    """Sleeps (no CPU): must never be cut by the CPU budget."""
    time.sleep(float(request.GET.get("s", "1")))
    return HttpResponse("slept")


urlpatterns = [
    path("api/v1/burn/", burn),
    path("burn/", burn),
    path("wait/", wait),
    path("", include("launcher.urls")),
]
