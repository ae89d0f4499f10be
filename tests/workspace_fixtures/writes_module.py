"""Writes a module into the working directory, as a candidate's code could."""
from pathlib import Path

NAME = "kata_cwd_probe_module"


def write_module():
    Path(f"{NAME}.py").write_text("IMPORTED = True\n")
    return NAME
