"""Node conditions and recent Warning events: kept, de-duplicated, 1 h retention; shown on
the node in the back office and in the Diagnosis of jobs whose Workers run there."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from clusters.models import Cluster, Node
from clusters.node_health import conditions_of, problems, recent_warnings
from clusters.runtime.base import NodeInfo
from clusters.services import node_sync

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _ev(reason, minutes_ago, node="node-1", kind="Node", type_="Warning", count=1, message="m"):
    return {
        "type": type_,
        "reason": reason,
        "message": message,
        "count": count,
        "lastTimestamp": (NOW - timedelta(minutes=minutes_ago)).isoformat(),
        "involvedObject": {"kind": kind, "name": node},
    }


def test_warning_events_dedup_latest_and_one_hour_retention():
    events = [
        _ev("EvictionThresholdMet", 30, count=3, message="old"),
        _ev("EvictionThresholdMet", 5, count=7, message="disk 95%"),
        _ev("FreeDiskSpaceFailed", 61),  # older than 1 h: dropped
        _ev("Rebooted", 10, type_="Normal"),  # Normal: dropped
        _ev("BackOff", 2, kind="Pod"),  # a Pod's warning: dropped
        _ev("DiskPressure", 1, node="node-2"),  # another node: dropped
        _ev("NodeNotReady", 20),
    ]
    kept = recent_warnings(events, "node-1", now=NOW)
    assert [(e["reason"], e["count"], e["message"]) for e in kept] == [
        ("EvictionThresholdMet", 7, "disk 95%"),
        ("NodeNotReady", 1, "m"),
    ]


def test_conditions_kept_and_problems_named():
    raw = [
        {"type": "Ready", "status": "True"},
        {"type": "DiskPressure", "status": "True", "reason": "KubeletHasDiskPressure", "message": "disk"},
        {"type": "MemoryPressure", "status": "False"},
        {"type": "PIDPressure", "status": "False"},
        {"type": "NetworkUnavailable", "status": "False"},
        {"type": "SomethingElse", "status": "True"},
    ]
    kept = conditions_of(raw)
    assert [c["type"] for c in kept] == ["Ready", "DiskPressure", "MemoryPressure", "PIDPressure", "NetworkUnavailable"]
    assert problems(kept) == ["DiskPressure"]
    assert problems([{"type": "Ready", "status": "Unknown"}]) == ["NotReady"]


@pytest.mark.django_db
def test_sync_stores_them_and_diagnosis_names_disk_pressure_on_the_workers_node(client, admin_user, alice):
    from jobs.explain.diagnosis import diagnose_job
    from jobs.models import Job, Pod, Task

    cluster = Cluster.objects.create(name="k", runtime="kubernetes", status="online")
    recent = datetime.now(UTC) - timedelta(minutes=3)
    info = NodeInfo(
        name="gpu-9",
        labels={"pool": "gpu"},
        capacity={"nvidia.com/gpu": 8},
        conditions=tuple(
            conditions_of([{"type": "Ready", "status": "True"}, {"type": "DiskPressure", "status": "True"}])
        ),
        events=(
            {"reason": "EvictionThresholdMet", "message": "disk 95%", "count": 4, "last_time": recent.isoformat()},
        ),
    )
    node_sync.apply_node_infos(cluster, [info])
    node = Node.objects.get(name="gpu-9")
    assert node.conditions[1]["type"] == "DiskPressure" and node.events[0]["count"] == 4
    job = Job.objects.create(name="j", owner=alice, spec={})
    task = Task.objects.create(job=job, name="j-rollout", template_name="rollout", cluster=cluster, replicas=1)
    Pod.objects.create(task=task, name="j-rollout-0", node="gpu-9", phase="Running")
    found = [f for f in diagnose_job(job).findings if f.code == "node_condition"]
    assert len(found) == 1 and found[0].pod == "j-rollout-0"
    assert "gpu-9" in found[0].detail("en") and "DiskPressure" in found[0].detail("en")
    assert "EvictionThresholdMet" in found[0].detail("en")
    client.force_login(admin_user)
    page = client.get(f"/admin/clusters/node/{node.pk}/change/").content.decode()
    assert "DiskPressure=True" in page and "EvictionThresholdMet" in page
