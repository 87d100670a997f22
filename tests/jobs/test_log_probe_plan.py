"""The periodic Header log probes of a steady cycle are bounded and spread out.

1,000 running Headers that a forced cycle read together must not all be read again in one later cycle (that
cycle took 2.8 s at 1,000 jobs in ``bench/sync.py``): each comes due at its own time within [0.5, 1.5) ×
``RLARK_LOG_PROBE_INTERVAL`` after its last read, and one cycle reads at most ``RLARK_LOG_PROBES_PER_CYCLE`` of
them, the most overdue first; the others still come in later cycles.
"""

from __future__ import annotations

from clusters.runtime.base import ContainerState, PodInfo
from jobs.observe import sync_fetch
from jobs.observe.sync_fetch import ClusterPlan, RowSnap, TaskSnap, container_key, plan_log_reads

HEADERS = 1000


def fleet(headers: int = HEADERS) -> tuple[ClusterPlan, dict[str, TaskSnap], dict[str, list[PodInfo]]]:
    tasks, pods, rows = {}, {}, {}
    for j in range(headers):
        name = f"j{j}-header"
        tasks[name] = TaskSnap(j, j, f"j{j}", True, True, None)
        info = PodInfo(f"{name}-0", name, 0, uid=f"uid-{j}", phase="Running", container=ContainerState(state="running"))
        pods[name] = [info]
        rows[(j, info.name)] = RowSnap(info.uid, {"key": container_key(info), "rayReady": True, "cursor": "c"})
    return ClusterPlan(7, "c7", None, False, {}, rows), tasks, pods


def cycles(plan, tasks, pods, clock, probed, limit: int = 30) -> list[int]:
    """Run 10-second periodic cycles (reading what each plans) until every header was read again: reads per cycle."""
    per_cycle, read = [], set()
    for _ in range(limit):
        clock[0] += 10
        reads = plan_log_reads(plan, tasks, pods, None)
        per_cycle.append(len(reads))
        for _snap, info, _signals in reads:
            read.add(info.name)
            probed[container_key(info)] = clock[0]
        if len(read) == len(pods):
            return per_cycle
    raise AssertionError(f"not every header was probed again: {per_cycle}")


def test_periodic_probes_come_due_spread_out_and_are_capped_per_cycle(settings, monkeypatch):
    settings.RLARK_LOG_PROBE_INTERVAL = 30
    clock = [1000.0]
    monkeypatch.setattr(sync_fetch.time, "monotonic", lambda: clock[0])
    try:
        # Spread: 300 headers read together come due over several cycles, never all in one
        settings.RLARK_LOG_PROBES_PER_CYCLE = 1000
        plan, tasks, pods = fleet(300)
        probed = sync_fetch._probed.setdefault(plan.cluster_id, {})
        probed.update({container_key(p[0]): clock[0] for p in pods.values()})  # a forced cycle read them all
        clock[0] += 14.9  # before half an interval: nothing due
        assert plan_log_reads(plan, tasks, pods, None) == []
        per_cycle = cycles(plan, tasks, pods, clock, probed)
        assert len(per_cycle) >= 3 and max(per_cycle) < 200, per_cycle

        # Cap: 1,000 headers, never more than 100 reads in a cycle, and every one still read again
        settings.RLARK_LOG_PROBES_PER_CYCLE = 100
        plan, tasks, pods = fleet(HEADERS)
        probed = sync_fetch._probed.setdefault(plan.cluster_id, {})
        keys = [container_key(p[0]) for p in pods.values()]
        probed.update(dict.fromkeys(keys, clock[0]))
        per_cycle = cycles(plan, tasks, pods, clock, probed)
        assert max(per_cycle) == 100, per_cycle

        # The most overdue first: with the cap at 1, the header waiting longest is the one read
        settings.RLARK_LOG_PROBES_PER_CYCLE = 1
        probed.update(dict.fromkeys(keys, clock[0]))
        probed[keys[500]] = clock[0] - 100
        clock[0] += 1
        (only,) = plan_log_reads(plan, tasks, pods, None)
        assert only[1].name == "j500-header-0"

        # A forced (targeted) cycle still reads every running header at once
        plan.probe_all = True
        assert len(plan_log_reads(plan, tasks, pods, None)) == HEADERS
    finally:
        sync_fetch._probed.pop(7, None)
