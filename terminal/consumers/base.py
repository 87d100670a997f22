"""What every websocket of the terminal app shares: the job check on connect and again periodically, and closing
with a reason the page shows.

Refusals are accepted-then-closed with an application close code and a human reason. Because daphne drops the
close frame's reason text, every close is preceded by a text frame ``{"type":"closing","code":<code>,
"reason":<text>}`` carrying the same reason (nothing else is sent to a refused client).
"""

from __future__ import annotations

import contextlib
import json

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.utils import translation
from django.utils.translation import gettext as _

from rlark_console.language import scope_language
from terminal.services import access

MAX_TEXT_FRAME = 64 * 1024
MAX_BINARY_FRAME = 1024 * 1024  # keystrokes/pastes and 32 KiB upload chunks fit easily


def text_frame(text_data: str | None) -> dict | None:
    """A client's text frame as a JSON object; None for none, one over :data:`MAX_TEXT_FRAME`, invalid JSON or
    anything but an object (such frames are dropped)."""
    if text_data is None or len(text_data) > MAX_TEXT_FRAME:
        return None
    try:
        msg = json.loads(text_data)
    except ValueError:
        return None
    return msg if isinstance(msg, dict) else None


def close_reason(text: str) -> str:
    """Close reasons are limited to 123 bytes by RFC 6455."""
    raw = text.encode()
    return text if len(raw) <= 123 else raw[:120].decode("utf-8", "ignore") + "..."


class JobSocket(AsyncWebsocketConsumer):
    """Shared connect-time authorisation and periodic re-check."""

    recheck_interval = 30.0

    async def _authorize(self):
        self.job_name = self.scope["url_route"]["kwargs"]["job"]
        user = self.scope.get("user")
        session = self.scope.get("session")
        self.session_key = getattr(session, "session_key", None)
        self.user_id = getattr(user, "pk", None)
        try:
            return await database_sync_to_async(access.check_job)(user, self.job_name)
        except access.AccessDenied as exc:
            await self.accept()
            await self.close_with(exc.code, str(exc))
            return None

    async def close_with(self, code: int, reason: str) -> None:
        """Close with ``code``; the reason goes in a ``closing`` frame and in the close frame."""
        reason = close_reason(reason)
        with contextlib.suppress(Exception):
            await self.send_json({"type": "closing", "code": code, "reason": reason})
        await self.close(code=code, reason=reason)

    async def _recheck(self) -> access.AccessDenied | None:
        try:
            await database_sync_to_async(access.recheck)(self.user_id, self.session_key, self.job_name)
        except access.AccessDenied as exc:
            return exc
        return None

    async def send_json(self, data: dict) -> None:
        await self.send(text_data=json.dumps(data, separators=(",", ":"), ensure_ascii=False))


class UnknownPathConsumer(AsyncWebsocketConsumer):
    """Any websocket path no route matches (a mistyped URL, or ``..%2F`` in a job or Pod name, which daphne decodes
    into a ``/`` no route accepts): accepted, then closed with 4404 and a reason in the page's language, as the
    other refusals are. Without it Channels' router raised ``ValueError`` and daphne answered an HTTP 500."""

    async def connect(self) -> None:
        with translation.override(scope_language(self.scope)):
            reason = close_reason(_("There is nothing at this address: check the job and Pod names."))
        await self.accept()
        await self.send(text_data=json.dumps({"type": "closing", "code": access.CLOSE_GONE, "reason": reason}))
        await self.close(code=access.CLOSE_GONE, reason=reason)
