"""Network domains: CIDR validation, virtual IP allocation for Workers, safe deletion.

Sources: seed 04 第三步 ("CIDR 不能重叠"; "末字节为 .0 或 .255 的 IPv4 地址始终
保留…该规则同样适用于大于 /24 的 CIDR"), upstream-rlark 12.2/12.3.

CIDR rules (:func:`validate_cidr`, error codes for the API):
  ``cidr_invalid``     not an IPv4 network in canonical form (no host bits), e.g. ``10.0.0.1/16``, IPv6;
  ``cidr_prefix``      prefix length outside /8 .. /29;
  ``cidr_not_private`` not inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16;
  ``cidr_overlap``     overlaps another Domain or a cluster's Pod/Service CIDR (the message names it).

Allocation (:func:`allocate`): lowest free address first; never the network or broadcast address and never
an address whose last octet is 0 or 255, in every /24 of the range; one address per ``pod_key``
(``<cluster>/<namespace>/<pod>``), so a Worker restarted under the same Pod name keeps its IP; released
when the Pod is deleted (:func:`release`, :func:`release_missing`). Concurrency: the Domain row is locked
(``select_for_update``) and ``(domain, ip)``/``(domain, pod_key)`` are unique; an IntegrityError retries.
"""

from __future__ import annotations

import ipaddress
import time
from collections.abc import Iterable, Iterator
from datetime import datetime

from django.db import IntegrityError, OperationalError, transaction
from django.db.models import Q
from django.utils.translation import gettext as _

from accounts import audit
from clusters.models import Cluster
from domains import signals
from domains.models import Domain, IPAllocation

MIN_PREFIX = 8
MAX_PREFIX = 29
PRIVATE_NETWORKS = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16"))
ALLOCATE_RETRIES = 20


