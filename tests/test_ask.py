"""`kata ask`: the matcher (grader/ask.py) picks the clarification a paraphrase means, leaves
what the statement does not settle to the candidate, and never shows a level a mock has not
revealed; the command records every question, lists the topics, and fails as a usage error.

The two question sets here (kv-budget and a rate-limiter fixture) are the ones THRESHOLD was
chosen on; tests/interview/<module>.toml, written by the statements' authors, are the ones it
is checked on (test_paraphrases_of_every_kata_pick_their_clarification)."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grader import clock
from grader.ask import ANSWERED, LATER, LATER_LEVEL, THRESHOLD, YOUR_CALL, YOURS, Matcher
from grader.catalog import load_catalog
from grader.cli.app import app
from grader.statement import Clarification, Statement, load_statement, parse_statement
from grader.store import Store
from tests.kata_testing import REPO_ROOT

runner = CliRunner()
INTERVIEW_SETS = REPO_ROOT / "tests" / "interview"
MIN_ACCURACY = 0.8

FIXTURE = '''\
# Rate limiter

## Level 1 — Token bucket (~20 min)

### Ask

> "Write a token-bucket rate limiter: `TokenBucket(rate, capacity)` and `allow(now, cost=1)`,
> which says whether a request may go ahead."

### Clarifications

- **Does the bucket start full or empty?** `start-full`
  It starts full: `capacity` tokens at the first call.
  Keys: start, initial, full, empty, beginning, first
- **Which clock do we use?** `clock`
  The caller passes `now` in seconds, as a float; never read the system clock. Time never
  goes backwards.
  Keys: time, clock, now, seconds, timestamp, monotonic
- **Can a request cost more than one token?** `cost`
  Yes: `allow(now, cost)` with an integer cost of at least 1; a cost above the capacity is
  always refused.
  Keys: cost, weight, tokens, several, more than one
- **Are refills continuous or in whole tokens?** `refill`
  Continuous: `rate` tokens a second, fractions kept, never above the capacity.
  Keys: refill, rate, fractional, continuous, cap, capacity
- **Does a refused request consume tokens?** `refused`
  No: a refusal leaves the bucket as it was.
  Keys: refused, rejected, denied, consume, deduct

### Spec

Tokens refill continuously at `rate` a second up to `capacity`; `allow` takes `cost` tokens
when there are that many, and refuses otherwise without taking any.

## Level 2 — Per-client limits (~20 min)

### Ask

> "Now one limiter for many clients: `RateLimiter(rate, capacity, idle_s)` with
> `allow(client_id, now, cost=1)`."

### Clarifications

- **Do clients share a bucket?** `per-client`
  No: each client id has a bucket of its own, created full at its first request.
  Keys: client, user, key, separate, own, shared
- **Should idle buckets be evicted?** `evict`
  Yes: a bucket that has been full for `idle_s` seconds is dropped; it would come back full
  anyway.
  Keys: evict, idle, memory, drop, cleanup, forget
- **Which arguments are errors?** `errors`
  `ValueError` for a rate or capacity that is not positive, and for a cost below 1.
  Keys: error, valueerror, invalid, negative, zero

### Spec

A dictionary from client id to TokenBucket; buckets full for `idle_s` seconds are dropped.

## Follow-up questions

- How would you share the limits across several servers?
'''

# (question, the clarification it means, or "" for a question the statement leaves open)
FIXTURE_PARAPHRASES = [
    ("Is the bucket initially full?", "start-full"),
    ("How many tokens are available at the very first request?", "start-full"),
    ("Should I call time.time() myself?", "clock"),
    ("Is the time argument monotonic?", "clock"),
    ("Can one call take several tokens at once?", "cost"),
    ("What if a request's cost exceeds the capacity?", "cost"),
    ("Do we add tokens gradually or once per second?", "refill"),
    ("Can the bucket hold more than its capacity after a long pause?", "refill"),
    ("If I deny a request, do I still subtract its tokens?", "refused"),
    ("Does each user get their own bucket?", "per-client"),
    ("Is the limit global or per client?", "per-client"),
    ("Do we need to clean up buckets for clients that went quiet?", "evict"),
    ("What if the rate is zero?", "errors"),
    ("Should a negative capacity raise?", "errors"),
    ("Can I use a dataclass?", ""),
    ("Should I make it thread-safe?", ""),
    ("What should I name the class?", ""),
    ("Is Python 3.11 fine?", ""),
]

KV_BUDGET_PARAPHRASES = [
    ("Do the linear layers have bias terms?", "arch"),
    ("Is it LayerNorm or RMSNorm, and does the norm have a bias?", "arch"),
    ("What does the feed-forward block look like: gate, up and down projections?", "arch"),
    ("Should I follow the Hugging Face Llama implementation for what is in each layer?", "arch"),
    ("Does the output projection share weights with the token embedding?", "tied"),
    ("Is the lm_head a separate matrix from the embedding table?", "tied"),
    ("If embeddings are tied, do I count that matrix twice?", "tied"),
    ("Can I compute the per-head dimension as d_model divided by the number of heads?", "head-dim"),
    ("How wide are the q, k and v projections?", "head-dim"),
    ("Might head_dim times n_heads differ from the hidden size?", "head-dim"),
    ("With tensor parallelism, does every GPU keep a full copy of the embedding?", "tp-split"),
    ("Which weights get sharded across the GPUs in Megatron-style TP?", "tp-split"),
    ("Are the norms duplicated on each rank or split?", "tp-split"),
    ("What should happen if tp doesn't divide the number of KV heads?", "tp-invalid"),
    ("Is tp=0 allowed?", "tp-invalid"),
    ("Which tp values should raise an exception?", "tp-invalid"),
    ("Does the KV cache store both keys and values for each layer?", "kv-count"),
    ("Is the per-token cache cost summed over all layers?", "kv-count"),
    ("With GQA, do I count the query heads or the KV heads in the cache?", "kv-count"),
    ("For 4-bit quantized weights, is bytes per parameter 0.5?", "fractional"),
    ("Should weight_bytes be rounded to a whole number of bytes?", "fractional"),
    ("Can the bytes per parameter be a non-integer?", "fractional"),
    ("How much HBM is left for the KV cache after loading the weights?", "free-memory"),
    ("Is the reserve fraction applied to total memory or to what remains after the weights?", "free-memory"),
    ("What memory budget does the cache get?", "free-memory"),
    ("If a sequence needs 17 tokens with block size 16, does it take two blocks?", "whole-blocks"),
    ("Do I round the token capacity down to a multiple of the block size?", "whole-blocks"),
    ("Can a partially filled page count fractionally?", "whole-blocks"),
    ("What does block_size None mean for capacity?", "unpaged"),
    ("Without paging, does a sequence use exactly context_len tokens?", "unpaged"),
    ("If the cache isn't paged, is it one contiguous pool?", "unpaged"),
    ("If not even one sequence fits, should I raise or return 0?", "zero"),
    ("What if the context length is longer than the whole KV pool?", "zero"),
    ("When the weights fill the memory exactly, what is the capacity?", "zero"),
    ("Which inputs to max_kv_tokens should raise ValueError?", "capacity-errors"),
    ("Is a reserve_fraction of 1.0 or a negative one valid?", "capacity-errors"),
    ("What if the model weights don't fit on the GPU at all?", "capacity-errors"),
    ("What memory traffic counts in a decode step?", "decode-bytes"),
    ("Do we read all the weights once per step regardless of batch size?", "decode-bytes"),
    ("Should I include activation reads or KV writes in the bytes moved?", "decode-bytes"),
    ("How many FLOPs per parameter per generated token?", "decode-flops"),
    ("Does the attention over the context add FLOPs on top of 2N?", "decode-flops"),
    ("Do I count the embedding parameters in the compute?", "decode-flops"),
    ("Is the step time the sum of memory time and compute time, or the max?", "roofline"),
    ("Do compute and memory transfers overlap?", "roofline"),
    ("How do I decide whether a step is memory-bound or compute-bound?", "roofline"),
    ("During prefill does each prompt token attend to all prompt tokens or just the earlier ones?",
     "causal-prefill"),
    ("Is there a causal mask in prefill?", "causal-prefill"),
    ("How many times does the prefill read the weights?", "causal-prefill"),
    ("What should decode_step_time do with batch 0?", "roofline-errors"),
    ("Should a negative prompt length raise?", "roofline-errors"),
    ("Which arguments to prefill_time are invalid?", "roofline-errors"),
    ("Can I use numpy?", ""),
    ("Should I write unit tests as I go?", ""),
    ("Is it okay to add type hints?", ""),
    ("What Python version are we on?", ""),
    ("Can I look up the Llama config online?", ""),
    ("Do you care more about readability or speed?", ""),
    ("Should I add docstrings to my functions?", ""),
    ("How long do I have for this part?", ""),
    ("Can I add helper functions to the module?", ""),
    ("Should I memoize results across calls?", ""),
    ("Should I print debug output?", ""),
    ("What's your favourite GPU?", ""),
]


def fixture_statement() -> Statement:
    return parse_statement(FIXTURE, "rate_limiter/README.md")


def kv_budget_statement() -> Statement:
    return load_statement(load_catalog().get("kv-budget"))


def misses(statement: Statement, pairs: list[tuple[str, str]]) -> list[str]:
    """The questions answered otherwise than expected, each with what it got (every level
    counts, as outside a session)."""
    matcher = Matcher(statement.clarifications())
    out = []
    for question, expected in pairs:
        reply = matcher.ask(question)
        got = reply.clarification.id if reply.clarification else ""
        if got != expected:
            out.append(f"{question!r}: expected {expected or 'your call'}, got {got or 'your call'} "
                       f"(score {reply.score})")
    return out


def accuracy(statement: Statement, pairs: list[tuple[str, str]]) -> float:
    return 1 - len(misses(statement, pairs)) / len(pairs)


# ----------------------------------------------------------------------------- the matcher


@pytest.mark.parametrize("statement, pairs", [(fixture_statement(), FIXTURE_PARAPHRASES),
                                               (kv_budget_statement(), KV_BUDGET_PARAPHRASES)],
                         ids=["fixture", "kv-budget"])
def test_paraphrases_pick_their_clarification(statement, pairs):
    assert accuracy(statement, pairs) >= MIN_ACCURACY, "\n".join(misses(statement, pairs))


@pytest.mark.parametrize("question, expected", [
    ("Does each user get their own bucket?", "per-client"),
    ("Is the time argument monotonic?", "clock"),
    ("If I deny a request, do I still subtract its tokens?", "refused"),
])
def test_a_clear_paraphrase_gets_its_answer(question, expected):
    reply = Matcher(fixture_statement().clarifications()).ask(question)
    assert reply.outcome == ANSWERED and reply.clarification.id == expected
    assert reply.answer == reply.clarification.answer and reply.score >= THRESHOLD


@pytest.mark.parametrize("question", ["Can I use numpy?", "What Python version are we on?",
                                      "Should I make it thread-safe?", "", "?!", "What is it?"])
def test_what_the_statement_leaves_open_is_the_candidates_call(question):
    for statement in (fixture_statement(), kv_budget_statement()):
        reply = Matcher(statement.clarifications()).ask(question)
        assert (reply.outcome, reply.answer, reply.clarification) == (YOURS, YOUR_CALL, None)
        assert reply.score < THRESHOLD


def test_a_later_levels_question_is_later_and_names_nothing_of_it():
    matcher = Matcher(fixture_statement().clarifications())
    reply = matcher.ask("Does each user get their own bucket?", revealed={1})
    assert (reply.outcome, reply.answer, reply.clarification) == (LATER_LEVEL, LATER, None)
    assert reply.to_dict() == {"question": "Does each user get their own bucket?", "answer": LATER,
                               "clarification": None, "score": reply.score}
    # once level 2 is revealed, the same question is answered
    assert matcher.ask("Does each user get their own bucket?", revealed={1, 2}).clarification.id == "per-client"


def test_a_revealed_clarification_as_close_as_a_later_one_is_answered():
    """kv-budget's levels 2 and 3 both ask "Which arguments are errors?": at level 2 of a
    mock a question like it is level 2's, not "later"."""
    matcher = Matcher(kv_budget_statement().clarifications())
    reworded = "Which arguments count as errors?"
    assert matcher.ask(reworded).clarification.id == "roofline-errors"  # BM25's first, level 3
    assert matcher.ask(reworded, revealed={1, 2}).clarification.id == "capacity-errors"


