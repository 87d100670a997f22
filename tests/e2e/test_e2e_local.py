"""End-to-end acceptance on the real local runtime (``console_server`` = the console as
``make run`` starts it: daphne, Celery worker + beat, local supervisor; real Ray nodes on loopback).

Point 1: the demo job from examples/demo/job.yaml, created through the API, shows 3 Running Workers
within 60 s, the header log shows ``Ray cluster is ready`` with 3 nodes, ``Executing run script...`` and
``Global Step`` lines; a checkpoint appears in the output mount and is readable after the job stops; the
detail page (Playwright) shows the Workers.
Point 3: stop scales to 0 within 10 s and leaves no process of the job alive (checked by PID); start
brings it back; delete leaves nothing running.
Point 5: killing the web server or the Celery worker mid-run loses no job state; the sync catches up.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import time
import urllib.error
import urllib.request
from pathlib import Path

import psutil
import pytest
import yaml

from tests.conftest import ARTIFACTS, E2E_ADMIN_PASSWORD, ROOT
from tests.processes import alive

pytestmark = [pytest.mark.e2e, pytest.mark.ray, pytest.mark.browser]

JOB = "e2e-cartpole"
# The target is 60 s on a 2-core machine that is otherwise idle. Other test runs may share the
# cores, so the budget scales with the load average (at most 4x); the measured times are written to
# test-artifacts/e2e-local-timings.json.
LOAD = min(4.0, max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)))
READY_BUDGET = float(os.environ.get("RLARK_E2E_READY_SECONDS", 60)) * LOAD


class Api:
    def __init__(self, server, token: str) -> None:
        self.base = server.url + "/api/v1"
        self.token = token

    def call(self, method: str, path: str, body=None, raw: bool = False, timeout: float = 30):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Authorization", f"Token {self.token}")
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                payload = resp.read().decode()
                return resp.status, payload if raw else (json.loads(payload) if payload else None)
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    def status(self) -> dict:
        code, body = self.call("GET", f"/jobs/{JOB}/")
        assert code == 200, body
        return body["status"]

    def log(self, pod: str = "") -> str:
        code, text = self.call("GET", f"/jobs/{JOB}/logs/?tail=1000" + (f"&pod={pod}" if pod else ""), raw=True)
        return text if code == 200 else ""


def wait_for(predicate, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last={last!r}")


@pytest.fixture(scope="module")
def api(console_server):
    out = console_server.manage(
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model\n"
        "from accounts.authentication import issue_token\n"
        "u = get_user_model().objects.get(username='admin')\n"
        "print('KEY=' + issue_token(u, 'e2e-local')[1])\n",
    )
    key = next(line[4:] for line in out.stdout.splitlines() if line.startswith("KEY="))
    return Api(console_server, key)


def job_pids(server, job: str = JOB) -> dict[str, set[tuple[int, float]]]:
    """Worker -> every process of its process group / PID namespace as (PID, start time), from the
    supervisor's state. The start time makes the checks immune to PID reuse (pid_max is 32768 here)."""
    from clusters.runtime.local.launcher import namespace_members

    state_file = Path(server.env["RLARK_VAR_DIR"]) / "local" / "state.json"
    state = json.loads(state_file.read_text())
    out = {}
    for pod in state.get("pods", {}).values():
        if pod.get("job") == job and pod.get("pid"):
            procs = set()
            for pid in set(namespace_members(pod["pid"])) | {pod["pid"]}:
                try:
                    procs.add((pid, psutil.Process(pid).create_time()))
                except psutil.Error:
                    pass
            out[pod["name"]] = procs
    return out


def child_pid(server, needle: str) -> int:
    """PID of one of runconsole's children (they run in their own sessions) by command line."""
    for proc in psutil.Process(server.proc.pid).children():
        if needle in " ".join(proc.cmdline()):
            return proc.pid
    raise AssertionError(f"no child process matching {needle!r}")


def running_workers(api: Api) -> bool:
    workers = api.status()["workers"]
    return len(workers) == 3 and all(w["phase"] == "Running" and w["pod"] for w in workers)


