"""One worker process as the judge sees it: start it (sandboxed when possible), wait for its
hello, ask it for a stack dump when a call hangs, kill it.

The worker's own stdout/stderr (C-level writes, the stack dumps) are drained by a thread,
which takes the dumps out (DumpFilter); what the candidate's code prints through Python
arrives with each answer instead.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

from grader.engine import sandbox
from grader.engine.limits import Limits
from grader.engine.judge_bridge import JudgeEndpoint
from grader.engine.worker_cpu import WorkerCpu
from grader.worker.stacks import BEGIN as _DUMP_BEGIN
from grader.worker.stacks import END as _DUMP_END
from grader.worker.wire import FramedSocket, PeerClosed, WireError

_MAX_RAW_OUTPUT = 64_000
_MAX_DUMP = 256_000  # bytes of one stack dump kept (100 threads of 100 frames fit)
ENV_WORKER_ZYGOTE = "KATA_WORKER_ZYGOTE"  # the warm grader's worker zygote's socket (grader/engine/warm.py)
# Where a sanitizer's report begins in the worker's output (grader/cpp/sanitizer.py reads it).
_SANITIZER_REPORT = re.compile(rb"(?m)^(?:==\d+==|WARNING: ThreadSanitizer|\S+:\d+:\d+: runtime error: |"
                               rb"AddressSanitizer: CHECK failed)")


class WorkerProcess:
    def __init__(self, solution: Path, module: str, limits: Limits,
                 on_output: Callable[[str, int], None], support: tuple[Path, ...] = (),
                 extra_env: dict[str, str] | None = None) -> None:
        self.solution, self.module, self.limits = solution, module, limits
        self.extra_env = dict(extra_env or {})
        self.support = support
        self.on_output = on_output
        self.tmp = Path(tempfile.mkdtemp(prefix="kata-worker-"))
        self.proc: subprocess.Popen | None = None
        self.endpoint: JudgeEndpoint | None = None
        self.command: sandbox.WorkerCommand | None = None
        self.raw = bytearray()
        self.raw_lock = threading.Lock()
        self.inner_pid: int | None = None
        self.dumping = False  # fd output after a request for faulthandler's dump is the dump
        self.dumps = DumpFilter()
        self._dump_arrived = threading.Condition()
        self.reporting = False  # a sanitizer's report has begun: the rest is the report
        self._info_fd: int | None = None
        self._init_pid: int | None = None  # bwrap's init in the sandbox, whose child is Python
        self._main: socket.socket | None = None
        self._broker: socket.socket | None = None
        self.notes_forked: str | None = None

    @property
    def contained(self) -> bool:
        return bool(self.command and self.command.contained)

    @property
    def candidate_path(self) -> str:
        return self.command.candidate_path if self.command else str(self.solution)

    def start(self) -> None:
        if self._start_forked():
            return
        main, main_child = socket.socketpair()
        broker, broker_child = socket.socketpair()
        info_r, info_w = os.pipe()
        cmd = sandbox.build(self.solution, self.module, (main_child.fileno(), broker_child.fileno()),
                            self.tmp, self.limits, info_fd=info_w, support=self.support,
                            extra_env=self.extra_env)
        self.command = cmd
        try:
            self.proc = subprocess.Popen(cmd.argv, env=cmd.env, cwd=cmd.cwd, pass_fds=cmd.pass_fds,
                                         stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                         stderr=subprocess.STDOUT, start_new_session=True,
                                         preexec_fn=cmd.preexec)
        finally:
            for fd in set(cmd.pass_fds) - {main_child.fileno(), broker_child.fileno()}:
                _close(fd)
            main_child.close()
            broker_child.close()
            _close(info_w)
        self._info_fd = info_r if cmd.contained else None
        if not cmd.contained:
            _close(info_r)
            self.inner_pid = self.proc.pid
        self._main, self._broker = main, broker
        threading.Thread(target=self._drain, daemon=True).start()

    def _start_forked(self) -> bool:
        """Fork the worker from the warm grader's worker zygote (grader/worker/zygote.py),
        where this judge came from the warm grader and the worker needs nothing a zygote
        cannot give (a preloaded sanitizer runtime); False: start it as usual."""
        path = os.environ.get(ENV_WORKER_ZYGOTE, "")
        if not path or self.extra_env or not sandbox.seccomp.supported() or sandbox.mode() == "none":
            return False
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        main, main_child = socket.socketpair()
        broker, broker_child = socket.socketpair()
        out_read, out_write = os.pipe()
        opened: list[int] = []
        try:
            conn.settimeout(10.0)
            conn.connect(path)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
            opened = [os.open(self.solution, os.O_RDONLY)] + [os.open(p, os.O_RDONLY) for p in self.support]
            limits = {"RLIMIT_AS": self.limits.memory_bytes, "RLIMIT_FSIZE": self.limits.max_file_bytes,
                      "RLIMIT_CPU": self.limits.cpu_seconds, "RLIMIT_NOFILE": self.limits.open_files,
                      "RLIMIT_CORE": 0}
            header = {"module": self.module, "suffix": sandbox._suffix(self.solution),
                      "support": [p.name for p in self.support],
                      "rlimits": {k: v for k, v in limits.items() if v is not None},
                      "seccomp": sandbox.seccomp.no_fork_program().hex(),
                      "env": {**sandbox._base_env(), "PYTHONPATH": "/kata"}}
            socket.send_fds(conn, [json.dumps(header).encode()],
                            [main_child.fileno(), broker_child.fileno(), out_write, *opened])
            msg, ancdata, _, _ = conn.recvmsg(65536, socket.CMSG_SPACE(struct.calcsize("3i")))
            pid = next((struct.unpack("3i", data[:12])[0] for level, kind, data in ancdata
                        if level == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS), 0)
            reply = json.loads(msg) if msg else {}
            if pid <= 0 or "path" not in reply:
                raise OSError(f"the worker zygote answered {reply!r}")
        except (OSError, ValueError) as exc:
            for sock in (conn, main, broker):
                sock.close()
            os.close(out_read)
            self.notes_forked = f"worker started cold ({exc})"
            return False
        finally:
            for fd in opened + [out_write]:
                _close(fd)
            main_child.close()
            broker_child.close()
        conn.settimeout(None)
        self.proc = _ForkedWorker(pid, conn, os.fdopen(out_read, "rb"))  # type: ignore[assignment]
        self.inner_pid = pid
        self.command = sandbox.WorkerCommand(argv=[], env={}, cwd="/", preexec=lambda: None, pass_fds=(),
                                             contained=True, candidate_path=str(reply["path"]),
                                             notes=[])
        self._main, self._broker = main, broker
        threading.Thread(target=self._drain, daemon=True).start()
        return True

    def _drain(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        while True:
            chunk = self.proc.stdout.read1(65536) if hasattr(self.proc.stdout, "read1") else self.proc.stdout.read(65536)
            made = self.dumps.made
            end = not chunk
            chunk = self.dumps.feed(chunk)
            if self.dumps.made != made:
                with self._dump_arrived:
                    self._dump_arrived.notify_all()
            if end and not chunk:
                return
            with self.raw_lock:
                if len(self.raw) < _MAX_RAW_OUTPUT:
                    self.raw.extend(chunk[: _MAX_RAW_OUTPUT - len(self.raw)])
            if self.dumping or self.reporting:
                continue
            if "LD_PRELOAD" in self.extra_env:  # --sanitize: its report becomes the test's message
                found = _SANITIZER_REPORT.search(chunk)
                if found is not None:
                    self.reporting = True
                    chunk = chunk[:found.start()]
            if chunk:
                self.on_output(chunk.decode(errors="replace"), 0)

    def hello(self) -> tuple[bool, Any, JudgeEndpoint | None]:
        """Wait for the worker's hello: (True, module proxy, endpoint) or (False, why, None)."""
        assert self._main is not None and self._broker is not None
        chan = FramedSocket(self._main)
        try:
            msg = chan.recv()
        except (PeerClosed, WireError, OSError) as exc:
            return False, {"kind": "crashed", "msg": self.exit_text() or str(exc)}, None
        if type(msg) is not tuple or len(msg) != 4 or msg[0] != "hello":
            return False, {"kind": "crashed", "msg": "the worker broke the protocol at start"}, None
        _, ok, body, extra = msg
        endpoint = JudgeEndpoint(chan, self._broker, on_output=self.on_output)
        pid = self.python_pid()
        if pid is not None:  # the kernel's account of its CPU, for efficiency verdicts
            cpu = WorkerCpu(pid)
            endpoint.cpu = cpu if cpu.available else None
        endpoint.on_extra(extra)
        if not ok:
            return False, body if type(body) is dict else {"kind": "crashed", "msg": "?"}, None
        self.endpoint = endpoint
        try:
            return True, endpoint.module(body), endpoint
        except (WireError, ValueError) as exc:
            return False, {"kind": "crashed", "msg": f"the worker sent a bad hello ({exc})"}, None

    def python_pid(self) -> int | None:
        """The worker's Python process (inside the sandbox: bwrap's child), or None."""
        if self.inner_pid is not None:
            return self.inner_pid
        if self._info_fd is not None:
            ready, _, _ = select.select([self._info_fd], [], [], 0.5)
            if ready:
                try:
                    info = json.loads(os.read(self._info_fd, 65536) or b"{}")
                    self._init_pid = int(info.get("child-pid", 0)) or None
                except (ValueError, OSError):
                    pass
                _close(self._info_fd)
                self._info_fd = None
        if self._init_pid is not None:
            init = self._init_pid
            try:
                children = Path(f"/proc/{init}/task/{init}/children").read_text().split()
            except OSError:
                children = []
            if not children:
                return init  # Python not started yet (asked early, while it imports): not kept
            self.inner_pid = int(children[0])
        return self.inner_pid

    def hello_ready(self, wait_s: float) -> bool:
        """Whether the worker's hello (or its end) can be read, waiting up to wait_s."""
        assert self._main is not None
        ready, _, _ = select.select([self._main], [], [], wait_s)
        return bool(ready)

    def stack_dump(self, wait_s: float = 0.5) -> str:
        """The worker's thread stacks right now, as faulthandler writes them, or "".

        The worker's own dump (SIGUSR1, grader/worker/stacks.py) comes once its main thread is
        back in Python code. One that has not come in wait_s, once the import is done (a call
        stuck inside C code), is asked of faulthandler instead (SIGUSR2)."""
        pid = self.python_pid()
        if pid is None or self.proc is None or self.proc.poll() is not None:
            return ""
        with self._dump_arrived:
            made = self.dumps.made
        try:
            os.kill(pid, signal.SIGUSR1)
        except (ProcessLookupError, PermissionError):
            return ""
        with self._dump_arrived:
            if self._dump_arrived.wait_for(lambda: self.dumps.made > made, timeout=wait_s):
                return self.dumps.last
        if self.endpoint is None:
            return ""  # still importing: faulthandler is not armed, and its dump is the unsafe one
        return self._faulthandler_dump(pid, wait_s)

    def _faulthandler_dump(self, pid: int, wait_s: float) -> str:
        with self.raw_lock:
            start = len(self.raw)
        self.dumping = True
        try:
            os.kill(pid, signal.SIGUSR2)
        except (ProcessLookupError, PermissionError):
            return ""
        deadline = time.monotonic() + wait_s
        text, seen = "", -1
        while time.monotonic() < deadline:
            time.sleep(0.05)
            with self.raw_lock:
                text = bytes(self.raw[start:]).decode(errors="replace")
            if "most recent call first" in text and len(text) == seen:
                break  # the dump has stopped growing
            seen = len(text)
        return text

    def candidate_frames(self, dump: str) -> list[tuple[int, str]]:
        """(line, function) of the dump's frames in the candidate's file, innermost first."""
        path = re.escape(self.candidate_path)
        return [(int(m.group(1)), m.group(2))
                for m in re.finditer(rf'File "{path}", line (\d+) in (\S+)', dump)]

    def raw_output(self) -> str:
        """What the worker's process wrote to its own stdout/stderr (C-level writes, a
        sanitizer's report), up to a cap."""
        with self.raw_lock:
            return bytes(self.raw).decode(errors="replace")

    def exit_text(self) -> str:
        if self.proc is None:
            return ""
        try:
            code = self.proc.wait(timeout=1.0)
        except subprocess.TimeoutExpired:
            return ""
        if self.contained and code > 128:
            code = -(code - 128)  # bwrap reports a child killed by signal N as 128 + N
        if code < 0:
            try:
                return f"killed by signal {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit code {code}"

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, *, wait: bool = True) -> None:
        """Kill the worker; with `wait`, until it is gone (a judge that is about to exit need
        not: the kill is sent, and the worker zygote or the kernel reaps the rest)."""
        if self.proc is not None:
            for pid in filter(None, (self.inner_pid, self.proc.pid)):
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            try:
                if wait:
                    self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL does not time out
                pass
        for sock in (self._main, self._broker):
            if sock is not None:
                try:
                    sock.close()
                except OSError:
                    pass
        if self._info_fd is not None:
            _close(self._info_fd)
            self._info_fd = None
        if isinstance(self.proc, _ForkedWorker):
            self.proc.close()
        shutil.rmtree(self.tmp, ignore_errors=True)


