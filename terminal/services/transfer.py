"""WebTerminal file transfer: path rules and the exec commands that move bytes.

Protocol (upstream-rlark 9): upload = ``{"type":"file-upload","path":"./<name>","size":N,"mode":420}``,
binary chunks of 32 KiB, ``{"type":"file-upload-end"}``; download = ``{"type":"file-download","path":P}``
-> ``file-download-start`` {size, name}, 32 KiB binary chunks, ``file-download-end``; both finish
with ``file-transfer-done`` {success, error}.

Security (peers 3.2 T10, 5.2 "File transfer"; upstream 9 "goes further"):
- upload names must match ``[A-Za-z0-9._-]+`` (not ``.``/``..``); the target is the shell's
  working directory (``./name``) or ``/tmp/name``; download paths are relative paths (or under
  ``/tmp/``) whose every component matches the same pattern, so ``..`` and absolute escapes are
  rejected; inside the container no component of the path may be a symbolic link and the file's
  physical directory must lie under its root (working directory or ``/tmp``); directories are refused;
- paths and sizes are passed as **argv** to a fixed script, never interpolated into shell text;
- size cap :data:`MAX_TRANSFER_BYTES` (64 MiB) both ways.

Bytes travel base64-encoded in 76-character lines through a second exec session, so it works
whether the runtime's exec is a PTY (local runtime, Kubernetes ``tty=true``) or a plain pipe:
``stty raw -echo`` switches the line discipline off where there is one, ``head -c <n>`` reads
exactly the encoded length (no end-of-file needed), and ``RLARK-*`` marker lines report the result.
"""

from __future__ import annotations

import base64
import re

from django.utils.translation import gettext as _

CHUNK_BYTES = 32 * 1024  # upstream 9
MAX_TRANSFER_BYTES = 64 * 1024 * 1024
RAW_PER_LINE = 57  # 57 raw bytes -> one 76-character base64 line
NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")


class TransferError(ValueError):
    """A transfer request that is refused; ``str(exc)`` is shown to the user, in the language active when it was
    raised (the consumer activates its page's: ``rlark_console.language.scope_language``)."""


def _check_name(name: str) -> None:
    if not NAME_RE.match(name) or name in {".", ".."}:
        raise TransferError(
            _("file name %(name)s is not allowed (use letters, digits, '.', '_' or '-')") % {"name": repr(name)}
        )


def upload_path(path: object) -> str:
    """Validate an upload target: ``name``, ``./name`` or ``/tmp/name``; returns the path to write.

    Raises TransferError for anything else (``..``, other absolute paths, sub-directories,
    names outside ``[A-Za-z0-9._-]+``).
    """
    if not isinstance(path, str) or not path:
        raise TransferError(_("upload path is missing"))
    if "\x00" in path:
        raise TransferError(_("upload path is not allowed"))
    if ".." in path.split("/"):
        raise TransferError(_("'..' is not allowed in transfer paths"))
    if path.startswith("/tmp/"):
        name, prefix = path[5:], "/tmp/"
    elif path.startswith("./"):
        name, prefix = path[2:], "./"
    elif path.startswith("/"):
        raise TransferError(_("absolute upload paths are only allowed under /tmp/"))
    else:
        name, prefix = path, "./"
    if "/" in name:
        raise TransferError(_("uploads go to the working directory or /tmp/, not into sub-directories"))
    _check_name(name)
    return prefix + name


def download_path(path: object) -> str:
    """Validate a download path: relative (``a/b.txt``, ``./b.txt``) or under ``/tmp/``; every
    component matches ``[A-Za-z0-9._-]+`` and none is ``..``. Returns the normalised path."""
    if not isinstance(path, str) or not path.strip():
        raise TransferError(_("download path is missing"))
    path = path.strip()
    prefix = ""
    if path.startswith("/tmp/"):
        prefix, rest = "/tmp/", path[5:]
    elif path.startswith("/"):
        raise TransferError(_("absolute download paths are only allowed under /tmp/"))
    else:
        prefix, rest = "./", path[2:] if path.startswith("./") else path
    parts = [p for p in rest.split("/") if p not in ("", ".")]
    if not parts:
        raise TransferError(_("download path names no file"))
    for part in parts:
        if part == "..":
            raise TransferError(_("'..' is not allowed in transfer paths"))
        _check_name(part)
    return prefix + "/".join(parts)


def upload_mode(mode: object) -> str:
    """File mode for an upload as an octal string (default 0644, upstream's ``mode: 420``)."""
    if mode is None:
        return "644"
    if not isinstance(mode, int) or isinstance(mode, bool) or not 0 <= mode <= 0o777:
        raise TransferError(_("file mode is not allowed"))
    return f"{mode:o}"


