"""REST API routes of the sshkeys app (mounted under /api/v1/)."""

from django.urls import path  # noqa: F401

urlpatterns: list = []
