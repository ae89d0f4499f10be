"""`kata progress`: per kata the levels passed, best scores (timed apart from untimed), the
fastest time per level, mocks and hints; the page with its plots, checked in headless
Chromium (the images load, the console stays quiet)."""

from __future__ import annotations

import base64
import json
import re

import pytest
from typer.testing import CliRunner

from grader import clock
from grader.catalog import DIFFICULTIES, load_catalog
from grader.cli.app import app
from grader.debrief import build_debrief
from grader.store import Store
from tests.test_homework import _chromium, _run_chromium

runner = CliRunner()
CATALOG = load_catalog()


def _card(slug: str, levels: dict[int, bool], score: int) -> dict:
    return {"kata": slug, "seed": 1, "score": score, "passed": all(levels.values()), "solution": "x.py",
            "solution_sha256": "0" * 64, "hints_used": 0,
            "levels": [{"level": n, "passed": ok} for n, ok in levels.items()]}


@pytest.fixture
def history(tmp_path):
    """paged-kv: a timed session passing levels 1 and 2 (20 min each), two hints, an untimed
    100; rope: a mock stopped after level 1 passed in 10 minutes."""
    fake = clock.FakeClock()
    with clock.use(fake), Store() as store:
        paged = CATALOG.get("paged-kv")
        session = store.start_session("paged-kv", tmp_path / "paged_kv.py", 75,
                                      levels=tuple((lv.level, lv.minutes) for lv in paged.levels))
        store.record_hint("paged-kv", 1, 0, session.id)
        store.record_hint("paged-kv", 1, 1, session.id)
        fake.advance(minutes=20)
        store.record_attempt(_card("paged-kv", {1: True, 2: False, 3: False}, 30), source="a",
                             session_id=session.id, passed_levels=(1,))
        fake.advance(minutes=20)
        store.record_attempt(_card("paged-kv", {1: True, 2: True, 3: False}, 60), source="b",
                             session_id=session.id, passed_levels=(2,))
        store.end_session(session.id, "stopped")
        fake.advance(minutes=60)
        store.record_attempt(_card("paged-kv", {1: True, 2: True, 3: True}, 100), source="c", session_id=None)
        rope = CATALOG.get("rope")
        mock = store.start_session("rope", tmp_path / "rope.py", 75, mode="mock",
                                   levels=tuple((lv.level, lv.minutes) for lv in rope.levels))
        fake.advance(minutes=10)
        store.record_attempt(_card("rope", {1: True}, 100), source="d", session_id=mock.id,
                             passed_levels=(1,), reveal_level=2)
        store.end_session(mock.id, "stopped")
        store.update_mock(mock.id, debrief=build_debrief(store, store.session(mock.id), rope, CATALOG))
        yield fake


def test_progress_reports_each_kata_and_the_next_one(history):
    result = runner.invoke(app, ["progress", "--json"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    rows = {r["slug"]: r for r in data["katas"]}
    paged, rope = rows["paged-kv"], rows["rope"]
    assert paged["levels_passed"] == 2 and paged["best_score"] == 60 and paged["best_untimed"] == 100
    assert paged["best_level_s"] == {"1": 1200.0, "2": 1200.0} and paged["hints_used"] == 2
    assert paged["mocks"] == [] and paged["num_timed"] == 2 and paged["num_untimed"] == 1
    assert rope["levels_passed"] == 1 and rope["best_score"] is None  # a mock's level-1 grade is not a kata score
    assert [m["signal"] for m in rope["mocks"]] == ["Lean hire"] and rope["best_level_s"] == {"1": 600.0}
    # Never attempted first, the easiest of those, then alphabetical.
    fresh = [k for k in CATALOG.katas.values() if k.slug not in ("paged-kv", "rope")]
    expected_next = min(fresh, key=lambda k: (DIFFICULTIES.index(k.difficulty), k.slug)).slug
    assert data["next"]["kata"] == expected_next and "never attempted" in data["next"]["why"]
    table = runner.invoke(app, ["progress"])
    assert "paged-kv" in table.output and "20/30 20/25 -" in table.output and "Lean hire" in table.output
    assert f"next: kata mock {expected_next}" in " ".join(table.output.split())


def test_progress_html_embeds_the_plots(history, tmp_path):
    page = tmp_path / "progress.html"
    result = runner.invoke(app, ["progress", "--html", str(page)])
    assert result.exit_code == 0, result.output
    html = page.read_text()
    images = re.findall(r"src='data:image/png;base64,([A-Za-z0-9+/=]+)'", html)
    assert len(images) == 2
    assert all(base64.b64decode(image).startswith(b"\x89PNG\r\n\x1a\n") for image in images)
    assert "<script" not in html and "default-src 'none'" in html and "Lean hire" in html


def test_progress_html_says_how_to_get_matplotlib(history, tmp_path, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    result = runner.invoke(app, ["progress", "--html", str(tmp_path / "p.html")])
    assert result.exit_code == 2 and "pip install 'kata[plots]'" in result.output
    assert not (tmp_path / "p.html").exists()


# A checker run in a copy of the page: its own script is allowed by a nonce, while the
# page's image policy (img-src data:) stays as it is.
CHECKER = ("<script nonce='kata-test'>addEventListener('load', () => document.body.setAttribute("
           "'data-images', [...document.images].map(i => i.id + ':' + (i.complete && i.naturalWidth > 0 "
           "? 'ok' : 'broken')).join(' ')))</script>")


def _images_in_chromium(html: str, tmp_path, name: str) -> str:
    checked = tmp_path / name
    checked.write_text(html.replace("default-src 'none';", "default-src 'none'; script-src 'nonce-kata-test';", 1)
                       .replace("</body>", CHECKER + "</body>", 1))
    dom = _run_chromium(checked, tmp_path / "profile", "--virtual-time-budget=5000").stdout
    match = re.search(r'data-images="([^"]*)"', dom)
    assert match, "the checker did not run"
    return match.group(1)


@pytest.mark.skipif(_chromium() is None, reason="headless Chromium is not installed (apt-get install chromium)")
def test_the_progress_page_loads_its_images_in_headless_chromium_without_console_errors(history, tmp_path):
    page = tmp_path / "progress.html"
    assert runner.invoke(app, ["progress", "--html", str(page)]).exit_code == 0
    plain = _run_chromium(page, tmp_path / "profile", "--enable-logging=stderr", "--v=0")
    assert "<table id=\"progress\">" in plain.stdout and "Lean hire" in plain.stdout
    console = [line for line in plain.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console
    # The console check can fail: an image from outside, which the page's policy blocks, is reported.
    outside = tmp_path / "outside.html"
    outside.write_text(page.read_text().replace("</body>", "<img src='http://example.com/x.png'></body>", 1))
    logged = _run_chromium(outside, tmp_path / "profile", "--enable-logging=stderr", "--v=0").stderr
    assert any(":CONSOLE" in line and "Content Security Policy" in line for line in logged.splitlines())
    html = page.read_text()
    assert _images_in_chromium(html, tmp_path, "checked.html") == "scores:ok levels:ok"
    # The check can fail: a damaged image is reported broken.
    damaged = re.sub(r"(id='levels' alt='[^']*' src='data:image/png;base64,)[A-Za-z0-9+/]{40}", r"\1", html)
    assert _images_in_chromium(damaged, tmp_path, "damaged.html") == "scores:ok levels:broken"
