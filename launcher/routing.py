"""Websocket URL routes, collected from the apps that serve websockets; a path none of them matches is closed
with 4404 (``terminal.consumers.UnknownPathConsumer``) rather than failing the handshake with an HTTP 500."""

from __future__ import annotations

from django.urls import re_path

from terminal.consumers import UnknownPathConsumer
from terminal.routing import websocket_urlpatterns as _terminal

websocket_urlpatterns: list = [*_terminal, re_path(r"", UnknownPathConsumer.as_asgi())]
