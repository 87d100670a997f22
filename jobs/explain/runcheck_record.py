"""The Markdown run record in the exact template of seed 02-confirm-job-running ("运行检查记录模板").

Values come from the stored Job and the check results; no environment values, keys or credentials are written
(seed 02: "不要保存凭据、私钥、访问令牌或包含密码和密钥的完整环境变量").
"""

from __future__ import annotations

import hashlib

from django.utils.translation import gettext_noop

from jobs.explain.runcheck_input import TO_CONFIRM, CheckResult, check_title, status_label, time_label, tr
from jobs.explain.runcheck_safety import safety_record
from jobs.jobspec.layout import main_container
from jobs.jobspec.rlinf import num_nodes_of
from jobs.observe import log_scans, run_links
from jobs.observe.checkpoints import job_checkpoints
from jobs.observe.resolved_config import resolved_config

# The seed 02 template ("运行检查记录模板") as English msgids; the jobs catalog holds the template's own Chinese,
# colons included, so the zh record is the template as is and the en record is English throughout.
TITLE = gettext_noop("Job run check record")
FIELDS = [
    gettext_noop("Run ID: "),
    gettext_noop("Code version, image address and version; actual digest (if recorded): "),
    gettext_noop("Hydra config and command source: "),
    gettext_noop("RLinf `cluster.num_nodes` and execution mode: "),
    gettext_noop("Target cluster, nodes and resources: "),
    gettext_noop("Job name: "),
    gettext_noop("Submitted YAML record: "),
    gettext_noop("Recorder: "),
]
HEADER = [
    gettext_noop("Check"),
    gettext_noop("Result (Met / Not met / To confirm)"),
    gettext_noop("Checked at"),
    gettext_noop("Record location"),
    gettext_noop("Notes/contact"),
]
RUN_ID = gettext_noop("{run} ({time})")
SEMICOLON = gettext_noop("; ")


