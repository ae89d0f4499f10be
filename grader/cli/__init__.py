"""The `kata` command line: one module per command under commands/, one output layer."""
