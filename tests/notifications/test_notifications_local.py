"""End to end on the real local runtime (supervisor + real Ray): a user's signed webhook rule receives a Running
and then a Succeeded message for their short demo job, sent by the status sync's own events through the Celery
delivery tasks (eager, as in the other local-runtime tests), each with a valid HMAC-SHA256 signature."""

from __future__ import annotations

import hashlib
import hmac
import json
import time

import pytest

from jobs.control import controller
from jobs.models import Job
from notifications import services
from notifications.models import Delivery, Rule
from tests.clusters.test_runcheck_local import ROOT, demo_document, explain, local, run_until  # noqa: F401
from tests.notifications.receiver import Receiver

pytestmark = [pytest.mark.ray, pytest.mark.django_db(transaction=True), pytest.mark.timeout(900)]

SECRET = "ray-e2e-secret"
RUN = (
    "python -u /rlark/examples/demo/train.py --config /rlark/examples/demo/demo.yaml --output /output "
    '--run-name "$RLARK_RUN_ID" --steps 8 --save-interval 100 --step-interval 1 --episodes 1'
)


def verified(request: dict) -> dict:
    """The body of one received message after checking its signature and timestamp (as a receiver should)."""
    ts, sig = request["headers"]["X-RLark-Timestamp"], request["headers"]["X-RLark-Signature"]
    want = hmac.new(SECRET.encode(), ts.encode() + b"." + request["body"], hashlib.sha256).hexdigest()
    assert hmac.compare_digest(sig, f"sha256={want}"), "bad signature"
    assert abs(time.time() - int(ts)) < 600
    return json.loads(request["body"])


def test_a_webhook_rule_gets_signed_running_then_succeeded_from_the_real_sync(local, admin_user, settings):  # noqa: F811
    settings.RLARK_NOTIFY_ALLOWED_HOSTS = ["127.0.0.1"]
    settings.RLARK_NOTIFY_TIMEOUT = 2.0
    with Receiver() as receiver:
        channel = services.create_channel(
            admin_user, {"name": "hook", "kind": "webhook", "url": receiver.url, "secret": SECRET, "language": "en"}
        )
        services.create_rule(admin_user, {"channel": channel.pk, "events": ["Running", "Succeeded", "Failed"]})
        job = Job.objects.create(
            name="notify-demo",
            owner=admin_user,
            spec=demo_document(local / "out", run_script=RUN, rollouts=2),
            rlinf_config=(ROOT / "examples/demo/demo.yaml").read_text(),
        )
        controller.request_reconcile(job)
        job = run_until(job, lambda j: j.phase in ("Running", "Succeeded", "Failed"), 300, "Running")
        assert job.phase == "Running", explain(job)
        job = run_until(job, lambda j: j.phase in ("Succeeded", "Failed"), 300, "the end of the run")
        assert job.phase == "Succeeded", explain(job)
        deadline = time.monotonic() + 30
        while len(receiver.requests) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
        bodies = [verified(r) for r in receiver.requests]
    assert [(b["job"], b["kind"]) for b in bodies] == [("notify-demo", "phase")] * 2, bodies
    assert [b["text"] for b in bodies] == [
        "RLark: job notify-demo is Running.",
        "RLark: job notify-demo is Succeeded.",
    ]
    assert all(SECRET not in r["body"].decode() for r in receiver.requests)
    assert set(Delivery.objects.values_list("status", flat=True)) == {"sent"}
    assert Rule.objects.get().last_status == "sent"