def test_a_listed_question_asked_as_listed_gets_its_own_answer():
    """Asked word for word, a revealed clarification's question gets its answer whatever BM25
    ranks first (scheduler's "Which requests does add_request reject?" ranked another
    clarification about add_request first); two levels asking alike: the later level's."""
    matcher = Matcher(kv_budget_statement().clarifications())
    assert matcher.ask("Which arguments are errors?", revealed={1, 2}).clarification.id == "capacity-errors"
    assert matcher.ask("which ARGUMENTS are errors", revealed={1, 2, 3}).clarification.id == "roofline-errors"
    assert matcher.ask("Which arguments are errors?", revealed={1}).outcome == LATER_LEVEL


def every_layered_kata():
    return [k for k in load_catalog().katas.values() if load_statement(k).clarifications()]


@pytest.mark.parametrize("kata", every_layered_kata(), ids=lambda k: k.slug)
def test_every_clarifications_own_question_gets_its_own_answer_once_revealed(kata):
    """Asked in a mock that has reached its level (as `kata ask --list` shows it), a
    clarification's written question is answered by that clarification, score 1.0."""
    statement = load_statement(kata)
    matcher = Matcher(statement.clarifications())
    for c in statement.clarifications():
        reply = matcher.ask(c.question, revealed=range(1, c.level + 1))
        assert reply.clarification == c, f"{c.id}: {c.question!r} got {reply.clarification}"
        assert reply.score == 1.0