def encoded_length(size: int) -> int:
    """Bytes written to the container for ``size`` raw bytes: base64 text plus one newline per line."""
    if size <= 0:
        return 0
    return 4 * ((size + 2) // 3) + (size + RAW_PER_LINE - 1) // RAW_PER_LINE


UPLOAD_SCRIPT = (
    'f="$1"; n="$2"; m="$3"; stty raw -echo 2>/dev/null; '
    'if [ -L "$f" ] || [ -d "$f" ]; then head -c "$n" >/dev/null; '
    'echo "RLARK-ERR target is a directory or a symbolic link"; exit 3; fi; '
    'if head -c "$n" | base64 -d > "$f" && chmod "$m" "$f"; then echo "RLARK-OK"; '
    'else echo "RLARK-ERR could not write the file"; exit 4; fi'
)
# The whole path is resolved inside its root (the shell's working directory for ``./...``, ``/tmp`` for
# ``/tmp/...``): no component may be a symbolic link (``ln -s /etc x`` then ``x/hostname`` is refused), and
# the file's physical directory (``cd -P`` + ``pwd -P``) must lie under the root's physical path. Components
# are ``[A-Za-z0-9._-]+`` (checked before), so splitting on ``/`` is safe and nothing globs.
DOWNLOAD_SCRIPT = (
    'f="$1"; cap="$2"; stty raw -echo 2>/dev/null; '
    'case "$f" in /tmp/*) base=/tmp; rel="${f#/tmp/}";; *) base=.; rel="${f#./}";; esac; '
    'root=$(cd -P "$base" 2>/dev/null && pwd -P) || { echo "RLARK-ERR no such file"; exit 2; }; '
    'p="$base"; oldifs="$IFS"; IFS=/; set -f; '
    'for c in $rel; do p="$p/$c"; '
    'if [ -L "$p" ]; then echo "RLARK-ERR symbolic links are not transferred"; exit 3; fi; done; '
    'IFS="$oldifs"; '
    'if [ ! -f "$f" ]; then echo "RLARK-ERR no such file"; exit 2; fi; '
    'dir=$(cd -P "${f%/*}" 2>/dev/null && pwd -P) || { echo "RLARK-ERR no such file"; exit 2; }; '
    'case "$dir/" in "$root"/*) ;; *) echo "RLARK-ERR the path leaves the working directory"; exit 3;; esac; '
    's=$(wc -c < "$f"); s=$((s + 0)); '
    'if [ "$s" -gt "$cap" ]; then echo "RLARK-ERR file is larger than the limit"; exit 4; fi; '
    'echo "RLARK-SIZE $s"; base64 "$f"; echo "RLARK-END"'
)


def upload_command(path: str, size: int, mode: str) -> list[str]:
    """argv of the upload helper (path, encoded length and mode are argv, never shell text)."""
    return ["sh", "-c", UPLOAD_SCRIPT, "rlark-upload", path, str(encoded_length(size)), mode]


def download_command(path: str) -> list[str]:
    """argv of the download helper."""
    return ["sh", "-c", DOWNLOAD_SCRIPT, "rlark-download", path, str(MAX_TRANSFER_BYTES)]


class Base64Lines:
    """Incremental encoder: raw bytes in, 76-character base64 lines (with ``\\n``) out."""

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> bytes:
        self._pending += data
        whole = len(self._pending) - len(self._pending) % RAW_PER_LINE
        block, self._pending = self._pending[:whole], self._pending[whole:]
        return b"".join(
            base64.b64encode(block[i : i + RAW_PER_LINE]) + b"\n" for i in range(0, len(block), RAW_PER_LINE)
        )

    def finish(self) -> bytes:
        rest, self._pending = self._pending, b""
        return base64.b64encode(rest) + b"\n" if rest else b""


class DownloadParser:
    """Parses the download helper's output: ``RLARK-SIZE n``, base64 lines, ``RLARK-END`` or
    ``RLARK-ERR msg``. Feed output bytes; read :attr:`size`, :attr:`error`, :attr:`done` and
    take decoded bytes with :meth:`take`."""

    def __init__(self) -> None:
        self._buf = b""
        self._b64 = b""
        self._data = bytearray()
        self.size: int | None = None
        self.error: str | None = None
        self.done = False
        self.received = 0

    def feed(self, data: bytes) -> None:
        self._buf += data
        while not self.done and b"\n" in self._buf:
            line, self._buf = self._buf.split(b"\n", 1)
            line = line.strip(b"\r").strip()
            if self.size is None:
                idx = line.find(b"RLARK-")
                if idx < 0:
                    continue  # shell noise before the helper started
                line = line[idx:]
                if line.startswith(b"RLARK-SIZE "):
                    self.size = int(line.split()[1])
                elif line.startswith(b"RLARK-ERR"):
                    self.error = line[9:].strip().decode("utf-8", "replace") or "download failed"
                    self.done = True
                continue
            if line == b"RLARK-END":
                self._flush(final=True)
                self.done = True
                if self.received != self.size:
                    self.error = f"received {self.received} of {self.size} bytes"
                continue
            self._b64 += line
            self._flush(final=False)

    def _flush(self, final: bool) -> None:
        usable = len(self._b64) if final else len(self._b64) - len(self._b64) % 4
        if usable:
            raw = base64.b64decode(self._b64[:usable])
            self._b64 = self._b64[usable:]
            self._data += raw
            self.received += len(raw)

    def take(self, at_least: int = CHUNK_BYTES, final: bool = False) -> list[bytes]:
        """Decoded bytes in 32 KiB chunks (the tail only when ``final``)."""
        out = []
        while len(self._data) >= at_least or (final and self._data):
            out.append(bytes(self._data[:CHUNK_BYTES]))
            del self._data[:CHUNK_BYTES]
        return out
