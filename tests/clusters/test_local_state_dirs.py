"""The local runtime's state directory may live anywhere (docs/security.md, "State directories"): outside
``/tmp`` (a production ``/var/lib/rlark``, a checkout in a home directory) and on a file system of its own
mounted below ``/tmp``. A Worker starts in each, still cannot read the state directory, and still sees its own
mounts. Real supervisor, real namespaces, no Ray.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.clusters.test_local_runtime_support import SupervisorProcess, manifest, nodes_spec, wait_for

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="hiding the state directory is what a root supervisor does")

NODES = nodes_spec(("n1", {}, {"cpu": 8}))
COMMAND = (
    'cat "$STATE/state.json" > /dev/null 2>&1 && echo STATE-READABLE || echo STATE-HIDDEN; '
    "echo hello > /rlark/work/out.txt && echo WORK-OK; trap 'exit 0' TERM; sleep 600 & wait"
)


def run_one_worker(root: Path) -> tuple[str, str]:
    """Start a supervisor on ``root`` and one Worker; returns its log once it has run its command, and what it
    wrote into its work directory, as the host sees it."""
    sup = SupervisorProcess(root).start()
    try:
        rt = sup.runtime(NODES)
        env = [{"name": "STATE", "value": str(root)}]
        rt.apply_task(manifest("state", "header", head=True, env=env, command=["bash", "-c", COMMAND]))
        try:
            log = wait_for(
                lambda: "WORK-OK" in (t := rt.read_log("rlark-system", "state-header-0")) and t, 30, what="the Worker"
            )
            return log, (root / "pods" / "c1" / "state-header-0" / "work" / "out.txt").read_text()
        except AssertionError:
            log = rt.read_log("rlark-system", "state-header-0")
            raise AssertionError(f"the Worker did not run its command; its log:\n{log}") from None
        finally:
            rt.delete_task("rlark-system", "state-header")
    finally:
        sup.stop()


def test_a_state_directory_outside_tmp():
    base = Path("/var/lib/rlark-tests")
    base.mkdir(parents=True, exist_ok=True)
    var = Path(tempfile.mkdtemp(prefix="var-", dir=base))
    try:
        log, out = run_one_worker(var / "local")
        assert "STATE-HIDDEN" in log and "STATE-READABLE" not in log, log
        assert out == "hello\n"
    finally:
        shutil.rmtree(var, ignore_errors=True)


def test_a_state_directory_on_its_own_file_system_below_tmp(tmp_path):
    fs = tmp_path / "varfs"
    fs.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(fs)], check=True, timeout=30)
    try:
        log, out = run_one_worker(fs / "local")
        assert "STATE-HIDDEN" in log and "STATE-READABLE" not in log, log
        assert out == "hello\n"
    finally:
        subprocess.run(["umount", "-l", str(fs)], check=False, timeout=30)
