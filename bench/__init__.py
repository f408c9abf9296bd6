"""Benchmarks: keystroke replay and FIM quality, strategies side by side."""
