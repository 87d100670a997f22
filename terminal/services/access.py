"""Who may open a log stream or a terminal: authentication, the job policy and re-checks.

Rule (peers 5.2): every websocket authenticates the session, checks the job
with ``jobs.policy`` (owner or admin), and long-lived sockets re-check periodically and on
every reconnect (CVE-2023-40025, CVE-2024-41666): a logged-out session, a deactivated user or a
job that is no longer visible closes the socket with a reason.

Close codes (4000-4999 are application codes; the reason is shown in the page):
4401 authentication, 4403 permission, 4404 Pod/job gone, 4408 idle timeout.
"""

from __future__ import annotations

from django.contrib.auth import get_user_model
from django.contrib.sessions.backends.base import SessionBase
from django.utils.module_loading import import_string

from jobs.models import Job
from jobs.policy import can_view_job

CLOSE_AUTH = 4401
CLOSE_PERMISSION = 4403
CLOSE_GONE = 4404
CLOSE_IDLE = 4408
CLOSE_ERROR = 1011


class AccessDenied(Exception):
    """Refused; ``code`` is the websocket close code and ``str(exc)`` the human reason."""

    def __init__(self, code: int, reason: str) -> None:
        super().__init__(reason)
        self.code = code


def check_job(user, job_name: str):
    """The job ``job_name`` if ``user`` may see it; AccessDenied(4401/4403) otherwise.

    Not-found and not-permitted get the same message so other users' job names do not leak.
    """

    if not getattr(user, "is_authenticated", False):
        raise AccessDenied(CLOSE_AUTH, "authentication required: please log in again")
    job = Job.objects.filter(name=job_name).select_related("owner").first()
    if job is None or not can_view_job(user, job):
        raise AccessDenied(
            CLOSE_PERMISSION, f"permission denied: you cannot view job {job_name} (or it does not exist)"
        )
    return job


def _session_alive(session_key: str | None) -> bool:
    if not session_key:
        return False
    from django.conf import settings

    store: type[SessionBase] = import_string(f"{settings.SESSION_ENGINE}.SessionStore")
    return store().exists(session_key)


def recheck(user_id: int | None, session_key: str | None, job_name: str) -> None:
    """Re-run the connect-time checks for a live socket; raises AccessDenied when access ended
    (logged out / session expired, user deactivated, job deleted or no longer visible)."""

    if user_id is None or not _session_alive(session_key):
        raise AccessDenied(CLOSE_AUTH, "session ended: please log in again")
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None or not user.is_active:
        raise AccessDenied(CLOSE_AUTH, "account disabled: please log in again")
    job = Job.objects.filter(name=job_name).first()
    if job is None or not can_view_job(user, job):
        raise AccessDenied(CLOSE_PERMISSION, f"permission revoked: you can no longer view job {job_name}")
