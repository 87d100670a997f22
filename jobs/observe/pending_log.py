"""A Worker whose Pod is still Pending has no log yet: readers say so, as the Logs tab does
(``terminal.services.logs.empty_state``: state ``pending``), instead of answering an empty log.

The REST API (``GET /api/v1/jobs/{name}/logs/?pod=``) turns :class:`WorkerPending` into ``409`` with the same
sentence, so a client tells "not started" from "started, wrote nothing" (``02-confirm-job-running.txt``, 日志限制:
without a log the Logs area shows a text notice; ``05-troubleshooting-jobs-workers.txt``: 长时间 Pending，尚无 Pod
日志).
"""

from __future__ import annotations

from django.utils.translation import gettext_noop

from clusters.runtime.base import PodNotFound, RuntimeFailure
from jobs.models import Job, Pod
from jobs.observe.status import read_worker_log
from rlark_console.language import translate

# The Logs tab's sentence for a Pending Pod (the same msgid as ``terminal.services.panel``'s ``state.pending``)
PENDING_LOG = gettext_noop("Pod %(pod)s is Pending; no logs yet.")


class WorkerPending(Exception):
    """Worker ``pod``'s Pod is Pending and its ``main`` container has written nothing yet."""

    def __init__(self, pod: str) -> None:
        super().__init__(pod)
        self.pod = pod

    def message(self, code: str | None = None) -> str:
        """The Logs tab's sentence in the language of ``code`` (the active language when None)."""
        return translate(PENDING_LOG, code) % {"pod": self.pod}


def read_current_log(job: Job, pod: str, tail: int | None, previous: bool = False) -> str:
    """:func:`jobs.observe.status.read_worker_log` (last ``tail`` lines), but a Worker whose synced Pod row is
    ``Pending`` raises :class:`WorkerPending` when its current container's log is empty or cannot be read yet (the
    API server refuses with ``400 ... waiting to start``: reason ``invalid``). A previous instance (``previous``), a
    Pod that no longer exists and the other runtime failures (an unreachable cluster) raise as they do there
    (``Pod.DoesNotExist``, :class:`PodNotFound`, :class:`RuntimeFailure`)."""
    try:
        text = read_worker_log(job, pod, tail=tail, previous=previous)
    except PodNotFound:
        raise
    except RuntimeFailure as exc:
        if exc.reason == "invalid" and not previous and _pending(job, pod):  # "waiting to start" (HTTP 400)
            raise WorkerPending(pod) from None
        raise
    if not text and not previous and _pending(job, pod):
        raise WorkerPending(pod)
    return text


def _pending(job: Job, pod: str) -> bool:
    """True when the sync last saw Worker ``pod`` of ``job`` in phase ``Pending``."""
    return Pod.objects.filter(task__job=job, name=pod, phase="Pending").exists()
