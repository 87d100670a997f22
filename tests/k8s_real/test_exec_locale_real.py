"""Against the real control plane: a WebTerminal through the API server's ``pods/exec`` gets
LC_CTYPE/LANG = C.UTF-8 when the container sets none, so CJK input round-trips."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from tests.k8s_real.jobs import TerminalOutput
from tests.k8s_real.test_logs_terminal_real import POD, running_job  # noqa: F401 (fixture)
from tests.terminal_support import session_cookie, ws_communicator

pytestmark = [pytest.mark.k8s_real, pytest.mark.django_db(transaction=True), pytest.mark.timeout(180)]


@pytest.mark.asyncio
async def test_exec_shell_has_a_utf8_locale(running_job, alice):  # noqa: F811
    comm = ws_communicator(f"/ws/terminal/jobs/logs-a/pods/{POD}/", await sync_to_async(session_cookie)(alice))
    connected, _ = await comm.connect(timeout=15)
    assert connected
    output = TerminalOutput(comm)

    async def until(needle: bytes) -> None:
        await output.until(needle, timeout=20)

    await comm.send_to(bytes_data='echo "ctype=$LC_CTYPE lang=${LANG:+set}"; echo 你好-$((2*3))\r'.encode())
    await until(b"ctype=C.UTF-8 lang=set")
    await until("你好-6".encode())
    await comm.send_to(bytes_data=b"exit 0\r")
    while (await asyncio.wait_for(comm.output_queue.get(), 40))["type"] != "websocket.close":
        pass  # the shell ended by itself: nothing is parked for a reconnect
    await comm.wait(timeout=15)
