"""NumPy's elementwise functions (ufuncs and friends).

Each entry states its convention at non-smooth points next to the rule.
"""
from __future__ import annotations

import builtins

import numpy as np

from .. import runtime
from ..runtime import is_constant, unbroadcast
from .registry import defadjoint, deftangent


@defadjoint(np.exp, elementwise=True)
def exp(ans_bar, ans, x):
    return ans_bar * ans


@defadjoint(np.log, elementwise=True)
def log(ans_bar, ans, x):
    return ans_bar / x


@defadjoint(np.log1p, elementwise=True)
def log1p(ans_bar, ans, x):
    return ans_bar / (1 + x)


@defadjoint(np.expm1, elementwise=True)
def expm1(ans_bar, ans, x):
    return ans_bar * (ans + 1)


@defadjoint(np.sqrt, elementwise=True)
def sqrt(ans_bar, ans, x):
    return ans_bar / (2 * ans)


@defadjoint(np.square, elementwise=True)
def square(ans_bar, ans, x):
    return ans_bar * (2 * x)


@defadjoint(np.reciprocal, elementwise=True)
def reciprocal(ans_bar, ans, x):
    return -ans_bar * ans**2


@defadjoint(np.sin, elementwise=True)
def sin(ans_bar, ans, x):
    return ans_bar * np.cos(x)


@defadjoint(np.cos, elementwise=True)
def cos(ans_bar, ans, x):
    return -ans_bar * np.sin(x)


@defadjoint(np.tan, elementwise=True)
def tan(ans_bar, ans, x):
    return ans_bar * (1 + ans**2)


@defadjoint(np.tanh, elementwise=True)
def tanh(ans_bar, ans, x):
    return ans_bar * (1 - ans**2)


@defadjoint(runtime.erf, elementwise=True)
def erf(ans_bar, ans, x):
    """d erf(x) = 2 / sqrt(pi) exp(-x^2) dx (Abramowitz & Stegun 7.1.19)."""
    return ans_bar * 1.1283791670955126 * np.exp(-x * x)  # (2 / sqrt(pi), a Python float: dtype-neutral)


@defadjoint(np.sinh, elementwise=True)
def sinh(ans_bar, ans, x):
    return ans_bar * np.cosh(x)


@defadjoint(np.cosh, elementwise=True)
def cosh(ans_bar, ans, x):
    return ans_bar * np.sinh(x)


@defadjoint(np.arcsin, elementwise=True)
def arcsin(ans_bar, ans, x):
    return ans_bar / np.sqrt(1 - x**2)


@defadjoint(np.arccos, elementwise=True)
def arccos(ans_bar, ans, x):
    return -ans_bar / np.sqrt(1 - x**2)


@defadjoint(np.arctan, elementwise=True)
def arctan(ans_bar, ans, x):
    return ans_bar / (1 + x**2)


@defadjoint(np.arcsinh, elementwise=True)
def arcsinh(ans_bar, ans, x):
    return ans_bar / np.sqrt(x**2 + 1)


@defadjoint(np.arccosh, elementwise=True)
def arccosh(ans_bar, ans, x):
    """Defined for ``x >= 1``; ``inf`` at 1, as ``sqrt``'s at 0."""
    return ans_bar / np.sqrt(x**2 - 1)


@defadjoint(np.arctanh, elementwise=True)
def arctanh(ans_bar, ans, x):
    return ans_bar / (1 - x**2)


@defadjoint(np.cbrt, elementwise=True)
def cbrt(ans_bar, ans, x):
    """``1 / (3 cbrt(x)^2)``: ``inf`` at 0, as ``sqrt``'s."""
    return ans_bar / (3 * ans**2)


@defadjoint(np.deg2rad, np.radians, elementwise=True)
def deg2rad(ans_bar, ans, x):
    return ans_bar * 0.017453292519943295  # pi / 180, a Python float: float32 stays float32


@defadjoint(np.rad2deg, np.degrees, elementwise=True)
def rad2deg(ans_bar, ans, x):
    return ans_bar * 57.29577951308232  # 180 / pi


@defadjoint(np.sinc, elementwise=True)
def sinc(ans_bar, ans, x):
    """``sinc(x) = sin(pi x) / (pi x)`` (NumPy's normalised sinc): ``(cos(pi x) - sinc(x)) / x``,
    0 at ``x == 0`` (the limit: sinc is even)."""
    return ans_bar * np.where(x == 0, 0, (np.cos(np.pi * x) - ans) / np.where(x == 0, 1, x))


