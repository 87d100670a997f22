"""The small Python program the bastion runs inside a Worker, through the runtime's exec.

Why a program of our own rather than an ``sshd``/``sftp-server`` in the image:
every Worker runs Ray, so ``python3`` is always there; nothing else can be assumed. The runtime's exec is a
terminal (the local runtime's PTY, Kubernetes ``tty=true``), which mixes stderr into stdout, turns ``\\n`` into
``\\r\\n``, echoes input and has no end-of-file. So the program first switches its terminal to raw mode (no
echo, no translation), then speaks a line protocol: every line is ``<tag><base64 payload>\\n``; base64 keeps
every byte intact whatever the terminal still does to control characters.

Modes (``python3 -c AGENT <mode> ...``):

- ``cmd <argv...>``: run argv with pipes; ``o``/``e`` = stdout/stderr bytes, ``x`` = exit code (128+signal
  when killed), input ``i`` = stdin bytes, ``c`` = close stdin, ``k`` = send signal number, ``y`` = the exit code
  arrived. After ``x`` the agent stays until ``y`` or the end of its input (at most 10 s): an exec whose process
  ends may drop its last output (kwok's exec server did, about one command in ten on a loaded machine), and
  without ``x`` the client would see 255 instead of the command's exit code.
- ``tcp <host> <port>``: a TCP connection from inside the Worker (``ssh -L``); ``o`` = received bytes,
  ``i`` = bytes to send, ``c`` = half-close, ``x`` = the peer closed.
- ``fs``: file operations for SFTP/scp; ``q`` = JSON request ``{"id", "op", "a": [args]}``, answer ``a`` =
  ``{"id", "r": result}`` or ``{"id", "err": [errno, text]}`` (bytes as base64 strings inside the JSON).

Every mode first sends ``R`` (ready: raw mode is on, input may follow) or ``E`` with a one-line error.
"""

