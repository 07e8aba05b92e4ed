"""The front-ceiling benchmark's parts (bench/bench_ceiling.py runs them)."""