class _ForkedWorker:
    """A worker forked by the worker zygote, as much of subprocess.Popen as WorkerProcess
    uses: pid (this namespace's), stdout, poll(), wait(timeout), returncode. The zygote says
    the exit code on the connection; closing the connection kills the worker."""

    def __init__(self, pid: int, conn: socket.socket, stdout: Any) -> None:
        self.pid, self.stdout = pid, stdout
        self.returncode: int | None = None
        self._conn = conn

    def poll(self) -> int | None:
        if self.returncode is None:
            self._read(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._read(timeout)
        if self.returncode is None:
            raise subprocess.TimeoutExpired("worker", timeout or 0.0)
        return self.returncode

    def _read(self, timeout: float | None) -> None:
        try:
            ready, _, _ = select.select([self._conn], [], [], timeout)
            if not ready:
                return
            msg = self._conn.recv(4096)
            self.returncode = int(json.loads(msg)["exit"]) if msg else -signal.SIGKILL
        except (OSError, ValueError, KeyError, TypeError):
            self.returncode = -signal.SIGKILL
        with contextlib.suppress(OSError):
            self._conn.close()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._conn.close()


class DumpFilter:
    """Takes the worker's stack dumps (each framed by grader/worker/stacks.py's BEGIN and END)
    out of its fd output, however the reads cut it: what the candidate's code wrote goes on,
    the newest dump is `last`, `made` counts them."""

    def __init__(self) -> None:
        self.made = 0
        self.last = ""
        self._inside: bytearray | None = None  # a dump begun, not ended
        self._held = b""  # an end of a read that may be the start of a marker

    def feed(self, chunk: bytes) -> bytes:
        """The part of `chunk` that is not a dump. b"" marks the end of the output: what was
        held back (a marker's start that never went on) is output after all."""
        if not chunk:
            held, self._held = self._held, b""
            return held if self._inside is None else b""
        data, self._held = self._held + chunk, b""
        out = bytearray()
        while data:
            marker = _DUMP_BEGIN if self._inside is None else _DUMP_END
            at = data.find(marker)
            if at < 0:
                keep = _marker_start(data, marker)
                body, self._held = data[:len(data) - keep], data[len(data) - keep:]
            else:
                body = data[:at]
            if self._inside is None:
                out += body
            elif len(self._inside) < _MAX_DUMP:
                self._inside += body[:_MAX_DUMP - len(self._inside)]
            if at < 0:
                break
            if self._inside is None:
                self._inside = bytearray()
            else:
                self.last, self.made, self._inside = self._inside.decode(errors="replace"), self.made + 1, None
            data = data[at + len(marker):]
        return bytes(out)


def _marker_start(data: bytes, marker: bytes) -> int:
    """How many bytes at the end of `data` could be the start of `marker`."""
    for size in range(min(len(marker) - 1, len(data)), 0, -1):
        if data.endswith(marker[:size]):
            return size
    return 0


def _close(fd: int) -> None:
    try:
        os.close(fd)
    except OSError:
        pass
