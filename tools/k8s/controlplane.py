"""A real Kubernetes control plane on 127.0.0.1 for tests, benchmarks and `make k8s-up`.

It runs the binaries that ``tools/k8s/build.sh`` builds from the Go module proxy: etcd (data on a tmpfs
when ``/dev/shm`` exists), kube-apiserver (generated certificates, RBAC on), kube-controller-manager (the
real StatefulSet, garbage-collector and quota controllers), kube-scheduler, and kwok, which plays the
kubelets: it manages Nodes annotated ``kwok.x-k8s.io/node=fake``, moves Pods through their lifecycle
(``tools/k8s/kwok.yaml``) and serves ``pods/log`` and ``pods/exec`` through the API server from kwok's
``Logs``/``Exec`` objects. Every address is 127.0.0.1: kwok's Nodes report InternalIP 127.0.0.1, so the
API server reaches the simulated kubelet on loopback; Pod IPs come from a CIDR nothing routes to.

Usage::

    cp = ControlPlane.start(bin_dir)   # ~10-20 s
    cp.admin_kubeconfig                # Path of a system:masters kubeconfig
    cp.stop_apiserver(); cp.start_apiserver()   # an outage of one component
    cp.stop()

``make k8s-up``/``make k8s-down`` run :mod:`tools.k8s.session`, which leaves a control plane (and real nodes)
running between commands.

Errors: :class:`ControlPlaneError` when a binary is missing or a component does not become healthy in time
(its log tail is in the message).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import os
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "kubectl")
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
POD_CIDR = "10.254.0.1/16"  # written into Pod status only; nothing is ever sent there
SERVICE_CIDR = "10.253.0.0/16"


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, found or started."""


def versions() -> dict[str, str]:
    """The pinned versions from ``tools/k8s/versions.sh``: ``{"KUBE_VERSION": "v1.35.4", ...}``."""
    out: dict[str, str] = {}
    for line in (HERE / "versions.sh").read_text().splitlines():
        name, sep, value = line.partition("=")
        if sep and name.isupper() and name.endswith("_VERSION"):
            out[name] = value.strip()
    return out


def bin_dir() -> Path:
    """Where build.sh puts (or has put) the binaries of the pinned versions."""
    v = versions()
    cache = os.environ.get("RLARK_K8S_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rlark" / "k8s"
    )
    return Path(cache) / f"kube-{v['KUBE_VERSION']}-etcd-{v['ETCD_VERSION']}-kwok-{v['KWOK_VERSION']}"


def missing_binaries(directory: Path | None = None) -> list[str]:
    d = directory or bin_dir()
    return [b for b in BINARIES if not os.access(d / b, os.X_OK)]


