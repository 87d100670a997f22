"""What each local cluster's supervisor must know about its domain members (issue 13): :func:`publish`.

For every isolated local cluster (``Cluster.isolated_network``), the memberships of its Workers in every domain,
from the allocations (``IPAllocation``, key ``<cluster>/<namespace>/<pod>``): the member's IP and the domain's prefix
length, every member of the same domain by Pod name (the managed ``/etc/hosts`` block), the relay's address as the
cluster sees it (:data:`clusters.runtime.local.netns.CONSOLE_ADDRESS`, ``RLARK_DOMAIN_RELAY_PORT``, default 2223)
with its pinned host key, and the member's certificate (:mod:`domains.certs`). The supervisor answers with each
agent's connection state, kept in :data:`STATES` for the back office.

Errors: a cluster whose supervisor does not answer is skipped (``RuntimeFailure`` logged); the next sync retries.
"""

from __future__ import annotations

import ipaddress
import logging
import os
from collections import defaultdict
from typing import Any

from clusters.models import Cluster
from clusters.runtime.base import RuntimeFailure
from clusters.runtime.local.netns import CONSOLE_ADDRESS
from clusters.runtime.registry import runtime_for
from domains import certs
from domains.models import Domain, IPAllocation

log = logging.getLogger("rlark.domains")
STATES: dict[str, dict[str, Any]] = {}  # pod key -> the agent's last reported state (this process's view)


def relay_port() -> int:
    return int(os.environ.get("RLARK_DOMAIN_RELAY_PORT", "2223"))


def memberships() -> dict[str, dict[str, dict[str, Any]]]:
    """``{cluster: {pod: membership}}`` of every allocation (shape: ``clusters.runtime.local.domain_members``)."""
    out: dict[str, dict[str, dict[str, Any]]] = defaultdict(dict)
    host_key = certs.relay_host_key().export_public_key().decode().strip()
    by_domain: dict[int, list[IPAllocation]] = defaultdict(list)
    domains = {d.pk: d for d in Domain.objects.all()}
    for a in IPAllocation.objects.order_by("pod_key"):
        by_domain[a.domain_id].append(a)
    for domain_id, allocations in by_domain.items():
        domain = domains[domain_id]
        prefix = ipaddress.ip_network(domain.cidr).prefixlen
        hosts = {a.pod_key.rsplit("/", 1)[-1]: a.ip for a in allocations}
        for a in allocations:
            cluster, _ns, pod = a.pod_key.split("/", 2)
            out[cluster][pod] = {
                "domain": domain.name,
                "ip": a.ip,
                "prefix": prefix,
                "hosts": hosts,
                "relay": {"host": CONSOLE_ADDRESS, "port": relay_port(), "host_key": host_key},
                **certs.member_credentials(domain.name, a.ip, a.pod_key),
            }
    return out


def publish() -> dict[str, dict[str, Any]]:
    """Send every isolated local cluster its members; returns ``{pod key: agent state}``."""
    clusters = list(Cluster.objects.filter(runtime=Cluster.Runtime.LOCAL, isolated_network=True))
    if not clusters:
        return STATES
    members = memberships()
    for cluster in clusters:
        try:
            states = runtime_for(cluster).set_domain_members(members.get(cluster.name, {}))
        except RuntimeFailure as exc:
            log.warning("domain members of cluster %s not published: %s", cluster.name, exc)
            continue
        for pod, state in states.items():
            STATES[f"{cluster.name}/{pod}"] = state
    return STATES


def connection_states() -> dict[str, dict[str, Any]]:
    """``{"<cluster>/<pod>": agent state}`` of every member of every isolated local cluster, asked now; a cluster
    whose supervisor does not answer gets ``"<cluster>/*": {"state": "unknown", "error": ...}``, one that answers
    ``"<cluster>/*": {"state": "stopped"}`` for the members it does not run."""
    out: dict[str, dict[str, Any]] = {}
    for cluster in Cluster.objects.filter(runtime=Cluster.Runtime.LOCAL, isolated_network=True):
        try:
            states = runtime_for(cluster).domain_states()
        except RuntimeFailure as exc:
            out[f"{cluster.name}/*"] = {"state": "unknown", "error": exc.reason}
            continue
        out[f"{cluster.name}/*"] = {"state": "stopped"}  # a member its supervisor does not know (yet)
        out.update({f"{cluster.name}/{pod}": state for pod, state in states.items()})
    return out
