"""kata: interview-prep coding katas for ML and LLM-systems engineers, graded by hidden suites."""

__version__ = "0.1.0"
