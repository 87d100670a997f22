"""Images for real test nodes, built on this machine with no network inside any build.

Four images, each a ``docker-archive`` tar in the cache (``~/.cache/rlark/images``, or ``$RLARK_IMAGE_CACHE``)
named by a content hash of its inputs, so an image is rebuilt only when an input changes:

============================  ===============================================================================
``localhost/rlark-base``      Debian bookworm from Debian's packages (``mmdebstrap --variant=minbase``):
                              bash, Python 3.11, pip, iproute2, procps, ca-certificates
``localhost/rlark-pause``     the static pause binary of ``build-node.sh`` (every Pod's sandbox)
``localhost/rlark-worker``    base + the Ray CLI (``ray[default]`` pinned as in requirements.lock): a stand-in
                              for an RLinf image
``localhost/rlark-console-netagent``  the ``netagent`` target of the repository's ``Dockerfile`` with
                              ``BASE`` = base + the agent's pinned wheels
============================  ===============================================================================

Wheels are made on the host (``pip wheel`` with requirements.lock as constraints) into the build context and
installed with ``pip install --no-index`` (``tools/k8s/offline-pip.Dockerfile``); ``podman build --network=none
--pull=never`` so nothing inside a build can reach the network. podman runs with its own configuration and
storage in the cache (runc, cgroupfs, no default network) and leaves no containers behind.

``python -m tools.k8s.images`` (``make images``) builds what is missing and prints one ``name archive`` line
per image. Errors: :class:`ImageError` with the failing command's output tail.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
BASE_PACKAGES = ("python3", "python3-pip", "python-is-python3", "iproute2", "ca-certificates", "procps")
WORKER_REQUIREMENTS = ("ray[default]",)
NETAGENT_REQUIREMENTS = ("asyncssh", "cryptography", "cffi", "pycparser", "typing_extensions")
NETAGENT_SOURCES = ("Dockerfile", "requirements.lock", "domains/__init__.py", "domains/netagent.py")


class ImageError(RuntimeError):
    """An image could not be built, saved or found."""


@dataclass(frozen=True)
class Image:
    """A built image: its reference (``localhost/<name>:<hash12>``) and its docker-archive tar."""

    name: str
    ref: str
    archive: Path


def cache_dir() -> Path:
    d = os.environ.get("RLARK_IMAGE_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rlark" / "images"
    )
    return Path(d)


def _digest(*parts: bytes | str) -> str:
    h = hashlib.sha256()
    for p in parts:
        h.update(p.encode() if isinstance(p, str) else p)
        h.update(b"\0")
    return h.hexdigest()[:16]


def pinned(names: tuple[str, ...]) -> list[str]:
    """``name==version`` lines for ``names`` (extras kept) from requirements.lock. Raises ImageError if one is
    not pinned there."""
    lock = {}
    for line in (ROOT / "requirements.lock").read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.-]+)==([^\s;#]+)", line)
        if m:
            lock[m.group(1).lower().replace("_", "-")] = m.group(2)
    out = []
    for name in names:
        bare = name.split("[")[0].lower().replace("_", "-")
        if bare not in lock:
            raise ImageError(f"{bare} is not pinned in requirements.lock")
        out.append(f"{name}=={lock[bare]}")
    return out


class Podman:
    """podman with this module's own configuration and storage (never the machine's defaults)."""

    def __init__(self, root: Path) -> None:
        self.root = root / "podman"
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "containers.conf").write_text(
            '[containers]\nnetns = "none"\ndefault_ulimits = []\n'
            '[engine]\nruntime = "runc"\ncgroup_manager = "cgroupfs"\nevents_logger = "file"\n'
            '[network]\ndefault_network = "none"\n'
        )
        (self.root / "storage.conf").write_text(
            f'[storage]\ndriver = "overlay"\ngraphroot = "{self.root / "storage"}"\n'
            f'runroot = "/run/rlark-images/podman"\n'
        )

    def __call__(self, *args: str, timeout: float = 1800, cwd: Path | None = None) -> str:
        env = {
            **os.environ,
            "CONTAINERS_CONF": str(self.root / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(self.root / "storage.conf"),
        }
        proc = subprocess.run(
            ["podman", *args], capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd, check=False
        )
        if proc.returncode != 0:
            raise ImageError(f"podman {' '.join(args[:3])}…: {(proc.stderr or proc.stdout).strip()[-3000:]}")
        return proc.stdout

    def has(self, ref: str) -> bool:
        try:
            self("image", "exists", ref, timeout=60)
        except ImageError:
            return False
        return True

    def save(self, ref: str, archive: Path) -> None:
        tmp = archive.with_suffix(".tmp")
        tmp.unlink(missing_ok=True)
        self("save", "--format", "docker-archive", "-o", str(tmp), ref, timeout=900)
        tmp.rename(archive)

    def load(self, archive: Path, ref: str) -> None:
        """Make ``ref`` available to builds (from its archive when the storage was emptied)."""
        if not self.has(ref):
            self("load", "-i", str(archive), timeout=900)


def _log(msg: str) -> None:
    print(f"tools/k8s/images: {msg}", file=sys.stderr, flush=True)


def build_base(podman: Podman, root: Path) -> Image:
    """Debian from Debian's packages (mmdebstrap on the host, then ``podman import``)."""
    h = _digest("base", SUITE, MIRROR, *BASE_PACKAGES)
    ref, archive = f"localhost/rlark-base:{h}", root / f"rlark-base-{h}.tar"
    if archive.exists():
        podman.load(archive, ref)
        return Image("rlark-base", ref, archive)
    if not shutil.which("mmdebstrap"):
        raise ImageError("mmdebstrap is not installed (Debian package mmdebstrap)")
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="rlark-base-", dir=root) as tmp:
        rootfs = Path(tmp) / "rootfs.tar"
        proc = subprocess.run(
            ["mmdebstrap", "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", SUITE, str(rootfs), MIRROR],
            capture_output=True,
            text=True,
            timeout=1800,
            check=False,
        )
        if proc.returncode != 0:
            raise ImageError(f"mmdebstrap: {proc.stderr.strip()[-3000:]}")
        podman("import", "--change", 'CMD ["bash"]', str(rootfs), ref, timeout=600)
    podman.save(ref, archive)
    _log(f"base built in {time.monotonic() - start:.0f} s")
    return Image("rlark-base", ref, archive)


