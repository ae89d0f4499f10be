"""How the worker process is started: inside a bubblewrap sandbox where the OS offers one,
otherwise as a plain process with limits ("uncontained").

Contained (Linux with ``bwrap``):

* new user, PID, network, IPC, UTS and cgroup namespaces; no network at all; the process
  sees only itself (no ``/proc/<judge>``), dies with the judge, runs in a new session;
* a filesystem of read-only binds: the Python installation (with the grader's own packages
  masked), the worker's package as ``/kata/kata_worker``, the solution file, and a private
  size-limited ``/tmp``; nothing of the checkout, the home folder or the coach's files;
* an empty environment but for PATH, locale and Python settings;
* no process creation (``seccomp``: threads only), and rlimits on address space, file size,
  CPU time and open files.

Uncontained: the same rlimits and (on Linux) the same seccomp filter, a scrubbed
environment, a temporary working folder and an import blocker for the grader's packages;
but the filesystem and the network are the user's. ``kata homework review`` refuses to run
this way unless the coach says so.
"""

from __future__ import annotations

import functools
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from grader.engine import seccomp
from grader.engine.limits import Limits

WORKER_PACKAGE = Path(__file__).resolve().parents[1] / "worker"
ENV_SANDBOX = "KATA_SANDBOX"  # auto (default) | bwrap (required) | none
_KEPT_ENV = ("LANG", "LC_ALL", "TZ", "TRITON_INTERPRET", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
             "CUDA_VISIBLE_DEVICES")
_BOOT = "import kata_worker.main as m; m.main()"


@dataclass
class WorkerCommand:
    argv: list[str]
    env: dict[str, str]
    cwd: str
    preexec: Callable[[], None]
    pass_fds: tuple[int, ...]
    contained: bool
    candidate_path: str
    notes: list[str] = field(default_factory=list)
    cleanup: list[Path] = field(default_factory=list)


def mode() -> str:
    value = os.environ.get(ENV_SANDBOX, "auto").strip().lower()
    return value if value in ("auto", "bwrap", "none") else "auto"


