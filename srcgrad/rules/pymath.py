"""Python's ``math`` functions on floats, differentiated in ``math`` too.

On a Python float ``math.sin`` is several times faster than ``np.sin``, so the
generated code keeps the user's ``math.sin`` and its adjoint reads ``math.cos``
(``templates`` binds ``math`` as it binds ``np``).  Each function takes and
returns one float: an array given to it is a size-1 array read as a float.

Where the derivative is infinite (``sqrt`` at 0, ``asin`` at ±1) Python's float
division raises ``ZeroDivisionError`` rather than give NumPy's ``inf``, except
for ``sqrt`` (``np.divide``: ``math.sqrt(x*x + y*y)`` at the origin is common).
Formulas: Abramowitz & Stegun (1964), §4.3-4.6 (elementary), 6.1.1 and 6.3
(``gamma``, ``lgamma``: ``rt.digamma``), 7.1.19 (``erf``).
"""
from __future__ import annotations

import math

import numpy as np

from ..runtime import (digamma, is_constant, item_of, items_dist_adjoint, items_dist_tangent, items_prod_adjoint,
                       items_prod_tangent, items_sum_adjoint, items_sum_tangent)
from .registry import defadjoint, deftangent, nondifferentiable


def _scalar(ndims, statics):
    return 0


_FLOAT = {"elementwise": True, "ndim": _scalar}


@defadjoint(math.sin, **_FLOAT)
def sin(ans_bar, ans, x):
    return ans_bar * math.cos(x)


@defadjoint(math.cos, **_FLOAT)
def cos(ans_bar, ans, x):
    return -ans_bar * math.sin(x)


@defadjoint(math.tan, **_FLOAT)
def tan(ans_bar, ans, x):
    return ans_bar * (1 + ans * ans)


@defadjoint(math.asin, **_FLOAT)
def asin(ans_bar, ans, x):
    return ans_bar / math.sqrt(1 - x * x)


@defadjoint(math.acos, **_FLOAT)
def acos(ans_bar, ans, x):
    return -ans_bar / math.sqrt(1 - x * x)


@defadjoint(math.atan, **_FLOAT)
def atan(ans_bar, ans, x):
    return ans_bar / (1 + x * x)


@defadjoint(math.atan2, **_FLOAT)
def atan2(ans_bar, ans, y, x):
    """``d atan2(y, x) = (x dy - y dx) / (x^2 + y^2)``."""
    return ans_bar * x / (x * x + y * y), -ans_bar * y / (x * x + y * y)


@defadjoint(math.sinh, **_FLOAT)
def sinh(ans_bar, ans, x):
    return ans_bar * math.cosh(x)


@defadjoint(math.cosh, **_FLOAT)
def cosh(ans_bar, ans, x):
    return ans_bar * math.sinh(x)


@defadjoint(math.tanh, **_FLOAT)
def tanh(ans_bar, ans, x):
    return ans_bar * (1 - ans * ans)


@defadjoint(math.exp, **_FLOAT)
def exp(ans_bar, ans, x):
    return ans_bar * ans


@defadjoint(math.expm1, **_FLOAT)
def expm1(ans_bar, ans, x):
    return ans_bar * (ans + 1)


@defadjoint(math.log, diff=("x", "base"), **_FLOAT)
def log(ans_bar, ans, x, base=None):
    """``log(x) / log(base)``: ``x`` gets ``1 / (x log base)``, ``base`` ``-ans / (base log base)``."""
    if is_constant(base) and base is None:
        return ans_bar / x, None
    return ans_bar / (x * math.log(base)), -ans_bar * ans / (base * math.log(base))


@defadjoint(math.log1p, **_FLOAT)
def log1p(ans_bar, ans, x):
    return ans_bar / (1 + x)


@defadjoint(math.log2, **_FLOAT)
def log2(ans_bar, ans, x):
    return ans_bar / (x * 0.6931471805599453)  # log(2)


@defadjoint(math.log10, **_FLOAT)
def log10(ans_bar, ans, x):
    return ans_bar / (x * 2.302585092994046)  # log(10)


