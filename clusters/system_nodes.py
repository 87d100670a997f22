"""Which nodes are *system* (control-plane) nodes: the one source of truth.

Source: upstream-rlark 10.2 ("Business worker node ... not control-plane"). A node is a system node when any of
these labels says so:

- ``node-role.kubernetes.io/control-plane`` present (any value, usually ``""``),
- ``node-role.kubernetes.io/master`` present,
- ``kubernetes.io/role`` equal to ``master`` or ``control-plane``.

System nodes are hidden from the console's nodes list, the API's default listing, cluster totals and GPU sums,
and the job validator's selector matching and replica counts skip them. ``Node.system`` stores the result at
sync time so listings filter in the database; everything that only has labels calls :func:`is_system_node`.
Pure function: no Django imports, so ``jobs.jobspec`` (database-free) may use it.
"""

from __future__ import annotations

from collections.abc import Mapping

CONTROL_PLANE_LABELS = ("node-role.kubernetes.io/control-plane", "node-role.kubernetes.io/master")
ROLE_LABEL = "kubernetes.io/role"
CONTROL_PLANE_ROLES = ("master", "control-plane")


def show_system_nodes(user, params: Mapping[str, str]) -> bool:
    """The admins' "show system nodes" switch: ``?system=1`` (or ``true``) from a staff user; never for others."""
    return bool(getattr(user, "is_staff", False)) and str(params.get("system", "")).lower() in ("1", "true", "yes")


def is_system_node(labels: Mapping[str, str] | None) -> bool:
    """True for a control-plane node (rules in the module docstring); ``None``/``{}`` -> False."""
    labels = labels or {}
    return any(k in labels for k in CONTROL_PLANE_LABELS) or labels.get(ROLE_LABEL) in CONTROL_PLANE_ROLES
