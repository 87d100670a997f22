"""SSH bastion figures (issue 12): interactive echo p95 through ``ssh -J`` and scp throughput, as ratios.

Usage (against a running console whose bastion you can reach, with a Running Worker and your key registered):

    .venv/bin/python bench/ssh.py --jump admin@127.0.0.1:2222 --pod <job>-rollout-0 [--config ~/.ssh/config]
        [--sshd-port 2022]   # a plain local sshd (Debian openssh-server) for the scp baseline, if you run one

Prints one line per figure:
- ``echo``: round trip of one typed line in a PTY session (``ssh -tt``), p50/p95 over --rounds lines, and the same
  for a plain local PTY (``bash`` on ``script``) as the baseline: ratio = bastion p95 / local p95;
- ``scp``: MB/s of a --mb MB upload and download through the bastion, and against the local sshd when
  --sshd-port is given: ratio = bastion MB/s / plain scp MB/s (else the baseline is a local ``cp``).
"""

from __future__ import annotations

import argparse
import os
import select
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path


def _pty_rtt(argv: list[str], rounds: int, timeout: float = 30) -> list[float]:
    """Seconds from writing ``echo m<i>`` to reading ``m<i>`` back, per round, through ``argv`` (a PTY session)."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # pragma: no cover (child)
        os.execvp(argv[0], argv)
    out = b""

    def wait_for(marker: bytes) -> None:
        nonlocal out
        deadline = time.monotonic() + timeout
        while marker not in out:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"no {marker!r} within {timeout}s: {out[-300:]!r}")
            if select.select([fd], [], [], left)[0]:
                out += os.read(fd, 65536)
        out = out[out.index(marker) + len(marker) :]

    os.write(fd, b"stty -echo; echo ready\n")
    wait_for(b"ready")
    times = []
    for i in range(rounds):
        t0 = time.perf_counter()
        os.write(fd, f"echo m{i}x\n".encode())
        wait_for(f"m{i}x".encode())
        times.append(time.perf_counter() - t0)
    os.write(fd, b"exit\n")
    os.waitpid(pid, 0)
    return times


def _p(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) >= 2 else values[0]


def _mbps(size: int, seconds: float) -> float:
    return size / seconds / 1e6


def _scp(base: list[str], src: str, dst: str) -> float:
    t0 = time.perf_counter()
    subprocess.run([*base, "-q", src, dst], check=True, timeout=600)
    return time.perf_counter() - t0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jump", required=True, help="<user>@<host>:<port> of the bastion")
    parser.add_argument("--pod", required=True, help="a Running Worker")
    parser.add_argument("--config", default="", help="ssh config (identity, known hosts) for the client")
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--mb", type=int, default=20)
    parser.add_argument("--sshd-port", type=int, default=0, help="a plain local sshd for the scp baseline")
    args = parser.parse_args()
    conf = ["-F", args.config] if args.config else []
    ssh = [shutil.which("ssh") or "ssh", *conf]
    through = _pty_rtt([*ssh, "-tt", "-J", args.jump, args.pod], args.rounds)
    local = _pty_rtt(["bash", "--norc", "-i"], args.rounds)
    b95, l95 = _p(through, 95), _p(local, 95)
    print(
        f"echo through bastion: p50 {_p(through, 50) * 1e3:.1f} ms, p95 {b95 * 1e3:.1f} ms; local PTY p95 "
        f"{l95 * 1e3:.2f} ms; ratio {b95 / l95:.0f}x"
    )
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp) / "bench.bin"
        src.write_bytes(os.urandom(args.mb << 20))
        size = src.stat().st_size
        scp = [shutil.which("scp") or "scp", *conf]
        up = _scp([*scp, "-J", args.jump], str(src), f"{args.pod}:/tmp/rlark-bench.bin")
        down = _scp([*scp, "-J", args.jump], f"{args.pod}:/tmp/rlark-bench.bin", str(Path(tmp) / "back.bin"))
        if args.sshd_port:
            t0 = _scp([*scp, "-P", str(args.sshd_port)], str(src), "127.0.0.1:" + str(Path(tmp) / "plain.bin"))
            what = "plain local scp"
        else:
            t = time.perf_counter()
            shutil.copy(src, Path(tmp) / "plain.bin")
            t0 = time.perf_counter() - t
            what = "local cp (no local sshd given)"
        base = _mbps(size, t0)
        print(
            f"scp {args.mb} MB through bastion: up {_mbps(size, up):.1f} MB/s, down {_mbps(size, down):.1f} MB/s; "
            f"{what} {base:.1f} MB/s; ratio up {_mbps(size, up) / base:.3f}, down {_mbps(size, down) / base:.3f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
