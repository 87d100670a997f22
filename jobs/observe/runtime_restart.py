"""Workers that the runtime itself restarted.

When the local supervisor starts and finds Workers of its state gone (the host rebooted, or their
process groups were killed while it was down), it restarts each container in place with ``last_reason``
``RuntimeRestarted`` (``clusters.runtime.local.supervisor.RUNTIME_RESTARTED``). Training then starts over
from the beginning, so the job must say so instead of looking unchanged: the sync (``jobs.observe.sync``)
asks :func:`restarted` for every Pod it sees again and, when one was, calls :func:`new_attempt`:
``attempt`` += 1, condition ``RuntimeRestarted`` and the message :data:`MESSAGE`, with the Workers'
restart counts as the runtime reports them. The previous instance's log stays readable (``previous``).
Such a restart is not a ``HeaderRestarted`` failure (:func:`by_runtime`).
"""

from __future__ import annotations

from datetime import datetime

from clusters.runtime.base import PodInfo
from jobs.models import Job, Pod, Task
from jobs.observe.status import set_condition

REASON = "RuntimeRestarted"
MESSAGE = "The local runtime restarted: the Workers started over (attempt {attempt})"


def restarted(row: Pod, info: PodInfo) -> bool:
    """True when ``info`` shows a new instance of ``row``'s container started by a runtime restart."""
    c = info.container
    return c.last_reason == REASON and row.uid == info.uid and c.restart_count > row.restart_count


def by_runtime(row: Pod) -> bool:
    """True when the current instance of ``row``'s container exists because the runtime restarted."""
    return (row.container_state or {}).get("last_reason") == REASON


def new_attempt(job: Job, now: datetime) -> None:
    """Record the restart on ``job`` (in place and in the database): ``attempt`` += 1, the condition and
    message. The Tasks count as applied for the new attempt, so reconcile does not re-create the Pods
    that the runtime has already restarted."""
    job.attempt += 1
    job.message = MESSAGE.format(attempt=job.attempt)
    job.conditions = set_condition(job.conditions, REASON, True, REASON, job.message, now)
    cleared = dict.fromkeys(job.clear_progress())
    Job.objects.filter(pk=job.pk).update(attempt=job.attempt, message=job.message, conditions=job.conditions, **cleared)
    Task.objects.filter(job=job).update(applied_attempt=job.attempt)
