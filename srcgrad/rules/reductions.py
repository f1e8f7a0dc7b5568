"""Reductions: ``sum mean max min prod var std nansum nanmean nanmax nanmin ptp
average median quantile percentile nanvar nanstd nanprod``, with ``axis`` (negative and tuples too) and ``keepdims``; ``cumprod``;
Python's builtins ``sum max min`` over a list, a tuple or an array's first axis.

The adjoint of a reduction broadcasts ``ans_bar`` back over the reduced axes
(``rt.broadcast_reduced``); ``full_like`` keeps the input's dtype for the
common full reduction.
"""
from __future__ import annotations

import builtins
import functools

import numpy as np

from ..runtime import (average_adjoint, average_tangent, broadcast_reduced, count_reduced, cumprod_adjoint,
                       cumprod_tangent, dtype_adjoint, fill_like, is_constant, items_extremum_adjoint,
                       items_extremum_tangent, items_sum_adjoint, items_sum_tangent, max_adjoint,
                       sorted_adjoint, sorted_tangent, nanmean_adjoint, prod_adjoint, nanvar_adjoint, quantile_adjoint,
                       quantile_tangent, std_adjoint, unbroadcast, var_adjoint)
from . import _ndim
# the helpers' transposes (beside them in runtime/), for higher order: srcgrad.hvp
from ..runtime import (broadcast_reduced_transposed, items_extremum_adjoint_transposed,
                       max_adjoint_transposed, quantile_adjoint_transposed, quantile_tangent_transposed)
from .registry import defadjoint, deftangent, nondifferentiable

_reduced = functools.partial(_ndim.reduced, array="a")


def _sum_refuse(statics):
    if statics.get("initial", 0) not in (0, None):
        return ("srcgrad differentiates `np.sum` with `initial=0` only (forward mode derives its "
                "tangent as the sum of the tangents, which another start would offset)",
                "add the start yourself: `c + np.sum(x)`")
    return None


@defadjoint(np.sum, ndim=_reduced, refuse=_sum_refuse, tangent="linear")
def sum(ans_bar, ans, a, axis=None, dtype=None, out=None, keepdims=False, initial=0, where=True):  # noqa: A001
    """``where=``: only the elements it selects get the adjoint (with ``initial=0``)."""
    if not (is_constant(dtype) and dtype is None):
        ans_bar = dtype_adjoint(ans_bar, dtype)
    if not (is_constant(where) and where is True):
        return broadcast_reduced(ans_bar, a, axis, keepdims) * where
    if axis is None and is_constant(keepdims) and not keepdims:
        return fill_like(a, ans_bar)
    if is_constant(axis) and is_constant(keepdims) and not keepdims:
        return np.broadcast_to(np.expand_dims(ans_bar, axis), np.shape(a))
    return broadcast_reduced(ans_bar, a, axis, keepdims)


defadjoint(broadcast_reduced, diff=("g",), zero=("x",), tangent="linear")(broadcast_reduced_transposed)
nondifferentiable(count_reduced)  # an element count


@defadjoint(np.mean, ndim=_reduced, tangent="linear")
def mean(ans_bar, ans, a, axis=None, dtype=None, out=None, keepdims=False):
    if not (is_constant(dtype) and dtype is None):
        ans_bar = dtype_adjoint(ans_bar, dtype)
    if axis is None and is_constant(keepdims) and not keepdims:
        return fill_like(a, ans_bar / np.size(a))
    return broadcast_reduced(ans_bar, a, axis, keepdims) / count_reduced(a, axis)


