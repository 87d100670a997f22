"""The Overview page (``/``): the landing page after login."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from jobs.observe.overview import overview_context


@login_required
def overview(request):
    """Clusters with node counts, GPUs and health, and the user's jobs by phase (``templates/overview.html``)."""
    return render(request, "overview.html", overview_context(request.user))
