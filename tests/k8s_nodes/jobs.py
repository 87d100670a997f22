"""Job documents for the real-node tests: the demo's shape (Header x1, rollout x2) on the ``type=real`` nodes,
running the image built here; and reading what a container really has (exec through the API server)."""

from __future__ import annotations

from typing import Any

from tests.k8s_nodes.conftest import CLUSTER, NODE_SELECTOR
from tests.k8s_real.jobs import document, task

HEADER_SELECTOR = {"kubernetes.io/hostname": "real-0"}  # the Header's selector must name one node

# The run script: Ray must have formed (3 alive nodes); one Ray task per node reports the node's
# RLINF_NODE_RANK as the wrapper exported it before `ray start`; then exit with EXIT_CODE.
RUN_SCRIPT = """python - <<'PY'
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy
ray.init(address="auto")
nodes = [n for n in ray.nodes() if n["Alive"]]
print(f"alive ray nodes: {len(nodes)}", flush=True)

@ray.remote(num_cpus=0)
def rank():
    import os, socket
    return os.environ.get("RLINF_NODE_RANK"), socket.gethostname()

pinned = [NodeAffinitySchedulingStrategy(n["NodeID"], soft=False) for n in nodes]
refs = [rank.options(scheduling_strategy=s).remote() for s in pinned]
for r, host in sorted(ray.get(refs)):
    print(f"ray task on {host}: RLINF_NODE_RANK={r}", flush=True)
PY
exit {code}"""


def demo_job(name: str, image: str, exit_code: int = 0, rollouts: int = 2) -> dict[str, Any]:
    """Header x1 on ``real-0`` + rollout x ``rollouts`` on the real nodes; the run script exits ``exit_code``."""
    header = task("header", head=True, replicas=1, selector=HEADER_SELECTOR, role="Actor", image=image, cluster=CLUSTER)
    header["runScript"] = RUN_SCRIPT.replace("{code}", str(exit_code))
    rollout = task(
        "rollout", head=False, replicas=rollouts, selector=NODE_SELECTOR, role="Rollout", image=image, cluster=CLUSTER
    )
    return document(name, header, rollout)


def process_env(ns, pod: str, name: str) -> set[str]:
    """The values of ``name`` in the environment of every process in ``pod``'s main container (read by exec)."""
    script = f"for e in /proc/[0-9]*/environ; do tr '\\0' '\\n' < $e 2>/dev/null | grep '^{name}=' ; done | sort -u"
    out = ns.kubectl("exec", pod, "-c", "main", "--", "bash", "-c", script, timeout=30)
    return {line.split("=", 1)[1] for line in out.splitlines() if "=" in line}


def pod_logs(ns, tail: int = 40) -> str:
    """The last ``tail`` lines of every Pod's main container in ``ns`` (for assertion messages)."""
    out = []
    for pod in sorted(ns.pods()):
        try:
            out.append(f"--- {pod}\n" + ns.kubectl("logs", pod, "-c", "main", f"--tail={tail}", timeout=20))
        except Exception as exc:  # noqa: BLE001 - diagnostics only
            out.append(f"--- {pod}: {exc}")
    return "\n".join(out)
