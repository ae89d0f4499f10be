"""Every kata in the catalog: the reference scores 100, the stub scores 0, the visible
examples agree, the stub is a fair starting point, and the walkthrough runs headless."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys

import pytest

from grader.catalog import load_catalog
from grader.grading import check
from grader.statement import StatementError, load_statement, parse_statement, render
from tests.kata_testing import (REPO_ROOT, SEED, SEEDS, corpus_manifest, failed_tests, grade_file,
                                manifest_path)

KATAS = sorted(load_catalog().katas.values(), key=lambda k: k.slug)
IDS = [k.slug for k in KATAS]


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_reference_scores_100(kata):
    card = grade_file(kata.slug, kata.reference_path, seed=SEED)
    assert card.score == 100 and card.passed, failed_tests(card)
    assert {lv.level for lv in card.levels} == {lv.level for lv in kata.levels}
    if manifest_path(kata.slug).is_file():
        _check_manifest_names_real_tests(kata, {t.name: t.level for t in card.tests})
    if kata.suite_path.is_dir():
        _check_rule_maps(kata, {t.name: t.level for t in card.tests})


def _check_manifest_names_real_tests(kata, levels_by_test):
    """Every test a corpus entry names exists in the suite, at the entry's level."""
    for entry in corpus_manifest(kata.slug).buggy:
        for name in entry.rejected_by:
            assert name in levels_by_test, f"corpus.toml: {entry.file} names {name}, which the suite lacks"
            assert levels_by_test[name] == entry.level, (
                f"corpus.toml: {entry.file} is a level-{entry.level} bug, but {name} is a "
                f"level-{levels_by_test[name]} test")


def _check_rule_maps(kata, levels_by_test):
    """A package suite has test_level<N>.py per level, each with a RULES map (statement rule
    -> the test(s) that decide it) naming real tests of that level."""
    for level in kata.levels:
        path = kata.suite_path / f"test_level{level.level}.py"
        assert path.is_file(), f"{path} is missing"
        tree = ast.parse(path.read_text())
        rules = next((node.value for node in tree.body if isinstance(node, ast.Assign)
                      and any(isinstance(t, ast.Name) and t.id == "RULES" for t in node.targets)), None)
        assert rules is not None, f"{path} defines no RULES map"
        mapping = ast.literal_eval(rules)
        assert isinstance(mapping, dict) and len(mapping) >= 3, f"{path}: RULES must map rules to tests"
        for rule, tests in mapping.items():
            for name in ([tests] if isinstance(tests, str) else tests):
                assert levels_by_test.get(name) == level.level, (
                    f"{path}: RULES[{rule!r}] names {name}, not a level-{level.level} test of the suite")
        statement = load_statement(kata)
        if statement.layered:
            _check_settled_by(path, tree, mapping, statement, level.level)


def _literal(tree: ast.Module, name: str):
    node = next((n for n in tree.body if isinstance(n, (ast.Assign, ast.AnnAssign)) and any(
        isinstance(t, ast.Name) and t.id == name
        for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))), None)
    return None if node is None or node.value is None else ast.literal_eval(node.value)


