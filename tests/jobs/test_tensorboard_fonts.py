"""Open in TensorBoard loads every asset through the console's proxy: the Roboto font CSS that the real TensorBoard
(the PyPI package) inlines in its page names ``url(/font-roboto/...)``, outside the job's prefix; the proxy moves
those URLs under ``/jobs/<job>/tensorboard/``, where each font answers 200."""

from __future__ import annotations

import os
import re

import pytest

from jobs.explain import tensorboard_assets, tensorboard_server
from tests.browser import test_diagnosis_browser

seeded = test_diagnosis_browser.seeded  # job "demo" with TensorBoard event files under a host directory mount

pytest.importorskip("tensorboard")


@pytest.fixture
def job_uid(monkeypatch):
    """The uid range the job's Workers would have (the fixture's job has no supervisor to ask), as in
    ``tests/browser/test_tensorboard_browser.py``: TensorBoard runs as it."""
    from clusters.runtime.local import idmap

    ids = idmap.slot_ids(idmap.ensure_range()[0], 7) if os.geteuid() == 0 else None
    monkeypatch.setattr(tensorboard_server, "_job_ids", lambda job: ids)
    return ids


@pytest.mark.django_db
def test_the_real_tensorboard_pages_font_urls_are_under_the_prefix_and_answer(client, admin_user, seeded, job_uid):
    client.force_login(admin_user)
    try:
        page = client.get("/jobs/demo/tensorboard/")
        assert page.status_code == 200
        html = page.content.decode()
        assert "<title>TensorBoard</title>" in html or "TensorBoard" in html
        fonts = re.findall(r"url\((['\"]?)([^)'\"]+\.woff2)\1\)", html)
        assert fonts, "TensorBoard's page inlines its font CSS"
        assert "url(/font-roboto/" not in html
        paths = {path for _quote, path in fonts}
        assert all(p.startswith("/jobs/demo/tensorboard/font-roboto/") for p in paths), sorted(paths)[:3]
        for path in sorted(paths)[:3]:
            font = client.get(path)
            assert font.status_code == 200, path
            assert font.content[:4] == b"wOF2"  # a real WOFF2 font, not an error page
        # the script and data URLs TensorBoard already prefixes are left as they were
        assert client.get("/jobs/demo/tensorboard/data/runs").status_code == 200
    finally:
        tensorboard_server.stop_all()


def test_the_rewrite_moves_only_root_urls_of_css_in_html_or_css():
    prefix = "/jobs/demo/tensorboard"
    css = b"a{src:url(/font-roboto/x.woff2)} b{src:url('/f/y.woff2')} c{background:url(\"/jobs/demo/tensorboard/z\")}"
    css += b" d{src:url(//cdn.example/w.woff2)} e{src:url(data:font/woff2;base64,AA==)} f{src:url(rel.woff2)}"
    out = tensorboard_assets.rewrite_root_urls(css, "text/css; charset=utf-8", prefix)
    assert out == (
        b"a{src:url(/jobs/demo/tensorboard/font-roboto/x.woff2)} b{src:url('/jobs/demo/tensorboard/f/y.woff2')}"
        b' c{background:url("/jobs/demo/tensorboard/z")} d{src:url(//cdn.example/w.woff2)}'
        b" e{src:url(data:font/woff2;base64,AA==)} f{src:url(rel.woff2)}"
    )
    script = b"const s = 'url(/font-roboto/x.woff2)';"
    assert tensorboard_assets.rewrite_root_urls(script, "application/javascript", prefix) == script
