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
    import psutil
    import yaml
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from clusters.host_paths import demo_output_path
    from clusters.models import Cluster
    from clusters.runtime.registry import get_runtime
    from jobs.control import controller
    from jobs.control.submission import create_job

    result = 1
    try:
        doc = yaml.safe_load((ROOT / "examples" / "demo" / "job.yaml").read_text())
        header = doc["spec"]["tasks"][0]
        # the demo cluster allows each user's own directory only (what the wizard's demo uses)
        output = demo_output_path(str(settings.RLARK_LOCAL_ROOT), "admin", doc["metadata"]["name"])
        header["kubernetes"]["workload"]["template"]["spec"]["volumes"][0]["hostPath"]["path"] = output
        header["runScript"] += f" --steps {args.steps} --step-interval 0.5 --run-name bench"
        user = get_user_model().objects.get(username="admin")
        runtime = get_runtime(Cluster.objects.get(name="local"))

        peak = {"rss": 0, "ray_rss": 0}
        stop_sampling = threading.Event()

        def sample() -> None:
            while not stop_sampling.is_set():
                own = [sup.pid]
                pods = runtime._call("list_pods", job="cartpole-demo") if sup.poll() is None else []
                own += [p["pid"] for p in pods if p.get("pid")]
                rss = 0
                for pid in own:
                    try:
                        rss += psutil.Process(pid).memory_info().rss
                    except psutil.Error:
                        pass
                peak["rss"] = max(peak["rss"], rss)
                stop_sampling.wait(0.5)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        t0 = time.monotonic()
        job = create_job(user, doc)
        head = "cartpole-demo-header-0"
        marks: dict[str, float] = {}
        while time.monotonic() - t0 < args.timeout:
            try:
                text = runtime.read_log("rlark-system", head, tail_lines=None)
            except Exception:  # noqa: BLE001 - the pod may not exist yet
                text = ""
            for key, marker in (
                ("ready", "Ray cluster is ready"),
                ("step", "Global Step: 1/"),
                ("done", "Run script exited with code"),
            ):
                if marker in text and key not in marks:
                    marks[key] = time.monotonic() - t0
            if "done" in marks:
                break
            time.sleep(0.2)
        metrics = runtime.pod_metrics("rlark-system", "cartpole-demo") or {}
        workload_rss = sum(m["memory"] for m in metrics.values())
        stop_sampling.set()
        sampler.join()
        pids: set[int] = set()
        from clusters.runtime.local import launcher

        for p in runtime._call("list_pods", job="cartpole-demo"):
            if p.get("pid"):
                pids.update(launcher.namespace_members(p["pid"]))
        t_stop = time.monotonic()
        controller.stop(job)
        while runtime.list_pods("rlark-system", "cartpole-demo") and time.monotonic() - t_stop < 60:
            time.sleep(0.1)
        stop_seconds = time.monotonic() - t_stop
        left = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE]
        controller.delete(job)

        def fmt(key: str) -> str:
            return f"{marks[key]:.1f} s" if key in marks else "not reached"

        print(f"load average (1 min)           : {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        print(f"submit -> Ray ready (3 nodes)  : {fmt('ready'):>12}   target <= 30 s")
        print(f"submit -> first Global Step    : {fmt('step'):>12}")
        print(f"submit -> run script finished  : {fmt('done'):>12}   ({args.steps} steps)")
        print(f"runtime peak RSS (no Ray)      : {peak['rss'] / 2**20:9.1f} MB   target <= 60 MB")
        print(f"Ray + workload RSS at the end  : {workload_rss / 2**20:9.1f} MB")
        print(f"stop -> no process left        : {stop_seconds:9.1f} s    target <= 10 s ({len(left)} left)")
        result = 0 if "done" in marks and not left else 1
    finally:
        stop_group(sup, timeout=60)
        shutil.rmtree(tmp, ignore_errors=True)
    return result


if __name__ == "__main__":
    sys.exit(main())
