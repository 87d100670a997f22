"""Account pages (API tokens are managed here by each user)."""

from django.urls import path  # noqa: F401

app_name = "accounts"
urlpatterns: list = []
