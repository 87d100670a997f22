"""The audit log: one call records who did what; also written to the ``rlark.audit`` logger."""

from __future__ import annotations

import logging
from typing import Any

from accounts.models import AuditEvent
from rlark_console.clientaddr import request_address

logger = logging.getLogger("rlark.audit")


def record(actor, action: str, object_type: str = "", object_id: str = "", request=None, **detail: Any) -> AuditEvent:
    """Store an AuditEvent. ``detail`` must be plain JSON data and never hold secrets.

    ``actor`` is a User or None; ``request`` (optional) supplies the client address
    (``rlark_console.clientaddr.request_address``: forwarded headers only from trusted proxies).
    """
    remote = request_address(request) if request is not None else ""
    name = getattr(actor, "username", "") or ""
    event = AuditEvent.objects.create(
        actor=actor if getattr(actor, "pk", None) else None,
        actor_name=name,
        action=action,
        object_type=object_type,
        object_id=str(object_id),
        detail=detail,
        remote_addr=remote,
    )
    logger.info("%s %s %s:%s %s", name or "-", action, object_type, object_id, detail or "")
    return event
