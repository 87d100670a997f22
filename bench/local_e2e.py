"""Local runtime end to end: submit the demo job (examples/demo/job.yaml) through the Job service and the
controller to the local supervisor, and report

- submit -> Ray ready (``Ray cluster is ready`` in the header log) and submit -> first ``Global Step``,
  targets 30 s for the 3-node cluster on a 2-core machine;
- peak RSS of the runtime's own processes (the supervisor and the per-Worker ``unshare`` launchers;
  Ray and the workload excluded), target 60 MB;
- stop (scale to 0) -> no process of the job left, target 10 s.

Runs on a private state directory (SQLite, local root, output) under a temp dir, which it removes.
Usage: ``.venv/bin/python bench/local_e2e.py [--steps N]``. Exits 1 if the run did not complete.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.quick import quick_defaults, start_local_console  # noqa: E402
from tests.processes import stop_group  # noqa: E402

MARKERS = (
    ("ready", "Ray cluster is ready"),
    ("step", "Global Step: 1/"),
    ("done", "Run script exited with code"),
)
HEAD = "cartpole-demo-header-0"


def demo_document(steps: int) -> dict:
    """examples/demo/job.yaml, writing to the admin's own demo output directory, ``steps`` steps 0.5 s apart."""
    import yaml
    from django.conf import settings

    from clusters.host_paths import demo_output_path

    doc = yaml.safe_load((ROOT / "examples" / "demo" / "job.yaml").read_text())
    header = doc["spec"]["tasks"][0]
    # the demo cluster allows each user's own directory only (what the wizard's demo uses)
    output = demo_output_path(str(settings.RLARK_LOCAL_ROOT), "admin", doc["metadata"]["name"])
    header["kubernetes"]["workload"]["template"]["spec"]["volumes"][0]["hostPath"]["path"] = output
    header["runScript"] += f" --steps {steps} --step-interval 0.5 --run-name bench"
    return doc


class RssSampler:
    """The peak RSS (bytes, ``peak``) of the runtime's own processes: the supervisor ``sup`` and the demo's
    per-Worker launchers (Ray and the workload excluded), sampled every 0.5 s in a thread."""

    def __init__(self, sup, runtime) -> None:
        self.sup = sup
        self.runtime = runtime
        self.peak = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        import psutil

        while not self.stopping.is_set():
            own = [self.sup.pid]
            pods = self.runtime._call("list_pods", job="cartpole-demo") if self.sup.poll() is None else []
            own += [p["pid"] for p in pods if p.get("pid")]
            rss = 0
            for pid in own:
                try:
                    rss += psutil.Process(pid).memory_info().rss
                except psutil.Error:
                    pass
            self.peak = max(self.peak, rss)
            self.stopping.wait(0.5)

    def start(self) -> RssSampler:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()


def watch_header(runtime, t0: float, timeout: float) -> dict[str, float]:
    """Seconds from ``t0`` to each of :data:`MARKERS` in the header's log, until the run script ended or
    ``timeout`` s passed."""
    marks: dict[str, float] = {}
    while time.monotonic() - t0 < timeout:
        try:
            text = runtime.read_log("rlark-system", HEAD, tail_lines=None)
        except Exception:  # noqa: BLE001 - the pod may not exist yet
            text = ""
        for key, marker in MARKERS:
            if marker in text and key not in marks:
                marks[key] = time.monotonic() - t0
        if "done" in marks:
            break
        time.sleep(0.2)
    return marks


def stop_and_count(runtime, job) -> tuple[float, list[int]]:
    """Stop the job: seconds until it has no Pod left, and the PIDs of its Workers' namespaces still alive."""
    import psutil

    from clusters.runtime.local import launcher
    from jobs.control import controller

    pids: set[int] = set()
    for p in runtime._call("list_pods", job="cartpole-demo"):
        if p.get("pid"):
            pids.update(launcher.namespace_members(p["pid"]))
    t_stop = time.monotonic()
    controller.stop(job)
    while runtime.list_pods("rlark-system", "cartpole-demo") and time.monotonic() - t_stop < 60:
        time.sleep(0.1)
    stop_seconds = time.monotonic() - t_stop
    left = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
    return stop_seconds, left


def run_demo(sup, args: argparse.Namespace) -> int:
    """Submit the demo, measure, stop and delete it, print the figures; 0 when the run completed and nothing of
    it was left."""
    from django.contrib.auth import get_user_model

    from clusters.models import Cluster
    from clusters.runtime.registry import get_runtime
    from jobs.control import controller
    from jobs.control.submission import create_job

    doc = demo_document(args.steps)
    user = get_user_model().objects.get(username="admin")
    runtime = get_runtime(Cluster.objects.get(name="local"))
    sampler = RssSampler(sup, runtime).start()
    t0 = time.monotonic()
    job = create_job(user, doc)
    marks = watch_header(runtime, t0, args.timeout)
    metrics = runtime.pod_metrics("rlark-system", "cartpole-demo") or {}
    workload_rss = sum(m["memory"] for m in metrics.values())
    sampler.stop()
    stop_seconds, left = stop_and_count(runtime, job)
    controller.delete(job)

    def fmt(key: str) -> str:
        return f"{marks[key]:.1f} s" if key in marks else "not reached"

    print(f"load average (1 min)           : {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    print(f"submit -> Ray ready (3 nodes)  : {fmt('ready'):>12}   target <= 30 s")
    print(f"submit -> first Global Step    : {fmt('step'):>12}")
    print(f"submit -> run script finished  : {fmt('done'):>12}   ({args.steps} steps)")
    print(f"runtime peak RSS (no Ray)      : {sampler.peak / 2**20:9.1f} MB   target <= 60 MB")
    print(f"Ray + workload RSS at the end  : {workload_rss / 2**20:9.1f} MB")
    print(f"stop -> no process left        : {stop_seconds:9.1f} s    target <= 10 s ({len(left)} left)")
    return 0 if "done" in marks and not left else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=300)
    quick_defaults(parser, steps=1, timeout=120)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="rlark-bench-"))
    try:
        sup = start_local_console(tmp)
    except RuntimeError as exc:
        print(exc)
        return 1
    try:
        return run_demo(sup, args)
    finally:
        stop_group(sup, timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
