"""Start one local Worker (a "Pod") as a process group in its own user+mount+PID+UTS namespace.

``unshare --mount --pid --fork --mount-proc --uts`` gives every Worker what a container gives it on
Kubernetes: mounts seen at their ``mountPath`` (bind mounts), ``/rlark/scripts`` with the wrapper scripts,
a private ``/tmp`` holding Ray's default temp dir ``/tmp/ray`` (short, so Ray's unix-socket paths stay
< 107 chars), its own hostname, a PID namespace in which ``ray stop`` only sees this Worker's processes and
whose teardown kills every process left. The network namespace is the host's: each Ray node gets its own
ports (``RLARK_LOCAL_RAY_START_ARGS``) and stays on 127.0.0.1 (``clusters/scripts/local``).

Unprivileged: when the supervisor runs as root, podinit.sh sets the mounts up as root
and then enters a user namespace in which root maps to the job's subordinate id range
(``ids=(first_host_id, count)``, from ``/etc/subuid``/``/etc/subgid`` via ``newuidmap``/``newgidmap``, see
:mod:`.idmap`), so the container command runs as an unprivileged host uid with no capability over the
mounts. The console's checkout, ``var/``, the local root and every non-traversable ancestor of the Python
it needs (e.g. ``/root``) are covered by a read-only tmpfs whose known entries are bind-mounted with a
root-owned 0700 directory or 0600 file (``permission denied``), with the venv and the base Python bound
back read-only at their own paths (:func:`hide_plan`). A supervisor that is not root maps root to its
own uid (``--map-root-user``), as before.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

SCRIPTS_DIR = Path(__file__).resolve().parent.parent.parent / "scripts"
PODINIT = Path(__file__).resolve().parent / "podinit.sh"
SCRIPTS_MOUNT = "/rlark/scripts"
EXAMPLES_DIR = SCRIPTS_DIR.parent.parent / "examples"
EXAMPLES_MOUNT = "/rlark/examples"
POD_HOME = "/rlark/home"  # HOME of a local Worker (<pod dir>/home)
POD_WORK = "/rlark/work"  # working directory when the container sets no workingDir (<pod dir>/work)
LOCAL_HELPERS = f"{SCRIPTS_MOUNT}/local"
VENV_BIN = str(Path(sys.executable).parent)
SYSTEM_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# The whole environment of everything that runs with host privileges while a Worker starts or an exec enters
# it (nsenter, unshare, podinit.sh, mount): fixed, so nothing the user wrote in ``env`` reaches a privileged
# process. The Worker's own environment is read by envexec.py after the switch to the job's uid.
CLEAN_ENV = {"PATH": SYSTEM_PATH, "LANG": "C.UTF-8"}
ENVEXEC_CODE = (Path(__file__).resolve().parent / "envexec.py").read_text()


@dataclasses.dataclass
class Mount:
    """``kind`` bind|tmpfs; ``source`` a real host path (bind); ``target`` the path the Worker sees."""

    kind: str
    source: str
    target: str
    read_only: bool = False
    options: str = ""


def default_path() -> str:
    """PATH of a local Worker: the ray shim first, then the project's venv, then the system."""
    return f"{LOCAL_HELPERS}:{VENV_BIN}:{SYSTEM_PATH}"


def base_env(pod_name: str, home: str = POD_HOME) -> dict[str, str]:
    """The environment every local Worker starts from (before the Pod's own env)."""
    return {
        "PATH": default_path(),
        "HOME": home,
        "LANG": "C.UTF-8",
        "HOSTNAME": pod_name,
        "PYTHONPATH": LOCAL_HELPERS,
        "PYTHONUNBUFFERED": "1",
        "RLARK_LOCAL_RUNTIME": "1",
        "RLARK_LOCAL_PYTHON": sys.executable,
        "RLARK_LOCAL_NODE_IP": "127.0.0.1",
        "RAY_USAGE_STATS_ENABLED": "0",
        # ray_check.py polls every 2 s instead of upstream's 10 s (the user's env can override it)
        "RLARK_RAY_CHECK_INTERVAL": "2",
        "TERM": "xterm-256color",
    }