class CIDRError(ValueError):
    """Refused CIDR; ``code`` in cidr_invalid|cidr_not_private|cidr_prefix|cidr_overlap, ``message`` translated."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class DomainExhausted(RuntimeError):
    """No free address is left in the domain (message as upstream: ``no available IP in pool <cidr>``)."""


class DomainInUse(RuntimeError):
    """The domain is used by active jobs (``jobs`` = their names); deletion refused."""

    def __init__(self, domain: Domain, jobs: list[str]) -> None:
        super().__init__(
            _("Network domain “%(name)s” is used by active jobs: %(jobs)s. Stop or delete them first.")
            % {"name": domain.name, "jobs": ", ".join(jobs)}
        )
        self.jobs = jobs


def _split_cidrs(value: str) -> list[ipaddress.IPv4Network]:
    """IPv4 networks in a cluster CIDR field (may be comma separated, may hold IPv6 or junk: skipped)."""
    nets = []
    for part in (value or "").replace(";", ",").split(","):
        part = part.strip()
        if not part:
            continue
        try:
            net = ipaddress.ip_network(part, strict=False)
        except ValueError:
            continue
        if isinstance(net, ipaddress.IPv4Network):
            nets.append(net)
    return nets


def validate_cidr(cidr: str, *, exclude: Domain | None = None) -> ipaddress.IPv4Network:
    """Check ``cidr`` against every rule; returns the network; raises :class:`CIDRError`.

    ``exclude``: the domain being edited (not compared with itself).
    """
    text = (cidr or "").strip()
    if not text or "/" not in text:
        raise CIDRError("cidr_invalid", _("Enter an IPv4 network with a prefix length, for example 10.100.0.0/16."))
    try:
        loose = ipaddress.ip_network(text, strict=False)
    except ValueError:
        raise CIDRError("cidr_invalid", _("“%(cidr)s” is not a valid IPv4 network.") % {"cidr": text[:64]})
    if not isinstance(loose, ipaddress.IPv4Network):
        raise CIDRError("cidr_invalid", _("IPv6 networks are not supported; use a private IPv4 range."))
    if str(loose) != text:
        raise CIDRError(
            "cidr_invalid",
            _("“%(cidr)s” has host bits set; the network address is %(net)s.") % {"cidr": text, "net": loose},
        )
    if not MIN_PREFIX <= loose.prefixlen <= MAX_PREFIX:
        raise CIDRError(
            "cidr_prefix",
            _("The prefix length must be between /%(min)d and /%(max)d (got /%(got)d).")
            % {"min": MIN_PREFIX, "max": MAX_PREFIX, "got": loose.prefixlen},
        )
    if not any(loose.subnet_of(private) for private in PRIVATE_NETWORKS):
        raise CIDRError(
            "cidr_not_private",
            _("%(cidr)s is not a private range; use 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16.") % {"cidr": text},
        )
    others = Domain.objects.all()
    if exclude is not None and exclude.pk:
        others = others.exclude(pk=exclude.pk)
    for other in others:
        try:
            other_net = ipaddress.ip_network(other.cidr, strict=False)
        except ValueError:
            continue
        if other_net.version == 4 and loose.overlaps(other_net):
            raise CIDRError(
                "cidr_overlap",
                _("%(cidr)s overlaps network domain “%(name)s” (%(other)s).")
                % {"cidr": text, "name": other.name, "other": other.cidr},
            )
    for cluster in Cluster.objects.all():
        for label, value in ((_("Pod CIDR"), cluster.pod_cidr), (_("Service CIDR"), cluster.service_cidr)):
            for net in _split_cidrs(value):
                if loose.overlaps(net):
                    raise CIDRError(
                        "cidr_overlap",
                        _("%(cidr)s overlaps the %(what)s %(other)s of cluster “%(name)s”.")
                        % {"cidr": text, "what": label, "other": net, "name": cluster.name},
                    )
    return loose


def overlapping_domains(cidr: str) -> list[Domain]:
    """Domains whose CIDR overlaps ``cidr`` (for cluster registration: a cluster's Pod/Service CIDR must not
    overlap a domain either). Invalid or IPv6 input overlaps nothing."""
    nets = _split_cidrs(cidr)
    out = []
    for domain in Domain.objects.all():
        try:
            net = ipaddress.ip_network(domain.cidr, strict=False)
        except ValueError:
            continue
        if any(net.version == 4 and net.overlaps(n) for n in nets):
            out.append(domain)
    return out


def create_domain(name: str, cidr: str, actor=None, request=None) -> Domain:
    """Validate and create a domain (``name`` a DNS label). Raises CIDRError or django ValidationError."""
    with transaction.atomic():
        validate_cidr(cidr)
        domain = Domain(name=(name or "").strip(), cidr=cidr.strip())
        domain.full_clean()
        domain.save()
    audit.record(actor, "domain.create", "domain", domain.name, request=request, cidr=domain.cidr)
    return domain


def active_jobs_using(domain: Domain) -> list[str]:
    """Names, sorted, of the jobs that are not finished (Pending/Running and not stopped) and use ``domain``: by
    ``spec.domain`` or by a Worker that holds one of its addresses (asked of the jobs app: ``signals.domain_users``)."""
    names: set[str] = set()
    for _receiver, answer in signals.domain_users.send(sender=Domain, domain=domain):
        names |= set(answer or ())
    return sorted(names)


def delete_domain(domain: Domain, actor=None, request=None) -> None:
    """Delete ``domain`` and its allocations; raises :class:`DomainInUse` when an active job uses it."""
    jobs = active_jobs_using(domain)
    if jobs:
        raise DomainInUse(domain, jobs)
    audit.record(actor, "domain.delete", "domain", domain.name, request=request, cidr=domain.cidr)
    domain.delete()


def default_domain() -> Domain | None:
    """The domain the wizard preselects: the only one when exactly one exists, else None."""
    domains = list(Domain.objects.all()[:2])
    return domains[0] if len(domains) == 1 else None


def usable_addresses(cidr: str) -> Iterator[ipaddress.IPv4Address]:
    """Allocatable addresses of ``cidr`` in ascending order: not network/broadcast, last octet not 0/255."""
    net = ipaddress.ip_network(cidr, strict=False)
    if not isinstance(net, ipaddress.IPv4Network):
        raise ValueError("IPv4 only")
    hosts = net.hosts() if net.prefixlen < 31 else iter(net)
    for addr in hosts:
        last = int(addr) & 0xFF
        if last in (0, 255):
            continue
        yield addr


def capacity(cidr: str) -> int:
    """Number of allocatable addresses in ``cidr`` (same rules as :func:`usable_addresses`)."""
    net = ipaddress.ip_network(cidr, strict=False)
    total = net.num_addresses
    if net.prefixlen < 31:
        total -= 2
    first, last = int(net.network_address), int(net.broadcast_address)
    reserved = 0
    for block in range(first >> 8, (last >> 8) + 1):
        for low in (0, 255):
            ip = (block << 8) | low
            is_edge = net.prefixlen < 31 and ip in (first, last)
            if first <= ip <= last and not is_edge:
                reserved += 1
    return total - reserved


def _allocate_once(domain_pk: int, pod_key: str, job: str, task: str) -> str:
    with transaction.atomic():
        locked = Domain.objects.select_for_update().get(pk=domain_pk)
        existing = IPAllocation.objects.filter(domain=locked, pod_key=pod_key).first()
        if existing is not None:
            if (job and existing.job != job) or (task and existing.task != task):
                IPAllocation.objects.filter(pk=existing.pk).update(job=job or existing.job, task=task or existing.task)
            return existing.ip
        used = set(IPAllocation.objects.filter(domain=locked).values_list("ip", flat=True))
        for addr in usable_addresses(locked.cidr):
            ip = str(addr)
            if ip in used:
                continue
            IPAllocation.objects.create(domain=locked, ip=ip, pod_key=pod_key, job=job, task=task)
            return ip
        raise DomainExhausted(f"no available IP in pool {locked.cidr}")


def allocate(domain: Domain, pod_key: str, job: str = "", task: str = "") -> str:
    """The virtual IP of Worker ``pod_key`` (``<cluster>/<namespace>/<pod>``) in ``domain``: its existing
    address, else the lowest free one. ``job``/``task`` are the job and Task names shown in the Worker table.

    Raises :class:`DomainExhausted` when full, ``Domain.DoesNotExist`` when the domain was deleted.
    """
    if not pod_key:
        raise ValueError("pod_key is required")
    last_exc: Exception | None = None
    for attempt in range(ALLOCATE_RETRIES):
        try:
            return _allocate_once(domain.pk, pod_key, job, task)
        except (IntegrityError, OperationalError) as exc:  # a concurrent writer won; try again
            last_exc = exc
            time.sleep(min(0.005 * (attempt + 1), 0.1))
    raise RuntimeError(f"could not allocate an IP in {domain.name} after {ALLOCATE_RETRIES} attempts") from last_exc


def release(domain: Domain, pod_key: str) -> bool:
    """Free the address of ``pod_key`` (its Pod was deleted). True when something was released."""
    deleted, _n = IPAllocation.objects.filter(domain=domain, pod_key=pod_key).delete()
    return bool(deleted)


def release_missing(
    domain: Domain, live_pod_keys: Iterable[str], jobs: Iterable[str] | None = None, before: datetime | None = None
) -> list[str]:
    """Free every address of ``domain`` whose Pod key is not in ``live_pod_keys`` (the sync's view of the
    Pods that still exist, running or restarting). Returns the released Pod keys, sorted.

    ``jobs``: only addresses held for these job names may go (the console's jobs: an address an administrator
    entered for another name stays). ``before``: only addresses allocated before this time may go (the caller's
    view was taken then: an address allocated since, for a Pod it could not see, stays). Both are applied under
    the domain's lock, so an allocation made while the caller looked is never freed by mistake."""
    live = set(live_pod_keys)
    with transaction.atomic():
        Domain.objects.select_for_update().filter(pk=domain.pk).first()
        stale = IPAllocation.objects.filter(domain=domain).exclude(pod_key__in=live)
        if jobs is not None:
            stale = stale.filter(job__in=set(jobs))
        if before is not None:
            stale = stale.filter(created_at__lt=before)
        keys = sorted(stale.values_list("pod_key", flat=True))
        stale.delete()
    return keys


