"""Watch-driven status: status that follows changes at once.

One thread per cluster and kind (``pods``, ``statefulsets``) keeps a watch open on the console's objects of the
cluster's namespace (label ``rlinf.io/job``, ``allowWatchBookmarks``): it resumes from the last resourceVersion it
saw (bookmarks included), relists after ``410 Gone``, and reconnects with a growing pause (1 s ... 30 s) when the
cluster fails, so a dead or hung cluster only ever holds its own threads. Every event names a job; a dispatcher
collects them for ``DEBOUNCE`` seconds and syncs just those jobs (``jobs.observe.sync.sync_jobs``), so a Pod
change reaches the job's status well within 2 s. The 10-second periodic resync (Celery beat) stays as the safety
net: a missed event costs at most one interval.

It runs as one long-lived process, ``manage.py watch_clusters`` (``runconsole`` starts it; in production run
exactly one, see docker-compose.yml). Runtimes without a watch (the local runtime) are left to the periodic sync.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.db import close_old_connections

from clusters.models import Cluster
from clusters.runtime import registry
from clusters.runtime.base import RuntimeFailure
from jobs.models import Job
from jobs.observe.sync import sync_jobs

logger = logging.getLogger(__name__)

KINDS = ("pods", "statefulsets")
DEBOUNCE = 0.2  # seconds events are collected before one sync of the jobs they name
WATCH_TIMEOUT = 60  # seconds one watch request stays open (then resumed from its resourceVersion)
RESCAN = 15.0  # seconds between two looks at the cluster list (added, removed, re-registered clusters)
BACKOFF_MAX = 30.0


class Dispatcher:
    """Collects job names from the watch threads and syncs them in batches."""

    def __init__(self, sync: Callable[[set[str]], None] | None = None) -> None:
        self._pending: set[str] = set()
        self._all = False
        self._cond = threading.Condition()
        self._sync = sync or sync_job_names
        self.batches = 0

    def notify(self, jobs: set[str] | None) -> None:
        """``jobs`` changed (None: every job of a relisted cluster; the periodic sync covers those)."""
        with self._cond:
            if jobs:
                self._pending |= {j for j in jobs if j}
                self._cond.notify()

    def run_once(self, timeout: float = 1.0) -> int:
        """Wait up to ``timeout`` s for events, then ``DEBOUNCE`` s more, and sync the jobs named. Returns the count."""
        with self._cond:
            if not self._pending:
                self._cond.wait(timeout)
            if not self._pending:
                return 0
        time.sleep(DEBOUNCE)
        with self._cond:
            names, self._pending = self._pending, set()
        try:
            self._sync(names)
            self.batches += 1
        except Exception:  # noqa: BLE001 - the periodic sync is the safety net
            logger.exception("watch-triggered sync of %s", sorted(names))
        return len(names)


def sync_job_names(names: set[str]) -> None:
    close_old_connections()
    jobs = list(Job.objects.filter(name__in=sorted(names)))
    if jobs:
        sync_jobs(jobs)


class ClusterWatch(threading.Thread):
    """The watch of one kind on one cluster (see module docstring). ``stop()`` ends it within a watch timeout."""

    def __init__(self, cluster, kind: str, dispatcher: Dispatcher, timeout: int = WATCH_TIMEOUT) -> None:
        super().__init__(name=f"watch-{cluster.name}-{kind}", daemon=True)
        self.cluster = cluster
        self.kind = kind
        self.dispatcher = dispatcher
        self.timeout = timeout
        self.resource_version = ""
        self.relists = 0
        self.bookmarks = 0
        self.events = 0
        self.unsupported = False
        self.last_error = ""
        self._halt = threading.Event()

    def stop(self) -> None:
        self._halt.set()

    @property
    def stopped(self) -> bool:
        return self._halt.is_set()

    def run(self) -> None:
        pause = 1.0
        while not self._halt.is_set():
            try:
                runtime = registry.runtime_for(self.cluster)
                for event in runtime.watch(self.cluster.namespace, self.kind, self.resource_version, self.timeout):
                    if self._halt.is_set():
                        return
                    self.resource_version = event.resource_version or self.resource_version
                    if event.type == "BOOKMARK":
                        self.bookmarks += 1
                    elif event.type == "RELIST":
                        # The first list (the watcher just started) and every relist after 410 Gone: what changed
                        # while nobody watched is unknown, so sync every job listed rather than wait for the
                        # periodic resync.
                        self.relists += 1
                        self.dispatcher.notify({job for job, _ in event.objects})
                    else:
                        self.events += 1
                        self.dispatcher.notify({event.job})
                    pause = 1.0
            except NotImplementedError:
                self.unsupported = True
                return
            except RuntimeFailure as exc:
                self.last_error = str(exc)
                logger.info("watch %s of cluster %s: %s (again in %.0f s)", self.kind, self.cluster.name, exc, pause)
            except Exception as exc:  # noqa: BLE001 - keep watching; the periodic sync covers the gap
                self.last_error = f"{type(exc).__name__}: {exc}"
                logger.exception("watch %s of cluster %s", self.kind, self.cluster.name)
            else:
                continue  # the watch request timed out normally: resume at once
            self._halt.wait(pause)
            pause = min(BACKOFF_MAX, pause * 2)


class Watcher:
    """Every cluster's watches plus the dispatcher (``manage.py watch_clusters``)."""

    def __init__(self, dispatcher: Dispatcher | None = None) -> None:
        self.dispatcher = dispatcher or Dispatcher()
        self.watches: dict[tuple[int, str], ClusterWatch] = {}
        self._fingerprints: dict[int, tuple] = {}

    def rescan(self) -> None:
        """Start watches for new clusters, restart those whose registration changed, stop removed ones."""

        close_old_connections()
        clusters = {c.pk: c for c in Cluster.objects.exclude(runtime=Cluster.Runtime.LOCAL)}
        for pk, cluster in clusters.items():
            fingerprint = (cluster.name, cluster.namespace, cluster.kubeconfig, cluster.in_cluster)
            if self._fingerprints.get(pk) != fingerprint:
                self._stop_cluster(pk)
                self._fingerprints[pk] = fingerprint
                for kind in KINDS:
                    watch = ClusterWatch(cluster, kind, self.dispatcher)
                    self.watches[(pk, kind)] = watch
                    watch.start()
        for pk in set(self._fingerprints) - set(clusters):
            self._stop_cluster(pk)
            del self._fingerprints[pk]

    def _stop_cluster(self, pk: int) -> None:
        for kind in KINDS:
            watch = self.watches.pop((pk, kind), None)
            if watch is not None:
                watch.stop()

    def run(self, stop: threading.Event) -> None:
        from django.db import connection

        next_scan = 0.0
        try:
            while not stop.is_set():
                if time.monotonic() >= next_scan:
                    try:
                        self.rescan()
                    except Exception:  # noqa: BLE001 - the database may be restarting
                        logger.exception("cluster rescan")
                    next_scan = time.monotonic() + RESCAN
                self.dispatcher.run_once(timeout=1.0)
        finally:
            for key in list(self.watches):
                self.watches.pop(key).stop()
            connection.close()
