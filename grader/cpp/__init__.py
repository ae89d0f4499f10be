"""The C++ track (`--lang cpp`): a solution in C++17 with a pybind11 binding, compiled inside
the sandbox into an extension module that the same hidden suite drives through the worker.

    toolchain.py  which compiler, pybind11 and Python headers; what is missing and how to get it
    build.py      compile (cached by the hash of source, flags and toolchain), diagnostics
    sanitizer.py  --sanitize: the runtime the worker preloads, and a report turned into a verdict
"""