AGENT = r"""
import base64, json, os, signal, socket, subprocess, sys, threading
try:
    import tty
    if os.isatty(0):
        tty.setraw(0)
except Exception:
    pass
LOCK = threading.Lock()
def send(tag, data=b""):
    line = tag + base64.b64encode(data) + b"\n"
    with LOCK:
        while line:
            line = line[os.write(1, line):]
def lines():
    for line in sys.stdin.buffer:
        line = line.strip()
        if line:
            yield line[:1], base64.b64decode(line[1:])
def pump(fd, tag):
    while True:
        try:
            data = os.read(fd, 49152)
        except OSError:
            data = b""
        if not data:
            return
        send(tag, data)
def st(s):
    return [s.st_mode, s.st_ino, s.st_dev, s.st_nlink, s.st_uid, s.st_gid, s.st_size,
            int(s.st_atime), int(s.st_mtime), int(s.st_ctime)]
def fs():
    files = {}
    def setattrs(target, a):
        if a.get("size") is not None:
            os.truncate(target, a["size"])
        if a.get("uid") is not None and a.get("gid") is not None:
            os.chown(target, a["uid"], a["gid"])
        if a.get("mode") is not None:
            os.chmod(target, a["mode"] & 0o7777)
        if a.get("atime") is not None or a.get("mtime") is not None:
            s = os.stat(target)
            os.utime(target, (a.get("atime") or s.st_atime, a.get("mtime") or s.st_mtime))
    def run(op, a):
        if op == "stat": return st(os.stat(a[0]))
        if op == "lstat": return st(os.lstat(a[0]))
        if op == "fstat": return st(os.fstat(files[a[0]]))
        if op == "open":
            fd = os.open(a[0], a[1], a[2])
            files[fd] = fd
            return fd
        if op == "close": os.close(files.pop(a[0])); return None
        if op == "read": return base64.b64encode(os.pread(files[a[0]], min(a[2], 1 << 20), a[1])).decode()
        if op == "write": return os.pwrite(files[a[0]], base64.b64decode(a[2]), a[1])
        if op == "scandir":
            out = []
            with os.scandir(a[0]) as it:
                for e in it:
                    if len(out) >= 100000: break
                    try: out.append([e.name, st(e.stat(follow_symlinks=False))])
                    except OSError: pass
            return out
        if op == "setstat": setattrs(a[0], a[1]); return None
        if op == "fsetstat": setattrs(files[a[0]], a[1]); return None
        if op == "remove": os.remove(a[0]); return None
        if op == "mkdir": os.mkdir(a[0], a[1]); return None
        if op == "rmdir": os.rmdir(a[0]); return None
        if op == "rename":
            if os.path.lexists(a[1]): raise FileExistsError(17, "File exists")
            os.rename(a[0], a[1]); return None
        if op == "posix_rename": os.replace(a[0], a[1]); return None
        if op == "realpath": return os.path.realpath(a[0])
        if op == "readlink": return os.readlink(a[0])
        if op == "symlink": os.symlink(a[0], a[1]); return None
        if op == "link": os.link(a[0], a[1]); return None
        if op == "fsync": os.fsync(files[a[0]]); return None
        if op == "statvfs":
            v = os.statvfs(a[0])
            return [v.f_bsize, v.f_frsize, v.f_blocks, v.f_bfree, v.f_bavail, v.f_files, v.f_ffree, v.f_favail,
                    v.f_fsid, v.f_flag, v.f_namemax]
        raise OSError(38, "operation not supported: " + str(op))
    send(b"R")
    for tag, data in lines():
        if tag != b"q":
            continue
        req = json.loads(data)
        try:
            out = {"id": req["id"], "r": run(req["op"], req["a"])}
        except OSError as exc:
            out = {"id": req["id"], "err": [exc.errno or 5, exc.strerror or str(exc)]}
        except Exception as exc:
            out = {"id": req["id"], "err": [5, str(exc)]}
        send(b"a", json.dumps(out).encode())
def cmd(argv):
    try:
        p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as exc:
        send(b"E", ("cannot run %s: %s" % (argv[0], exc.strerror)).encode())
        return
    send(b"R")
    done = threading.Event()
    def feed():
        for tag, data in lines():
            try:
                if tag == b"i":
                    p.stdin.write(data); p.stdin.flush()
                elif tag == b"c":
                    p.stdin.close()
                elif tag == b"k":
                    p.send_signal(int(data))
                elif tag == b"y":
                    break
            except (OSError, ValueError):
                pass
        done.set()
    threading.Thread(target=feed, daemon=True).start()
    pumps = [threading.Thread(target=pump, args=(p.stdout.fileno(), b"o")),
             threading.Thread(target=pump, args=(p.stderr.fileno(), b"e"))]
    for t in pumps: t.start()
    for t in pumps: t.join()
    rc = p.wait()
    send(b"x", str(128 - rc if rc < 0 else rc).encode())
    done.wait(10)
def tcp(host, port):
    try:
        s = socket.create_connection((host, int(port)), timeout=10)
        s.settimeout(None)
    except OSError as exc:
        send(b"E", ("cannot connect to %s:%s in the Worker: %s" % (host, port, exc.strerror or exc)).encode())
        return
    send(b"R")
    def feed():
        for tag, data in lines():
            try:
                if tag == b"i": s.sendall(data)
                elif tag == b"c": s.shutdown(socket.SHUT_WR)
            except OSError:
                return
    threading.Thread(target=feed, daemon=True).start()
    pump(s.fileno(), b"o")
    send(b"x", b"0")
mode = sys.argv[1]
if mode == "fs": fs()
elif mode == "cmd": cmd(sys.argv[2:])
elif mode == "tcp": tcp(sys.argv[2], sys.argv[3])
sys.stdout.flush()
os._exit(0)
"""


def agent_argv(mode: str, *args: str) -> list[str]:
    """The exec argv running the agent in ``mode`` with ``args`` (argv, never shell text)."""
    return ["python3", "-c", AGENT, mode, *args]
