"""Creation functions whose values come from an argument: ``full full_like linspace arange``.

The others (``zeros ones empty eye *_like``) read only shapes and dtypes:
``nondiff.py``.  An integer ``dtype`` rounds the values, so its derivative is
zero (``rt.cast_adjoint``).
"""
from __future__ import annotations

import numpy as np

from ..runtime import cast_adjoint, cast_tangent, fill_like, is_constant, linspace_adjoint, unbroadcast
from . import _ndim
from .registry import defadjoint, deftangent


@defadjoint(np.full, diff=("fill_value",), ndim=_ndim.shape_length("shape"), tangent="linear")
def full(ans_bar, ans, shape, fill_value, dtype=None, order="C"):
    """Each element is ``fill_value`` (broadcast): its adjoint sums them."""
    if dtype is None:
        return unbroadcast(ans_bar, fill_value)
    return unbroadcast(cast_adjoint(ans_bar, ans), fill_value)


@defadjoint(np.full_like, diff=("fill_value",), zero=("a",), ndim=_ndim.same_as("a"))
def full_like(ans_bar, ans, a, fill_value, dtype=None, order="K", subok=True, shape=None):
    """As ``np.full``; ``a`` gives only the shape and dtype (an integer ``a``: zero)."""
    return unbroadcast(cast_adjoint(ans_bar, ans), fill_value)


@deftangent(np.full_like)
def full_like_tangent(ans, a, fill_value, dtype=None, order="K", subok=True, shape=None, fill_value_dot=None):
    return cast_tangent(np.broadcast_to(fill_value_dot, np.shape(ans)), ans)


def _linspace_refuse(statics):
    if statics.get("retstep") is True:
        return ("srcgrad differentiates `np.linspace` without `retstep=True` (which returns a pair)",
                "compute the step yourself: `(stop - start) / (num - 1)`")
    return None


@defadjoint(np.linspace, diff=("start", "stop"), refuse=_linspace_refuse)
def linspace(ans_bar, ans, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0):
    """``ans = start + (stop - start) * t``, ``t = i / (num - 1)`` (``rt.linspace_adjoint``)."""
    if dtype is None:
        return (linspace_adjoint(ans_bar, start, stop, num, endpoint, axis, 0),
                linspace_adjoint(ans_bar, start, stop, num, endpoint, axis, 1))
    return (linspace_adjoint(cast_adjoint(ans_bar, ans), start, stop, num, endpoint, axis, 0),
            linspace_adjoint(cast_adjoint(ans_bar, ans), start, stop, num, endpoint, axis, 1))


@deftangent(np.linspace)
def linspace_tangent(ans, start, stop, num=50, endpoint=True, retstep=False, dtype=None, axis=0,
                     start_dot=None, stop_dot=None):
    """Linear in ``(start, stop)`` together: ``linspace`` of their tangents (0 for a constant)."""
    if is_constant(start_dot):
        return cast_tangent(np.linspace(0.0, stop_dot, num, endpoint, axis=axis), ans)
    if is_constant(stop_dot):
        return cast_tangent(np.linspace(start_dot, 0.0, num, endpoint, axis=axis), ans)
    return cast_tangent(np.linspace(start_dot, stop_dot, num, endpoint, axis=axis), ans)


@defadjoint(np.arange, diff=("start", "stop", "step"), ndim=_ndim.fixed(1))
def arange(ans_bar, ans, start, stop=None, step=None, dtype=None):
    """``ans[i] = start + i * step``.  The number of elements, which ``stop`` sets (and
    ``start`` alone, ``np.arange(n)``), is an integer: zero derivative there."""
    if is_constant(stop) and stop is None:
        return None, None, None
    if is_constant(step) and step is None:
        return np.sum(cast_adjoint(ans_bar, ans)), None, None
    g = cast_adjoint(ans_bar, ans)
    return np.sum(g), None, np.sum(g * np.arange(np.size(g)))


@deftangent(np.arange)
def arange_tangent(ans, start, stop=None, step=None, dtype=None, start_dot=None, stop_dot=None, step_dot=None):
    t = fill_like(ans, 0.0)
    if not (is_constant(stop) and stop is None):
        if not is_constant(start_dot):
            t = t + start_dot
        if not (is_constant(step) and step is None) and not is_constant(step_dot):
            t = t + step_dot * np.arange(np.size(ans))
    return cast_tangent(t, ans)
