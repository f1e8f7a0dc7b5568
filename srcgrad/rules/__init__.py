"""Derivative rules by family; importing this package registers them all."""
from . import elementwise, linalg, nondiff, operators, reductions, shape, transfer  # noqa: F401
from .registry import defadjoint, lookup, nondifferentiable  # noqa: F401
