"""REST API routes of the terminal app (mounted under /api/v1/)."""

from django.urls import path

from terminal.api import JobExecView

urlpatterns: list = [
    path("jobs/<str:name>/exec/", JobExecView.as_view(), name="api-job-exec"),
]
