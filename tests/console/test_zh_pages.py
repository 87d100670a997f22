"""Every page in zh shows no English UI text.

The list of the product's own English UI strings is built from its catalogs: every ``msgid`` of every
``*/locale/zh_Hans/LC_MESSAGES/django.mo`` that has a Chinese translation (the validator's, diagnosis' and run
check's messages among them). Each page is rendered in zh through the Django test
client for jobs in several states (running, pending, failed with a stored server message, stopped, succeeded);
its visible text and its ``title``/``placeholder``/``aria-label`` attributes (not code, YAML, logs or names) must
contain none of those strings.
"""

from __future__ import annotations

import gettext
import re
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest

from jobs.models import Pod
from tests.jobs.test_metrics import job  # noqa: F401 - the fixture
from tests.shared_spec import SEEDS

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]
# Product terms written the same in both languages (upstream-rlark's own UI keeps them in English).
TERMS = {
    "Worker",
    "Workers",
    "Header",
    "Pod",
    "Pods",
    "Ray",
    "YAML",
    "Node",
    "GPU",
    "CPU",
    "IP",
    "API",
    "SSH",
    "PVC",
    "TensorBoard",
    "StorageClass",
    "Actor",
    "Rollout",
    "Env",
    "RLinf",
    "Kubernetes",
    "local",
    "Header Worker",
    "Domain",
    "Token",
    "OK",
    "ID",
    "Task",
    "Global Step",
    "RLINF_NODE_RANK",  # the environment variable that numbers the Workers (run check evidence, Workers tab)
}
# Quoted log lines and log markers (RLinf's and the wrapper scripts' own output) stay as the programs wrote them.
LOG_QUOTE = re.compile(r"^行 \d+: ")
LOG_MARKERS = ("Global Step", "│ Progress:")  # RLinf's progress bar cells, quoted by the run check's evidence
SKIP_TAGS = {"script", "style", "code", "pre", "textarea", "kbd", "samp"}
SKIP_CLASSES = {"mono", "log", "yaml"}


def _english_strings() -> list[str]:
    out: set[str] = set()
    for mo in [*ROOT.glob("*/locale/zh_Hans/LC_MESSAGES/django.mo"), ROOT / "locale/zh_Hans/LC_MESSAGES/django.mo"]:
        with open(mo, "rb") as fh:
            catalog = gettext.GNUTranslations(fh)._catalog  # type: ignore[attr-defined]
        for msgid, msgstr in catalog.items():
            if isinstance(msgid, tuple):
                msgid = msgid[0]
            if "\x04" in msgid:  # msgctxt
                msgid = msgid.split("\x04", 1)[1]
            if not msgid or not msgstr or msgid == msgstr:
                continue
            out.add(msgid)
    fragments: set[str] = set()
    for text in out:
        # the literal parts around placeholders; a fragment counts when it is clearly English prose
        for part in re.split(r"%\(\w+\)[sd]|%[sd]|\{\w+\}|<[^>]+>", text):
            part = part.strip(" .,:;()·—-\n")
            words = re.findall(r"[A-Za-z]{2,}", part)
            if part in TERMS or not words or "/" in part or "~" in part:
                continue
            if len(words) >= 2 or (len(part) >= 4 and part[0].isupper() and part.isalpha()):
                fragments.add(part)
    return sorted(fragments, key=len, reverse=True)


