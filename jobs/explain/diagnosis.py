"""Automatic diagnosis of a Job: per-Worker stage timelines from the wrapper markers and classified errors.

Sources (requirements):

- upstream-rlark 5.1/5.3: the wrapper markers, byte-identical, in the order the scripts print them; 5.2 the
  ``ray_check.py`` lines; RLark Console's wrappers add ``Run script exited with code <n>`` (head) and exit the
  worker with the Ray process's code (``Ray worker process exited with code <n>``).
- rlinf.md 3 and 7: RLinf's ``Waiting for N nodes to be ready, currently k nodes available.``, ``RLinf is running
  on a cluster with N nodes ...``, ``Exiting main process due to a failure upon worker execution.``.
- seed 05-troubleshooting-jobs-workers: the "last completed stage" table (stage -> judgement and next step) and the
  "error type" table (symptom -> first suspicion -> next step); the next steps are shown in the user's language
  (English msgids here, a faithful translation; the zh_Hans catalog of ``jobs`` quotes the seed's Chinese).

Everything here is pure (plain strings and dicts in, dataclasses out) except :func:`diagnose_job`, which reads the
Job's Pods from the database and their logs from the runtime.

Shapes:

- ``container`` dicts: ``ContainerState`` as a dict (``state``, ``reason``, ``message``, ``exit_code``,
  ``last_exit_code``, ``last_reason``, ``restart_count``, ``ready``); camelCase keys are accepted too.
- ``events``: ``[{"type", "reason", "message", ...}]`` (``PodEvent`` as a dict).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from django.utils.translation import gettext_noop

from clusters.runtime.base import IMAGE_PULL_REASONS
from jobs.explain import domain_findings, node_count, pending
from jobs.explain import failure as failures
from jobs.explain.timeline import fold_repeats
from jobs.observe import log_scans, node_findings
from jobs.observe.log_markers import ERROR, SIGNATURES, WARNING, LogScan, Marker, scan_log
from jobs.observe.worker_logs import read_logs
from rlark_console.language import translate

CRASH_LOOP_RESTARTS = 3  # restarts above which a crash-looping container is reported (peers 3.3 S1)

# --- messages: English msgids; their Chinese, in the zh_Hans catalog of ``jobs``, is quoted from seed 05 / 02 where
# the seed has it ------------------------------------------------------------------------------------------------

# stage -> (label, judgement/next step). Seed 05 "最后完成的阶段" table.
STAGE_TEXT: dict[str, tuple[str, str]] = {
    "none": (
        gettext_noop("No stage marker yet"),
        gettext_noop(
            "The log has no wrapper marker yet: check that the Pod exists, that the image was pulled, and the Pod's"
            " phase and events."
        ),
    ),
    "rank": (
        gettext_noop("Rank computation or wrapper preparation"),
        gettext_noop(
            "If it stopped before the prepare-script marker, record this Worker's first error, check the Pod"
            " information the wrapper needs and the chosen platform settings, and do not override the platform's"
            " reserved environment variables."
        ),
    ),
    "ssh": (
        gettext_noop("SSH key injection"),
        gettext_noop(
            "If it stopped before the prepare-script marker, record this Worker's first error, check the Pod"
            " information the wrapper needs and the chosen platform settings, and do not override the platform's"
            " reserved environment variables."
        ),
    ),
    "prepare": (
        gettext_noop("Role prepare script"),
        gettext_noop(
            "The first error after this comes from the role's prepareScript. Fix the image, command, path or"
            " permissions; when the prepare script fails, Ray has not started yet."
        ),
    ),
    "domain_ip": (
        gettext_noop("Network domain address"),
        gettext_noop("The head resolved its network-domain address; next it starts the Ray head and waits for nodes."),
    ),
    "head_wait": (
        gettext_noop("Head start and node check"),
        gettext_noop(
            "Compare with the expected replicas: check that every Worker has a Pod, finished its prepare script"
            " and started connecting to the head."
        ),
    ),
    "cluster_ready": (
        gettext_noop("Ray cluster information"),
        gettext_noop(
            "Do not judge the cluster complete from the head's ready text alone: also check the head's ray status"
            " output and every expected Worker's connection log and Pod state."
        ),
    ),
    "connect": (
        gettext_noop("Worker resolving and connecting to the head"),
        gettext_noop(
            "Repeated waiting means the Worker has not yet both resolved the head's name and reached its port."
            " Check the head Pod, the head Service, the agent and the required network domain; do not just restart"
            " the Worker."
        ),
    ),
    "head_ip": (
        gettext_noop("Head address resolved"),
        gettext_noop(
            "Repeated waiting means the Worker has not yet both resolved the head's name and reached its port."
            " Check the head Pod, the head Service, the agent and the required network domain; do not just restart"
            " the Worker."
        ),
    ),
    "head_reachable": (
        gettext_noop("Head reachable, Ray worker started"),
        gettext_noop(
            "The Worker reached the head and started its Ray process; confirm with the head's ray status that it"
            " joined the cluster."
        ),
    ),
    "run_script": (
        gettext_noop("Head run script"),
        gettext_noop(
            "For a compliant single-replica head Task, the Ray wrapper has reached the user command. If several Pods"
            " print this marker, treat it as the multi-head replica defect first and do not go on judging the"
            " workload command."
        ),
    ),
    "no_run_script": (
        gettext_noop("Head without run script"),
        gettext_noop("No run script was provided; the head keeps the cluster alive."),
    ),
    "run_exit": (
        gettext_noop("Run script finished"),
        gettext_noop("The run script has finished; exit code 0 means success, anything else failure."),
    ),
    "worker_exit": (
        gettext_noop("Ray worker process ended"),
        gettext_noop(
            "A non-zero Ray worker exit code in the log means failure; do not judge the Worker healthy from the"
            " container's final exit code or the summary status alone."
        ),
    ),
}

# Labels of non-stage markers on the timeline.
MARKER_LABEL: dict[str, str] = {
    "ray_cli_missing": gettext_noop("Ray CLI check failed"),
    "cluster_check_failed": gettext_noop("Ray cluster check failed"),
    "stopping": gettext_noop("Stopping Ray"),
}

# finding code -> (title, suspicion, next step). Seed 05 tables.
FINDING_TEXT: dict[str, tuple[str, str, str]] = {
    "image_pull": (
        gettext_noop("Image pull, permission or not-found error"),
        gettext_noop("Image reference, registry credentials, target cluster network"),
        gettext_noop(
            "Compare with the digest in the launch record; handle credentials only through the Secret mechanism"
            " your organisation allows."
        ),
    ),
    "shm_or_disk": (
        gettext_noop("No space left on device, /dev/shm or shared-memory error"),
        gettext_noop("Not enough container scratch space or shared memory"),
        gettext_noop(
            "The job wizard cannot configure a memory-backed volume for /dev/shm. Stop retrying, keep the logs and"
            " ask the platform administrator for a Pod configuration that works; do not mount the host's /dev/shm"
            " to work around it."
        ),
    ),
    "nccl": (
        gettext_noop("NCCL init, socket, timeout or collective hang"),
        gettext_noop("Worker count, GPU/CUDA/NCCL compatibility, network interfaces and cross-node network"),
        gettext_noop(
            "First confirm that every Ray worker has joined, then check each role's image and the network"
            " interface the workload version requires. RLark does not diagnose NCCL automatically."
        ),
    ),
    "ray_partial": (
        gettext_noop("Ray sees only part of the nodes"),
        gettext_noop("Head Service, DNS, ports, the worker wrapper script or the network domain"),
        gettext_noop(
            "Compare the head's ray status with every expected Worker's connection log; do not judge the cluster"
            " complete from the head's ready text alone."
        ),
    ),
    "ray_check_failed": (
        gettext_noop("Ray cluster check failed (the script went on)"),
        gettext_noop(
            "The head's node check timed out; the script still printed the cluster information and tried the run script"
        ),
        gettext_noop(
            "Even after “Ray cluster is ready” or “Executing run script”, also check the head's"
            " ray status output and every expected Worker's connection log and Pod state."
        ),
    ),
    "prepare_failed": (
        gettext_noop("Prepare script failed"),
        gettext_noop("The role's prepareScript"),
        gettext_noop(
            "The first error after the marker comes from the role's prepareScript. Fix the image, command, path or"
            " permissions; when the prepare script fails, Ray has not started yet."
        ),
    ),
    "ray_cli_missing": (
        gettext_noop("Ray CLI missing"),
        gettext_noop("There is no executable ray in the activated environment"),
        gettext_noop(
            "Use an image with a pinned Ray version, or activate a pinned environment in the prepare script. Do not"
            " install it ad hoc in the WebTerminal and carry on."
        ),
    ),
    "worker_exit": (
        gettext_noop("Ray worker process exited with a non-zero code"),
        gettext_noop("The Ray worker process failed"),
        gettext_noop(
            "Treat a non-zero Ray worker exit code in the log as a failure; do not judge the Worker healthy from the"
            " container's final exit code or the summary status. When contacting the platform administrator, give"
            " the redacted logs of the head and the first failing Worker, the last completed stage, the node-check"
            " warning, the worker process exit code and whether RAY_TEMP_DIR is set."
        ),
    ),
    "run_script_failed": (
        gettext_noop("The head's run script exited with a non-zero code"),
        gettext_noop("The head Task's run command"),
        gettext_noop(
            "Tell apart whether the failure is in the image/mounts, the prepare script, Ray cluster formation or the"
            " head Task's run command; check that the script's paths are container mount paths and the environment"
            " variable names are right."
        ),
    ),
    "multi_head": (
        gettext_noop("Several Pods ran the run script (multiple head replicas)"),
        gettext_noop("The head: true Task must have exactly 1 replica"),
        gettext_noop(
            "When several Pods print this marker, treat it as the multi-head replica defect first and do not go on"
            " judging the workload command. Stop retrying and fix the selector first; several replicas each start a"
            " Ray head and the run script, which can duplicate training and produce conflicting logs."
        ),
    ),
    "head_unreachable": (
        gettext_noop("The Worker cannot reach the head"),
        gettext_noop("Head Pod, head Service, agent or network domain"),
        gettext_noop(
            "Repeated waiting means the Worker has not both resolved the head's name and reached its port. Check the"
            " head Pod, the head Service, the agent and the required network domain; do not just restart the Worker."
        ),
    ),
    "crash_loop": (
        gettext_noop("Container keeps restarting"),
        gettext_noop("A failure in the image/mounts, prepare script, Ray cluster formation or run command"),
        gettext_noop(
            "Open the failing role and Worker in the Logs tab and find the first error, not just the last line; ask"
            " an authorised operator to check the Pod's scheduling events, container state and restart count."
        ),
    ),
    "oom_killed": (
        gettext_noop("Container killed for lack of memory (OOMKilled)"),
        gettext_noop("Not enough container memory"),
        gettext_noop(
            "When the fix needs CPU, memory, /dev/shm, extra containers, probes or other Pod fields the wizard does"
            " not support, do not use the edit or clone dialog. Save the Job YAML first, then ask the platform"
            " administrator which configuration works."
        ),
    ),
    "robot": (
        gettext_noop("Robot SDK, connection, timeout or device error"),
        gettext_noop("External device, driver, permissions and on-site link"),
        gettext_noop(
            "Stop automatic retries and notify the on-site operator; classifying log errors does not replace an"
            " emergency stop, power cut or safety-state confirmation."
        ),
    ),
    "rlinf_failure": (
        gettext_noop("RLinf exited after a worker execution failure"),
        gettext_noop("An RLinf worker failed during execution"),
        gettext_noop(
            "Pause streaming or filter the text to find the first error, not just the last line; tell apart whether"
            " the failure is in the image/mounts, prepare script, Ray cluster formation or the head's run command."
        ),
    ),
}

# Extra per-finding detail sentences with parameters.
DETAIL_TEXT: dict[str, str] = {
    "ray_partial_rlinf": gettext_noop("RLinf needs {n} nodes; only {k} are available."),
    "ray_partial_check": gettext_noop("The head's cluster check needed {n} nodes and saw at most {a} alive."),
    "worker_exit": gettext_noop("Exit code {code}."),
    "run_script_failed": gettext_noop("Exit code {code}."),
    "multi_head": gettext_noop("Pods that ran the run script: {pods}."),
    "head_unreachable": gettext_noop("Waited {attempts} times without Head is reachable."),
    "crash_loop": gettext_noop("Restarted {restarts} times ({reason})."),
    "image_pull": gettext_noop("{reason}: {message}"),
}


def stage_label(key: str, lang: str = "zh-hans") -> str:
    """Human label of a stage or marker key in ``lang`` (the key itself when it has none)."""
    if key in STAGE_TEXT:
        return translate(STAGE_TEXT[key][0], lang)
    return translate(MARKER_LABEL[key], lang) if key in MARKER_LABEL else key


def stage_advice(key: str, lang: str = "zh-hans") -> str:
    """Seed 05's judgement and next step for ``key`` as the last completed stage, in ``lang``."""
    return translate(STAGE_TEXT.get(key, STAGE_TEXT["none"])[1], lang)


