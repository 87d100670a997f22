"""Check 3 of seed 02-confirm-job-running: Ray formed as expected.

Seed 02, check 3: "日志显示 Ray Head 和预期 Worker 已经加入本次 Ray 集群，运行脚本开始执行", with each Worker's
``RLINF_NODE_RANK`` in the range of the roles' order. From the Workers' log scans (``jobs.observe.log_markers``;
the wrapper markers of upstream-rlark 5.1-5.3, rlinf.md 3):

- every Worker logged ``RLINF_NODE_RANK: <n>`` equal to its expected rank (``rank_start + ordinal``, in
  ``0..total-1``) and connected (``Head is reachable at ...``);
- the header's check counted the expected nodes (``Cluster is ready: A nodes available (required: N).``), logged
  no ``Warning: Ray cluster check failed, proceeding anyway.``, and its run script started.
"""

from __future__ import annotations

from django.utils.translation import gettext_noop

from jobs.explain.diagnosis import stage_label
from jobs.explain.runcheck_input import MET, NOT_MET, PodRow, RunCheckInput, TaskView, missing_status, tr
from jobs.observe.log_markers import LogScan


def check_ray(data: RunCheckInput, lang: str, scans: dict[str, LogScan]) -> tuple[str, list[str]]:
    """Check 3 over ``scans`` (Pod name -> its log scan) -> ``(status, evidence lines in lang)``: problems first
    (``not_met``), then what has not happened yet (``to_confirm`` until the max wait), then the evidence."""
    total = sum(t.replicas for t in data.tasks)
    ev: list[str] = []
    bad: list[str] = []
    missing: list[str] = []
    pods = {(p.task, p.ordinal): p for p in data.pods}
    for task in data.tasks:
        for ordinal in range(task.replicas):
            pod = pods.get((task.name, ordinal))
            _worker_lines(task, ordinal, pod, scans, total, lang, ev, bad, missing)
    head_pod = next((p for t in data.tasks if t.head for p in data.pods if p.task == t.name), None)
    head_scan = scans.get(head_pod.name) if head_pod else None
    if head_scan is not None:
        _header_lines(head_scan, total, lang, ev, bad, missing)
    if bad:
        return NOT_MET, bad + missing + ev
    if missing:
        return missing_status(data), missing + ev
    return MET, ev


def _worker_lines(
    task: TaskView,
    ordinal: int,
    pod: PodRow | None,
    scans: dict[str, LogScan],
    total: int,
    lang: str,
    ev: list[str],
    bad: list[str],
    missing: list[str],
) -> None:
    """One planned Worker (``task``, ``ordinal``; ``pod`` None when it has no Pod): no start-up log yet ->
    ``missing``; a wrong ``RLINF_NODE_RANK`` -> ``bad``; the header's rank -> ``ev``; a Worker -> :func:`_joined`."""
    expected = task.rank_start + ordinal
    name = pod.name if pod else f"{task.name}-{ordinal}"
    scan = scans.get(name) if pod else None
    if scan is None or not scan.markers:
        missing.append(
            tr(
                lang,
                gettext_noop("Worker {pod} ({role}) has no start-up log and has not joined the Ray cluster."),
                pod=name,
                role=task.role,
            )
        )
        return
    rank = scan.rank
    if rank is None or rank != expected or not 0 <= rank < total:
        bad.append(
            tr(
                lang,
                gettext_noop("Worker {pod} logged RLINF_NODE_RANK {rank}, expected {want} (range 0-{last})."),
                pod=name,
                rank="-" if rank is None else rank,
                want=expected,
                last=total - 1,
            )
        )
        return
    if task.head:
        ev.append(tr(lang, gettext_noop("Header {pod}: RLINF_NODE_RANK: {rank}."), pod=name, rank=rank))
        return
    _joined(task, name, rank, scan, lang, ev, bad, missing)


def _joined(
    task: TaskView,
    name: str,
    rank: int,
    scan: LogScan,
    lang: str,
    ev: list[str],
    bad: list[str],
    missing: list[str],
) -> None:
    """A Worker with the right rank: its Ray process exited with a failure -> ``bad``; it reached the head
    (``Head is reachable at ...``, or connected without waiting for the head's address) -> ``ev``; otherwise
    ``missing`` with the last wrapper stage it reached."""
    exit_marker = scan.last("worker_exit")
    reach = scan.last("head_reachable")
    if exit_marker is not None and exit_marker.failed:
        bad.append(tr(lang, gettext_noop("Worker {pod}'s Ray process exited: {line}"), pod=name, line=exit_marker.text))
    elif reach is not None or (scan.has("connect") and scan.head_wait_attempts == 0 and not scan.has("head_ip")):
        joined = reach.text if reach is not None else scan.last("connect").text
        ev.append(
            tr(
                lang,
                gettext_noop("Worker {pod}: RLINF_NODE_RANK: {rank} (expected {rank}), {line}"),
                pod=name,
                rank=rank,
                line=joined,
            )
        )
    else:
        last = scan.last_stage
        missing.append(
            tr(
                lang,
                gettext_noop("Worker {pod} ({role}) has not connected to the Ray head; last stage: {stage}."),
                pod=name,
                role=task.role,
                stage=f"{stage_label(last.key, lang)} ({last.text})" if last else "-",
            )
        )


def _header_lines(head_scan: LogScan, total: int, lang: str, ev: list[str], bad: list[str], missing: list[str]) -> None:
    """The header's log: the cluster check (failed, or counted ``total`` nodes), RLinf still waiting for nodes
    after the cluster formed, and the run script's start."""
    failed = head_scan.first("cluster_check_failed")
    if failed is not None:
        bad.append(tr(lang, gettext_noop("Header log: {line}"), line=failed.text))
    if head_scan.check_passed and head_scan.check_required is not None:
        line = f"Cluster is ready: {head_scan.check_alive_max} nodes available (required: {head_scan.check_required})."
        if head_scan.check_required != total:
            bad.append(
                tr(
                    lang,
                    gettext_noop("The header checked for {n} nodes but {total} Workers are expected."),
                    n=head_scan.check_required,
                    total=total,
                )
            )
        else:
            ev.append(tr(lang, gettext_noop("Header node check: {line}"), line=line))
    elif failed is None:
        missing.append(tr(lang, gettext_noop("The header has not confirmed the node count yet.")))
    if head_scan.rlinf_waiting and head_scan.rlinf_waiting[1] < head_scan.rlinf_waiting[0]:
        formed = head_scan.rlinf_cluster_line
        if formed is None or formed[0] < (head_scan.rlinf_waiting_line or (0, ""))[0]:
            bad.append(tr(lang, gettext_noop("RLinf log: {line}"), line=head_scan.rlinf_waiting_line[1]))
    run = head_scan.first("run_script") or head_scan.first("no_run_script")
    if run is not None:
        ev.append(tr(lang, gettext_noop("The header's run script started: {line}"), line=run.text))
    else:
        missing.append(tr(lang, gettext_noop("The run script has not started yet.")))
