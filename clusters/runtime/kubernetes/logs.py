"""Container logs through ``pods/log``: whole (tail), incremental (a cursor, :mod:`.log_cursor`), streamed."""

from __future__ import annotations

import urllib.parse
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from clusters.runtime.base import LogChunk, RuntimeFailure
from clusters.runtime.kubernetes.api import KubeApi, abandon
from clusters.runtime.kubernetes.client import timeouts
from clusters.runtime.kubernetes.log_cursor import LOG_TS, after_timestamp, by_line_count, utc_seconds
from clusters.runtime.kubernetes.parse import MAIN, timestamp


def read_log(kube: KubeApi, namespace: str, pod: str, tail_lines: int | None = 1000, previous: bool = False) -> str:
    """The ``main`` container's log (its last ``tail_lines`` lines; the previous instance's with ``previous``).
    Raises RuntimeFailure(``not_found``) when there is no previous instance."""
    kwargs: dict[str, Any] = {"container": MAIN}
    if tail_lines is not None:
        kwargs["tail_lines"] = int(tail_lines)
    if previous:
        kwargs["previous"] = True
    try:
        resp = kube.call(
            kube.core.read_namespaced_pod_log, pod, namespace, what=f"pod {pod}", _preload_content=False, **kwargs
        )
    except RuntimeFailure as exc:
        if previous and exc.reason == "invalid" and "previous" in str(exc):
            raise RuntimeFailure(
                f"pod {pod} has no previous instance of its main container (it has not restarted)",
                reason="not_found",
            ) from None
        raise
    try:
        return resp.data.decode("utf-8", "replace")
    finally:
        resp.release_conn()


def read_log_from(kube: KubeApi, namespace: str, pod: str, cursor: str = "", limit_bytes: int = 4 << 20) -> LogChunk:
    """Incremental read through ``pods/log`` with ``timestamps=true``: the cursor ``T<RFC3339Nano>|<n>`` is the
    last line's timestamp and how many lines carried it; the next read asks ``sinceTime`` (whole seconds, as
    the API passes it on) and drops what was seen. A server that sends no timestamps gets a line-count
    cursor ``L<n>`` instead. ``limitBytes`` bounds every read; a cut last line waits for the next one."""
    since_ts, seen_at = "", 0
    if cursor.startswith("T") and "|" in cursor:
        since_ts, _, count = cursor[1:].rpartition("|")
        seen_at = int(count) if count.isdigit() else 0
    kwargs: dict[str, Any] = {"container": MAIN, "timestamps": True, "limit_bytes": int(limit_bytes)}
    if cursor.startswith("L"):
        kwargs.pop("limit_bytes")  # line mode: the whole log, then skip what was seen
    if since_ts:
        resp = kube.call(_log_since, kube, pod, namespace, since_ts, kwargs, what=f"pod {pod}")
    else:
        resp = kube.call(
            kube.core.read_namespaced_pod_log, pod, namespace, what=f"pod {pod}", _preload_content=False, **kwargs
        )
    try:
        data = resp.data.decode("utf-8", "replace")
    finally:
        resp.release_conn()
    if data and LOG_TS.match(data) is None:  # no timestamps from this server: count lines
        return by_line_count(data, cursor, limit_bytes)
    return after_timestamp(data, since_ts, seen_at, limit_bytes, cursor)


def _log_since(kube: KubeApi, pod: str, namespace: str, since_ts: str, kwargs: dict[str, Any], _request_timeout=None):
    """``GET pods/<pod>/log?sinceTime=<whole seconds>``: the generated client has no ``since_time`` argument,
    so the serialized request gets the query parameter added (else ``sinceSeconds`` with a margin)."""
    since = utc_seconds(since_ts)
    try:
        method, url, *rest = kube.core._read_namespaced_pod_log_serialize(
            name=pod,
            namespace=namespace,
            follow=None,
            insecure_skip_tls_verify_backend=None,
            pretty=None,
            previous=None,
            since_seconds=None,
            stream=None,
            tail_lines=None,
            _request_auth=None,
            _content_type=None,
            _headers=None,
            _host_index=0,
            **kwargs,
        )
    except (AttributeError, TypeError):  # another client generation: a relative start, deduplicated anyway
        start = timestamp(since_ts)
        age = (datetime.now(start.tzinfo) - start).total_seconds() if start else 0
        return kube.core.read_namespaced_pod_log(
            pod,
            namespace,
            since_seconds=max(1, int(age) + 60),
            _preload_content=False,
            _request_timeout=_request_timeout,
            **kwargs,
        )
    url += ("&" if "?" in url else "?") + urllib.parse.urlencode({"sinceTime": since})
    return kube.api._call_with_legacy_options(
        (method, url, *rest), {"200": "str"}, False, False, _request_timeout, True
    )


def stream_log(
    kube: KubeApi, namespace: str, pod: str, previous: bool = False, container: str = MAIN, timestamps: bool = False
) -> Iterator[bytes]:
    """The container's log through ``pods/log``; ``timestamps``: every line prefixed with the kubelet's RFC 3339
    time of it (the Logs tab's timestamps; ``terminal.services.logs`` splits the prefix off)."""
    kwargs: dict[str, Any] = {"container": container or MAIN}
    if previous:
        kwargs["previous"] = True
    if timestamps:
        kwargs["timestamps"] = True
    resp = kube.call(
        kube.core.read_namespaced_pod_log,
        pod,
        namespace,
        what=f"pod {pod}",
        _preload_content=False,
        timeout=(timeouts()[0], 300),
        **kwargs,
    )
    try:
        yield from resp.stream(65536, decode_content=True)
    finally:
        abandon(resp)