@functools.lru_cache(maxsize=1)
def bwrap_available() -> str | None:
    """Why bwrap cannot be used here, or None when it can (probed once per process)."""
    exe = shutil.which("bwrap")
    if exe is None:
        return "bubblewrap (bwrap) is not installed"
    probe = [exe, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--proc", "/proc",
             "--dev", "/dev", "true"]
    try:
        result = subprocess.run(probe, capture_output=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bwrap does not start ({exc})"
    if result.returncode != 0:
        return f"bwrap cannot create namespaces here ({result.stderr.decode(errors='replace').strip()[:200]})"
    return None


def build(solution: Path, module: str, fds: tuple[int, int], tmp: Path, limits: Limits,
          info_fd: int | None = None, support: tuple[Path, ...] = (),
          extra_env: dict[str, str] | None = None) -> WorkerCommand:
    """The command that starts a worker for `solution` (registered as `module`), talking to
    the judge on the socket `fds[0]` (and `fds[1]` for extra channels). `extra_env`: more
    environment for the worker (a sanitizer's runtime and options, see grader/cpp)."""
    wanted = mode()
    why_not = bwrap_available() if wanted != "none" else "KATA_SANDBOX=none"
    if wanted == "bwrap" and why_not:
        raise RuntimeError(f"KATA_SANDBOX=bwrap, but {why_not}")
    if why_not is None:
        return _bwrap(solution, module, fds, limits, info_fd, support, extra_env or {})
    return _plain(solution, module, fds, tmp, limits, why_not, support, extra_env or {})


def _suffix(solution: Path) -> str:
    name = solution.name
    return name[name.index("."):] if name.endswith(".so") and "." in name else ".py"


def _python() -> str:
    # As invoked, not resolved: a virtual environment is found from its own bin/python.
    return os.path.abspath(sys.executable)


def _worker_args(module: str, file: str, fds: tuple[int, int], block: bool,
                 support_dir: str | None) -> list[str]:
    args = ["-s", "-c", _BOOT, "--module", module, "--file", file, "--fd", str(fds[0]),
            "--broker-fd", str(fds[1])]
    if support_dir:
        args += ["--support-dir", support_dir]
    return args + (["--block-grader"] if block else [])


def _base_env() -> dict[str, str]:
    env = {k: os.environ[k] for k in _KEPT_ENV if k in os.environ}
    env.update({"PATH": "/usr/bin:/bin", "HOME": "/tmp", "PYTHONHASHSEED": "0",
                "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", "MPLBACKEND": "Agg",
                "PYTHONIOENCODING": "utf-8"})
    return env


def _rlimits(limits: Limits, with_seccomp: bool) -> Callable[[], None]:
    judge = os.getpid()

    def apply() -> None:
        import resource

        # The worker dies with the judge, even when the judge is SIGKILLed (a hang past its
        # limit, the run's total limit): it runs in a session of its own, which the
        # runner's kill of the judge's process group does not reach. A plain worker needs
        # this; under bwrap (--die-with-parent) it applies to bwrap's own process.
        if sys.platform.startswith("linux"):
            import ctypes
            import signal

            PR_SET_PDEATHSIG = 1
            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
            if os.getppid() != judge:  # the judge died before that took effect
                os._exit(1)

        def cap(kind: int, value: int) -> None:
            soft, hard = resource.getrlimit(kind)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            resource.setrlimit(kind, (value, value))

        # The judge's own memory limit (grader/engine/judge_env.py, a soft RLIMIT_DATA) is
        # not the worker's: its limit is the address space below.
        _, data_hard = resource.getrlimit(resource.RLIMIT_DATA)
        resource.setrlimit(resource.RLIMIT_DATA, (data_hard, data_hard))
        if limits.memory_bytes:
            cap(resource.RLIMIT_AS, limits.memory_bytes)
        if limits.max_file_bytes:
            cap(resource.RLIMIT_FSIZE, limits.max_file_bytes)
        if limits.cpu_seconds:
            cap(resource.RLIMIT_CPU, limits.cpu_seconds)
        cap(resource.RLIMIT_NOFILE, limits.open_files)
        cap(resource.RLIMIT_CORE, 0)
        if with_seccomp:
            seccomp.install_in_this_process()

    return apply


def _python_roots() -> list[str]:
    """Folders the interpreter and its packages live in."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix,
             os.path.dirname(_python())}
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(path)
    roots.update(site.getsitepackages())
    real = sorted({os.path.realpath(r) for r in roots if os.path.isdir(r)} |
                  {r for r in roots if os.path.isdir(r)})
    # Keep the outermost folders only.
    out: list[str] = []
    for root in real:
        if not any(root == o or root.startswith(o.rstrip("/") + "/") for o in out):
            out.append(root)
    return out


def _grader_folders() -> list[str]:
    """The grader's own packages on disk: masked inside the sandbox."""
    import grader

    folders = [os.path.dirname(grader.__file__)]
    try:
        import reference

        folders.append(os.path.dirname(reference.__file__))
    except ImportError:
        pass
    return [os.path.realpath(f) for f in folders]


def _bwrap(solution: Path, module: str, fds: tuple[int, int], limits: Limits,
           info_fd: int | None, support: tuple[Path, ...], extra_env: dict[str, str]) -> WorkerCommand:
    exe = shutil.which("bwrap") or "bwrap"
    # The candidate's file keeps its suffix: a compiled C++ solution is an extension module
    # (module.cpython-311-x86_64-linux-gnu.so), which the worker imports by that suffix.
    inside = f"/kata/solution/{module}{_suffix(solution)}"
    # A virtual environment is bound at a neutral path: the sandbox never sees where the
    # user keeps it (a home folder, a checkout). Python finds it from its own bin/python.
    venv = os.path.abspath(sys.prefix) if sys.prefix != sys.base_prefix else None
    python = f"/kata/venv/bin/{os.path.basename(sys.executable)}" if venv else _python()

    opts = _contained_opts(limits, venv)
    opts += ["--ro-bind", str(WORKER_PACKAGE), "/kata/kata_worker",
             "--ro-bind", str(solution.resolve()), inside]
    for path in support:
        opts += ["--ro-bind", str(path.resolve()), f"/kata/support/{path.name}"]
    opts += ["--remount-ro", "/", "--chdir", "/tmp", "--clearenv"]
    env = {**_base_env(), "PYTHONPATH": "/kata", **extra_env}
    for key, value in env.items():
        opts += ["--setenv", key, value]
    pass_fds = list(fds)
    if seccomp.supported():
        read_fd = _program_fd(seccomp.no_fork_program())
        opts += ["--seccomp", str(read_fd)]
        pass_fds.append(read_fd)
    if info_fd is not None:
        opts += ["--info-fd", str(info_fd)]
        pass_fds.append(info_fd)
    # The options travel on a pipe (--args), not on the command line: the sandbox can see
    # bwrap's own process, and its command line would show the real paths bound inside.
    args_fd = _program_fd(b"".join(a.encode() + b"\0" for a in opts))
    pass_fds.append(args_fd)
    argv = [exe, "--args", str(args_fd), "--", python] + _worker_args(
        module, inside, fds, block=False, support_dir="/kata/support" if support else None)
    return WorkerCommand(argv=argv, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, cwd="/",
                         preexec=_rlimits(limits, with_seccomp=False), pass_fds=tuple(pass_fds),
                         contained=True, candidate_path=inside)


WORKER_ZYGOTE_SOCKET = "worker.sock"  # in the folder bound at /kata/rt


def worker_zygote_command(rt_dir: Path, limits: Limits) -> WorkerCommand | None:
    """The command that starts the warm grader's worker zygote (grader/worker/zygote.py) in
    the sandbox a worker gets, but with `rt_dir` bound at /kata/rt (where it listens) and
    without the no-fork filter (each forked worker installs it), no solution bound (each
    request passes its file); None where the sandbox is unavailable (no zygote then)."""
    if mode() == "none" or bwrap_available() is not None:
        return None
    exe = shutil.which("bwrap") or "bwrap"
    venv = os.path.abspath(sys.prefix) if sys.prefix != sys.base_prefix else None
    python = f"/kata/venv/bin/{os.path.basename(sys.executable)}" if venv else _python()
    opts = _contained_opts(limits, venv)
    opts += ["--ro-bind", str(WORKER_PACKAGE), "/kata/kata_worker",
             "--bind", str(rt_dir), "/kata/rt", "--remount-ro", "/", "--chdir", "/tmp", "--clearenv"]
    for key, value in {**_base_env(), "PYTHONPATH": "/kata"}.items():
        opts += ["--setenv", key, value]
    args_fd = _program_fd(b"".join(a.encode() + b"\0" for a in opts))
    argv = [exe, "--args", str(args_fd), "--", python, "-s", "-c",
            "import kata_worker.zygote as z; z.main()", "--socket", f"/kata/rt/{WORKER_ZYGOTE_SOCKET}"]
    return WorkerCommand(argv=argv, env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")}, cwd="/",
                         preexec=_rlimits(limits, with_seccomp=False), pass_fds=(args_fd,),
                         contained=True, candidate_path="")


def _contained_opts(limits: Limits, venv: str | None) -> list[str]:
    """The worker's sandbox: namespaces, the system and Python read-only (the grader's own
    packages masked), /proc, /dev, a private /tmp; the caller binds the rest."""
    def seen_as(path: str) -> str:
        return "/kata/venv" + path[len(venv):] if venv and (path + "/").startswith(venv + "/") else path

    opts = ["--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL",
            "--uid", "65534", "--gid", "65534", "--hostname", "kata-worker"]
    opts += system_binds()
    opts += ["--ro-bind-try", "/sys/devices/system/cpu", "/sys/devices/system/cpu"]
    roots = _python_roots()
    if venv:
        opts += ["--ro-bind", venv, "/kata/venv"]
    for root in roots:
        if not root.startswith("/usr/") and seen_as(root) == root:
            opts += ["--ro-bind", root, root]
    for folder in _grader_folders():
        if any((folder + "/").startswith(r.rstrip("/") + "/") for r in roots + ["/usr"]) or seen_as(folder) != folder:
            opts += ["--tmpfs", seen_as(folder)]  # installed next to the libraries: hide it
    for dev in sorted(Path("/dev").glob("nvidia*")):
        opts += ["--dev-bind", str(dev), str(dev)]
    return opts + ["--proc", "/proc", "--dev", "/dev", "--size", str(limits.tmp_bytes), "--tmpfs", "/tmp"]


def system_binds() -> list[str]:
    """bwrap options binding the system's programs and libraries read-only (/usr, the /lib
    folders or their links, what the dynamic loader reads in /etc): the worker's sandbox and
    the C++ compiler's share them."""
    opts: list[str] = []
    for top in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(top):
            opts += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            opts += ["--ro-bind", top, top]
    opts += ["--ro-bind", "/usr", "/usr"]
    for etc in ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
                "/etc/alternatives", "/etc/nsswitch.conf"):
        opts += ["--ro-bind-try", etc, etc]
    return opts


