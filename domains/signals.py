"""What the domains app asks of the apps above it, as Django signals (the jobs app answers; ``jobs.apps``)."""

from __future__ import annotations

from django.dispatch import Signal

#: Sent with ``domain`` (a :class:`domains.models.Domain`) before a domain is deleted and on its page; each
#: receiver returns the names (list of str) of the active jobs that use it: not finished, not stopped.
domain_users = Signal()
