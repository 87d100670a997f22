"""Pages of the sshkeys app."""

from django.urls import path  # noqa: F401

app_name = "sshkeys"
urlpatterns: list = []
