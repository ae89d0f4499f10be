"""Text that came from a candidate's code, made safe to put on a terminal.

A solution's exception messages, printed output, reprs and names are data: they must never
act on the terminal (set its title, clear the screen, plant an OSC 8 hyperlink, move the
cursor over a verdict) nor on Rich (``[link=...]``, ``[bold green]``). Every string that
comes from candidate code goes through ``clean`` (plain output) or ``markup`` / ``text``
(Rich) where it is rendered; what is stored and what ``--json`` prints stay exact.

What ``clean`` does, and why:

- colour and style sequences (SGR: ``ESC [ ... m``, or ``CSI ... m`` with the 8-bit CSI)
  are dropped: a logger's colours, nothing a reader needs to see;
- every other control character is shown the way Python writes it in a string literal,
  so the rest of any escape sequence prints as plain characters and nothing of it acts:
  ESC (``\\x1b[2J``, ``\\x1b]0;title\\x07``), the C0 controls but newline and tab, DEL,
  the C1 controls U+0080-U+009F (``\\x9b`` is a CSI on some terminals), the bidi marks,
  overrides and isolates U+200E, U+200F, U+202A-U+202E and U+2066-U+2069 (they reorder
  what follows, so text can read as something it is not: "Trojan Source") and lone
  surrogates (which cannot be written as UTF-8).
  A coach sees that a solution tried something, and what;
- CR LF is a newline, and a lone CR (a progress bar redrawing its line) starts a new line,
  so nothing printed can be written over.
"""

from __future__ import annotations

import re

from rich.markup import escape
from rich.text import Text

# An SGR sequence: parameters are digits, ';' and ':' (ITU T.416 colours), final byte 'm'.
_SGR = re.compile(r"(?:\x1b\[|\x9b)[0-9;:]*m")
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def clean(value: object) -> str:
    """`value` as text with no control sequence left in it (see the module docstring);
    newlines and tabs stay."""
    text = str(value)
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _UNSAFE.sub(_visible, _SGR.sub("", text))


def markup(value: object) -> str:
    """`value` cleaned and escaped, for a Rich markup string: `f"[bold]{markup(name)}[/]"`."""
    return escape(clean(value))


def text(value: object, style: str = "") -> Text:
    """`value` cleaned, as a Rich Text (never parsed as markup)."""
    return Text(clean(value), style=style)
