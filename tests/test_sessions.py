"""A session's level clocks and the interview signal from the levels' pass times."""

from __future__ import annotations

import pytest

from grader.sessions import _clocks, current_level, session_signal
from grader.store import SessionLevel

START, DEADLINE = 1000.0, 1000.0 + 75 * 60


def levels(*passed_at_min: float | None, revealed: int = 3) -> list[SessionLevel]:
    """Three levels revealed at START (a mock: only the first `revealed`), passed at the given
    minutes after START (None: not passed)."""
    return [SessionLevel(n, 25, START if n <= revealed else None,
                         None if m is None else START + 60 * m, None)
            for n, m in enumerate(passed_at_min, start=1)]


@pytest.mark.parametrize("passed,signal", [
    ((None, None, None), "No hire"),
    ((20, None, None), "Lean hire"),
    ((20, 50, None), "Hire"),
    ((20, 50, 70), "Strong hire"),
    ((20, 50, 80), "Hire (level 3 passed in overtime)"),
    ((20, 80, 90), "Lean hire (levels 2, 3 passed in overtime)"),
    ((80, None, None), "No hire (overtime: level 1 passed after the time ran out)"),
    ((None, 30, 40), "No hire"),  # levels count in order
])
def test_the_signal_counts_levels_passed_in_order_before_the_deadline(passed, signal):
    assert session_signal(_clocks(levels(*passed)), DEADLINE) == signal


def test_a_level_clock_starts_when_the_levels_before_it_pass():
    one, two, three = _clocks(levels(20, 50, None))
    assert one.used_s(START + 3600) == 20 * 60 and two.used_s(START + 3600) == 30 * 60
    assert three.started_at == START + 50 * 60 and three.used_s(START + 55 * 60) == 5 * 60
    assert current_level([one, two, three]) is three
    assert not one.over_pace(0) and two.over_pace(0)  # 20 and 30 min against ~25
    assert not three.over_pace(START + 70 * 60) and three.over_pace(START + 80 * 60)


def test_a_level_passed_before_the_one_below_it_took_no_time_of_its_own():
    one, two, _ = _clocks(levels(40, 10, None))
    assert one.used_s(START) == 40 * 60 and two.started_at == START + 40 * 60 and two.used_s(0) == 0
    waiting = _clocks(levels(None, None, None))
    assert waiting[1].started_at is None and waiting[1].used_s(START + 60) is None


def test_a_mock_level_not_revealed_has_no_clock():
    one, two, three = _clocks(levels(None, None, None, revealed=1))
    assert one.revealed and not two.revealed and two.used_s(START + 60) is None
    assert current_level([one, two, three]) is one
