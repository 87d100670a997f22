"""Automatic diagnosis of a Job: per-Worker stage timelines from the wrapper markers and classified errors.

Sources (requirements):

- upstream-rlark 5.1/5.3: the wrapper markers, byte-identical, in the order the scripts print them; 5.2 the
  ``ray_check.py`` lines; RLark Console's wrappers add ``Run script exited with code <n>`` (head) and exit the
  worker with the Ray process's code (``Ray worker process exited with code <n>``).
- rlinf.md 3 and 7: RLinf's ``Waiting for N nodes to be ready, currently k nodes available.``, ``RLinf is running
  on a cluster with N nodes ...``, ``Exiting main process due to a failure upon worker execution.``.
- seed 05-troubleshooting-jobs-workers: the "last completed stage" table (stage -> judgement and next step) and the
  "error type" table (symptom -> first suspicion -> next step); the next steps are shown in the user's language
  (zh-hans quoted from the seed, English a faithful translation).

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

from clusters.runtime.base import IMAGE_PULL_REASONS
from jobs.explain import domain_findings, pending
from jobs.observe import log_scans, node_findings
from jobs.observe.log_markers import ERROR, SIGNATURES, WARNING, LogScan, Marker, scan_log
from jobs.observe.worker_logs import read_logs

CRASH_LOOP_RESTARTS = 3  # restarts above which a crash-looping container is reported (peers 3.3 S1)

# --- messages (zh-hans quoted from seed 05 / 02 where they exist; en faithful) ------------------------------

# stage -> (label zh, label en, judgement/next step zh, en). Seed 05 "最后完成的阶段" table.
STAGE_TEXT: dict[str, tuple[str, str, str, str]] = {
    "none": (
        "尚无阶段标记",
        "No stage marker yet",
        "日志中还没有包装脚本的标记：检查 Pod 是否已创建、镜像是否已拉取，以及 Pod 阶段和事件。",
        "The log has no wrapper marker yet: check that the Pod exists, that the image was pulled, and the Pod's"
        " phase and events.",
    ),
    "rank": (
        "rank 计算或包装脚本准备",
        "Rank computation or wrapper preparation",
        "如果在准备脚本标记前终止，记录该 Worker 的第一条错误，检查包装脚本所需的 Pod 信息和所选平台配置，"
        "不要覆盖平台保留的环境变量。",
        "If it stopped before the prepare-script marker, record this Worker's first error, check the Pod"
        " information the wrapper needs and the chosen platform settings, and do not override the platform's"
        " reserved environment variables.",
    ),
    "ssh": (
        "SSH 公钥注入",
        "SSH key injection",
        "如果在准备脚本标记前终止，记录该 Worker 的第一条错误，检查包装脚本所需的 Pod 信息和所选平台配置，"
        "不要覆盖平台保留的环境变量。",
        "If it stopped before the prepare-script marker, record this Worker's first error, check the Pod"
        " information the wrapper needs and the chosen platform settings, and do not override the platform's"
        " reserved environment variables.",
    ),
    "prepare": (
        "角色准备脚本",
        "Role prepare script",
        "后续第一条错误来自该角色的 prepareScript。修复镜像、命令、路径或权限；准备脚本失败时 Ray 尚未启动。",
        "The first error after this comes from the role's prepareScript. Fix the image, command, path or"
        " permissions; when the prepare script fails, Ray has not started yet.",
    ),
    "domain_ip": (
        "网络域地址解析",
        "Network domain address",
        "Head 已解析网络域地址；随后应启动 Ray Head 并等待节点加入。",
        "The head resolved its network-domain address; next it starts the Ray head and waits for nodes.",
    ),
    "head_wait": (
        "Head 启动和节点检查",
        "Head start and node check",
        "对照预期副本数检查各 Worker 是否已经产生 Pod、完成准备脚本并开始连接 Head。",
        "Compare with the expected replicas: check that every Worker has a Pod, finished its prepare script"
        " and started connecting to the head.",
    ),
    "cluster_ready": (
        "Ray 集群信息",
        "Ray cluster information",
        "不要只凭 Head 就绪文本判断集群完整：同时检查 Head 的 ray status 输出，以及每个预期 Worker 的连接日志和"
        " Pod 状态。",
        "Do not judge the cluster complete from the head's ready text alone: also check the head's ray status"
        " output and every expected Worker's connection log and Pod state.",
    ),
    "connect": (
        "Worker 解析和连接 Head",
        "Worker resolving and connecting to the head",
        "重复等待表示 Worker 尚未同时完成 Head 名称解析和端口连通。检查 Head Pod、Head Service、Agent 和所需网络域，"
        "不要只重启 Worker。",
        "Repeated waiting means the Worker has not yet both resolved the head's name and reached its port."
        " Check the head Pod, the head Service, the agent and the required network domain; do not just restart"
        " the Worker.",
    ),
    "head_ip": (
        "Head 地址已解析",
        "Head address resolved",
        "重复等待表示 Worker 尚未同时完成 Head 名称解析和端口连通。检查 Head Pod、Head Service、Agent 和所需网络域，"
        "不要只重启 Worker。",
        "Repeated waiting means the Worker has not yet both resolved the head's name and reached its port."
        " Check the head Pod, the head Service, the agent and the required network domain; do not just restart"
        " the Worker.",
    ),
    "head_reachable": (
        "Head 可达，Ray Worker 启动",
        "Head reachable, Ray worker started",
        "Worker 已连通 Head 并启动 Ray 进程；对照 Head 的 ray status 确认它已加入集群。",
        "The Worker reached the head and started its Ray process; confirm with the head's ray status that it"
        " joined the cluster.",
    ),
    "run_script": (
        "Head 运行脚本",
        "Head run script",
        "对于合规的单副本 Head Task，Ray 包装脚本已经进入用户命令阶段。若多个 Pod 都出现该标记，先按多 Head 副本缺陷"
        "处理，不要继续判断业务命令。",
        "For a compliant single-replica head Task, the Ray wrapper has reached the user command. If several Pods"
        " print this marker, treat it as the multi-head replica defect first and do not go on judging the"
        " workload command.",
    ),
    "no_run_script": (
        "Head 无运行脚本",
        "Head without run script",
        "未提供运行脚本，Head 保持集群运行。",
        "No run script was provided; the head keeps the cluster alive.",
    ),
    "run_exit": (
        "运行脚本结束",
        "Run script finished",
        "运行脚本已结束；退出码 0 表示成功，非零表示失败。",
        "The run script has finished; exit code 0 means success, anything else failure.",
    ),
    "worker_exit": (
        "Ray Worker 进程结束",
        "Ray worker process ended",
        "日志中的 Ray Worker 退出码非零时，应按失败处理；不要仅凭容器最终退出码或汇总状态判断 Worker 正常。",
        "A non-zero Ray worker exit code in the log means failure; do not judge the Worker healthy from the"
        " container's final exit code or the summary status alone.",
    ),
}

# Labels of non-stage markers on the timeline.
MARKER_LABEL: dict[str, tuple[str, str]] = {
    "ray_cli_missing": ("Ray CLI 检查失败", "Ray CLI check failed"),
    "cluster_check_failed": ("Ray 集群检查失败", "Ray cluster check failed"),
    "stopping": ("停止 Ray", "Stopping Ray"),
}

# finding code -> (title zh, title en, suspicion zh, suspicion en, next step zh, next step en). Seed 05 tables.
FINDING_TEXT: dict[str, tuple[str, str, str, str, str, str]] = {
    "image_pull": (
        "镜像拉取、权限或不存在错误",
        "Image pull, permission or not-found error",
        "镜像引用、仓库凭据、目标集群网络",
        "Image reference, registry credentials, target cluster network",
        "对照启动清单中的 digest；凭据只通过组织允许的 Secret 方式处理。",
        "Compare with the digest in the launch record; handle credentials only through the Secret mechanism"
        " your organisation allows.",
    ),
    "shm_or_disk": (
        "No space left on device、/dev/shm 或 shared-memory 错误",
        "No space left on device, /dev/shm or shared-memory error",
        "容器临时空间或共享内存不足",
        "Not enough container scratch space or shared memory",
        "创建器不能配置 /dev/shm 的 memory-backed volume。停止重试，保留日志并请平台管理员提供可用的 Pod 配置方式；"
        "不要直接挂载宿主机 /dev/shm 规避。",
        "The job wizard cannot configure a memory-backed volume for /dev/shm. Stop retrying, keep the logs and"
        " ask the platform administrator for a Pod configuration that works; do not mount the host's /dev/shm"
        " to work around it.",
    ),
    "nccl": (
        "NCCL 初始化、socket、timeout 或 collective hang",
        "NCCL init, socket, timeout or collective hang",
        "Worker 数量、GPU/CUDA/NCCL 兼容性、网卡和跨节点网络",
        "Worker count, GPU/CUDA/NCCL compatibility, network interfaces and cross-node network",
        "先确认全部 Ray Worker 已加入，再核对每个角色镜像和工作负载版本要求的通信网卡。RLark 不自动诊断 NCCL。",
        "First confirm that every Ray worker has joined, then check each role's image and the network"
        " interface the workload version requires. RLark does not diagnose NCCL automatically.",
    ),
    "ray_partial": (
        "Ray 只看到部分节点",
        "Ray sees only part of the nodes",
        "Head Service、DNS、端口、Worker 包装脚本或网络域",
        "Head Service, DNS, ports, the worker wrapper script or the network domain",
        "对照 Head ray status 和每个预期 Worker 的连接日志；不要只凭 Head 的 ready 文本判断集群完整。",
        "Compare the head's ray status with every expected Worker's connection log; do not judge the cluster"
        " complete from the head's ready text alone.",
    ),
    "ray_check_failed": (
        "Ray 集群检查失败（脚本继续运行）",
        "Ray cluster check failed (the script went on)",
        "Head 的节点检查超时，脚本仍打印集群信息并尝试运行用户脚本",
        "The head's node check timed out; the script still printed the cluster information and tried the run script",
        "即使出现 “Ray cluster is ready” 或 “Executing run script”，也必须同时检查 Head 的 ray status 输出，"
        "以及每个预期 Worker 的连接日志和 Pod 状态。",
        "Even after \u201cRay cluster is ready\u201d or \u201cExecuting run script\u201d, also check the head's"
        " ray status output and every expected Worker's connection log and Pod state.",
    ),
    "prepare_failed": (
        "准备脚本失败",
        "Prepare script failed",
        "该角色的 prepareScript",
        "The role's prepareScript",
        "后续第一条错误来自该角色的 prepareScript。修复镜像、命令、路径或权限；准备脚本失败时 Ray 尚未启动。",
        "The first error after the marker comes from the role's prepareScript. Fix the image, command, path or"
        " permissions; when the prepare script fails, Ray has not started yet.",
    ),
    "ray_cli_missing": (
        "缺少 Ray CLI",
        "Ray CLI missing",
        "激活后的环境中没有可执行的 ray",
        "There is no executable ray in the activated environment",
        "使用已经固定版本且包含 Ray 的镜像，或通过准备脚本激活固定版本的环境。"
        "不要在 WebTerminal 中临时安装后继续运行。",
        "Use an image with a pinned Ray version, or activate a pinned environment in the prepare script. Do not"
        " install it ad hoc in the WebTerminal and carry on.",
    ),
    "worker_exit": (
        "Ray Worker 进程以非零退出码结束",
        "Ray worker process exited with a non-zero code",
        "Ray Worker 进程失败",
        "The Ray worker process failed",
        "日志中的 Ray Worker 退出码非零时，应按失败处理；不要仅凭容器最终退出码或汇总状态判断 Worker 正常。"
        "联系平台管理员时提供 Head 与首个异常 Worker 的脱敏日志、最后成功阶段、节点检查警告、Worker 进程退出码，"
        "以及是否设置了 RAY_TEMP_DIR。",
        "Treat a non-zero Ray worker exit code in the log as a failure; do not judge the Worker healthy from the"
        " container's final exit code or the summary status. When contacting the platform administrator, give"
        " the redacted logs of the head and the first failing Worker, the last completed stage, the node-check"
        " warning, the worker process exit code and whether RAY_TEMP_DIR is set.",
    ),
    "run_script_failed": (
        "Head 运行脚本以非零退出码结束",
        "The head's run script exited with a non-zero code",
        "Head Task 的运行命令",
        "The head Task's run command",
        "区分失败发生在镜像/挂载、准备脚本、Ray 集群建立，还是 Head Task 的运行命令；核对脚本使用的路径是否为容器挂载"
        "路径，环境变量名是否正确。",
        "Tell apart whether the failure is in the image/mounts, the prepare script, Ray cluster formation or the"
        " head Task's run command; check that the script's paths are container mount paths and the environment"
        " variable names are right.",
    ),
    "multi_head": (
        "多个 Pod 执行了运行脚本（多 Head 副本）",
        "Several Pods ran the run script (multiple head replicas)",
        "head: true 的 Task 副本数必须为 1",
        "The head: true Task must have exactly 1 replica",
        "若多个 Pod 都出现该标记，先按多 Head 副本缺陷处理，不要继续判断业务命令。停止反复重试并先修正选择器；"
        "多个副本会分别启动 Ray Head 和运行脚本，可能造成重复训练及冲突日志。",
        "When several Pods print this marker, treat it as the multi-head replica defect first and do not go on"
        " judging the workload command. Stop retrying and fix the selector first; several replicas each start a"
        " Ray head and the run script, which can duplicate training and produce conflicting logs.",
    ),
    "head_unreachable": (
        "Worker 无法连接 Head",
        "The Worker cannot reach the head",
        "Head Pod、Head Service、Agent 或网络域",
        "Head Pod, head Service, agent or network domain",
        "重复等待表示 Worker 尚未同时完成 Head 名称解析和端口连通。检查 Head Pod、Head Service、Agent 和所需网络域，"
        "不要只重启 Worker。",
        "Repeated waiting means the Worker has not both resolved the head's name and reached its port. Check the"
        " head Pod, the head Service, the agent and the required network domain; do not just restart the Worker.",
    ),
    "crash_loop": (
        "容器反复重启",
        "Container keeps restarting",
        "镜像/挂载、准备脚本、Ray 集群建立或运行命令失败",
        "A failure in the image/mounts, prepare script, Ray cluster formation or run command",
        "在日志页选择出错角色和 Worker，定位第一条错误，而不是只看最后一行；请获授权的运维人员检查 Pod 调度事件、"
        "容器状态和重启次数。",
        "Open the failing role and Worker in the Logs tab and find the first error, not just the last line; ask"
        " an authorised operator to check the Pod's scheduling events, container state and restart count.",
    ),
    "oom_killed": (
        "容器因内存不足被终止（OOMKilled）",
        "Container killed for lack of memory (OOMKilled)",
        "容器内存不足",
        "Not enough container memory",
        "问题需要 CPU、内存、/dev/shm、额外容器、探针或其他创建器不支持的 Pod 字段时，不要通过编辑或复制弹窗处理。"
        "先保存 Job YAML，再向平台管理员确认可用的配置方式。",
        "When the fix needs CPU, memory, /dev/shm, extra containers, probes or other Pod fields the wizard does"
        " not support, do not use the edit or clone dialog. Save the Job YAML first, then ask the platform"
        " administrator which configuration works.",
    ),
    "robot": (
        "机器人 SDK、连接、超时或设备错误",
        "Robot SDK, connection, timeout or device error",
        "外部设备、驱动、权限和现场链路",
        "External device, driver, permissions and on-site link",
        "停止自动重试，通知现场操作员；日志错误分类不能替代急停、断能或安全状态确认。",
        "Stop automatic retries and notify the on-site operator; classifying log errors does not replace an"
        " emergency stop, power cut or safety-state confirmation.",
    ),
    "rlinf_failure": (
        "RLinf 因 Worker 执行失败退出",
        "RLinf exited after a worker execution failure",
        "某个 RLinf Worker 的执行失败",
        "An RLinf worker failed during execution",
        "关闭实时滚动或使用文本过滤，定位第一条错误，而不是只看最后一行；区分失败发生在镜像/挂载、准备脚本、"
        "Ray 集群建立，还是 Head Task 的运行命令。",
        "Pause streaming or filter the text to find the first error, not just the last line; tell apart whether"
        " the failure is in the image/mounts, prepare script, Ray cluster formation or the head's run command.",
    ),
}

# Extra per-finding detail sentences with parameters: (zh, en).
DETAIL_TEXT: dict[str, tuple[str, str]] = {
    "ray_partial_rlinf": (
        "RLinf 需要 {n} 个节点，当前只有 {k} 个可用。",
        "RLinf needs {n} nodes; only {k} are available.",
    ),
    "ray_partial_check": (
        "Head 的集群检查需要 {n} 个节点，最多看到 {a} 个存活节点。",
        "The head's cluster check needed {n} nodes and saw at most {a} alive.",
    ),
    "worker_exit": ("退出码 {code}。", "Exit code {code}."),
    "run_script_failed": ("退出码 {code}。", "Exit code {code}."),
    "multi_head": ("执行运行脚本的 Pod：{pods}。", "Pods that ran the run script: {pods}."),
    "head_unreachable": (
        "已等待 {attempts} 次，仍未出现 Head is reachable。",
        "Waited {attempts} times without Head is reachable.",
    ),
    "crash_loop": ("已重启 {restarts} 次（{reason}）。", "Restarted {restarts} times ({reason})."),
    "image_pull": ("{reason}：{message}", "{reason}: {message}"),
}


def _en(lang: str | None) -> bool:
    return str(lang or "").lower().startswith("en")


def stage_label(key: str, lang: str = "zh-hans") -> str:
    """Human label of a stage or marker key in ``lang``."""
    if key in STAGE_TEXT:
        zh, en, _, _ = STAGE_TEXT[key]
    else:
        zh, en = MARKER_LABEL.get(key, (key, key))
    return en if _en(lang) else zh


def stage_advice(key: str, lang: str = "zh-hans") -> str:
    """Seed 05's judgement and next step for ``key`` as the last completed stage."""
    _, _, zh, en = STAGE_TEXT.get(key, STAGE_TEXT["none"])
    return en if _en(lang) else zh


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

    def _text(self, idx: int, lang: str) -> str:
        entry = FINDING_TEXT[self.code]
        return entry[idx + 1] if _en(lang) else entry[idx]

    def title(self, lang: str = "zh-hans") -> str:
        return self._text(0, lang)

    def suspicion(self, lang: str = "zh-hans") -> str:
        return self._text(2, lang)

    def next_step(self, lang: str = "zh-hans") -> str:
        return self._text(4, lang)

    def detail(self, lang: str = "zh-hans") -> str:
        key = self.detail_key or self.code
        if key not in DETAIL_TEXT:
            return ""
        zh, en = DETAIL_TEXT[key]
        try:
            return (en if _en(lang) else zh).format(**self.params)
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
            "timeline": [
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
            ],
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
        return {
            "multiHead": self.multi_head,
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


def diagnose_job(job, workers: list[WorkerInput] | None = None) -> JobDiagnosis:
    """Diagnose a stored Job (reads Pods from the database and logs from the runtime), plus the problems of the
    Workers' nodes (``jobs.observe.node_findings``, issue 15)."""
    result = add_node_findings(job, diagnose(workers if workers is not None else worker_inputs(job)))
    return add_domain_findings(job, result)


FINDING_TEXT.setdefault(domain_findings.CODE, domain_findings.TEXT)
DETAIL_TEXT.setdefault(domain_findings.CODE, domain_findings.DETAIL)


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
    return diagnose_job(job, workers), reasons, stored


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
