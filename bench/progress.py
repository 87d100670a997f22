"""Progress at a glance at fleet scale: the lists that show each job's step cost the same at 100 and 10,000 jobs.

Seeds jobs as reconcile and sync leave them (``tests/fleet_seed.py``: 2 Tasks and 3 Pods per job), every one with
a stored progress (step, total on every other job, rate), then times, through Django's test client as a staff
user, the pages that show it: the HTML job list (``/jobs/``, first and last page), the API (``/api/v1/jobs/``,
each job with its ``progress`` object) and the Overview (``/``, the recent jobs). The progress is read from the
Job's own row, so no page reads a log or asks one more query per job. Goal: every page at 10,000 jobs <= 2x its
time at 100 jobs, the same number of queries at both sizes, and the progress text on every page. Then the
TensorBoard progress read the sync adds per job (``bench/progress_tensorboard.py``): a later look, after 100 more
events, against the first look of a 100,000-event file (goal: ratio <= 0.1).

Usage::

    .venv/bin/python bench/progress.py [--big 10000] [--rounds 9]
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_progress .venv/bin/python bench/progress.py

A throwaway ``test_`` database is created and dropped. ``--quick`` (or ``RLARK_BENCH_QUICK=1``): 100 vs 300.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_console.settings")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test import Client  # noqa: E402
from django.test.utils import CaptureQueriesContext  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench.quick import in_test_db, quick_defaults  # noqa: E402

SMALL = 100
PAGE = 20
BATCH = 1000
PROGRESS_FIELDS = ["progress_step", "progress_total", "progress_rate", "progress_updated_at"]


def pages(total: int) -> dict[str, str]:
    """Label -> URL of every page measured; the last page depends on ``total`` jobs."""
    last = max(1, -(-total // PAGE))
    return {
        "HTML list, page 1": f"/jobs/?size={PAGE}",
        "HTML list, last page": f"/jobs/?size={PAGE}&page={last}",
        "API, first page": f"/api/v1/jobs/?limit={PAGE}",
        "API, last page": f"/api/v1/jobs/?limit={PAGE}&offset={(last - 1) * PAGE}",
        "Overview": "/",
    }


def measure(client: Client, url: str, rounds: int) -> tuple[float, float, int]:
    """(median ms, best ms, queries) of ``rounds`` GETs of ``url`` after one warm-up that must show a step."""
    first = client.get(url, HTTP_ACCEPT_LANGUAGE="en")
    assert first.status_code == 200, url
    assert "step " in first.content.decode(), f"no progress shown on {url}"
    times = []
    for _ in range(rounds):
        with CaptureQueriesContext(connection) as ctx:
            t0 = time.perf_counter()
            response = client.get(url, HTTP_ACCEPT_LANGUAGE="en")
            times.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return statistics.median(times), min(times), len(ctx.captured_queries)


def seed(count: int, owners: list, cluster, start: int) -> None:
    """``count`` more fleet jobs, each with a stored progress as the sync leaves it."""
    from jobs.models import Job
    from tests.fleet_seed import seed_jobs

    jobs = seed_jobs(count, owners, cluster, start=start)
    now = timezone.now()
    for i, job in enumerate(jobs, start):
        job.progress_step, job.progress_total = 100 + i, (10_000 if i % 2 else None)
        job.progress_rate, job.progress_updated_at = 3.1, now
    Job.objects.bulk_update(jobs, PROGRESS_FIELDS, batch_size=BATCH)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big", type=int, default=10_000, help="jobs at the large point")
    parser.add_argument("--rounds", type=int, default=9)
    quick_defaults(parser, big=300, rounds=2)
    in_test_db(run, parser.parse_args())


def run(args) -> None:
    from django.contrib.auth import get_user_model

    from clusters.models import Cluster

    users = get_user_model()
    owners = users.objects.bulk_create([users(username=f"user{i:03d}", password="!") for i in range(10)])
    admin = users.objects.create(username="bench-admin", password="!", is_staff=True, is_superuser=True)
    cluster = Cluster.objects.create(name="alpha", runtime="local", namespace="rlark", status="online")
    client = Client()
    client.force_login(admin)
    results: dict[int, dict[str, tuple[float, float, int]]] = {}
    seeded = 0
    for size in (SMALL, args.big):
        t0 = time.perf_counter()
        seed(size - seeded, owners, cluster, seeded)
        seeded = size
        if connection.vendor == "postgresql":
            with connection.cursor() as cur:
                cur.execute("ANALYZE")
        print(f"seeded {size} jobs with progress in {time.perf_counter() - t0:.1f} s")
        results[size] = {label: measure(client, url, args.rounds) for label, url in pages(size).items()}

    print(f"\ndatabase: {connection.vendor}; {args.rounds} GETs per page; staff user (every job visible)")
    print(f"{'page':22} {SMALL:>6} jobs {args.big:>6} jobs  ratio (median / best)  queries ({SMALL} / {args.big})")
    worst, same_queries = 0.0, True
    for label in results[SMALL]:
        (small_ms, small_best, small_q), (big_ms, big_best, big_q) = results[SMALL][label], results[args.big][label]
        ratio, best_ratio = big_ms / small_ms, big_best / small_best
        worst = max(worst, min(ratio, best_ratio))
        same_queries = same_queries and small_q == big_q
        print(
            f"{label:22} {small_ms:8.1f} ms {big_ms:8.1f} ms  {ratio:5.2f} / {best_ratio:5.2f}"
            f"         {small_q} / {big_q}"
        )
    print(f"worst time ratio {args.big}/{SMALL} jobs (the lower of median and best per page): {worst:.2f} (goal <= 2)")
    print(f"queries ratio {args.big}/{SMALL} jobs: {'1.00 on every page' if same_queries else 'NOT constant'}")
    from bench.progress_tensorboard import report

    report(10_000 if args.big <= 300 else 100_000)


if __name__ == "__main__":
    main()