@defadjoint(math.sqrt, **_FLOAT)
def sqrt(ans_bar, ans, x):
    """``inf`` at 0 (``np.divide``), as ``np.sqrt``'s."""
    return np.divide(ans_bar, 2 * ans)


@defadjoint(math.hypot, **_FLOAT)
def hypot(ans_bar, ans, x1, x2):
    """Two coordinates: ``x1 / ans``, ``x2 / ans``; 0 where both are 0 (as ``np.hypot``)."""
    return (ans_bar * x1 / ans if ans != 0 else 0.0 * ans_bar), (ans_bar * x2 / ans if ans != 0 else 0.0 * ans_bar)


@defadjoint(math.pow, **_FLOAT)
def pow(ans_bar, ans, x, y):  # noqa: A001 - math's name
    """As ``**``: a literal exponent ``n`` gives ``n x^(n-1)``; at ``x == 0`` the ``y``
    adjoint is 0 (``log x`` is read only where ``x != 0``)."""
    if is_constant(y):
        return ans_bar * (y * math.pow(x, y - 1)), None
    return ans_bar * (y * math.pow(x, y - 1)), (ans_bar * ans * math.log(x) if x != 0 else 0.0 * ans_bar)


@defadjoint(math.copysign, **_FLOAT)
def copysign(ans_bar, ans, x1, x2):
    """``|x1|`` with ``x2``'s sign: ``sign(x1) sign(x2)``; 0 at ``x1 == 0`` (as ``fabs``);
    piecewise constant in ``x2``: 0."""
    return ans_bar * (ans / x1 if x1 != 0 else 0.0), 0.0 * ans_bar


@defadjoint(math.fmod, **_FLOAT)
def fmod(ans_bar, ans, x1, x2):
    """``x1 - x2 trunc(x1 / x2)``: 1 and ``-trunc(x1 / x2)`` (the quotient piecewise constant)."""
    return ans_bar, -ans_bar * math.trunc(float(x1 / x2))


@defadjoint(math.remainder, **_FLOAT)
def remainder(ans_bar, ans, x1, x2):
    """``x1 - x2 n``, ``n`` the nearest integer to ``x1 / x2`` (IEEE 754): 1 and ``-n``."""
    return ans_bar, -ans_bar * round((x1 - ans) / x2)


@defadjoint(math.ldexp, diff=("x",), **_FLOAT)
def ldexp(ans_bar, ans, x, i):
    """``x 2^i`` for an integer ``i``: ``2^i``."""
    return ans_bar * math.ldexp(1.0, i)


@defadjoint(math.fsum, sequence=("seq",), diff=("seq",), ndim=_scalar)
def fsum(ans_bar, ans, seq):
    """The exactly rounded sum of floats: each item gets ``ans_bar``, as the builtin ``sum``."""
    return items_sum_adjoint(ans_bar, seq)


@deftangent(math.fsum)
def fsum_tangent(ans, seq, seq_dot=None):
    return items_sum_tangent(ans, seq, seq_dot)


@defadjoint(math.prod, sequence=("iterable",), diff=("iterable", "start"), ndim=_scalar)
def prod(ans_bar, ans, iterable, *, start=1):
    """Each item: the product of the others and ``start`` (``rt.items_prod_adjoint``)."""
    items_bar, start_bar = items_prod_adjoint(ans_bar, iterable, start)
    return items_bar, start_bar


@deftangent(math.prod)
def prod_tangent(ans, iterable, *, start=1, iterable_dot=None, start_dot=None):
    return items_prod_tangent(ans, iterable, start, iterable_dot, start_dot)


@defadjoint(math.dist, sequence=("p", "q"), diff=("p", "q"), ndim=_scalar)
def dist(ans_bar, ans, p, q):
    """``sqrt(sum((p_i - q_i)^2))``: ``(p_i - q_i) / ans`` and its negative."""
    p_bar, q_bar = items_dist_adjoint(ans_bar, ans, p, q)
    return p_bar, q_bar


@deftangent(math.dist)
def dist_tangent(ans, p, q, p_dot=None, q_dot=None):
    return items_dist_tangent(ans, p, q, p_dot, q_dot)