# --- data ---------------------------------------------------------------------------------------------------


@dataclass
class Finding:
    """One classified problem. ``code`` is a key of ``FINDING_TEXT``; ``severity`` ``error`` | ``warning``;
    ``pod``/``role`` name the Worker ("" for job-wide findings); ``line_no``/``line`` the evidence line."""

    code: str
    severity: str
    pod: str = ""
    role: str = ""
    line_no: int | None = None
    line: str = ""
    detail_key: str = ""
    params: dict[str, Any] = field(default_factory=dict)

    def title(self, lang: str = "zh-hans") -> str:
        return translate(FINDING_TEXT[self.code][0], lang)

    def suspicion(self, lang: str = "zh-hans") -> str:
        return translate(FINDING_TEXT[self.code][1], lang)

    def next_step(self, lang: str = "zh-hans") -> str:
        return translate(FINDING_TEXT[self.code][2], lang)

    def detail(self, lang: str = "zh-hans") -> str:
        """The detail sentence with the finding's params, in ``lang``; "" when it has none or a param is missing."""
        key = self.detail_key or self.code
        if key not in DETAIL_TEXT:
            return ""
        try:
            return translate(DETAIL_TEXT[key], lang).format(**self.params)
        except (KeyError, IndexError, ValueError):
            return ""

    def to_dict(self, lang: str = "zh-hans") -> dict[str, Any]:
        return {
            "code": self.code,
            "severity": self.severity,
            "pod": self.pod,
            "role": self.role,
            "lineNo": self.line_no,
            "line": self.line,
            "title": self.title(lang),
            "suspicion": self.suspicion(lang),
            "detail": self.detail(lang),
            "nextStep": self.next_step(lang),
        }