def test_the_reply_is_deterministic_and_ties_go_to_the_first_written():
    twin = [Clarification("first", 1, "Is the cache paged?", "Yes.", ("page",)),
            Clarification("second", 1, "Is the cache paged?", "Yes.", ("page",))]
    matcher = Matcher(twin)
    assert {matcher.ask("paged cache?").clarification.id for _ in range(5)} == {"first"}
    statement = kv_budget_statement()
    assert ([Matcher(statement.clarifications()).ask(q) for q, _ in KV_BUDGET_PARAPHRASES]
            == [Matcher(statement.clarifications()).ask(q) for q, _ in KV_BUDGET_PARAPHRASES])


def test_a_kata_with_a_single_clarification_still_answers():
    """With one document every IDF is negative in BM25Okapi; the floor keeps it answerable."""
    only = Matcher([Clarification("tie", 1, "How are ties broken?", "Lowest index first.", ("tie", "order"))])
    assert only.ask("What about ties?").clarification.id == "tie"
    assert only.ask("Can I use numpy?").outcome == YOURS
    assert Matcher([]).ask("Anything?").outcome == YOURS


# ----------------------------------------------------------------------------- the project's sets


def interview_sets() -> list[tuple[str, Path]]:
    return [(k.slug, INTERVIEW_SETS / f"{k.module}.toml") for k in load_catalog().katas.values()]