def sync_domain(
    domain: Domain,
    live_pods: dict[str, tuple[str, str]],
    keep: Iterable[str] = (),
    jobs: Iterable[str] | None = None,
    before: datetime | None = None,
) -> dict[str, str]:
    """One reconcile pass for the sync (upstream 12.2, "RLark Console goes further": deterministic across
    clusters). ``live_pods`` maps every existing Pod key (``<cluster>/<namespace>/<pod>``) that uses the domain
    to ``(job, task)``. Addresses of Pods no longer listed are released (``jobs``, ``before``: see
    :func:`release_missing`), then Pods are allocated in sorted key order (cluster, namespace, pod), each keeping
    its address. Returns ``{pod_key: ip}``; a Pod that cannot get an address (domain full) is left out. ``keep``:
    more Pod keys whose addresses must not be released (Pods this pass knows nothing about)."""
    release_missing(domain, set(live_pods) | set(keep), jobs=jobs, before=before)
    out: dict[str, str] = {}
    for key in sorted(live_pods):
        job, task = live_pods[key]
        try:
            out[key] = allocate(domain, key, job, task)
        except DomainExhausted:
            continue
    return out


def release_job(job_name: str) -> int:
    """Free every address held by Workers of job ``job_name`` in any domain (job deleted). Returns the count."""
    deleted, _n = IPAllocation.objects.filter(job=job_name).delete()
    return deleted


def allocations_for_job(job_name: str) -> dict[str, str]:
    """``{pod_key: ip}`` of the job's Workers (for the job's Worker table)."""
    return dict(IPAllocation.objects.filter(job=job_name).values_list("pod_key", "ip"))


def search_allocations(domain: Domain, query: str = "") -> list[IPAllocation]:
    """The domain's allocations (IP order), filtered by ``query`` in IP, job, task or Pod."""
    qs = domain.allocations.all()
    query = (query or "").strip()
    if query:
        qs = qs.filter(
            Q(ip__icontains=query) | Q(job__icontains=query) | Q(task__icontains=query) | Q(pod_key__icontains=query)
        )
    return sorted(qs, key=lambda a: ipaddress.ip_address(a.ip))