def _cell(text: str) -> str:
    """``text`` as one Markdown table cell: backslashes and pipes escaped, newlines joined, stripped."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def checkpoint_note(job, lang: str) -> str:
    """Row 5's word on the latest complete checkpoint (``jobs.observe.checkpoints``): its container path, size in
    bytes, file count and the sha256 of its file list; that there is none; "" when the job has no checkpoint
    directory."""
    listing = job_checkpoints(job)
    if listing.reason == "unset":
        return ""
    latest = listing.latest_complete()
    if latest is None:
        return tr(lang, gettext_noop("No complete checkpoint in {dir}."), dir=listing.directory)
    return tr(
        lang,
        gettext_noop("Latest complete checkpoint: {path} ({size} bytes, {files} files, file list sha256 {sha})."),
        path=latest.path,
        size=latest.size,
        files=latest.files,
        sha=latest.list_sha,
    )


def config_note(job, lang: str) -> str:
    """Row 4's word on the resolved RLinf config the run wrote (``jobs.observe.resolved_config``): its container
    path and sha256; "" when none can be read."""
    found = resolved_config(job)
    if found is None:
        return ""
    return tr(lang, gettext_noop("Resolved config: {path} (sha256 {sha})."), path=found.path, sha=found.sha256)


def tracking_note(job, lang: str) -> str:
    """Row 5's word on the run's W&B / SwanLab links its logs showed (``jobs.observe.run_links``); "" for none."""
    links = run_links.job_links(job, log_scans.job_scans(job, log_scans.job_tasks(job)))
    if not links:
        return ""
    shown = ", ".join(f"{link['label']} {link['url']}" for link in links)
    return tr(lang, gettext_noop("Experiment tracking: {links}."), links=shown)


def markdown_record(job, results: list[CheckResult], recorder: str, lang: str = "zh-hans") -> str:
    """The run record in the template of seed 02 (``# 任务运行检查记录``, eight fields, the six-row table) in
    ``lang``: in ``zh-hans`` the template as is, in ``en`` everything in English (title, labels, header, check
    names, results and notes).

    Values come from the stored Job (images, digests when the reference has one, the RLinf config hash, clusters,
    nodes, GPU per Worker) and the check results; row 5's note ends with the latest complete checkpoint
    (:func:`checkpoint_note`); row 6 is always 待确认 (people decide what happens next).
    No environment values, keys or credentials are written.
    """
    import yaml

    spec = job.spec_section
    templates = [t for t in spec.get("tasks") or [] if isinstance(t, dict)]
    images = []
    for t in templates:
        image = str(main_container(t).get("image") or "-")
        digest = image.split("@", 1)[1] if "@" in image else tr(lang, gettext_noop("not recorded"))
        images.append(f"{t.get('name')}: {image} (digest: {digest})")
    yaml_text = yaml.safe_dump(job.spec or {}, allow_unicode=True, sort_keys=False)
    yaml_sha = hashlib.sha256(yaml_text.encode()).hexdigest()[:16]
    run_script = next((str(t.get("runScript") or "") for t in templates if t.get("head") is True), "")
    if job.rlinf_config:
        config = tr(
            lang,
            gettext_noop("RLinf config attached (sha256 {sha}); command source: header run script (sha256 {run})"),
            sha=hashlib.sha256(job.rlinf_config.encode()).hexdigest()[:16],
            run=hashlib.sha256(run_script.encode()).hexdigest()[:16],
        )
    else:
        config = tr(
            lang,
            gettext_noop("No RLinf config attached; command source: header run script (sha256 {run})"),
            run=hashlib.sha256(run_script.encode()).hexdigest()[:16],
        )
    num_nodes = num_nodes_of(job.rlinf_config) if job.rlinf_config else None
    mode = tr(lang, gettext_noop("execution mode to confirm"))
    clusters: dict[str, set[str]] = {}
    gpus = []
    for task in job.tasks.select_related("cluster").prefetch_related("pods").order_by("order"):
        clusters.setdefault(task.cluster.name, set()).update(p.node for p in task.pods.all() if p.node)
    for t in templates:
        limits = (main_container(t).get("resources") or {}).get("limits") or {}
        res = ", ".join(f"{k}={v}" for k, v in limits.items()) or "-"
        gpus.append(f"{t.get('name')}: {res}")
    target = "; ".join(f"{c} ({', '.join(sorted(n)) or '-'})" for c, n in clusters.items()) or "-"
    location = f"RLark Console /jobs/{job.name}/run-check/"
    run = tr(lang, RUN_ID, run=f"{job.name}#{job.attempt}", time=time_label(job.started_at))
    values = [
        run,
        "; ".join(images) or "-",
        config,
        f"{num_nodes if num_nodes is not None else '-'}{tr(lang, SEMICOLON)}{mode}",
        f"{target}{tr(lang, SEMICOLON)}{'; '.join(gpus) or '-'}",
        job.name,
        f"RLark Console /jobs/{job.name}/ (YAML sha256 {yaml_sha})",
        recorder,
    ]
    lines = [f"# {tr(lang, TITLE)}", ""]
    lines += [f"- {tr(lang, label)}{value}" for label, value in zip(FIELDS, values, strict=True)]
    lines += ["", "| " + " | ".join(tr(lang, h) for h in HEADER) + " |", "| --- | --- | --- | --- | --- |"]
    by_number = {r.number: r for r in results}
    safety_note, safety_lines = safety_record(job, lang)  # a robot job's approval and stop plan (seed 03)
    for number in range(1, 7):
        title = f"{number}. {check_title(number, lang)}"
        result = by_number.get(number)
        if result is None:
            checked = results[0].checked_at if results else None
            status = status_label(TO_CONFIRM, lang)
            note = tr(
                lang,
                gettext_noop(
                    "The recorder summarises checks 1-5 and decides to continue, stop or keep for troubleshooting,"
                    " with contacts and retention"
                ),
            )
        else:
            checked = result.checked_at
            status = status_label(result.status, lang)
            note = " ".join(result.evidence[:4])
            if number == 4:
                note = " ".join(p for p in (note, config_note(job, lang)) if p)
            if number == 5:
                note = " ".join(p for p in (note, checkpoint_note(job, lang), tracking_note(job, lang)) if p)
        if number == 6 and safety_note:
            note = f"{safety_note}; {note}"
        lines.append(f"| {_cell(title)} | {status} | {time_label(checked)} | {_cell(location)} | {_cell(note)} |")
    return "\n".join([*lines, *safety_lines]) + "\n"
