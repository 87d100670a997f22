"""The last step of every local Worker start and every exec into a Worker, run *after* the switch to the job's
unprivileged uid: read the Worker's environment from an inherited file descriptor, change to its working
directory and exec its command.

Everything before this step runs as the host's root with a fixed environment (``launcher.CLEAN_ENV``), so
nothing the user wrote in ``env`` (``BASH_ENV``, ``LD_PRELOAD``, ``PS4`` ...) is seen by a privileged process.
The file descriptor is a ``memfd`` the launcher wrote: the values (secrets among them) never touch the disk and
never appear in a command line.

Run as ``python -I -S envexec.py FD WORKDIR MODE COMMAND...`` (or its text through ``-c``):

- ``FD``: the descriptor holding ``NAME=VALUE`` entries separated by NUL bytes, at most :data:`MAX_ENV_BYTES`;
- ``WORKDIR``: the working directory; ``MODE`` ``create`` makes a missing one (as the kubelet does for a
  container's ``workingDir``) and fails with exit 1 when it cannot, ``fallback`` uses ``/`` instead (exec);
- ``COMMAND``: looked up in the ``PATH`` of the new environment; exit 127 when it is not found, 126 when it
  cannot be run, with one ``rlark:`` line on stderr.

Standard library only: it runs inside the Worker, where the console's packages are hidden.
"""

import os
import sys

MAX_ENV_BYTES = 4 * 2**20


def read_env(fd: int) -> dict[str, str]:
    """The environment in ``fd`` (NUL-separated ``NAME=VALUE``); entries without ``=`` or a name are skipped."""
    chunks = []
    size = 0
    with os.fdopen(fd, "rb") as f:
        while size <= MAX_ENV_BYTES:
            chunk = f.read(65536)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    if size > MAX_ENV_BYTES:
        raise ValueError(f"the environment is over {MAX_ENV_BYTES} bytes")
    env = {}
    for item in b"".join(chunks).split(b"\0"):
        name, sep, value = item.partition(b"=")
        if sep and name:
            env[os.fsdecode(name)] = os.fsdecode(value)
    return env


def enter_workdir(workdir: str, mode: str) -> None:
    """``chdir`` to ``workdir``; see the module docstring for ``mode``. Raises OSError in ``create`` mode."""
    try:
        os.chdir(workdir)
        return
    except OSError:
        if mode != "create":
            os.chdir("/")
            return
    os.makedirs(workdir, exist_ok=True)
    os.chdir(workdir)


def main(argv: list[str]) -> int:
    if len(argv) < 5:
        sys.stderr.write("rlark: envexec: FD WORKDIR MODE COMMAND... expected\n")
        return 2
    fd, workdir, mode, command = int(argv[1]), argv[2], argv[3], argv[4:]
    env = read_env(fd)
    try:
        enter_workdir(workdir, mode)
    except OSError as exc:
        sys.stderr.write(f"rlark: cannot use the working directory {workdir}: {exc.strerror}\n")
        return 1
    try:
        os.execvpe(command[0], command, env)
    except FileNotFoundError:
        sys.stderr.write(f"rlark: {command[0]}: command not found\n")
        return 127
    except OSError as exc:
        sys.stderr.write(f"rlark: cannot run {command[0]}: {exc.strerror}\n")
        return 126
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv))
