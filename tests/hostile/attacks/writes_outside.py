"""Tries to write next to the grader's code, into TARGET_DIR and into its home folder."""
import os

TARGET_DIR = "@TARGET_DIR@"


class PagedKVCacheAllocator:
    def __init__(self, num_blocks, block_size):
        results = []
        for path in (os.path.join(TARGET_DIR, "pwned.txt"), os.path.expanduser("~/pwned.txt"),
                     "/tmp/inside.txt", "/kata/kata_worker/pwned.py", "/pwned.txt"):
            try:
                with open(path, "w") as fh:
                    fh.write("pwned")
                results.append(f"{path}: written")
            except OSError as exc:
                results.append(f"{path}: {type(exc).__name__}")
        raise RuntimeError("WRITES: " + "; ".join(results))
