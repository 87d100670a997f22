"""Against the REAL control plane: the Kubernetes runtime reports every container of a Pod from its spec
and status (``main``, a native sidecar = an init container with ``restartPolicy: Always``, a plain init container),
and reads a chosen container's log through the real ``pods/log`` (kwok serves the files named by a ``Logs`` object);
the local runtime reports ``main`` only."""

from __future__ import annotations

import pytest

from clusters.runtime.containers import MAIN_ONLY
from clusters.runtime.registry import get_runtime
from tests.k8s_real.conftest import wait_for

pytestmark = [pytest.mark.k8s_real, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]
POD = "multi-header-0"


def _pod(namespace: str) -> dict:
    labels = {"rlinf.io/job": "multi", "rlinf.io/task": "multi-header"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": POD, "namespace": namespace, "labels": labels},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": "cpu-0"},
            "tolerations": [{"operator": "Exists"}],
            "initContainers": [
                {"name": "prepare", "image": "busybox"},
                {"name": "net-agent", "image": "busybox", "restartPolicy": "Always"},
            ],
            "containers": [{"name": "main", "image": "rlinf/rlinf:v1"}],
        },
    }


def test_kubernetes_runtime_reports_containers_and_reads_a_sidecar_log(k8s_cluster, k8s_namespace, tmp_path):
    k8s_namespace.apply([_pod(k8s_namespace.name)])
    runtime = get_runtime(k8s_cluster)
    pods = wait_for(
        lambda: [p for p in runtime.list_pods(k8s_namespace.name, "multi") if p.phase == "Running"], 60, "Pod Running"
    )
    got = [(c.name, c.kind) for c in pods[0].containers]
    assert got == [("main", "main"), ("net-agent", "sidecar"), ("prepare", "init")]

    main_log, agent_log = tmp_path / "main.log", tmp_path / "agent.log"
    stamp = "2026-01-01T00:00:00.000000000Z"
    main_log.write_text(f"{stamp} stdout F Ray cluster is ready\n")
    agent_log.write_text(f"{stamp} stdout F [agent] domain network up\n")
    k8s_namespace.apply(
        [
            {
                "apiVersion": "kwok.x-k8s.io/v1alpha1",
                "kind": "Logs",
                "metadata": {"name": POD},
                "spec": {
                    "logs": [
                        {"containers": ["main"], "logsFile": str(main_log)},
                        {"containers": ["net-agent"], "logsFile": str(agent_log)},
                    ]
                },
            }
        ]
    )

    def read(container: str) -> str:
        return b"".join(runtime.stream_log(k8s_namespace.name, POD, container=container)).decode()

    assert wait_for(lambda: "domain network up" in read("net-agent"), 30, "sidecar log")
    assert "Ray cluster is ready" in read("main") and "domain network" not in read("main")


def test_local_runtime_reports_main_only():
    from clusters.runtime.local.runtime import _pod_info

    info = _pod_info(
        {"name": "demo-header-0", "task": "demo-header", "ordinal": 0, "phase": "Running", "node": "local-0"}
    )
    assert info.containers == MAIN_ONLY and [c.name for c in info.containers] == ["main"]
