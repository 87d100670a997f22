"""Websocket URL routes, collected from the apps that serve websockets."""

from __future__ import annotations

from django.urls import path  # noqa: F401

websocket_urlpatterns: list = []

try:  # apps add their consumers here as they are built
    from terminal.routing import websocket_urlpatterns as _terminal

    websocket_urlpatterns += _terminal
except ImportError:  # pragma: no cover - terminal app has no routes yet
    pass
