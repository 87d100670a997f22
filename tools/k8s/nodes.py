"""Real nodes for a :class:`~tools.k8s.controlplane.ControlPlane`: a kubelet and a containerd per Node, Pods as
real runc containers on a private bridge, and CoreDNS for the cluster's DNS names.

What runs, per :class:`RealNodes` (one control plane; ``count`` Nodes; network ``index``)::

    bridge rlkn<index>, 10.219.<64+index>.0/24, guarded   (tools/k8s/hostnet.py)
    coredns       on <.1>:53, kubernetes plugin only (headless Services, Pods); nothing is forwarded
    node-<i>:     containerd (Debian's, runc, CNI plugins from /usr/lib/cni; own root, state and socket)
                  kubelet v<KUBE_VERSION> (cgroupfs, cgroup root /rlark-<bridge>-<node>; node IP <.2+i>)

The console's Workers need one Node per Ray node of a Task (required anti-affinity on the hostname), so the
demo job (Header x1, rollout x2) needs ``count >= 2``. Node names are ``<prefix>-<i>``; every Node gets the
labels ``rlark.io/node-category=cpu`` and ``type=real``.

Images come from archives (``docker-archive`` tars, ``tools/k8s/images.py``) imported into each node's containerd
under the ``k8s.io`` namespace; Pods must use ``imagePullPolicy: IfNotPresent``/``Never`` (a tag, not ``latest``).

:meth:`RealNodes.stop` removes what the nodes made: it force-deletes their Pods, waits for the kubelets to stop
the sandboxes (network namespaces, veths), stops the kubelets, deletes what is left in containerd, stops
containerd and its shims (by PID: those whose command line names this node's socket), unmounts everything under
the nodes' directories, removes their cgroups, the bridge and the guard, the kubelet's ``KUBE-*`` chains and
restores the kernel settings the kubelet changed.

Errors: :class:`NodeError` (a subclass of ``ControlPlaneError``) when a binary is missing or a node does not
become Ready in time (with the log tail).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from tools.k8s.controlplane import (
    HERE,
    ControlPlane,
    ControlPlaneError,
    _die_with_parent,
    _kill_group,
    free_port,
    versions,
)
from tools.k8s.hostnet import (
    HostNetError,
    PodNetwork,
    claim_network,
    read_sysctls,
    remove_kube_chains,
    restore_sysctls,
)

NODE_BINARIES = ("kubelet", "coredns", "pause")
HOST_BINARIES = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "ip", "iptables")
CNI_DIR = Path("/usr/lib/cni")
PAUSE_IMAGE = "localhost/rlark-pause:1"
STATE_ROOT = Path("/var/lib/rlark-nodes")
RUN_ROOT = Path("/run/rlark-nodes")
CGROUP_ROOT = Path("/sys/fs/cgroup")
# The name under which a Pod reaches the console on the host: every cluster's CoreDNS answers it with its own
# bridge address (split horizon, as an edge cluster and a cloud cluster reach one console by different routes).
CONSOLE_NAME = "console.rlark.test"
# Cluster names and CONSOLE_NAME only; any other name gets NXDOMAIN from the second block (no forward plugin is built).
COREFILE = """cluster.local:53 {{
  bind {gw}
  errors
  ready 127.0.0.1:{ready}
  kubernetes cluster.local {{
    kubeconfig {kubeconfig} rlark-test
    pods insecure
    ttl 5
  }}
}}
.:53 {{
  bind {gw}
  errors
  hosts {{
    {gw} {console}
  }}
}}
"""


class NodeError(ControlPlaneError):
    """A real node could not be started."""


def node_bin_dir() -> Path:
    """Where ``build-node.sh`` puts the kubelet, CoreDNS and pause of the pinned versions."""
    v = versions()
    cache = os.environ.get("RLARK_K8S_CACHE") or str(
        Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rlark" / "k8s"
    )
    return Path(cache) / f"node-kube-{v['KUBE_VERSION']}-coredns-{v['COREDNS_VERSION']}"


def missing_node_prerequisites(directory: Path | None = None) -> list[str]:
    """What a real node needs and this machine lacks: built binaries, Debian's tools, root, the bridge plugin."""
    d = directory or node_bin_dir()
    out = [f"{b} (tools/k8s/build-node.sh)" for b in NODE_BINARIES if not os.access(d / b, os.X_OK)]
    out += [f"{b} (Debian package)" for b in HOST_BINARIES if not shutil.which(b)]
    if not (CNI_DIR / "bridge").exists() or not (CNI_DIR / "host-local").exists():
        out.append("CNI plugins in /usr/lib/cni (Debian containernetworking-plugins)")
    if os.geteuid() != 0:
        out.append("root")
    return out


