"""Run check 5's output scan: the same result on the host as inside a Worker (the module runs as a script there),
and its one-line answer read back through a terminal's noise; anything else is no answer."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path

from jobs.explain import output_scan


def test_the_script_inside_a_worker_answers_what_the_console_computes(tmp_path):
    (tmp_path / "run" / "ckpt").mkdir(parents=True)
    (tmp_path / "run" / "ckpt" / "a.bin").write_bytes(b"a" * 10)
    newest = tmp_path / "run" / "ckpt" / "b.bin"
    newest.write_bytes(b"b" * 100)
    here = output_scan.scan(str(tmp_path / "run"), 64)
    assert here["state"] == "ok" and here["files"] == 2 and here["newest"] == str(newest)
    assert here["size"] == 100 and here["sha256"] == hashlib.sha256(b"b" * 64).hexdigest()  # first 64 bytes
    source = Path(output_scan.__file__).read_text()
    out = subprocess.run(
        [sys.executable, "-c", source, str(tmp_path / "run"), "64"], capture_output=True, text=True, timeout=30
    )
    # as a terminal delivers it: an echoed prompt before, CR LF after
    assert output_scan.decode("$ python3 -c ...\r\n" + out.stdout.replace("\n", "\r\n")) == here
    assert output_scan.scan(str(tmp_path / "nothing*"), 64) == {"state": "missing", "detail": "not found"}


def test_no_marker_or_a_damaged_answer_is_no_answer():
    assert output_scan.decode("bash: python3: command not found\r\n") is None
    assert output_scan.decode(output_scan.MARKER + "!!!not-base64\r\n") is None
    assert output_scan.decode(output_scan.MARKER) is None
    assert output_scan.decode(output_scan.encode({"no": "state"})) is None
