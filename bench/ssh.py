"""SSH bastion figures: interactive echo p95 through ``ssh -J`` and scp throughput, as ratios.

By default the script starts everything it needs on a private state directory (SQLite, the local runtime with its
supervisor, the demo job of examples/demo/job.yaml whose Workers only sleep: real Ray Workers), the bastion on a
free loopback port and a key registered for the demo admin; it removes all of it at the end. ``--jump``/``--pod``
measure a console you already run instead (your key registered, the Worker Running).

    .venv/bin/python bench/ssh.py [--rounds 50] [--mb 20] [--sshd /usr/sbin/sshd] [--quick]
    .venv/bin/python bench/ssh.py --jump admin@127.0.0.1:2222 --pod <job>-header-0 [--config ~/.ssh/config]

Prints one line per figure:
- ``echo``: round trip of one typed line in a PTY session (``ssh -tt``), p50/p95 over --rounds lines, and the same
  for a plain local PTY (``bash``) as the baseline: ratio = bastion p95 / local p95;
- ``scp``: MB/s of a --mb MB upload and download through the bastion, and the same against a plain OpenSSH
  ``sshd`` the script starts on 127.0.0.1 (``--sshd``, default ``/usr/sbin/sshd``; as ``nobody`` when run as root,
  sftp served by ``internal-sftp``): ratio = bastion MB/s / plain scp MB/s. Without an sshd binary the baseline is
  a local ``cp`` and the line says so. (The echo baseline cannot use that sshd: ``nobody`` has no login shell.)
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.quick import quick_defaults, start_local_console, wait_for  # noqa: E402

POD = "cartpole-demo-header-0"


def _pty_rtt(argv: list[str], rounds: int, timeout: float = 60) -> list[float]:
    """Seconds from typing ``echo m$((i+1000))x`` to reading the shell's answer back, per round, through ``argv``
    (a PTY session): a typed line's round trip, as a user at a prompt sees it."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover (child)
        os.execvp(argv[0], argv)
    out = b""

    def wait_for_marker(marker: bytes) -> None:
        nonlocal out
        deadline = time.monotonic() + timeout
        while marker not in out:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {marker!r} within {timeout}s: {out[-300:]!r}")
            if select.select([fd], [], [], left)[0]:
                out += os.read(fd, 65536)
        out = out[out.index(marker) + len(marker) :]

    # the markers are computed by the shell ($((...))), so the terminal's echo of the typed line never matches them
    os.write(fd, b"stty -echo; echo R$((40+2))Y\n")
    wait_for_marker(b"R42Y")
    times = []
    for i in range(rounds):
        t0 = time.perf_counter()
        os.write(fd, f"echo m$(({i}+1000))x\n".encode())
        wait_for_marker(f"m{i + 1000}x".encode())
        times.append(time.perf_counter() - t0)
    os.write(fd, b"exit\n")
    os.waitpid(pid, 0)
    return times


def _p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) >= 2 else values[0]


def _mbps(size: int, seconds: float) -> float:
    return size / seconds / 1e6


def _scp(base: list[str], src: str, dst: str) -> float:
    """Seconds of one ``scp`` (RuntimeError with its stderr when it fails)."""
    t0 = time.perf_counter()
    done = subprocess.run([*base, "-q", src, dst], capture_output=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(base[:1])} {src} {dst} failed: {done.stderr.decode(errors='replace')[-500:]}")
    return time.perf_counter() - t0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text().strip()


def _client_config(tmp: Path, key: Path) -> Path:
    config = tmp / "ssh_config"
    config.write_text(
        f"Host *\n  IdentityFile {key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {tmp / 'known_hosts'}\n"
        "  StrictHostKeyChecking accept-new\n  BatchMode yes\n  ConnectTimeout 30\n"
    )
    return config