def _program_fd(program: bytes) -> int:
    """A pipe's read end holding `program` (bwrap reads it once at start)."""
    read_fd, write_fd = os.pipe()
    os.write(write_fd, program)
    os.close(write_fd)
    return read_fd


def _plain(solution: Path, module: str, fds: tuple[int, int], tmp: Path, limits: Limits,
           why: str, support: tuple[Path, ...], extra_env: dict[str, str]) -> WorkerCommand:
    pkg_root = tmp / "pkg"
    target = pkg_root / "kata_worker"
    if not target.exists():
        shutil.copytree(WORKER_PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__"))
    support_dir = tmp / "support"
    if support:
        support_dir.mkdir(exist_ok=True)
        for path in support:
            shutil.copyfile(path, support_dir / path.name)
    work = tmp / "cwd"
    work.mkdir(parents=True, exist_ok=True)
    env = {**_base_env(), "PYTHONPATH": str(pkg_root), "HOME": str(work), "TMPDIR": str(work),
           "PATH": os.environ.get("PATH", "/usr/bin:/bin"), **extra_env}
    candidate = str(solution.resolve())
    return WorkerCommand(argv=[_python()] + _worker_args(module, candidate, fds, block=True,
                                                          support_dir=str(support_dir) if support else None), env=env,
                         cwd=str(work), preexec=_rlimits(limits, with_seccomp=seccomp.supported()),
                         pass_fds=tuple(fds), contained=False, candidate_path=candidate,
                         notes=[f"uncontained: {why}"])
