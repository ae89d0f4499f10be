"""Judges forked from a zygote: a process that has imported, once, what every judge imports
(pytest, hypothesis, numpy, torch), and forks a judge for each grading.

A judge started as ``python -m pytest`` spends about 2 s of CPU importing those before it
runs a test, which is most of what a small grading costs. Where one process grades many
files (a coach's review, see `many_gradings`; the project's corpus checks, with
``KATA_JUDGE_ZYGOTE=1``) the runner starts one zygote and forks every judge from it instead:
the same command line, environment, working directory, CPUs and pipes, in a session of its own, with nothing of a grading left in the zygote (it
never runs a test, and never imports the grader's plugin, a suite, the reference or the
candidate's code). A single ``kata grade`` does not use it: it would pay the zygote's start
for one judge.

What a judge's interpreter fixes at its start (sys.path, the hash seed, the bytecode cache,
the thread counts) is the zygote's: a grading whose judge would start differently is spawned
as usual (see `startup_key`), and so is every grading once the zygote has failed.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import threading
import traceback
from typing import Any, Iterator

from grader.engine.config import rebind_results_fd

ENV_ZYGOTE = "KATA_JUDGE_ZYGOTE"
# What an interpreter reads at its start, and so must be the same in the zygote and the judge.
STARTUP_ENV = ("PYTHONPATH", "PYTHONHASHSEED", "PYTHONSAFEPATH", "PYTHONDONTWRITEBYTECODE",
               "PYTHONNOUSERSITE", "PYTHONHOME", "PYTHONWARNINGS", "PYTHONOPTIMIZE",
               "OMP_NUM_THREADS", "MKL_NUM_THREADS", "PYTHONMALLOC", "PYTHONUTF8")
# What every judge imports but its kata's suite, loaded once here. torch._dynamo: torch.optim's
# first step imports it (through torch._disable_dynamo), about 1 s of every judge whose
# reference trains (train-memory). grader.engine.session (and what it imports), hypothesis's
# pytest plugin and pytest's built-in plugins (see preload): about 30 ms of each judge's start
# (pdb for _pytest.debugging, ElementTree for junitxml, ...). grader.engine.plugin itself stays
# out: it looks at the judge's CPUs as it is imported.
_PRELOAD = ("pytest", "hypothesis", "numpy", "torch", "torch._dynamo", "_hypothesis_pytestplugin",
            "grader.engine.session", "grader.worker.loading")
_MAX_REQUEST_BYTES = 16_000_000

_zygote: "Zygote | None" = None  # this process's, started on first use
_failed = False  # once it has failed, judges are started as usual
_uses = 0  # many_gradings() blocks now running
_lock = threading.Lock()


def wanted() -> bool:
    return _uses > 0 or os.environ.get(ENV_ZYGOTE, "").strip() == "1"


@contextlib.contextmanager
def many_gradings() -> Iterator[None]:
    """Within it, this process's judges are forked from a zygote (a coach's review grades
    every kata of every bundle); it is closed when the last such block ends."""
    global _uses, _zygote
    with _lock:
        _uses += 1
    try:
        yield
    finally:
        with _lock:
            _uses -= 1
            done = None if wanted() else _zygote
            if done is not None:
                _zygote = None
        if done is not None:
            done.close()


def startup_key(env: dict[str, str]) -> tuple:
    return (sys.executable, *(env.get(name) for name in STARTUP_ENV))


# ------------------------------------------------------------------------ the runner's side


class ZygoteChild:
    """A judge forked by the zygote, as much of subprocess.Popen as the runner uses: pid,
    poll(), wait(timeout), returncode and stdout (its output, stdout and stderr together)."""

    def __init__(self, pid: int, conn: socket.socket, stdout: Any) -> None:
        self.pid = pid
        self.stdout = stdout
        self.returncode: int | None = None
        self._conn = conn
        self._done = threading.Event()
        threading.Thread(target=self._await_exit, daemon=True, name=f"kata-judge-{pid}-exit").start()

    def _await_exit(self) -> None:
        code = -signal.SIGKILL  # the zygote went away without a word: the judge is gone too
        try:
            with self._conn, self._conn.makefile("rb") as reader:
                line = reader.readline(4096)
                if line:
                    code = int(json.loads(line)["exit"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
        self.returncode = code
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode if self._done.is_set() else None

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired("judge", timeout or 0.0)
        assert self.returncode is not None
        return self.returncode


class Zygote:
    """The runner's handle on one zygote process."""

    def __init__(self, env: dict[str, str]) -> None:
        self.key = startup_key(env)
        self.control, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.lock = threading.Lock()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "grader.engine.zygote", str(theirs.fileno())],
                env={k: v for k, v in env.items() if not k.startswith("KATA_")},
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, pass_fds=(theirs.fileno(),), cwd="/")
        finally:
            theirs.close()

    def spawn(self, cmd: list[str], env: dict[str, str], cwd: str, results_fd: int,
              cpus: set[int] | None) -> ZygoteChild:
        """Fork a judge running `cmd` (``python -m pytest ...``). OSError when the zygote
        cannot (the caller then spawns it as usual)."""
        if cmd[1:3] != ["-m", "pytest"]:
            raise OSError("the zygote only forks pytest judges")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        out_read, out_write = os.pipe()
        try:
            request = json.dumps({"args": cmd[3:], "env": env, "cwd": cwd,
                                  "cpus": sorted(cpus) if cpus else None}).encode() + b"\n"
            with self.lock:
                socket.send_fds(self.control, [b"j"], [theirs.fileno(), out_write, results_fd])
            ours.sendall(request)
            reply = ours.makefile("rb").readline(4096)
            pid = int(json.loads(reply)["pid"]) if reply else 0
        except (OSError, ValueError, KeyError, TypeError) as exc:
            ours.close()
            os.close(out_read)
            raise OSError(f"the judge zygote did not answer: {exc}") from exc
        finally:
            theirs.close()
            os.close(out_write)
        if pid <= 0:
            ours.close()
            os.close(out_read)
            raise OSError("the judge zygote could not fork")
        return ZygoteChild(pid, ours, os.fdopen(out_read, "rb"))

    def close(self) -> None:
        self.control.close()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()


