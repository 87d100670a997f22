"""Who may run jobs on a local cluster at once (docs/security.md, "Local runtime").

A root console gives every local job a network namespace of its own (netns.py: job networks), so any number of
users share a local cluster. A console that cannot make one (not root, or ``RLARK_LOCAL_JOB_NETWORKS=0``) runs
every Worker on the host's loopback, where one job's ports are open to every other job's code: such a cluster is
**single-user**, and a job of a second user is refused while another user's job is active there
(``jobs.control.tenancy``).
"""

from __future__ import annotations

import os

from clusters.runtime.local import netns


def job_networks() -> bool:
    """Whether the local runtime gives each job a network of its own (the supervisor's rule, evaluated here)."""
    return os.environ.get("RLARK_LOCAL_JOB_NETWORKS", "1") != "0" and netns.available()[0]


def single_user() -> bool:
    """Local clusters are single-user on this console (the opposite of :func:`job_networks`)."""
    return not job_networks()
