"""The Pod subresources ``log`` and ``exec`` of the fake Kubernetes API server (:class:`PodIO`, a mixin of
:class:`tests.fake_k8s.server.FakeKubernetes`). ``log`` serves the text set with ``set_log`` (``previous``,
``tailLines``, chunked). ``exec`` speaks the websocket channel protocol (subprotocols from ``exec_protocols``:
stdin 0, stdout 1, stderr 2, error/status 3, resize 4), records every session in ``exec_sessions``, answers
``echo``/``true``/``false`` at once, refuses programs that are not among the Pod's shells like the container
runtime would, and runs a shell that echoes its input, expands ``$VAR`` from the ``main`` container's env in
``echo``, reports other commands as not found and ends with ``exit [code]``."""

from __future__ import annotations

import json
import re

from aiohttp import WSMsgType, web

from tests.fake_k8s.wire import status_response

EXEC_BUILTINS = ("echo", "env", "true", "false")


def exit_status(code: int) -> dict:
    """The status (channel 3) that ends an exec session with exit ``code``."""
    if code == 0:
        return {"metadata": {}, "status": "Success"}
    return {
        "metadata": {},
        "status": "Failure",
        "message": f"command terminated with non-zero exit code: exit status {code}",
        "reason": "NonZeroExitCode",
        "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]},
    }


def missing_executable_status(program: str) -> dict:
    """The status (channel 3) of a container runtime that cannot find ``program``."""
    msg = (
        "OCI runtime exec failed: exec failed: unable to start container process: "
        f'exec: "{program}": executable file not found in $PATH: unknown'
    )
    return {
        "metadata": {},
        "status": "Failure",
        "message": msg,
        "reason": "InternalError",
        "details": {"causes": [{"message": msg}]},
        "code": 500,
    }


def main_env(pod: dict, name: str) -> dict[str, str]:
    """The ``main`` container's env of ``pod`` plus ``POD_NAME``."""
    env = {
        c["name"]: c.get("value", "")
        for c in next((c.get("env") or [] for c in pod["spec"].get("containers", []) if c.get("name") == "main"), [])
    }
    env["POD_NAME"] = name
    return env


class ExecChannels:
    """One exec websocket: each frame's leading byte names its channel."""

    def __init__(self, ws: web.WebSocketResponse) -> None:
        self.ws = ws

    async def send(self, channel: int, data: bytes) -> None:
        await self.ws.send_bytes(bytes([channel]) + data)

    async def finish(self, code: int) -> None:
        await self.send(3, json.dumps(exit_status(code)).encode())
        await self.ws.close()


async def run_shell_line(io: ExecChannels, program: str, env: dict[str, str], line: bytes) -> bool:
    """Echo one input line and run it; True when it was ``exit`` (the session is finished)."""
    text = line.decode(errors="replace").strip()
    await io.send(1, line + b"\r\n")
    if text.startswith("exit"):
        parts = text.split()
        await io.finish(int(parts[1]) if len(parts) > 1 else 0)
        return True
    if text.startswith("echo "):
        out = " ".join(env.get(w[1:], "") if w.startswith("$") else w for w in text[5:].split())
        await io.send(1, out.encode() + b"\r\n")
    elif text:
        await io.send(2, f"{program}: {text.split()[0]}: command not found\r\n".encode())
    await io.send(1, f"{program}$ ".encode())
    return False


async def run_shell(io: ExecChannels, session: dict, program: str, env: dict[str, str]) -> None:
    """The interactive shell: prompt, then stdin lines until ``exit`` or the client goes; resizes recorded."""
    await io.send(1, f"{program}$ ".encode())
    buf = b""
    async for msg in io.ws:
        if msg.type not in (WSMsgType.BINARY, WSMsgType.TEXT):
            break
        data = msg.data if isinstance(msg.data, bytes) else msg.data.encode()
        channel, payload = data[0], data[1:]
        if channel == 4:
            session["resizes"].append(json.loads(payload))
            continue
        if channel != 0:
            continue
        session["input"] += payload
        buf += payload
        while b"\n" in buf or b"\r" in buf:
            line, buf = re.split(rb"[\r\n]", buf, maxsplit=1)
            if await run_shell_line(io, program, env, line):
                return


class PodIO:
    """``pods/log`` and ``pods/exec``."""

    logs: dict[tuple[str, str], dict[str, str]]
    shells: dict[tuple[str, str], tuple[str, ...]]
    exec_sessions: list[dict]
    exec_protocols: tuple[str, ...]
    denied: set[tuple[str, str]]

    async def _log(self, request: web.Request, namespace: str, name: str) -> web.StreamResponse:
        pod = self.get("pods", namespace, name)
        if pod is None:
            return status_response(404, "NotFound", f'pods "{name}" not found')
        container = request.query.get("container", "main")
        if container != "main":
            return status_response(400, "BadRequest", f"container {container} is not valid for pod {name}")
        entry = self.logs.get((namespace, name), {})
        if request.query.get("previous") == "true":
            if "previous" not in entry:
                return status_response(
                    400, "BadRequest", f'previous terminated container "main" in pod "{name}" not found'
                )
            text = entry["previous"]
        else:
            text = entry.get("current", "")
        tail = request.query.get("tailLines")
        if tail is not None:
            lines = text.splitlines(keepends=True)
            text = "".join(lines[-int(tail) :]) if int(tail) > 0 else ""
        resp = web.StreamResponse(headers={"Content-Type": "text/plain"})
        await resp.prepare(request)
        data = text.encode()
        for i in range(0, len(data), 65536):
            await resp.write(data[i : i + 65536])
        return resp

    def _exec_refusal(self, pod: dict | None, name: str) -> web.Response | None:
        """The error answer when an exec into ``pod`` cannot start, else None."""
        if pod is None:
            return status_response(404, "NotFound", f'pods "{name}" not found')
        if pod.get("status", {}).get("phase") != "Running":
            return status_response(400, "BadRequest", f'container "main" in pod "{name}" is waiting to start')
        if ("create", "pods/exec") in self.denied:
            return status_response(403, "Forbidden", "pods/exec is forbidden")
        return None

    async def _exec(self, request: web.Request, namespace: str, name: str) -> web.StreamResponse:
        pod = self.get("pods", namespace, name)
        command = request.query.getall("command", [])
        refusal = self._exec_refusal(pod, name)
        if refusal is not None:
            return refusal
        ws = web.WebSocketResponse(protocols=self.exec_protocols)
        await ws.prepare(request)
        session = {"pod": name, "command": command, "protocol": ws.ws_protocol, "resizes": [], "input": b""}
        self.exec_sessions.append(session)
        io = ExecChannels(ws)
        shells = self.shells.get((namespace, name), ("bash", "sh"))
        program = command[0] if command else ""
        if program not in shells and program not in EXEC_BUILTINS:
            await io.send(3, json.dumps(missing_executable_status(program)).encode())
            await ws.close()
            return ws
        if program == "echo":
            await io.send(1, (" ".join(command[1:]) + "\n").encode())
            await io.finish(0)
            return ws
        if program in ("true", "false"):
            await io.finish(0 if program == "true" else 1)
            return ws
        await run_shell(io, session, program, main_env(pod, name))
        return ws
