"""Log tailing, resume cursors, ANSI rendering, empty states and downloads against a real
DirRuntime (log files on disk) - seed 02 (last 1000 lines), upstream-rlark 8.4, peers 3.1."""

from __future__ import annotations

import re
import tracemalloc

import pytest
from django.test import AsyncClient

from clusters.runtime.base import PodNotFound, RuntimeFailure
from rlark_console import ansi
from terminal.demo_runtime import DirRuntime, seed_job
from terminal.services import logs
from terminal.services.runtimes import use_runtime_factory

NS = "rlark-jobs"


@pytest.fixture
def runtime(tmp_path):
    rt = DirRuntime(tmp_path / "rt")
    use_runtime_factory(lambda cluster: rt)
    yield rt
    use_runtime_factory(None)


@pytest.fixture
def job(runtime, alice, db):
    return seed_job(runtime, alice)


def _targets(job):
    targets, warnings = logs.resolve_targets(logs.load_layout(job))
    assert warnings == []
    return {t.pod: t for t in targets}


# --- ANSI ------------------------------------------------------------------------------------
def test_ansi_is_escaped_before_colouring():
    line = '\x1b[31mERROR\x1b[0m <script>alert(1)</script> & "q" \x1b[1;32mok\x1b[0m'
    html = ansi.to_html(line)
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert '<span class="ansi-fg-1">ERROR</span>' in html
    assert '<span class="ansi-bold ansi-fg-2">ok</span>' in html
    assert "&amp;" in html and "&quot;q&quot;" in html
    assert ansi.strip_ansi(line) == 'ERROR <script>alert(1)</script> & "q" ok'
    # the only tags are our spans
    assert set(re.findall(r"</?([a-z]+)", html)) == {"span"}


def test_ansi_colours_cursor_codes_and_progress_bars():
    assert ansi.to_html("\x1b[38;5;196mred\x1b[0m") == '<span style="color:#ff0000">red</span>'
    assert ansi.to_html("\x1b[48;2;1;2;3mbg") == '<span style="background-color:#010203">bg</span>'
    assert ansi.to_html("\x1b[38;2;999;0;0mx") == '<span style="color:#ff0000">x</span>'  # clamped
    assert ansi.to_html("a\x1b[2K\x1b[1Gb\x1b]0;title\x07c") == "abc"  # erase/move/OSC dropped
    assert ansi.strip_ansi("10%\r50%\r100% done") == "100% done"  # tqdm-style carriage returns
    injected = ansi.to_html('\x1b[38;5;1"onmouseover=alert(1) m<b>x</b>')
    assert "<" not in injected and "&quot;onmouseover=alert(1) m&lt;b&gt;" in injected  # text, never an attribute


# --- tail and resume -------------------------------------------------------------------------
def test_tail_is_the_last_1000_lines_with_a_cursor(runtime, job):
    runtime.append_log(NS, "demo-actor-0", "".join(f"line {i}\n" for i in range(1500)))
    t = _targets(job)["demo-actor-0"]
    batch = logs.read_tail(runtime, t)
    assert len(batch.lines) == 1000 == logs.TAIL_LINES
    assert batch.first == 500 and batch.lines[0] == "line 500" and batch.lines[-1] == "line 1499"
    assert batch.cursor.line == 1500 and batch.cursor.identity == t.identity


def test_resume_has_no_duplicates_or_gaps(runtime, job):
    t = _targets(job)["demo-actor-0"]
    runtime.append_log(NS, "demo-actor-0", "a\nb\n")
    cursor = logs.read_tail(runtime, t).cursor
    seen = ["a", "b"]
    runtime.append_log(NS, "demo-actor-0", "c\nd")  # "d" is still being written
    batch = logs.read_since(runtime, t, cursor)
    assert batch.lines == ["c"] and batch.first == 2
    seen += batch.lines
    runtime.append_log(NS, "demo-actor-0", "one\n" + "".join(f"x{i}\n" for i in range(7000)))
    batch = logs.read_since(runtime, t, batch.cursor, max_lines=5000)
    assert batch.more and len(batch.lines) == 5000  # capped per refresh, the rest follows
    seen += batch.lines
    batch = logs.read_since(runtime, t, batch.cursor)
    assert not batch.more
    seen += batch.lines
    assert seen == ["a", "b", "c", "done"] + [f"x{i}" for i in range(7000)]  # "d" + "one" = one line
    assert logs.read_since(runtime, t, batch.cursor).lines == []


