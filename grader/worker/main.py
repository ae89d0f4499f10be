"""Entry point of the worker process:

    python -s -c "import kata_worker.main as m; m.main()" --module paged_kv \
        --file /kata/solution/paged_kv.py --fd 3 --broker-fd 4

It captures the candidate's printed output, arms a stack dump on SIGUSR1 (stacks.py: the
judge asks for one while the import runs and when a call hangs), imports the candidate's
file, says hello to the judge (with the module's handle, or why the import failed) and
serves the judge's requests until it hangs up.
"""

from __future__ import annotations

import argparse
import gc
import importlib.abc
import socket
import sys
import traceback
from typing import Any

from . import stacks
from .loading import import_from_path
from .serve import OutputCapture, WorkerEndpoint, serve
from .wire import FramedSocket

# Packages of the grader that the candidate's code must never import, even where the
# sandbox is unavailable and they sit on disk (a speed bump there; in the sandbox they are
# not visible at all).
_GRADER_PACKAGES = ("reference", "grader", "tests")


class _GraderBlocker(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name.split(".")[0] in _GRADER_PACKAGES:
            raise ImportError(f"the grader's package {name!r} is not available to your code")
        return None


def describe_import_error(exc: BaseException, path: str) -> dict[str, Any]:
    if isinstance(exc, SyntaxError) and (exc.filename in (path, None) or exc.filename.endswith(".py")):
        return {"kind": "syntax", "lineno": exc.lineno or 0, "msg": str(exc.msg)[:500],
                "text": (exc.text or "").rstrip()[:300]}
    frames = [(f.lineno or 0, f.name[:100], (f.line or "").strip()[:300])
              for f in traceback.extract_tb(exc.__traceback__) if f.filename == path][-3:]
    try:
        message = str(exc)[:2000]
    except BaseException:  # noqa: BLE001 - the candidate's __str__ may raise anything
        message = "?"
    return {"kind": "raised", "type": type(exc).__name__[:100], "msg": message, "frames": frames}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="kata_worker")
    parser.add_argument("--module", required=True)
    parser.add_argument("--file", required=True)
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--broker-fd", type=int, default=-1)
    parser.add_argument("--block-grader", action="store_true")
    parser.add_argument("--support-dir", default=None)
    args = parser.parse_args(argv)

    if args.block_grader:
        sys.meta_path.insert(0, _GraderBlocker())
    if sys.path and sys.path[0] in ("", "."):
        del sys.path[0]  # never import from the working folder by accident
    if args.support_dir:
        sys.path.insert(0, args.support_dir)  # the kata's public files (e.g. its model)
    dump_fd = (sys.__stderr__ or sys.stderr).fileno()
    stacks.arm(dump_fd)
    capture = OutputCapture()
    sys.stdout = sys.stderr = capture
    chan = FramedSocket(socket.socket(fileno=args.fd))
    broker = socket.socket(fileno=args.broker_fd) if args.broker_fd >= 0 else None
    try:
        module = import_from_path(args.file, args.module)
    except BaseException as exc:  # noqa: BLE001 - any failure of candidate code is a verdict
        out, dropped = capture.drain()
        chan.send(("hello", False, describe_import_error(exc, args.file), {"out": out, "dropped": dropped}))
        return
    # What the import made (torch, often) stays: later collections need not walk it again.
    gc.freeze()
    stacks.arm_c_fallback(dump_fd)
    endpoint = WorkerEndpoint(chan, module, args.file, capture)
    out, dropped = capture.drain()
    chan.send(("hello", True, endpoint.hello(), {"out": out, "dropped": dropped,
                                                  "torch": "torch" in sys.modules}))
    serve(endpoint, broker)
