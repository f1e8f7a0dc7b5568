"""Functions whose outputs have zero derivative with respect to every argument:
constructors that read only shapes and dtypes, shape queries, integer-valued
and boolean functions.  One line each.

Not here: ``full full_like linspace arange`` (``creation.py``: their values come
from an argument) and random draws (``random.py`` differentiates the
location-scale ones; the registry refuses every other given a value being
differentiated).
"""
from __future__ import annotations

import builtins

import numpy as np

from ..runtime import array_attribute
from . import _ndim
from .registry import nondifferentiable

nondifferentiable(np.zeros, np.ones, np.empty, ndim=_ndim.shape_length("shape"))
nondifferentiable(np.zeros_like, np.ones_like, np.empty_like)
nondifferentiable(np.eye, np.identity, ndim=None)
nondifferentiable(np.shape, np.ndim, np.size, np.argmax, np.argmin, np.argsort, np.nonzero)
nondifferentiable(array_attribute)  # `v.ndim` ... of a value of a kind known when it runs
nondifferentiable(np.floor, np.ceil, np.round, np.rint, np.trunc, np.sign, np.isnan,
                  np.isinf, np.isfinite, np.all, np.any, np.count_nonzero)
# floor(x1 / x2): integer-valued, so piecewise constant; derivative 0 wherever it is defined
# (as `//`, which transforms/lower_expressions.py declares).
nondifferentiable(np.floor_divide)
nondifferentiable(np.searchsorted)  # insertion indices: integers
nondifferentiable(np.spacing)  # the gap to the next float: piecewise constant (as math.ulp)
nondifferentiable(np.equal, np.not_equal, np.less, np.less_equal, np.greater, np.greater_equal,
                  np.logical_and, np.logical_or, np.logical_not, np.logical_xor)
nondifferentiable(np.dtype, np.result_type, np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                  np.uint16, np.uint32, np.uint64)
nondifferentiable(builtins.len, builtins.range, builtins.print, builtins.int, builtins.bool,
                  builtins.isinstance, builtins.type)
# (strings, codes, hashes and facts about a value: no derivative in anything)
nondifferentiable(builtins.ord, builtins.chr, builtins.str, builtins.repr, builtins.hash, builtins.callable,
                  builtins.hasattr, builtins.issubclass)
# round(x) (and round(x, n)): piecewise constant, so derivative 0 wherever it is defined,
# as np.round above.
nondifferentiable(builtins.round)

from .. import runtime as _runtime  # noqa: E402 - runtime helpers with no derivative

nondifferentiable(_runtime.zip_length)
# Its argument, unchanged: of its rank (normalize binds a nondifferentiable call's first
# argument as `shape`, what the constructors' ranks are read from).
nondifferentiable(_runtime.stop_gradient, ndim=_ndim.same_as("shape"))

from ..nn import functional as _functional  # noqa: E402 - a library's checks of its hyper-parameters

# (given no value being differentiated, they have no derivative and run where called, in
# forward mode over gradient code too: hvp and hessian through GELU and the losses)
nondifferentiable(_functional._check_reduction, _functional._check_exact_gelu, impure=True)
