"""The containers of a Pod as the runtimes report them (for the Logs tab's and WebTerminal's container picker).

Kinds (Kubernetes terms): ``main`` (the Worker's container, always first), ``container`` (another regular container),
``sidecar`` (a native sidecar: an init container with ``restartPolicy: Always``, Kubernetes >= 1.28, e.g. the domain
network agent), ``init`` (a regular init container, runs to completion before ``main``) and ``ephemeral`` (added
later with ``kubectl debug``). The local runtime has only ``main``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

MAIN = "main"
KIND_ORDER = {"main": 0, "sidecar": 1, "container": 2, "init": 3, "ephemeral": 4}


@dataclasses.dataclass(frozen=True)
class ContainerInfo:
    """One container of a Pod: ``state`` ``waiting`` | ``running`` | ``terminated`` | ``unknown``."""

    name: str
    kind: str = "main"
    state: str = "unknown"
    restart_count: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "kind": self.kind, "state": self.state, "restarts": self.restart_count}


MAIN_ONLY: tuple[ContainerInfo, ...] = (ContainerInfo(MAIN, "main"),)


def _state(status: dict | None) -> str:
    state = (status or {}).get("state") or {}
    return next((k for k in ("running", "terminated", "waiting") if k in state), "unknown")


def from_pod(pod: dict) -> tuple[ContainerInfo, ...]:
    """The containers of a Kubernetes Pod object (``spec`` for names and kinds, ``status`` for state and restarts),
    ``main`` first, then sidecars, other containers, init and ephemeral containers in spec order."""
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}

    def statuses(key: str) -> dict[str, dict]:
        return {s.get("name", ""): s for s in status.get(key) or []}

    regular, init, ephemeral = (
        statuses("containerStatuses"),
        statuses("initContainerStatuses"),
        statuses("ephemeralContainerStatuses"),
    )
    out: list[ContainerInfo] = []

    def add(c: dict, kind: str, st: dict[str, dict]) -> None:
        name = c.get("name", "")
        if name:
            s = st.get(name)
            out.append(ContainerInfo(name, kind, _state(s), int((s or {}).get("restartCount") or 0)))

    for c in spec.get("containers") or []:
        add(c, "main" if c.get("name") == MAIN else "container", regular)
    for c in spec.get("initContainers") or []:
        add(c, "sidecar" if c.get("restartPolicy") == "Always" else "init", init)
    for c in spec.get("ephemeralContainers") or []:
        add(c, "ephemeral", ephemeral)
    order = {id(c): i for i, c in enumerate(out)}
    return tuple(sorted(out, key=lambda c: (KIND_ORDER.get(c.kind, 9), order[id(c)]))) or MAIN_ONLY
