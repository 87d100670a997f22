"""``manage.py watch_clusters``: keep a watch of Pods and StatefulSets open on every Kubernetes cluster and sync
the jobs they name within about a second (``jobs.observe.watcher``). Run exactly one per installation; the
10-second periodic sync of Celery beat stays the safety net."""

from __future__ import annotations

import signal
import threading

from django.core.management.base import BaseCommand

from jobs.observe.watcher import Watcher


class Command(BaseCommand):
    help = "Watch every Kubernetes cluster's Pods and StatefulSets and sync the jobs they belong to at once."

    def handle(self, *args, **options):  # noqa: D102

        stop = threading.Event()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
        self.stdout.write("watching clusters (Pods, StatefulSets)")
        Watcher().run(stop)
