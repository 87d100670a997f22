"""Check 1 of seed 02-confirm-job-running: the Job exists and its configuration matches the stored YAML.

"Job 可以打开，页面配置与已保存的 YAML 一致，而且任务没有被意外停止" (seed 02, check 1): the Tasks the controller
derived equal ``spec.tasks[]`` (names, replicas, head, rank start; ``jobs.jobspec.layout.task_layout``), and the
Job is not stopped. The evidence names each role's image, selector, replicas, GPUs, mounts and env count.
"""

from __future__ import annotations

from django.utils.translation import gettext_noop

from jobs.explain.runcheck_input import MET, NOT_MET, TO_CONFIRM, RunCheckInput, phase_label, time_label, tr
from jobs.jobspec.layout import display_role_of, main_container, task_layout


def check_job(data: RunCheckInput, lang: str) -> tuple[str, list[str]]:
    """Check 1 -> ``(status, evidence lines in lang)``: ``to_confirm`` before the controller created the Tasks,
    ``not_met`` with the differences (or when the job was stopped), else ``met``."""
    ev = [
        tr(
            lang,
            gettext_noop("Job {job} exists (created {created}), phase {phase}."),
            job=data.job,
            created=time_label(data.created_at),
            phase=phase_label(data.phase, lang),
        )
    ]
    layout = task_layout(data.document)
    templates = {
        str(t.get("name")): t for t in (data.document.get("spec") or {}).get("tasks") or [] if isinstance(t, dict)
    }
    tasks = {t.template: t for t in data.tasks}
    problems = []
    for item in layout:
        task = tasks.get(item.template_name)
        if task is None:
            problems.append(tr(lang, gettext_noop("Template {t} has no Task."), t=item.template_name))
            continue
        diffs = []
        for label, want, got in (
            ("replicas", item.replicas, task.replicas),
            ("head", item.head, task.head),
            ("rankStart", item.rank_start, task.rank_start),
        ):
            if want != got:
                diffs.append(f"{label} {got} != {want}")
        if diffs:
            problems.append(f"{task.name}: " + ", ".join(diffs))
        template = templates.get(item.template_name, {})
        container = main_container(template)
        resources = (container.get("resources") or {}).get("limits") or {}
        gpus = resources.get("nvidia.com/gpu", 0)
        env_names = [str(e.get("name")) for e in container.get("env") or [] if isinstance(e, dict)]
        ev.append(
            tr(
                lang,
                gettext_noop(
                    "{role} ({task}): image {image}, selector {sel}, replicas {rep}, GPU {gpu}, {mounts} mounts, "
                    "{env} env variables{head}; matches the stored YAML."
                ),
                role=display_role_of(template) or item.template_name,
                task=item.task_name,
                image=container.get("image") or "-",
                sel=",".join(f"{k}={v}" for k, v in (template.get("nodeSelector") or {}).items()) or "-",
                rep=item.replicas,
                gpu=gpus,
                mounts=len(container.get("volumeMounts") or []),
                env=len(env_names),
                head=tr(lang, gettext_noop(", header (with run script)")) if item.head else "",
            )
        )
    extra = set(tasks) - {i.template_name for i in layout}
    for name in sorted(extra):
        problems.append(tr(lang, gettext_noop("Task {t} is not in the stored YAML."), t=name))
    if not data.tasks:
        return TO_CONFIRM, ev + [tr(lang, gettext_noop("The controller has not created the Tasks yet."))]
    if problems:
        return NOT_MET, ev[:1] + problems
    if data.stopped or data.phase == "Stopped":
        return NOT_MET, ev + [tr(lang, gettext_noop("The job has been stopped."))]
    return MET, ev
