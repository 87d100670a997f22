"""How the Kubernetes runtime calls the API server: one :class:`KubeApi` per cluster.

Everything goes through one ApiClient per cluster (``client.api_client_for``), every call carries a timeout
and every failure becomes ``RuntimeFailure`` (``client.translate``). Lists are read as raw JSON
(``_preload_content=False``) so a 1000-pod list costs one ``json.loads``, not a model tree per pod. A response
read unparsed is drained before its connection is pooled (:func:`finish`), or closed when it was read only partly
(:func:`abandon`).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubernetes import client as k8s

from clusters.runtime.base import RuntimeFailure
from clusters.runtime.kubernetes.client import api_client_for, server_url, timeouts, translate


def finish(resp: Any) -> None:
    """Read the rest of an unparsed (``_preload_content=False``) response, then pool its connection. A body left
    unread would be parsed as the next response's status line on that socket (urllib3 ``BadStatusLine``, seen
    against the real API server as "connection failed" on back-to-back applies)."""
    try:
        resp.drain_conn()
    finally:
        resp.release_conn()


def abandon(resp: Any) -> None:
    """A stream read partly (log follow, watch): close its connection rather than pool it half-read."""
    try:
        resp.close()
    finally:
        resp.release_conn()


class KubeApi:
    """The API handles of one cluster (``core``, ``apps``, the ApiClient ``api``, the server's address ``server``)
    and its namespace (``namespace``)."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.namespace = cluster.namespace
        self.api = api_client_for(cluster)
        self.core = k8s.CoreV1Api(self.api)
        self.apps = k8s.AppsV1Api(self.api)
        self.server = server_url(self.api)

    def call(self, fn: Callable, *args: Any, what: str = "", timeout: Any = None, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` with a ``(connect, read)`` timeout (``timeout``, else ``client.timeouts()``).
        Raises RuntimeFailure (``client.translate``; ``what`` names the object in the message)."""
        kwargs.setdefault("_request_timeout", timeout or timeouts())
        try:
            return fn(*args, **kwargs)
        except Exception as exc:
            raise translate(exc, what, self.server) from None

    def read_json(self, fn: Callable, *args: Any, what: str = "", **kwargs: Any) -> dict:
        """:meth:`call` with the response read as raw JSON. Raises RuntimeFailure (``internal`` for invalid JSON)."""
        resp = self.call(fn, *args, what=what, _preload_content=False, **kwargs)
        try:
            return json.loads(resp.data)
        except ValueError:
            raise RuntimeFailure(f"invalid JSON from the Kubernetes API ({what})", reason="internal") from None
        finally:
            resp.release_conn()

    def ignore_404(self, fn: Callable, *args: Any, what: str = "", **kwargs: Any) -> None:
        """Call ``fn`` for its effect (response not parsed); a 404 is fine (already gone)."""
        try:
            finish(self.call(fn, *args, what=what, _preload_content=False, **kwargs))
        except RuntimeFailure as exc:
            if exc.reason != "not_found":
                raise
