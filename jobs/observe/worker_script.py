"""Run a standard-library Python script inside a running Worker through the runtime's exec (``pods/exec`` on
Kubernetes) and read its one result line: the output check of Run check 5 (``jobs.explain.output_probe``) and the
checkpoint listing (``jobs.observe.checkpoints``) use it where the console cannot read the storage itself.

Bounded: at most ``max_output`` bytes are read and ``timeout`` seconds waited.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from clusters.runtime.base import Runtime, RuntimeFailure

MAX_OUTPUT = 64 << 10  # bytes read from one exec
TIMEOUT = 30.0  # seconds one exec may take


def run_in_worker(
    runtime: Runtime,
    namespace: str,
    pod: str,
    argv: list[str],
    marker: str,
    decode: Callable[[str], dict | None],
    *,
    timeout: float = TIMEOUT,
    max_output: int = MAX_OUTPUT,
) -> dict:
    """``decode`` of what ``argv`` printed in ``pod`` once a line holding ``marker`` is complete (or the stream
    ended). Raises RuntimeFailure (exec refused, no result) or TimeoutError (nothing within ``timeout`` s)."""
    stream = runtime.exec(namespace, pod, argv)
    out = b""
    deadline = time.monotonic() + timeout
    try:
        while len(out) < max_output:
            if time.monotonic() > deadline:
                raise TimeoutError(f"no answer within {timeout:.0f} s")
            chunk = stream.read(timeout=0.5)
            if chunk == b"":
                break
            if chunk:
                out += chunk
                text = out.decode(errors="replace")
                if marker in text and text.rstrip(" ").endswith(("\n", "\r")):
                    break
    finally:
        stream.close()
    result = decode(out.decode(errors="replace"))
    if result is None:
        raise RuntimeFailure(f"no result from the script in {pod}: {out[-200:]!r}")
    return result
