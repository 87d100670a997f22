"""Websocket consumers: live job logs (:mod:`.logs_tab`) and the WebTerminal (:mod:`.shell`, with its file
transfer in :mod:`.file_transfer` and its reconnect grace in :mod:`.kept_shells`).

Both authenticate the session (``AuthMiddlewareStack``; scheme, host and port of the Origin are checked by
``rlark_console.origin.OriginValidator`` in ``launcher.asgi``), authorise the job through
``jobs.policy`` (via :mod:`terminal.services.access`) on connect, i.e. on every reconnect,
and re-check periodically (:mod:`.base`, which also closes every refusal with a reason the page shows).
"""

from terminal.consumers.base import UnknownPathConsumer
from terminal.consumers.logs_tab import LogsConsumer
from terminal.consumers.shell import TerminalConsumer

__all__ = ["LogsConsumer", "TerminalConsumer", "UnknownPathConsumer"]