@dataclass
class WorkerInput:
    """What diagnosis needs about one Worker (plain data; see :func:`worker_inputs`)."""

    pod: str
    role: str = ""
    head: bool = False
    expected_rank: int | None = None
    phase: str = ""
    log: str | list[str] = ""
    container: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    restart_count: int = 0
    exists: bool = True  # False when the sync has not seen a Pod for this expected replica yet
    scan: LogScan | None = None  # the log's stored scan (``jobs.observe.log_scans``); else ``log`` is scanned


@dataclass
class WorkerDiagnosis:
    """Timeline and findings of one Worker."""

    worker: WorkerInput
    scan: LogScan
    findings: list[Finding] = field(default_factory=list)

    @property
    def last_stage(self) -> Marker | None:
        return self.scan.last_stage

    @property
    def last_stage_key(self) -> str:
        m = self.last_stage
        return m.key if m else "none"

    @property
    def first_error(self) -> tuple[int, str] | None:
        m = self.last_stage
        return self.scan.first_error_after(m.line_no if m else 0)

    def to_dict(self, lang: str = "zh-hans") -> dict[str, Any]:
        err = self.first_error
        last = self.last_stage
        return {
            "pod": self.worker.pod,
            "role": self.worker.role,
            "head": self.worker.head,
            "phase": self.worker.phase,
            "rank": self.scan.rank,
            "expectedRank": self.worker.expected_rank,
            "timeline": fold_repeats(  # a marker repeated in a row is one entry with a count
                [
                    {
                        "key": m.key,
                        "label": stage_label(m.key, lang),
                        "lineNo": m.line_no,
                        "line": m.text,
                        "kind": m.kind,
                        "failed": m.failed,
                        "last": m is last,
                    }
                    for m in self.scan.markers
                ]
            ),
            "headWaitAttempts": self.scan.head_wait_attempts,
            "lastStage": self.last_stage_key,
            "lastStageLabel": stage_label(self.last_stage_key, lang),
            "advice": stage_advice(self.last_stage_key, lang),
            "firstError": {"lineNo": err[0], "line": err[1]} if err else None,
            "findings": [f.to_dict(lang) for f in self.findings],
        }


