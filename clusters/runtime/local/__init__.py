"""The embedded ``local`` runtime: every Worker Pod is a supervised local process group.

- :mod:`.launcher` starts one Worker in its own user+mount+PID+UTS namespace (``unshare``).
- :mod:`.scheduling` places Pods on the cluster's virtual nodes.
- :mod:`.supervisor` is the long-running owner of the processes (``manage.py local_supervisor``).
- :class:`LocalRuntime` (:mod:`.runtime`) is the client used by the control plane.
"""

from clusters.runtime.local.runtime import LocalExecStream, LocalRuntime

__all__ = ["LocalExecStream", "LocalRuntime"]
