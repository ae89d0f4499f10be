"""The worker zygote: inside the sandbox, a process that has imported what workers import
(numpy, torch, the worker's own modules) before any candidate code exists, and forks a fresh
worker for each judge that asks (the warm grader, grader/engine/warm.py). Standard library
only: it ships with the worker.

    python -s -c "import kata_worker.zygote as z; z.main()" --socket /kata/rt/worker.sock

A judge connects (SOCK_SEQPACKET) and sends one request: a JSON header (module name, the
file's suffix, support file names, rlimits, the seccomp program, the environment) with its
file descriptors (the worker's two sockets, its output pipe, the solution file, the support
files). The forked child writes the files into a private folder under /tmp, sends its pid
to the judge with SCM_CREDENTIALS (the kernel gives the judge the pid as the judge's
namespace numbers it), lowers its rlimits, installs the no-fork seccomp filter and runs the
worker's main as a started worker does. When the judge's connection closes, the worker is
killed; when the worker ends, the zygote tells the judge its exit code, removes its folder,
and clears /tmp of whatever the worker left there once no worker runs.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import gc
import json
import os
import resource
import selectors
import shutil
import signal
import socket
import struct
import sys
import tempfile

_MAX_FDS = 64
_PR_SET_DUMPABLE, _PR_SET_NO_NEW_PRIVS, _PR_SET_SECCOMP, _SECCOMP_MODE_FILTER = 4, 38, 22, 2


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="kata_worker.zygote")
    parser.add_argument("--socket", required=True)
    args = parser.parse_args(argv)
    if sys.path and sys.path[0] in ("", "."):
        del sys.path[0]
    # torch._dynamo too: torch.optim's first step imports it (about 1 s of every worker whose
    # candidate trains: train-memory).
    for name in ("numpy", "torch", "torch._dynamo"):
        with contextlib.suppress(Exception):
            __import__(name)
    from . import main as _worker_main  # noqa: F401 - its imports, before any fork

    gc.collect()
    gc.freeze()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)  # a worker may not trace the zygote (same uid)
    with contextlib.suppress(OSError):
        os.unlink(args.socket)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    old = os.umask(0o177)
    try:
        listener.bind(args.socket)
    finally:
        os.umask(old)
    listener.listen(16)
    serve(listener)


def serve(listener: socket.socket) -> None:
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ)
    sel.register(wake_read, selectors.EVENT_READ)
    workers: dict[int, tuple[socket.socket, str]] = {}  # pid -> (the judge's connection, folder)
    by_conn: dict[int, int] = {}  # connection fd -> worker pid
    while True:
        for key, _ in sel.select():
            obj = key.fileobj
            if obj is listener:
                with contextlib.suppress(OSError):
                    conn, _ = listener.accept()
                    sel.register(conn, selectors.EVENT_READ)
            elif obj is wake_read:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_read, 4096)
                _reap(workers, by_conn, sel)
            else:
                assert isinstance(obj, socket.socket)
                conn = obj
                pid = by_conn.get(conn.fileno())
                if pid is not None:  # a worker's judge: anything but data means it is gone
                    with contextlib.suppress(OSError):
                        if conn.recv(1):
                            continue
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGKILL)
                    by_conn.pop(conn.fileno(), None)
                    sel.unregister(conn)
                    continue
                try:
                    msg, fds, _, _ = socket.recv_fds(conn, 65536, _MAX_FDS)
                except OSError:
                    msg, fds = b"", []
                if not msg:
                    for fd in fds:
                        os.close(fd)
                    sel.unregister(conn)
                    conn.close()
                    continue
                pid, folder = _fork(conn, msg, fds, listener, wake_read, wake_write)
                for fd in fds:
                    with contextlib.suppress(OSError):
                        os.close(fd)
                if pid:
                    workers[pid] = (conn, folder)
                    by_conn[conn.fileno()] = pid
                else:
                    sel.unregister(conn)
                    conn.close()


def _reap(workers: dict[int, tuple[socket.socket, str]], by_conn: dict[int, int],
          sel: selectors.BaseSelector) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        found = workers.pop(pid, None)
        if found is None:
            continue
        conn, folder = found
        with contextlib.suppress(OSError):
            conn.send(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode())
        if by_conn.pop(conn.fileno(), None) is not None:
            with contextlib.suppress(KeyError, ValueError):
                sel.unregister(conn)
        conn.close()
        shutil.rmtree(folder, ignore_errors=True)
    if not workers:  # nothing of one grading reaches the next: /tmp as the zygote found it
        for entry in os.listdir("/tmp"):
            path = os.path.join("/tmp", entry)
            with contextlib.suppress(OSError):
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    os.unlink(path)


def _fork(conn: socket.socket, msg: bytes, fds: list[int], listener: socket.socket,
          wake_read: int, wake_write: int) -> tuple[int, str]:
    try:
        header = json.loads(msg)
        module = str(header["module"])
        suffix = str(header["suffix"])
        support = [str(n) for n in header.get("support", [])]
        if not module.isidentifier() or suffix not in (".py",) and not suffix.endswith(".so") \
                or len(fds) != 4 + len(support) or any("/" in n or n.startswith(".") for n in support):
            raise ValueError("bad request")
    except (ValueError, KeyError, TypeError):
        with contextlib.suppress(OSError):
            conn.send(b'{"error": "the request was not understood"}')
        return 0, ""
    folder = tempfile.mkdtemp(prefix="w-", dir="/tmp")
    pid = os.fork()
    if pid == 0:
        code = 70
        try:
            _child(conn, header, fds, folder, module, suffix, support, listener, wake_read, wake_write)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - the judge sees a worker that ended
            import traceback

            traceback.print_exc()
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(code)
    return pid, folder


def _child(conn: socket.socket, header: dict, fds: list[int], folder: str, module: str, suffix: str,
           support: list[str], listener: socket.socket, wake_read: int, wake_write: int) -> None:
    main_fd, broker_fd, out_fd, solution_fd = fds[:4]
    os.setsid()
    signal.set_wakeup_fd(-1)
    for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    listener.close()
    os.close(wake_read)
    os.close(wake_write)
    candidate = os.path.join(folder, module + suffix)
    _copy(solution_fd, candidate)
    support_dir = None
    if support:
        support_dir = os.path.join(folder, "support")
        os.mkdir(support_dir)
        for name, fd in zip(support, fds[4:]):
            _copy(fd, os.path.join(support_dir, name))
    # The judge learns this worker's pid as its own namespace numbers it.
    creds = struct.pack("3i", os.getpid(), os.getuid(), os.getgid())
    conn.sendmsg([json.dumps({"path": candidate}).encode()], [(socket.SOL_SOCKET, socket.SCM_CREDENTIALS, creds)])
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(out_fd, 1)
    os.dup2(out_fd, 2)
    keep = {0, 1, 2, main_fd, broker_fd}
    for fd in range(3, 1024):  # nothing of the zygote's (other judges' connections) stays open
        if fd not in keep:
            with contextlib.suppress(OSError):
                os.close(fd)
    for fd in (main_fd, broker_fd):
        os.set_inheritable(fd, True)
    for name, value in header.get("rlimits", {}).items():
        kind = getattr(resource, str(name), None)
        if isinstance(kind, int) and isinstance(value, int):
            soft, hard = resource.getrlimit(kind)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(kind, (value, value))
    os.environ.clear()
    os.environ.update({str(k): str(v) for k, v in header.get("env", {}).items()})
    os.chdir("/tmp")  # as a started worker: HOME and the working folder are the private /tmp
    program = bytes.fromhex(str(header.get("seccomp", "")))
    if program:
        install_seccomp(program)
    sys.stdout = open(1, "w", closefd=False)  # (the worker replaces them at once)
    sys.stderr = open(2, "w", closefd=False)
    from .main import main as worker_main

    args = ["--module", module, "--file", candidate, "--fd", str(main_fd), "--broker-fd", str(broker_fd)]
    if support_dir:
        args += ["--support-dir", support_dir]
    worker_main(args)


def _copy(fd: int, path: str) -> None:
    with os.fdopen(os.dup(fd), "rb") as src, open(path, "wb") as dst:
        shutil.copyfileobj(src, dst)
    os.close(fd)


def install_seccomp(program: bytes) -> None:
    """Load a seccomp filter (BPF `program`) into this process, no new privileges first."""
    libc = ctypes.CDLL(None, use_errno=True)

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_char_p)]

    prog = SockFprog(len(program) // 8, program)
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.prctl(_PR_SET_SECCOMP, _SECCOMP_MODE_FILTER, ctypes.byref(prog), 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_SECCOMP)")


if __name__ == "__main__":
    main()
