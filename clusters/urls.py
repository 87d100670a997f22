"""Pages of the clusters app."""

from django.urls import path  # noqa: F401

app_name = "clusters"
urlpatterns: list = []
