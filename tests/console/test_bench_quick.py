"""Every ``bench/`` script runs in its short mode (``--quick``) and prints its figures, so none can rot.

A bench script that crashes (``bench/validate.py`` once raised ``ImproperlyConfigured``) is noticed here. Each script
runs as a subprocess, the way a developer runs it, on a small fleet; the test checks it exits 0 and prints the
ratio lines the README quotes. A PostgreSQL ``DATABASE_URL`` is pointed at a database of the bench's own, so
the bench's throwaway ``test_`` database never collides with the suite's.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.k8s.controlplane import missing_binaries

ROOT = Path(__file__).resolve().parents[2]


# script and its arguments -> (markers, lines its output must contain, timeout in seconds)
SCRIPTS = {
    "validate.py": ((), ["validate+render: median", "ratio:"], 120),
    "lists.py": ((), ["worst ratio", "queries"], 180),
    "progress.py": (
        (),
        ["worst time ratio", "queries ratio 300/100 jobs: 1.00 on every page", "later / first look time ratio"],
        180,
    ),
    "progress_tensorboard.py": ((), ["later / first look time ratio", "appended bytes parsed"], 120),
    "web.py": ((pytest.mark.e2e,), ["ratio 8/1 connections", "p99"], 240),
    "sync.py": ((), ["ratio sync/raw", "DB queries per cycle"], 180),
    "diagnosis.py": ((), ["Diagnosis queries:", "Run check queries:", "ratio to the raw reading of the logs"], 240),
    "diagnosis.py --real": (
        (pytest.mark.k8s_real,),
        ["the real kube-apiserver", "Diagnosis queries:", "ratio to the raw reading of the logs"],
        300,
    ),
    "notify.py": ((), ["delivery latency, good receiver only", "ratio p95 beside a hanging receiver"], 180),
    "logs_terminal.py": ((), ["ratio websocket / HTTP", "Terminal keystroke echo"], 180),
    "local_e2e.py": ((pytest.mark.ray, pytest.mark.e2e), ["Ray ready", "stop -> no process left"], 300),
    "ssh.py": ((pytest.mark.ray, pytest.mark.e2e), ["echo through bastion: p50", "scp 2 MB through bastion: up"], 600),
    # root only (network namespaces, TUN); as another user it prints that it skipped and exits 0
    "domain.py": (
        (),
        ["ratio domain/veth", "RTT p50/p95", "cores per 100 Mbit/s"] if os.geteuid() == 0 else ["skipped"],
        300,
    ),
    "k8s_scale.py": ((pytest.mark.k8s_real,), ["ratio console/kubectl", "ratio sync/raw"], 300),
    # real nodes (kubelet + containerd): root only; otherwise it prints that it skipped and exits 0
    "k8s_nodes.py": (
        (pytest.mark.k8s_nodes,),
        ["ratio console/kubectl", "containerd VmHWM"] if os.geteuid() == 0 else ["skipped"],
        600,
    ),
    "watch_latency.py": (
        (pytest.mark.k8s_real,),
        ["the console's own latency", "ratio console / raw watch"],
        240,
    ),
}
# scripts whose threads write while they read: PostgreSQL only (a database of their own on the same server)
NEEDS_POSTGRES = {"watch_latency.py"}


def test_every_bench_script_is_covered():
    scripts = sorted(p.name for p in (ROOT / "bench").glob("*.py") if p.name != "quick.py")
    assert scripts == sorted({key.split()[0] for key in SCRIPTS})


def bench_env(script: str) -> dict[str, str]:
    env = {**os.environ, "RLARK_BENCH_QUICK": "1", "PYTHONUNBUFFERED": "1"}
    env.pop("DJANGO_SETTINGS_MODULE", None)
    url = env.pop("DATABASE_URL", "")  # SQLite in memory: fast, and never the suite's own test database
    if script in NEEDS_POSTGRES:
        if not url.startswith("postgres"):
            pytest.skip(f"{script} needs PostgreSQL (DATABASE_URL), as in CI")
        env["DATABASE_URL"] = url.rsplit("/", 1)[0] + "/bench_" + script.removesuffix(".py")
    return env


@pytest.mark.parametrize("script", [pytest.param(name, marks=list(marks)) for name, (marks, _, _) in SCRIPTS.items()])
def test_bench_script_runs_in_quick_mode(script):
    _, expected, timeout = SCRIPTS[script]
    name, *args = script.split()
    if "k8s_real" in {mark.name for mark in SCRIPTS[script][0]} and missing_binaries():
        if os.environ.get("RLARK_REQUIRE_REAL_K8S") == "1":
            pytest.fail(f"RLARK_REQUIRE_REAL_K8S=1 but control plane binaries are missing: {missing_binaries()}")
        pytest.skip(f"control plane binaries missing: {missing_binaries()} (make k8s-build)")
    if "k8s_nodes" in {mark.name for mark in SCRIPTS[script][0]} and os.geteuid() == 0:
        from tools.k8s.nodes import missing_node_prerequisites

        missing = missing_binaries() + missing_node_prerequisites()
        if missing:
            if os.environ.get("RLARK_REQUIRE_REAL_K8S") == "1":
                pytest.fail(f"RLARK_REQUIRE_REAL_K8S=1 but real nodes need: {missing}")
            pytest.skip(f"real nodes need: {missing} (make k8s-build; make install as root)")
    proc = subprocess.run(
        [sys.executable, str(ROOT / "bench" / name), *args, "--quick"],
        cwd=ROOT,
        env=bench_env(name),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-4000:]
    for line in expected:
        assert line in out, out[-4000:]
