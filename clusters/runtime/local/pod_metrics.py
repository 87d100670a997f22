"""CPU and memory of local Workers, as ``metrics.k8s.io`` would report them.

A Worker's usage is the sum over every process of its PID namespace (``launcher.namespace_members``): CPU in
cores, averaged since the previous sample of that Pod (a first sample waits 0.3 s), memory as resident bytes.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable
from typing import Any

from clusters.runtime.local import launcher


def cpu_seconds(procs: Iterable[Any]) -> float:
    """User + system CPU seconds of ``procs`` (psutil processes; gone ones count 0)."""
    import psutil

    total = 0.0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            total += t.user + t.system
    return total


class CpuSampler:
    """The last CPU sample of each Pod (``samples``: pod key -> (monotonic time, CPU seconds))."""

    def __init__(self) -> None:
        self.samples: dict[str, tuple[float, float]] = {}

    def forget(self, pkey: str) -> None:
        self.samples.pop(pkey, None)

    def measure(self, pids: dict[str, tuple[str, int]]) -> dict[str, dict[str, float]]:
        """``{pod name: {"cpu": cores, "memory": bytes}}`` of the Workers ``pids`` (pod key -> (pod name, PID))."""
        import psutil

        out: dict[str, dict[str, float]] = {}
        samples: dict[str, tuple[float, float]] = {}
        members: dict[str, list[psutil.Process]] = {}
        for pkey, (_name, pid) in pids.items():
            procs = []
            for member in launcher.namespace_members(pid):
                with contextlib.suppress(psutil.Error):
                    procs.append(psutil.Process(member))
            members[pkey] = procs
        first = {k for k in members if k not in self.samples}
        if first:
            for k in first:
                self.samples[k] = (time.monotonic(), cpu_seconds(members[k]))
            time.sleep(0.3)
        for pkey, procs in members.items():
            t0, c0 = self.samples.get(pkey, (time.monotonic(), 0.0))
            t1, c1 = time.monotonic(), cpu_seconds(procs)
            samples[pkey] = (t1, c1)
            rss = 0
            for p in procs:
                with contextlib.suppress(psutil.Error):
                    rss += p.memory_info().rss
            out[pids[pkey][0]] = {
                "cpu": max(0.0, (c1 - c0) / max(t1 - t0, 1e-3)),
                "memory": float(rss),
            }
        self.samples.update(samples)
        return out