def load_pairs(path: Path, statement: Statement) -> list[tuple[str, str]]:
    """A tests/interview/<module>.toml: [[paraphrases]] tables, each a question and the id of
    the clarification it means (expect = "" for one the statement leaves open)."""
    with path.open("rb") as f:
        data = tomllib.load(f)
    ids = {c.id for c in statement.clarifications()}
    pairs = []
    for i, item in enumerate(data.get("paraphrases", []), start=1):
        question, expected = item.get("question"), item.get("expect")
        assert isinstance(question, str) and question.strip() and isinstance(expected, str), (
            f"{path.name}: paraphrase {i} needs question = \"...\" and expect = \"<id>\" or \"\"")
        assert expected in ids | {""}, f"{path.name}: paraphrase {i} expects '{expected}', not a clarification id"
        pairs.append((question, expected))
    return pairs


@pytest.mark.parametrize("slug, path", interview_sets(), ids=lambda v: v if isinstance(v, str) else "")
def test_paraphrases_of_every_kata_pick_their_clarification(slug, path):
    if not path.exists():
        pytest.skip(f"no {path.relative_to(REPO_ROOT)} yet")
    statement = load_statement(load_catalog().get(slug))
    pairs = load_pairs(path, statement)
    assert len([p for p in pairs if p[1]]) >= 5, f"{path.name}: at least 5 paraphrases of clarifications"
    assert accuracy(statement, pairs) >= MIN_ACCURACY, "\n".join(misses(statement, pairs))