def namespace_command(user_ns: bool = True) -> list[str]:
    """The ``unshare`` prefix (PID 1 of the new namespaces is podinit.sh). ``user_ns`` False (the
    supervisor is root and podinit.sh enters the id-mapped user namespace itself) leaves it out."""
    return [
        shutil.which("unshare") or "/usr/bin/unshare",
        *(["--user", "--map-root-user"] if user_ns else []),
        "--mount",
        "--uts",
        "--pid",
        "--fork",
        "--kill-child",
        "--mount-proc",
    ]


def netns_prefix(netns: str | None) -> list[str]:
    """``nsenter --net=<netns>`` (a Worker of an isolated cluster), or nothing."""
    if not netns:
        return []
    return [shutil.which("nsenter") or "/usr/bin/nsenter", f"--net={netns}", "--"]


def env_memfd(env: dict[str, str]) -> int:
    """A ``memfd`` holding ``env`` as NUL-separated ``NAME=VALUE`` entries, positioned at its start, for
    :mod:`.envexec`. The caller passes it to the child (``pass_fds``) and closes it. Raises ValueError for a
    name or value with a NUL byte or a name with ``=``."""
    parts = []
    for name, value in env.items():
        if not name or "=" in name or "\0" in name or "\0" in value:
            raise ValueError(f"invalid environment entry {name!r}")
        parts.append(os.fsencode(name) + b"=" + os.fsencode(value))
    fd = os.memfd_create("rlark-worker-env", os.MFD_CLOEXEC)
    try:
        os.write(fd, b"\0".join(parts))
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


def envexec_argv(fd: int, workdir: str, mode: str, command: list[str]) -> list[str]:
    """The command line that runs :mod:`.envexec` with the console's Python (kept visible in every Worker):
    ``command`` in ``workdir`` with the environment in ``fd``; ``mode`` is ``create`` or ``fallback``."""
    return [sys.executable, "-I", "-S", "-c", ENVEXEC_CODE, str(fd), workdir, mode, *command]


