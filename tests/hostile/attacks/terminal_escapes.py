"""A paged-kv solution whose every word is aimed at the terminal of whoever grades it: its
exceptions, printed output, reprs and class names carry a window title (OSC 0), a screen
clear, an OSC 8 hyperlink, the same in 8-bit C1 controls, BEL, backspaces, a bidi override
and Rich markup. Graded, it fails; shown, none of it may act (tests/test_cli_terminal_safety.py).

The test puts the same text, raw, in place of @RAW@ below, so that the source line a
traceback quotes ("where") carries it too."""
import sys

HOSTILE = ("\x1b]0;PWNED-TITLE\x07"
           "\x1b[2J\x1b[3J\x1b[H"
           "\x1b]8;;https://evil.example/\x1b\\CLICK-ME\x1b]8;;\x1b\\"
           "\x9b2J\x9d0;C1-TITLE\x9c"
           "\x07\x07ab\x08\x08XY"
           "\u202eevil-rtl\u202c"
           "[link=https://evil.example/]LINKED[/link][bold red]PAINTED[/]")

# A class named with escapes: type names show up in messages ("returned a ... object").
Hostile = type(HOSTILE, (), {"__repr__": lambda self: "repr:" + HOSTILE,
                             "__str__": lambda self: "str:" + HOSTILE})
HostileError = type("Error" + HOSTILE, (Exception,), {})


class PagedKVCacheAllocator:
    def __init__(self, num_blocks: int, block_size: int) -> None:
        print("init:" + HOSTILE)
        sys.stderr.write("stderr:" + HOSTILE + "\n")
        self.num_blocks = num_blocks

    @property
    def num_free_blocks(self):
        print("free-blocks:" + HOSTILE)
        return Hostile()

    def allocate(self, request_id, num_new_tokens):
        print("allocate:" + HOSTILE, end="\r")
        raise ValueError("raised:@RAW@")

    def free(self, request_id):
        raise KeyError(HOSTILE)

    def block_table(self, request_id):
        return [Hostile()]

    def num_tokens(self, request_id):
        return HOSTILE

    def fork(self, parent_id, child_id):
        raise RuntimeError(HOSTILE)

    def pop_copies(self):
        return [(Hostile(), HOSTILE)]

    def allocate_prompt(self, request_id, token_ids):
        raise HostileError(HOSTILE)
