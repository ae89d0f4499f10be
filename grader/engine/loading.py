"""Import a file from its path under a module name (the bench, the corpus's support files):
the worker's own helper, written once in grader/worker/loading.py, which ships with it."""

from grader.worker.loading import import_from_path

__all__ = ["import_from_path"]
