"""The benchmark and the capacity model: `python -m bench.run`, `python -m bench.capacity` from the checkout."""
