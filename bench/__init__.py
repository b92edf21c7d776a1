"""Benchmarks of OmniForge (run with `scripts/bench`); numbers, not pass/fail tests."""