def build_node_binaries(timeout: float = 3000) -> Path:
    """Run build-node.sh (a no-op when built). Raises NodeError with the reason."""
    try:
        proc = subprocess.run(
            ["bash", str(HERE / "build-node.sh")], capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise NodeError(f"tools/k8s/build-node.sh did not finish in {timeout:.0f} s") from exc
    if proc.returncode != 0:
        raise NodeError(f"tools/k8s/build-node.sh failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    return Path(proc.stdout.strip().splitlines()[-1])


def _client_cert(cp: ControlPlane, stem: str, cn: str, org: str) -> tuple[Path, Path]:
    """A client certificate signed by the control plane's CA: (cert path, key path) in ``cp.pki``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    ca_key = serialization.load_pem_private_key((cp.pki / "ca.key").read_bytes(), None)
    ca = x509.load_pem_x509_certificate((cp.pki / "ca.crt").read_bytes())
    key = ec.generate_private_key(ec.SECP256R1())
    now = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    subject = x509.Name(
        [x509.NameAttribute(NameOID.COMMON_NAME, cn), x509.NameAttribute(NameOID.ORGANIZATION_NAME, org)]
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=30))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    crt, pem = cp.pki / f"{stem}.crt", cp.pki / f"{stem}.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    pem.chmod(0o600)
    return crt, pem


def _kubeconfig(cp: ControlPlane, path: Path, crt: Path, key: Path) -> None:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "rlark-test", "cluster": {"server": cp.server, "certificate-authority": str(cp.pki / "ca.crt")}}
        ],
        "users": [{"name": "node", "user": {"client-certificate": str(crt), "client-key": str(key)}}],
        "contexts": [{"name": "rlark-test", "context": {"cluster": "rlark-test", "user": "node"}}],
        "current-context": "rlark-test",
    }
    path.write_text(json.dumps(doc, indent=1))
    path.chmod(0o600)


@dataclass
class RealNode:
    """One Node: its containerd and kubelet (process-group leaders this object started) and its directories."""

    name: str
    ip: str
    state: Path  # persistent: containerd root, kubelet root, IPAM data
    run_dir: Path  # containerd state and socket
    pids: dict[str, int] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen] = field(default_factory=dict)

    @property
    def socket(self) -> Path:
        return self.run_dir / "containerd.sock"

    @property
    def cgroup(self) -> str:
        return f"/rlark-{self.state.name}"  # <bridge>-<name>: unique across control planes on one machine

    def ctr(self, *args: str, timeout: float = 120, check: bool = True) -> str:
        """``ctr -n k8s.io`` against this node's containerd; returns stdout. Raises NodeError when ``check``."""
        proc = subprocess.run(
            ["ctr", "--address", str(self.socket), "-n", "k8s.io", *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and proc.returncode != 0:
            raise NodeError(f"ctr {' '.join(args)} on {self.name}: {proc.stderr.strip()}")
        return proc.stdout

    def containers(self) -> list[str]:
        """IDs of every container (sandboxes included) in this node's containerd."""
        return self.ctr("containers", "ls", "-q", timeout=30).split()

    def running_tasks(self) -> list[str]:
        """IDs of the containers whose task (process) is RUNNING."""
        out = self.ctr("tasks", "ls", timeout=30)
        return [line.split()[0] for line in out.splitlines()[1:] if line.split()[-1:] == ["RUNNING"]]

    def to_state(self) -> dict:
        return {"name": self.name, "ip": self.ip, "state": str(self.state), "run": str(self.run_dir), "pids": self.pids}

    @classmethod
    def from_state(cls, d: dict) -> RealNode:
        return cls(name=d["name"], ip=d["ip"], state=Path(d["state"]), run_dir=Path(d["run"]), pids=dict(d["pids"]))


@dataclass
class RealNodes:
    """``count`` real Nodes of one control plane on network ``index`` (see the module docstring)."""

    cp: ControlPlane
    count: int = 2
    index: int = 0
    prefix: str = "real"
    bins: Path = field(default_factory=node_bin_dir)
    die_with_parent: bool = False
    nodes: list[RealNode] = field(default_factory=list)
    dns_pid: int | None = None
    dns_proc: subprocess.Popen | None = None
    sysctls: dict[str, str] = field(default_factory=dict)

    @property
    def network(self) -> PodNetwork:
        return PodNetwork(self.index)

    @property
    def names(self) -> list[str]:
        return [f"{self.prefix}-{i}" for i in range(self.count)]

    @property
    def log_dir(self) -> Path:
        return self.cp.work / "logs"

    # --- start ----------------------------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        cp: ControlPlane,
        images: list[Path],
        count: int = 2,
        index: int | None = None,
        prefix: str = "real",
        timeout: float = 120,
        die_with_parent: bool = False,
    ) -> RealNodes:
        """Start the network (``index``; None: the first one free, see :func:`claim_network`), CoreDNS and ``count``
        nodes; import ``images`` (docker-archive tars, the pause image first) into each; wait until every Node is
        Ready. On any error everything started is stopped again."""
        missing = missing_node_prerequisites()
        if missing:
            raise NodeError(f"real nodes need: {', '.join(missing)}")
        if index is None:  # the first free network, claimed by creating its bridge
            try:
                index = claim_network().index
            except HostNetError as exc:
                raise NodeError(str(exc)) from None
        rn = cls(cp=cp, count=count, index=index, prefix=prefix, die_with_parent=die_with_parent)
        rn.sysctls = read_sysctls()
        try:
            rn.network.up(count)
            cp.kubectl("apply", "-f", "-", input=_node_rbac())
            rn._start_coredns()
            for i, name in enumerate(rn.names):
                node = RealNode(
                    name=name,
                    ip=rn.network.node_ip(i),
                    state=STATE_ROOT / f"{rn.network.bridge}-{name}",
                    run_dir=RUN_ROOT / f"{rn.network.bridge}-{name}",
                )
                rn.nodes.append(node)
                rn._start_containerd(node, i)
            for node in rn.nodes:
                rn._wait(lambda n=node: n.socket.exists() and _ok(n.ctr("version", check=False)), timeout, node)
                for archive in images:
                    node.ctr("images", "import", "--no-unpack", str(archive), timeout=600)
                rn._start_kubelet(node)
            rn._wait_ready(timeout)
        except BaseException:
            rn.stop()
            raise
        return rn

    def _spawn(self, name: str, args: list[str], log: Path) -> subprocess.Popen:
        fh = open(log, "ab")  # noqa: SIM115 - the child owns it
        proc = subprocess.Popen(
            args,
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent if self.die_with_parent else None,  # noqa: PLW1509 - only prctl
        )
        fh.close()
        return proc

    def _start_coredns(self) -> None:
        d = self.cp.work / f"coredns-{self.network.bridge}"
        d.mkdir(parents=True, exist_ok=True)
        kubeconfig = d / "kubeconfig"
        crt, key = _client_cert(self.cp, f"coredns-{self.network.bridge}", "rlark-coredns", "system:masters")
        _kubeconfig(self.cp, kubeconfig, crt, key)
        ready = free_port()
        gw = self.network.gateway
        (d / "Corefile").write_text(COREFILE.format(gw=gw, ready=ready, kubeconfig=kubeconfig, console=CONSOLE_NAME))
        self.dns_proc = self._spawn(
            "coredns", [str(self.bins / "coredns"), "-conf", str(d / "Corefile")], self.log_dir / f"coredns-{gw}.log"
        )
        self.dns_pid = self.dns_proc.pid
        deadline = time.monotonic() + 60
        while not self.cp._http_ok(f"http://127.0.0.1:{ready}/ready"):
            if self.dns_proc.poll() is not None or time.monotonic() > deadline:
                raise NodeError(f"CoreDNS did not become ready:\n{_tail(self.log_dir / f'coredns-{gw}.log')}")
            time.sleep(0.2)

    def _start_containerd(self, node: RealNode, i: int) -> None:
        for d in (node.state, node.run_dir, node.state / "cni"):
            d.mkdir(parents=True, exist_ok=True)
        first, last = self.network.pod_range(i, self.count)
        conflist = {
            "cniVersion": "1.0.0",
            "name": f"rlark-{node.name}",
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": self.network.bridge,
                    "isGateway": False,
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": str(self.network.cidr), "rangeStart": first, "rangeEnd": last}]],
                        "dataDir": str(node.state / "ipam"),
                    },
                }
            ],
        }
        (node.state / "cni" / "10-rlark.conflist").write_text(json.dumps(conflist, indent=1))
        config = f"""version = 2
root = "{node.state / "containerd"}"
state = "{node.run_dir / "state"}"
oom_score = 0
[grpc]
  address = "{node.socket}"
[ttrpc]
  address = "{node.run_dir / "ttrpc.sock"}"
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "{PAUSE_IMAGE}"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "{CNI_DIR}"
    conf_dir = "{node.state / "cni"}"
    max_conf_num = 1
[plugins."io.containerd.internal.v1.opt"]
  path = "{node.state / "opt"}"
"""
        (node.state / "containerd.toml").write_text(config)
        proc = self._spawn(
            "containerd",
            ["containerd", "--config", str(node.state / "containerd.toml")],
            self.log_dir / f"containerd-{node.name}.log",
        )
        node.procs["containerd"] = proc
        node.pids["containerd"] = proc.pid

    def _start_kubelet(self, node: RealNode) -> None:
        kroot = node.state / "kubelet"
        kroot.mkdir(parents=True, exist_ok=True)
        for hierarchy in _cgroup_hierarchies():
            (hierarchy / node.cgroup.lstrip("/")).mkdir(exist_ok=True)
        crt, key = _client_cert(self.cp, f"kubelet-{node.name}", f"system:node:{node.name}", "system:nodes")
        _kubeconfig(self.cp, kroot / "kubeconfig", crt, key)
        config = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1",
            "kind": "KubeletConfiguration",
            "address": node.ip,
            "port": free_port(),
            "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1",
            "healthzPort": free_port(),
            "authentication": {
                "anonymous": {"enabled": False},
                "webhook": {"enabled": False},
                "x509": {"clientCAFile": str(self.cp.pki / "ca.crt")},
            },
            "authorization": {"mode": "AlwaysAllow"},
            "cgroupDriver": "cgroupfs",
            "cgroupRoot": node.cgroup,
            "failCgroupV1": False,
            "failSwapOn": False,
            "containerRuntimeEndpoint": f"unix://{node.socket}",
            "clusterDomain": "cluster.local",
            "clusterDNS": [self.network.gateway],
            "resolvConf": "",
            "oomScoreAdj": 0,
            "protectKernelDefaults": False,
            "serializeImagePulls": False,
            "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
            "imageGCHighThresholdPercent": 100,
            "imageGCLowThresholdPercent": 99,
            "registerNode": True,
            "rotateCertificates": False,
            "volumePluginDir": str(kroot / "volume-plugins"),
            "podLogsDir": str(node.state / "pod-logs"),  # not /var/log/pods: each kubelet removes logs it does not own
            "fileCheckFrequency": "5s",
            "syncFrequency": "10s",  # a Secret's update reaches its volume within seconds (the domain members')
            "nodeStatusUpdateFrequency": "5s",
            "logging": {"verbosity": 1},
        }
        (kroot / "config.yaml").write_text(yaml.safe_dump(config))
        labels = f"rlark.io/node-category=cpu,type=real,rlark.io/network={self.network.bridge}"
        proc = self._spawn(
            "kubelet",
            [
                str(self.bins / "kubelet"),
                f"--config={kroot / 'config.yaml'}",
                f"--kubeconfig={kroot / 'kubeconfig'}",
                f"--root-dir={kroot}",
                f"--cert-dir={kroot / 'pki'}",
                f"--hostname-override={node.name}",
                f"--node-ip={node.ip}",
                f"--node-labels={labels}",
                "--v=1",
            ],
            self.log_dir / f"kubelet-{node.name}.log",
        )
        node.procs["kubelet"] = proc
        node.pids["kubelet"] = proc.pid

    def _wait(self, check, timeout: float, node: RealNode) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for what, proc in node.procs.items():
                if proc.poll() is not None:
                    raise NodeError(f"{what} of {node.name} exited with {proc.returncode}:\n{self._tail(node, what)}")
            if check():
                return
            time.sleep(0.2)
        raise NodeError(f"{node.name} not ready after {timeout:.0f} s:\n{self._tail(node, 'kubelet')}")

    def _tail(self, node: RealNode, what: str) -> str:
        return _tail(self.log_dir / f"{what}-{node.name}.log")

    def _wait_ready(self, timeout: float) -> None:
        for node in self.nodes:
            self._wait(lambda n=node: self.node_ready(n.name), timeout, node)

    def node_ready(self, name: str) -> bool:
        try:
            doc = json.loads(self.cp.kubectl("get", "node", name, "-o", "json", timeout=10))
        except ControlPlaneError:
            return False
        conds = (doc.get("status") or {}).get("conditions") or []
        return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)

    # --- stop -----------------------------------------------------------------------------------------------

    def stop(self, timeout: float = 60) -> list[str]:
        """Remove everything the nodes made (see the module docstring). Returns what could not be removed."""
        sandboxes_netns: list[str] = []
        self._drain(timeout)
        for node in self.nodes:
            _stop_pid(node, "kubelet")
        for node in self.nodes:
            if node.socket.exists():
                sandboxes_netns += _netns_of(node)
                _remove_containers(node)
            _stop_pid(node, "containerd")
            _kill_shims(node)
        if self.dns_pid:
            _kill_group(self.dns_pid, 5, self.dns_proc)
            self.dns_pid = None
        left: list[str] = []
        for path in sandboxes_netns:
            if Path(path).exists():
                subprocess.run(["umount", path], capture_output=True, check=False, timeout=30)
                try:
                    Path(path).unlink()
                except OSError:
                    left.append(f"netns {path}")
        left += [f"netns {p}" for p in _netns_mounts() if p in sandboxes_netns]
        for node in self.nodes:
            left += _unmount_under(node.state) + _unmount_under(node.run_dir)
            left += _remove_cgroups(node.cgroup)
            for d in (node.state, node.run_dir):
                subprocess.run(["rm", "-rf", "--one-file-system", str(d)], check=False, timeout=120)
                if d.exists():
                    left.append(str(d))
        left += self.network.down()
        if not _other_kubelets():
            left += remove_kube_chains()
            restore_sysctls(self.sysctls)
        try:
            self.cp.kubectl("delete", "node", "--ignore-not-found", "--wait=false", *self.names, timeout=20)
        except (ControlPlaneError, subprocess.TimeoutExpired):
            pass  # the control plane may be gone already
        self.nodes = []
        return left

    def _drain(self, timeout: float) -> None:
        """Force-delete every Pod bound to our nodes and wait (bounded) until no container task runs."""
        live = [n for n in self.nodes if "kubelet" in n.pids and pid_alive(n.pids["kubelet"]) and n.socket.exists()]
        if not live:
            return
        for node in live:
            try:  # cordoned first: a controller's replacement Pod must not land here again
                self.cp.kubectl("cordon", node.name, timeout=30)
                self.cp.kubectl(
                    "delete", "pods", "--all-namespaces", f"--field-selector=spec.nodeName={node.name}",
                    "--force", "--grace-period=0", "--wait=false", timeout=30,
                )  # fmt: skip
            except (ControlPlaneError, subprocess.TimeoutExpired):
                pass
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if not any(n.running_tasks() for n in live):
                    return
            except (NodeError, subprocess.TimeoutExpired):
                return
            time.sleep(0.5)

    def to_state(self) -> dict:
        return {
            "count": self.count,
            "index": self.index,
            "prefix": self.prefix,
            "nodes": [n.to_state() for n in self.nodes],
            "dns_pid": self.dns_pid,
            "sysctls": self.sysctls,
        }

    @classmethod
    def from_state(cls, cp: ControlPlane, d: dict) -> RealNodes:
        rn = cls(cp=cp, count=d["count"], index=d["index"], prefix=d["prefix"])
        rn.nodes = [RealNode.from_state(n) for n in d["nodes"]]
        rn.dns_pid = d.get("dns_pid")
        rn.sysctls = d.get("sysctls") or {}
        return rn


