"""Benchmarks: scripts that measure side by side in one run and append JSONL records."""
