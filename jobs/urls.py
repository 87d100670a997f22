"""Pages of the jobs app."""

from django.urls import path  # noqa: F401

app_name = "jobs"
urlpatterns: list = []
