"""Job lists cost the same number of queries at any size and any page, and use the list indexes.

A small fleet (12 jobs) and a large one (240 jobs, 480 Tasks, 720 Pods), the first and the last page of the HTML
list, the API and the back office, as a staff user (every job) and as an owner. The Worker counts the page shows
come from the page's own Tasks (Task counts are aggregated only for the page shown).
"""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.db import connection
from django.test.utils import CaptureQueriesContext

from clusters.models import Cluster
from jobs.models import Job, Phase
from tests.fleet_seed import seed_jobs

pytestmark = pytest.mark.django_db

SMALL, LARGE = 12, 240


@pytest.fixture
def fleet():
    users = get_user_model()
    owners = users.objects.bulk_create([users(username=f"user{i:03d}", password="!") for i in range(5)])
    staff = users.objects.create(username="ops", password="!", is_staff=True, is_superuser=True)
    cluster = Cluster.objects.create(name="alpha", runtime="local", namespace="rlark", status="online")
    state = {"seeded": 0}

    def grow(size: int) -> None:
        seed_jobs(size - state["seeded"], owners, cluster, start=state["seeded"])
        state["seeded"] = size

    return grow, staff, owners[0]


def pages(total: int) -> list[str]:
    last = -(-total // 10)
    return [
        "/jobs/?size=10",
        f"/jobs/?size=10&page={last}",
        "/jobs/?size=10&phase=Running&q=fleet",
        "/api/v1/jobs/?limit=10",
        f"/api/v1/jobs/?limit=10&offset={(last - 1) * 10}",
        "/api/v1/jobs/?limit=10&phase=Running,Failed&search=run&owner=user000",
        "/admin/jobs/job/",
        f"/admin/jobs/job/?p={-(-total // 100) - 1}",
    ]


def counts(client, user, total: int) -> dict[str, int]:
    """``{url: queries}`` of every page ``user`` may open (the back office is staff-only)."""
    client.force_login(user)
    out = {}
    for url in pages(total) if user.is_staff else pages(total)[:6]:
        with CaptureQueriesContext(connection) as ctx:
            response = client.get(url)
        assert response.status_code == 200, url
        out[url] = len(ctx.captured_queries)
    return out


def test_list_query_counts_do_not_grow_with_the_fleet(client, fleet):
    grow, staff, owner = fleet
    grow(SMALL)
    small_staff, small_owner = counts(client, staff, SMALL), counts(client, owner, SMALL)
    grow(LARGE)
    large_staff, large_owner = counts(client, staff, LARGE), counts(client, owner, LARGE)
    assert list(large_staff.values()) == list(small_staff.values()), (small_staff, large_staff)
    assert list(large_owner.values()) == list(small_owner.values()), (small_owner, large_owner)
    # the pinned figures: 5 for an HTML list page, 4 for an API page (session, user, count, page)
    assert list(large_staff.values())[:3] == [5, 5, 5]
    assert list(large_staff.values())[3:6] == [4, 4, 4]


def test_html_list_counts_workers_of_the_page_only(client, fleet):
    grow, staff, _ = fleet
    grow(LARGE)
    client.force_login(staff)
    with CaptureQueriesContext(connection) as ctx:
        html = client.get("/jobs/?size=10").content.decode()
    task_queries = [q["sql"] for q in ctx.captured_queries if '"jobs_task"' in q["sql"]]
    assert len(task_queries) == 1, task_queries
    assert "GROUP BY" in task_queries[0] and " IN (" in task_queries[0]  # the page's job ids only
    newest = Job.objects.order_by("-created_at")[:10]
    for job in newest:  # each row shows its own Workers: Running 3/3 ready, Succeeded 3/3 completed, others 0/3
        expected = "3/3" if job.phase in (Phase.RUNNING, Phase.SUCCEEDED) else "0/3"
        row = html[html.index(f'data-testid="job-row-{job.name}"') :]
        row = row[: row.index("</tr>")]
        assert f'data-testid="job-workers">{expected}<' in row, job.name


def test_list_page_queries_use_the_created_at_index(fleet):
    if connection.vendor != "postgresql":
        pytest.skip("index choice is checked on PostgreSQL (CI); SQLite's planner is not the production one")
    grow, _, owner = fleet
    grow(LARGE)
    with connection.cursor() as cur:
        cur.execute("ANALYZE jobs_job")
    with connection.cursor() as cur:
        cur.execute("SET enable_seqscan = off")  # a 240-row table would be scanned; ask whether an index serves
        try:
            plan = Job.objects.order_by("-created_at")[200:210].explain()
            owner_plan = Job.objects.filter(owner=owner).order_by("-created_at")[0:10].explain()
            phase_plan = Job.objects.filter(phase=Phase.RUNNING).order_by("-created_at")[0:10].explain()
            search_plan = Job.objects.order_by().filter(name__icontains="leet-001").explain()
        finally:
            cur.execute("SET enable_seqscan = on")
    # newest first straight off an index (no scan and sort of every job), alone or within an owner / a phase
    assert "job_created_idx" in plan and "Sort" not in plan, plan
    for filtered in (owner_plan, phase_plan):
        assert "Index Scan using job_" in filtered and "Sort" not in filtered, filtered
    assert "job_name_trgm_idx" in search_plan, search_plan
