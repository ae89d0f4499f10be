"""The reproduction snippet of a failure, as `kata repro` writes it, runs next to the graded
file and prints what the scorecard reported as "got": one corpus bug per kata.

Each case is graded with the levels up to the bug's own (as the corpus tests do), the
snippet is written by `kata repro` next to a copy of the buggy file named as the kata's
module, and run in a fresh interpreter whose only way to the code is that folder.
"""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grader.cli import last_run
from grader.cli.app import app
from tests.kata_testing import corpus_file, corpus_manifest, grade_file, kata
from tests.snippet_output import prints_got, run_alone

# (kata, buggy file, the failing test whose snippet is run); one per kata (lora's rebuilds the
# nn.Linear the test built), then harder cases
CASES = [
    ("paged-kv", "buggy_block_count_floor_plus_one.py", "test_block_table_is_a_fresh_list"),
    ("mha", "buggy_softmax_query_axis.py", "test_scale_argument_multiplies_scores"),
    ("rope", "buggy_exponent_without_two.py", "test_rotate_half_worked_example"),
    ("sampling", "buggy_top_p_one_still_filters.py", "test_top_p_one_disables_top_p"),
    ("scheduler", "buggy_budget_counts_requests.py", "test_token_budget_respected"),
    ("lora", "buggy_B_random_init.py", "test_init_output_equals_base"),
    ("ppo", "buggy_ratio_inverted.py", "test_policy_loss_worked_example"),
    # the model the suite built is rebuilt from its seed (slow_decode_model.TinyLM(...))
    ("slow-decode", "buggy_decode_position_off_by_one.py", "test_tokens_match_generate_slow"),
    # a function the module proxy cached in an earlier example is still `sampling.<name>`
    ("sampling", "buggy_top_p_drops_crossing_token.py", "test_top_p_keeps_the_crossing_token"),
]


def repro_script(slug: str, buggy: Path, test: str, folder: Path, level: int) -> tuple[Path, str]:
    """Grade a copy of `buggy` named as the kata's module, let `kata repro` write the snippet
    of `test` next to it; the script and the reported "got"."""
    solution = folder / f"{kata(slug).module}.py"
    shutil.copy(buggy, solution)
    for support in kata(slug).support_paths:
        shutil.copy(support, folder / support.name)
    card = grade_file(slug, solution, levels=frozenset(range(1, level + 1))).to_dict()
    failure = next(t for t in card["tests"] if t["name"] == test)
    assert not failure["passed"], f"{buggy.name} passes {test}"
    last_run.save(card, "grade")
    result = CliRunner().invoke(app, ["repro", slug, "--test", test], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return folder / f"repro_{test.removeprefix('test_')}.py", str(failure["details"]["got"])


@pytest.mark.parametrize("slug, buggy_name, test", CASES,
                         ids=[c[0] if isinstance(c, tuple) else None for c in CASES])
def test_the_snippet_runs_next_to_the_buggy_file_and_prints_got(slug, buggy_name, test, tmp_path):
    entry = next(e for e in corpus_manifest(slug).buggy if e.file == buggy_name)
    script, got = repro_script(slug, corpus_file(slug, buggy_name), test, tmp_path, entry.level)
    ast.parse(script.read_text())  # no placeholder in it
    ran = run_alone(script)
    assert ran.returncode == 0, f"{script.name} failed:\n{ran.stderr[-2000:]}\n--- script ---\n{script.read_text()}"
    assert prints_got(got, ran.stdout), f"got {got!r} is not in what it printed:\n{ran.stdout[-2000:]}"


def test_prints_got_can_tell_a_different_value():
    assert prints_got("tensor([[[[7.0]]]], shape=(1, 1, 1, 1), dtype=float32)", "tensor([[[[7.]]]])\n")
    assert not prints_got("tensor([[[[7.0]]]], shape=(1, 1, 1, 1), dtype=float32)", "tensor([[[[7.5]]]])\n")
    assert not prints_got("tensor([0.5, 0.25])", "tensor([0.5000])\n")
    assert prints_got("torch.tensor([-0.8125, 0., 0.], dtype=torch.float64)",
                      "(tensor(-0.8125, dtype=torch.float64), tensor(0., dtype=torch.float64), tensor(0.))")
    assert prints_got("'returned 0'", "True\n0\n") and not prints_got("'returned 0'", "True\n[0]\n")
    assert prints_got("torch.tensor([[-inf, 2., -inf]])", "tensor([[-inf, 2.0000, -inf]])")
    assert prints_got("'kept mass 0.5 in tensor([[-0.6931,    -inf]])'", "tensor([[-0.6931,    -inf]])\n")
    summary = "3 tokens: {'prefill': {'q97': 2, 'q98': 1}, 'decode': []}"
    assert prints_got(summary, "None\nBatch(prefill={'q97': 2, 'q98': 1}, decode=[])\n")
    assert not prints_got(summary, "None\nBatch(prefill={'q97': 1, 'q98': 1}, decode=[])\n")


def test_large_tensors_render_as_valid_python_exact_when_small_enough():
    """A tensor too big for a literal is rebuilt exactly from base64 (up to ~24 KB) or shown as
    zeros with a note on its own line: the snippet always compiles."""
    import torch

    from grader.engine.judge_bridge import RemoteObject
    from grader.engine.snippet import render
    from grader.engine.transcript import Call, Transcript

    module = object.__new__(RemoteObject)
    medium, big = torch.randn(70, 70), torch.randn(200, 200)
    transcript = Transcript()
    transcript.add(Call("callmethod", module, "f", (medium, 3), (("x", big),)))
    text = render(transcript, module="m", module_proxy=module, test="t", seed=1, message="boom")
    compile(text, "snippet", "exec")
    assert "import base64" in text and "shown as zeros" in text
    packed = next(line for line in text.splitlines() if "m.f(" in line)
    scope = {"torch": torch, "base64": __import__("base64")}
    rebuilt = eval(packed.removeprefix("print(m.f(").split(", 3, x=")[0], scope)
    assert torch.equal(rebuilt, medium)
