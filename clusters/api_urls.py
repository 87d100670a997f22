"""REST API routes of the clusters app (mounted under /api/v1/)."""

from django.urls import path  # noqa: F401

urlpatterns: list = []
