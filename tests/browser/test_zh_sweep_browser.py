"""Browser: every main page in zh has no untranslated English UI text.

The sweep reads what a user sees - every visible text node and the ``title`` / ``placeholder`` / ``aria-label`` /
``value`` of buttons - of each main page in Chromium with the language set to zh, and fails on any English word
that is not one of the product's own terms kept in English in the Chinese docs (``KEPT`` below: field names such as
Worker, Pod, Task, StatefulSet; product and format names; units). It is not a list of known strings, so a NEW
untranslated string fails it too. What the user typed or the cluster reports (job, Pod and node names, images,
labels, logs, YAML) is data, not UI: it sits in ``code`` / ``pre`` / ``.mono`` / inputs / the log view, or is
an identifier-like token (``demo-header-0``, ``rlinf/rlinf:v1``, ``pool=head``), and is skipped.

A second check works the other way round: the English msgids of the project's catalogs that have a Chinese
translation must not appear as a whole text on a zh page (a string that is in the catalog but rendered outside
the active language)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.browser import test_diagnosis_browser
from tests.browser.test_diagnosis_browser import login, set_lang
from tests.conftest import screenshot_dir
from tests.shared_spec import SEEDS

seeded = test_diagnosis_browser.seeded  # the fixture: job "demo" with Workers, metrics, TensorBoard events

pytestmark = [
    pytest.mark.browser,
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("orm_beside_playwright"),
]

ROOT = Path(__file__).resolve().parents[2]
PAGES = [
    "/",
    "/jobs/",
    "/jobs/demo/",
    "/jobs/demo/?tab=workers",
    "/jobs/demo/?tab=logs",
    "/jobs/demo/?tab=yaml",
    "/jobs/demo/diagnosis/",
    "/jobs/demo/run-check/",
    "/jobs/demo/metrics/",
    "/jobs/new/",
    "/jobs/new/yaml/",
    "/jobs/demo/edit/",
    "/clusters/",
    "/storage/",
    "/ssh-keys/",
    "/domains/",
    "/account/tokens/",
    "/account/notifications/",
    "/jobs/demo/notifications/",
    "/admin/",
    "/admin/clusters/cluster/",
    "/admin/clusters/node/",
    "/admin/clusters/cluster/{cluster}/change/",
    "/admin/auth/user/",
    "/admin/auth/user/add/",  # Django's own hint above the form (no zh in Django 5.2's catalog)
    "/admin/storage/storageclass/add/",  # the S3 field labels
]

# Terms the Chinese docs keep in English: every English word of the seeds (field names, quoted log lines of the
# wrapper scripts, commands), plus product and format names and units. Anything else in English on a zh page is
# an untranslated string.
KEPT = {w for f in sorted(SEEDS.glob("*.txt")) for w in re.findall(r"[A-Za-z]{2,}", f.read_text(encoding="utf-8"))}
KEPT |= set(
    """
    RLark Console RLinf Ray Kubernetes TensorBoard ECharts Playwright Celery Django WebTerminal CartPole ANSI Markdown
    Worker Workers Pod Pods Task Tasks Header Job StatefulSet Service ConfigMap PVC Secret Namespace StorageClass
    Node Nodes Rollout Actor Env Reward
    Pending Running Succeeded Failed Unknown Completed Stopped CrashLoopBackOff ImagePullBackOff OOMKilled Error
    YAML JSON CSV SSH API CLI GPU GPUs CPU IP CIDR URL ID UTC CST DNS TTY PID
    kubeconfig hostPath nodeSelector nvidia gpu com rlinf io rlark
    S3 OSS NFS TCP UDP HTTP HTTPS LDAP
    Webhook Slack Lark https English
    GiB MiB KiB TiB B KB MB GB s ms min h
    admin root alice bob
    """.split()
)

COLLECT = r"""
() => {
  const skip = (el) => el.closest('script,style,code,pre,kbd,samp,textarea,select,svg,canvas,.mono,.log-view,' +
                                  '.echart,[translate=no],[aria-hidden=true],.xterm,#metrics-charts,noscript');
  const visible = (el) => !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
  const out = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  while (walker.nextNode()) {
    const n = walker.currentNode, el = n.parentElement;
    const t = n.textContent.trim();
    if (!t || !el || skip(el) || !visible(el)) continue;
    out.push(t);
  }
  for (const el of document.querySelectorAll('[title],[placeholder],[aria-label],input[type=submit],button[value]')) {
    if (skip(el) && !el.matches('select')) continue;
    for (const a of ['title', 'placeholder', 'aria-label']) if (el.getAttribute(a)) out.push(el.getAttribute(a));
    if (el.matches('input[type=submit]')) out.push(el.value);
  }
  for (const o of document.querySelectorAll('select option')) out.push(o.textContent.trim());
  return out;
}
"""

IDENTIFIER = re.compile(r"^[\w.:/@=+~-]*[-_/.:=@0-9][\w.:/@=+~-]*$")  # demo-header-0, rlinf/rlinf:v1, pool=head


def english_words(text: str, data: frozenset[str] = frozenset()) -> list[str]:
    """The English words of ``text`` that are UI language: identifier-like tokens, KEPT terms and the words of
    ``data`` (names and logs of the page's objects) removed."""
    words = []
    text = re.sub(r"\bhttps?://[^\s（），]+", " ", text)  # an example URL is not UI language
    for token in re.split(r"[\s,;()\[\]（），；：:、·|\"'“”‘’!?！？…]+", text):
        token = token.strip(".")
        if not token or IDENTIFIER.match(token) or not re.search(r"[A-Za-z]{2,}", token):
            continue
        for word in re.findall(r"[A-Za-z]+", token):
            if len(word) > 1 and word not in KEPT and word not in data and not re.fullmatch(r"[A-Z][a-z]?", word):
                words.append(word)
    return words


def translated_msgids() -> set[str]:
    """English msgids (whole UI texts of 2+ words) that the zh catalogs translate."""
    out = set()
    for po in [*ROOT.glob("*/locale/zh_Hans/LC_MESSAGES/django.po"), ROOT / "locale/zh_Hans/LC_MESSAGES/django.po"]:
        text = po.read_text(encoding="utf-8")
        for m in re.finditer(r'^msgid "(.+)"\nmsgstr "(.+)"$', text, re.M):
            if " " in m.group(1) and "%" not in m.group(1) and "{" not in m.group(1) and m.group(1) != m.group(2):
                out.add(m.group(1))
    return out


def data_words() -> frozenset[str]:
    """Words of what users named or the cluster reports on these pages: job, cluster, user, token, role and Pod
    names, TensorBoard tags and the Workers' logs (quoted by Diagnosis and Run check)."""
    from django.contrib.auth import get_user_model

    from accounts.models import APIToken
    from clusters.models import Cluster
    from jobs.explain import runcheck
    from jobs.models import Job, Pod, Task
    from jobs.observe.status import log_archive_path

    texts = [*Job.objects.values_list("name", flat=True), *Cluster.objects.values_list("name", flat=True)]
    texts += get_user_model().objects.values_list("username", flat=True)
    texts += APIToken.objects.values_list("name", flat=True)
    texts += [f"{a} {b}" for a, b in Task.objects.values_list("template_name", "display_role")]
    texts += ["train env rollout actor loss success once reward main"]  # the seeded TensorBoard tags, container
    texts += runcheck.DEFAULT_SETTINGS["app_patterns"]  # RLinf's own log line the run check looks for
    for pod in Pod.objects.values_list("name", flat=True):
        path = log_archive_path("demo", pod)
        texts.append(path.read_text() if path.exists() else "")
    return frozenset(w for t in texts for w in re.findall(r"[A-Za-z]+", t))


def test_english_words_catches_ui_text_and_leaves_data_alone():
    assert english_words("任务 demo-header-0 已启动 rlinf/rlinf:v1 pool=head") == []
    assert english_words("Worker · 就绪 3/3 GPU") == []
    assert english_words("例如 https://s3.example.com") == []
    assert {"connection", "refused"} <= set(english_words("删除失败：connection refused by the server"))
    assert "Show" in english_words("Show system nodes")
    assert english_words("demo 属于 root", frozenset({"demo", "root"})) == []  # names are data


def test_every_main_page_in_zh_has_no_untranslated_english(page, live_server, client, admin_user, seeded):
    login(page, live_server, client, admin_user)
    set_lang(page, live_server, "zh-hans")
    msgids = translated_msgids()
    data = data_words()
    found: dict[str, list[str]] = {}
    from clusters.models import Cluster

    for path in [p.format(cluster=Cluster.objects.get(name="local").pk) for p in PAGES]:
        resp = page.goto(live_server.url + path)
        assert resp and resp.status == 200, (path, resp and resp.status)
        page.wait_for_load_state("load")
        assert page.locator("html").get_attribute("lang") == "zh-hans", path
        texts = page.evaluate(COLLECT)
        bad = sorted({t for t in texts if english_words(t, data)} | {t for t in texts if t in msgids})
        if bad:
            found[path] = bad
    if found:
        shots = screenshot_dir()
        for path in found:
            page.goto(live_server.url + path)
            page.screenshot(path=str(shots / f"zh-sweep{re.sub(r'[^a-z0-9]+', '-', path)}.png"), full_page=True)
    assert not found, "untranslated English on zh pages:\n" + "\n".join(
        f"{p}: {t!r}" for p, texts in found.items() for t in texts
    )
