"""Coach homework: a homework file, the candidate's bundle, and the coach's re-grading review."""