@dataclass
class JobDiagnosis:
    """All Workers' diagnoses plus job-wide findings (multi-head)."""

    workers: list[WorkerDiagnosis] = field(default_factory=list)
    job_findings: list[Finding] = field(default_factory=list)
    failure: failures.JobFailure | None = None  # why a Failed job failed (``jobs.explain.failure``)

    @property
    def findings(self) -> list[Finding]:
        out = list(self.job_findings)
        for w in self.workers:
            out.extend(w.findings)
        return out

    def codes(self) -> set[str]:
        return {f.code for f in self.findings}

    @property
    def multi_head(self) -> bool:
        return any(f.code == "multi_head" for f in self.job_findings)

    def to_dict(self, lang: str = "zh-hans") -> dict[str, Any]:
        failed = self.failure
        return {
            "multiHead": self.multi_head,
            "failure": failed.to_dict(lang, stage_label(failed.stage, lang), stage_advice(failed.stage, lang))
            if failed
            else None,
            "findings": [f.to_dict(lang) for f in self.findings],
            "workers": [w.to_dict(lang) for w in self.workers],
        }


# --- classification -----------------------------------------------------------------------------------------


def _get(d: dict[str, Any], *keys: str, default: Any = None) -> Any:
    for k in keys:
        if k in d and d[k] not in (None, ""):
            return d[k]
    return default


