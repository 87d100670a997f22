"""Notification delivery: how long after a state change a message reaches its receiver, and whether a receiver
that hangs delays the others. Goal: p95 <= 30 s after the state change.

Jobs change phase (``EVENTS`` events, ``notifications.dispatch.record`` as the sync's receiver task makes them);
each job's owner has two default rules: a signed webhook to a receiver on 127.0.0.1 that answers 500 to the first
attempt of every fifth message (so retries, with their 2 s backoff, are part of the figures), and one to a
receiver that never answers within ``RLARK_NOTIFY_TIMEOUT``. ``--workers`` threads play the Celery worker's
processes: each takes a delivery, sends it (``dispatch.transmit``, the network part, no database), stores the
outcome (``dispatch.finish``) and schedules a retry after its backoff, as ``notifications.tasks.deliver`` does.

Prints the p50/p95/max latency from the state change to the good receiver's receipt, the same without the
hanging receiver, and their ratio; the hanging receiver's deliveries end as "failed" after 4 attempts.

    .venv/bin/python bench/notify.py [--events 40] [--workers 4] [--timeout 5]

A throwaway ``test_`` database is created and dropped. ``--quick`` (or ``RLARK_BENCH_QUICK=1``): 10 events,
a 1 s timeout.
"""

from __future__ import annotations

import argparse
import heapq
import logging
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_console.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment  # noqa: E402

from bench.quick import quick_defaults  # noqa: E402
from jobs.models import Job  # noqa: E402
from notifications import dispatch, services  # noqa: E402
from notifications.models import Delivery  # noqa: E402
from tests.notifications.receiver import Receiver  # noqa: E402

GOAL_P95 = 30.0


def run(events: int, workers: int, hanging: bool, db_lock: threading.Lock) -> tuple[list[float], int]:
    """Latencies (s) from each event to the good receiver's 200, and the hanging receiver's failed count."""
    user = get_user_model().objects.create_user(f"u{time.monotonic_ns()}", "", "pw-bench-1")
    good = Receiver()
    statuses: dict[str, list[int]] = {}
    received: dict[str, float] = {}

    # the good receiver: 500 on the first attempt of every fifth job
    handler = good.server.RequestHandlerClass

    def do_post(self) -> None:  # noqa: ANN001
        import json

        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length))
        name = body["job"]
        queue = statuses.setdefault(name, [500] if int(name.rsplit("-", 1)[1]) % 5 == 0 else [])
        status = queue.pop(0) if queue else 200
        if status == 200:
            received.setdefault(name, time.monotonic())
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.end_headers()

    handler.do_POST = do_post
    slow = Receiver(hang=settings.RLARK_NOTIFY_TIMEOUT + 5)
    with good, slow:
        good_ch = services.create_channel(user, {"name": "good", "kind": "webhook", "url": good.url, "secret": "k"})
        services.create_rule(user, {"channel": good_ch.pk, "events": ["Failed"]})
        if hanging:
            slow_ch = services.create_channel(user, {"name": "slow", "kind": "slack", "url": slow.url})
            services.create_rule(user, {"channel": slow_ch.pk, "events": ["Failed"]})
        jobs = [Job.objects.create(name=f"{user.username}-{i}", owner=user, spec={}) for i in range(events)]
        queue: list[tuple[float, int]] = []
        cond = threading.Condition()
        changed: dict[int, float] = {}
        pending = [0]

        def worker() -> None:
            while True:
                with cond:
                    while True:
                        if pending[0] == 0:
                            return
                        if queue and queue[0][0] <= time.monotonic():
                            _, delivery_id = heapq.heappop(queue)
                            break
                        cond.wait(timeout=0.05)
                with db_lock:
                    delivery = dispatch.prepare(delivery_id)
                outcome = dispatch.transmit(delivery)
                with db_lock:
                    dispatch.finish(delivery, outcome)
                with cond:
                    if outcome.retry_in is not None:
                        heapq.heappush(queue, (time.monotonic() + outcome.retry_in, delivery_id))
                    else:
                        pending[0] -= 1
                    cond.notify_all()

        threads = [threading.Thread(target=worker, daemon=True) for _ in range(workers)]
        with cond:
            pending[0] = -1  # running
        for t in threads:
            t.start()
        for job in jobs:  # state changes one after another, as syncs see them
            start = time.monotonic()
            with db_lock:
                ids = dispatch.record([{"job": job.pk, "kind": "phase", "phase": "Failed", "attempt": 1}])
            with cond:
                changed[job.pk] = start
                if pending[0] < 0:
                    pending[0] = 0
                pending[0] += len(ids)
                for delivery_id in ids:
                    heapq.heappush(queue, (start, delivery_id))
                cond.notify_all()
            time.sleep(0.05)
        for t in threads:
            t.join(timeout=300)
    latencies = [received[j.name] - changed[j.pk] for j in jobs if j.name in received]
    failed = Delivery.objects.filter(rule__channel__name="slow", job__owner=user, status="failed").count()
    return latencies, failed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=40)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=5.0)
    quick_defaults(parser, events=10, timeout=1.0)
    args = parser.parse_args()
    logging.disable(logging.INFO)
    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, keepdb=False)
    settings.RLARK_NOTIFY_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.RLARK_NOTIFY_TIMEOUT = args.timeout
    lock = threading.Lock()
    try:
        base, _ = run(args.events, args.workers, hanging=False, db_lock=lock)
        with_hang, failed = run(args.events, args.workers, hanging=True, db_lock=lock)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)

    def figures(values: list[float]) -> tuple[float, float, float]:
        ordered = sorted(values)
        p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
        return statistics.median(ordered), p95, ordered[-1]

    print(f"{args.events} state changes, {args.workers} workers, receiver timeout {args.timeout:g} s")
    p50, p95, top = figures(base)
    print(f"delivery latency, good receiver only: p50 {p50:.3f} s, p95 {p95:.3f} s, max {top:.3f} s")
    h50, h95, htop = figures(with_hang)
    print(f"delivery latency, beside a hanging receiver: p50 {h50:.3f} s, p95 {h95:.3f} s, max {htop:.3f} s")
    print(f"hanging receiver: {failed}/{args.events} deliveries failed after {dispatch.MAX_ATTEMPTS} attempts")
    print(f"ratio p95 beside a hanging receiver / alone: {h95 / p95 if p95 else float('nan'):.2f}")
    print(
        f"goal p95 <= {GOAL_P95:g} s: {'met' if h95 <= GOAL_P95 else 'NOT met'} (ratio p95/goal {h95 / GOAL_P95:.2f})"
    )
    if len(base) != args.events or len(with_hang) != args.events:
        sys.exit("some messages were never delivered")


if __name__ == "__main__":
    main()
