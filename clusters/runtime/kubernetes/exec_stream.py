"""Interactive exec into a Pod's container: ``pods/exec`` over a websocket (``kubernetes.stream``, the channel
protocol), as an :class:`~clusters.runtime.base.ExecStream`.

Without a command, the shell is bash, else sh (:data:`SHELLS`); it gets a UTF-8 locale when the container sets
none, so CJK file names and input work as on the local runtime. A missing shell still fails as "executable file
not found", and the next one is tried; none found is RuntimeFailure(:data:`NO_SHELL`, ``not_found``).
"""

from __future__ import annotations

import json
import time
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.stream import stream as k8s_stream

from clusters.runtime.base import PodNotFound, RuntimeFailure
from clusters.runtime.kubernetes.api import KubeApi
from clusters.runtime.kubernetes.client import timeouts, translate
from clusters.runtime.kubernetes.parse import MAIN

SHELLS = ("bash", "sh")
NO_SHELL = "no shell found (tried bash, sh)"
UTF8_LOCALE = 'export LANG="${LANG:-C.UTF-8}" LC_CTYPE="${LC_CTYPE:-C.UTF-8}"; exec '


def shell_argv(shell: str) -> list[str]:
    """``bash`` -> ``["bash", "-c", 'export LANG="${LANG:-C.UTF-8}" ...; exec bash']``."""
    return [shell, "-c", UTF8_LOCALE + shell]


class KubeExecStream:
    """ExecStream over ``kubernetes.stream`` (websocket, channel protocol). Bytes in, bytes out."""

    def __init__(self, ws: Any, command: list[str]) -> None:
        self._ws = ws
        self.command = command
        self.exit_code: int | None = None
        self._pending = b""

    def _collect(self) -> bytes:
        out = b""
        for channel in (1, 2):
            data = self._ws.read_channel(channel)
            if data:
                out += data if isinstance(data, bytes) else data.encode()
        return out

    def write(self, data: bytes) -> None:
        if not self._ws.is_open():
            raise RuntimeFailure("the shell has exited", reason="not_found")
        self._ws.write_stdin(data if isinstance(data, bytes) else data.encode())

    def read(self, timeout: float = 0.1) -> bytes | None:
        """Output bytes; ``b""`` at EOF (process exited and everything read); None when nothing arrived yet."""
        if self._pending:
            out, self._pending = self._pending, b""
            return out
        if self._ws.is_open():
            self._ws.update(timeout=timeout)
        out = self._collect()
        if out:
            return out
        if not self._ws.is_open():
            self._set_exit()
            return b""
        return None

    def _set_exit(self) -> None:
        if self.exit_code is None:
            try:
                self.exit_code = self._ws.returncode
            except Exception:
                self.exit_code = -1

    def resize(self, rows: int, cols: int) -> None:
        if self._ws.is_open():
            self._ws.write_channel(4, json.dumps({"Width": int(cols), "Height": int(rows)}))

    def close(self) -> None:
        try:
            if self._ws.is_open():
                self._ws.write_stdin(b"\x04")
        except Exception:
            pass
        self._ws.close()
        self._set_exit()


def open_exec(kube: KubeApi, namespace: str, pod: str, command: list[str], tty: bool = True, container: str = MAIN):
    """The exec websocket of ``command`` in ``container``. Raises PodNotFound (404), RuntimeFailure ``invalid``
    (the container has not started), ``forbidden`` (RBAC), else ``client.translate``'s."""
    try:
        return k8s_stream(
            kube.core.connect_get_namespaced_pod_exec,
            pod,
            namespace,
            container=container or MAIN,
            command=command,
            stdin=True,
            stdout=True,
            stderr=not tty,
            tty=tty,
            binary=True,
            _preload_content=False,
            _request_timeout=timeouts(),
        )
    except ApiException as exc:
        text = str(exc.reason or "")
        if exc.status == 0 and "Handshake status 404" in text:
            raise PodNotFound(f"pod {pod} not found") from None
        if exc.status == 0 and "Handshake status 400" in text:
            raise RuntimeFailure(f"pod {pod} is not running (its main container has not started)", "invalid") from None
        if exc.status == 0 and "Handshake status 403" in text:
            raise RuntimeFailure(f"forbidden: exec into pod {pod} (create/get pods/exec)", "forbidden") from None
        raise translate(exc, f"pod {pod}", kube.server) from None


def exec_in(
    kube: KubeApi, namespace: str, pod: str, command: list[str] | None = None, container: str = MAIN
) -> KubeExecStream:
    """Interactive TTY in ``main``: ``command`` if given, else bash, then sh; RuntimeFailure(NO_SHELL) when
    neither exists. Raises PodNotFound when the pod is gone."""
    # Preflight with the usual timeouts (the websocket handshake itself has none): a gone Pod, a Pod that is
    # not running or an unreachable API server fail fast and clearly here.
    obj = kube.read_json(kube.core.read_namespaced_pod, pod, namespace, what=f"pod {pod}")
    if (obj.get("status") or {}).get("phase") != "Running":
        raise RuntimeFailure(f"pod {pod} is not running (phase {obj.get('status', {}).get('phase')})", "invalid")
    if command:
        return KubeExecStream(open_exec(kube, namespace, pod, list(command), container=container), list(command))
    for shell in SHELLS:
        ws = open_exec(kube, namespace, pod, shell_argv(shell), container=container)
        if _shell_missing(ws):
            ws.close()
            continue
        return KubeExecStream(ws, [shell])
    raise RuntimeFailure(NO_SHELL, reason="not_found")


def _shell_missing(ws: Any) -> bool:
    """Within 1.5 s of opening: True when the exec failed because the shell does not exist (the next one is
    tried); False when it runs (output, or still silent). Raises RuntimeFailure for any other failure."""
    deadline = time.monotonic() + 1.5
    while time.monotonic() < deadline:
        ws.update(timeout=0.1)
        if ws.peek_channel(3):
            err = ws.read_channel(3)
            text = err.decode(errors="replace") if isinstance(err, bytes) else str(err)
            if '"Success"' in text:
                return False
            if "not found" not in text and "no such file" not in text.lower():
                ws.close()
                raise RuntimeFailure(f"exec failed: {_status_message(text)}", reason="internal")
            return True
        if ws.peek_channel(1) or ws.peek_channel(2) or not ws.is_open():
            return False
    return False


def _status_message(text: str) -> str:
    try:
        return str(json.loads(text).get("message", text))[:300]
    except ValueError:
        return text[:300]
