"""`kata ask`: the interviewer answers a clarifying question from the statement's
clarifications (grader/statement.py), found by a transparent local matcher.

How a question is matched (BM25: Robertson and Zaragoza, "The Probabilistic Relevance
Framework: BM25 and Beyond", 2009; rank_bm25's BM25Okapi, k1 = 1.5, b = 0.75):

- Words are ``text_match.tokens`` (lower case, Snowball stems) without STOP_WORDS.
- Each clarification of the kata is one document: its question twice, its answer once and
  its keys three times. The keys are the words the statement's author chose for the
  matcher, the question names the topic, the answer brings the rule's own vocabulary.
- The index holds every clarification of the kata, revealed or not, so a clarification's
  score does not depend on how far a mock has got (the IDF of "block" is the same at level 1
  and at level 3), and "better than any revealed one" compares like with like.
- The clarification with the highest BM25 score is the match. Its score is then divided by
  its *self-score*, what its own written question scores against it: 1.0 means "as close as
  the question in the statement" (a paraphrase that also names the keys can score above 1).
  Raw BM25 is in units of IDF, which depend on how many clarifications a kata has; the ratio
  is comparable across katas, so one THRESHOLD serves them all.
- A question worded as a revealed clarification's own (as `kata ask --list` shows them) gets
  that answer, score 1.0, before any ranking.
- At or above THRESHOLD: the match's answer if its level is revealed. If not, and no
  revealed clarification scores as high (normalised), "That comes later in the interview."
  and nothing of the match (question, answer, id, keys, level). Below THRESHOLD: the
  candidate's call.

THRESHOLD = 0.24 was chosen on 82 hand-written questions (tests/test_ask.py), 64 for kv-budget
and 18 for a rate limiter: 66 paraphrases of a clarification, worded differently from it, and
16 questions the statement does not settle ("Can I use numpy?", "Should I print debug
output?"). Ranking alone puts the right clarification first for 58 of the 66 paraphrases.
Thresholds from 0.18 to 0.29 are within 2 points of the best accuracy, 71 of 82 (87 %) at
0.23 and 0.24; 0.24 sits in the gap between the generic off-topic questions (0.23 at most)
and the weakest paraphrases (0.24 and up). Off-topic questions that share a domain word with
a clarification ("What's your favourite GPU?": 0.42) get that clarification's answer: the
reply shows the question it answered, so the candidate sees what was understood.

Deterministic: the same statement and question give the same reply (ties go to the
clarification written first).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from grader.statement import Clarification
from grader.text_match import tokens

if TYPE_CHECKING:  # rank_bm25 imports numpy: only `kata ask` pays for it, when it matches
    from rank_bm25 import BM25Okapi

QUESTION_REPEATS, ANSWER_REPEATS, KEY_REPEATS = 2, 1, 3
THRESHOLD = 0.24
# rank_bm25 floors a negative IDF at a quarter of the mean IDF, which is itself negative when
# a kata has one or two clarifications: every score would be negative. A tiny positive floor
# keeps such a kata answerable (the ratio to the self-score cancels it).
_IDF_FLOOR = 1e-3

# Words that say nothing of a topic. Left in, they decide short questions ("Can I use a
# dataclass?" matched "Which clock do we use?" on "use"). Kept out on purpose: the words a
# rule turns on (both, each, every, all, none, zero, only, per, more, less).
STOP_WORDS = frozenset(tokens("""
    a an the and or but if then so of to in on at by for with from as into onto about
    is are was were be been being am do does did doing have has had having
    will would shall should can could may might must
    i me my we our us you your he she it its they them their this that these those there here
    what which who whom whose when where why how whether
    any some such than too very just also own not no nor
    use used using need want get ok okay fine please thing way like
""") + ["s", "t", "d", "ll", "m", "re", "ve"])  # what's, don't, I'd, we'll, I'm, they're, I've

YOUR_CALL = "Your call: decide, and say what you assumed."
LATER = "That comes later in the interview."

ANSWERED, LATER_LEVEL, YOURS = "answer", "later", "your-call"


@dataclass(frozen=True)
class Reply:
    """What the interviewer says to one question. `clarification` is set only when it is
    answered: a later level's match never leaves the matcher."""

    question: str
    outcome: str  # ANSWERED, LATER_LEVEL or YOURS
    score: float  # the match's normalised score, 3 decimals (0.0 when no word matched)
    clarification: Clarification | None = None

    @property
    def answer(self) -> str:
        if self.clarification is not None:
            return self.clarification.answer
        return LATER if self.outcome == LATER_LEVEL else YOUR_CALL

    def to_dict(self) -> dict[str, object]:
        """What `kata ask --json` prints."""
        return {"question": self.question, "answer": self.answer,
                "clarification": self.clarification.id if self.clarification else None, "score": self.score}


