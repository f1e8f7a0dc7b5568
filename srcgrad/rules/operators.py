"""Python's arithmetic operators and their NumPy ufuncs: ``+ - * / ** @``, unary ``-``.

Broadcasting: every binary rule sums its adjoint back to each input's shape
with ``unbroadcast`` (the compiler drops the call where the shapes provably
agree).  Dtype: Python scalars are "weak" under NEP 50, so ``ans_bar * 2``
keeps float32 float32.
"""
from __future__ import annotations

import builtins
import operator

import numpy as np

from ..runtime import is_constant, log_of_base, matmul_lhs, matmul_rhs, unbroadcast
from . import _ndim
# the helpers' transposes (beside them in runtime/), for higher order: srcgrad.hvp
from ..runtime import (matmul_lhs_transposed, matmul_rhs_transposed)
from .registry import defadjoint, deftangent


@defadjoint(operator.add, np.add, elementwise=True)
def add(ans_bar, ans, x1, x2):
    return unbroadcast(ans_bar, x1), unbroadcast(ans_bar, x2)


@defadjoint(operator.sub, np.subtract, elementwise=True)
def subtract(ans_bar, ans, x1, x2):
    return unbroadcast(ans_bar, x1), unbroadcast(-ans_bar, x2)


@defadjoint(operator.mul, np.multiply, elementwise=True)
def multiply(ans_bar, ans, x1, x2):
    """A literal factor 0 (``x * 0.0``) makes the product constant: no contribution,
    even where ``ans_bar`` is infinite (``(x * 0.0) ** 0.5`` at 0: ``inf * 0``)."""
    if is_constant(x2) and x2 == 0 or is_constant(x1) and x1 == 0:
        return None, None
    return unbroadcast(ans_bar * x2, x1), unbroadcast(ans_bar * x1, x2)


@defadjoint(operator.truediv, np.divide, elementwise=True)
def divide(ans_bar, ans, x1, x2):
    """A scalar divisor (or one of a rank unknown when compiling) divides with
    ``np.divide``: where ``ans_bar`` and ``x2`` are Python floats (the seed, and
    ``count = float(n)``), ``/`` would raise ZeroDivisionError at ``x2 == 0`` where
    the forward NumPy division gave inf/nan."""
    if np.ndim(x2) > 0:
        return unbroadcast(ans_bar / x2, x1), unbroadcast(-ans_bar * ans / x2, x2)
    return unbroadcast(np.divide(ans_bar, x2), x1), unbroadcast(-np.divide(ans_bar * ans, x2), x2)


@defadjoint(operator.mod, np.mod, elementwise=True)
def mod(ans_bar, ans, x1, x2):
    """``x1 % x2 = x1 - x2 * floor(x1 / x2)``: derivative 1 in ``x1`` and
    ``-floor(x1 / x2)`` in ``x2`` (almost everywhere; at the jumps, as PyTorch)."""
    return unbroadcast(ans_bar, x1), unbroadcast(-ans_bar * np.floor_divide(x1, x2), x2)


@defadjoint(builtins.divmod, np.divmod, ndim=lambda ndims, statics: None)
def divmod_(ans_bar, ans, x1, x2):
    """``(x1 // x2, x1 % x2)``: the quotient is integer-valued (no derivative), the
    remainder's adjoint is ``%``'s."""
    return unbroadcast(ans_bar[1], x1), unbroadcast(-ans_bar[1] * np.floor_divide(x1, x2), x2)


@deftangent(builtins.divmod, np.divmod)
def divmod_tangent(ans, x1, x2, x1_dot=None, x2_dot=None):
    if x2_dot is None:
        return np.zeros_like(ans[0]), x1_dot * np.ones_like(ans[1])
    if x1_dot is None:
        return np.zeros_like(ans[0]), -np.floor_divide(x1, x2) * x2_dot
    return np.zeros_like(ans[0]), x1_dot - np.floor_divide(x1, x2) * x2_dot


@defadjoint(np.fmod, elementwise=True)
def fmod(ans_bar, ans, x1, x2):
    """``fmod(x1, x2) = x1 - x2 * trunc(x1 / x2)`` (C's ``fmod``; the sign of ``x1``):
    derivative 1 in ``x1`` and ``-trunc(x1 / x2)`` in ``x2``, as ``%`` at the jumps."""
    return unbroadcast(ans_bar, x1), unbroadcast(-ans_bar * np.trunc(x1 / x2), x2)


@defadjoint(operator.neg, np.negative, elementwise=True)
def negative(ans_bar, ans, x):
    return -ans_bar


@defadjoint(operator.pos, np.positive, elementwise=True)
def positive(ans_bar, ans, x):
    return ans_bar


@defadjoint(operator.pow, np.power, builtins.pow, elementwise=True)
def power(ans_bar, ans, x1, x2):
    """d(x1**x2) = x2 x1**(x2-1) dx1 + log(x1) x1**x2 dx2.

    Conventions: a literal exponent ``n`` gives ``n * x1**(n-1)`` (and no
    contribution for ``n == 0``), so ``x**2`` at 0 is 0, not NaN.  Where
    ``x1 == 0`` the ``x2`` adjoint is 0 (the limit along ``x1 -> 0+`` for
    ``x2 > 0``), as in PyTorch and JAX, never NaN: ``log(x1)`` is read only where
    ``x1 != 0``.  ``np.power`` rather than ``**``, so a Python float base of 0
    gives NumPy's ``inf`` (``d sqrt(x)`` at 0) instead of raising.  A literal base ``b``
    (``2.0 ** x``) multiplies by ``log(b)`` computed at compile time.
    """
    if is_constant(x2) and x2 == 0:
        return None, None
    if is_constant(x2) and x2 >= 1:
        return unbroadcast(ans_bar * (x2 * x1 ** (x2 - 1)), x1), None
    if is_constant(x2):  # np.power: a Python 0.0 ** -0.5 raises, NumPy's is inf (the derivative)
        return unbroadcast(ans_bar * (x2 * np.power(x1, x2 - 1)), x1), None
    if is_constant(x1):  # a literal base, 2.0 ** x: its log is a Python float, dtype-neutral
        return None, unbroadcast(ans_bar * ans * log_of_base(x1), x2)
    safe_x1 = np.where(x1 == 0, 1, x1)
    return (unbroadcast(ans_bar * np.where(x2 == 0, 0, x2 * np.power(x1, x2 - 1)), x1),
            unbroadcast(np.where(x1 == 0, 0, ans_bar * ans * np.log(safe_x1)), x2))


@defadjoint(operator.matmul, np.matmul, ndim=_ndim.matmul, tangent="bilinear")
def matmul(ans_bar, ans, x1, x2):
    """Adjoint of the matrix product (Giles 2008, "Collected matrix derivative results")."""
    if np.ndim(x1) == 2 and np.ndim(x2) == 2:
        return ans_bar @ x2.T, x1.T @ ans_bar
    return matmul_lhs(ans_bar, x1, x2), matmul_rhs(ans_bar, x1, x2)


defadjoint(matmul_lhs, diff=("g", "x2"), zero=("x1",), tangent="bilinear")(matmul_lhs_transposed)
defadjoint(matmul_rhs, diff=("g", "x1"), zero=("x2",), tangent="bilinear")(matmul_rhs_transposed)
