"""What each local cluster's supervisor must know about its domain members: :func:`publish`.

For every isolated local cluster (``Cluster.isolated_network``), the memberships of its Workers in every domain,
from the allocations (``IPAllocation``, key ``<cluster>/<namespace>/<pod>``): the member's IP and the domain's prefix
length, every member of the same domain by Pod name (the managed ``/etc/hosts`` block), the relay's address as the
cluster sees it (:data:`clusters.runtime.local.netns.CONSOLE_ADDRESS`, ``RLARK_DOMAIN_RELAY_PORT``, default 2223)
with its pinned host key, and the member's certificate (:mod:`domains.certs`). The supervisor answers with each
agent's connection state, kept in :data:`STATES` for the back office.

Errors: a cluster whose supervisor does not answer is skipped (``RuntimeFailure`` logged); the next sync retries.
"""

from __future__ import annotations

import base64
import ipaddress
import json
import logging
import os
from collections import defaultdict
from typing import Any

from clusters.models import Cluster
from clusters.runtime.base import RuntimeFailure
from clusters.runtime.local.netns import CONSOLE_ADDRESS
from clusters.runtime.registry import runtime_for
from domains import certs, sidecar
from domains.models import Domain, IPAllocation

log = logging.getLogger("rlark.domains")
FIELD_MANAGER = "rlark-console-domains"
STATES: dict[str, dict[str, Any]] = {}  # pod key -> the agent's last reported state (this process's view)


def relay_port() -> int:
    return int(os.environ.get("RLARK_DOMAIN_RELAY_PORT", "2223"))


def relay_listen_hosts() -> tuple[str, ...]:
    """The addresses the relay listens on: ``127.0.0.1``, the console address of isolated local clusters, and each
    IPv4 address of ``RLARK_DOMAIN_RELAY_LISTEN`` (comma-separated; where Kubernetes Pods reach the console, the
    address ``RLARK_DOMAIN_RELAY_PUBLIC_HOST`` names or forwards to). Raises ``ValueError`` naming a value that is
    not an IPv4 address, or more than 16 of them."""
    extra = [h.strip() for h in os.environ.get("RLARK_DOMAIN_RELAY_LISTEN", "").split(",") if h.strip()]
    if len(extra) > 16:
        raise ValueError(f"RLARK_DOMAIN_RELAY_LISTEN: at most 16 addresses, got {len(extra)}")
    for host in extra:
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f"RLARK_DOMAIN_RELAY_LISTEN: {host!r} is not an IPv4 address") from None
    return tuple(dict.fromkeys(["127.0.0.1", CONSOLE_ADDRESS, *extra]))


def member_allocated(domain: str, ip: str) -> bool:
    """Whether ``ip`` is allocated in ``domain`` now (the relay's admission check of a member's certificate)."""
    return IPAllocation.objects.filter(domain__name=domain, ip=ip).exists()


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


def public_relay_host() -> str:
    """Where Kubernetes members reach the relay (``RLARK_DOMAIN_RELAY_PUBLIC_HOST``); "" = not published."""
    return os.environ.get("RLARK_DOMAIN_RELAY_PUBLIC_HOST", "").strip()


def kubernetes_secrets(members: dict[str, dict[str, Any]], namespace: str) -> dict[str, dict[str, str]]:
    """``{secret name: data}`` for one Kubernetes cluster's members: per Pod ``<pod>.json`` (the agent's config,
    paths under ``/rlark/net``, hosts file ``/etc/hosts``), ``<pod>.key`` and ``<pod>-cert.pub``, base64; the
    Secret of each Pod's Task (``domains.sidecar``)."""
    out: dict[str, dict[str, str]] = defaultdict(dict)
    relay = {"host": public_relay_host(), "port": int(os.environ.get("RLARK_DOMAIN_RELAY_PUBLIC_PORT") or relay_port())}
    for pod, m in sorted(members.items()):
        secret = sidecar.secret_name(pod.rsplit("-", 1)[0])
        config = {
            "ip": m["ip"],
            "prefix": m["prefix"],
            "relay_host": relay["host"],
            "relay_port": relay["port"],
            "host_key": m["relay"]["host_key"],
            "username": m["username"],
            "key": f"{sidecar.SECRET_MOUNT}/{pod}.key",
            "cert": f"{sidecar.SECRET_MOUNT}/{pod}-cert.pub",
            "status": f"{sidecar.STATE_MOUNT}/status.json",
            "hosts_file": "/etc/hosts",
            "hosts": m["hosts"],
        }
        for key, text in (
            (f"{pod}.json", json.dumps(config, sort_keys=True)),
            (f"{pod}.key", m["key"]),
            (f"{pod}-cert.pub", m["cert"]),
        ):
            out[secret][key] = base64.b64encode(text.encode()).decode()
    return out


def publish() -> dict[str, dict[str, Any]]:
    """Send every isolated local cluster its members, and, with ``RLARK_DOMAIN_RELAY_PUBLIC_HOST``, write every
    Kubernetes member's config into its Task's Secret; returns ``{pod key: agent state}`` (local members)."""
    clusters = list(Cluster.objects.filter(runtime=Cluster.Runtime.LOCAL, isolated_network=True))
    kubernetes = list(Cluster.objects.filter(runtime=Cluster.Runtime.KUBERNETES)) if public_relay_host() else []
    if not clusters and not kubernetes:
        return STATES
    members = memberships()
    for cluster in kubernetes:
        if not members.get(cluster.name):
            continue
        try:
            runtime = runtime_for(cluster)
            for name, data in kubernetes_secrets(members[cluster.name], cluster.namespace).items():
                runtime.apply_secret_data(cluster.namespace, name, data, FIELD_MANAGER)
        except RuntimeFailure as exc:
            log.warning("domain members of cluster %s not published: %s", cluster.name, exc)
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
