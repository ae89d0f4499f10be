"""Forks a child that leaves the session (setsid) and the group (setpgid), then keeps
writing a heartbeat to TARGET_DIR; reports how the fork went."""
import os
import time

TARGET_DIR = "@TARGET_DIR@"


class PagedKVCacheAllocator:
    def __init__(self, num_blocks, block_size):
        outcome = []
        for how in ("setsid", "setpgid"):
            try:
                pid = os.fork()
            except OSError as exc:
                outcome.append(f"fork for {how}: {type(exc).__name__} errno {exc.errno}")
                continue
            if pid == 0:
                try:
                    os.setsid() if how == "setsid" else os.setpgid(0, 0)
                    for _ in range(600):
                        with open(os.path.join(TARGET_DIR, f"heartbeat-{how}"), "a") as fh:
                            fh.write("x")
                        time.sleep(0.1)
                finally:
                    os._exit(0)
            outcome.append(f"fork for {how}: child {pid}")
        raise RuntimeError("DAEMON: " + "; ".join(outcome))
