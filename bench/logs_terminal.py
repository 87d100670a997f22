"""Bench of the Logs tab's time-to-first-line and the WebTerminal's keystroke echo.

Starts the demo console (``launcher.terminal_demo``: daphne + the real ASGI app, a DirRuntime whose Pods are
log files and PTY shells) on loopback, logs in over HTTP like a browser, then measures:

- logs: time from "subscribe" to the first ``lines`` frame carrying the last 1000 lines of a Pod,
  over an open websocket (warm) and including the websocket handshake + authorisation (cold),
  against reading the same 1000 lines straight from the runtime, both in-process
  (``Runtime.read_log``: a file read, no network) and as a client would over plain HTTP
  (``GET /api/v1/jobs/<job>/logs/?tail=1000``, which calls ``read_log``); targets: ratio <= 1.5,
  time-to-first-line <= 2 s (peers 4.4);
- terminal: keystroke echo round trip over the websocket (browser -> daphne -> consumer -> PTY ->
  back) against the same round trip on a PTY directly; target p95 <= 50 ms on loopback.

Prints a table and writes ``test-artifacts/bench-logs-terminal.json``. Run: ``.venv/bin/python bench/logs_terminal.py``;
``--idle 630`` also leaves a terminal idle for 630 s (peers T2: a 10-minute idle shell stays open) and checks it
still answers.
"""

from __future__ import annotations

import http.cookiejar
import json
import re
import statistics
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import os  # noqa: E402

import websocket  # noqa: E402  (websocket-client)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_console.settings")
import django  # noqa: E402

django.setup()  # terminal.demo_runtime loads the models (the demo console itself is a subprocess)

from bench.quick import pct, quick_requested  # noqa: E402
from launcher.terminal_demo import NS, PASSWORD  # noqa: E402
from terminal.demo_runtime import DirPod, DirRuntime, PtyExec  # noqa: E402
from tests.terminal_support import DemoConsole  # noqa: E402

POD = "demo-actor-1"
QUICK = quick_requested()  # --quick / RLARK_BENCH_QUICK=1: fewer rounds and keys, same paths
ROUNDS = 6 if QUICK else 30
KEYS = 40 if QUICK else 200


def login(base: str) -> str:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(base + "/login/").read().decode()
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    data = urllib.parse.urlencode({"username": "alice", "password": PASSWORD, "csrfmiddlewaretoken": token})
    opener.open(urllib.request.Request(base + "/login/", data=data.encode(), headers={"Referer": base + "/login/"}))
    return next(c.value for c in jar if c.name == "sessionid")


def connect(base: str, path: str, session: str) -> websocket.WebSocket:
    url = base.replace("http://", "ws://") + path
    # skip_utf8_validation: websocket-client validates text frames in pure Python (~20 ms per 58 KB), which
    # browsers do natively; left on, the bench would measure the client library, not the console
    return websocket.create_connection(
        url, cookie=f"sessionid={session}", origin=base, timeout=10, skip_utf8_validation=True
    )


def recv_json(ws) -> dict:
    while True:
        opcode, data = ws.recv_data()
        if opcode == websocket.ABNF.OPCODE_TEXT:
            return json.loads(data)


def first_lines(ws) -> int:
    while True:
        msg = recv_json(ws)
        if msg["type"] == "lines":
            return len(msg["lines"])


