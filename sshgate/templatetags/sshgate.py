"""Template tags of the bastion's UI: the ready-to-copy ``ssh -J`` command per Worker, who is connected now
(job page) and the flow with the bastion's host key fingerprint (SSH keys page)."""

from __future__ import annotations

from django import template

from sshgate import commands, hostkeys, sessions

register = template.Library()


@register.inclusion_tag("sshgate/_command.html", takes_context=True)
def ssh_command(context, pod: str) -> dict:
    """A copy button for ``ssh -J <user>@<bastion> <pod>`` (the logged-in user's name)."""
    request = context.get("request")
    user = getattr(request, "user", None)
    return {"command": commands.ssh_command(getattr(user, "username", "") or "<user>", pod, request), "pod": pod}


@register.inclusion_tag("sshgate/_connected.html")
def ssh_connected(job_name: str) -> dict:
    """The SSH sessions open now into ``job_name``'s Workers."""
    return {"sessions": sessions.connected_now(job_name)}


@register.inclusion_tag("sshgate/_keys_card.html", takes_context=True)
def ssh_bastion_card(context) -> dict:
    """How to reach Workers with the registered keys, and the bastion host key fingerprint to check."""
    request = context.get("request")
    user = getattr(request, "user", None)
    name = getattr(user, "username", "") or "<user>"
    return {
        "jump": commands.jump_spec(name, request),
        "fingerprint": hostkeys.bastion_fingerprint(),
        "example": commands.ssh_command(name, "<job>-header-0", request),
    }
