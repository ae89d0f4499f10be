"""grader.textsafe: text from a candidate's code can neither act on a terminal nor on Rich."""

from __future__ import annotations

import re

from rich.console import Console

from grader import textsafe

HOSTILE = ("\x1b]0;pwned\x07"                           # OSC 0: the window title, BEL-terminated
           "\x1b[2J\x1b[H"                              # clear the screen, cursor home
           "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\"  # OSC 8 hyperlink, ST-terminated
           "\x9b2J\x9d0;c1 title\x9c"                   # the same with 8-bit C1 controls
           "\x1bPdcs\x1b\\"                             # a DCS string
           "ab\x08\x08XY\x7f"                           # backspaces over text, DEL
           "\u202egnp.exe\u202c"                        # a right-to-left override
           "\x1b[1;31mred\x1b[0m"                       # a colour: dropped
           "[link=https://evil.example]x[/link][bold red]y")  # Rich markup
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def test_clean_leaves_no_control_character_but_newline_and_tab():
    cleaned = textsafe.clean(HOSTILE + "\nline\ttab\r\nnext\rover")
    assert not RAW_CONTROL.search(cleaned)
    assert "line\ttab\nnext\nover" in cleaned  # a lone CR starts a line: nothing is written over


def test_clean_shows_the_attempt_as_python_escapes_and_drops_colours():
    cleaned = textsafe.clean(HOSTILE)
    assert cleaned.startswith(r"\x1b]0;pwned\x07\x1b[2J\x1b[H\x1b]8;;https://evil.example\x1b\click")
    assert r"\x9b2J\x9d0;c1 title\x9c" in cleaned
    assert r"ab\x08\x08XY\x7f\u202egnp.exe\u202c" in cleaned
    assert "red[link=" in cleaned  # SGR colours gone, the word stays


def test_clean_keeps_plain_text_and_unicode_exactly():
    for plain in ("expected [1, 2] got [1, 3]", "über ✓ 名前 — 1e-3", "a\n\tb", ""):
        assert textsafe.clean(plain) == plain


def test_clean_makes_lone_surrogates_writable():
    assert textsafe.clean("x\ud800y") == r"x\ud800y"
    textsafe.clean("x\ud800y").encode("utf-8")


def test_rich_helpers_neither_parse_markup_nor_emit_escapes():
    console = Console(force_terminal=True, color_system="truecolor", width=400, record=True)
    console.print(f"[bold]{textsafe.markup(HOSTILE)}[/]")
    console.print(textsafe.text(HOSTILE, style="red"))
    shown = console.export_text(styles=False)
    assert "[link=https://evil.example]x[/link][bold red]y" in shown
    assert not RAW_CONTROL.search(shown)