def login(page, server, lang: str) -> None:
    page.context.clear_cookies()
    page.context.add_cookies([{"name": "django_language", "value": lang, "url": server.url}])
    page.goto(server.url + "/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", E2E_ADMIN_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state()


def _demo_document(output: Path) -> dict:
    """examples/demo/job.yaml as ``JOB``, writing into ``output`` and running long enough for the scenario."""
    document = yaml.safe_load((ROOT / "examples/demo/job.yaml").read_text())
    document["metadata"]["name"] = JOB
    header = document["spec"]["tasks"][0]
    header["kubernetes"]["workload"]["template"]["spec"]["volumes"][0]["hostPath"]["path"] = str(output)
    # Long enough to stay running through the whole scenario; the demo's own default is 60 steps.
    header["runScript"] += " --steps 600"
    return document


def _check_demo_job_comes_up(api: Api, document: dict, timings: dict[str, float]) -> None:
    """Point 1: create through the API, 3 Running Workers and Ray markers within 60 s."""
    t0 = time.monotonic()
    code, body = api.call("POST", "/jobs/", document)
    assert code == 201, body
    wait_for(lambda: running_workers(api), READY_BUDGET, "3 Running Workers")
    timings["workers_running"] = time.monotonic() - t0

    def global_step():
        status = api.status()
        if status["phase"] in ("Failed", "Succeeded"):
            raise AssertionError(f"job ended {status['phase']}: {status['message']}")
        text = api.log()
        return "Global Step" in text and text

    try:
        log = wait_for(global_step, READY_BUDGET - (time.monotonic() - t0), "Global Step")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{diagnostics(api)}") from None
    timings["first_global_step"] = time.monotonic() - t0
    timings["load_factor"] = LOAD
    assert "Ray cluster is ready" in log
    assert "Cluster is ready: 3 nodes available" in log
    assert "Executing run script..." in log
    assert log.index("Ray cluster is ready") < log.index("Executing run script...") < log.index("Global Step")
    status = api.status()
    assert [t["rankStart"] for t in status["tasks"]] == [0, 1]
    assert sorted(w["rank"] for w in status["workers"]) == [0, 1, 2]
    wait_for(lambda: api.status()["phase"] == "Running", 20, "job phase Running")


def _check_detail_pages(page, server) -> None:
    """The detail page (Playwright), both languages: Workers, the header's log, the overview and the job list."""
    ARTIFACTS.mkdir(exist_ok=True)
    for lang in ("zh-hans", "en"):
        login(page, server, lang)
        page.goto(f"{server.url}/jobs/{JOB}/?tab=workers")
        rows = page.locator("[data-testid=worker-table] [data-testid=worker-phase]")
        assert rows.count() == 3
        assert [rows.nth(i).get_attribute("data-phase") for i in range(3)] == ["Running"] * 3
        page.click(f"[data-testid=expand-{JOB}-rollout-1]")
        assert page.locator(f"[data-testid=pods-{JOB}-rollout-1]").is_visible()
        # the Worker's own address in its job's network (docs/security.md), not the host's loopback
        assert "\t100.64." in page.locator(f"[data-testid=pods-{JOB}-rollout-1]").inner_text()
        page.screenshot(path=str(ARTIFACTS / f"job-detail-workers-{lang}.png"), full_page=True)
        page.goto(f"{server.url}/jobs/{JOB}/?tab=logs")
        # The embedded Logs panel opens on the header's log; filter to the marker line.
        assert page.locator("[data-testid=logs-worker]").input_value() == f"{JOB}-header-0"
        page.fill("[data-testid=logs-filter]", "Ray cluster is ready")
        page.wait_for_function(
            "() => document.querySelector('[data-testid=logs-view]').innerText.includes('Ray cluster is ready')",
            timeout=15000,
        )
        page.screenshot(path=str(ARTIFACTS / f"job-detail-logs-{lang}.png"))
        page.goto(f"{server.url}/jobs/{JOB}/?tab=overview")
        page.screenshot(path=str(ARTIFACTS / f"job-detail-overview-{lang}.png"), full_page=True)
        page.goto(f"{server.url}/jobs/")
        assert page.locator(f"[data-testid=job-row-{JOB}] [data-testid=job-workers]").inner_text() == "3/3"
        page.screenshot(path=str(ARTIFACTS / f"job-list-{lang}.png"))


def _check_web_server_kill_loses_nothing(server, api: Api) -> dict[str, set[tuple[int, float]]]:
    """Point 5a: kill the web server mid-run: no state lost; -> the Workers' processes before."""
    pids_before = job_pids(server)
    assert len(pids_before) == 3
    web = child_pid(server, "serve_web")  # the web tier (its daphne workers)
    os.killpg(web, signal.SIGKILL)
    wait_for(lambda: child_pid_or_none(server, "serve_web") not in (None, web), 30, "web server restart")
    wait_for(lambda: _ok(api), 60, "API back")
    assert running_workers(api) and api.status()["phase"] == "Running"
    assert all(alive(procs) for procs in pids_before.values())  # the same Worker processes run on
    return pids_before


def _check_stop_while_celery_is_down(
    server, api: Api, pids_before: dict[str, set[tuple[int, float]]], meta: Path
) -> set[tuple[int, float]]:
    """Point 5b: kill the Celery worker, stop the job while it is down: the action is not lost; the checkpoint
    and the header log stay readable; -> every process the job had."""
    worker = child_pid(server, "worker")
    os.killpg(worker, signal.SIGKILL)
    code, body = api.call("POST", f"/jobs/{JOB}/stop/")
    assert code in (200, 202), body
    assert api.status()["phase"] == "Stopped"  # recorded at once, before the runtime acts
    all_pids = set().union(*pids_before.values())
    wait_for(lambda: not alive(all_pids), 60, "every Worker process gone after the Celery worker restarts")
    wait_for(lambda: all(w["phase"] == "Stopped" for w in api.status()["workers"]), 30, "sync caught up")
    # checkpoint readable after the stop
    data = json.loads(meta.read_text())
    assert data["global_step"] >= 10
    assert (meta.parent / "policy.npz").stat().st_size > 0
    # the header log stays readable after the stop
    assert "Global Step" in api.log(f"{JOB}-header-0")
    return all_pids


def _check_start_brings_it_back(
    server, api: Api, all_pids: set[tuple[int, float]], timings: dict[str, float]
) -> set[tuple[int, float]]:
    """Point 3: start brings it back (a new attempt, new processes); -> the new processes."""
    t1 = time.monotonic()
    code, body = api.call("POST", f"/jobs/{JOB}/start/")
    assert code in (200, 202), body
    wait_for(lambda: running_workers(api), READY_BUDGET, "3 Running Workers after start")
    timings["restart_workers_running"] = time.monotonic() - t1
    assert api.status()["attempt"] == 2
    wait_for(lambda: "Executing run script..." in api.log(), READY_BUDGET, "run script after start")
    pids = set().union(*job_pids(server).values())
    assert pids and not (pids & all_pids)
    return pids


def _check_stop_from_the_page(page, server, api: Api, pids: set[tuple[int, float]], timings: dict[str, float]) -> None:
    """Point 3: stop from the page (confirmation dialog) within 10 s, no process left (by PID)."""
    login(page, server, "en")
    page.goto(f"{server.url}/jobs/{JOB}/")
    page.click("[data-testid=action-stop]")
    assert page.locator("#confirm-dialog").is_visible()
    assert f'Stop job "{JOB}"?' in page.inner_text("#confirm-dialog")
    page.screenshot(path=str(ARTIFACTS / "job-stop-dialog-en.png"))
    t2 = time.monotonic()
    page.click("[data-testid=confirm-ok]")
    wait_for(lambda: not alive(pids), 10 * LOAD, "every process gone within 10 s of Stop")
    timings["stop_seconds"] = time.monotonic() - t2
    assert api.status()["phase"] == "Stopped"
    page.goto(f"{server.url}/jobs/{JOB}/")
    assert page.inner_text("[data-testid=detail-phase]") == "Stopped"


def _check_delete_leaves_nothing(server, api: Api) -> None:
    """Point 3: delete (of a started job) leaves nothing running, and the supervisor holds no Worker of it."""
    code, body = api.call("POST", f"/jobs/{JOB}/start/")
    assert code in (200, 202), body
    wait_for(lambda: len(job_pids(server)) == 3, 60, "Workers started again")
    pids = set().union(*job_pids(server).values())
    code, body = api.call("DELETE", f"/jobs/{JOB}/")
    assert code in (200, 204), body
    wait_for(lambda: not alive(pids), 15, "nothing running after delete")
    assert api.call("GET", f"/jobs/{JOB}/")[0] == 404
    # The supervisor forgets a Pod once its whole process group is reaped: no Worker of the job is left, not even
    # one started by a reconcile racing the delete.
    wait_for(lambda: job_pids(server) == {}, 15, "the supervisor holds no Worker of the deleted job")


def test_demo_job_end_to_end(console_server, api, page, tmp_path):
    timings: dict[str, float] = {}
    # the demo cluster's own place for admin's output, as the wizard's demo and the README's CLI step use it: made by
    # the Header's uid (DirectoryOrCreate) inside the console's state directory, which no Worker can otherwise see
    output = console_server.var_dir / "local" / "host-paths" / "admin" / JOB
    _check_demo_job_comes_up(api, _demo_document(output), timings)
    _check_detail_pages(page, console_server)
    # --- a checkpoint appears in the output mount
    meta = wait_for(
        lambda: next(iter(sorted(output.glob("*/checkpoints/global_step_*/actor/meta.json"))), None), 90, "a checkpoint"
    )
    pids_before = _check_web_server_kill_loses_nothing(console_server, api)
    all_pids = _check_stop_while_celery_is_down(console_server, api, pids_before, meta)
    pids = _check_start_brings_it_back(console_server, api, all_pids, timings)
    _check_stop_from_the_page(page, console_server, api, pids, timings)
    _check_delete_leaves_nothing(console_server, api)
    (ARTIFACTS / "e2e-local-timings.json").write_text(json.dumps(timings, indent=1))
    print("e2e timings:", timings)


def diagnostics(api: Api) -> str:
    """The last lines of every Worker's log, for a failure message."""
    out = []
    for w in api.status()["workers"]:
        out.append(f"--- {w['name']} ({w['phase']}) ---\n" + "\n".join(api.log(w["name"]).splitlines()[-25:]))
    return "\n".join(out)


def child_pid_or_none(server, needle: str) -> int | None:
    try:
        return child_pid(server, needle)
    except (AssertionError, psutil.Error):
        return None


def _ok(api: Api) -> bool:
    try:
        return api.call("GET", f"/jobs/{JOB}/", timeout=5)[0] == 200
    except OSError:
        return False


def single_header_job(name: str, run_script: str) -> dict:
    document = yaml.safe_load((ROOT / "examples/demo/job.yaml").read_text())
    document["metadata"] = {"name": name}
    header = document["spec"]["tasks"][0]
    header["runScript"] = run_script
    header.pop("tensorBoardDir", None)
    spec = header["kubernetes"]["workload"]["template"]["spec"]
    spec.pop("volumes", None)
    spec["containers"][0].pop("volumeMounts", None)
    document["spec"]["tasks"] = [header]
    return document


def test_run_script_exit_code_ends_the_job(console_server, api):
    """The run script's exit code on the real runtime: 0 -> Succeeded, exit 3 -> Failed naming the header; both then
    scaled to 0 (no process left) with their logs still readable."""
    jobs = {
        "e2e-exit-zero": "echo 'Global Step: 1/1'; exit 0",
        "e2e-exit-three": "echo 'Traceback (most recent call last):'; echo 'ValueError: boom'; exit 3",
    }
    for name, script in jobs.items():
        code, body = api.call("POST", "/jobs/", single_header_job(name, script))
        assert code == 201, body

    def phase(name: str) -> dict:
        return api.call("GET", f"/jobs/{name}/")[1]["status"]

    ok = wait_for(lambda: (s := phase("e2e-exit-zero"))["phase"] in ("Succeeded", "Failed") and s, 120 * LOAD, "end")
    bad = wait_for(lambda: (s := phase("e2e-exit-three"))["phase"] in ("Succeeded", "Failed") and s, 60 * LOAD, "end")
    assert ok["phase"] == "Succeeded", ok
    assert bad["phase"] == "Failed", bad
    assert "e2e-exit-three-header-0" in bad["message"] and "code 3" in bad["message"]
    assert "ValueError: boom" in bad["message"]
    assert any(c["type"] == "Failed" and c["reason"] == "RunScriptFailed" for c in bad["conditions"])
    # Finished jobs are scaled to 0: no Worker process left ...
    state_file = Path(console_server.env["RLARK_VAR_DIR"]) / "local" / "state.json"
    wait_for(
        lambda: not [p for p in json.loads(state_file.read_text()).get("pods", {}).values() if p.get("job") in jobs],
        30 * LOAD,
        "finished jobs scaled to 0",
    )
    # ... and their logs stay readable.
    code, text = api.call("GET", "/jobs/e2e-exit-zero/logs/?pod=e2e-exit-zero-header-0", raw=True)
    assert code == 200 and "Run script exited with code 0" in text
    for name in jobs:
        assert api.call("DELETE", f"/jobs/{name}/")[0] in (200, 204)


def _user_api(server, username: str) -> Api:
    """An ordinary (non-admin) console user with an API token."""
    out = server.manage(
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model\n"
        "from accounts.authentication import issue_token\n"
        f"u, _ = get_user_model().objects.get_or_create(username='{username}')\n"
        "u.is_staff = u.is_superuser = False\n"
        "u.set_password('ordinary-pass-1'); u.save()\n"
        f"print('KEY=' + issue_token(u, 'e2e-{username}')[1])\n",
    )
    return Api(server, next(line[4:] for line in out.stdout.splitlines() if line.startswith("KEY=")))


def _job_status(api: Api, name: str) -> dict:
    code, body = api.call("GET", f"/jobs/{name}/")
    assert code == 200, body
    return body["status"]


def _job_log(api: Api, name: str, pod: str, previous: bool = False) -> str:
    query = f"/jobs/{name}/logs/?tail=all&pod={pod}" + ("&previous=true" if previous else "")
    code, text = api.call("GET", query, raw=True)
    return text if code == 200 else ""


def _host_uid(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("Uid:")))


