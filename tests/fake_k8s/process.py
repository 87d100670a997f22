"""The fake Kubernetes API server in a process of its own, for benchmarks that time the console's side.

A real API server never shares the console's interpreter. In the same process, the fake's JSON encoding of a
3,000-Pod list holds the same GIL as the console's sync, so a benchmark times both together. Here the server runs
in a child process (``spawn``, so no Django state or database connection is inherited), and :class:`FakeProcess`
forwards each call to it over a pipe: ``fake.put(...)``, ``fake.set_log(...)``, ``fake.kubeconfig()`` and
attribute reads such as ``fake.request_count`` behave as on :class:`tests.fake_k8s.server.FakeKubernetes`.
Arguments and results must be picklable. The script that starts one must guard its top level with
``if __name__ == "__main__"`` (the child imports it again, as ``spawn`` does). Each call waits at most ``timeout``
s (TimeoutError; RuntimeError when the child ended), and :meth:`FakeProcess.stop` ends the child.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.connection import Connection, wait
from typing import Any

from tests.fake_k8s.server import FakeKubernetes


def _serve(conn: Connection, kwargs: dict[str, Any]) -> None:
    """The child: one FakeKubernetes, started, answering ``(name, args, kwargs)`` until ``None``."""
    fake = FakeKubernetes(**kwargs).start()
    conn.send(("ok", fake.port))
    while (message := conn.recv()) is not None:
        name, args, call_kwargs = message  # args None: an attribute read
        try:
            value = getattr(fake, name)
            if args is None:
                conn.send(("callable", name) if callable(value) else ("ok", value))
                continue
            result = value(*args, **call_kwargs)
            conn.send(("ok", None if result is fake else result))
        except Exception as exc:  # noqa: BLE001 - handed back to the caller
            conn.send(("error", repr(exc)))
    fake.stop()


class FakeProcess:
    """A :class:`FakeKubernetes` running in a child process; ``start()`` it like the in-process one."""

    def __init__(self, timeout: float = 120, **kwargs: Any) -> None:
        self._kwargs = kwargs
        self._timeout = timeout
        self._conn: Connection | None = None
        self._child: multiprocessing.process.BaseProcess | None = None
        self.port = 0

    def start(self) -> FakeProcess:
        context = multiprocessing.get_context("spawn")
        self._conn, theirs = context.Pipe()
        self._child = context.Process(target=_serve, args=(theirs, self._kwargs), name="fake-k8s", daemon=True)
        self._child.start()
        self.port = self._answer()
        return self

    def _answer(self) -> Any:
        ready = wait([self._conn, self._child.sentinel], self._timeout)
        if self._conn not in ready:
            if self._child.sentinel in ready:
                raise RuntimeError(f"the fake API server process ended (exit code {self._child.exitcode})")
            raise TimeoutError(f"the fake API server process did not answer within {self._timeout} s")
        status, value = self._conn.recv()
        if status == "error":
            raise RuntimeError(f"fake API server: {value}")
        return (lambda *args, **kwargs: self._call(value, *args, **kwargs)) if status == "callable" else value

    def _call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        self._conn.send((name, args, kwargs))
        return self._answer()

    def __getattr__(self, name: str) -> Any:
        """A method of the child's fake (called there) or the current value of one of its attributes."""
        if name.startswith("_"):
            raise AttributeError(name)
        self._conn.send((name, None, None))
        return self._answer()

    def stop(self) -> None:
        """End the child (idempotent): asked first, killed after 10 s."""
        if self._child is None:
            return
        try:
            self._conn.send(None)
        except (BrokenPipeError, OSError):
            pass
        self._child.join(10)
        if self._child.is_alive():
            self._child.kill()
            self._child.join(5)
        self._child = None


def add_fake_option(parser) -> None:
    """The benchmarks' ``--fake process|thread`` option (an ``argparse.ArgumentParser``)."""
    parser.add_argument(
        "--fake",
        choices=("process", "thread"),
        default="process",
        help="the fake API server in a process of its own (as a real one is; default) or in a thread of this one, "
        "sharing the console's GIL",
    )


def start_fake(where: str, **kwargs: Any) -> FakeKubernetes | FakeProcess:
    """A started fake API server: in a child process (``where="process"``) or in a thread of this one."""
    return (FakeProcess if where == "process" else FakeKubernetes)(**kwargs).start()


def where_text(where: str) -> str:
    """How a benchmark's output says where the fake ran."""
    return "a process of its own" if where == "process" else "a thread of this process"
