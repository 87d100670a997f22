"""The jobs that use a network domain or an SSH key: the jobs app's answers to ``domains.signals.domain_users`` and
``sshkeys.signals.key_users`` (connected in ``jobs.apps``), so that those apps never import the jobs app."""

from __future__ import annotations

from jobs.models import Job, Phase
from jobs.policy import visible_jobs

ACTIVE_PHASES = (Phase.PENDING, Phase.RUNNING)


def jobs_using_domain(sender, domain, **kwargs) -> list[str]:
    """Names of the jobs that are not finished (Pending/Running and not stopped) with ``spec.domain`` = ``domain``,
    or whose Workers hold one of its addresses (``domain.allocations``). Two queries at most."""
    active = Job.objects.filter(phase__in=ACTIVE_PHASES, stopped=False)
    names = set(active.filter(spec__domain=domain.name).values_list("name", flat=True))
    held = set(domain.allocations.exclude(job="").values_list("job", flat=True))
    if held:
        names |= set(active.filter(name__in=held).values_list("name", flat=True))
    return sorted(names)


def jobs_using_keys(sender, user, keys, **kwargs) -> dict[int, list[str]]:
    """``{key id: [job names]}`` for ``keys`` (SSHPublicKey rows): the jobs ``user`` may see, in every phase, whose
    ``spec.sshPublicKeys`` (a list of ``"<type> <base64> [comment]"`` lines, or one such string) carries the key."""
    by_line = {k.key: k.pk for k in keys}
    out: dict[int, list[str]] = {k.pk: [] for k in keys}
    if not by_line:
        return out
    for name, spec in visible_jobs(user).values_list("name", "spec"):
        lines = (spec or {}).get("sshPublicKeys") or []
        if isinstance(lines, str):
            lines = [lines]
        for line in lines:
            normalized = " ".join(str(line).split()[:2])
            if normalized in by_line and name not in out[by_line[normalized]]:
                out[by_line[normalized]].append(name)
    return out