def _pods_of(server, job: str) -> dict[str, dict]:
    state = json.loads((Path(server.env["RLARK_VAR_DIR"]) / "local" / "state.json").read_text())
    return {p["name"]: p for p in state.get("pods", {}).values() if p.get("job") == job}


def _start_the_other_job(api: Api, var: Path, keep: str) -> Path:
    """Another job ``keep`` runs and writes into its work directory; -> that directory."""
    loop = 'i=0; while true; do i=$((i+1)); echo "Global Step: $i"; echo secret-$i > /rlark/work/step; sleep 1; done'
    code, body = api.call("POST", "/jobs/", single_header_job(keep, loop))
    assert code == 201, body
    wait_for(lambda: "Global Step: 2" in _job_log(api, keep, f"{keep}-header-0"), READY_BUDGET, "the other job runs")
    other_work = next(var.glob(f"local/pods/*/{keep}-header-0/work"))
    assert (other_work / "step").exists()
    return other_work


def _submit_the_probing_demo(api: Api, carol: Api, targets: dict[str, Path], keep: str, out: Path) -> None:
    """Point 1: carol's demo job first tries to read each of ``targets``; only she and admin see it."""
    probes = "".join(
        f'if out=$(cat -- "{path}" 2>&1); then echo "PROBE {name} READ"; else echo "PROBE {name} DENIED $out"; fi\n'
        for name, path in targets.items()
    )
    document = yaml.safe_load((ROOT / "examples/demo/job.yaml").read_text())
    document["metadata"]["name"] = "e2e-isolated"
    header = document["spec"]["tasks"][0]
    header["kubernetes"]["workload"]["template"]["spec"]["volumes"][0]["hostPath"]["path"] = str(out)
    header["runScript"] = f'echo "ID $(id)"\n{probes}{header["runScript"]} --steps 30'
    code, body = carol.call("POST", "/jobs/", document)
    assert code == 201, body
    assert api.call("GET", "/jobs/e2e-isolated/")[0] == 200 and carol.call("GET", f"/jobs/{keep}/")[0] == 404