@defadjoint(np.exp2, elementwise=True)
def exp2(ans_bar, ans, x):
    return ans_bar * ans * 0.6931471805599453  # log(2)


@defadjoint(np.log2, elementwise=True)
def log2(ans_bar, ans, x):
    return ans_bar / (x * 0.6931471805599453)


@defadjoint(np.log10, elementwise=True)
def log10(ans_bar, ans, x):
    return ans_bar / (x * 2.302585092994046)  # log(10)


@defadjoint(np.arctan2, elementwise=True)
def arctan2(ans_bar, ans, x1, x2):
    """``d atan2(y, x) = (x dy - y dx) / (x^2 + y^2)``."""
    return (unbroadcast(ans_bar * x2 / (x1**2 + x2**2), x1),
            unbroadcast(-ans_bar * x1 / (x1**2 + x2**2), x2))


@defadjoint(np.nextafter, elementwise=True)
def nextafter(ans_bar, ans, x1, x2):
    """``x1`` moved one unit in the last place toward ``x2`` (``math.nextafter``'s rule):
    1 in ``x1``, 0 in ``x2``."""
    return unbroadcast(ans_bar, x1), unbroadcast(0 * ans_bar, x2)


@defadjoint(np.hypot, elementwise=True)
def hypot(ans_bar, ans, x1, x2):
    """``x1 / ans``, ``x2 / ans``; 0 where both are 0 (as ``linalg.norm``)."""
    safe = np.where(ans == 0, 1, ans)
    return unbroadcast(ans_bar * x1 / safe, x1), unbroadcast(ans_bar * x2 / safe, x2)


@defadjoint(runtime.item, ndim=lambda ndims, statics: 0, tangent="linear")
def item(ans_bar, ans, x):
    """``x.item()``: a Python number, also of an array of shape ``(1,)`` or ``(1, 1)``,
    whose adjoint takes that shape back."""
    if np.ndim(x) == 0:
        return ans_bar
    return np.reshape(ans_bar, np.shape(x))


@defadjoint(builtins.float, np.float64, np.float32, elementwise=True)
def to_float(ans_bar, ans, x):
    """``float(x)`` (and ``x.item()``) of a scalar, ``np.float32(x)``: the same value
    as another float type (the gradient takes ``x``'s type back at the end)."""
    return ans_bar


@defadjoint(np.abs, builtins.abs, np.fabs, elementwise=True)
def absolute(ans_bar, ans, x):
    """Convention: derivative 0 at 0 (``sign(0) == 0``), as PyTorch and JAX."""
    return ans_bar * np.sign(x)


@defadjoint(np.logaddexp, elementwise=True)
def logaddexp(ans_bar, ans, x1, x2):
    return unbroadcast(ans_bar * np.exp(x1 - ans), x1), unbroadcast(ans_bar * np.exp(x2 - ans), x2)


@defadjoint(np.logaddexp2, elementwise=True)
def logaddexp2(ans_bar, ans, x1, x2):
    """``log2(2^x1 + 2^x2)``: the weights ``2^(x1 - ans)``, ``2^(x2 - ans)`` (sum 1)."""
    return unbroadcast(ans_bar * np.exp2(x1 - ans), x1), unbroadcast(ans_bar * np.exp2(x2 - ans), x2)


@defadjoint(np.maximum, elementwise=True)
def maximum(ans_bar, ans, x1, x2):
    """Ties split the adjoint 0.5/0.5 (PyTorch and JAX do the same).

    Against a literal constant — ``np.maximum(h, 0)``, the ReLU — the tie goes
    to the constant: ReLU has derivative 0 at 0.
    """
    if is_constant(x2):
        return unbroadcast(ans_bar * (x1 > x2), x1), None
    if is_constant(x1):
        return None, unbroadcast(ans_bar * (x2 > x1), x2)
    return (unbroadcast(np.where(x1 == x2, 0.5 * ans_bar, ans_bar * (x1 > x2)), x1),
            unbroadcast(np.where(x1 == x2, 0.5 * ans_bar, ans_bar * (x2 > x1)), x2))


