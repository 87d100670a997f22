"""File transfer on a WebTerminal connection (upstream-rlark 9): upload and download through an exec in the Pod.

Protocol: text ``file-upload`` ``{"path","size","mode"}``, then the file as binary frames, then
``file-upload-end``; text ``file-download`` ``{"path"}``, answered by ``file-download-start`` ``{"size","name"}``,
binary chunks and ``file-download-end``. Each transfer ends with ``file-transfer-done`` ``{"success","error"}``.
One transfer at a time: an upload's chunks are indistinguishable from another's. The paths, commands and the
download's framing are :mod:`terminal.services.transfer`'s.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from django.utils import translation
from django.utils.translation import gettext as _

from clusters.runtime.base import RuntimeFailure
from rlark_console.db_threads import in_thread
from terminal.services import transfer


class Upload:
    """An upload in progress (or a refused one whose chunks are swallowed until ``file-upload-end``)."""

    def __init__(self, expected: int, path: str = "", stream=None, error: str | None = None) -> None:
        self.expected = expected
        self.received = 0
        self.path = path
        self.stream = stream
        self.error = error
        self.encoder = transfer.Base64Lines()
        self.output = bytearray()
        self.reader: threading.Thread | None = None


class FileTransfers:
    """The transfers of one terminal connection ``term`` (a ``TerminalConsumer``: its runtime, target Pod and
    container, its send path with flow control, the time of its last input): ``upload`` in progress, or the
    ``download_task``."""

    def __init__(self, term: Any) -> None:
        self.term = term
        self.upload: Upload | None = None
        self.download_task: asyncio.Task | None = None

    @property
    def downloading(self) -> bool:
        return bool(self.download_task and not self.download_task.done())

    async def done(self, success: bool, error: str | None = None) -> None:
        await self.term.send_json({"type": "file-transfer-done", "success": success, "error": error})

    def chunk_too_large(self) -> None:
        """A binary frame over the limit was dropped: the upload in progress (if any) fails."""
        if self.upload is not None:
            self.upload.error = self.upload.error or "upload chunk too large"

    async def _exec(self, command: list[str]) -> Any:
        """An exec stream of ``command`` in the connection's Pod and container. Raises RuntimeFailure."""
        term = self.term
        return await in_thread(term.runtime.exec, term.target.namespace, term.target.pod, command, **term.exec_kwargs)

    async def start_upload(self, msg: dict) -> None:
        """``file-upload``: start writing ``path`` (``size`` bytes, ``mode``) in the Pod; a refusal is reported at
        ``file-upload-end`` (the chunks before it are swallowed)."""
        with translation.override(self.term.page_language()):  # the refusals below are shown on the user's page
            if self.upload is not None:  # its chunks and ours are indistinguishable: fail the running one
                self.upload.error = self.upload.error or _("another upload started before this one finished")
                return
            if self.downloading:
                self.upload = Upload(0, error=_("another file transfer is in progress"))
                return
            size = msg.get("size")
            try:
                path = transfer.upload_path(msg.get("path"))
                mode = transfer.upload_mode(msg.get("mode"))
                if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                    raise transfer.TransferError(_("upload size is missing"))
                if size > transfer.MAX_TRANSFER_BYTES:
                    raise transfer.TransferError(
                        _("file is larger than the %(mib)d MiB limit")
                        % {"mib": transfer.MAX_TRANSFER_BYTES // (1024 * 1024)}
                    )
            except transfer.TransferError as exc:
                self.upload = Upload(0, error=str(exc))
                return
        self.term.last_input = time.monotonic()
        try:
            stream = await self._exec(transfer.upload_command(path, size, mode))
        except RuntimeFailure as exc:
            self.upload = Upload(0, error=str(exc))
            return
        up = Upload(size, path, stream)

        def drain() -> None:
            while True:
                data = stream.read(0.2)
                if data is None:
                    if up.stream is None:
                        return
                    continue
                if not data:
                    return
                up.output += data
                del up.output[:-65536]

        up.reader = threading.Thread(target=drain, daemon=True, name="term-upload")
        up.reader.start()
        self.upload = up

    async def chunk(self, data: bytes) -> None:
        """A binary frame of the upload in progress."""
        up = self.upload
        if up.error:
            return
        up.received += len(data)
        if up.received > up.expected:
            up.error = "received more bytes than the announced size"
            return
        encoded = up.encoder.feed(data)
        if encoded:
            try:
                await self.term.loop.run_in_executor(self.term.io, up.stream.write, encoded)
            except RuntimeFailure as exc:
                up.error = str(exc)

    async def end_upload(self) -> None:
        """``file-upload-end``: finish the file, wait for the Pod's ``RLARK-OK`` (or its ``RLARK-ERR`` line), report."""
        up, self.upload = self.upload, None
        if up is None:
            return
        self.term.last_input = time.monotonic()
        if up.error is None and up.received != up.expected:
            up.error = f"upload incomplete: received {up.received} of {up.expected} bytes"
        if up.error is None:
            try:
                await self.term.loop.run_in_executor(self.term.io, up.stream.write, up.encoder.finish())
            except RuntimeFailure as exc:
                up.error = str(exc)
        if up.stream is not None:
            timeout = 30 + up.expected / (1024 * 1024)
            if up.error is None:
                await in_thread(up.reader.join, timeout)
            await in_thread(up.stream.close)
            stream, up.stream = up.stream, None
            await in_thread(up.reader.join, 2)
            if up.error is None:
                out = bytes(up.output)
                if b"RLARK-OK" not in out:
                    marker = out.rfind(b"RLARK-ERR")
                    line = out[marker + 9 :].split(b"\n", 1)[0].strip() if marker >= 0 else b""
                    up.error = line.decode("utf-8", "replace") or "the file could not be written"
            del stream
        await self.done(up.error is None, up.error)

    async def request_download(self, raw_path: object) -> None:
        """``file-download``: start it in a task of its own, unless another transfer is in progress."""
        if self.downloading or self.upload is not None:
            await self.done(False, "another file transfer is in progress")
        else:
            self.term.last_input = time.monotonic()
            self.download_task = asyncio.create_task(self._download(raw_path))

    async def _download(self, raw_path: object) -> None:
        term = self.term
        try:
            with translation.override(term.page_language()):
                path = transfer.download_path(raw_path)
        except transfer.TransferError as exc:
            await self.done(False, str(exc))
            return
        try:
            stream = await self._exec(transfer.download_command(path))
        except RuntimeFailure as exc:
            await self.done(False, str(exc))
            return
        parser = transfer.DownloadParser()
        started = False
        error: str | None = None
        try:
            async with term.send_lock:  # no terminal bytes between file-download-start and -end
                deadline = time.monotonic() + 15
                while not parser.done:
                    data = await in_thread(stream.read, 0.5)
                    if data is None:
                        if not started and time.monotonic() > deadline:
                            error = "the download did not start"
                            break
                        continue
                    if not data:
                        break
                    parser.feed(data)
                    if parser.size is not None and not started and not parser.error:
                        started = True
                        name = path.rsplit("/", 1)[-1]
                        await term.send_json({"type": "file-download-start", "size": parser.size, "name": name})
                    for chunk in parser.take(final=parser.done):
                        await term.flow_wait()
                        await term.send(bytes_data=chunk)
                        term.sent_bytes += len(chunk)
                error = error or parser.error or (None if parser.done else "the download was interrupted")
                if started:
                    await term.send_json({"type": "file-download-end"})
        finally:
            await in_thread(stream.close)
        await self.done(error is None, error)

    async def close(self) -> None:
        """The connection ends: an upload's exec stream is closed (the download task is cancelled by the caller)."""
        if self.upload is not None and self.upload.stream is not None:
            await in_thread(self.upload.stream.close)
            self.upload = None
