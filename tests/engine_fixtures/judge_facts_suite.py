"""What a judge's interpreter looks like from inside, reported as a failure's message: the
same whether the judge was started or forked from a zygote (tests/test_zygote.py)."""

import os
import signal
import sys

from grader.engine.config import JudgeConfig
from grader.protocol import expect, kata_test


@kata_test(level=1, category="correctness", description="the judge's interpreter")
def test_report(solution):
    facts = {
        "hash": hash("kata"),  # PYTHONHASHSEED=0
        "safe_path": sys.flags.safe_path,
        "cwd_on_path": "" in sys.path or os.getcwd() in sys.path,
        "path": [p for p in sys.path if "site-packages" not in p],
        "dont_write_bytecode": sys.dont_write_bytecode,
        "stdin_is_null": os.path.realpath("/proc/self/fd/0") == os.devnull,
        "session_leader": os.getsid(0) == os.getpid(),
        "sigint": signal.getsignal(signal.SIGINT) is signal.default_int_handler,
        "sigchld": signal.getsignal(signal.SIGCHLD) == signal.SIG_DFL,
        "results_fd": JudgeConfig.from_env().results_fd is not None,
        "grader_modules": sorted(m for m in sys.modules if m.startswith("grader.")
                                 and m not in ("grader.engine.zygote",)),
        "open_fds": len(os.listdir("/proc/self/fd")),  # nothing of the zygote's left open
        "add": solution.add(2, 3),
    }
    expect(False, f"facts {facts}")