def container_findings(
    pod: str, role: str, container: dict[str, Any], events: list[dict[str, Any]], restart_count: int = 0
) -> list[Finding]:
    """Findings from the container state and Pod events: image pull, crash loop, OOMKilled."""
    out: list[Finding] = []
    container = container or {}
    reason = str(_get(container, "reason", default=""))
    message = str(_get(container, "message", default=""))
    if reason in IMAGE_PULL_REASONS:
        out.append(
            Finding(
                "image_pull",
                ERROR,
                pod,
                role,
                line=f"{reason}: {message}".strip(": "),
                params={"reason": reason, "message": message},
            )
        )
    else:
        for ev in events or []:
            ev_reason = str(_get(ev, "reason", default=""))
            ev_msg = str(_get(ev, "message", default=""))
            if ev_reason in IMAGE_PULL_REASONS or (
                ev_reason in ("Failed", "BackOff") and re.search(r"(?i)pull|image", ev_msg)
            ):
                out.append(
                    Finding(
                        "image_pull",
                        ERROR,
                        pod,
                        role,
                        line=f"{ev_reason}: {ev_msg}",
                        params={"reason": ev_reason, "message": ev_msg},
                    )
                )
                break
    restarts = int(_get(container, "restart_count", "restartCount", default=restart_count) or 0)
    if reason == "CrashLoopBackOff" or restarts > CRASH_LOOP_RESTARTS:
        out.append(
            Finding(
                "crash_loop",
                ERROR,
                pod,
                role,
                line=f"{reason or 'restarts'}: {message}".strip(": "),
                params={"restarts": restarts, "reason": reason or str(_get(container, "last_reason", default=""))},
            )
        )
    if "OOMKilled" in (reason, str(_get(container, "last_reason", "lastReason", default=""))):
        out.append(Finding("oom_killed", ERROR, pod, role, line="OOMKilled"))
    return out


