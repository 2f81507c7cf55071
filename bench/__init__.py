"""Reproducible benchmarks: the runner's client and the builder, side by side with peers.

`python -m bench [--quick]` writes bench/results.json, prints a table and regenerates
docs/performance.md. See docs/performance.md for the method.
"""