def build(timeout: float = 3000) -> Path:
    """Run build.sh (a no-op when everything is built). Raises ControlPlaneError with the reason."""
    try:
        proc = subprocess.run(
            ["bash", str(HERE / "build.sh")], capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise ControlPlaneError(f"tools/k8s/build.sh did not finish in {timeout:.0f} s") from exc
    if proc.returncode != 0:
        raise ControlPlaneError(f"tools/k8s/build.sh failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- certificates -------------------------------------------------------------------------------------------


def _write_pki(pki: Path) -> None:
    """CA, API server serving cert (127.0.0.1), admin client cert (system:masters), kwok serving cert and the
    ServiceAccount signing key pair, as PEM files in ``pki``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    pki.mkdir(parents=True, exist_ok=True)
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    until = now + dt.timedelta(days=30)

    def key_pem(key) -> bytes:
        return key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def name(cn: str, org: str | None = None) -> x509.Name:
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
        if org:
            attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
        return x509.Name(attrs)

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = name("rlark-test-ca")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(until)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    (pki / "ca.crt").write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    (pki / "ca.key").write_bytes(key_pem(ca_key))

    def leaf(stem: str, cn: str, org: str | None, server: bool) -> None:
        key = ec.generate_private_key(ec.SECP256R1())
        builder = (
            x509.CertificateBuilder()
            .subject_name(name(cn, org))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(until)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
                critical=False,
            )
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                        x509.IPAddress(ipaddress.ip_network(SERVICE_CIDR)[1]),
                        x509.DNSName("localhost"),
                        x509.DNSName("kubernetes"),
                        x509.DNSName("kubernetes.default"),
                        x509.DNSName("kubernetes.default.svc"),
                    ]
                ),
                critical=False,
            )
        cert = builder.sign(ca_key, hashes.SHA256())
        (pki / f"{stem}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        (pki / f"{stem}.key").write_bytes(key_pem(key))

    leaf("apiserver", "kube-apiserver", None, server=True)
    leaf("kwok", "kwok", None, server=True)
    leaf("admin", "rlark-admin", "system:masters", server=False)
    sa = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (pki / "sa.key").write_bytes(key_pem(sa))
    (pki / "sa.pub").write_bytes(
        sa.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )


def _admin_kubeconfig(path: Path, server: str, pki: Path) -> None:
    import base64

    def b64(p: Path) -> str:
        return base64.b64encode(p.read_bytes()).decode()

    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "rlark-test", "cluster": {"server": server, "certificate-authority-data": b64(pki / "ca.crt")}}
        ],
        "users": [
            {
                "name": "rlark-admin",
                "user": {
                    "client-certificate-data": b64(pki / "admin.crt"),
                    "client-key-data": b64(pki / "admin.key"),
                },
            }
        ],
        "contexts": [{"name": "rlark-test", "context": {"cluster": "rlark-test", "user": "rlark-admin"}}],
        "current-context": "rlark-test",
    }
    path.write_text(json.dumps(doc, indent=1))
    path.chmod(0o600)


# --- processes ----------------------------------------------------------------------------------------------


@dataclass
class ControlPlane:
    """A running control plane. ``work`` holds pki/, logs/, etcd data (or a link to it) and kubeconfigs."""

    bins: Path
    work: Path
    etcd_port: int = field(default_factory=free_port)
    etcd_peer_port: int = field(default_factory=free_port)
    api_port: int = field(default_factory=free_port)
    kwok_port: int = field(default_factory=free_port)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)
    pids: dict[str, int] = field(default_factory=dict)
    die_with_parent: bool = False  # tests: a killed pytest must not leave a control plane behind

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.api_port}"

    @property
    def admin_kubeconfig(self) -> Path:
        return self.work / "admin.kubeconfig"

    @property
    def pki(self) -> Path:
        return self.work / "pki"

    @classmethod
    def start(
        cls, bins: Path | None = None, work: Path | None = None, timeout: float = 90, die_with_parent: bool = False
    ) -> ControlPlane:
        """Start every component and wait until the API server is healthy and the default ServiceAccount of
        ``default`` exists (the controller-manager runs). Raises ControlPlaneError."""
        bins = bins or bin_dir()
        missing = missing_binaries(bins)
        if missing:
            raise ControlPlaneError(f"missing binaries in {bins}: {', '.join(missing)} (run tools/k8s/build.sh)")
        work = work or Path(tempfile.mkdtemp(prefix="rlark-k8s-"))
        work.mkdir(parents=True, exist_ok=True)
        (work / "logs").mkdir(exist_ok=True)
        cp = cls(bins=bins, work=work, die_with_parent=die_with_parent)
        _write_pki(cp.pki)
        _admin_kubeconfig(cp.admin_kubeconfig, cp.server, cp.pki)
        try:
            cp._start_etcd(timeout)
            cp._start_apiserver_on_a_free_port(timeout)
            cp._apply_files([HERE / "crd" / f for f in sorted(os.listdir(HERE / "crd"))])
            cp._start("kube-controller-manager", cp._controller_manager_args())
            cp._start("kube-scheduler", cp._scheduler_args())
            cp._start("kwok", cp._kwok_args())
            cp._wait(lambda: cp._default_service_account(), timeout, "the controller-manager (default ServiceAccount)")
        except BaseException:
            cp.stop()
            raise
        return cp

    # components

    def _start(self, name: str, args: list[str]) -> None:
        log = open(self.work / "logs" / f"{name}.log", "ab")  # noqa: SIM115 - the child owns it
        proc = subprocess.Popen(
            [str(self.bins / name), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stopped by PGID, survives `make k8s-up`'s exit
            cwd=self.work,
            preexec_fn=_die_with_parent if self.die_with_parent else None,  # noqa: PLW1509 - only prctl
        )
        log.close()
        self.procs[name] = proc
        self.pids[name] = proc.pid

    def _etcd_dir(self) -> Path:
        shm = Path("/dev/shm")
        if shm.is_dir() and os.access(shm, os.W_OK):
            d = Path(tempfile.mkdtemp(prefix="rlark-etcd-", dir=shm))
            link = self.work / "etcd-data"
            if not link.exists():
                link.symlink_to(d)
            return d
        d = self.work / "etcd-data"
        d.mkdir(exist_ok=True)
        return d

    def _start_etcd(self, timeout: float) -> None:
        peer = f"http://127.0.0.1:{self.etcd_peer_port}"
        client = f"http://127.0.0.1:{self.etcd_port}"
        data = self._etcd_dir()
        data.chmod(0o700)
        self._start(
            "etcd",
            [
                f"--data-dir={data}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                "--listen-metrics-urls=",
                "--unsafe-no-fsync",
                "--quota-backend-bytes=4294967296",
                "--log-level=warn",
            ],
        )
        self._wait(lambda: self._http_ok(f"{client}/health"), timeout, "etcd")

    def _start_apiserver_on_a_free_port(self, timeout: float, attempts: int = 3) -> None:
        """:meth:`start_apiserver`, again on another port when the chosen one was taken between choosing and
        binding (another process of a busy machine; "bind: address already in use"), up to ``attempts`` times."""
        for attempt in range(attempts):
            try:
                self.start_apiserver(timeout)
                return
            except ControlPlaneError as exc:
                if "address already in use" not in str(exc) or attempt == attempts - 1:
                    raise
                self.api_port = free_port()
                _admin_kubeconfig(self.admin_kubeconfig, self.server, self.pki)

    def start_apiserver(self, timeout: float = 90) -> None:
        p = self.pki
        self._start(
            "kube-apiserver",
            [
                f"--etcd-servers=http://127.0.0.1:{self.etcd_port}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.api_port}",
                f"--tls-cert-file={p / 'apiserver.crt'}",
                f"--tls-private-key-file={p / 'apiserver.key'}",
                f"--client-ca-file={p / 'ca.crt'}",
                f"--service-account-key-file={p / 'sa.pub'}",
                f"--service-account-signing-key-file={p / 'sa.key'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--authorization-mode=RBAC",
                "--endpoint-reconciler-type=none",
                f"--kubelet-client-certificate={p / 'admin.crt'}",
                f"--kubelet-client-key={p / 'admin.key'}",
                "--kubelet-preferred-address-types=InternalIP",
                "--allow-privileged=true",
                "--profiling=false",
                "--v=1",
            ],
        )
        self._wait(lambda: self._api_ok("/readyz"), timeout, "kube-apiserver")

    def stop_apiserver(self) -> None:
        """Stop only the API server (an outage the console must survive); start_apiserver() brings it back."""
        self._stop_one("kube-apiserver")

    def _controller_manager_args(self) -> list[str]:
        return [
            f"--kubeconfig={self.admin_kubeconfig}",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--leader-elect=false",
            f"--root-ca-file={self.pki / 'ca.crt'}",
            f"--service-account-private-key-file={self.pki / 'sa.key'}",
            "--use-service-account-credentials=false",
            "--controllers=*,-csrsigning,-csrapproving,-csrcleaner,-nodeipam,-bootstrapsigner,-tokencleaner",
            "--concurrent-statefulset-syncs=10",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "--v=1",
        ]

    def _scheduler_args(self) -> list[str]:
        return [
            f"--kubeconfig={self.admin_kubeconfig}",
            "--bind-address=127.0.0.1",
            "--secure-port=0",
            "--leader-elect=false",
            "--kube-api-qps=200",
            "--kube-api-burst=400",
            "--v=1",
        ]

    def _kwok_args(self) -> list[str]:
        return [
            f"--kubeconfig={self.admin_kubeconfig}",
            f"--config={HERE / 'kwok.yaml'}",
            "--manage-all-nodes=false",
            f"--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake",
            "--node-ip=127.0.0.1",
            f"--node-port={self.kwok_port}",
            f"--server-address=127.0.0.1:{self.kwok_port}",
            f"--tls-cert-file={self.pki / 'kwok.crt'}",
            f"--tls-private-key-file={self.pki / 'kwok.key'}",
            f"--cidr={POD_CIDR}",
        ]

    # health

    def _ssl(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.pki / "ca.crt"))
        ctx.load_cert_chain(str(self.pki / "admin.crt"), str(self.pki / "admin.key"))
        return ctx

    def _api_ok(self, path: str) -> bool:
        try:
            with urllib.request.urlopen(self.server + path, context=self._ssl(), timeout=2) as r:  # noqa: S310
                return r.status == 200
        except OSError:
            return False

    def _http_ok(self, url: str) -> bool:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:  # noqa: S310 - 127.0.0.1 only
                return r.status == 200
        except OSError:
            return False

    def _default_service_account(self) -> bool:
        try:
            with urllib.request.urlopen(  # noqa: S310
                self.server + "/api/v1/namespaces/default/serviceaccounts/default", context=self._ssl(), timeout=2
            ) as r:
                return r.status == 200
        except OSError:
            return False

    def _wait(self, check, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    raise ControlPlaneError(f"{name} exited with {proc.returncode}:\n{self.log_tail(name)}")
            if check():
                return
            time.sleep(0.2)
        raise ControlPlaneError(f"{what} not ready after {timeout:.0f} s:\n{self.log_tail(what.split()[0])}")

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.work / "logs" / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    def _apply_files(self, files: list[Path]) -> None:
        self.kubectl("apply", "--server-side", "--force-conflicts", *sum((["-f", str(f)] for f in files), []))

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 60) -> str:
        """Run the built kubectl as the admin; returns stdout. Raises ControlPlaneError on failure."""
        proc = subprocess.run(
            [str(self.bins / "kubectl"), f"--kubeconfig={self.admin_kubeconfig}", *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0:
            raise ControlPlaneError(f"kubectl {' '.join(args)}: {proc.stderr.strip()}")
        return proc.stdout

    # stop

    def _stop_one(self, name: str, grace: float = 10) -> None:
        pid = self.pids.pop(name, None)
        proc = self.procs.pop(name, None)
        if pid is None:
            return
        _kill_group(pid, grace, proc)

    def stop(self) -> None:
        """Stop every component (process groups this object started), then remove etcd's tmpfs data."""
        for name in ("kwok", "kube-scheduler", "kube-controller-manager", "kube-apiserver", "etcd"):
            self._stop_one(name)
        link = self.work / "etcd-data"
        if link.is_symlink():
            target = link.resolve()
            subprocess.run(["rm", "-rf", str(target)], check=False, timeout=60)

    def state(self) -> dict:
        return {
            "work": str(self.work),
            "bins": str(self.bins),
            "pids": self.pids,
            "server": self.server,
            "kubeconfig": str(self.admin_kubeconfig),
        }


def _die_with_parent() -> None:
    """In the child before exec: SIGKILL me when the process that started me dies (Linux PR_SET_PDEATHSIG)."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG


def _kill_group(pid: int, grace: float, proc: subprocess.Popen | None = None) -> None:
    """SIGTERM the process group ``pid`` leads (started with start_new_session), then SIGKILL after ``grace``."""
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if proc is not None:
            if proc.poll() is not None:
                break
        else:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
        time.sleep(0.1)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    if proc is not None:
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
