"""Which :class:`clusters.runtime.base.Runtime` serves a cluster, as seen by the terminal app.

Normally ``clusters.runtime.registry.get_runtime(cluster)`` (one implementation per
``Cluster.runtime``). :func:`use_runtime_factory` swaps in another factory; tests and the
self-contained demo server (``launcher.terminal_demo``) use it to run the Logs tab and the
WebTerminal against a real :class:`~terminal.demo_runtime.DirRuntime` (log files + PTY bash).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

from clusters.runtime.base import Runtime
from clusters.runtime.registry import get_runtime

_factory: Callable[[Any], Runtime] | None = None


def use_runtime_factory(factory: Callable[[Any], Runtime] | None) -> None:
    """Serve every cluster with ``factory(cluster)`` (``None`` restores the registry)."""
    global _factory
    _factory = factory


def runtime_for(cluster) -> Runtime:
    """The runtime for ``cluster`` (a ``clusters.models.Cluster``).

    Raises ``clusters.runtime.base.RuntimeFailure`` when the cluster cannot be served.
    """
    if _factory is not None:
        return _factory(cluster)

    return get_runtime(cluster)


def accepts(func: Callable, name: str) -> bool:
    """True when ``func`` takes a keyword argument ``name`` (optional runtime features)."""
    try:
        params = inspect.signature(func).parameters
    except (TypeError, ValueError):
        return False
    return name in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
