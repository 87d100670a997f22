"""What the jobs app tells the apps above it, as Django signals (they connect receivers; jobs never imports them)."""

from __future__ import annotations

from django.dispatch import Signal

#: Sent by the status sync once its writes are committed, with ``events``: a list of dicts, each
#: ``{"job": <job id>, "kind": "phase" | "restart", "phase": <new Job phase> (kind phase), "worker": <Pod name>,
#: "restarts": <its restart count> (kind restart), "attempt": <Job.attempt>}``. A receiver must only enqueue
#: work (it runs inside the sync).
job_events = Signal()