def start_console(tmp: Path, public_key: str, timeout: float) -> tuple[str, Callable[[], None]]:
    """A private console with the demo job Running and the bastion listening: ``(jump, stop)``."""
    sup = start_local_console(tmp)
    import yaml
    from django.contrib.auth import get_user_model

    from jobs.control import controller
    from jobs.control.submission import create_job
    from sshgate import access
    from sshgate.server import serve_in_thread
    from sshkeys.services import add_key

    stops: list[Callable[[], None]] = []

    def stop() -> None:
        for fn in reversed(stops):
            try:
                fn()
            except Exception as exc:  # noqa: BLE001 - tear down the rest anyway
                print(f"(teardown: {exc})")
        sup.terminate()
        try:
            sup.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(sup.pid, 9)

    try:
        doc = yaml.safe_load((ROOT / "examples" / "demo" / "job.yaml").read_text())
        header = doc["spec"]["tasks"][0]
        spec = header["kubernetes"]["workload"]["template"]["spec"]
        from django.conf import settings

        from clusters.host_paths import demo_output_path

        # the demo cluster allows each user's own directory only (what the wizard's demo uses)
        output = demo_output_path(str(settings.RLARK_LOCAL_ROOT), "admin", doc["metadata"]["name"])
        spec["volumes"][0]["hostPath"]["path"] = output
        spec["containers"][0].pop("resources", None)
        header["runScript"] = "sleep 100000"  # the Workers only need to run
        admin = get_user_model().objects.get(username="admin")
        key = add_key(admin, "bench", public_key)
        job = create_job(admin, doc)
        stops.append(lambda: controller.delete(job))
        identity = access.authenticate("admin", key.fingerprint)

        def reachable() -> bool:
            try:
                return bool(access.resolve_worker(identity, POD, 22))
            except access.Denied:
                return False

        wait_for(reachable, timeout, f"Worker {POD} Running", interval=1)
        gate, stop_gate = serve_in_thread()
        stops.append(stop_gate)
        return f"admin@127.0.0.1:{gate.port}", stop
    except BaseException:
        stop()
        raise


