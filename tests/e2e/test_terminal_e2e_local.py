"""The Logs tab and the WebTerminal on the whole console (``console_server``: daphne, Celery, the local
runtime supervisor, real Ray nodes on loopback) with the demo job of examples/demo/job.yaml:

1. the Logs tab shows the header's ``Ray cluster is ready``; Live brings new ``Global Step`` lines
   within 6 s; the filter shows only matching lines with a count; the full log downloads;
2. the WebTerminal on a rollout Worker runs ``echo $RLINF_NODE_RANK; pwd`` (rank 1 and the Worker's
   working directory), follows a window resize (``tput cols``), uploads a file and downloads it back
   byte-identical, and ``exit`` shows the close reason; the shell process is gone afterwards.
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import psutil
import pytest
import yaml
from playwright.sync_api import expect

from tests.browser.test_terminal_browser import READ_BUFFER, screen, type_line, wait_screen
from tests.conftest import ARTIFACTS, E2E_ADMIN_PASSWORD, ROOT
from tests.e2e.test_e2e_local import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.ray, pytest.mark.browser, pytest.mark.timeout(900)]

JOB = "h7-terminal-e2e"
LOAD = min(4.0, max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1)))


@pytest.fixture(scope="module")
def running_job(console_server, tmp_path_factory):
    from tests.e2e.test_e2e_local import Api

    out = console_server.manage(
        "shell",
        "-c",
        "from django.contrib.auth import get_user_model\n"
        "from accounts.authentication import issue_token\n"
        "u = get_user_model().objects.get(username='admin')\n"
        "print('KEY=' + issue_token(u, 'h7-terminal')[1])\n",
    )
    api = Api(console_server, next(line[4:] for line in out.stdout.splitlines() if line.startswith("KEY=")))
    output = tmp_path_factory.mktemp("h7-output")
    output.chmod(0o1777)  # the Workers run as an unprivileged uid: let them write the checkpoints
    document = yaml.safe_load((ROOT / "examples/demo/job.yaml").read_text())
    document["metadata"]["name"] = JOB
    header = document["spec"]["tasks"][0]
    header["kubernetes"]["workload"]["template"]["spec"]["volumes"][0]["hostPath"]["path"] = str(output)
    header["runScript"] += " --steps 100000"
    # no GPU request: this job must schedule even if another test's demo job still holds the head GPU
    header["kubernetes"]["workload"]["template"]["spec"]["containers"][0].pop("resources", None)
    code, body = api.call("POST", "/jobs/", document)
    assert code == 201, body

    def log() -> str:
        code, text = api.call("GET", f"/jobs/{JOB}/logs/?tail=1000", raw=True)
        return text if code == 200 else ""

    wait_for(lambda: "Global Step" in log(), 120 * LOAD, "the first Global Step")
    yield console_server
    api.call("DELETE", f"/jobs/{JOB}/")


def _login(page, server, lang: str) -> None:
    page.context.clear_cookies()
    page.context.add_cookies([{"name": "django_language", "value": lang, "url": server.url}])
    page.goto(server.url + "/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", E2E_ADMIN_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_load_state()


def _pod_state(server, pod: str) -> dict:
    state = json.loads((Path(server.env["RLARK_VAR_DIR"]) / "local" / "state.json").read_text())
    return next(p for p in state["pods"].values() if p["name"] == pod)


def test_logs_tab_on_a_running_local_job(running_job, page):
    server = running_job
    ARTIFACTS.mkdir(exist_ok=True)
    _login(page, server, "zh-hans")
    page.goto(f"{server.url}/terminal/jobs/{JOB}/logs/")
    view = page.locator('[data-testid="logs-view"]')
    expect(view).to_contain_text(f"[{JOB}-rollout-1]", timeout=15_000)  # merged view, prefixed by Worker
    page.select_option('[data-testid="logs-worker"]', f"{JOB}-header-0")
    expect(view).to_contain_text("Global Step", timeout=15_000)
    # the page renders only the visible rows (newest at the bottom): find the marker with the filter
    page.fill('[data-testid="logs-filter"]', "Ray cluster is ready")
    expect(view.locator(".ll").first).to_contain_text("Ray cluster is ready")
    page.fill('[data-testid="logs-filter"]', "Global Step")  # only matching lines, newest at the bottom
    expect(view.locator(".ll").last).to_contain_text("Global Step")
    last = max(int(n) for n in re.findall(r"Global Step:? (\d+)", view.inner_text()))
    expect(page.locator('[data-testid="logs-live"]')).to_have_attribute("aria-pressed", "true")  # live on open
    t0 = time.monotonic()
    page.wait_for_function(
        """(last) => { const t = document.querySelector('[data-testid=logs-view]').innerText;
           return [...t.matchAll(/Global Step:? (\\d+)/g)].some(m => Number(m[1]) > last); }""",
        arg=last,
        timeout=6_000,
    )
    assert time.monotonic() - t0 <= 6.0
    expect(page.locator('[data-testid="logs-matches"]')).to_have_text(re.compile(r"^\d+ 行匹配$"))
    rows = page.locator(".log-view .ll").all_inner_texts()
    assert rows and all("Global Step" in r for r in rows)
    page.screenshot(path=str(ARTIFACTS / "logs-local-job-zh.png"), full_page=True)
    with page.expect_download() as info:
        page.click('[data-testid="logs-download"]')
    download = info.value
    assert re.fullmatch(rf"{JOB}-header-{JOB}-header-0-\d{{8}}T\d{{6}}Z\.log", download.suggested_filename)
    body = open(download.path(), "rb").read()
    assert b"Ray cluster is ready" in body and b"Global Step" in body
    page.select_option('[data-testid="language-select"]', "en")
    page.wait_for_load_state("load")
    expect(view).to_contain_text("Global Step", timeout=15_000)
    page.screenshot(path=str(ARTIFACTS / "logs-local-job-en.png"), full_page=True)


def test_webterminal_on_a_local_worker(running_job, page, tmp_path):
    server = running_job
    pod = f"{JOB}-rollout-0"
    workdir = _pod_state(server, pod)["workdir"]
    _login(page, server, "en")
    page.goto(f"{server.url}/terminal/?job={JOB}&worker={pod}&status=Running")
    expect(page.locator('[data-testid="term-status"]')).to_have_text("Connected", timeout=15_000)
    page.wait_for_function("/[$#] *$/m.test((" + READ_BUFFER + ")())", timeout=15_000)  # a prompt
    type_line(page, "echo rank=$RLINF_NODE_RANK; pwd")
    wait_screen(page, r"^rank=1\s*$", 15_000)
    wait_screen(page, "^" + re.escape(workdir) + r"\s*$", 15_000)
    cols = page.evaluate("window.rlarkTerminal.cols")
    type_line(page, "echo cols=$(tput cols)")
    wait_screen(page, rf"^cols={cols}\s*$")
    page.set_viewport_size({"width": 900, "height": 700})
    page.wait_for_function(f"window.rlarkTerminal.cols < {cols}")
    new_cols = page.evaluate("window.rlarkTerminal.cols")
    type_line(page, "echo cols2=$(tput cols)")
    wait_screen(page, rf"^cols2={new_cols}\s*$")
    page.set_viewport_size({"width": 1440, "height": 900})

    payload = os.urandom(50_000) + "日志\n".encode()
    src = tmp_path / "sample.bin"
    src.write_bytes(payload)
    page.set_input_files('[data-testid="term-upload"]', str(src))
    wait_screen(page, r"^File transfer complete\.", 30_000)
    page.fill('[data-testid="term-download-path"]', "./sample.bin")
    with page.expect_download(timeout=30_000) as info:
        page.click('[data-testid="term-download"]')
    assert open(info.value.path(), "rb").read() == payload
    type_line(page, "sha256sum sample.bin")
    import hashlib

    wait_screen(page, "^" + hashlib.sha256(payload).hexdigest() + r"\s+sample\.bin")
    page.screenshot(path=str(ARTIFACTS / "terminal-local-job-en.png"), full_page=True)
    shells_before = {  # this session's exec process: nsenter into the Worker, envexec (its env, then cd), then bash
        p.pid
        for p in psutil.process_iter(["cmdline"])
        if (cmd := p.info["cmdline"] or []) and "nsenter" in cmd[0] and {"fallback", workdir, "bash"} <= set(cmd)
    }
    assert len(shells_before) == 1, shells_before
    type_line(page, "exit")
    expect(page.locator('[data-testid="term-status"]')).to_have_text(
        "Session ended (exit code 0).",
        timeout=15_000,  # the exit code once
    )
    wait_for(lambda: not any(psutil.pid_exists(pid) for pid in shells_before), 15, "the exec process to end")
    assert "Session ended (exit code 0)" in screen(page)