def _pid1_uids(server) -> dict[str, int] | bool | None:
    """Worker -> the host uid of its PID 1 once all 3 have entered their id-mapped user namespace."""
    uids = {}
    for name, pod in _pods_of(server, "e2e-isolated").items():
        kids = psutil.Process(pod["pid"]).children() if pod.get("pid") else []
        if not kids:
            return None
        try:  # PID 1 runs podinit.sh as root, then execs into the id-mapped user namespace
            entered = os.readlink(f"/proc/{kids[0].pid}/ns/user") != os.readlink("/proc/self/ns/user")
            if not entered or kids[0].name() == "unshare":
                return None
        except (OSError, psutil.Error):
            return None
        uids[name] = _host_uid(kids[0].pid)
    return len(uids) == 3 and uids


def _check_the_demo_is_isolated_and_succeeds(server, carol: Api, targets: dict[str, Path], keep: str) -> None:
    """Point 1: the demo's Workers run as a subordinate uid of their own (root inside), every probe is denied,
    and the job still trains and ends Succeeded."""
    try:
        uids = wait_for(lambda: _pid1_uids(server), READY_BUDGET, "the demo's Workers")
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{_job_status(carol, 'e2e-isolated')}") from None
    assert all(uid >= 1_000_000 for uid in uids.values()), uids  # never root (nor a real user) on the host
    assert len(set(uids.values())) == 1  # one id range per job ...
    keep_pid1 = psutil.Process(_pods_of(server, keep)[f"{keep}-header-0"]["pid"]).children()[0].pid
    assert _host_uid(keep_pid1) not in uids.values()  # ... another one for the other job
    done = wait_for(
        lambda: (s := _job_status(carol, "e2e-isolated"))["phase"] in ("Succeeded", "Failed") and s,
        240 * LOAD,
        "the demo job to end",
    )
    log = _job_log(carol, "e2e-isolated", "e2e-isolated-header-0")
    assert done["phase"] == "Succeeded", f"{done['message']}\n{log[-3000:]}"
    assert "ID uid=0(root) gid=0(root)" in log
    for name in targets:
        line = next((x for x in log.splitlines() if x.startswith(f"PROBE {name} ")), "")
        assert "DENIED" in line and "Permission denied" in line, f"{name}: {line!r}"
    assert "Executing run script..." in log and "Global Step" in log
    assert carol.call("DELETE", "/jobs/e2e-isolated/")[0] in (200, 204)


