"""REST API routes of the domains app (mounted under /api/v1/)."""

from django.urls import path  # noqa: F401

urlpatterns: list = []
