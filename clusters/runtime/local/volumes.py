"""A local Worker's files: its Pod directory and its volumes as :class:`launcher.Mount` s.

Directories made here belong to the job's Worker uid (``ids``, :mod:`.id_slots`): the Pod's home and work
directories, emptyDirs, ConfigMap/Secret files, claims and storage (their top level). A volume the runtime manages
never leads out of ``<root>`` (through a symlink a Worker left); a hostPath is refused when it is, or contains,
the console's own files (``clusters.host_paths.check_protected``; the host-path area ``<root>/host-paths`` is
allowed). Errors: ValueError with the volume's name (the Pod's CreateContainerError).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusters import host_paths
from clusters.runtime.local import launcher, scheduling
from clusters.runtime.local.id_slots import own

SCRIPTS_VOLUME = "rlark-scripts"
PROFILE = (
    "# RLark local runtime: keep the Worker's PATH in login shells (/etc/profile resets it)\n"
    'if [ -n "$RLARK_POD_PATH" ]; then export PATH="$RLARK_POD_PATH"; fi\n'
    '[ -f "$HOME/.bashrc" ] && . "$HOME/.bashrc"\n'
)


def prepare_pod_dir(pdir: Path, ids: tuple[int, int] | None) -> None:
    """``<pod dir>`` (0700) with ``home/`` and ``work/`` (the Worker's /rlark/home and /rlark/work) and a
    ``home/.bash_profile`` that keeps the Worker's PATH in login shells, all the Worker's."""
    home = pdir / "home"
    work = pdir / "work"
    for d in (home, work):
        d.mkdir(parents=True, exist_ok=True)
    pdir.chmod(0o700)
    profile = home / ".bash_profile"
    profile.unlink(missing_ok=True)  # never write through a symlink the Worker left
    profile.write_text(PROFILE)
    for path in (home, work, profile):
        own(path, ids, 0o700 if path.is_dir() else 0o644)


def private_tmpfs(mounts: list[launcher.Mount], ids: tuple[int, int] | None) -> None:
    """An unprivileged Worker (``ids``) gets its own ``/dev/shm`` and ``/var/tmp`` (tmpfs) where its volumes
    put nothing there: the host's other world-writable places are not shared between jobs either."""
    if ids is None:
        return
    taken = {m.target.rstrip("/") for m in mounts}
    for target in ("/dev/shm", "/var/tmp"):
        if target not in taken:
            mounts.append(launcher.Mount("tmpfs", "tmpfs", target, options="size=50%,mode=1777"))


def _files_of(obj: dict[str, Any], is_cm: bool) -> dict[str, Any]:
    """The files of a ConfigMap (``data``) or a Secret (``data`` base64-decoded, then ``stringData``)."""
    if is_cm:
        return dict(obj.get("data") or {})
    files = {k: base64.b64decode(v).decode("utf-8", "replace") for k, v in (obj.get("data") or {}).items()}
    files.update(obj.get("stringData") or {})
    return files


@dataclass
class Volumes:
    """The volumes of the Workers of the supervisor with state directory ``root``; ``hidden``: the console's own
    files, never bound into a Worker (``launcher.hidden_roots``)."""

    root: Path
    hidden: list[Path]

    @property
    def host_path_area(self) -> str:
        """``<root>/host-paths``: the one place inside the console's state a hostPath may name."""
        return host_paths.host_path_area(str(self.root))

    def check_source(self, source: Path, host_path: bool, name: str) -> Path:
        """The real path to bind for a volume. Raises ValueError (the Pod's CreateContainerError) when a
        volume the runtime manages leads out of its storage through a symlink, or a hostPath is inside,
        or contains, the console's own files (:attr:`hidden`)."""
        real = source.resolve()
        if host_path:  # the same rule as before creation (clusters.host_paths): the host-path area is allowed
            try:
                host_paths.check_protected(str(real), map(str, self.hidden), [self.host_path_area])
            except host_paths.HostPathRefused as exc:
                raise ValueError(f"volume {name}: hostPath {source} is refused ({exc.code})") from None
        elif self.root.resolve() not in real.parents:
            raise ValueError(f"volume {name}: {source} leads out of the local runtime's storage")
        return real

    def host_path(self, host_path: dict[str, Any], name: str, ids: tuple[int, int] | None) -> Path:
        """The checked real path of a hostPath volume. Checked first (``clusters.host_paths.check_protected``:
        no system directory, nothing of the console's but the host-path area ``<root>/host-paths``), then, for
        ``DirectoryOrCreate``, a missing directory is made for the job's uid (``ids``), mode 0750, without
        following a symlink on the way (``launcher.make_dir_as``). Raises ValueError (the Pod's
        CreateContainerError): a refused path creates nothing."""
        path = str(host_path.get("path") or "")
        try:
            real = Path(
                host_paths.check_protected(path, map(str, self.hidden), [host_paths.host_path_area(str(self.root))])
            )
        except host_paths.HostPathRefused as exc:
            raise ValueError(f"volume {name}: hostPath {path} is refused ({exc.code})") from None
        if host_path.get("type") in (None, "", "DirectoryOrCreate") and not real.exists():
            launcher.make_dir_as(real, ids, 0o750)
        return real

    def claim_dir(self, cluster: str, pvc: dict[str, Any]) -> Path:
        """``<root>/storage/<cluster>/<storage class or "default">/<claim name>``: a PersistentVolumeClaim's files."""
        spec = pvc.get("spec") or {}
        meta = pvc.get("metadata") or {}
        klass = spec.get("storageClassName") or (meta.get("annotations") or {}).get("rlark.io/storage-class")
        return self.root / "storage" / cluster / (klass or "default") / meta.get("name", "claim")

    def mounts(
        self,
        t: dict[str, Any],
        pod: dict[str, Any],
        spec: dict[str, Any],
        main: dict[str, Any],
        pdir: Path,
        ids: tuple[int, int] | None = None,
    ) -> tuple[list[launcher.Mount], str | None]:
        """The Pod's volumes as launcher Mounts (+ its /dev/shm size). Directories made here belong to
        the job's Worker uid (``ids``): emptyDirs, ConfigMap/Secret files, claims and storage (their top
        level); a hostPath directory the runtime creates is 1777 (several jobs may share it, as
        ``/tmp/rlark-demo-output`` of the demo), an existing one is used as it is."""
        volumes = {v.get("name"): v for v in spec.get("volumes") or []}
        objects = {(o.get("kind"), (o.get("metadata") or {}).get("name")): o for o in t.get("extra_objects") or []}
        mounts: list[launcher.Mount] = []
        shm = None
        for vm in main.get("volumeMounts") or []:
            target = vm.get("mountPath") or ""
            vol = volumes.get(vm.get("name")) or {}
            if vm.get("name") == SCRIPTS_VOLUME or target == launcher.SCRIPTS_MOUNT or not target.startswith("/"):
                continue
            if target.rstrip("/") == "":
                raise ValueError("a volume cannot be mounted at /")
            kind, source, options, size = self._source(vm, vol, objects, pod, pdir, ids)
            if size is not None and target.rstrip("/") == "/dev/shm":
                shm = size
            if vm.get("subPath") and kind == "bind":
                source = self._sub_path(source, vm, "hostPath" in vol, ids)
            if kind == "bind":
                source = self.check_source(source, "hostPath" in vol, vm.get("name", ""))
            mounts.append(launcher.Mount(kind, str(source), target, bool(vm.get("readOnly")), options))
        # parents before children (as the kubelet does), so /a/b is not hidden by a later mount at /a
        mounts.sort(key=lambda m: len(Path(m.target).parts))
        return mounts, shm

    def _source(
        self,
        vm: dict[str, Any],
        vol: dict[str, Any],
        objects: dict[tuple[Any, Any], dict[str, Any]],
        pod: dict[str, Any],
        pdir: Path,
        ids: tuple[int, int] | None,
    ) -> tuple[str, Path, str, str | None]:
        """``(kind, source, options, memory size)`` of the volume ``vol`` that ``vm`` mounts: ``bind`` of a
        directory made for the Worker (hostPath, claim, emptyDir, ConfigMap/Secret files, storage), or ``tmpfs``
        for a memory emptyDir (its size as written, "" for none; None for every other kind)."""
        if "hostPath" in vol:
            return "bind", self.host_path(vol["hostPath"], vm.get("name", ""), ids), "", None
        if "persistentVolumeClaim" in vol:
            claim = vol["persistentVolumeClaim"].get("claimName")
            pvc = objects.get(("PersistentVolumeClaim", claim)) or {"metadata": {"name": claim}}
            return "bind", self._made(self.claim_dir(pod["cluster"], pvc), ids), "", None
        if "emptyDir" in vol:
            ed = vol["emptyDir"] or {}
            if ed.get("medium") == "Memory":
                size = ed.get("sizeLimit")
                options = f"size={int(scheduling.parse_quantity(size))}" if size else "size=50%"
                return "tmpfs", Path("tmpfs"), options, str(size or "")
            return "bind", self._made(pdir / "volumes" / vm["name"], ids), "", None
        if "configMap" in vol or "secret" in vol:
            return "bind", self._config_files(vm, vol, objects, pdir, ids), "", None
        # csi / object storage and anything else: a per-cluster storage directory
        driver = (vol.get("csi") or {}).get("driver") or "volumes"
        source = self.root / "storage" / pod["cluster"] / driver / (vm.get("name") or "volume")
        return "bind", self._made(source, ids), "", None

    @staticmethod
    def _made(source: Path, ids: tuple[int, int] | None) -> Path:
        """``source``, made when missing and given to the Worker (0700)."""
        source.mkdir(parents=True, exist_ok=True)
        own(source, ids)
        return source

    @staticmethod
    def _config_files(
        vm: dict[str, Any],
        vol: dict[str, Any],
        objects: dict[tuple[Any, Any], dict[str, Any]],
        pdir: Path,
        ids: tuple[int, int] | None,
    ) -> Path:
        """``<pod dir>/volumes/<name>`` (0755) with the files of the ConfigMap (0644) or Secret (0600) the volume
        names, written anew (never through a symlink the Worker left)."""
        is_cm = "configMap" in vol
        ref = vol["configMap"].get("name") if is_cm else vol["secret"].get("secretName")
        obj = objects.get(("ConfigMap" if is_cm else "Secret", ref)) or {}
        source = pdir / "volumes" / vm["name"]
        source.mkdir(parents=True, exist_ok=True)
        own(source, ids, 0o755)
        for fname, text in _files_of(obj, is_cm).items():
            fpath = source / fname
            if fpath.is_symlink():  # left by the Worker: never write through it
                fpath.unlink()
            fpath.write_text(str(text))
            own(fpath, ids, 0o644 if is_cm else 0o600)
        return source

    def _sub_path(self, source: Path, vm: dict[str, Any], host_path: bool, ids: tuple[int, int] | None) -> Path:
        """``subPath`` below the volume's ``source``, checked (also through symlinks its Workers may have left
        there) and made for the job (0750) when missing. Raises ValueError when it leads out."""
        try:  # below the volume, also through symlinks its Workers may have left there
            source = Path(host_paths.sub_path_within(str(source), str(vm["subPath"])))
        except host_paths.HostPathRefused:
            raise ValueError(f"volume {vm.get('name', '')}: subPath {vm['subPath']!r} is refused") from None
        self.check_source(source, host_path, vm.get("name", ""))
        if not source.exists():  # the job's, 0750, made without following a symlink on the way
            launcher.make_dir_as(source, ids, 0o750)
        return source
