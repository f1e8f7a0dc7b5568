"""The corpus of real programs: a package, so that its conftest is `real.conftest` and the
top-level tests' `from conftest import numerical_grad` still finds tests/conftest.py."""
