"""Per-cluster API clients for the official ``kubernetes`` package, and error translation.

- One ``ApiClient`` per cluster, built from the decrypted kubeconfig with
  ``kubernetes.config.new_client_from_config_dict`` (or the in-cluster service account); the library's global
  default configuration is never touched, so many clusters with different credentials coexist.
- urllib3 retries only what the real API server does to a pooled keep-alive connection (closes it: ``Connection
  aborted``), once, with :class:`StaleConnectionRetry`; timeouts and refused connections are never retried, so a dead
  cluster answers fast and never stalls the sync of the others (responses read with ``_preload_content=False``
  are drained before their connection is pooled, ``api.finish``); every call
  gets an explicit ``(connect, read)`` timeout (settings ``RLARK_K8S_CONNECT_TIMEOUT`` / ``RLARK_K8S_READ_TIMEOUT``,
  seconds, default 3 / 15).
- :func:`translate` maps every failure to ``RuntimeFailure`` with a reason and a message that never contains
  credentials (only the API server address and the server's own error text).
"""

from __future__ import annotations

import hashlib
import threading
from typing import Any

import yaml
from django.conf import settings
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import ProtocolError
from urllib3.util.retry import Retry

from clusters.runtime.base import PodNotFound, RuntimeFailure


class StaleConnectionRetry(Retry):
    """One retry of a request whose pooled connection the server had already closed (urllib3 ``ProtocolError``:
    ``Connection aborted`` / ``reset``), for every method: each call the console makes is idempotent (server-side
    apply, scale, delete, get/list). Anything else (timeouts, refused or failed connects, HTTP statuses) is not a
    read error here, so it exhausts ``other``/``connect`` at once and fails as before."""

    def _is_read_error(self, err: Exception) -> bool:
        return isinstance(err, ProtocolError)


def retries() -> Retry:
    return StaleConnectionRetry(
        total=1, connect=0, read=1, redirect=0, status=0, other=0, allowed_methods=None, raise_on_status=False
    )


_CACHE: dict[tuple, k8s.ApiClient] = {}
_LOCK = threading.Lock()


def timeouts() -> tuple[float, float]:
    """``(connect, read)`` seconds for ordinary API calls."""
    return (
        float(settings.RLARK_K8S_CONNECT_TIMEOUT),
        float(settings.RLARK_K8S_READ_TIMEOUT),
    )


def _fingerprint(cluster: Any) -> tuple:
    secret = cluster.kubeconfig or ""
    digest = hashlib.sha256(secret.encode()).hexdigest()
    return (getattr(cluster, "pk", None) or cluster.name, bool(cluster.in_cluster), digest)


def build_api_client(cluster: Any) -> k8s.ApiClient:
    """A fresh ApiClient for ``cluster`` (``.kubeconfig`` plain text YAML/JSON, ``.in_cluster``).

    Raises RuntimeFailure(reason="invalid") for a kubeconfig that cannot be parsed or has no usable context."""
    cfg = k8s.Configuration()
    cfg.retries = retries()
    try:
        if cluster.in_cluster:
            k8s_config.load_incluster_config(client_configuration=cfg)
            api = k8s.ApiClient(cfg)
        else:
            data = yaml.safe_load(cluster.kubeconfig or "")
            if not isinstance(data, dict):
                raise RuntimeFailure("the kubeconfig is not a YAML/JSON mapping", reason="invalid")
            api = k8s_config.new_client_from_config_dict(data, persist_config=False, client_configuration=cfg)
            if _static_token(data):
                # The library re-applies the whole kubeconfig before every request to refresh the token, and its
                # ``host`` setter reads the proxy environment each time (~0.4 ms a call, a fifth of a log read
                # on loopback). A static token never changes: it is set once, above.
                api.configuration.refresh_api_key_hook = None
    except RuntimeFailure:
        raise
    except k8s_config.ConfigException as exc:
        raise RuntimeFailure(f"invalid kubeconfig: {_first_line(str(exc))}", reason="invalid") from None
    except yaml.YAMLError:
        raise RuntimeFailure("invalid kubeconfig: not valid YAML", reason="invalid") from None
    except Exception as exc:  # bad base64 cert data, missing files ...
        raise RuntimeFailure(f"invalid kubeconfig: {type(exc).__name__}", reason="invalid") from None
    api.configuration.retries = retries()
    api.user_agent = "rlark-console"
    return api


