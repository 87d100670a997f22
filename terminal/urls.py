"""Pages of the terminal app."""

from django.urls import path  # noqa: F401

app_name = "terminal"
urlpatterns: list = []
