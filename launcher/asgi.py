"""ASGI entry point: HTTP through Django, websockets through Channels with session auth
and an Origin check of scheme, host and port (``rlark_console.origin.OriginValidator``); request bodies
larger than ``RLARK_MAX_REQUEST_BYTES`` are refused before Django reads them (``rlark_console.bodylimit``)."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_console.settings")
django_asgi = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402

from launcher.routing import websocket_urlpatterns  # noqa: E402
from rlark_console.bodylimit import BodyLimitMiddleware  # noqa: E402
from rlark_console.origin import OriginValidator  # noqa: E402

http_app = django_asgi
if settings.RLARK_SERVE_STATIC:
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    http_app = ASGIStaticFilesHandler(django_asgi)

application = ProtocolTypeRouter(
    {
        "http": BodyLimitMiddleware(http_app),
        "websocket": OriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