def _static_token(data: dict) -> bool:
    """The current context's user authenticates with a literal ``token`` (no exec plugin, auth provider, token
    file or client certificate that could change it)."""
    contexts = {c.get("name"): c.get("context") or {} for c in data.get("contexts") or [] if isinstance(c, dict)}
    users = {u.get("name"): u.get("user") or {} for u in data.get("users") or [] if isinstance(u, dict)}
    user = users.get(contexts.get(data.get("current-context"), {}).get("user"))
    if not isinstance(user, dict) or not isinstance(user.get("token"), str):
        return False
    return not any(user.get(key) for key in ("exec", "auth-provider", "tokenFile", "username"))


def api_client_for(cluster: Any) -> k8s.ApiClient:
    """The cached ApiClient of ``cluster``; rebuilt when its credentials change."""
    key = _fingerprint(cluster)
    with _LOCK:
        api = _CACHE.get(key)
        if api is None:
            for old in [k for k in _CACHE if k[0] == key[0]]:
                _CACHE.pop(old, None)
            api = _CACHE[key] = build_api_client(cluster)
        return api


def server_url(api: k8s.ApiClient) -> str:
    return str(api.configuration.host or "")


def _first_line(text: str) -> str:
    return (text or "").strip().splitlines()[0][:300] if (text or "").strip() else ""


def api_message(exc: ApiException) -> str:
    """The ``message`` of a Kubernetes Status body, else the HTTP reason."""
    import json

    try:
        body = json.loads(exc.body or "")
        if isinstance(body, dict) and body.get("message"):
            return str(body["message"])[:500]
    except (TypeError, ValueError):
        pass
    return str(exc.reason or "")[:300]


def _is_timeout(exc: BaseException) -> bool:
    text = f"{type(exc).__name__} {exc}".lower()
    return "timeout" in text or "timed out" in text


def translate(exc: BaseException, what: str = "", server: str = "") -> RuntimeFailure:
    """Map a client/transport exception to RuntimeFailure with a clear, credential-free message."""
    where = f" at {server}" if server else ""
    if isinstance(exc, RuntimeFailure):
        return exc
    if isinstance(exc, ApiException):
        status = exc.status or 0
        msg = api_message(exc)
        if status == 0:
            kind = "timed out" if _is_timeout(exc) else "connection failed"
            return RuntimeFailure(f"cannot reach the Kubernetes API server{where}: {kind}", reason="unreachable")
        if status == 401:
            return RuntimeFailure(
                f"the Kubernetes API server{where} rejected the credentials (401 Unauthorized)", reason="unauthorized"
            )
        if status == 403:
            return RuntimeFailure(f"forbidden{f' ({what})' if what else ''}: {msg}", reason="forbidden")
        if status == 404:
            if what.startswith("pod "):
                return PodNotFound(f"{what} not found")
            return RuntimeFailure(f"{what or 'object'} not found: {msg}", reason="not_found")
        if status == 409:
            return RuntimeFailure(f"conflict{f' ({what})' if what else ''}: {msg}", reason="conflict")
        if status in (400, 415, 422):
            return RuntimeFailure(f"rejected by the Kubernetes API{f' ({what})' if what else ''}: {msg}", "invalid")
        return RuntimeFailure(f"Kubernetes API error {status}{where}: {msg}", reason="internal")
    # urllib3 / socket level: refused, reset, DNS, timeouts
    import urllib3.exceptions as u3

    if isinstance(exc, u3.HTTPError | OSError | ConnectionError):
        if _is_timeout(exc):
            return RuntimeFailure(f"cannot reach the Kubernetes API server{where}: timed out", reason="unreachable")
        text = str(exc).lower()
        kind = "connection refused" if "refused" in text else "connection failed"
        return RuntimeFailure(f"cannot reach the Kubernetes API server{where}: {kind}", reason="unreachable")
    return RuntimeFailure(f"Kubernetes client error{where}: {type(exc).__name__}", reason="internal")
