"""The Celery app. Broker: Redis when ``REDIS_URL`` is set, else an embedded SQLite broker."""

from __future__ import annotations

import os
import warnings

from celery import Celery
from celery.exceptions import SecurityWarning

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_console.settings")

app = Celery("rlark_console")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

if not {"pickle", "application/x-python-serialize"} & set(app.conf.accept_content):
    # ``make run`` starts the worker as root on one machine (the local runtime needs root for its namespaces and
    # runs every Worker as an unprivileged uid). Celery only refuses root when it would unpickle messages; this
    # console accepts JSON only, so its "superuser privileges" warning would be noise on every start.
    warnings.filterwarnings(
        "ignore", message="You're running the worker with superuser privileges", category=SecurityWarning
    )


@app.on_after_finalize.connect
def _schedule(sender: Celery, **_kwargs) -> None:
    from django.conf import settings

    sender.add_periodic_task(settings.RLARK_SYNC_INTERVAL, sender.signature("jobs.tasks.sync_all"), name="sync-all")
    # deleted jobs' archived logs older than RLARK_LOG_ARCHIVE_RETENTION_DAYS
    sender.add_periodic_task(3600.0, sender.signature("jobs.tasks.purge_log_archives"), name="purge-log-archives")
    # notifications: jobs Pending too long and log lines matching a rule's pattern (notifications.scan)
    sender.add_periodic_task(15.0, sender.signature("notifications.tasks.scan"), name="notifications-scan")
