"""Import a file from its path under a module name: the candidate's file in the worker, the
kata's support files in the judge. Standard library only: it ships with the worker."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def import_from_path(path: Path | str, module_name: str) -> ModuleType:
    """Execute the file at `path` as module `module_name` and return it.

    The module is registered in sys.modules *before* it runs, so that dataclasses (which look
    their module up while the class is created) and pickling find it; it is loaded from the
    path, never from whatever sys.path order would find first.
    """
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path} is not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