def words(text: str) -> list[str]:
    """The stemmed words of `text` that can name a topic (text_match.tokens less STOP_WORDS)."""
    return [word for word in tokens(text) if word not in STOP_WORDS]


def document(clarification: Clarification) -> list[str]:
    """The words BM25 indexes for one clarification (see the module docstring)."""
    return (words(clarification.question) * QUESTION_REPEATS + words(clarification.answer) * ANSWER_REPEATS
            + words(" ".join(clarification.keys)) * KEY_REPEATS)


class Matcher:
    """BM25 over one kata's clarifications (all its levels).

    Invariants: `clarifications` keeps the statement's order, and `_self_scores[i]` is the
    raw score of clarification i's own question against it (positive, or 0.0 when its
    question has no word that can match)."""

    def __init__(self, clarifications: Sequence[Clarification]) -> None:
        self.clarifications = tuple(clarifications)
        self._bm25: BM25Okapi | None = None
        if self.clarifications:
            from rank_bm25 import BM25Okapi

            self._bm25 = BM25Okapi([document(c) for c in self.clarifications])
            for word, idf in self._bm25.idf.items():
                self._bm25.idf[word] = max(idf, _IDF_FLOOR)
        self._self_scores = [self.raw_scores(c.question)[i] for i, c in enumerate(self.clarifications)]

    def verbatim(self, question: str, levels: Iterable[int] | None = None) -> Clarification | None:
        """The clarification of `levels` (None: all) whose written question this is, word for
        word (as `words` sees them): `kata ask --list` shows the questions, and one asked as
        listed gets its own answer, whatever BM25 ranks first. Two levels that ask alike
        ("Which arguments are errors?"): the later level's, the one in play."""
        wanted = None if levels is None else set(levels)
        asked = words(question)
        same = [c for c in self.clarifications if (wanted is None or c.level in wanted) and words(c.question) == asked]
        return max(same, key=lambda c: c.level, default=None) if asked else None

    def raw_scores(self, question: str) -> list[float]:
        """Each clarification's BM25 score for `question`, in statement order."""
        query = words(question)
        if self._bm25 is None or not query:
            return [0.0] * len(self.clarifications)
        return [float(score) for score in self._bm25.get_scores(query)]

    def best(self, question: str, levels: Iterable[int] | None = None) -> tuple[Clarification | None, float]:
        """The clarification of `levels` (None: all) with the highest BM25 score, and its
        normalised score; (None, 0.0) when no word of the question is in any of them."""
        wanted = None if levels is None else set(levels)
        raw = self.raw_scores(question)
        ids = [i for i, c in enumerate(self.clarifications) if wanted is None or c.level in wanted]
        if not ids or max(raw[i] for i in ids) <= 0:
            return None, 0.0
        best_id = max(ids, key=lambda i: (raw[i], -i))
        self_score = self._self_scores[best_id]
        return self.clarifications[best_id], round(raw[best_id] / self_score if self_score > 0 else 0.0, 3)

    def ask(self, question: str, revealed: Iterable[int] | None = None) -> Reply:
        """The interviewer's reply; `revealed`: the levels that may be answered (None: all)."""
        if verbatim := self.verbatim(question, revealed):
            return Reply(question, ANSWERED, 1.0, verbatim)
        match, score = self.best(question)
        if match is None or score < THRESHOLD:
            return Reply(question, YOURS, score)
        shown = None if revealed is None else set(revealed)
        if shown is None or match.level in shown:
            return Reply(question, ANSWERED, score, match)
        # The best match is a later level's. A revealed clarification that matches as well,
        # in normalised terms, is answered instead: two levels may ask alike ("Which
        # arguments are errors?"), and a level's own question must get its own answer.
        near, near_score = self.best(question, shown)
        if near is not None and near_score >= score:
            return Reply(question, ANSWERED, near_score, near)
        return Reply(question, LATER_LEVEL, score)