def build_pause(podman: Podman, root: Path, pause_bin: Path) -> Image:
    """A one-file image holding ``/pause`` (the static binary of build-node.sh)."""
    data = pause_bin.read_bytes()
    h = _digest("pause", data)
    ref, archive = f"localhost/rlark-pause:{h}", root / f"rlark-pause-{h}.tar"
    if not archive.exists():
        with tempfile.TemporaryDirectory(prefix="rlark-pause-", dir=root) as tmp:
            shutil.copy2(pause_bin, Path(tmp) / "pause")
            tar = Path(tmp) / "pause.tar"
            subprocess.run(["tar", "-C", tmp, "-cf", str(tar), "pause"], check=True, timeout=60)
            podman("import", "--change", 'ENTRYPOINT ["/pause"]', str(tar), ref, timeout=300)
            podman("tag", ref, "localhost/rlark-pause:1", timeout=60)
        tmp_archive = archive.with_suffix(".tmp")
        podman("save", "--format", "docker-archive", "-o", str(tmp_archive), ref, "localhost/rlark-pause:1")
        tmp_archive.rename(archive)
    return Image("rlark-pause", ref, archive)


def _wheels(requirements: list[str], dest: Path) -> None:
    """``pip wheel`` on the host (the console's venv pip) with requirements.lock as constraints."""
    pip = [sys.executable, "-m", "pip"]
    proc = subprocess.run(
        [*pip, "wheel", "-q", "--wheel-dir", str(dest), "-c", str(ROOT / "requirements.lock"), *requirements],
        capture_output=True,
        text=True,
        timeout=1800,
        check=False,
    )
    if proc.returncode != 0:
        raise ImageError(f"pip wheel {' '.join(requirements)}: {proc.stderr.strip()[-3000:]}")


