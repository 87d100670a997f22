"""A self-contained console serving one demo job from a :class:`~terminal.demo_runtime.DirRuntime`.

``python -m launcher.terminal_demo --dir /tmp/x --port 8765`` creates a fresh SQLite database in ``--dir``,
users ``alice`` / ``bob`` (password ``demo-pass-1``) and ``admin`` (staff), job ``demo`` owned by
alice with Pods ``demo-actor-0``, ``demo-actor-1`` and ``demo-rollout-0`` whose logs keep growing
(``Global Step N`` every second), then serves the ASGI app with daphne. Used by the browser tests
of the Logs tab and WebTerminal, the bench and screenshots when no cluster is at hand.
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

from launcher.demo_users import NS, PASSWORD  # noqa: F401 - re-exported for the tests and bench/


def _header(rank: int, role: str) -> str:
    return (
        f"[rlark] prepare script finished (RLINF_NODE_RANK={rank}, RLARK_TASK_ROLE={role})\n"
        "\x1b[32m[rlark] ray start --head --port=6379\x1b[0m\n"
        "Local node IP: 127.0.0.1\n"
        "\x1b[1;32mRay cluster is ready\x1b[0m (3/3 nodes)\n"
        "\x1b[33mWARNING\x1b[0m torch.cuda not available, running on CPU <script>alert('xss')</script>\n"
        "中文日志：训练任务已开始\n"
    )


def _writer(runtime, stop: threading.Event, interval: float) -> None:
    step = 0
    while not stop.wait(interval):
        step += 1
        loss = 2.0 / (1 + step * 0.05)
        runtime.append_log(
            NS,
            "demo-actor-0",
            f"Global Step {step} | loss={loss:.4f} | reward={1 - loss / 2:.4f} | "
            "\x1b[36mthroughput=1234.5 tok/s\x1b[0m\n",
        )
        if step % 3 == 0:
            runtime.append_log(NS, "demo-rollout-0", f"rollout batch {step // 3} collected (64 episodes)\n")


def _as_running(job) -> None:
    """What the status sync would have recorded for a job running for a few minutes: started, every Worker ready
    (the page then says "3/3 ready" and "Running for 5m", not "0/3" and "—" next to "Job active")."""
    from datetime import timedelta

    from django.utils import timezone

    from jobs.models import Job, Pod  # local import: it loads the models; the settings come from --dir, set first

    started = timezone.now() - timedelta(minutes=5)
    Job.objects.filter(pk=job.pk).update(started_at=started, created_at=started - timedelta(seconds=20))
    for task in job.tasks.all():
        task.ready_replicas = task.replicas
        task.save(update_fields=["ready_replicas"])
    Pod.objects.filter(task__job=job).update(
        container_state={"state": "running", "ready": True}, created_at=started, started_at=started
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dir", required=True)
    parser.add_argument("--port", type=int, default=8765)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between Global Step lines")
    parser.add_argument("--lines", type=int, default=0, help="extra history lines in demo-actor-1's log")
    args = parser.parse_args(argv)
    base = Path(args.dir).resolve()
    base.mkdir(parents=True, exist_ok=True)
    os.environ["RLARK_VAR_DIR"] = str(base / "var")
    os.environ["DATABASE_URL"] = f"sqlite:///{base / 'demo.sqlite3'}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "rlark_console.settings")
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from launcher import terminal_demo_app  # local import: it loads the models; the settings come from --dir, set above

    registry, application = terminal_demo_app.registry, terminal_demo_app.application
    use_runtime_factory, DirRuntime, seed_job = (
        terminal_demo_app.use_runtime_factory,
        terminal_demo_app.DirRuntime,
        terminal_demo_app.seed_job,
    )

    call_command("migrate", verbosity=0, interactive=False)
    users = get_user_model().objects
    alice = users.create_user("alice", "", PASSWORD)
    users.create_user("bob", "", PASSWORD)
    users.create_superuser("admin", "", PASSWORD)
    runtime = DirRuntime(base / "rt")
    use_runtime_factory(lambda cluster: runtime)

    registry.get_runtime = lambda cluster: runtime  # the rest of the console (job pages, REST API) too
    job = seed_job(runtime, alice)
    _as_running(job)
    runtime.append_log(NS, "demo-actor-0", _header(0, "Actor"))
    history = "".join(f"[history] line {i} of the earlier run\n" for i in range(args.lines))
    runtime.append_log(
        NS, "demo-actor-1", _header(1, "Actor").replace("--head --port=6379", "--address=127.0.0.1:6379")
    )
    runtime.append_log(NS, "demo-actor-1", history)
    runtime.append_log(NS, "demo-rollout-0", "[rlark] worker joined the Ray cluster\n")
    # demo-actor-1 also runs a native sidecar (the domain network agent) and had an init container
    runtime.add_container(NS, "demo-actor-1", "net-agent", "sidecar")
    runtime.add_container(NS, "demo-actor-1", "prepare", "init")
    runtime.append_container_log(NS, "demo-actor-1", "net-agent", "[net-agent] domain network up (10.77.0.2/24)\n")
    runtime.append_container_log(NS, "demo-actor-1", "prepare", "[prepare] workspace ready\n")
    (runtime.workdir(NS, "demo-actor-1") / "train.log").write_text("checkpoint saved to /ckpt/step-100\n")
    stop = threading.Event()
    threading.Thread(target=_writer, args=(runtime, stop, args.interval), daemon=True).start()

    from daphne.endpoints import build_endpoint_description_strings
    from daphne.server import Server

    print(f"demo console on http://127.0.0.1:{args.port}/", flush=True)
    try:
        Server(
            application,
            endpoints=build_endpoint_description_strings(host="127.0.0.1", port=args.port),
            signal_handlers=True,
        ).run()
    finally:
        stop.set()
        for stream in runtime.execs:
            stream.close()
        time.sleep(0.1)


if __name__ == "__main__":
    main()