# --- helpers --------------------------------------------------------------------------------------------------


def _node_rbac() -> str:
    """The binding RBAC-only control planes lack: group ``system:nodes`` gets the ``system:node`` ClusterRole
    (with the Node authorizer, the API server would grant this per node)."""
    return yaml.safe_dump(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": "rlark-real-nodes"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:node"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:nodes"}],
        }
    )


def _ok(out: str) -> bool:
    return "Server:" in out


def _tail(path: Path, lines: int = 30) -> str:
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (signal 0)."""
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, ValueError):
        return False
    return True


def _stop_pid(node: RealNode, what: str) -> None:
    pid = node.pids.pop(what, None)
    if pid is not None:
        _kill_group(int(pid), 15, node.procs.pop(what, None))


def _netns_of(node: RealNode) -> list[str]:
    """Network namespace paths of this node's Pod sandboxes (from containerd's container specs)."""
    out: list[str] = []
    try:
        for cid in node.containers():
            info = json.loads(node.ctr("containers", "info", cid, timeout=30, check=False) or "{}")
            for ns in ((info.get("Spec") or {}).get("linux") or {}).get("namespaces") or []:
                path = ns.get("path") or ""
                if ns.get("type") == "network" and path.startswith(("/var/run/netns/", "/run/netns/")):
                    out.append(path)
    except (NodeError, subprocess.TimeoutExpired, json.JSONDecodeError):
        pass
    return sorted(set(out))


def _netns_mounts() -> list[str]:
    """Mount points of named network namespaces (``/run/netns/*``) that are still mounted."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4]
        if point.startswith(("/run/netns/", "/var/run/netns/")):
            out.append(point)
    return out


def _remove_containers(node: RealNode) -> None:
    """Kill and delete every task and container left in this node's containerd (after its kubelet stopped)."""
    try:
        for cid in node.running_tasks():
            node.ctr("tasks", "kill", "-s", "SIGKILL", cid, check=False, timeout=30)
        deadline = time.monotonic() + 20
        while node.running_tasks() and time.monotonic() < deadline:
            time.sleep(0.3)
        for cid in node.containers():
            node.ctr("tasks", "delete", "-f", cid, check=False, timeout=30)
            node.ctr("containers", "delete", cid, check=False, timeout=30)
    except (NodeError, subprocess.TimeoutExpired):
        pass


def _kill_shims(node: RealNode) -> None:
    """SIGKILL the containerd shims of this node (their command line names its socket); they outlive containerd."""
    needle = str(node.socket).encode()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if b"containerd-shim" in cmdline and needle in cmdline:
            try:
                os.kill(int(proc.name), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _unmount_under(root: Path) -> list[str]:
    """Unmount every mount point below ``root``, deepest first (lazily when busy). Returns what stayed mounted."""
    prefix = str(root).rstrip("/") + "/"

    def mounts() -> list[str]:
        out = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].replace("\\040", " ")
            if point.startswith(prefix) or point == str(root):
                out.append(point)
        return sorted(set(out), key=len, reverse=True)

    for point in mounts():
        if subprocess.run(["umount", point], capture_output=True, check=False, timeout=30).returncode != 0:
            subprocess.run(["umount", "-l", point], capture_output=True, check=False, timeout=30)
    return [f"mount {p}" for p in mounts()]


def _cgroup_hierarchies() -> list[Path]:
    """Every mounted cgroup hierarchy under /sys/fs/cgroup (v1 controllers and the unified one)."""
    out = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        sep = fields.index("-")
        if fields[sep + 1] in ("cgroup", "cgroup2") and fields[4].startswith(str(CGROUP_ROOT)):
            out.append(Path(fields[4]))
    if not out and (CGROUP_ROOT / "cgroup.controllers").exists():
        out.append(CGROUP_ROOT)
    return out


def _remove_cgroups(root: str) -> list[str]:
    """rmdir ``root`` and everything below it in every hierarchy, deepest first. Returns what stayed."""
    left = []
    for hierarchy in _cgroup_hierarchies():
        top = hierarchy / root.lstrip("/")
        if not top.is_dir():
            continue
        dirs = sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True)
        for d in [*dirs, top]:
            for _ in range(20):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.1)
        if top.exists():
            left.append(f"cgroup {top}")
    return left


def _other_kubelets() -> bool:
    """True when a kubelet of ours is still running (another control plane's nodes): keep the shared chains."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmdline and cmdline[0].endswith(b"/kubelet") and any(str(STATE_ROOT).encode() in a for a in cmdline):
            return True
    return False