def log_findings(worker: WorkerInput, scan: LogScan) -> list[Finding]:
    """Findings from one Worker's log (seed 05's error types and stage table)."""
    pod, role = worker.pod, worker.role
    out: list[Finding] = []
    seen: set[str] = set()

    def add(code: str, severity: str, hit: tuple[int, str] | None = None, **kw: Any) -> None:
        if code in seen:
            return
        seen.add(code)
        line_no, line = hit if hit else (None, "")
        out.append(Finding(code, severity, pod, role, line_no, line, **kw))

    # Marker-driven findings.
    if m := scan.first("ray_cli_missing"):
        add("ray_cli_missing", ERROR, (m.line_no, m.text))
    if m := scan.first("cluster_check_failed"):
        add("ray_check_failed", WARNING, (m.line_no, m.text))
    for m in scan.markers:
        if m.key == "worker_exit" and m.failed:
            add("worker_exit", ERROR, (m.line_no, m.text), params={"code": m.values.get("code")})
        if m.key == "run_exit" and m.failed:
            add("run_script_failed", ERROR, (m.line_no, m.text), params={"code": m.values.get("code")})
    last = scan.last_stage
    if last is not None and last.key == "prepare" and not scan.has("ray_cli_missing"):
        err = scan.first_error_after(last.line_no)
        code = _get(worker.container, "exit_code", "exitCode")
        terminated = worker.phase in ("Failed", "Succeeded") or (code not in (None, 0))
        if err is not None:
            add("prepare_failed", ERROR, err)
        elif terminated:
            add("prepare_failed", ERROR, (last.line_no, last.text))
    if (
        scan.has("connect")
        and not scan.has("head_reachable")
        and scan.head_wait_attempts > 0
        and not scan.has("worker_exit")
    ) or (scan.head_wait_attempts >= 120 and not scan.has("head_reachable")):
        add("head_unreachable", WARNING, None, params={"attempts": scan.head_wait_attempts})

    # Ray partial cluster: ray_check counts on the head, RLinf's waiting line anywhere.
    if scan.check_required is not None and (scan.check_timeout or scan.has("cluster_check_failed")):
        alive = scan.check_alive_max or 0
        if alive < scan.check_required:
            m = scan.first("cluster_check_failed")
            add(
                "ray_partial",
                ERROR,
                (m.line_no, m.text) if m else None,
                detail_key="ray_partial_check",
                params={"n": scan.check_required, "a": alive},
            )
    if scan.rlinf_waiting is not None:
        n, k = scan.rlinf_waiting
        formed_after = (
            scan.rlinf_cluster_line is not None and scan.rlinf_cluster_line[0] > (scan.rlinf_waiting_line or (0, ""))[0]
        )
        if k < n and not formed_after:
            add("ray_partial", ERROR, scan.rlinf_waiting_line, detail_key="ray_partial_rlinf", params={"n": n, "k": k})

    # Text signatures anywhere in the current run, in log order (the scan keeps each one's first line).
    order = {code: i for i, (code, _) in enumerate(SIGNATURES)}
    for code, hit in sorted(scan.signature_hits.items(), key=lambda item: (item[1][0], order[item[0]])):
        add(code, ERROR, hit)
    return out