def spawn_judge(cmd: list[str], env: dict[str, str], cwd: str, results_fd: int,
                cpus: set[int] | None) -> ZygoteChild | None:
    """A judge forked from this process's zygote (started on first use), or None where the
    judge must be spawned as usual: no zygote wanted, one that failed, or a judge whose
    interpreter would start differently from the zygote's."""
    global _zygote, _failed
    if not wanted() or _failed:
        return None
    with _lock:
        if _zygote is None:
            try:
                _zygote = Zygote(env)
            except OSError:
                _failed = True
                return None
        zygote = _zygote
    if zygote.key != startup_key(env):
        return None
    try:
        return zygote.spawn(cmd, env, cwd, results_fd, cpus)
    except OSError:
        _failed = True  # the next gradings spawn their judges as usual
        return None


# ------------------------------------------------------------------------ the zygote's side


def serve(control: socket.socket) -> None:
    """Fork a judge for each request on `control` until the runner closes it; tell each
    request's connection the judge's pid, then its exit code."""
    preload()
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_write, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    sel = selectors.DefaultSelector()
    sel.register(control, selectors.EVENT_READ)
    sel.register(wake_read, selectors.EVENT_READ)
    conns: dict[int, socket.socket] = {}
    while True:
        for key, _ in sel.select():
            if key.fileobj is control:
                try:
                    msg, fds, _, _ = socket.recv_fds(control, 16, 3)
                except OSError:
                    return
                if not msg:
                    return  # the runner is gone; its judges are its to kill
                if len(fds) != 3:
                    for fd in fds:
                        os.close(fd)
                    continue
                pid, conn = _fork_judge(fds)
                if conn is not None:
                    conns[pid] = conn
            else:
                try:
                    os.read(wake_read, 4096)
                except BlockingIOError:
                    pass
                _reap(conns)


