"""The safety approval of a robot job in the Run check record (seed 02-confirm-job-running check 6; seed
03-onboard-existing-rlinf-workload: "全部确认后，再把安全审批结果和停止方案写入本次运行记录").

A job that drives no robot adds nothing, so its record keeps the seed's template exactly.
"""

from __future__ import annotations

from django.utils.translation import gettext_noop

from jobs.control.safety import ITEMS, gate, reasons_text
from jobs.explain.runcheck_input import time_label, tr


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ").strip()


def safety_record(job, lang: str) -> tuple[str, list[str]]:
    """``(row 6 note, lines after the table)`` for ``job``: the approval (approver, time, whether it covers the
    spec as stored), the five confirmed items and the stop plan; ``("", [])`` for a job that drives no robot."""
    g = gate(job)
    if not g.robot:
        return "", []
    a = g.approval
    if a is None:
        note = tr(lang, gettext_noop("Safety approval: none yet; the robot job cannot start."))
    else:
        state = gettext_noop("covers this spec") if g.current else gettext_noop("no longer applies: the spec changed")
        note = tr(
            lang,
            gettext_noop("Safety approval: {who}, {time}, spec sha256 {sha} ({state}); stop plan: {plan}"),
            who=a.approver_name,
            time=time_label(a.approved_at),
            sha=a.spec_hash[:16],
            state=tr(lang, state),
            plan=a.stop_plan,
        )
    colon = tr(lang, gettext_noop(": "))  # "：" in the Chinese record, as the seed 02 template writes it
    lines = ["", f"## {tr(lang, gettext_noop('Real-robot safety approval'))}", ""]
    lines.append(f"- {tr(lang, gettext_noop('Why it is a robot job'))}{colon}{_cell(reasons_text(g.reasons)) or '-'}")
    if a is not None:
        who = tr(lang, gettext_noop("{who} ({time})"), who=a.approver_name, time=time_label(a.approved_at))
        lines.append(f"- {tr(lang, gettext_noop('Approver'))}{colon}{who}")
        for key in a.items:
            if key in ITEMS:
                lines.append(f"- [x] {tr(lang, ITEMS[key])}")
        lines.append(f"- {tr(lang, gettext_noop('Stop plan'))}{colon}{_cell(a.stop_plan)}")
    return note, lines
