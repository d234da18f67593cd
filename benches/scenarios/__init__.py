"""The benchmark scenarios, one module each; `benches/bench.py` runs them."""