class _Text(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.stack: list[bool] = []
        self.chunks: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = set((attrs.get("class") or "").split())
        skip = (self.stack[-1] if self.stack else False) or tag in SKIP_TAGS or bool(classes & SKIP_CLASSES)
        if tag not in {"br", "img", "input", "meta", "link", "hr", "source", "wbr"}:
            self.stack.append(skip)
        if not skip:
            for key in ("title", "placeholder", "aria-label", "alt"):
                if attrs.get(key) and not LOG_QUOTE.match(attrs[key]):
                    self.chunks.append(attrs[key])
            if tag == "input" and attrs.get("type") in ("submit", "button") and attrs.get("value"):
                self.chunks.append(attrs["value"])

    def handle_endtag(self, tag):
        if self.stack and tag not in {"br", "img", "input", "meta", "link", "hr", "source", "wbr"}:
            self.stack.pop()

    def handle_data(self, data):
        if not (self.stack and self.stack[-1]) and data.strip():
            self.chunks.append(data)


def visible_text(html: str) -> str:
    parser = _Text()
    parser.feed(html)
    return "\n".join(parser.chunks)


def english_in(html: str, strings: list[str]) -> list[str]:
    text = visible_text(html)
    for marker in LOG_MARKERS:
        text = text.replace(marker, " ")
    found = []
    for s in strings:
        if re.search(r"(?<![A-Za-z])" + re.escape(s) + r"(?![A-Za-z])", text):
            found.append(s)
            text = text.replace(s, " ")
    return found


@pytest.fixture
def jobs_in_every_state(job, admin_user):  # noqa: F811
    from jobs.models import Job

    running, _data = job
    states = {"running": running}
    for name, phase, message in [
        ("pending", "Pending", "Waiting for Workers: 0/2 ready (Unschedulable)"),
        (
            "failed",
            "Failed",
            "Header job-failed-header-0 (role Header): run script exited with code 3; first error: boom",
        ),
        ("stopped", "Stopped", "Job stopped"),
        ("done", "Succeeded", "Run script exited with code 0"),
    ]:
        clone = Job.objects.create(
            name=f"job-{name}",
            owner=admin_user,
            spec=running.spec,
            phase=phase,
            message=message,
            stopped=phase == "Stopped",
            started_at=running.started_at,
            finished_at=None if phase == "Pending" else running.started_at + timedelta(seconds=30),
        )
        for task in running.tasks.all():
            pods = list(task.pods.all())
            task.pk, task.job, task.name = None, clone, task.name.replace("job-", f"job-{name}-", 1)
            task.save()
            for pod in pods:
                Pod.objects.create(task=task, name=pod.name.replace("job-", f"job-{name}-", 1), phase=pod.phase)
        states[name] = clone
    return states


def _pages(states) -> list[str]:
    pages = ["/", "/jobs/", "/jobs/new/", "/clusters/", "/ssh-keys/", "/storage/", "/domains/", "/account/tokens/"]
    pages += ["/log-archives/", "/jobs/new/?type=Demo"]
    for one in states.values():
        base = f"/jobs/{one.name}/"
        pages += [base + f"?tab={tab}" for tab in ("overview", "workers", "logs", "yaml")]
        pages += [base + "diagnosis/", base + "run-check/", base + "checkpoints/"]
    return pages


def test_every_page_in_zh_has_no_english_ui_strings(client, admin_user, jobs_in_every_state, monkeypatch):
    from tests.jobs.test_metrics import ReportingRuntime, use_runtime

    use_runtime(monkeypatch, ReportingRuntime({}))
    strings = _english_strings()
    assert len(strings) > 300 and "Job stopped" in strings  # the list is the product's own strings
    client.force_login(admin_user)
    problems = {}
    for path in _pages(jobs_in_every_state):
        response = client.get(path, HTTP_ACCEPT_LANGUAGE="zh-hans")
        assert response.status_code == 200, (path, response.status_code)
        found = english_in(response.content.decode(), strings)
        if found:
            problems[path] = [(w, _debug_context(response.content.decode(), w)[:2]) for w in found]
    assert not problems, problems


def test_the_check_sees_english():
    strings = _english_strings()
    assert english_in("<p>Job stopped</p><code>Job stopped</code>", strings) == ["Job stopped"]
    assert english_in("<p>任务已停止</p><pre>Job stopped</pre>", strings) == []


def _debug_context(html: str, word: str) -> list[str]:  # pragma: no cover - a helper for humans
    text = visible_text(html)
    return [text[max(0, m.start() - 80) : m.end() + 80] for m in re.finditer(re.escape(word), text)]


@pytest.mark.parametrize(
    ("stored", "zh"),
    [
        (
            "Header job-header-0 (role Header): run script exited with code 3; first error: boom",
            "Header job-header-0（角色 Header）：运行脚本以退出码 3 结束；首个错误：boom",
        ),
        (
            "Worker demo-rollout-1 (role rollout): Ray worker process exited with code 1; first error: x",
            "Worker demo-rollout-1（角色 rollout）：Ray worker 进程以退出码 1 退出；首个错误：x",
        ),
        (
            "Worker demo-rollout-1 (role rollout): container main restarted 4 times (CrashLoopBackOff)",
            "Worker demo-rollout-1（角色 rollout）：main 容器重启了 4 次 (CrashLoopBackOff)",
        ),
        ("Image cannot be pulled: ErrImagePull", "镜像无法拉取：ErrImagePull"),
        (
            "Worker demo-rollout-0 (role rollout) exited with code 2 after stage 'rollout'; first error: boom",
            "Worker demo-rollout-0（角色 rollout）以退出码 2 退出（在阶段“rollout”之后）；首个错误：boom",
        ),
    ],
)
def test_stored_server_messages_render_in_the_users_language(stored, zh):
    from django.utils import translation

    from jobs.observe.status import localized_message

    with translation.override("zh-hans"):
        assert localized_message(stored) == zh
    with translation.override("en"):
        assert not re.search(r"[\u4e00-\u9fff]", localized_message(stored))


def _zh_catalogs() -> dict[str, list[tuple[str, str]]]:
    """(msgid, msgstr) of every zh catalog of the project, by catalog path (compiled .mo: what pages use)."""
    out = {}
    for mo in [*ROOT.glob("*/locale/zh_Hans/LC_MESSAGES/django*.mo"), *ROOT.glob("locale/zh_Hans/LC_MESSAGES/*.mo")]:
        with open(mo, "rb") as fh:
            catalog = gettext.GNUTranslations(fh)._catalog  # type: ignore[attr-defined]
        pairs = []
        for msgid, msgstr in catalog.items():
            msgid = msgid[0] if isinstance(msgid, tuple) else msgid
            if msgid and msgstr:
                pairs.append((msgid.split("\x04", 1)[-1], msgstr))
        out[str(mo.relative_to(ROOT))] = pairs
    return out


def test_one_chinese_word_per_product_term():
    """A Job is 任务 and a robot 机器人 on every page, as in the Chinese docs (the seeds); a Task keeps
    its English name there, so no catalog calls it 子任务 (任务 is the Job)."""
    seeds = "".join(p.read_text(encoding="utf-8") for p in SEEDS.glob("*.txt"))
    assert seeds.count("任务") > 10 * seeds.count("作业") and "机器人节点类别" in seeds  # the docs' words
    catalogs = _zh_catalogs()
    assert len(catalogs) >= 8
    wrong = []
    for path, pairs in catalogs.items():
        for msgid, msgstr in pairs:
            if "作业" in msgstr or "子任务" in msgstr:
                wrong.append((path, msgid, msgstr))
            if re.search(r"\brobots?\b", msgid, re.I) and ("机器人" not in msgstr or "真机" in msgstr):
                wrong.append((path, msgid, msgstr))
            if msgid in ("Task", "task") and not msgstr.startswith("Task"):
                wrong.append((path, msgid, msgstr))
    assert not wrong, wrong
    # node categories are named alike on the Nodes page and the Workers tab
    names = {m: {s for pairs in catalogs.values() for i, s in pairs if i == m} for m in ("Robot", "Edge compute")}
    assert names["Robot"] == {"机器人"}
    assert names["Edge compute"] == {s for pairs in catalogs.values() for i, s in pairs if i == "Edge"} == {"端算力"}
