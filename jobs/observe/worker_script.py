"""Run a standard-library Python script inside a running Worker through the runtime's exec (``pods/exec`` on
Kubernetes) and read its one result line: the output check of Run check 5 (``jobs.explain.output_probe``), the
checkpoint listing (``jobs.observe.checkpoints``) and the resolved config (``jobs.observe.resolved_config``) use it
where the console cannot read the storage itself. :func:`first_answer` asks the running Pods of some Tasks in turn.

Bounded: at most ``max_output`` bytes are read and ``timeout`` seconds waited.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator

from clusters.runtime.base import Runtime, RuntimeFailure
from clusters.runtime.registry import runtime_for

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


def running_pods(tasks: Iterable) -> Iterator[tuple]:
    """``(task, pod)`` for each Running Pod of ``tasks`` (Task rows with their cluster loaded): the Header's Task
    first, each Task's Pods by ordinal. Lazy: one query per Task reached."""
    for task in sorted(tasks, key=lambda t: not t.head):
        for pod in task.pods.filter(phase="Running").order_by("ordinal"):
            yield task, pod


def first_answer(
    pods: Iterable[tuple],
    argv: list[str],
    marker: str,
    decode: Callable[[str], dict | None],
    *,
    log: logging.Logger,
    what: str,
    timeout: float = TIMEOUT,
    max_output: int = MAX_OUTPUT,
) -> dict | None:
    """:func:`run_in_worker`'s answer from the first of ``pods`` (``(task, pod)`` pairs, e.g. :func:`running_pods`)
    that gives one; a Pod that does not (exec refused, no result, no answer within ``timeout`` s) is logged on
    ``log`` as ``<what> in <namespace>/<pod>: <why>`` and the next is asked. None when none answered."""
    for task, pod in pods:
        try:
            return run_in_worker(
                runtime_for(task.cluster), task.namespace, pod.name, argv, marker, decode,
                timeout=timeout, max_output=max_output,
            )  # fmt: skip
        except (RuntimeFailure, TimeoutError) as exc:
            log.info("%s in %s/%s: %s", what, task.namespace, pod.name, exc)
    return None
