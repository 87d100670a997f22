"""The ASGI body limit (``rlark_console.bodylimit.BodyLimitMiddleware``) under any ASGI server: a declared or a
streamed body over ``RLARK_MAX_REQUEST_BYTES`` is answered 413 without the application reading it; a body within
the limit reaches the application whole. The served web tier's check is in ``test_web_tier_faults.py``."""

from __future__ import annotations

import json

import pytest

from rlark_console.bodylimit import BodyLimitMiddleware

LIMIT = 1000


class Recorder:
    """An ASGI app that reads the whole body and answers 200 with its length."""

    def __init__(self) -> None:
        self.called = False

    async def __call__(self, scope, receive, send) -> None:
        self.called = True
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": str(len(body)).encode()})


async def _run(app, headers: list[tuple[bytes, bytes]], chunks: list[bytes]) -> tuple[list[dict], int]:
    """Call ``app`` with a POST to ``/api/v1/jobs/`` whose body arrives in ``chunks``: (sent messages, number of
    body messages the server handed out)."""
    messages = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1} for i, c in enumerate(chunks)]
    handed = 0
    sent: list[dict] = []

    async def receive() -> dict:
        nonlocal handed
        handed += 1
        return messages[handed - 1] if handed <= len(messages) else {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/api/v1/jobs/", "headers": headers}
    await app(scope, receive, send)
    return sent, handed


@pytest.fixture
def limit(settings):
    settings.RLARK_MAX_REQUEST_BYTES = LIMIT


@pytest.mark.asyncio
@pytest.mark.parametrize("language, word", [("en", "too large"), ("zh-hans", "过大")])
async def test_a_declared_length_over_the_limit_is_refused_unread(limit, language, word):
    inner = Recorder()
    headers = [(b"content-length", b"5000"), (b"accept-language", language.encode())]
    sent, handed = await _run(BodyLimitMiddleware(inner), headers, [b"x" * 1000] * 5)
    assert not inner.called and handed == 0
    assert sent[0]["status"] == 413
    error = json.loads(sent[1]["body"])
    assert error["code"] == "request_too_large" and error["limit"] == LIMIT and word in error["detail"]


@pytest.mark.asyncio
async def test_a_streamed_body_is_refused_once_it_passes_the_limit(limit):
    inner = Recorder()
    sent, handed = await _run(BodyLimitMiddleware(inner), [], [b"x" * 400] * 10)
    assert not inner.called and handed == 3  # 1200 bytes > 1000: the other 7 chunks are never asked for
    assert sent[0]["status"] == 413


@pytest.mark.asyncio
@pytest.mark.parametrize("headers", [[(b"content-length", b"1000")], []], ids=["declared", "streamed"])
async def test_a_body_within_the_limit_reaches_the_application_whole(limit, headers):
    inner = Recorder()
    sent, _handed = await _run(BodyLimitMiddleware(inner), headers, [b"x" * 500, b"y" * 500])
    assert inner.called and sent[0]["status"] == 200 and sent[1]["body"] == b"1000"
