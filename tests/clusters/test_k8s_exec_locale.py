"""Kubernetes exec sessions get LANG/LC_CTYPE=C.UTF-8 when the image sets none."""

from __future__ import annotations

import pytest

from clusters.runtime.kubernetes.runtime import shell_argv


@pytest.mark.parametrize("shell", ["bash", "sh"])
def test_exec_shell_gets_utf8_locale_only_when_unset(shell):
    """The exact argv the runtime sends, run by a real shell: LANG/LC_CTYPE default to C.UTF-8, a value the
    image sets is kept."""
    import os
    import subprocess

    def run(env: dict) -> str:
        argv = shell_argv(shell)
        argv[2] = argv[2].replace(f"exec {shell}", 'echo "$LANG|$LC_CTYPE"')
        base = {k: v for k, v in os.environ.items() if k not in ("LANG", "LC_CTYPE", "LC_ALL")}
        return subprocess.run(argv, env={**base, **env}, capture_output=True, text=True, timeout=10).stdout.strip()

    assert run({}) == "C.UTF-8|C.UTF-8"
    assert run({"LANG": "zh_CN.UTF-8"}) == "zh_CN.UTF-8|C.UTF-8"
    assert run({"LANG": "", "LC_CTYPE": "en_US.UTF-8"}) == "C.UTF-8|en_US.UTF-8"
    assert shell_argv(shell)[2].endswith(f"; exec {shell}")