def test_paraphrases_of_all_katas_together_pick_their_clarification():
    found = [(slug, path) for slug, path in interview_sets() if path.exists()]
    if not found:
        pytest.skip("no tests/interview/<module>.toml yet")
    total = wrong = 0
    for slug, path in found:
        statement = load_statement(load_catalog().get(slug))
        pairs = load_pairs(path, statement)
        total, wrong = total + len(pairs), wrong + len(misses(statement, pairs))
    assert 1 - wrong / total >= MIN_ACCURACY, f"{wrong} of {total} questions answered otherwise than expected"


# ----------------------------------------------------------------------------- the command


def invoke(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def fake_clock():
    fake = clock.FakeClock()
    with clock.use(fake):
        yield fake


@pytest.fixture
def kv_mock(fake_clock):
    """A mock of kv-budget at level 1."""
    assert invoke("mock", "kv-budget").exit_code == 0
    with Store() as store:
        [session] = store.mock_sessions("kv-budget")
    return session


def asks(session_id: int | None = None) -> list:
    with Store() as store:
        return store.events("kv-budget", session_id=session_id, kind="ask")


def leaks(text: str, c: Clarification) -> list[str]:
    """The pieces of clarification `c` found in `text`: its question, any line of its answer,
    its id, any key (as a word)."""
    flat = " ".join(text.split())
    found = [piece for piece in (c.question, *c.answer.splitlines()) if " ".join(piece.split()) in flat]
    found += [term for term in (c.id, *c.keys) if re.search(rf"(?<!\w){re.escape(term)}(?!\w)", flat, re.I)]
    return found


def test_in_a_mock_a_revealed_levels_question_is_answered_and_recorded(kv_mock, fake_clock):
    fake_clock.advance(minutes=3)
    result = invoke("ask", "Do K and V both count?")
    assert result.exit_code == 0, result.output
    kv_count = next(c for c in kv_budget_statement().clarifications() if c.id == "kv-count")
    flat = " ".join(result.output.split())
    assert kv_count.question in flat and "Both K and V, in every layer" in flat
    [event] = asks(kv_mock.id)
    assert event.at == kv_mock.started_at + 180 and event.level == 1
    assert event.data == {"question": "Do K and V both count?", "clarification": "kv-count",
                          "score": event.data["score"], "outcome": ANSWERED}
    assert event.data["score"] >= THRESHOLD
    assert "questions asked in this mock: 1" in flat


def test_in_a_mock_a_later_levels_question_reveals_nothing_of_it(kv_mock):
    asked = "Do memory time and compute time overlap?"  # the roofline of level 3
    roofline = next(c for c in kv_budget_statement().clarifications() if c.id == "roofline")
    assert Matcher(kv_budget_statement().clarifications()).ask(asked).clarification == roofline
    shown = invoke("ask", asked)
    as_json = invoke("ask", asked, "--json")
    assert shown.exit_code == 0 and as_json.exit_code == 0
    assert LATER in " ".join(shown.output.split())
    assert leaks(shown.output.replace(asked, ""), roofline) == []
    data = json.loads(as_json.output)
    assert data == {"question": asked, "answer": LATER, "clarification": None, "score": data["score"]}
    assert leaks(json.dumps({k: v for k, v in data.items() if k != "question"}), roofline) == []
    # nor in the record, which a debrief may print
    for event in asks(kv_mock.id):
        assert event.data["clarification"] is None and event.data["outcome"] == LATER_LEVEL
        assert leaks(json.dumps({k: v for k, v in event.data.items() if k != "question"}), roofline) == []
        assert event.level == 1


def test_json_prints_the_question_the_answer_the_id_and_the_score(kv_mock):
    data = json.loads(invoke("ask", "Is the LM head tied to the embedding?", "--json").output)
    assert set(data) == {"question", "answer", "clarification", "score"}
    assert data["clarification"] == "tied" and data["answer"].startswith("Only when `tied_embeddings`")
    assert isinstance(data["score"], float) and data["score"] >= THRESHOLD
    off = json.loads(invoke("ask", "Can I use numpy?", "--json").output)
    assert off == {"question": "Can I use numpy?", "answer": YOUR_CALL, "clarification": None, "score": 0.0}


def test_outside_a_session_every_level_counts_and_the_ask_is_recorded():
    result = invoke("ask", "Do memory time and compute time overlap?", "kv-budget", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["clarification"] == "roofline"
    [event] = asks()
    assert event.session_id is None and event.level == 3 and event.data["clarification"] == "roofline"
    assert "asked outside a session" in invoke("ask", "Can I use numpy?", "kv-budget").output


def test_list_shows_the_revealed_levels_questions_and_is_recorded(kv_mock):
    result = invoke("ask", "--list")
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    statement = kv_budget_statement()
    for c in statement.clarifications([1]):
        assert c.question in flat and c.answer.splitlines()[0] not in flat
    for c in statement.clarifications([2, 3]):
        assert c.question not in flat, c.id
    assert "Level 2" not in flat and "Capacity" not in flat
    [event] = asks(kv_mock.id)
    assert event.data == {"list": True} and event.level == 1
    listed = json.loads(invoke("ask", "--list", "--json").output)
    assert [lv["level"] for lv in listed["levels"]] == [1]
    assert [t["clarification"] for t in listed["levels"][0]["topics"]] == [c.id for c in statement.clarifications([1])]


def test_list_outside_a_session_shows_every_level():
    result = invoke("ask", "--list", "kv-budget")
    assert result.exit_code == 0, result.output
    flat = " ".join(result.output.split())
    assert all(c.question in flat for c in kv_budget_statement().clarifications())
    assert asks()[0].data == {"list": True} and asks()[0].session_id is None


@pytest.mark.parametrize("args, message, next_step", [
    (("Do K and V both count?",), "no session is running, so name the kata", 'kata ask "QUESTION" SLUG'),
    (("   ", "kv-budget"), "the question is empty", "kata ask"),
    ((), "no question to ask", "kata ask --list"),
    (("kv-budget",), "no question to ask (kv-budget is a kata)", 'kata ask "QUESTION" kv-budget'),
    (("--list", "Do K and V both count?"), "--list shows the topics and takes no question", "kata ask --list"),
    (("Anything?", "no-such-kata"), "unknown kata 'no-such-kata'", "kata list"),
])
def test_usage_errors_exit_2_with_a_next_step(args, message, next_step):
    result = invoke("ask", *args)
    assert result.exit_code == 2
    flat = " ".join(result.output.split())
    assert f"error: {message}" in flat and "next:" in flat and next_step in flat
    assert asks() == []


def test_a_statement_without_clarifications_says_where_the_rules_are(monkeypatch):
    """A coach's kata in the first skeleton states every rule and has nothing to ask."""
    from grader.cli.commands import ask as ask_command

    plain = parse_statement("# Plain\n\n## The interview\n\nAdd.\n\n## Level 1 — Add (~10 min)\n\nAdd two ints."
                            "\n\n## Worked example\n\n1 + 1 = 2\n\n## Constraints\n\nints\n\n"
                            "## Follow-up questions\n\n- Why?\n")
    monkeypatch.setattr(ask_command, "load_statement", lambda kata: plain)
    result = invoke("ask", "Anything?", "kv-budget")
    assert result.exit_code == 2 and "kata show kv-budget" in result.output
    assert "has no clarifications" in " ".join(result.output.split())


def test_a_question_from_the_terminal_cannot_act_on_it():
    result = invoke("ask", "tied?\x1b]0;pwned\x07\x1b[2J", "kv-budget")
    assert result.exit_code == 0 and "\x1b" not in result.output and "\\x1b]0;pwned" in result.output


def test_help_says_how_to_ask_and_list():
    result = invoke("ask", "--help")
    flat = " ".join(result.output.split())
    assert result.exit_code == 0 and "Usage" in flat and "--list" in flat and "your call" in flat
