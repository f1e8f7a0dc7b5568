"""Series: ``convolve correlate interp polyval trapezoid ediff1d gradient``.

``convolve``/``correlate`` are bilinear: each input's adjoint is a ``valid`` correlation
of ``ans_bar`` padded back to the full result (``rt.full_padding``) with the other input,
the transpose of the full convolution (``<g, a * v> = <corr(g, v), a>``).
"""
from __future__ import annotations

import numpy as np

from ..runtime import (ediff1d_adjoint, full_padding, getitem_adjoint, gradient_adjoint, interp_knot_partials,
                       interp_segments, interp_slope, is_constant, polyval_powers, trapezoid_weights)
from .registry import defadjoint, deftangent


@defadjoint(np.convolve, diff=("a", "v"), tangent="bilinear")
def convolve(ans_bar, ans, a, v, mode="full"):
    """``y[k] = sum_i a[i] v[k - i]``: ``a_bar[i] = sum_k g[k] v[k - i]``, a valid correlation."""
    g = np.pad(ans_bar, full_padding(np.size(a), np.size(v), mode))
    return np.correlate(g, v, "valid"), np.correlate(g, a, "valid")


@defadjoint(np.correlate, diff=("a", "v"), tangent="bilinear")
def correlate(ans_bar, ans, a, v, mode="valid"):
    """The full correlation is ``convolve(a, v[::-1])`` (real inputs); ``'same'`` is centred
    as NumPy centres it (``rt.full_padding``)."""
    g = np.pad(ans_bar, full_padding(np.size(a), np.size(v), mode, True))
    return np.correlate(g, np.flip(v), "valid"), np.flip(np.correlate(g, a, "valid"))


def _interp_refuse(statics):
    if statics.get("period", None) is not None:
        return ("srcgrad differentiates `np.interp` without `period=`",
                "wrap `x` yourself: `np.interp(x % p, xp, fp)` with `xp` sorted within one period")
    return None


@defadjoint(np.interp, diff=("x", "xp", "fp"), refuse=_interp_refuse)
def interp(ans_bar, ans, x, xp, fp, left=None, right=None, period=None):
    """Piecewise linear: in ``x`` the slope of its segment, 0 outside ``[xp[0], xp[-1]]``
    (``np.interp`` is constant there), a knot taking the slope to its right (the last knot,
    the last segment's: JAX's convention); in ``fp`` the weights ``1 - t`` and ``t`` of the
    segment's ends (``rt.interp_segments``), the end value outside the range; in the knots
    ``xp`` (increasing, as NumPy requires) the interpolation formula's partials
    (``rt.interp_knot_partials``).  Given ``left``/``right`` are not differentiated (refused
    when they vary)."""
    i, t = interp_segments(x, xp)
    low, high = 1 - t, t
    if not (is_constant(left) and left is None):
        low, high = np.where(np.less(x, xp[0]), 0.0, low), np.where(np.less(x, xp[0]), 0.0, high)
    if not (is_constant(right) and right is None):
        low, high = np.where(np.greater(x, xp[-1]), 0.0, low), np.where(np.greater(x, xp[-1]), 0.0, high)
    g = np.ravel(ans_bar + np.zeros_like(x))
    fp_array, xp_array = np.asarray(fp), np.asarray(xp)
    fp_bar = getitem_adjoint(g * np.ravel(low), fp_array, np.ravel(i - 1)) \
        + getitem_adjoint(g * np.ravel(high), fp_array, np.ravel(i))
    knots = interp_knot_partials(x, xp, fp)
    xp_bar = getitem_adjoint(g * np.ravel(knots[1]), xp_array, np.ravel(i - 1)) \
        + getitem_adjoint(g * np.ravel(knots[2]), xp_array, np.ravel(i))
    # np.interp computes in float64: each adjoint in its argument's floating dtype
    return (np.asarray(ans_bar * interp_slope(x, xp, fp), dtype=np.result_type(np.asarray(x), np.float32)),
            np.asarray(xp_bar, dtype=np.result_type(xp_array, np.float32)),
            np.asarray(fp_bar, dtype=np.result_type(fp_array, np.float32)))