def make_dir_as(path: Path, ids: tuple[int, int] | None, mode: int) -> None:
    """Make the missing directories of ``path`` (absolute, already resolved and checked by the caller): the last
    one owned by host uid/gid ``ids[0]`` (the job's Worker uid) with ``mode``, the ones above it root's, 0711
    (traversable, not listable). Walks from ``/`` one component at a time with ``O_NOFOLLOW``, so a component a
    Worker swapped for a symlink after the check makes it fail instead of creating anything elsewhere. ``ids``
    None (an unprivileged supervisor): a plain ``mkdir -p`` as this process. Raises ValueError with the reason."""
    if ids is None:
        try:
            path.mkdir(parents=True, exist_ok=True, mode=mode)
        except OSError as exc:
            raise ValueError(f"cannot create {path}: {exc.strerror}") from None
        return
    parts = Path(path).parts
    if not parts or parts[0] != "/":
        raise ValueError(f"cannot create {path}: not an absolute path")
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    fd = os.open("/", os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i, name in enumerate(parts[1:], start=1):
            last = i == len(parts) - 1
            try:
                nfd = os.open(name, flags, dir_fd=fd)
            except FileNotFoundError:
                os.mkdir(name, mode if last else 0o711, dir_fd=fd)
                nfd = os.open(name, flags, dir_fd=fd)
                if last:
                    os.fchown(nfd, int(ids[0]), int(ids[0]))
                os.fchmod(nfd, mode if last else 0o711)
            os.close(fd)
            fd = nfd
    except OSError as exc:
        raise ValueError(f"cannot create {path}: {exc.strerror}") from None
    finally:
        os.close(fd)


def write_mounts(path: Path, mounts: list[Mount]) -> None:
    lines = []
    for m in mounts:
        for value in (m.source, m.target, m.options):
            if "\t" in value or "\n" in value:
                raise ValueError(f"invalid mount path {value!r}")
        lines.append("\t".join([m.kind, m.source, m.target, "1" if m.read_only else "0", m.options]))
    path.write_text("\n".join(lines) + "\n")


def standard_mounts(pod_dir: Path, hidden: list[Path] = ()) -> list[Mount]:
    """Mounts every local Worker gets: the wrapper scripts and the project's ``examples/`` (the demo
    workload), read-only at /rlark/scripts and /rlark/examples, and its home and working directories at
    /rlark/home and /rlark/work. (Its private /tmp, where Ray's default temp dir /tmp/ray lives, is set
    up by podinit.sh from ``RLARK_POD_TMP``.)"""
    for sub in ("home", "work"):
        (pod_dir / sub).mkdir(parents=True, exist_ok=True)
    return [
        Mount("bind", str(SCRIPTS_DIR), SCRIPTS_MOUNT, read_only=True),
        Mount("bind", str(EXAMPLES_DIR), EXAMPLES_MOUNT, read_only=True),
        Mount("bind", str(pod_dir / "home"), POD_HOME),
        Mount("bind", str(pod_dir / "work"), POD_WORK),
        *host_tmp_mounts(hidden),
    ]


def keep_paths() -> list[Path]:
    """What a Worker needs from the host, read-only at the same path: the venv (``ray``, the packages)
    and the Python it was made from (``sys.base_prefix``)."""
    out: list[Path] = []
    for path in (Path(sys.prefix), Path(sys.executable).parent, Path(sys.base_prefix)):
        path = path.resolve()
        if not any(k == path or k in path.parents for k in out):
            out = [k for k in out if path not in k.parents] + [path]
    return out


def _inside(path: Path, roots: list[Path]) -> bool:
    return any(r == path or r in path.parents for r in roots)


def host_tmp_mounts(hidden: list[Path] = ()) -> list[Mount]:
    """A venv or Python under the host's /tmp would be hidden by the Worker's private /tmp, leaving the
    Worker without ``python``/``ray``: bind those directories back, read-only, at the same path (those
    inside a hidden root are bound back by :func:`hide_plan` instead). Never the checkout itself."""
    tmp = Path("/tmp")
    return [
        Mount("bind", str(k), str(k), read_only=True)
        for k in keep_paths()
        if tmp in k.parents and not _inside(k, list(hidden))
    ]


def hidden_roots(extra: list[Path | str] = ()) -> list[Path]:
    """Directories no Worker may read: the console's checkout, ``extra`` (``var/``, the local root, the
    database's directory), a checkout holding the venv, and every ancestor of a :func:`keep_paths` entry that
    others cannot traverse (``/root`` for a pyenv Python). Outermost only; never ``/``."""
    candidates = [SCRIPTS_DIR.parent.parent, *map(Path, extra)]
    for keep in keep_paths():
        if (keep.parent / "manage.py").exists():
            candidates.append(keep.parent)
        for anc in keep.parents:
            try:
                if anc != Path("/") and not anc.stat().st_mode & 0o001:
                    candidates.append(anc)
            except OSError:
                continue
    roots: list[Path] = []
    for c in candidates:
        try:
            c = c.resolve()
        except OSError:
            continue
        if len(c.parts) < 2 or not c.is_dir() or _inside(c, roots):
            continue
        roots = [r for r in roots if c not in r.parents] + [c]
    return roots


def hide_plan(roots: list[Path], keep: list[Path] | None = None) -> list[list[str]]:
    """The rows of ``hide.tsv`` read by podinit.sh: ``root PATH`` (a read-only tmpfs covers it),
    ``deny-dir PATH`` / ``deny-file PATH`` (each entry of a root seen now: a 0700 root-owned directory or
    0600 file is bound over it, so reading it fails with EACCES), ``link PATH TARGET`` (a symlink to a kept
    path, e.g. a worktree's ``.venv``) and ``keep PATH`` (bound back read-only at its path)."""
    keep = keep_paths() if keep is None else keep
    rows: list[list[str]] = []
    for root in roots:
        rows.append(["root", str(root)])
        inner = [k for k in keep if root in k.parents]
        try:
            entries = sorted(root.iterdir())
        except OSError:
            entries = []
        for entry in entries:
            if any(k == entry or entry in k.parents for k in inner):
                continue  # recreated by its keep row
            try:
                if entry.is_symlink():
                    target = entry.resolve()
                    if _inside(target, keep):
                        rows.append(["link", str(entry), os.readlink(entry)])
                        continue
                rows.append(["deny-dir" if entry.is_dir() else "deny-file", str(entry)])
            except OSError:
                continue
        rows.extend(["keep", str(k)] for k in inner)
    for row in rows:
        if any("\t" in v or "\n" in v for v in row):
            raise ValueError(f"invalid path {row!r}")
    return rows


def spawn(
    pod_dir: Path,
    command: list[str],
    env: dict[str, str],
    mounts: list[Mount],
    workdir: str = POD_WORK,
    log_path: Path | None = None,
    ids: tuple[int, int] | None = None,
    hidden: list[Path] = (),
    netns: str | None = None,
) -> subprocess.Popen:
    """Start the Worker; stdout+stderr go to ``log_path`` (appended). Returns the ``unshare``
    process, leader of its own process group (``pgid == pid``). ``log_path`` defaults to
    ``<pod_dir>/main.log``; ``workdir`` is a path inside the Worker. ``ids`` = (first host uid/gid,
    count) maps the Worker's root to that range (the caller must be root and own it in /etc/subuid);
    ``hidden`` are the roots of :func:`hide_plan`. ``netns`` (a path under /run/netns) is joined
    first, so every namespace made after it, the id-mapped user namespace included, lives in that network
    namespace without any capability over it. The Worker's home and work directories must already belong to
    ``ids[0]``."""
    log_path = log_path or pod_dir / "main.log"
    pod_dir.mkdir(parents=True, exist_ok=True)
    mounts_file = pod_dir / "mounts.tsv"
    write_mounts(mounts_file, [*standard_mounts(pod_dir, list(hidden)), *mounts])
    hide_file = pod_dir / "hide.tsv"
    hide_file.write_text("".join("\t".join(row) + "\n" for row in hide_plan(list(hidden))))
    pod_tmp = pod_dir / "tmp"
    pod_tmp.mkdir(exist_ok=True)
    pod_tmp.chmod(0o1777)
    env_fd = env_memfd(env)
    private = {
        **CLEAN_ENV,
        "RLARK_POD_MOUNTS": str(mounts_file),
        "RLARK_POD_HIDE": str(hide_file),
        "RLARK_POD_WORKDIR": workdir,
        "RLARK_POD_TMP": str(pod_tmp),
        "RLARK_POD_HOSTNAME": env.get("POD_NAME", ""),
        "RLARK_POD_ENVFD": str(env_fd),
        "RLARK_POD_PYTHON": sys.executable,
        "RLARK_POD_ENVEXEC": ENVEXEC_CODE,
    }
    if ids is not None:
        private["RLARK_POD_IDMAP"] = f"{int(ids[0])},0,{int(ids[1])}"
    log = open(log_path, "ab", buffering=0)  # noqa: SIM115 - handed to the child
    try:
        return subprocess.Popen(
            [*netns_prefix(netns), *namespace_command(user_ns=ids is None), "bash", str(PODINIT), *command],
            env=private,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            close_fds=True,
            pass_fds=(env_fd,),
        )
    finally:
        log.close()
        os.close(env_fd)


def namespace_members(leader_pid: int) -> list[int]:
    """PIDs (host view) of every process in the PID namespace of ``leader_pid``'s forked child,
    plus the leader itself and its process group. Empty when nothing is left."""
    import psutil

    pids: set[int] = set()
    try:
        leader = psutil.Process(leader_pid)
        pids.add(leader_pid)
        children = leader.children()
    except psutil.Error:
        children = []
    ns = None
    for child in children:
        try:
            ns = os.readlink(f"/proc/{child.pid}/ns/pid")
            break
        except OSError:
            continue
    for proc in psutil.process_iter(["pid"]):
        pid = proc.info["pid"]
        try:
            if os.getpgid(pid) == leader_pid:
                pids.add(pid)
                continue
            if ns is not None and os.readlink(f"/proc/{pid}/ns/pid") == ns:
                pids.add(pid)
        except (OSError, ProcessLookupError):
            continue
    return sorted(pids)


def kill_group(pgid: int, grace: float = 10.0, wait_pid: subprocess.Popen | None = None) -> None:
    """SIGTERM the process group ``pgid``, wait up to ``grace`` s, then SIGKILL the group and
    every process of its PID namespace. Never signals anything by name."""
    members = namespace_members(pgid)
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if wait_pid is not None:
            wait_pid.poll()
        if not _any_alive(members):
            return
        time.sleep(0.1)
    for pid in namespace_members(pgid) or members:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if wait_pid is not None:
        try:
            wait_pid.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _any_alive(pids: list[int]) -> bool:
    import psutil

    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                return True
        except psutil.Error:
            continue
    return False