def _check_a_console_restart_leaves_the_workers(
    server, api: Api, keep: str
) -> tuple[dict[str, tuple[int, float]], set[tuple[int, float]]]:
    """Point 4a: restart the whole runconsole stack mid-run: the Workers run on untouched (same processes,
    0 restarts, same attempt, one run); -> the Workers' (PID, start time) and every process of the job."""
    before = {name: (pod["pid"], pod["pid_create_time"]) for name, pod in _pods_of(server, keep).items()}
    procs = {p for p in set().union(*job_pids(server, keep).values()) if _name(p[0]) != "sleep"}
    server.stop(supervisor=False)
    assert alive(procs) == procs  # nothing of the job died with the console
    server.start()
    wait_for(lambda: _ok_job(api, keep), 60, "API back")
    time.sleep(3 * float(server.env["RLARK_SYNC_INTERVAL"]))
    status = _job_status(api, keep)
    assert status["phase"] == "Running" and status["attempt"] == 1, status
    assert [w["restarts"] for w in status["workers"]] == [0]
    after = {name: (pod["pid"], pod["pid_create_time"]) for name, pod in _pods_of(server, keep).items()}
    assert after == before and alive(procs) == procs
    log = _job_log(api, keep, f"{keep}-header-0")
    assert "Global Step: 1\n" in log and log.count("Executing run script...") == 1  # one run, not started over
    return before, procs