@deftangent(np.interp)
def interp_dot(ans, x, xp, fp, left=None, right=None, period=None, x_dot=None, xp_dot=None, fp_dot=None):
    """The slope times ``x_dot``, ``fp_dot`` interpolated as ``fp`` is (0 where a given
    ``left``/``right`` is read), and the knots' partials times ``xp_dot``."""
    out = np.zeros(np.shape(ans), dtype=np.result_type(ans, 1.0))
    if not (is_constant(x_dot) and x_dot is None):
        out = out + interp_slope(x, xp, fp) * x_dot
    if not (is_constant(fp_dot) and fp_dot is None):
        out = out + np.interp(x, xp, fp_dot, None if left is None else 0.0, None if right is None else 0.0)
    if not (is_constant(xp_dot) and xp_dot is None):
        knots = interp_knot_partials(x, xp, fp)
        out = out + knots[1] * np.asarray(xp_dot)[knots[0] - 1] + knots[2] * np.asarray(xp_dot)[knots[0]]
    return out


@defadjoint(np.polyval, diff=("p", "x"))
def polyval(ans_bar, ans, p, x):
    """``sum_i p[i] x^(n-1-i)``: in ``p[i]``, ``x^(n-1-i)`` (``rt.polyval_powers``); in ``x``,
    the derivative polynomial ``sum_i (n-1-i) p[i] x^(n-2-i)``.  ``p`` one-dimensional."""
    n = np.size(p)
    slope = np.polyval(np.asarray(p)[:-1] * np.arange(n - 1, 0, -1).astype(np.result_type(np.asarray(p), 1.0)), x)
    # (each adjoint in its argument's floating dtype: NumPy promotes a list `p` to float64)
    return (np.asarray(np.tensordot(ans_bar, polyval_powers(x, n), np.ndim(ans)),
                       dtype=np.result_type(np.asarray(p), np.float32)),
            np.asarray(ans_bar * slope, dtype=np.result_type(np.asarray(x), np.float32)))


@deftangent(np.polyval)
def polyval_dot(ans, p, x, p_dot=None, x_dot=None):
    if is_constant(x_dot) and x_dot is None:
        return np.polyval(p_dot, x)
    n = np.size(p)
    slope = np.polyval(np.asarray(p)[:-1] * np.arange(n - 1, 0, -1).astype(np.result_type(np.asarray(p), 1.0)), x)
    if is_constant(p_dot) and p_dot is None:
        return slope * x_dot
    return np.polyval(p_dot, x) + slope * x_dot


@defadjoint(np.trapezoid, diff=("y",), tangent="linear")
def trapezoid(ans_bar, ans, y, x=None, dx=1.0, axis=-1):
    """Linear in ``y``: each sample gets half of each spacing beside it (``rt.trapezoid_weights``).
    ``x`` and ``dx`` are not differentiated (refused when they vary)."""
    return np.expand_dims(ans_bar, axis) * trapezoid_weights(y, x, dx, axis)


@defadjoint(np.ediff1d, diff=("ary",))
def ediff1d(ans_bar, ans, ary, to_end=None, to_begin=None):
    """Differences of the flattened array: ``a_bar[i] = g[i - 1] - g[i]`` (``rt.ediff1d_adjoint``);
    ``to_begin``/``to_end`` are not differentiated (refused when they vary)."""
    return ediff1d_adjoint(ans_bar, ary, to_end, to_begin)


@deftangent(np.ediff1d)
def ediff1d_dot(ans, ary, to_end=None, to_begin=None, ary_dot=None):
    """The differences of the tangent, 0 in ``to_begin``/``to_end``'s places."""
    return np.ediff1d(ary_dot, None if to_end is None else np.zeros(np.size(to_end)),
                      None if to_begin is None else np.zeros(np.size(to_begin)))


def _gradient_refuse(statics):
    if statics.get("varargs", ()) not in ((), None):
        return ("srcgrad differentiates `np.gradient` with unit spacing only", "divide by the spacing yourself")
    if statics.get("edge_order", 1) != 1:
        return ("srcgrad differentiates `np.gradient` with edge_order=1 only", "leave out edge_order=")
    return None


@defadjoint(np.gradient, diff=("f",), refuse=_gradient_refuse, tangent="linear")
def gradient(ans_bar, ans, f, *varargs, axis=None, edge_order=1):
    """Linear: central differences inside, one-sided at the ends, transposed per axis
    (``rt.gradient_adjoint``); one array for one axis, a tuple otherwise, as NumPy returns."""
    return gradient_adjoint(ans_bar, ans, f, axis)