@defadjoint(np.max, np.amax, np.nanmax, ndim=_reduced, tangent="reduction")
def max(ans_bar, ans, a, axis=None, out=None, keepdims=False, initial=None, where=True):  # noqa: A001
    """A tie gives the whole adjoint to the first maximum, row-major over ``axis``
    (``rt.max_adjoint``; PyTorch's ``max_pool2d``): a subgradient, found without counting ties.
    ``nanmax`` skips NaNs (no NaN equals the maximum); ``where=`` skips the elements it leaves
    out; ``initial`` is a constant: where it is the maximum, ``a`` gets 0 (a tie: ``a``)."""
    if not (is_constant(where) and where is True):
        return max_adjoint(ans_bar, ans, np.where(where, a, np.nan), axis, keepdims)
    return max_adjoint(ans_bar, ans, a, axis, keepdims)


defadjoint(max_adjoint, diff=("g",), zero=("m", "x"), tangent="linear")(max_adjoint_transposed)


@defadjoint(np.min, np.amin, np.nanmin, ndim=_reduced, tangent="reduction")
def min(ans_bar, ans, a, axis=None, out=None, keepdims=False, initial=None, where=True):  # noqa: A001
    """As ``max``: the first minimum (``rt.max_adjoint`` serves both)."""
    if not (is_constant(where) and where is True):
        return max_adjoint(ans_bar, ans, np.where(where, a, np.nan), axis, keepdims)
    return max_adjoint(ans_bar, ans, a, axis, keepdims)


@defadjoint(np.ptp, ndim=_reduced, tangent="reduction")
def ptp(ans_bar, ans, a, axis=None, out=None, keepdims=False):
    """``max - min``, with their tie conventions: a constant window (one element both
    first maximum and first minimum) gets 0."""
    return (max_adjoint(ans_bar, np.max(a, axis=axis, keepdims=keepdims), a, axis, keepdims)
            - max_adjoint(ans_bar, np.min(a, axis=axis, keepdims=keepdims), a, axis, keepdims))


@defadjoint(np.nansum, ndim=_reduced, tangent="reduction")
def nansum(ans_bar, ans, a, axis=None, dtype=None, out=None, keepdims=False):
    """NaNs count as 0: they get 0."""
    if not (is_constant(dtype) and dtype is None):
        ans_bar = dtype_adjoint(ans_bar, dtype)
    return broadcast_reduced(ans_bar, a, axis, keepdims) * ~np.isnan(a)


@defadjoint(np.nanmean, ndim=_reduced, tangent="reduction")
def nanmean(ans_bar, ans, a, axis=None, dtype=None, out=None, keepdims=False):
    """The mean of the elements that are not NaN (``rt.nanmean_adjoint``); NaNs get 0."""
    if not (is_constant(dtype) and dtype is None):
        ans_bar = dtype_adjoint(ans_bar, dtype)
    return nanmean_adjoint(ans_bar, a, axis, keepdims)


def _average_refuse(statics):
    if statics.get("returned", False) is not False:
        return ("srcgrad differentiates `np.average` without `returned=True` (which returns a pair)",
                "compute the sum of the weights yourself: `np.sum(weights, axis)`")
    return None


@defadjoint(np.average, ndim=_reduced, diff=("a", "weights"), refuse=_average_refuse)
def average(ans_bar, ans, a, axis=None, weights=None, returned=False, keepdims=False):
    """Without weights, ``mean``; with them ``sum(w a) / sum(w)`` (``rt.average_adjoint``)."""
    if is_constant(weights) and weights is None:
        return broadcast_reduced(ans_bar, a, axis, keepdims) / count_reduced(a, axis), None
    return (average_adjoint(ans_bar, ans, a, axis, weights, keepdims, 0),
            average_adjoint(ans_bar, ans, a, axis, weights, keepdims, 1))


@deftangent(np.average)
def average_tangent_rule(ans, a, axis=None, weights=None, returned=False, keepdims=False, a_dot=None,
                         weights_dot=None):
    if is_constant(weights) and weights is None:
        return np.mean(a_dot, axis=axis, keepdims=keepdims)
    return average_tangent(ans, a, axis, weights, keepdims, a_dot, weights_dot)


