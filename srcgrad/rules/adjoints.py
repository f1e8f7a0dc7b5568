"""Rules of the runtime helpers that generated reverse-mode code calls, so that
srcgrad can transform its own output again (``srcgrad.hvp``: forward mode over
a gradient's code).

Each helper computes an adjoint, which is linear in the adjoint it is given
(``g``): its tangent is the helper applied to ``g``'s tangent (``"linear"``),
or, for the matmul adjoints, also linear in the other factor (``"bilinear"``).
The primal arguments a helper reads only for their shape, or through a mask
that is piecewise constant in them (which element of a window is its maximum),
have derivative zero (almost everywhere, the convention of ``np.maximum``'s
rule).  Each adjoint rule here is the transpose of that linear map:
``<u, helper(g)> = <helper^T(u), g>``.

A helper without a rule here is differentiated from its own source when forward
mode meets it (right, or refused at its line).
"""
from __future__ import annotations

import numpy as np

from ..runtime import (broadcast_reduced, count_reduced, fill_like, gather_adjoint, gathered, getitem_adjoint,
                       matmul_lhs, matmul_rhs, max_adjoint, positions, reshape_back, unbroadcast, zeros_tangent)
from .registry import defadjoint, nondifferentiable

nondifferentiable(count_reduced, zeros_tangent, positions)  # an element count; zeros; integers


@defadjoint(unbroadcast, diff=("g",), zero=("x",), tangent="linear")
def unbroadcast_transposed(ans_bar, ans, g, x):
    """Summing down to ``x``'s shape, transposed: broadcasting back to ``g``'s."""
    return ans_bar + np.zeros_like(g)


@defadjoint(broadcast_reduced, diff=("g",), zero=("x",), tangent="linear")
def broadcast_reduced_transposed(ans_bar, ans, g, x, axis=None, keepdims=False):
    """Broadcasting over the reduced axes, transposed: summing over them."""
    return unbroadcast(np.sum(ans_bar, axis=axis, keepdims=keepdims), g)


@defadjoint(fill_like, diff=("value",), zero=("a",), tangent="linear")
def fill_like_transposed(ans_bar, ans, a, value):
    return unbroadcast(ans_bar, value)


@defadjoint(reshape_back, diff=("g",), zero=("a",), tangent="linear")
def reshape_back_transposed(ans_bar, ans, g, a, order):
    return np.reshape(ans_bar, np.shape(g), order=order)


@defadjoint(getitem_adjoint, diff=("g",), zero=("a",), tangent="linear")
def getitem_adjoint_transposed(ans_bar, ans, g, a, index):
    """Scattering into zeros, transposed: reading the same elements again."""
    return ans_bar[index]


@defadjoint(gather_adjoint, diff=("g",), zero=("a", "where"), tangent="linear")
def gather_adjoint_transposed(ans_bar, ans, g, a, where):
    """Summing into the places elements came from, transposed: reading them there."""
    return gathered(ans_bar, where)


@defadjoint(gathered, diff=("u",), zero=("where",), tangent="linear")
def gathered_transposed(ans_bar, ans, u, where):
    return gather_adjoint(ans_bar, u, where)


@defadjoint(max_adjoint, diff=("g",), zero=("m", "x"), tangent="linear")
def max_adjoint_transposed(ans_bar, ans, g, m, x, axis=None, keepdims=False):
    """``g`` placed at each window's first extremum, transposed: the values there, summed per window."""
    mask = max_adjoint(np.ones_like(m), m, x, axis, keepdims)
    return unbroadcast(np.sum(ans_bar * mask, axis=axis, keepdims=keepdims), g)


@defadjoint(matmul_lhs, diff=("g", "x2"), zero=("x1",), tangent="bilinear")
def matmul_lhs_transposed(ans_bar, ans, g, x1, x2):
    """``<u, matmul_lhs(g, x1, x2)> = <g, u @ x2>``: the adjoints of ``u @ x2``."""
    return unbroadcast(ans_bar @ x2, g), matmul_rhs(g, ans_bar, x2)


@defadjoint(matmul_rhs, diff=("g", "x1"), zero=("x2",), tangent="bilinear")
def matmul_rhs_transposed(ans_bar, ans, g, x1, x2):
    """``<u, matmul_rhs(g, x1, x2)> = <g, x1 @ u>``."""
    return unbroadcast(x1 @ ans_bar, g), matmul_lhs(g, x1, ans_bar)
