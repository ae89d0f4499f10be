"""The warm grader: a judge zygote (grader/engine/zygote.py) that outlives one command, one per
user and KATA_HOME, so that a candidate's `kata check`, `grade` and `watch` fork their judges
from a process that has imported pytest, hypothesis, numpy and torch already (about 1.5 s of
CPU a grading saves, more on a loaded machine).

* It listens on a Unix socket (SOCK_SEQPACKET) in the user's runtime folder
  ($XDG_RUNTIME_DIR/kata, else /tmp/kata-<uid>, mode 0700), the socket itself mode 0600; each
  connection is a control channel as a runner's private zygote has (judge requests with
  their pipes passed as SCM_RIGHTS), plus `status` and `stop`.
* Each grading forks a fresh judge, which starts its own fresh sandboxed worker as a cold one
  does: nothing of one grading reaches the next, and the verdicts are the cold path's.
* It is started in the background by the first check/grade/watch that finds none (that
  grading takes the cold path: nobody waits for it), or by `kata warm`; it exits after 15
  idle minutes (KATA_WARM_IDLE_S), at `kata stop`, `kata warm --stop`, or when the next
  grading finds it was started from other code (the checkout's grader, references or katas
  changed) or another interpreter: that grading is cold and starts a new one.
* It is used only by the candidate's own commands (the CLI turns it on); a coach's review,
  the library's `grading.grade` and the project's tests never use one. KATA_WARM=0 turns it
  off everywhere. Any failure falls back to the cold path.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from grader.engine import zygote

ENV_WARM = "KATA_WARM"  # 0: never use or start the service
ENV_IDLE = "KATA_WARM_IDLE_S"
DEFAULT_IDLE_S = 15 * 60
_CONNECT_TIMEOUT_S = 2.0
_enabled = False  # set by the CLI's grading commands


def enable() -> None:
    """This process grades for a candidate at the keyboard: its judges may come warm."""
    global _enabled
    _enabled = os.environ.get(ENV_WARM, "1").strip() != "0"


def enabled() -> bool:
    """Turned on by the CLI, not off by KATA_WARM=0, and on Linux (the service's sockets are
    SOCK_SEQPACKET, and its workers need the Linux sandbox)."""
    return _enabled and os.environ.get(ENV_WARM, "1").strip() != "0" and sys.platform.startswith("linux")


# --------------------------------------------------------------------------- where and which


def runtime_dir() -> Path:
    base = os.environ.get("XDG_RUNTIME_DIR", "").strip()
    folder = Path(base) / "kata" if base and os.path.isdir(base) else Path(f"/tmp/kata-{os.getuid()}")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.stat()
    if info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise OSError(f"{folder} is not this user's alone (mode {oct(info.st_mode & 0o777)})")
    return folder


def socket_path() -> Path:
    """The service's socket for this KATA_HOME (a short name: a Unix socket's path is at
    most 107 bytes)."""
    from grader.store import kata_home

    digest = hashlib.sha256(str(kata_home().resolve()).encode()).hexdigest()[:16]
    return runtime_dir() / f"warm-{digest}.sock"


def code_key(env: dict[str, str]) -> str:
    """What the service must have been started from: the interpreter and what it reads at
    start (zygote.startup_key), and the code of the grader, the references and the katas
    (each file's size and modification time)."""
    from grader import catalog

    digest = hashlib.sha256(repr(zygote.startup_key(env)).encode())
    roots = [Path(__file__).resolve().parents[1], catalog.REFERENCE_DIR, catalog.KATAS_DIR]
    for root in roots:
        for line in sorted(_code_files(str(root))):
            digest.update(line.encode())
    return digest.hexdigest()[:32]


_CODE_SUFFIXES = (".py", ".toml", ".cpp", ".md")


def _code_files(folder: str) -> list[str]:
    """"path NUL size NUL mtime" of every code file under `folder` (not in __pycache__), by
    os.scandir: pathlib's rglob and stat took about 20 ms of every grading's start."""
    out: list[str] = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return out
    for entry in entries:
        try:
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    out += _code_files(entry.path)
            elif entry.name.endswith(_CODE_SUFFIXES):
                info = entry.stat()
                out.append(f"{entry.path}\0{info.st_size}\0{info.st_mtime_ns}\n")
        except OSError:
            continue
    return out


# --------------------------------------------------------------------------- the client's side


class Remote(zygote.Zygote):
    """A connection to the service, used as the runner's zygote (same spawn protocol)."""

    def __init__(self, conn: socket.socket, key: tuple, path: Path) -> None:
        import threading

        self.key, self.path = key, path
        self.control = conn
        self.lock = threading.Lock()

    def close(self) -> None:
        self.control.close()


def _connect(path: Path) -> socket.socket | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.settimeout(_CONNECT_TIMEOUT_S)
    try:
        sock.connect(str(path))
    except OSError:
        sock.close()
        return None
    return sock


def _ask(sock: socket.socket, what: bytes) -> dict[str, Any] | None:
    try:
        sock.send(what)
        reply = sock.recv(65536)
        return json.loads(reply) if reply else None
    except (OSError, ValueError):
        return None


def status() -> dict[str, Any] | None:
    """The running service's status ({pid, started, gradings, idle_s, key, socket}), or None."""
    try:
        path = socket_path()
    except OSError:
        return None
    sock = _connect(path)
    if sock is None:
        return None
    with sock:
        found = _ask(sock, b"s")
    if found is not None:
        found["socket"] = str(path)
    return found


def stop() -> bool:
    """End the service of this KATA_HOME; whether one was running."""
    try:
        path = socket_path()
    except OSError:
        return False
    sock = _connect(path)
    if sock is None:
        return False
    with sock:
        _ask(sock, b"q")
    return True


def start(env: dict[str, str], key: str) -> subprocess.Popen | None:
    """Start the service in the background (it outlives this process); None when it cannot."""
    try:
        path = socket_path()
    except OSError:
        return None
    idle = os.environ.get(ENV_IDLE, str(DEFAULT_IDLE_S))
    try:
        return subprocess.Popen([sys.executable, "-m", "grader.engine.warm", str(path), key, idle],
                                env={k: v for k, v in env.items() if not k.startswith("KATA_")},
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True, cwd="/")
    except OSError:
        return None


def wait_ready(timeout_s: float = 60.0) -> dict[str, Any] | None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = status()
        if found is not None and found.get("ready"):
            return found
        time.sleep(0.1)
    return None


_started: set[Path] = set()  # services this process started (each only once)


def remote_for(env: dict[str, str]) -> Remote | None:
    """The service to fork this grading's judges, or None (then they start cold). Starts one
    in the background where there is none, and replaces one started from other code."""
    if not enabled():
        return None
    try:
        path = socket_path()
        key = code_key(env)
    except OSError:
        return None
    sock = _connect(path)
    if sock is None:
        if path not in _started:  # (not again while it imports: the grading's other judges)
            _started.add(path)
            start(env, key)
        return None
    hello = _ask(sock, b"h")
    if hello is None or not hello.get("ready"):
        sock.close()
        return None  # (still importing: this grading goes cold)
    if hello.get("key") != key:
        _ask(sock, b"q")
        sock.close()
        start(env, key)
        return None
    sock.settimeout(None)
    return Remote(sock, zygote.startup_key(env), path)


_remote: Remote | None = None  # this process's connection to the service
_remote_lock = __import__("threading").Lock()


def _usable_remote(env: dict[str, str]) -> Remote | None:
    """This process's connection to a ready service for `env`'s judges, made on first use
    (None: the judges start cold). Never within `zygote.many_gradings` (a coach's review
    has its own zygote)."""
    global _remote
    if not enabled() or zygote._uses > 0:
        return None
    try:
        path = socket_path()
    except OSError:
        return None
    with _remote_lock:
        if _remote is None or _remote.path != path:  # (another KATA_HOME's, or none yet)
            _remote = remote_for(env)
        remote = _remote
    if remote is None or remote.key != zygote.startup_key(env):
        return None
    return remote


def forks_judges(env: dict[str, str]) -> bool:
    """Whether a grading's judges (with `env`) will come from the warm service."""
    return _usable_remote(env) is not None


def spawn_judge(cmd: list[str], env: dict[str, str], cwd: str, results_fd: int,
                cpus: set[int] | None) -> zygote.ZygoteChild | None:
    """A judge forked by the warm service, where the CLI turned it on and one answers (None:
    the runner starts it as usual, and a service is started in the background for the next
    grading). Never within `zygote.many_gradings` (a coach's review has its own zygote)."""
    global _remote
    remote = _usable_remote(env)
    if remote is None:
        return None
    try:
        return remote.spawn(cmd, env, cwd, results_fd, cpus)
    except OSError:
        with _remote_lock:
            _remote = None
        remote.close()
        return None


# --------------------------------------------------------------------------- the service's side


def serve(path: Path, key: str, idle_s: float) -> None:
    """Listen at `path` and fork judges until idle for `idle_s` or told to stop. One service
    per socket: a second one started meanwhile (two gradings that both found none) waits up
    to 5 s for the first's lock (it may be one told to stop), then leaves."""
    import fcntl

    lock = os.open(str(path.with_suffix(".lock")), os.O_CREAT | os.O_RDWR, 0o600)
    deadline = time.monotonic() + 5.0
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.monotonic() > deadline:
                return
            time.sleep(0.05)
    with contextlib.suppress(OSError):
        path.unlink()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    old = os.umask(0o177)
    try:
        listener.bind(str(path))
    finally:
        os.umask(old)
    os.chmod(path, 0o600)
    ours = os.stat(path).st_ino  # (a later service may bind the same path: never unlink its socket)
    listener.listen(16)
    started, gradings, ready = time.time(), 0, False
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    zygote.preload()
    workers = _WorkerZygote(path)
    ready = True
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    sel.register(wake_read, selectors.EVENT_READ)
    judges: dict[int, socket.socket] = {}
    controls: set[socket.socket] = set()
    runners: set[socket.socket] = set()  # connections that asked for a judge
    last_active = time.monotonic()
    try:
        while True:
            if judges or runners:  # (a status question is not a use)
                last_active = time.monotonic()
            left = idle_s - (time.monotonic() - last_active)
            if left <= 0:
                return
            for sel_key, _ in sel.select(timeout=min(left, 60.0)):
                obj = sel_key.fileobj
                if obj is listener:
                    with contextlib.suppress(OSError):
                        conn, _ = listener.accept()
                        if _peer_uid(conn) not in (os.getuid(), None):
                            conn.close()
                            continue
                        controls.add(conn)
                        sel.register(conn, selectors.EVENT_READ)
                elif obj is wake_read:
                    with contextlib.suppress(BlockingIOError):
                        os.read(wake_read, 4096)
                    zygote._reap(judges)
                else:
                    conn = obj  # type: ignore[assignment]
                    assert isinstance(conn, socket.socket)
                    try:
                        msg, fds, _, _ = socket.recv_fds(conn, 16, 3)
                    except OSError:
                        msg, fds = b"", []
                    if msg == b"j" and len(fds) == 3:
                        runners.add(conn)
                        pid, judge_conn = zygote._fork_judge(fds, workers.env())
                        if judge_conn is not None:
                            judges[pid] = judge_conn
                            gradings += 1
                        continue
                    for fd in fds:
                        os.close(fd)
                    if msg in (b"h", b"s"):
                        info = {"pid": os.getpid(), "started": started, "gradings": gradings, "key": key,
                                "ready": ready, "judges_running": len(judges),
                                "worker_zygote": bool(workers.env()),
                                "idle_s": round(time.monotonic() - last_active, 1)}
                        with contextlib.suppress(OSError):
                            conn.send(json.dumps(info).encode())
                        continue
                    if msg == b"q":
                        with contextlib.suppress(OSError):
                            conn.send(b'{"stopping": true}')
                        return
                    sel.unregister(conn)
                    controls.discard(conn)
                    runners.discard(conn)
                    conn.close()
    finally:
        workers.close()
        with contextlib.suppress(OSError):
            if os.stat(path).st_ino == ours:
                path.unlink()
        listener.close()


class _WorkerZygote:
    """The service's worker zygote (grader/worker/zygote.py), in the sandbox a worker gets:
    judges fork their workers from it (their environment names its socket). None where the
    sandbox is unavailable, or it did not come up: workers then start as usual."""

    def __init__(self, service_socket: Path) -> None:
        from grader.engine import sandbox
        from grader.engine.limits import Limits

        self.proc: subprocess.Popen | None = None
        self.folder = service_socket.with_suffix(".workers")
        self.socket = self.folder / sandbox.WORKER_ZYGOTE_SOCKET
        if os.environ.get("KATA_WARM_WORKERS", "1") == "0":
            return
        try:
            self.folder.mkdir(mode=0o700, exist_ok=True)
            with contextlib.suppress(OSError):
                self.socket.unlink()
            cmd = sandbox.worker_zygote_command(self.folder, Limits())
            if cmd is None:
                return
            try:
                self.proc = subprocess.Popen(cmd.argv, env=cmd.env, cwd=cmd.cwd, pass_fds=cmd.pass_fds,
                                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                             stderr=subprocess.DEVNULL, preexec_fn=cmd.preexec)
            finally:
                for fd in cmd.pass_fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)
        except OSError:
            self.proc = None
            return
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and self.proc.poll() is None and not self.socket.exists():
            time.sleep(0.05)
        if not self.socket.exists():
            self.close()

    def env(self) -> dict[str, str]:
        from grader.engine.worker_process import ENV_WORKER_ZYGOTE

        if self.proc is None or self.proc.poll() is not None:
            return {}
        return {ENV_WORKER_ZYGOTE: str(self.socket)}

    def close(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(OSError):
                self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=5)
            self.proc = None
        import shutil

        shutil.rmtree(self.folder, ignore_errors=True)


def _peer_uid(conn: socket.socket) -> int | None:
    import struct

    try:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return int(struct.unpack("3i", creds)[1])
    except (OSError, AttributeError):
        return None


if __name__ == "__main__":
    serve(Path(sys.argv[1]), sys.argv[2], float(sys.argv[3]))