def test_restart_resets_and_previous_instance_is_readable(runtime, job):
    runtime.append_log(NS, "demo-actor-0", "before crash\nTraceback: boom\n")
    t = _targets(job)["demo-actor-0"]
    cursor = logs.read_tail(runtime, t).cursor
    assert not t.has_previous
    runtime.restart_container(NS, "demo-actor-0")
    runtime.append_log(NS, "demo-actor-0", "after restart\n")
    t2 = _targets(job)["demo-actor-0"]
    assert t2.has_previous and t2.identity != t.identity
    batch = logs.read_since(runtime, t2, cursor)
    assert batch.reset and batch.lines == ["after restart"]
    prev = logs.read_tail(runtime, t2, previous=True)
    assert prev.lines == ["before crash", "Traceback: boom"]
    with pytest.raises(RuntimeFailure) as exc:
        logs.read_tail(runtime, _targets(job)["demo-actor-1"], previous=True)
    assert logs.empty_state(_targets(job)["demo-actor-1"], True, exc.value)[0] == "no-previous"


def test_truncated_log_resets(runtime, job):
    t = _targets(job)["demo-actor-0"]
    runtime.append_log(NS, "demo-actor-0", "x" * 100 + "\n")
    cursor = logs.read_tail(runtime, t).cursor
    (runtime.pod_dir(NS, "demo-actor-0") / "log.0").write_bytes(b"new\n")
    batch = logs.read_since(runtime, t, cursor)
    assert batch.reset and batch.lines == ["new"]


def test_empty_states(runtime, job):
    targets = _targets(job)
    assert logs.empty_state(targets["demo-actor-1"], False)[0] == "empty"
    runtime.pods[(NS, "demo-rollout-0")].phase = "Pending"
    assert logs.empty_state(_targets(job)["demo-rollout-0"], False)[0] == "pending"
    runtime.delete_pod(NS, "demo-actor-1")
    gone = _targets(job)["demo-actor-1"]  # still recorded in the database, gone from the runtime
    assert not gone.exists
    state, message = logs.empty_state(gone, False)
    assert state == "gone" and "no longer exists" in message
    with pytest.raises(PodNotFound):
        logs.read_tail(runtime, targets["demo-actor-1"])


def test_multibyte_lines_split_across_chunks(runtime, job):
    t = _targets(job)["demo-actor-0"]
    text = "".join(f"步骤 {i} 完成 ✓\n" for i in range(20000))  # > 64 KiB: chunk borders inside characters
    runtime.append_log(NS, "demo-actor-0", text)
    batch = logs.read_tail(runtime, t)
    assert batch.lines[-1] == "步骤 19999 完成 ✓" and all("\ufffd" not in line for line in batch.lines)


# --- download --------------------------------------------------------------------------------
def test_download_filename():
    from datetime import UTC, datetime

    when = datetime(2026, 11, 29, 12, 3, 4, tzinfo=UTC)
    name = logs.download_filename("demo", "actor", "demo-actor-0", when)
    assert name == "demo-actor-demo-actor-0-20261129T120304Z.log"
    assert logs.download_filename("demo", "a b", "p", when, previous=True) == "demo-a_b-p-previous-20261129T120304Z.log"


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_download_streams_100k_lines_in_constant_memory(runtime, alice, tmp_path):
    from asgiref.sync import sync_to_async

    await sync_to_async(seed_job)(runtime, alice)
    line = "Global Step 000000 | loss=0.123456 | reward=0.987654 | throughput=12345.6 tok/s\n"
    with open(runtime.pod_dir(NS, "demo-actor-0") / "log.0", "w") as fh:
        for i in range(100_000):
            fh.write(line.replace("000000", f"{i:06d}"))
    size = (runtime.pod_dir(NS, "demo-actor-0") / "log.0").stat().st_size
    client = AsyncClient()
    await sync_to_async(client.force_login)(alice)
    resp = await client.get("/terminal/jobs/demo/logs/download/?pod=demo-actor-0")
    assert resp.status_code == 200 and resp.streaming
    disposition = resp["Content-Disposition"]
    assert re.fullmatch(r'attachment; filename="demo-actor-demo-actor-0-\d{8}T\d{6}Z\.log"', disposition)
    tracemalloc.start()
    received = 0
    lines = 0
    last = b""
    async for chunk in resp.streaming_content:
        received += len(chunk)
        lines += chunk.count(b"\n")
        last = chunk
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert received == size >= 8_000_000 and lines == 100_000
    assert last.endswith(b"Global Step 099999 | loss=0.123456 | reward=0.987654 | throughput=12345.6 tok/s\n")
    assert peak < 2_000_000, f"download buffered {peak} bytes"