@defadjoint(math.modf, ndim=lambda ndims, statics: None)
def modf(ans_bar, ans, x):
    """``(x - trunc(x), trunc(x))``: the fraction's derivative is 1, the integer part's 0."""
    g = item_of(ans_bar, 0)
    return 0.0 * x if g is None else g


@deftangent(math.modf)
def modf_tangent(ans, x, x_dot=None):
    return x_dot, 0.0 * x_dot


@defadjoint(math.frexp, ndim=lambda ndims, statics: None)
def frexp(ans_bar, ans, x):
    """``(m, e)`` with ``x = m 2^e``, ``e`` an integer: ``dm/dx = 2^-e``."""
    g = item_of(ans_bar, 0)
    return 0.0 * x if g is None else g * math.ldexp(1.0, -ans[1])


@deftangent(math.frexp)
def frexp_tangent(ans, x, x_dot=None):
    return x_dot * math.ldexp(1.0, -ans[1]), 0.0


nondifferentiable(math.ulp)  # the gap to the next float: piecewise constant


@defadjoint(math.nextafter, **_FLOAT)
def nextafter(ans_bar, ans, x, y):
    """The float next to ``x`` toward ``y``: ``x`` plus a step of one unit in the last place,
    which is constant between powers of two (derivative 1 in ``x``, almost everywhere), and
    whose direction is ``y``'s side of ``x`` (derivative 0 in ``y``).  Central differences
    over more than a few units in the last place agree."""
    return ans_bar, 0.0 * ans_bar


@defadjoint(math.fabs, **_FLOAT)
def fabs(ans_bar, ans, x):
    """Convention: derivative 0 at 0, as ``np.abs``'s (``sign(0) == 0``)."""
    return ans_bar * (1.0 if x > 0 else -1.0 if x < 0 else 0.0)


@defadjoint(math.erf, **_FLOAT)
def erf(ans_bar, ans, x):
    """``2 / sqrt(pi) exp(-x^2)`` (A&S 7.1.19)."""
    return ans_bar * (1.1283791670955126 * math.exp(-x * x))


@defadjoint(math.erfc, **_FLOAT)
def erfc(ans_bar, ans, x):
    return -ans_bar * (1.1283791670955126 * math.exp(-x * x))


@defadjoint(math.lgamma, **_FLOAT)
def lgamma(ans_bar, ans, x):
    """``log |Gamma(x)|``: its derivative is the digamma function psi (A&S 6.3.1)."""
    return ans_bar * digamma(x)


@defadjoint(math.gamma, **_FLOAT)
def gamma(ans_bar, ans, x):
    """``Gamma'(x) = Gamma(x) psi(x)`` (A&S 6.3.1)."""
    return ans_bar * ans * digamma(x)


@defadjoint(math.asinh, **_FLOAT)
def asinh(ans_bar, ans, x):
    return ans_bar / math.sqrt(x * x + 1)


@defadjoint(math.acosh, **_FLOAT)
def acosh(ans_bar, ans, x):
    return ans_bar / math.sqrt(x * x - 1)


@defadjoint(math.atanh, **_FLOAT)
def atanh(ans_bar, ans, x):
    return ans_bar / (1 - x * x)


@defadjoint(math.exp2, **_FLOAT)
def exp2(ans_bar, ans, x):
    return ans_bar * ans * 0.6931471805599453  # log(2)


@defadjoint(math.cbrt, **_FLOAT)
def cbrt(ans_bar, ans, x):
    """``inf`` at 0 (``np.divide``), as ``np.cbrt``'s."""
    return np.divide(ans_bar, 3 * ans * ans)


@defadjoint(math.degrees, **_FLOAT)
def degrees(ans_bar, ans, x):
    return ans_bar * 57.29577951308232  # 180 / pi


@defadjoint(math.radians, **_FLOAT)
def radians(ans_bar, ans, x):
    return ans_bar * 0.017453292519943295  # pi / 180


# Integer-valued (or boolean) on floats: piecewise constant, derivative 0 wherever defined.
nondifferentiable(math.floor, math.ceil, math.trunc, math.isnan, math.isinf, math.isfinite, math.isclose,
                  math.factorial, math.comb, math.perm, math.gcd, math.lcm, math.isqrt)