def _check_a_host_reboot_shows_on_the_job(
    server,
    api: Api,
    var: Path,
    keep: str,
    before: dict[str, tuple[int, float]],
    procs: set[tuple[int, float]],
) -> None:
    """Point 4b: a host reboot (the supervisor and every Worker gone) shows on the job: restarts counted,
    attempt bumped, "the local runtime restarted", the previous instance's log readable, the run started again."""
    server.stop(supervisor=False)
    sup_pid = int((var / "local" / "supervisor.pid").read_text())
    os.kill(sup_pid, signal.SIGKILL)
    for pid, _started in before.values():
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pid, signal.SIGKILL)
    for pid, _started in procs:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    wait_for(lambda: not alive(procs) and not psutil.pid_exists(sup_pid), 20, "everything gone")
    server.start()

    def restarted():
        s = _job_status(api, keep)
        return s["attempt"] == 2 and s["workers"][0]["restarts"] >= 1 and s["phase"] == "Running" and s

    status = wait_for(restarted, READY_BUDGET, "the job to show the runtime restart")
    reasons = {c["reason"]: c["message"] for c in status["conditions"]}
    assert "local runtime restarted" in reasons.get("RuntimeRestarted", ""), status["conditions"]
    previous = _job_log(api, keep, f"{keep}-header-0", previous=True)
    assert "Global Step: 1\n" in previous and "Executing run script..." in previous
    wait_for(lambda: "Executing run script..." in _job_log(api, keep, f"{keep}-header-0"), READY_BUDGET, "rerun")


