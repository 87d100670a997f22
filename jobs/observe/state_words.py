"""One word per state: the localized label of every Job, Task, Pod and Worker state the console shows.

Every tab asks this module for a state's word, so a state reads the same everywhere: the jobs list, the detail
header, the Task table, the Workers tab, the Logs picker, the Diagnosis, Metrics, the Run check and its record.
States (the keys of :data:`STATE_WORDS`): the phases of ``jobs.models.Phase`` (``Pending``, ``Running``,
``Succeeded``, ``Failed``, ``Stopped``), ``Completed`` (a Worker of a Succeeded job,
``jobs.observe.headline.worker_phase_of``) and ``Unknown`` (a Pod's phase when its node stopped answering). The
words are the catalog's (seed 01-job-role-worker-task.txt: 等待中 / 运行中 / 已完成 / 失败 / 已停止); a state
outside the table is shown as it is.
"""

from __future__ import annotations

from django.utils.translation import gettext_noop

from rlark_console import language

COMPLETED = "Completed"

# state -> English msgid (the zh_Hans catalog of ``jobs`` has its Chinese); the same msgids as Phase's labels
STATE_WORDS: dict[str, str] = {
    "Pending": gettext_noop("Pending"),
    "Running": gettext_noop("Running"),
    "Succeeded": gettext_noop("Succeeded"),
    "Failed": gettext_noop("Failed"),
    "Stopped": gettext_noop("Stopped"),
    COMPLETED: gettext_noop("Completed"),
    "Unknown": gettext_noop("Unknown"),
}


def state_label(state: str, code: str | None = None) -> str:
    """The word of ``state`` (a key of :data:`STATE_WORDS`) in the language of ``code`` (the active language when
    None; see ``rlark_console.language.lang``); ``state`` itself when it is not a known state, "" for ""."""
    if state not in STATE_WORDS:
        return state
    return language.translate(STATE_WORDS[state], code)


def state_labels(code: str | None = None) -> dict[str, str]:
    """``{state: word}`` of every state in the language of ``code``, for a page script (the Logs picker)."""
    return {state: state_label(state, code) for state in STATE_WORDS}