def start_sshd(sshd: Path, tmp: Path, public_key: str) -> tuple[int, str, subprocess.Popen, Path]:
    """A plain OpenSSH sshd on 127.0.0.1 for the baselines: ``(port, user, process, its log)``. As root it runs in
    a mount namespace of its own that adds the ``sshd`` privilege separation user to a private copy of
    ``/etc/passwd`` and has a private ``/run/sshd`` (the machine's files stay as they are); else as this user."""
    home = tmp / "sshd"
    home.mkdir()
    host = home / "host_ed25519"
    _keygen(host)
    (home / "authorized_keys").write_text(public_key + "\n")
    port = _free_port()
    (home / "sshd_config").write_text(
        f"ListenAddress 127.0.0.1\nPort {port}\nHostKey {host}\nAuthorizedKeysFile {home / 'authorized_keys'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile none\n"
        "Subsystem sftp internal-sftp\n"
    )
    env = dict(os.environ)
    libs = sshd.resolve().parents[2] / "usr" / "lib" / "x86_64-linux-gnu"  # an sshd unpacked from its .deb
    if libs.is_dir() and not str(libs).startswith("/usr/"):
        env["LD_LIBRARY_PATH"] = str(libs)
    argv = [str(sshd), "-D", "-e", "-f", str(home / "sshd_config")]
    if os.geteuid() == 0:
        passwd = home / "passwd"
        passwd.write_text(Path("/etc/passwd").read_text() + "sshd:x:65534:65534:privsep:/run/sshd:/usr/sbin/nologin\n")
        script = (
            f'mount --bind {passwd} /etc/passwd && mount -t tmpfs tmpfs /run && mkdir -m 755 /run/sshd && exec "$@"'
        )
        argv = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", script, "sshd", *argv]
    log = home / "log"
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=open(log, "w"))  # noqa: SIM115

    def listening() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd ended: {log.read_text()[-500:]}")
        with socket.socket() as s:
            return s.connect_ex(("127.0.0.1", port)) == 0

    wait_for(listening, 30, "the baseline sshd", interval=0.1)
    return port, "root" if os.geteuid() == 0 else os.environ.get("USER", ""), proc, log


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jump", default="", help="<user>@<host>:<port> of a running bastion (default: start one)")
    parser.add_argument("--pod", default="", help="a Running Worker (with --jump)")
    parser.add_argument("--config", default="", help="ssh config (identity, known hosts) for the client (with --jump)")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--mb", type=int, default=20)
    parser.add_argument("--sshd", default="/usr/sbin/sshd", help="OpenSSH sshd binary for the scp baseline")
    parser.add_argument("--timeout", type=float, default=600, help="s to wait for the demo Worker to run")
    quick_defaults(parser, rounds=10, mb=2, timeout=400)
    args = parser.parse_args()
    if bool(args.jump) != bool(args.pod):
        parser.error("--jump and --pod go together")
    tmp = Path(tempfile.mkdtemp(prefix="rlark-bench-ssh-"))
    key = tmp / "id_bench"
    public = _keygen(key)
    stop: Callable[[], None] = lambda: None  # noqa: E731
    sshd_proc: subprocess.Popen | None = None
    try:
        if args.jump:
            jump, pod, conf = args.jump, args.pod, (["-F", args.config] if args.config else [])
        else:
            t0 = time.monotonic()
            jump, stop = start_console(tmp, public, args.timeout)
            pod, conf = POD, ["-F", str(_client_config(tmp, key))]

            def answers() -> bool:  # a just-started local Worker takes a moment before exec can enter it
                probe = ["ssh", *conf, "-J", jump, pod, "true"]
                return subprocess.run(probe, capture_output=True, timeout=120).returncode == 0

            wait_for(answers, args.timeout, f"Worker {pod} to answer through the bastion", interval=2)
            print(f"started: a private console, demo job Running, bastion {jump} ({time.monotonic() - t0:.0f} s)")
        print(f"load average (1 min): {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
        sshd = Path(args.sshd)
        baseline: list[str] | None = None
        if sshd.exists():
            port, user, sshd_proc, log = start_sshd(sshd, tmp, public)
            baseline = [*conf, "-o", f"IdentityFile={key}", "-o", f"User={user}"] if user else [*conf]
            baseline += ["-o", f"Port={port}"]
        ssh = [shutil.which("ssh") or "ssh", *conf]
        through = _pty_rtt([*ssh, "-tt", "-J", jump, pod], args.rounds)
        b95 = _p(through, 95)
        if baseline is not None:
            plain = _pty_rtt([ssh[0], *baseline, "-tt", "127.0.0.1"], args.rounds)
            what = "plain OpenSSH sshd on 127.0.0.1"
        else:
            plain = _pty_rtt(["bash", "--norc", "-i"], args.rounds)
            what = f"local PTY (no sshd at {sshd})"
        print(
            f"echo through bastion: p50 {_p(through, 50) * 1e3:.1f} ms, p95 {b95 * 1e3:.1f} ms; {what} p50 "
            f"{_p(plain, 50) * 1e3:.1f} ms, p95 {_p(plain, 95) * 1e3:.1f} ms; ratio p95 {b95 / _p(plain, 95):.1f}x "
            f"({args.rounds} lines)"
        )
        src = tmp / "bench.bin"
        src.write_bytes(os.urandom(args.mb << 20))
        size = src.stat().st_size
        scp = [shutil.which("scp") or "scp", *conf]
        up = _scp([*scp, "-J", jump], str(src), f"{pod}:/tmp/rlark-bench.bin")
        down = _scp([*scp, "-J", jump], f"{pod}:/tmp/rlark-bench.bin", str(tmp / "back.bin"))
        if (tmp / "back.bin").read_bytes() != src.read_bytes():
            print("scp through the bastion changed the file")
            return 1
        if baseline is not None:
            plain_scp = [scp[0], *baseline]
            remote = f"127.0.0.1:{tmp / 'plain.bin'}"
            try:
                base_up = _mbps(size, _scp(plain_scp, str(src), remote))
                base_down = _mbps(size, _scp(plain_scp, remote, str(tmp / "plain-back.bin")))
            except RuntimeError as exc:
                raise RuntimeError(f"{exc}\nsshd log: {log.read_text()[-800:]}") from None
            what = f"plain OpenSSH scp to 127.0.0.1 up {base_up:.1f} MB/s, down {base_down:.1f} MB/s"
        else:
            t = time.perf_counter()
            shutil.copy(src, tmp / "plain.bin")
            base_up = base_down = _mbps(size, time.perf_counter() - t)
            what = f"local cp {base_up:.1f} MB/s (no sshd at {sshd})"
        print(
            f"scp {args.mb} MB through bastion: up {_mbps(size, up):.1f} MB/s, down {_mbps(size, down):.1f} MB/s; "
            f"{what}; ratio up {_mbps(size, up) / base_up:.3f}, down {_mbps(size, down) / base_down:.3f}"
        )
        return 0
    finally:
        if sshd_proc is not None:
            sshd_proc.terminate()
            sshd_proc.wait(timeout=10)
        stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