def diagnose(workers: list[WorkerInput]) -> JobDiagnosis:
    """Diagnose every Worker and the job as a whole. Pure: plain inputs, no I/O."""
    result = JobDiagnosis()
    run_script_pods: list[str] = []
    for w in workers:
        scan = w.scan if w.scan is not None else scan_log(w.log)
        findings = container_findings(w.pod, w.role, w.container, w.events, w.restart_count)
        findings += log_findings(w, scan)
        result.workers.append(WorkerDiagnosis(w, scan, findings))
        if scan.has("run_script"):
            run_script_pods.append(w.pod)
    if len(run_script_pods) > 1:
        result.job_findings.append(
            Finding("multi_head", ERROR, params={"pods": ", ".join(run_script_pods)}, line="Executing run script...")
        )
    return result


# --- database + runtime ---------------------------------------------------------------------------------------


def worker_inputs(
    job, with_logs: bool = True, tasks: list | None = None, scans: dict[str, LogScan] | None = None
) -> list[WorkerInput]:
    """One :class:`WorkerInput` per expected replica and per synced Pod of ``job``, in rank order.

    ``tasks``: the job's Tasks with ``cluster`` and ``pods`` loaded, when the caller has them; else two queries
    load them. ``scans``: Pod name -> the stored scan of its log (``jobs.observe.log_scans``), given to each
    Worker; without them and with ``with_logs`` the logs of all synced Pods are read together
    (``jobs.observe.worker_logs.read_logs``)."""
    if tasks is None:
        tasks = job_tasks(job)
    names = [p.name for task in tasks for p in task.pods.all()]
    logs = read_logs(job, tasks, names) if with_logs and scans is None else {}
    out: list[WorkerInput] = []
    for task in tasks:
        pods = {p.ordinal: p for p in task.pods.all()}
        role = task.display_role or task.template_name
        for ordinal in sorted(set(range(task.replicas)) | set(pods)):
            pod = pods.get(ordinal)
            name = pod.name if pod else f"{task.name}-{ordinal}"
            out.append(
                WorkerInput(
                    pod=name,
                    role=role,
                    head=task.head,
                    expected_rank=task.rank_start + ordinal,
                    phase=pod.phase if pod else "",
                    log=logs.get(name, "") if pod is not None else "",
                    container=dict(pod.container_state or {}) if pod else {},
                    events=list(pod.events or []) if pod else [],
                    restart_count=pod.restart_count if pod else 0,
                    exists=pod is not None,
                    scan=(scans.get(name) or LogScan()) if scans is not None and pod is not None else None,
                )
            )
    return out


def job_tasks(job) -> list:
    """The job's Tasks in order, with their cluster and Pods (and the Pods' stored log scans) loaded (two
    queries)."""
    return log_scans.job_tasks(job)


def diagnose_job(job, workers: list[WorkerInput] | None = None, tasks: list | None = None) -> JobDiagnosis:
    """Diagnose a stored Job (reads Pods from the database and logs from the runtime), plus the problems of the
    Workers' nodes (``jobs.observe.node_findings``: a node under pressure or not Ready), the cross-cluster job
    without a network domain (``jobs.explain.domain_findings``) and, for a Failed job, why it failed
    (``jobs.explain.failure``; ``tasks``: the job's Tasks with Pods loaded, when the caller has them)."""
    result = add_node_findings(job, diagnose(workers if workers is not None else worker_inputs(job)))
    result = add_domain_findings(job, result)
    result = add_node_count_finding(job, result, tasks)
    if job.phase == "Failed":
        stages = {w.worker.pod: (w.last_stage_key, w.first_error) for w in result.workers}
        result.failure = failures.failure_of(job, tasks if tasks is not None else job_tasks(job), stages)
    return result


