"""Benchmarks: measured, never asserted in timed tests."""