def _check_settled_by(path, tree, rules, statement, level):
    """Every rule of the level's RULES map is settled by the Ask or by a clarification of
    this level or an earlier one (SETTLED_BY), and its details (DETAILS) are rules of it."""
    settled = _literal(tree, "SETTLED_BY")
    assert isinstance(settled, dict), f"{path} defines no SETTLED_BY map beside RULES"
    assert set(settled) == set(rules), (f"{path}: SETTLED_BY must name exactly RULES's rules; missing "
                                        f"{sorted(set(rules) - set(settled))}, unknown {sorted(set(settled) - set(rules))}")
    known = {c.id for c in statement.clarifications(range(1, level + 1))}
    for rule, by in settled.items():
        ids = [by] if isinstance(by, str) else list(by)
        assert ids and all(i == "ask" or i in known for i in ids), (
            f"{path}: SETTLED_BY[{rule!r}] = {by!r}: each is 'ask' or the id of a clarification of "
            f"level {level} or earlier ({sorted(known)})")
    details = _literal(tree, "DETAILS")
    assert isinstance(details, (set, dict)), f"{path} defines no DETAILS set beside RULES (set() for none)"
    assert set(details) <= set(rules), f"{path}: DETAILS names rules RULES lacks: {sorted(set(details) - set(rules))}"


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_stub_scores_0_on_every_test(kata):
    card = grade_file(kata.slug, kata.stub_path, seed=SEED)
    passing = [t.name for t in card.tests if t.passed]
    assert card.score == 0 and not passing, f"the stub passes {passing}"


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_examples_pass_with_the_reference_and_fail_with_the_stub(kata):
    ref = check(kata, kata.reference_path)
    assert ref.passed and len(ref.tests) >= len(kata.levels), failed_tests(ref)
    stub = check(kata, kata.stub_path)
    assert not any(t.passed for t in stub.tests)


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_stub_is_a_fair_starting_point(kata):
    source = kata.stub_path.read_text()
    tree = ast.parse(source)
    assert "TODO" in source and "NotImplementedError" in source
    public = [n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")]
    assert public and all(ast.get_docstring(n) for n in public), "every public name needs its docstring"
    reference_names = {n.name for n in ast.parse(kata.reference_path.read_text()).body
                       if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and not n.name.startswith("_")}
    assert {n.name for n in public} <= reference_names


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_statement_covers_every_level(kata):
    statement = kata.statement_path.read_text()
    for level in kata.levels:
        assert level.name.lower() in statement.lower(), f"the statement never names level {level.level}: {level.name}"


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_statement_follows_the_skeleton(kata):
    """README.md: # title, ## The interview, ## Level N — name (~M min) per level (names and
    minutes as in kata.toml), ## Worked example, ## Constraints, ## Follow-up questions."""
    try:
        statement = load_statement(kata)
    except StatementError as exc:
        pytest.fail(f"{exc.message}\n{exc.hint or ''}")
    assert [(lv.number, lv.name, lv.minutes) for lv in statement.levels] == [
        (lv.level, lv.name, lv.minutes) for lv in kata.levels]


def _plain(text: str) -> str:
    return " ".join(text.replace("`", "").split())


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_followups_have_answer_points_and_the_statement_lists_them(kata):
    assert len(kata.followups) >= 6, f"kata.toml has {len(kata.followups)} follow-ups; write at least 6"
    for followup in kata.followups:
        assert 2 <= len(followup.points) <= 5 and all(p.strip() for p in followup.points), (
            f"kata.toml: the follow-up {followup.question!r} needs 2-5 points an interviewer listens for")
    listed = [_plain(q) for q in load_statement(kata).followups]
    assert listed == [_plain(f.question) for f in kata.followups], (
        "README.md's ## Follow-up questions must list kata.toml's questions, in order")


_CODE_BLOCK = re.compile(r"^ {0,3}```[^\n]*\n(.*?)^ {0,3}```", re.S | re.M)
_DEF = re.compile(r"\b(?:def|class)\s+(\w+)\s*(\()?")


def _declared_api(markdown: str, with_every_parameter: bool = False) -> set[str]:
    """Names a section's code blocks declare: functions, classes, methods, and parameters
    with a default (the ones a later level adds to an earlier signature), or every parameter."""
    param = r"(\w+)\s*[:=,]" if with_every_parameter else r"(\w+)\s*(?::[^,=()]*(?:\[[^\]]*\])?[^,=()]*)?="
    names: set[str] = set()
    for block in _CODE_BLOCK.findall(markdown):
        for match in _DEF.finditer(block):
            names.add(match.group(1))
            if match.group(2):
                signature = _balanced(block, match.end() - 1)
                names |= set(re.findall(param, signature + ","))
    return {n for n in names if not n.startswith("__")}


def _balanced(text: str, open_at: int) -> str:
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return text[open_at + 1:i]
    return text[open_at + 1:]


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_a_mock_statement_never_shows_a_later_level(kata):
    """render(kata, k) holds levels 1..k only: no later level's heading or name, and none of
    the functions, classes or defaulted parameters a later level's API introduces."""
    statement = load_statement(kata)
    if not statement.layered:
        assert parse_statement(render(kata), statement.where) == statement, "render(kata) must round-trip"
    introduced, seen = {}, set()
    for level in statement.levels:
        introduced[level.number] = _declared_api(level.body) - seen
        seen |= _declared_api(level.body, with_every_parameter=True)
    for shown in range(1, len(statement.levels)):  # a mock always shows level 1
        text = render(kata, shown, clarifications=False)  # what a mock shows: the Asks so far
        body = text.split("\n", 1)[1]  # the title names the whole kata, as `kata list` does
        for level in statement.levels:
            if level.number <= shown:
                assert level.heading in text and level.ask in text
                continue
            assert f"## Level {level.number}" not in text
            for clarification in level.clarifications:
                assert clarification.answer not in text
            assert level.name.lower() not in body.lower(), (
                f"render({kata.slug!r}, {shown}) names level {level.number} ({level.name!r})")
            leaked = sorted(n for n in introduced[level.number] if re.search(rf"(?<![.\w]){n}\b", body))
            assert not leaked, (f"render({kata.slug!r}, {shown}) mentions {leaked}, which level "
                                f"{level.number} introduces")


def _interview_data(kata) -> dict:
    import tomllib

    path = REPO_ROOT / "tests" / "interview" / f"{kata.module}.toml"
    assert path.is_file(), f"{path} is missing: the kata's giveaways and paraphrased questions"
    return tomllib.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_every_rule_is_settled_by_the_ask_or_a_clarification(kata):
    """Each RULES entry of each level maps (SETTLED_BY) to the Ask or to a clarification of
    that level or an earlier one; DETAILS names rules of the map."""
    statement = load_statement(kata)
    assert statement.layered, f"{statement.where} is not in the layered skeleton (Ask, Clarifications, Spec)"
    for level in kata.levels:
        path = kata.suite_path / f"test_level{level.level}.py"
        tree = ast.parse(path.read_text())
        _check_settled_by(path, tree, _literal(tree, "RULES"), statement, level.level)


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_a_mock_screen_gives_nothing_away(kata):
    """The screen a mock shows with levels 1..k revealed (the Asks) holds none of the
    project's giveaway strings of any level (formulas and intermediate figures the tests
    check), no clarification answer and no follow-up question; no level's Ask gives away its
    own or a later level's figures, and no clarification a later level's."""
    statement = load_statement(kata)
    data = _interview_data(kata)
    giveaways = {int(level): list(strings) for level, strings in data["giveaways"].items()}
    assert set(giveaways) == {lv.level for lv in kata.levels}
    assert all(len(strings) >= 3 for strings in giveaways.values()), "at least 3 giveaways per level"
    every = [g for strings in giveaways.values() for g in strings]
    for shown in range(1, len(statement.levels) + 1):
        screen = _plain(render(kata, shown, clarifications=False))
        found = [g for g in every if _plain(g) in screen]
        assert not found, f"a mock of {kata.slug} with levels 1..{shown} shows {found}"
        for clarification in statement.clarifications():
            assert _plain(clarification.answer) not in screen, clarification.id
        assert not any(_plain(f.question) in screen for f in kata.followups), "a follow-up question shows"
    for section in statement.levels:
        # The Ask gives away nothing the level or a later one checks; a clarification may
        # state a convention of its own level when asked (LoRA's alpha / r), never a later one's.
        asked = _plain(" ".join(f"{c.question} {c.answer}" for c in section.clarifications))
        found = [g for level, strings in giveaways.items() for g in strings
                 if (level >= section.number and _plain(g) in _plain(section.ask))
                 or (level > section.number and _plain(g) in asked)]
        assert not found, f"level {section.number}'s Ask or clarifications give away {found}"


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_paraphrased_questions_are_written_for_kata_ask(kata):
    """At least 6 paraphrases per kata, each naming a clarification that exists (or "" for
    off-topic), one of them off-topic."""
    paraphrases = _interview_data(kata)["paraphrases"]
    ids = {c.id for c in load_statement(kata).clarifications()}
    assert len(paraphrases) >= 6 and any(p["expect"] == "" for p in paraphrases)
    assert all(p["expect"] in ids | {""} for p in paraphrases), [p for p in paraphrases if p["expect"] not in ids | {""}]


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_walkthrough_runs_headless(kata, tmp_path):
    assert kata.notebook_path.is_file(), f"{kata.notebook_path} is missing"
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=str(REPO_ROOT))
    result = subprocess.run([sys.executable, str(kata.notebook_path)], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "# %% [markdown]" in kata.notebook_path.read_text()


@pytest.mark.parametrize("kata", KATAS, ids=IDS)
def test_every_corpus_file_is_checked_by_the_katas_tests(kata):
    corpus = sorted((REPO_ROOT / "tests" / "corpus" / kata.module).glob("*.py"))
    assert len([p for p in corpus if p.name.startswith("buggy_")]) >= 10, "keep at least 10 realistic bugs"
    assert len([p for p in corpus if p.name.startswith("correct_")]) >= 2, "keep correct alternatives too"
    assert {p.name.split("_")[0] for p in corpus} <= {"buggy", "correct"}
    if manifest_path(kata.slug).is_file():
        manifest = corpus_manifest(kata.slug)
        listed = [e.file for e in manifest.buggy] + list(manifest.correct)
        assert len(listed) == len(set(listed)), "corpus.toml lists a file twice"
        assert set(listed) == {p.name for p in corpus}, (
            f"corpus.toml and the folder disagree: only listed {sorted(set(listed) - {p.name for p in corpus})}, "
            f"only on disk {sorted({p.name for p in corpus} - set(listed))}")
        assert all(e.file.startswith("buggy_") for e in manifest.buggy)
        assert all(name.startswith("correct_") for name in manifest.correct)
        tests_source = (REPO_ROOT / "tests" / f"test_kata_{kata.module}.py").read_text()
        assert "buggy_params" in tests_source and "correct_params" in tests_source, (
            "the kata's tests must grade every manifest entry (buggy_params / correct_params)")
        return
    tests_source = (REPO_ROOT / "tests" / f"test_kata_{kata.module}.py").read_text()
    unchecked = [p.name for p in corpus if p.name not in tests_source]
    assert not unchecked, f"corpus files no test grades: {unchecked}"
    assert {p.name.split("_")[0] for p in corpus} <= {"buggy", "correct"}


def test_a_corpus_check_grades_only_the_tests_that_decide_it():
    """A bug of level L is graded with every test below L (none may fail) and the level-L
    tests meant to reject it: the level's other tests are left out."""
    from tests.kata_testing import _test_levels, assert_rejected_at_level, deciding_tests

    levels = _test_levels("kv-budget")
    entry = next(e for e in corpus_manifest("kv-budget").buggy
                 if e.level > 1 and sum(lv == e.level for lv in levels.values()) > len(e.rejected_by))
    card = assert_rejected_at_level("kv-budget", entry)
    ran = {t.name for t in card.tests}
    assert ran == deciding_tests("kv-budget", entry)
    assert ran == {n for n, lv in levels.items() if lv < entry.level} | set(entry.rejected_by)
    assert {n for n, lv in levels.items() if lv == entry.level} - ran  # some were left out
    # under the second seed, the rejecting tests alone (corpus_sweep.py checks lower levels)
    card = assert_rejected_at_level("kv-budget", entry, seed=SEEDS[1])
    assert {t.name for t in card.tests} == set(entry.rejected_by)
