"""The judge is bounded: what one message from the worker may make it build, the memory it
may take in all, and the environment it starts with (grader/worker/bridge.py,
grader/engine/judge_env.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.engine.judge_env import judge_environment
from grader.worker.bridge import Endpoint
from grader.worker.wire import FramedSocket, ReplyTooLarge
from tests.kata_testing import REPO_ROOT

ATTACKS = Path(__file__).parent / "hostile" / "attacks"
PEAK_BOUND_BYTES = 512 * 1024**2  # every process of the bomb's grading stays under (126 MiB measured; 846 MiB unbounded, cut at its call limit)


class _Bounded(Endpoint):
    DECODE_FACTOR = 4


def _decode_message(endpoint: Endpoint, tree, frame_bytes: int):
    endpoint._local.budget = endpoint._decode_budget(frame_bytes)
    try:
        return endpoint.decode(tree)
    finally:
        endpoint._local.budget = None


def _endpoint() -> Endpoint:
    import socket

    a, _ = socket.socketpair()
    return _Bounded(FramedSocket(a), sign=+1)


def test_a_message_that_names_one_tensor_many_times_is_refused():
    payload = bytes(1024**2)
    tensor = ("X", 0, "uint8", (len(payload),), None, payload, "cpu", False, False, None, None)
    endpoint = _endpoint()
    assert len(_decode_message(endpoint, ("T", [tensor] * 8), len(payload) + 100)) == 8  # 8 MB: under the floor
    with pytest.raises(ReplyTooLarge, match="refused"):
        _decode_message(endpoint, ("T", [tensor] * 100), len(payload) + 100)  # 100 MB from 1 MB


def test_nested_lists_that_double_at_every_level_are_refused():
    tree = ("L0", [1] * 1000)
    for _ in range(30):
        tree = ("L0", [tree, tree])  # 2**30 lists of 1000 from a few kB
    with pytest.raises(ReplyTooLarge):
        _decode_message(_endpoint(), tree, 10_000)


def test_a_large_honest_message_is_rebuilt():
    payload = bytes(100 * 1024**2)
    tensor = ("X", 0, "uint8", (len(payload),), None, payload, "cpu", False, False, None, None)
    assert _decode_message(_endpoint(), tensor, len(payload) + 100).numel() == len(payload)


def test_the_judge_sees_only_the_allowed_part_of_the_callers_environment():
    caller = {"PATH": "/bin", "HOME": "/home/coach", "LC_ALL": "C", "CUDA_VISIBLE_DEVICES": "0",
              "KATA_SANDBOX": "bwrap", "AWS_SECRET_ACCESS_KEY": "x", "GITHUB_TOKEN": "y",
              "SSH_AUTH_SOCK": "/tmp/agent", "KATA_COACH_SECRET": "z", "PYTHONSTARTUP": "/evil.py"}
    assert judge_environment(caller) == {"PATH": "/bin", "HOME": "/home/coach", "LC_ALL": "C",
                                         "CUDA_VISIBLE_DEVICES": "0", "KATA_SANDBOX": "bwrap"}


_PEAK_SCRIPT = """
import json, resource, sys
from pathlib import Path
sys.path.insert(0, {root!r})
from tests.kata_testing import grade_file
card = grade_file("paged-kv", Path(sys.argv[1]), tests=frozenset({{"test_allocate_zero_needs_no_block"}}))
peak_kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({{"peak_bytes": peak_kib * 1024, "tests": [[t.passed, t.message] for t in card.tests]}}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="ru_maxrss in KiB, as Linux gives it")
def test_a_reply_bomb_fails_its_test_and_the_judge_stays_small(tmp_path):
    """96 namings of one 16 MB tensor (1.5 GB to rebuild, 16 MB on the wire): the judge
    refuses the reply, the test fails saying so, and no process of the grading (the
    judge, its worker) grows past PEAK_BOUND_BYTES."""
    solution = tmp_path / "paged_kv.py"
    solution.write_text((ATTACKS / "reply_bomb.py").read_text())
    env = {k: v for k, v in os.environ.items() if k != "KATA_JUDGE_ZYGOTE"}  # a judge of its own
    out = subprocess.run([sys.executable, "-c", _PEAK_SCRIPT.format(root=str(REPO_ROOT)), str(solution)],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    [(passed, message)] = result["tests"]
    assert not passed and "refuses to rebuild" in message, message
    assert result["peak_bytes"] < PEAK_BOUND_BYTES, result["peak_bytes"]


def test_an_expanded_tensor_changed_in_place_takes_the_new_values():
    """The worker gets a plain copy of an expanded (stride-0) input; when the candidate
    changes it in place, the judge's view cannot be written element by element: it takes
    the new values as its own storage (the change is seen, as a mutated input), where the
    write used to break the connection and read as a crash of the candidate's process."""
    import torch

    from grader.worker import codec

    base = torch.randn(1, 4)
    view = base.expand(3, 4)
    codec.refresh_tensor(view, torch.zeros(3, 4))
    assert torch.equal(view, torch.zeros(3, 4))
    assert not torch.equal(base, torch.zeros(1, 4))