@defadjoint(np.minimum, elementwise=True)
def minimum(ans_bar, ans, x1, x2):
    """Ties split 0.5/0.5; against a literal constant the tie goes to the constant."""
    if is_constant(x2):
        return unbroadcast(ans_bar * (x1 < x2), x1), None
    if is_constant(x1):
        return None, unbroadcast(ans_bar * (x2 < x1), x2)
    return (unbroadcast(np.where(x1 == x2, 0.5 * ans_bar, ans_bar * (x1 < x2)), x1),
            unbroadcast(np.where(x1 == x2, 0.5 * ans_bar, ans_bar * (x2 < x1)), x2))


@defadjoint(np.where, elementwise=True, diff=("x", "y"))
def where(ans_bar, ans, condition, x, y):
    return (unbroadcast(np.where(condition, ans_bar, 0), x),
            unbroadcast(np.where(condition, 0, ans_bar), y))


@defadjoint(np.clip, elementwise=True, diff=("a", "a_min", "a_max"))
def clip(ans_bar, ans, a, a_min=None, a_max=None):
    """Convention: at a bound the adjoint goes to ``a`` (inside is inclusive), as PyTorch's clamp."""
    if a_min is None:
        return unbroadcast(ans_bar * (a <= a_max), a), None, unbroadcast(ans_bar * (a > a_max), a_max)
    if a_max is None:
        return unbroadcast(ans_bar * (a >= a_min), a), unbroadcast(ans_bar * (a < a_min), a_min), None
    return (unbroadcast(ans_bar * ((a >= a_min) & (a <= a_max)), a),
            unbroadcast(ans_bar * (a < a_min), a_min),
            unbroadcast(ans_bar * (a > a_max), a_max))


@defadjoint(np.fmax, elementwise=True)
def fmax(ans_bar, ans, x1, x2):
    """``np.maximum`` that skips NaN: where one argument is NaN the adjoint goes to the other
    (where both are, to ``x1``).  Ties as ``np.maximum``: 0.5/0.5, or to a literal constant."""
    if is_constant(x2):
        return unbroadcast(ans_bar * np.logical_or(x1 > x2, np.isnan(x2)), x1), None
    if is_constant(x1):
        return None, unbroadcast(ans_bar * np.logical_or(x2 > x1, np.isnan(x1)), x2)
    return (unbroadcast(np.where(x1 == x2, 0.5 * ans_bar, ans_bar * np.logical_or(x1 > x2, np.isnan(x2))), x1),
            unbroadcast(np.where(x1 == x2, 0.5 * ans_bar, ans_bar * np.logical_or(x2 > x1, np.isnan(x1) > np.isnan(x2))),
                        x2))


@defadjoint(np.fmin, elementwise=True)
def fmin(ans_bar, ans, x1, x2):
    """``np.minimum`` that skips NaN, with ``fmax``'s conventions."""
    if is_constant(x2):
        return unbroadcast(ans_bar * np.logical_or(x1 < x2, np.isnan(x2)), x1), None
    if is_constant(x1):
        return None, unbroadcast(ans_bar * np.logical_or(x2 < x1, np.isnan(x1)), x2)
    return (unbroadcast(np.where(x1 == x2, 0.5 * ans_bar, ans_bar * np.logical_or(x1 < x2, np.isnan(x2))), x1),
            unbroadcast(np.where(x1 == x2, 0.5 * ans_bar, ans_bar * np.logical_or(x2 < x1, np.isnan(x1) > np.isnan(x2))),
                        x2))


@defadjoint(np.nan_to_num, elementwise=True, diff=("x",))
def nan_to_num(ans_bar, ans, x, copy=True, nan=0.0, posinf=None, neginf=None):
    """1 where ``x`` is finite (kept), 0 where a NaN or an infinity is replaced by a constant
    (PyTorch's ``nan_to_num``).  The replacements are not differentiated (refused when they vary)."""
    return ans_bar * np.isfinite(x)


@defadjoint(np.heaviside, elementwise=True)
def heaviside(ans_bar, ans, x1, x2):
    """Piecewise constant in ``x1`` (0); ``x2`` is the value where ``x1 == 0``: 1 there, 0
    elsewhere (PyTorch's ``heaviside`` has no gradient at all; this is NumPy's function)."""
    return None, unbroadcast(ans_bar * np.equal(x1, 0), x2)


@deftangent(np.heaviside)
def heaviside_dot(ans, x1, x2, x1_dot=None, x2_dot=None):
    if is_constant(x2_dot) and x2_dot is None:
        return np.zeros_like(ans)
    return x2_dot * np.equal(x1, 0) + np.zeros_like(ans)
