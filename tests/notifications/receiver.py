"""A notification receiver on 127.0.0.1 for the tests: records every POST (path, headers, body) and answers with
the statuses it is given in turn (200 once they are used up); ``hang`` seconds of silence before answering."""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    """``with Receiver([500, 500]) as r: ... r.url, r.requests`` (each ``{"path", "headers", "body", "at"}``)."""

    def __init__(self, statuses: list[int] | None = None, hang: float = 0.0) -> None:
        self.statuses = list(statuses or [])
        self.hang = hang
        self.requests: list[dict] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length)
                owner.requests.append(
                    {"path": self.path, "headers": dict(self.headers), "body": body, "at": time.monotonic()}
                )
                if owner.hang:
                    time.sleep(owner.hang)
                status = owner.statuses.pop(0) if owner.statuses else 200
                try:
                    self.send_response(status)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")
                except (BrokenPipeError, ConnectionResetError):  # the sender gave up (its timeout)
                    pass

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
