"""SFTP (and, through asyncssh's ``allow_scp``, ``scp``) on a Worker's files, via :mod:`sshgate.agent`'s ``fs`` mode.

Why this way: the Worker image has no ``sftp-server`` we could rely on, but it always has ``python3`` (Ray);
asyncssh implements the SFTP and scp protocols, and every file operation becomes one request to one agent
process in the Worker (started on the first operation, in the Worker's namespaces and uid, so it may do exactly
what the Worker may do). Requests are answered in order; reads are capped at 1 MiB per request.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import AsyncIterator

import asyncssh
from asyncssh.sftp import FXF_APPEND, FXF_CREAT, FXF_EXCL, FXF_READ, FXF_TRUNC, FXF_WRITE, _stat_mode_to_filetype

from sshgate.workerio import AgentError, AgentLink


def _flags(pflags: int) -> int:
    if pflags & FXF_READ and pflags & FXF_WRITE:
        flags = os.O_RDWR
    elif pflags & FXF_WRITE:
        flags = os.O_WRONLY
    else:
        flags = os.O_RDONLY
    for bit, os_bit in ((FXF_APPEND, os.O_APPEND), (FXF_CREAT, os.O_CREAT), (FXF_TRUNC, os.O_TRUNC)):
        if pflags & bit:
            flags |= os_bit
    if pflags & FXF_EXCL:
        flags |= os.O_EXCL
    return flags


def _stat(values: list[int]) -> asyncssh.SFTPAttrs:
    """SFTP attributes of the agent's ``[mode, ino, dev, nlink, uid, gid, size, atime, mtime, ctime]``.
    Owner and group stay numeric: the bastion's user database is not the Worker's."""
    mode, _ino, _dev, nlink, uid, gid, size, atime, mtime, ctime = values
    return asyncssh.SFTPAttrs(
        type=_stat_mode_to_filetype(mode),
        size=size,
        uid=uid,
        gid=gid,
        owner=str(uid),
        group=str(gid),
        permissions=mode,
        atime=atime,
        mtime=mtime,
        ctime=ctime,
        nlink=nlink,
    )


def _attrs(attrs: asyncssh.SFTPAttrs) -> dict:
    return {
        "size": attrs.size,
        "uid": attrs.uid,
        "gid": attrs.gid,
        "mode": attrs.permissions,
        "atime": attrs.atime,
        "mtime": attrs.mtime,
    }


class _Handle:
    def __init__(self, fd: int) -> None:
        self.fd = fd


class WorkerSFTP(asyncssh.SFTPServer):
    """asyncssh's SFTP server whose file system is the Worker's (through the ``fs`` agent)."""

    def __init__(self, chan) -> None:
        super().__init__(chan)
        self.server = chan.get_connection().get_owner()
        self.link: AgentLink | None = None
        self.lock = asyncio.Lock()
        self.next_id = 0
        if "sftp" not in self.server.kinds:
            self.server.kinds.append("sftp")

    async def _call(self, op: str, *args):
        async with self.lock:  # one request at a time: answers come back in order
            if self.link is None:
                try:
                    self.link = await self.server.open_agent("fs")
                except AgentError as exc:
                    raise asyncssh.SFTPFailure(f"rlark: {exc}") from None
                self.frames = self.link.frames()
            self.next_id += 1
            request = json.dumps({"id": self.next_id, "op": op, "a": list(args)}).encode()
            self.server.bytes_in += len(request)
            await self.link.send(b"q", request)
            async for tag, payload in self.frames:
                if tag == b"a":
                    self.server.bytes_out += len(payload)
                    answer = json.loads(payload)
                    break
            else:
                self.link = None
                raise asyncssh.SFTPConnectionLost("rlark: the Worker ended the file session")
        if "err" in answer:
            code, text = answer["err"]
            raise OSError(code, text)
        return answer["r"]

    # --- paths -----------------------------------------------------------------------------------------
    async def realpath(self, path: bytes) -> bytes:
        return os.fsencode(await self._call("realpath", os.fsdecode(path or b".")))

    async def stat(self, path: bytes) -> asyncssh.SFTPAttrs:
        return _stat(await self._call("stat", os.fsdecode(path)))

    async def lstat(self, path: bytes) -> asyncssh.SFTPAttrs:
        return _stat(await self._call("lstat", os.fsdecode(path)))

    async def setstat(self, path: bytes, attrs: asyncssh.SFTPAttrs) -> None:
        await self._call("setstat", os.fsdecode(path), _attrs(attrs))

    async def scandir(self, path: bytes) -> AsyncIterator[asyncssh.SFTPName]:
        for name in (b".", b".."):
            yield asyncssh.SFTPName(name, attrs=await self.lstat(path + b"/" + name))
        for name, st in await self._call("scandir", os.fsdecode(path)):
            yield asyncssh.SFTPName(os.fsencode(name), attrs=_stat(st))

    async def remove(self, path: bytes) -> None:
        await self._call("remove", os.fsdecode(path))

    async def mkdir(self, path: bytes, attrs: asyncssh.SFTPAttrs) -> None:
        await self._call("mkdir", os.fsdecode(path), 0o777 if attrs.permissions is None else attrs.permissions)

    async def rmdir(self, path: bytes) -> None:
        await self._call("rmdir", os.fsdecode(path))

    async def rename(self, oldpath: bytes, newpath: bytes) -> None:
        await self._call("rename", os.fsdecode(oldpath), os.fsdecode(newpath))

    async def posix_rename(self, oldpath: bytes, newpath: bytes) -> None:
        await self._call("posix_rename", os.fsdecode(oldpath), os.fsdecode(newpath))

    async def readlink(self, path: bytes) -> bytes:
        return os.fsencode(await self._call("readlink", os.fsdecode(path)))

    async def symlink(self, oldpath: bytes, newpath: bytes) -> None:
        await self._call("symlink", os.fsdecode(oldpath), os.fsdecode(newpath))

    async def link(self, oldpath: bytes, newpath: bytes) -> None:
        await self._call("link", os.fsdecode(oldpath), os.fsdecode(newpath))

    async def statvfs(self, path: bytes) -> asyncssh.SFTPVFSAttrs:
        v = await self._call("statvfs", os.fsdecode(path))
        return asyncssh.SFTPVFSAttrs(*v)

    # --- open files ------------------------------------------------------------------------------------
    async def open(self, path: bytes, pflags: int, attrs: asyncssh.SFTPAttrs) -> _Handle:
        mode = 0o666 if attrs.permissions is None else attrs.permissions
        return _Handle(await self._call("open", os.fsdecode(path), _flags(pflags), mode))

    async def close(self, file_obj: _Handle) -> None:
        await self._call("close", file_obj.fd)

    async def read(self, file_obj: _Handle, offset: int, size: int) -> bytes:
        import base64

        return base64.b64decode(await self._call("read", file_obj.fd, offset, size))

    async def write(self, file_obj: _Handle, offset: int, data: bytes) -> int:
        import base64

        return await self._call("write", file_obj.fd, offset, base64.b64encode(data).decode())

    async def fstat(self, file_obj: _Handle) -> asyncssh.SFTPAttrs:
        return _stat(await self._call("fstat", file_obj.fd))

    async def fsetstat(self, file_obj: _Handle, attrs: asyncssh.SFTPAttrs) -> None:
        await self._call("fsetstat", file_obj.fd, _attrs(attrs))

    async def fsync(self, file_obj: _Handle) -> None:
        await self._call("fsync", file_obj.fd)

    async def exit(self) -> None:
        """The session ended: stop the agent and report exit status 0 (asyncssh sends none for a subsystem, and
        OpenSSH's ``scp`` counts a missing one as a failure)."""
        if self.link is not None:
            await self.server.drop(self.link.stream)
            self.link = None
        try:
            self.channel.exit(0)
        except (OSError, asyncssh.Error, AttributeError):
            pass
