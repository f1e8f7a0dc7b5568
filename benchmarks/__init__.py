"""srcgrad's benchmarks: each module runs one measurement against hand-written NumPy.

Run one from the repository root, for example ``python -m benchmarks.two_layer``;
``--write`` records its table in ``docs/benchmarks.md``.  Nothing here imports
NumPy at package import time, so a benchmark can still pin BLAS threads first.
"""
