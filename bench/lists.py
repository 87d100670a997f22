"""Job lists at fleet scale: the same pages at 100 and at 10,000 jobs, as a ratio, with query counts.

Seeds jobs as reconcile and sync leave them (``tests/fleet_seed.py``: 2 Tasks and 3 Pods per job, 100 owners),
then times, through Django's test client as a staff user (who sees every job), the first and the last page of:
the HTML job list (``/jobs/``), the API (``/api/v1/jobs/``), the back office (``/admin/jobs/job/``), and the
filtered lists (a phase, an owner, a name search). Goal: every page at 10,000 jobs <= 2x its time at 100 jobs,
and the same number of queries at both sizes. Also prints PostgreSQL's plan of the API's page query.

Usage::

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_lists .venv/bin/python bench/lists.py [--big 10000]

A throwaway ``test_`` database is created and dropped. ``--quick`` (or ``RLARK_BENCH_QUICK=1``): 100 vs 1,000.
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

from bench.quick import in_test_db, quick_defaults  # noqa: E402

SMALL = 100
PAGE = 20  # rows per page: every page below is full at 100 jobs too, so both sizes render the same rows
SEARCH_PAGE = 10  # "run 1" matches 11 jobs of 100 (run 1, 10-19)


def pages(total: int) -> dict[str, str]:
    """Label -> URL of every list page measured; the last page depends on ``total`` jobs. ``user000`` owns every
    4th job (``tests.fleet_seed.owner_of``)."""
    last_html = max(1, -(-total // PAGE))
    last_offset = (last_html - 1) * PAGE
    last_admin = max(0, -(-total // 100) - 1)  # the back office shows 100 rows a page, numbered from 0
    return {
        "HTML list, page 1": f"/jobs/?size={PAGE}",
        "HTML list, last page": f"/jobs/?size={PAGE}&page={last_html}",
        "HTML list, phase=Running": f"/jobs/?size={PAGE}&phase=Running",
        "HTML list, name search": f"/jobs/?size={SEARCH_PAGE}&q=run+1",
        "HTML list, an owner's own": f"owner:/jobs/?size={PAGE}",
        "API, first page": f"/api/v1/jobs/?limit={PAGE}",
        "API, last page": f"/api/v1/jobs/?limit={PAGE}&offset={last_offset}",
        "API, owner filter": f"/api/v1/jobs/?limit={PAGE}&owner=user000",
        "API, phase + search": f"/api/v1/jobs/?limit={SEARCH_PAGE}&phase=Running,Failed&search=fleet-0",
        "back office, page 1": "/admin/jobs/job/",
        "back office, last page": f"/admin/jobs/job/?p={last_admin}",
    }


def measure(clients: dict[str, Client], url: str, rounds: int) -> tuple[float, float, int]:
    """(median ms, best ms, queries) of ``rounds`` GETs of ``url`` after one warm-up; ``owner:`` URLs are fetched
    as ``user000``, the others as the staff user."""
    who, _, path = url.rpartition(":") if url.startswith("owner:") else ("staff", "", url)
    client, url = clients[who], path
    assert client.get(url).status_code == 200, url
    times = []
    for _ in range(rounds):
        with CaptureQueriesContext(connection) as ctx:
            t0 = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - t0) * 1000)
        assert response.status_code == 200, (url, response.status_code)
    return statistics.median(times), min(times), len(ctx.captured_queries)


def explain_api_page(offset: int) -> str:
    if connection.vendor != "postgresql":
        return "(EXPLAIN shown on PostgreSQL only)"
    from jobs.models import Job

    qs = Job.objects.select_related("owner").order_by("-created_at")[offset : offset + PAGE]
    return qs.explain()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--big", type=int, default=10_000, help="jobs at the large point")
    parser.add_argument("--rounds", type=int, default=9)
    quick_defaults(parser, big=300, rounds=2)
    in_test_db(run, parser.parse_args())


def run(args) -> None:
    from django.contrib.auth import get_user_model

    from clusters.models import Cluster
    from tests.fleet_seed import seed_jobs

    users = get_user_model()
    # no passwords: hashing 100 of them (PBKDF2) would take longer than the bench; the clients force_login
    owners = users.objects.bulk_create([users(username=f"user{i:03d}", password="!") for i in range(100)])
    admin = users.objects.create(username="bench-admin", password="!", is_staff=True, is_superuser=True)
    cluster = Cluster.objects.create(name="alpha", runtime="local", namespace="rlark", status="online")
    clients = {"staff": Client(), "owner": Client()}
    clients["staff"].force_login(admin)
    clients["owner"].force_login(owners[0])

    results: dict[int, dict[str, tuple[float, float, int]]] = {}
    seeded = 0
    for size in (SMALL, args.big):
        t0 = time.perf_counter()
        seed_jobs(size - seeded, owners, cluster, start=seeded)
        seeded = size
        if connection.vendor == "postgresql":
            with connection.cursor() as cur:
                cur.execute("ANALYZE")
        print(f"seeded {size} jobs ({2 * size} Tasks, {3 * size} Pods) in {time.perf_counter() - t0:.1f} s")
        results[size] = {label: measure(clients, url, args.rounds) for label, url in pages(size).items()}

    print(f"\ndatabase: {connection.vendor}; {args.rounds} GETs per page; staff user (every job visible) unless noted")
    print(f"{'page':28} {SMALL:>6} jobs {args.big:>6} jobs  ratio (median / best)  queries ({SMALL} / {args.big})")
    worst = 0.0
    for label in results[SMALL]:
        (small_ms, small_best, small_q), (big_ms, big_best, big_q) = results[SMALL][label], results[args.big][label]
        ratio, best_ratio = big_ms / small_ms, big_best / small_best
        worst = max(worst, min(ratio, best_ratio))
        times = f"{small_ms:8.1f} ms {big_ms:8.1f} ms  {ratio:5.2f} / {best_ratio:5.2f}"
        print(f"{label:28} {times}         {small_q} / {big_q}")
    print(f"worst ratio {args.big}/{SMALL} jobs (the lower of median and best per page): {worst:.2f} (goal <= 2)")
    last_offset = (max(1, -(-args.big // PAGE)) - 1) * PAGE
    print(f"\nplan of the API's last page at {args.big} jobs:\n{explain_api_page(last_offset)}")


if __name__ == "__main__":
    main()
