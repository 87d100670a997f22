"""The four channels' message formats and their one HTTPS POST (or e-mail).

- **webhook**: ``{"event", "job", "text", "at"}`` JSON, headers ``X-RLark-Timestamp`` (Unix seconds) and
  ``X-RLark-Signature: sha256=<hex HMAC-SHA256 of "<timestamp>.<body>" with the channel's secret>``.
- **feishu** (Feishu/Lark custom bot, signed): ``{"timestamp", "sign", "msg_type": "text", "content": {"text"}}``
  where ``sign`` is base64 of HMAC-SHA256 keyed by ``"<timestamp>\\n<secret>"`` over an empty message (the bot's
  documented "签名校验"); without a secret, ``timestamp`` and ``sign`` are left out.
- **slack** (incoming webhook): ``{"text"}``.
- **email**: Django's e-mail backend (``send_mail``), subject = first line of the text.

Every HTTP send resolves and checks the URL again (``notifications.safety.resolve``) and connects to the checked
address with the original host name for ``Host`` and TLS (SNI and certificate check), within
``RLARK_NOTIFY_TIMEOUT`` seconds; redirects are not followed. Failures raise :class:`SendError` with a short
sentence that never carries the URL or the secret.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import time
from typing import Any

import urllib3
from django.conf import settings
from django.core.mail import send_mail
from django.utils.translation import gettext_noop

from notifications import errors, safety
from notifications.models import Channel, Kind

MAX_TEXT = 4000  # characters of a message sent


class SendError(Exception):
    """One attempt failed; ``stored`` is its error in the form of ``notifications.errors`` (no URL, no secret)."""

    def __init__(self, msgid: str, hung: bool = False, **params: Any) -> None:
        super().__init__(msgid % params if params else msgid)
        self.stored = errors.encode(msgid, params)
        self.hung = hung  # the receiver did not answer in time


def webhook_signature(secret: str, timestamp: str, body: bytes) -> str:
    """``sha256=<hex>``: HMAC-SHA256 of ``b"<timestamp>." + body`` keyed by ``secret``."""
    digest = hmac.new(secret.encode(), timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()
    return f"sha256={digest}"


def feishu_sign(secret: str, timestamp: str) -> str:
    """The Feishu/Lark bot's ``sign``: base64(HMAC-SHA256(key = ``"<timestamp>\\n<secret>"``, msg = b""))."""
    key = f"{timestamp}\n{secret}".encode()
    return base64.b64encode(hmac.new(key, b"", hashlib.sha256).digest()).decode()


def build(channel: Channel, event: dict[str, Any], text: str, now: float | None = None) -> tuple[bytes, dict]:
    """The body and extra headers of one message to an HTTP channel. ``event``: ``{"kind", "job", ...}`` without
    secrets; ``text``: the message (cut at ``MAX_TEXT``)."""
    text = text[:MAX_TEXT]
    ts = str(int(now if now is not None else time.time()))
    headers: dict[str, str] = {"Content-Type": "application/json"}
    if channel.kind == Kind.FEISHU:
        doc: dict[str, Any] = {"msg_type": "text", "content": {"text": text}}
        if channel.secret:
            doc = {"timestamp": ts, "sign": feishu_sign(channel.secret, ts), **doc}
        return json.dumps(doc, ensure_ascii=False).encode(), headers
    if channel.kind == Kind.SLACK:
        return json.dumps({"text": text}, ensure_ascii=False).encode(), headers
    body = json.dumps({**event, "text": text, "at": int(ts)}, ensure_ascii=False).encode()
    headers["X-RLark-Timestamp"] = ts
    if channel.secret:
        headers["X-RLark-Signature"] = webhook_signature(channel.secret, ts, body)
    return body, headers


def post(url: str, body: bytes, headers: dict[str, str]) -> int:
    """POST ``body`` to ``url`` at its checked address; returns the HTTP status (2xx). Raises :class:`SendError`
    for a refused URL, a timeout, a connection error or a non-2xx answer."""
    try:
        target = safety.resolve(url)
    except safety.UnsafeURL as exc:
        raise SendError(exc.msgid, **exc.params) from None
    timeout = urllib3.Timeout(total=float(settings.RLARK_NOTIFY_TIMEOUT))
    kwargs: dict[str, Any] = {"timeout": timeout, "retries": False, "maxsize": 1}
    if target.scheme == "https":
        pool: urllib3.HTTPConnectionPool = urllib3.HTTPSConnectionPool(
            target.address, target.port, server_hostname=target.host, assert_hostname=target.host, **kwargs
        )
    else:
        pool = urllib3.HTTPConnectionPool(target.address, target.port, **kwargs)
    host = target.host if target.port in (80, 443) else f"{target.host}:{target.port}"
    try:
        answer = pool.urlopen(
            "POST", target.path, body=body, headers={**headers, "Host": host}, redirect=False, preload_content=True
        )
    except urllib3.exceptions.TimeoutError:
        raise SendError(
            gettext_noop("no answer within %(s)s s"), hung=True, s=f"{settings.RLARK_NOTIFY_TIMEOUT:g}"
        ) from None
    except urllib3.exceptions.HTTPError as exc:
        raise SendError(gettext_noop("connection failed (%(error)s)"), error=type(exc).__name__) from None
    finally:
        pool.close()
    if not 200 <= answer.status < 300:
        raise SendError(gettext_noop("the receiver answered HTTP %(status)d"), status=answer.status)
    return answer.status


def deliver(channel: Channel, event: dict[str, Any], text: str) -> None:
    """Send one message on ``channel``; raises :class:`SendError` on failure."""
    if channel.kind == Kind.EMAIL:
        subject = text.splitlines()[0][:150] if text else "RLark"
        try:
            send_mail(subject, text[:MAX_TEXT], None, [channel.email], fail_silently=False)
        except Exception as exc:  # noqa: BLE001  (any backend failure is one failed attempt)
            raise SendError(gettext_noop("e-mail not sent (%(error)s)"), error=type(exc).__name__) from None
        return
    body, headers = build(channel, event, text)
    post(channel.url, body, headers)
