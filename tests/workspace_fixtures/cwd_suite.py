"""A suite that looks for a module planted in the judge's working directory: the judge must
never import it (PYTHONSAFEPATH, no relative PYTHONPATH entries). The candidate's code runs
in its own worker and cannot write there at all; the test plants the module itself."""

import importlib
import sys

from grader.protocol import expect, kata_test


@kata_test(level=1, category="api contract", description="the working directory is not on sys.path")
def test_a_module_written_to_the_working_directory_is_not_imported(solution):
    name = solution.NAME
    importlib.invalidate_caches()  # the finder of a folder caches its listing
    try:
        importlib.import_module(name)
    except ImportError:
        return
    expect(False, "a module in the judge's working directory was imported",
           got=f"{name} from {sys.modules[name].__file__}")