@defadjoint(np.cumprod, diff=("a",))
def cumprod(ans_bar, ans, a, axis=None, dtype=None, out=None):
    """Exact where ``a`` has zeros (``rt.cumprod_adjoint``)."""
    if not (is_constant(dtype) and dtype is None):
        ans_bar = dtype_adjoint(ans_bar, dtype)
    return cumprod_adjoint(ans_bar, a, axis)


@deftangent(np.cumprod)
def cumprod_tangent_rule(ans, a, axis=None, dtype=None, out=None, a_dot=None):
    return cumprod_tangent(a_dot, a, ans, axis)


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


def _builtin_extremum_refuse(statics):
    if statics.get("key") is not None:
        return ("srcgrad differentiates the builtin `max`/`min` without `key=`",
                "pick the index first (`i = max(range(len(xs)), key=...)`), then read `xs[i]`")
    return None


@defadjoint(builtins.max, builtins.min, sequence=("iterable",), diff=("iterable",),
            refuse=_builtin_extremum_refuse)
def builtin_max(ans_bar, ans, iterable, *, key=None, default=None):
    """The builtins ``max(xs)`` / ``min(xs)`` of numbers, and ``max(a, b, ...)``, which the
    compiler writes ``max((a, b, ...))``: a tie gives the whole adjoint to the first
    extremum (the item Python returns), as ``np.max`` (``rt.items_extremum_adjoint``)."""
    return items_extremum_adjoint(ans_bar, ans, iterable)


defadjoint(items_extremum_adjoint, diff=("ans_bar",), zero=("ans", "items"), tangent="linear")(
    items_extremum_adjoint_transposed)


@deftangent(builtins.max, builtins.min)
def builtin_max_tangent(ans, iterable, *, key=None, default=None, iterable_dot=None):
    return items_extremum_tangent(ans, iterable, iterable_dot)


@defadjoint(builtins.sum, sequence=("iterable",), diff=("iterable", "start"))
def builtin_sum(ans_bar, ans, iterable, start=0):
    """The builtin ``sum(xs, start)`` of numbers or arrays (which may broadcast together),
    or of an array's rows: each item gets ``ans_bar`` (``rt.items_sum_adjoint``)."""
    return items_sum_adjoint(ans_bar, iterable), unbroadcast(ans_bar, start)


@deftangent(builtins.sum)
def builtin_sum_tangent(ans, iterable, start=0, iterable_dot=None, start_dot=None):
    return items_sum_tangent(ans, iterable, iterable_dot, start_dot)


@defadjoint(builtins.sorted, sequence=("iterable",), diff=("iterable",), ndim=lambda ndims, statics: None)
def builtin_sorted(ans_bar, ans, iterable, *, key=None, reverse=False):
    """The builtin ``sorted(xs, key=..., reverse=...)``: each sorted item's adjoint goes back
    to the position it came from; ties keep Python's stable order (``rt.sorted_adjoint``)."""
    return sorted_adjoint(ans_bar, iterable, key, reverse)


@deftangent(builtins.sorted)
def builtin_sorted_tangent(ans, iterable, *, key=None, reverse=False, iterable_dot=None):
    return sorted_tangent(iterable, iterable_dot, key, reverse)


def _quantile_refuse(statics):
    if statics.get("method", "linear") != "linear":
        return (f"srcgrad differentiates `np.quantile`/`np.percentile` with method='linear' (the default) "
                f"only, not method={statics['method']!r}", "use the default method")
    if statics.get("weights", None) is not None:
        return ("srcgrad differentiates `np.quantile`/`np.percentile` without `weights=`",
                "leave out weights")
    return None


@defadjoint(np.quantile, diff=("a",), refuse=_quantile_refuse)
def quantile(ans_bar, ans, a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False,
             *, weights=None):
    """Linear interpolation between the two order statistics either side of ``q (n - 1)``
    (Hyndman & Fan 1996, definition 7, NumPy's default): they get ``1 - t`` and ``t`` of the
    adjoint; ties in the order ``argsort`` (stable) gives (``rt.quantile_adjoint``).  ``q``
    is not differentiated (refused when it varies)."""
    return quantile_adjoint(ans_bar, a, q, axis, keepdims)


