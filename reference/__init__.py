"""Reference implementations of the katas (the oracles the hidden suites compare against)."""
