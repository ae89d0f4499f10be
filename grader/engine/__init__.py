"""The grading engine: runs a suite against a solution file in a child process."""
