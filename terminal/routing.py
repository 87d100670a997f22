"""Websocket routes of the terminal app (collected by ``launcher.routing``)."""

from django.urls import path

from terminal import consumers

websocket_urlpatterns = [
    path("ws/terminal/jobs/<str:job>/logs/", consumers.LogsConsumer.as_asgi()),
    path("ws/terminal/jobs/<str:job>/pods/<str:pod>/", consumers.TerminalConsumer.as_asgi()),
]
