"""Diagnosis rule: RLinf waits for more (or fewer) nodes than the job has Workers.

RLinf's ``Cluster`` waits, with no timeout, until Ray has ``cluster.num_nodes`` nodes (rlinf.md 3 and 7: ``Waiting for
N nodes to be ready, currently k nodes available.``). Each Worker is one Ray node (seed 01), so when ``N`` differs
from the total of the roles' replicas the cluster can never form as RLinf expects, whatever the network does. That
is said first, and the generic "Ray sees only part of the nodes" finding, which suspects the network, is not given
for the same wait.

``N`` is the attached RLinf config's ``cluster.num_nodes`` when there is one, else the ``N`` of RLinf's own waiting
line in a Worker's log. ``jobs.explain.diagnosis`` imports this module (never the other way) and registers
:data:`TEXT` / :data:`DETAIL` (English msgids; their Chinese is in the zh_Hans catalog of ``jobs``).
"""

from __future__ import annotations

from django.utils.translation import gettext_noop

from jobs.jobspec.rlinf import num_nodes_of

CODE = "rlinf_num_nodes"
TEXT = (
    gettext_noop("RLinf waits for a different number of nodes than the job has Workers"),
    gettext_noop("cluster.num_nodes of the RLinf config, or the roles' replicas; not the network"),
    gettext_noop(
        "Make cluster.num_nodes equal to the total of the roles' replicas (each Worker is one Ray node), or change"
        " the replicas; RLinf waits without a timeout until Ray has that many nodes."
    ),
)
DETAIL = gettext_noop("RLinf waits for {n} nodes; this job has {workers} Workers.")


def wanted_nodes(job, waiting: list[tuple[int, int]]) -> int | None:
    """The node count RLinf waits for: the attached config's ``cluster.num_nodes``, else the largest ``N`` of the
    Workers' ``(N, k)`` RLinf waiting lines; None when neither is known."""
    if job.rlinf_config:
        n = num_nodes_of(job.rlinf_config)
        if n is not None:
            return n
    return max((n for n, _k in waiting), default=None)


def mismatch(job, workers: int, waiting: list[tuple[int, int]]) -> dict[str, int] | None:
    """``{"n": wanted, "workers": workers}`` when RLinf's node count differs from the job's ``workers`` (the total
    of its Tasks' replicas), else None."""
    n = wanted_nodes(job, waiting)
    if n is None or workers == 0 or n == workers:
        return None
    return {"n": n, "workers": workers}