FINDING_TEXT.setdefault(domain_findings.CODE, domain_findings.TEXT)
DETAIL_TEXT.setdefault(domain_findings.CODE, domain_findings.DETAIL)
FINDING_TEXT.setdefault(node_count.CODE, node_count.TEXT)
DETAIL_TEXT.setdefault(node_count.CODE, node_count.DETAIL)


def add_node_count_finding(job, result: JobDiagnosis, tasks: list | None) -> JobDiagnosis:
    """A job-wide ``rlinf_num_nodes`` error, first, when RLinf waits for another number of nodes than the job has
    Workers (:mod:`jobs.explain.node_count`; ``tasks`` with their replicas, else the expected Workers of
    ``result``); the Workers' "Ray sees only part of the nodes" findings of RLinf's wait are then dropped."""
    waiting = [w.scan.rlinf_waiting for w in result.workers if w.scan.rlinf_waiting is not None]
    expected = sum(int(t.replicas) for t in tasks) if tasks is not None else len(result.workers)
    found = node_count.mismatch(job, expected, waiting)
    if found is None:
        return result
    line_no, line = next((w.scan.rlinf_waiting_line for w in result.workers if w.scan.rlinf_waiting_line), (None, ""))
    result.job_findings.insert(0, Finding(node_count.CODE, ERROR, line_no=line_no, line=line, params=found))
    for w in result.workers:
        w.findings = [f for f in w.findings if f.detail_key != "ray_partial_rlinf"]
    return result


def add_domain_findings(job, result: JobDiagnosis) -> JobDiagnosis:
    """One job-wide ``cross_cluster_no_domain`` error when Workers wait for the head of a job whose roles span
    clusters without a network domain (:mod:`jobs.explain.domain_findings`)."""
    waiting = [w for w in result.workers if any(f.code == domain_findings.TRIGGER for f in w.findings)]
    if not waiting:
        return result
    clusters = domain_findings.job_clusters(job)
    if not domain_findings.applies(job, clusters):
        return result
    address = waiting[0].scan.head_wait_address or "?"
    result.job_findings.append(
        Finding(
            domain_findings.CODE,
            ERROR,
            params={"address": address, "clusters": ", ".join(clusters)},
            line=f"Waiting for head to be reachable at {address}...",
        )
    )
    return result


def diagnosis_and_pending(
    job, patterns: dict[str, str] | None = None
) -> tuple[JobDiagnosis, dict[str, list[pending.PendingReason]], log_scans.Scans]:
    """What the Diagnosis tab shows: :func:`diagnose_job`, the pending reasons per role (``jobs.explain.pending``)
    and how old the log scans are, from one load of the job's Tasks and Pods and the stored scan of each Worker's
    log (``log_scans.job_scans``: no log is read while the scans are fresh). ``patterns``: the Run check's log
    patterns, so a scan made here serves that page too."""
    tasks = job_tasks(job)
    stored = log_scans.job_scans(job, tasks, patterns)
    workers = worker_inputs(job, tasks=tasks, scans=stored.scans)
    reasons = pending.job_pending_reasons(job, tasks=tasks, scans=stored.scans)
    return diagnose_job(job, workers, tasks), reasons, stored


FINDING_TEXT.setdefault(node_findings.CODE, node_findings.TEXT)
DETAIL_TEXT.setdefault(node_findings.CODE, node_findings.DETAIL)


def add_node_findings(job, result: JobDiagnosis) -> JobDiagnosis:
    """Attach a ``node_condition`` warning per :class:`~jobs.observe.node_findings.NodeProblem` to its Worker
    in ``result`` (job-wide when no Worker matches)."""
    by_pod = {w.worker.pod: w for w in result.workers}
    for p in node_findings.node_problems(job):
        finding = Finding(
            node_findings.CODE,
            WARNING,
            pod=p.pod,
            role=p.role,
            line=p.event,
            params={"node": p.node, "conditions": p.conditions, "event": p.event},
        )
        target = by_pod.get(p.pod)
        (target.findings if target is not None else result.job_findings).append(finding)
    return result
