"""Pages of the domains app."""

from django.urls import path  # noqa: F401

app_name = "domains"
urlpatterns: list = []
