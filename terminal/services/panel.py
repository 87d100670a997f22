"""Template context for the Logs panel and the WebTerminal page (translated UI strings for the
scripts, selectors from the database; the websocket then sends the runtime's live view)."""

from __future__ import annotations

import json
from typing import Any

from django.urls import reverse
from django.utils.translation import gettext as _

from jobs.observe.state_words import state_labels
from terminal.services import logs, transfer


def log_strings() -> dict[str, Any]:
    """UI strings used by ``static/js/logs.js`` (upstream-rlark 8.4 wording); ``states`` maps a Worker's shown
    state to its word (``jobs.observe.state_words``: the Workers tab's words)."""
    return {
        "states": state_labels(),
        "connecting": _("Connecting to worker logs"),
        "noLogs": _("No logs available"),
        "noMatch": _("No matching logs found."),
        "streaming": _("Streaming"),
        "paused": _("Paused"),
        "ended": _("Stream ended"),
        "endedTitle": _("The job has ended and none of its Workers is running: no new lines will come."),
        "matches": _("%(n)s matching lines"),
        "lines": _("%(n)s lines"),
        "heldLines": _("View paused: %(n)s new lines waiting"),
        "throttled": _("Output is faster than the refresh cap; more lines follow on the next refresh."),
        "rotated": _("log rotated; earlier lines of this instance are no longer available"),
        "restarted": _("container instance changed (restart %(n)s)"),
        "updated": _("Updated %(t)s"),
        "reconnecting": _("Connection lost, reconnecting..."),
        "closed": _("Disconnected: %(reason)s"),
        "state.empty": _("%(pod)s has not written any log lines yet."),
        "state.pending": _("Pod %(pod)s is Pending; no logs yet."),
        "state.gone": _("Pod %(pod)s no longer exists; its logs are no longer available."),
        "state.no-previous": _("%(pod)s has no previous container instance."),
        "state.error": _("Could not read the log of %(pod)s: %(msg)s"),
        "pickWorker": _("Choose one Worker to download its full log"),
        "allWorkers": _("All Workers (merged)"),
        "restarts": _("restarts: %(n)s"),
        "gone": _("gone"),
        "pauseLive": _("Live: new lines appear as they are written. Click to pause."),
        "resumeLive": _("Paused: click to stream new lines again."),
        "kind.sidecar": _("sidecar"),
        "kind.init": _("init container"),
        "kind.ephemeral": _("ephemeral"),
        "kind.container": _("container"),
        "loadOlder": _("Load older lines (%(n)s earlier lines in this instance)"),
        "scrollPaused": _("Auto-scroll paused while you read older lines"),
    }


def logs_panel_context(request, job) -> dict:
    """Context of ``terminal/logs_panel.html`` for ``job`` (the user may see it)."""
    layout = logs.load_layout(job)
    roles = []
    seen = set()
    for t in layout.tasks:
        if t.template not in seen:
            seen.add(t.template)
            roles.append({"value": t.template, "label": t.label})
    role_of = {t.name: t.template for t in layout.tasks}
    pods = [{"name": p.name, "role": role_of.get(p.task, "")} for p in layout.pods]
    config = {
        "ws": f"/ws/terminal/jobs/{job.name}/logs/",
        "download": reverse("terminal:log-download", args=[job.name]),
        "job": job.name,
        "tail": logs.TAIL_LINES,
        "interval": logs.LIVE_INTERVAL,
        "strings": log_strings(),
    }
    return {
        "job": job,
        "log_config_json": json.dumps(config, ensure_ascii=False),
        "log_roles": roles,
        "log_pods": pods,
    }


def terminal_strings() -> dict[str, str]:
    """UI strings used by ``static/js/terminal.js`` (upstream-rlark 9 wording)."""
    return {
        "connecting": _("Connecting to %(worker)s ..."),
        "connected": _("Connected. Starting shell ..."),
        "uploading": _("Uploading %(name)s (%(size)s bytes) to %(path)s..."),
        "requesting": _("Requesting %(path)s..."),
        "downloading": _("Downloading %(name)s (%(size)s bytes)..."),
        "downloaded": _("Downloaded %(name)s."),
        "transferDone": _("File transfer complete."),
        "transferFailed": _("File transfer failed: %(error)s"),
        "unknown": _("unknown"),
        "sessionEndedCode": _("Session ended (exit code %(code)s)."),
        "sessionEnded": _("Session ended."),
        "closedUnexpectedly": _("Connection closed unexpectedly (%(code)s): %(reason)s."),
        "closed": _("Disconnected: %(reason)s"),
        "badName": _("File names may only contain letters, digits, '.', '_' and '-'."),
        "tooLarge": _("The file is larger than the %(mib)s MiB limit."),
        "busy": _("Wait for the current file transfer to finish."),
        "live": _("Connected"),
        "resumed": _("Reconnected to the same shell; output from while you were away follows."),
        "newShell": _("The previous shell could not be kept (it ended or was away too long): this is a new shell."),
        "reconnecting": _("Connection lost; reconnecting to the same shell ..."),
        "switching": _("Switching to container %(container)s ..."),
        "kind.sidecar": _("sidecar"),
        "kind.init": _("init container"),
        "kind.ephemeral": _("ephemeral"),
        "kind.container": _("container"),
    }


def terminal_context(request, job, worker: str) -> dict:
    """Context of ``terminal/terminal.html``; ``job`` is None when the query names none."""
    config = None
    if job is not None and worker:
        config = {
            "ws": f"/ws/terminal/jobs/{job.name}/pods/{worker}/",
            "worker": worker,
            "job": job.name,
            "chunk": transfer.CHUNK_BYTES,
            "maxBytes": transfer.MAX_TRANSFER_BYTES,
            "strings": terminal_strings(),
        }
    return {
        "job": job,
        "worker": worker,
        "term_config_json": json.dumps(config, ensure_ascii=False) if config else "",
    }