@pytest.mark.skipif(os.geteuid() != 0, reason="Workers of a root console run as subordinate uids")
def test_ordinary_user_cannot_reach_the_console_and_workers_survive_a_console_restart(console_server, api, tmp_path):
    """On the real console: an ordinary user's demo job (3 real Ray nodes) whose run
    script first tries to read the console's key, database, source and another job's work directory gets
    permission denied, runs as root inside and as a subordinate uid on the host, and still ends Succeeded.
    Then restarting the whole runconsole stack leaves a running job's Workers alone (same processes, 0
    restarts, same attempt), and a simulated host reboot (everything killed) shows up on the job: restarts
    counted, attempt bumped, "the local runtime restarted", the previous instance's log readable."""
    var = Path(console_server.env["RLARK_VAR_DIR"])
    keep = "e2e-keep"
    other_work = _start_the_other_job(api, var, keep)
    carol = _user_api(console_server, "carol")
    db_url = console_server.env["DATABASE_URL"]
    targets = {
        "key": var / "encryption.key",
        "secret-key": var / "secret.key",
        "other-job": other_work / "step",
        "source": ROOT / "manage.py",
    }
    if db_url.startswith("sqlite"):  # on PostgreSQL the database is no file of the console's
        targets["database"] = Path(db_url.removeprefix("sqlite:///"))
    _submit_the_probing_demo(api, carol, targets, keep, tmp_path / "out")
    _check_the_demo_is_isolated_and_succeeds(console_server, carol, targets, keep)
    before, procs = _check_a_console_restart_leaves_the_workers(console_server, api, keep)
    _check_a_host_reboot_shows_on_the_job(console_server, api, var, keep, before, procs)
    assert api.call("DELETE", f"/jobs/{keep}/")[0] in (200, 204)


def _name(pid: int) -> str:
    try:
        return psutil.Process(pid).name()
    except psutil.Error:
        return ""


def _ok_job(api: Api, name: str) -> bool:
    try:
        return api.call("GET", f"/jobs/{name}/", timeout=5)[0] == 200
    except OSError:
        return False


def test_full_head_log_downloadable_after_stop_and_after_delete(console_server, api):
    """On the real console and real Ray: a 5,000-line header log with the wrapper's
    ``Executing run script...`` marker is downloadable in full after Stop and, from the log archive, after
    Delete."""
    name, lines = "e2e-longlog", 5000
    script = f'for i in $(seq 1 {lines}); do echo "Global Step: $i/{lines}"; done; echo ALL-WRITTEN; sleep 3600'
    code, body = api.call("POST", "/jobs/", single_header_job(name, script))
    assert code == 201, body
    pod = f"{name}-header-0"
    wait_for(lambda: "ALL-WRITTEN" in _job_log(api, name, pod), READY_BUDGET, "5,000 lines written")

    def full(text: str) -> bool:
        steps = [x for x in text.splitlines() if x.startswith("Global Step: ")]
        return "Executing run script..." in text and len(steps) == lines and steps[0] == f"Global Step: 1/{lines}"

    assert api.call("POST", f"/jobs/{name}/stop/")[0] in (200, 202)
    wait_for(lambda: not _pods_of(console_server, name), 60, "the Worker gone after Stop")
    assert full(_job_log(api, name, pod)), _job_log(api, name, pod)[:500]

    assert api.call("DELETE", f"/jobs/{name}/")[0] in (200, 204)
    code, archives = api.call("GET", "/log-archives/")
    assert code == 200, archives
    entry = next(a for a in archives if a["job"] == name)
    code, text = api.call("GET", f"/log-archives/{entry['id']}/logs/?pod={pod}", raw=True)
    assert code == 200 and full(text), text[:500]
