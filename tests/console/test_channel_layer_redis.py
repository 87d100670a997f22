"""The Redis channel layer keeps an idle websocket's consumer alive (CI and docker-compose run on Redis).

channels_redis blocks on BZPOPMIN for up to ``brpop_timeout`` (5 s); redis-py 8 gives every socket read a 5 s
timeout by default, so without the settings' ``socket_timeout`` an idle consumer's ``receive`` raised
``redis.exceptions.TimeoutError`` and Channels closed the socket: the Logs tab reconnected every few seconds
and kept streaming after the user paused it.
"""

from __future__ import annotations

import asyncio

import pytest
from channels.layers import get_channel_layer
from django.conf import settings

pytestmark = pytest.mark.skipif(not settings.REDIS_URL, reason="REDIS_URL not set (the layer is in-memory)")


def test_an_idle_receive_outlasts_the_blocking_pop_and_still_gets_a_later_message():
    layer = get_channel_layer()
    assert type(layer).__name__ == "RedisChannelLayer"

    async def scenario() -> dict:
        channel = await layer.new_channel()
        waiter = asyncio.create_task(layer.receive(channel))
        await asyncio.sleep(layer.brpop_timeout * 2 + 1)  # idle past two blocking pops
        assert not waiter.done(), waiter.exception() if waiter.done() else None
        await layer.send(channel, {"type": "hello"})
        try:
            return await asyncio.wait_for(waiter, 10)
        finally:
            await layer.flush()
            await layer.close_pools()

    assert asyncio.run(scenario()) == {"type": "hello"}
