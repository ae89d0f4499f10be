"""Hidden suites, one pytest module per kata (grader/suites/<module>.py)."""
