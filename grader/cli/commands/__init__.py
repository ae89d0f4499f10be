"""One module per command; grader/cli/app.py wires them (COMMANDS), each under its mock policy."""