def test_download_of_gone_pod_and_missing_previous(client, runtime, job, alice):
    client.force_login(alice)
    resp = client.get("/terminal/jobs/demo/logs/download/?pod=demo-actor-0&previous=1")
    assert resp.status_code == 404 and resp.content.decode() == "demo-actor-0 没有上一个容器实例。"
    resp = client.get("/terminal/jobs/demo/logs/download/?pod=demo-actor-0&previous=1", HTTP_ACCEPT_LANGUAGE="en")
    assert resp.status_code == 404 and "no previous container instance" in resp.content.decode()
    runtime.delete_pod(NS, "demo-actor-1")
    resp = client.get("/terminal/jobs/demo/logs/download/?pod=demo-actor-1", HTTP_ACCEPT_LANGUAGE="en")
    assert resp.status_code == 404 and "no longer exists" in resp.content.decode()
    assert client.get("/terminal/jobs/demo/logs/download/?pod=other-pod").status_code == 404


def test_logs_panel_tag_embeds_the_tab_in_another_page(rf, runtime, job, alice):
    """What the job detail page uses: ``{% load terminal_tags %}{% logs_panel job %}``."""
    import json as _json
    from html import unescape

    from django.template import RequestContext, Template

    request = rf.get("/jobs/demo/?tab=logs")
    request.user = alice
    html = Template("{% load terminal_tags %}{% logs_panel job %}").render(RequestContext(request, {"job": job}))
    assert 'data-testid="logs-panel"' in html and "js/logs.js" in html
    config = _json.loads(unescape(re.search(r'data-config="([^"]+)"', html).group(1)))
    assert config["ws"] == "/ws/terminal/jobs/demo/logs/" and config["tail"] == 1000 and config["interval"] == 5.0
    assert config["download"] == "/terminal/jobs/demo/logs/download/"
    for pod in ("demo-actor-0", "demo-actor-1", "demo-rollout-0"):
        assert f'value="{pod}"' in html


def test_read_before_brings_the_lines_just_above_the_tail(runtime, job):
    """Load older: the 5000 lines before the first line the page holds, in order."""
    runtime.append_log(NS, "demo-actor-0", "".join(f"line {i}\n" for i in range(12_000)))
    t = _targets(job)["demo-actor-0"]
    tail = logs.read_tail(runtime, t)
    assert tail.first == 11_000
    older = logs.read_before(runtime, t, tail.first)
    assert older.first == 6000 and len(older.lines) == logs.OLDER_LINES
    assert older.lines[0] == "line 6000" and older.lines[-1] == "line 10999"
    oldest = logs.read_before(runtime, t, 3)
    assert oldest.first == 0 and oldest.lines == ["line 0", "line 1", "line 2"]
    assert logs.read_before(runtime, t, 0).lines == []
    assert logs.read_before(runtime, t, 10, count=10**9).lines == [f"line {i}" for i in range(10)]  # capped


def test_rotated_log_is_marked_not_glued(runtime, job):
    """A log file replaced by a shorter one under a live stream is reported as rotated."""
    t = _targets(job)["demo-actor-0"]
    runtime.append_log(NS, "demo-actor-0", "".join(f"old {i}\n" for i in range(50)))
    cursor = logs.read_tail(runtime, t).cursor
    assert not logs.read_since(runtime, t, cursor).rotated
    (runtime.pod_dir(NS, "demo-actor-0") / "log.0").write_bytes(b"fresh 0\nfresh 1\n")
    batch = logs.read_since(runtime, t, cursor)
    assert batch.rotated and batch.reset and batch.lines == ["fresh 0", "fresh 1"] and batch.first == 0


def test_strip_text_removes_escape_codes_keeps_lines():
    raw = "\x1b[1;32mRay cluster is ready\x1b[0m (3/3)\n10%\r50%\r100% done\n\tindented\n"
    assert ansi.strip_text(raw) == "Ray cluster is ready (3/3)\n100% done\n\tindented\n"
    assert ansi.strip_text("plain\n") == "plain\n"
