"""Reductions: ``sum mean max min prod var std`` with ``axis`` (negative and
tuples too) and ``keepdims``.

The adjoint of a reduction broadcasts ``ans_bar`` back over the reduced axes
(``rt.broadcast_reduced``); ``full_like`` keeps the input's dtype for the
common full reduction.
"""
from __future__ import annotations

import functools

import numpy as np

from ..runtime import (broadcast_reduced, count_reduced, dtype_adjoint, fill_like, is_constant, max_adjoint,
                       prod_adjoint, std_adjoint, var_adjoint)
from . import _ndim
from .registry import defadjoint

_reduced = functools.partial(_ndim.reduced, array="a")


@defadjoint(np.sum, ndim=_reduced, tangent="linear")
def sum(ans_bar, ans, a, axis=None, dtype=None, out=None, keepdims=False):  # noqa: A001
    if not (is_constant(dtype) and dtype is None):
        ans_bar = dtype_adjoint(ans_bar, dtype)
    if axis is None and is_constant(keepdims) and not keepdims:
        return fill_like(a, ans_bar)
    if is_constant(axis) and is_constant(keepdims) and not keepdims:
        return np.broadcast_to(np.expand_dims(ans_bar, axis), np.shape(a))
    return broadcast_reduced(ans_bar, a, axis, keepdims)


@defadjoint(np.mean, ndim=_reduced, tangent="linear")
def mean(ans_bar, ans, a, axis=None, dtype=None, out=None, keepdims=False):
    if not (is_constant(dtype) and dtype is None):
        ans_bar = dtype_adjoint(ans_bar, dtype)
    if axis is None and is_constant(keepdims) and not keepdims:
        return fill_like(a, ans_bar / np.size(a))
    return broadcast_reduced(ans_bar, a, axis, keepdims) / count_reduced(a, axis)


@defadjoint(np.max, np.amax, ndim=_reduced, tangent="reduction")
def max(ans_bar, ans, a, axis=None, out=None, keepdims=False):  # noqa: A001
    """A tie gives the whole adjoint to the first maximum, row-major over ``axis``
    (``rt.max_adjoint``; PyTorch's ``max_pool2d``): a subgradient, found without counting ties."""
    return max_adjoint(ans_bar, ans, a, axis, keepdims)


@defadjoint(np.min, np.amin, ndim=_reduced, tangent="reduction")
def min(ans_bar, ans, a, axis=None, out=None, keepdims=False):  # noqa: A001
    """A tie gives the whole adjoint to the first minimum (``rt.max_adjoint`` serves both)."""
    return max_adjoint(ans_bar, ans, a, axis, keepdims)


@defadjoint(np.prod, ndim=_reduced, tangent="reduction")
def prod(ans_bar, ans, a, axis=None, dtype=None, out=None, keepdims=False):
    """Exact where ``a`` has zeros: the product of the other elements (``rt.prod_adjoint``)."""
    if not (is_constant(dtype) and dtype is None):
        ans_bar = dtype_adjoint(ans_bar, dtype)
    return prod_adjoint(ans_bar, a, axis, keepdims)


@defadjoint(np.var, ndim=_reduced, tangent="reduction")
def var(ans_bar, ans, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    if not (is_constant(dtype) and dtype is None):
        ans_bar = dtype_adjoint(ans_bar, dtype)
    return var_adjoint(ans_bar, a, axis, ddof, keepdims)


@defadjoint(np.std, ndim=_reduced, tangent="reduction")
def std(ans_bar, ans, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False):
    """At a zero standard deviation the adjoint is 0 (a subgradient), never NaN."""
    if not (is_constant(dtype) and dtype is None):
        ans_bar = dtype_adjoint(ans_bar, dtype)
    return std_adjoint(ans_bar, ans, a, axis, ddof, keepdims)