def preload() -> None:
    """Import what every judge imports (here and in the warm service, grader/engine/warm.py)."""
    for name in (*_PRELOAD, *_pytest_plugins()):
        try:
            __import__(name)
        except Exception:  # noqa: BLE001 - a judge that needs it fails there, as it would anyway
            pass
    # What is loaded now is never collected: out of the collector's sight, a judge that never
    # uses torch does not scan its objects at each full collection (and pages stay shared).
    gc.collect()
    gc.freeze()


def _pytest_plugins() -> list[str]:
    """pytest's built-in plugins, which every pytest run imports."""
    try:
        from _pytest.config import default_plugins
    except ImportError:  # pragma: no cover - pytest moved them
        return []
    return [f"_pytest.{name}" for name in default_plugins]


def _reap(conns: dict[int, socket.socket]) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = conns.pop(pid, None)
        if conn is not None:
            try:
                conn.sendall(json.dumps({"exit": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
            except OSError:
                pass
            conn.close()


def _fork_judge(fds: list[int], extra_env: dict[str, str] | None = None) -> tuple[int, socket.socket | None]:
    conn_fd, out_fd, results_fd = fds
    conn = socket.socket(fileno=conn_fd)
    try:
        raw = conn.makefile("rb").readline(_MAX_REQUEST_BYTES)
        request = json.loads(raw)
        args, env, cwd = list(request["args"]), {**dict(request["env"]), **(extra_env or {})}, str(request["cwd"])
        rebind_results_fd(env, results_fd)  # its number in the judge
        cpus = request.get("cpus")
    except (OSError, ValueError, KeyError, TypeError):  # (a ConfigError is a ValueError)
        conn.close()
        os.close(out_fd)
        os.close(results_fd)
        return 0, None
    ready_read, ready_write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the judge
        os.close(ready_read)
        _judge(args, env, cwd, cpus, out_fd, results_fd, ready_write)
    os.close(ready_write)
    os.close(out_fd)
    os.close(results_fd)
    os.read(ready_read, 1)  # its own session first: the runner kills it by process group
    os.close(ready_read)
    try:
        conn.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    except OSError:
        pass
    return pid, conn


def _judge(args: list[str], env: dict[str, str], cwd: str, cpus: list[int] | None, out_fd: int,
           results_fd: int, ready_fd: int) -> None:
    """In the forked child: become the judge `python -m pytest <args>` would have been."""
    code = 70
    try:
        os.setsid()
        os.write(ready_fd, b"r")
        os.close(ready_fd)
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        # As a started judge finds it: Python installs its KeyboardInterrupt handler unless
        # SIGINT came in ignored (a background job of a shell without job control), and the
        # zygote, started the same way, kept what it came in with.
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, signal.default_int_handler)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out_fd, 1)
        os.dup2(out_fd, 2)
        # Nothing of the zygote's (its control socket, other judges' connections and pipes)
        # stays open in the judge: only stdio and the results pipe, as with pass_fds.
        os.closerange(3, results_fd)
        os.closerange(results_fd + 1, os.sysconf("SC_OPEN_MAX"))
        os.set_inheritable(results_fd, True)
        os.environ.clear()
        os.environ.update(env)
        os.chdir(cwd)
        if cpus:
            try:
                os.sched_setaffinity(0, set(cpus))
            except OSError:
                pass
        sys.argv = [sys.executable, *args]
        import pytest

        code = int(pytest.main(args))
        import atexit

        atexit._run_exitfuncs()  # as at an interpreter's exit
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - reported on the judge's output, like a crash
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001 - a stream already gone must not stop the exit
                pass
        os._exit(code)


if __name__ == "__main__":
    serve(socket.socket(fileno=int(sys.argv[1])))
