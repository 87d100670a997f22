"""Close a deactivated user's WebTerminal sessions at once.

Every open terminal consumer joins the Channels group :func:`group_name` of its user; the receiver of
``accounts.signals.user_deactivated`` sends ``{"type": "account.deactivated"}`` to that group, and each consumer
closes with 4401 ``account disabled`` (the same code its periodic re-check would use 30 s later). Works across
web processes with the Redis channel layer. A shell parked for a reconnect cannot be resumed by an inactive user
and ends when its grace period does.
"""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.dispatch import receiver

from accounts.signals import user_deactivated

logger = logging.getLogger("rlark.terminal")
MESSAGE = "account.deactivated"
REASON = "account disabled: please log in again"


def group_name(user_id: int) -> str:
    """The Channels group of one user's terminal consumers."""
    return f"terminal-user-{int(user_id)}"


@receiver(user_deactivated, dispatch_uid="terminal-close-sessions")
def close_terminal_sessions(sender, user, **kwargs) -> None:
    layer = get_channel_layer()
    if layer is None or getattr(user, "pk", None) is None:
        return
    async_to_sync(layer.group_send)(group_name(user.pk), {"type": MESSAGE})
    logger.info("closing terminal sessions of deactivated user %s", user.username)
