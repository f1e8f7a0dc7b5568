"""The examples, the tutorial and the benchmark harnesses, run as users run them."""
