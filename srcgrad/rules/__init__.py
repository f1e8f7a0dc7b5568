"""Derivative rules by family; importing this package registers them all, except those
of optional libraries (``scipy_special``, ``scipy_signal``, ``scipy_stats``): ``registry.lookup`` registers
those once the library is imported."""
from . import adjoints, creation, elementwise, linalg, nondiff, operators, pymath, random, reductions, series, shape, transfer  # noqa: F401, E501
from .registry import defadjoint, lookup, nondifferentiable  # noqa: F401