def bench_logs(console: DemoConsole, session: str) -> dict:
    runtime = DirRuntime(console.runtime_root)
    runtime.pods[(NS, POD)] = DirPod(NS, POD, "demo", "demo-actor", 1, {}, "bench")
    direct = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        text = runtime.read_log(NS, POD, tail_lines=1000)
        direct.append(time.perf_counter() - t0)
    assert text.count("\n") == 1000
    sub = json.dumps({"type": "subscribe", "pods": [POD]})
    warm, cold, server = [], [], []
    ws = connect(console.url, "/ws/terminal/jobs/demo/logs/", session)
    recv_json(ws)  # targets
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        ws.send(sub)
        while True:  # time to the first line frame
            msg = recv_json(ws)
            if msg["type"] == "lines":
                break
        warm.append(time.perf_counter() - t0)
        assert len(msg["lines"]) == 1000, len(msg["lines"])
        while msg["type"] != "tick":
            msg = recv_json(ws)
        server.append(msg.get("readMs", 0.0) / 1000)
    ws.close()
    for _ in range(ROUNDS // 3):
        t0 = time.perf_counter()
        ws = connect(console.url, "/ws/terminal/jobs/demo/logs/", session)
        recv_json(ws)
        ws.send(sub)
        first_lines(ws)
        cold.append(time.perf_counter() - t0)
        ws.close()
    rest = []  # the same 1000 lines over plain HTTP straight from the runtime (REST API, read_log)
    url = f"{console.url}/api/v1/jobs/demo/logs/?pod={POD}&tail=1000"
    for _ in range(ROUNDS):
        req = urllib.request.Request(url, headers={"Cookie": f"sessionid={session}"})
        t0 = time.perf_counter()
        with urllib.request.urlopen(req, timeout=10) as resp:
            body = resp.read()
        rest.append(time.perf_counter() - t0)
    assert body.count(b"\n") == 1000, body[:200]
    d, w, c = statistics.median(direct), statistics.median(warm), statistics.median(cold)
    srv, r = statistics.median(server), statistics.median(rest)
    return {
        "lines": 1000,
        "direct_read_log_ms": round(d * 1000, 3),
        "server_read_render_ms": round(srv * 1000, 3),
        "ratio_server": round(srv / d, 2),
        "websocket_warm_ms": round(w * 1000, 3),
        "websocket_cold_ms": round(c * 1000, 3),
        "ratio_warm": round(w / d, 2),
        "ratio_cold": round(c / d, 2),
        "rest_http_ms": round(r * 1000, 3),
        "ratio_warm_vs_rest": round(w / r, 2),
        "ratio_cold_vs_rest": round(c / r, 2),
    }


def echo_times(write, read_until, keys: int) -> list[float]:
    times = []
    for i in range(keys):
        ch = "abcdefghij"[i % 10]
        t0 = time.perf_counter()
        write(ch.encode())
        read_until(ch.encode())
        times.append(time.perf_counter() - t0)
        if i % 50 == 49:
            write(b"\x15")  # Ctrl-U: clear the line
            read_until(b"")
    return times


def bench_echo(console: DemoConsole, session: str) -> dict:
    ws = connect(console.url, "/ws/terminal/jobs/demo/pods/demo-actor-0/", session)
    ws.send(json.dumps({"type": "resize", "rows": 40, "cols": 200}))
    buf = bytearray()

    def ws_read_until(needle: bytes) -> None:
        while needle not in buf:
            opcode, data = ws.recv_data()
            if opcode == websocket.ABNF.OPCODE_BINARY:
                buf.extend(data)
        buf.clear()

    ws_read_until(b"$ ")
    over_ws = echo_times(lambda b: ws.send_binary(b), ws_read_until, KEYS)
    ws.send_binary(b"\rexit\r")
    ws.close()

    pty = PtyExec(["bash", "--noprofile", "--norc", "-i"], "/tmp", {"PATH": "/usr/bin:/bin", "PS1": "$ "}, 40, 200)
    pbuf = bytearray()

    def pty_read_until(needle: bytes) -> None:
        while needle not in pbuf:
            data = pty.read(1.0)
            if data:
                pbuf.extend(data)
        pbuf.clear()

    pty_read_until(b"$ ")
    direct = echo_times(pty.write, pty_read_until, KEYS)
    pty.close()
    return {
        "keys": KEYS,
        "websocket_p50_ms": round(pct(over_ws, 50) * 1000, 3),
        "websocket_p95_ms": round(pct(over_ws, 95) * 1000, 3),
        "direct_pty_p50_ms": round(pct(direct, 50) * 1000, 3),
        "direct_pty_p95_ms": round(pct(direct, 95) * 1000, 3),
    }


def idle_check(console: DemoConsole, session: str, seconds: float) -> dict:
    """Leave a shell untouched for ``seconds`` (reading passively like an open tab), then type."""
    ws = connect(console.url, "/ws/terminal/jobs/demo/pods/demo-actor-0/", session)
    ws.settimeout(1)
    t0 = time.time()
    pings = 0
    closed = None
    while time.time() - t0 < seconds and closed is None:
        try:
            opcode, data = ws.recv_data(control_frame=True)
        except websocket.WebSocketTimeoutException:
            continue
        if opcode == websocket.ABNF.OPCODE_TEXT and b'"ping"' in data:
            pings += 1
        elif opcode == websocket.ABNF.OPCODE_CLOSE:
            closed = data
    answered = False
    if closed is None:
        ws.send_binary(b"echo alive-$((6*7))\r")
        buf = b""
        deadline = time.time() + 10
        while b"alive-42" not in buf and time.time() < deadline:
            try:
                opcode, data = ws.recv_data()
            except websocket.WebSocketTimeoutException:
                continue
            if opcode == websocket.ABNF.OPCODE_BINARY:
                buf += data
        answered = b"alive-42" in buf
    ws.close()
    return {"idle_seconds": round(time.time() - t0), "app_pings": pings, "closed": bool(closed), "answered": answered}


def main() -> int:
    idle = float(sys.argv[sys.argv.index("--idle") + 1]) if "--idle" in sys.argv else 0.0
    with tempfile.TemporaryDirectory(prefix="rlark-bench-") as tmp:
        console = DemoConsole(Path(tmp), interval=3600, lines=1000).start()
        try:
            session = login(console.url)
            logs = bench_logs(console, session)
            echo = bench_echo(console, session)
            idle_result = idle_check(console, session, idle) if idle else None
        finally:
            console.stop()
    result = {"logs": logs, "terminal": echo, "idle": idle_result}
    print("Logs time-to-first-line, 1000 lines (median)")
    print(f"  straight from the runtime (read_log)   {logs['direct_read_log_ms']:9.3f} ms")
    srv = logs["server_read_render_ms"]
    print(f"  server: read + ANSI render (in tick)   {srv:9.3f} ms  ratio {logs['ratio_server']}")
    print(f"  websocket, open socket (subscribe)     {logs['websocket_warm_ms']:9.3f} ms  ratio {logs['ratio_warm']}")
    print(f"  websocket incl. handshake + auth       {logs['websocket_cold_ms']:9.3f} ms  ratio {logs['ratio_cold']}")
    print(f"  HTTP GET straight from the runtime     {logs['rest_http_ms']:9.3f} ms  (REST /api/v1/jobs/../logs/)")
    warm_rest, cold_rest = logs["ratio_warm_vs_rest"], logs["ratio_cold_vs_rest"]
    print(f"  ratio websocket / HTTP: open socket {warm_rest}, incl. handshake {cold_rest}")
    print(f"Terminal keystroke echo ({echo['keys']} keys)")
    print(f"  websocket   p50 {echo['websocket_p50_ms']:8.3f} ms   p95 {echo['websocket_p95_ms']:8.3f} ms")
    print(f"  direct PTY  p50 {echo['direct_pty_p50_ms']:8.3f} ms   p95 {echo['direct_pty_p95_ms']:8.3f} ms")
    if idle_result:
        print(f"Idle terminal: {idle_result}")
    out = ROOT / "test-artifacts"
    out.mkdir(exist_ok=True)
    (out / "bench-logs-terminal.json").write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