defadjoint(quantile_adjoint, diff=("ans_bar",), zero=("a",), tangent="linear")(quantile_adjoint_transposed)


@deftangent(np.quantile)
def quantile_dot(ans, a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False,
                 *, weights=None, a_dot=None):
    return quantile_tangent(a_dot, a, q, axis, keepdims)


defadjoint(quantile_tangent, diff=("a_dot",), zero=("a",), tangent="linear")(quantile_tangent_transposed)


@defadjoint(np.percentile, diff=("a",), refuse=_quantile_refuse)
def percentile(ans_bar, ans, a, q, axis=None, out=None, overwrite_input=False, method="linear",
               keepdims=False, *, weights=None):
    """``quantile(a, q / 100)``."""
    return quantile_adjoint(ans_bar, a, np.true_divide(q, 100), axis, keepdims)


@deftangent(np.percentile)
def percentile_dot(ans, a, q, axis=None, out=None, overwrite_input=False, method="linear", keepdims=False,
                   *, weights=None, a_dot=None):
    return quantile_tangent(a_dot, a, np.true_divide(q, 100), axis, keepdims)


@defadjoint(np.median, ndim=_reduced, diff=("a",))
def median(ans_bar, ans, a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """``quantile(a, 0.5)``: of an even count, NumPy's value is the mean of the two middle
    elements, so each gets half the adjoint (JAX's ``median``; PyTorch's ``median`` returns
    the lower one instead, its ``quantile(a, 0.5)`` agrees with NumPy)."""
    return quantile_adjoint(ans_bar, a, 0.5, axis, keepdims)


@deftangent(np.median)
def median_dot(ans, a, axis=None, out=None, overwrite_input=False, keepdims=False, a_dot=None):
    return quantile_tangent(a_dot, a, 0.5, axis, keepdims)


def _nanvar_refuse(statics):
    for name, default in (("where", True), ("mean", None), ("correction", None)):
        if statics.get(name, default) is not default:
            return (f"srcgrad differentiates `np.nanvar`/`np.nanstd` without `{name}=`",
                    "use ddof=" if name == "correction" else f"leave out {name}")
    return None


@defadjoint(np.nanvar, ndim=_reduced, diff=("a",), refuse=_nanvar_refuse, tangent="reduction")
def nanvar(ans_bar, ans, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, mean=None,
           correction=None):
    """``np.var`` of the elements that are not NaN; NaNs get 0 (``rt.nanvar_adjoint``)."""
    if not (is_constant(dtype) and dtype is None):
        ans_bar = dtype_adjoint(ans_bar, dtype)
    return nanvar_adjoint(ans_bar, a, axis, ddof, keepdims)


@defadjoint(np.nanstd, ndim=_reduced, diff=("a",), refuse=_nanvar_refuse, tangent="reduction")
def nanstd(ans_bar, ans, a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True, mean=None,
           correction=None):
    """``sqrt(nanvar)``: 0 where the spread is 0 (as ``np.std``), and at NaNs."""
    if not (is_constant(dtype) and dtype is None):
        ans_bar = dtype_adjoint(ans_bar, dtype)
    return nanvar_adjoint(np.where(ans == 0, 0, ans_bar / np.where(ans == 0, 1, 2 * ans)), a, axis, ddof, keepdims)


@defadjoint(np.nanprod, ndim=_reduced, diff=("a",), tangent="reduction")
def nanprod(ans_bar, ans, a, axis=None, dtype=None, out=None, keepdims=False):
    """``np.prod`` with NaNs as 1 (exact with zeros); NaNs get 0."""
    if not (is_constant(dtype) and dtype is None):
        ans_bar = dtype_adjoint(ans_bar, dtype)
    return prod_adjoint(ans_bar, np.where(np.isnan(a), 1, a), axis, keepdims) * ~np.isnan(a)
