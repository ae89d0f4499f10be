"""Names the module the test plants in the judge's working directory."""

NAME = "kata_cwd_probe_module"
