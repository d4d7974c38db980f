"""Benchmarks: suites as validated data, grading of saved runs in code."""
