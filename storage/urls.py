"""Pages of the storage app."""

from django.urls import path  # noqa: F401

app_name = "storage"
urlpatterns: list = []
