"""The status sync's ``ReplicaFailure``: a role whose Pods the cluster refuses to create (the StatefulSet's
``FailedCreate`` Warning event) makes the job's condition and message; an event of an earlier run is not taken;
a stopped job's condition is cleared. The runtime here refuses the way the real StatefulSet controller does
(``tests/k8s_real/test_refused_pods_real.py`` shows it against the real control plane)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from clusters.runtime.base import PodEvent
from jobs.control import controller
from jobs.models import Job, Task
from jobs.observe.status import get_condition
from tests.fake_runtime import FakeRuntime, fake_clusters
from tests.jobs.test_sync import resync, submit

pytestmark = pytest.mark.django_db

QUOTA = (
    'create Pod demo-rollout-1 in StatefulSet demo-rollout failed error: pods "demo-rollout-1" is forbidden: '
    "exceeded quota: team, requested: pods=1, used: pods=2, limited: pods=2"
)


class RefusingRuntime(FakeRuntime):
    """Creates at most ``allowed`` Pods in the namespace, as a ResourceQuota ``pods: <allowed>`` does, and reports
    each refusal as the StatefulSet controller's Warning event on the StatefulSet (``events``: name -> events)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.allowed = 2
        self.events: dict[str, list[PodEvent]] = {}
        self.asked: list[tuple[str, str, list[str]]] = []

    def _scale(self, key: tuple[str, str], replicas: int) -> None:
        namespace, task = key
        self.replicas[key] = replicas
        for pkey, pod in list(self.pods.items()):
            if pkey[0] == namespace and pod.task == task and pod.ordinal >= replicas:
                del self.pods[pkey]
        for ordinal in range(replicas):
            if (namespace, f"{task}-{ordinal}") not in self.pods and len(self.pods) < self.allowed:
                self.pods[(namespace, f"{task}-{ordinal}")] = self._new_pod(namespace, task, ordinal)

    def warning_events(self, namespace: str, kind: str, names: list[str]) -> dict[str, list[PodEvent]]:
        self.asked.append((namespace, kind, list(names)))
        return {n: self.events[n] for n in names if n in self.events}


@pytest.fixture
def fake(monkeypatch, settings, tmp_path):
    from clusters.runtime import registry

    fake_clusters(monkeypatch, settings, tmp_path, {"alpha": "ns-alpha"})
    runtime = RefusingRuntime("alpha")
    monkeypatch.setattr(registry, "runtime_for", lambda cluster: runtime)
    return runtime


def test_refusal_is_the_condition_and_the_message_and_clears_when_the_pods_exist(fake, alice):
    job = submit(alice)  # header x1 + rollout x2; the quota lets 2 Pods exist
    assert sorted(n for _, n in fake.pods) == ["demo-header-0", "demo-rollout-0"]
    fake.set_running()
    fake.events["demo-rollout"] = [PodEvent("Warning", "FailedCreate", QUOTA, datetime.now(UTC), 3)]
    job = resync(job)
    cond = get_condition(job.conditions, "ReplicaFailure")
    assert cond["status"] == "True" and cond["reason"] == "QuotaExceeded"
    assert cond["message"] == f"Role Rollout: {QUOTA}"
    assert f"The cluster refuses to create Pod demo-rollout-1: {QUOTA}" in job.message
    assert ("ns-alpha", "StatefulSet", ["demo-rollout"]) in fake.asked  # only the short role is asked about

    fake.allowed = 3  # the administrator raises the quota: the StatefulSet creates the Pod
    fake._scale(("ns-alpha", "demo-rollout"), 2)
    fake.set_running()
    job = resync(job)
    cond = get_condition(job.conditions, "ReplicaFailure")
    assert (cond["status"], cond["reason"]) == ("False", "PodsCreated")
    assert "refuses" not in job.message


def test_an_event_of_an_earlier_run_is_not_a_refusal(fake, alice):
    job = submit(alice)
    old = datetime.now(UTC) - timedelta(hours=1)
    job.started_at = old + timedelta(minutes=30)
    job.save(update_fields=["started_at"])
    fake.set_running()
    fake.events["demo-rollout"] = [PodEvent("Warning", "FailedCreate", QUOTA, old, 1)]
    job = resync(job)
    assert get_condition(job.conditions, "ReplicaFailure") is None
    assert Task.objects.get(name="demo-rollout").message == "Waiting for Pod demo-rollout-1 to be created"


def test_a_stopped_job_is_no_longer_refused(fake, alice):
    job = submit(alice)
    fake.events["demo-rollout"] = [PodEvent("Warning", "FailedCreate", QUOTA, datetime.now(UTC), 1)]
    job = resync(job)
    assert get_condition(job.conditions, "ReplicaFailure")["status"] == "True"
    controller.stop(job)
    job = resync(Job.objects.get(pk=job.pk))
    cond = get_condition(job.conditions, "ReplicaFailure")
    assert (cond["status"], cond["reason"]) == ("False", "NoPodsWanted")
