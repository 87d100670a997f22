"""Virtual IPs of Workers in their Job's network domain, kept in step with the status sync.

Seed 04: a domain gives every Worker that joins a virtual IP (never ``.0``/``.255``); upstream-rlark
12.2: a Worker keeps its address across restarts of the same Pod name, addresses of Pods that are gone
are released. The allocation rules themselves live in ``domains.services``; this module only decides
which Pods are live and writes ``Pod.domain_ip`` for the Worker table.
"""

from __future__ import annotations

from collections import defaultdict

from django.utils import timezone

from domains import dataplane
from domains import services as domain_services
from domains.models import Domain
from jobs.models import Job, Pod

GONE_PHASES = ("Succeeded", "Failed", "Stopped")


def pod_key(pod: Pod) -> str:
    """``<cluster>/<namespace>/<pod>``: the allocation key (upstream 12.1)."""
    return f"{pod.task.cluster.name}/{pod.task.namespace}/{pod.name}"


def assign(jobs: list[Job], *, full: bool) -> int:
    """Allocate domain IPs for the live Pods of ``jobs`` and store them on the Pod rows.

    ``full``: ``jobs`` are all jobs that can have live Pods (a whole sync cycle), so addresses held
    by Pods of console jobs that are not live any more are released, in every domain (an address
    is released when its Pod is deleted); addresses recorded for names that are no console job
    (entered by an administrator) are left alone. Otherwise (one job after an action) addresses are
    only added. Returns the number of Pod rows whose ``domain_ip`` changed.
    """
    as_of = timezone.now()  # what this pass sees; an address allocated after it is not this pass's to free
    domain_of = {job.pk: str((job.spec or {}).get("spec", {}).get("domain") or "") for job in jobs}
    live: dict[str, dict[str, tuple[str, str]]] = defaultdict(dict)
    pods_by_key: dict[str, Pod] = {}
    rows = Pod.objects.filter(task__job__in=[j for j in jobs if domain_of[j.pk]]).select_related(
        "task__cluster", "task__job"
    )
    for pod in rows:
        key = pod_key(pod)
        pods_by_key[key] = pod
        if pod.phase not in GONE_PHASES:
            live[domain_of[pod.task.job_id]][key] = (pod.task.job.name, pod.task.name)
    domains = Domain.objects.all() if full else Domain.objects.filter(name__in=set(live))
    ips: dict[str, str] = {}
    known_jobs = set(Job.objects.values_list("name", flat=True)) if full else set()
    for domain in domains:
        members = live.get(domain.name, {})
        if full:  # addresses held for names that are no console job stay (checked under the domain's lock)
            ips.update(domain_services.sync_domain(domain, members, jobs=known_jobs, before=as_of))
        else:
            for key, (job_name, task_name) in sorted(members.items()):
                try:
                    ips[key] = domain_services.allocate(domain, key, job_name, task_name)
                except domain_services.DomainExhausted:
                    continue
    changed = []
    for key, pod in pods_by_key.items():
        ip = ips.get(key, "")
        if pod.domain_ip != ip:
            pod.domain_ip = ip
            changed.append(pod)
    if changed:
        Pod.objects.bulk_update(changed, ["domain_ip"])
    # The isolated clusters' supervisors start the members' network agents; Kubernetes members get their
    # Secrets (one query when there is nothing to publish)
    dataplane.publish()
    return len(changed)