def build_offline_pip(podman: Podman, root: Path, name: str, base: Image, requirements: list[str]) -> Image:
    """``base`` + ``requirements`` installed from host-made wheels (offline-pip.Dockerfile)."""
    dockerfile = (HERE / "offline-pip.Dockerfile").read_text()
    h = _digest(name, base.ref, dockerfile, *requirements)
    ref, archive = f"localhost/{name}:{h}", root / f"{name}-{h}.tar"
    if archive.exists():
        podman.load(archive, ref)
        return Image(name, ref, archive)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"{name}-", dir=root) as tmp:
        ctx = Path(tmp)
        _wheels(requirements, ctx / "wheels")
        (ctx / "requirements.txt").write_text("\n".join(requirements) + "\n")
        (ctx / "Dockerfile").write_text(dockerfile)
        podman(
            "build", "--pull=never", "--network=none", "--build-arg", f"BASE={base.ref}", "-t", ref, str(ctx),
        )  # fmt: skip
    podman.save(ref, archive)
    _log(f"{name} built in {time.monotonic() - start:.0f} s")
    return Image(name, ref, archive)


def build_netagent(podman: Podman, root: Path, agent_base: Image) -> Image:
    """The repository Dockerfile's ``netagent`` target with ``BASE`` = ``agent_base`` (its wheels installed)."""
    sources = [(ROOT / s).read_bytes() for s in NETAGENT_SOURCES]
    h = _digest("netagent", agent_base.ref, *sources)
    ref, archive = f"localhost/rlark-console-netagent:{h}", root / f"rlark-console-netagent-{h}.tar"
    if archive.exists():
        return Image("rlark-console-netagent", ref, archive)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="netagent-", dir=root) as tmp:
        ctx = Path(tmp)
        for s in NETAGENT_SOURCES:
            (ctx / s).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / s, ctx / s)
        podman(
            "build", "--pull=never", "--network=none", "--target", "netagent",
            "--build-arg", f"BASE={agent_base.ref}", "-t", ref, str(ctx),
        )  # fmt: skip
    podman.save(ref, archive)
    _log(f"rlark-console-netagent built in {time.monotonic() - start:.0f} s")
    return Image("rlark-console-netagent", ref, archive)


def build_all(pause_bin: Path | None = None) -> dict[str, Image]:
    """Build (or find) every image; ``{name: Image}`` with names ``rlark-pause``, ``rlark-worker``,
    ``rlark-console-netagent`` (and ``rlark-base``). ``pause_bin`` defaults to build-node.sh's output."""
    from tools.k8s.nodes import node_bin_dir

    root = cache_dir()
    root.mkdir(parents=True, exist_ok=True)
    podman = Podman(root)
    base = build_base(podman, root)
    pause = build_pause(podman, root, pause_bin or node_bin_dir() / "pause")
    worker = build_offline_pip(podman, root, "rlark-worker", base, pinned(WORKER_REQUIREMENTS))
    agent_base = build_offline_pip(podman, root, "rlark-netagent-base", base, pinned(NETAGENT_REQUIREMENTS))
    netagent = build_netagent(podman, root, agent_base)
    return {i.name: i for i in (base, pause, worker, netagent)}


def node_images(images: dict[str, Image]) -> list[Path]:
    """The archives a node imports, the pause image first."""
    return [images[n].archive for n in ("rlark-pause", "rlark-worker", "rlark-console-netagent")]


if __name__ == "__main__":
    try:
        built = build_all()
    except ImageError as exc:
        print(exc, file=sys.stderr)
        sys.exit(1)
    for image in built.values():
        print(image.ref, image.archive)
