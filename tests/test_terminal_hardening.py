"""Issue 16, Minor 8: terminal downloads resolve the whole path inside the Worker's root."""

from __future__ import annotations

import json

import pytest

from tests.test_terminal_consumer import NS, _open, job, runtime  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.timeout(90), pytest.mark.asyncio]


async def test_symlinked_directory_in_a_download_path_is_refused(runtime, job, alice):  # noqa: F811
    work = runtime.workdir(NS, "demo-actor-1")
    (work / "x").symlink_to("/etc")
    (work / "real").mkdir()
    (work / "real" / "ok.txt").write_text("fine\n")
    (work / "alias").symlink_to(work / "real")
    term = await _open(alice)
    await term.run("echo ready", "m0")
    for path in ("x/hostname", "./x/hostname", "alias/ok.txt"):
        await term.comm.send_to(text_data=json.dumps({"type": "file-download", "path": path}))
        done = await term.text("file-transfer-done")
        assert done["success"] is False and "symbolic links" in done["error"], (path, done)
    await term.comm.send_to(text_data=json.dumps({"type": "file-download", "path": "real/ok.txt"}))
    start = await term.text("file-download-start")
    assert start["size"] == 5
    await term.text("file-download-end")
    assert (await term.text("file-transfer-done"))["success"] is True
    await term.comm.disconnect()
