"""``scipy.special``: rules at the library's boundary (SciPy's own source is never entered).

Registered only where SciPy is installed, at the first rule lookup after the user's
code imported ``scipy.special`` (``registry.lookup``).  Every derivative is written
with functions that have rules themselves, so forward mode over a gradient's code
(``srcgrad.hvp``) follows it: ``gammaln' = digamma``, ``digamma' = zeta(2, x)``
(= ``polygamma(1, x)``), ``polygamma(n)' = polygamma(n + 1)`` through ``zeta``.

Orders and counts (``polygamma``'s ``n``, ``jv``'s ``v``, ``multigammaln``'s ``d``,
``zeta``'s ``x``) are not differentiated: ``n`` takes integers only (zero derivative);
the others are refused when given a value being differentiated.  Float32 stays
float32: ``polygamma`` itself computes in float64, so derivatives use ``zeta``.

Sources: DLMF (dlmf.nist.gov) 5.2.2 (psi), 5.12.1 (beta), 5.15.1-2 (polygamma),
7.2.1 and 7.10.1 (erf), 10.6.1 (Bessel J, Y), 10.29.1 and 10.29.3 (modified I),
25.11.17 (Hurwitz zeta), 35.3.1 (multivariate gamma); the SciPy reference for
``expit logit xlogy logsumexp softmax log_softmax`` (docs.scipy.org/doc/scipy/reference/special.html).
"""
from __future__ import annotations

import numpy as np
from scipy import special

from ..runtime import broadcast_reduced, is_constant, polygamma_scale, unbroadcast
from . import _ndim
from .registry import defadjoint, deftangent

@defadjoint(special.expit, elementwise=True)
def expit(ans_bar, ans, x):
    """The logistic sigmoid ``1 / (1 + exp(-x))``: ``s (1 - s)``."""
    return ans_bar * ans * (1 - ans)


@defadjoint(special.logit, elementwise=True)
def logit(ans_bar, ans, x):
    """``log(x / (1 - x))``, expit's inverse: ``1 / (x (1 - x))``."""
    return ans_bar / (x * (1 - x))


@defadjoint(special.erf, elementwise=True)
def erf(ans_bar, ans, x):
    """``2 / sqrt(pi) exp(-x^2)`` (DLMF 7.10.1)."""
    return ans_bar * (1.1283791670955126 * np.exp(-x**2))  # 2 / sqrt(pi), erf'(0) (DLMF 7.2.1)


@defadjoint(special.erfc, elementwise=True)
def erfc(ans_bar, ans, x):
    """``1 - erf``: ``-2 / sqrt(pi) exp(-x^2)``."""
    return ans_bar * (-1.1283791670955126 * np.exp(-x**2))


@defadjoint(special.erfinv, elementwise=True)
def erfinv(ans_bar, ans, y):
    """The inverse's derivative, ``1 / erf'(erfinv(y)) = sqrt(pi) / 2 exp(erfinv(y)^2)``
    (DLMF 7.10.1); ``inf`` at ``y = ±1``."""
    return ans_bar * (0.886226925452758 * np.exp(ans**2))  # sqrt(pi) / 2


@defadjoint(special.gammaln, elementwise=True)
def gammaln(ans_bar, ans, x):
    """``log |Gamma(x)|``: ``psi(x)`` (DLMF 5.2.2), also for negative ``x``."""
    return ans_bar * special.digamma(x)


@defadjoint(special.digamma, special.psi, elementwise=True)
def digamma(ans_bar, ans, x):
    """``psi'(x) = polygamma(1, x) = zeta(2, x)`` (DLMF 5.15.1-2)."""
    return ans_bar * special.zeta(2, x)


@defadjoint(special.polygamma, elementwise=True, diff=("x",))
def polygamma(ans_bar, ans, n, x):
    """``psi^(n)' = psi^(n+1) = (-1)^n (n+1)! zeta(n+2, x)`` (DLMF 5.15.1-2); ``n``: integers
    (an int, an integer-valued float, or an array of them, broadcast as SciPy does), not
    differentiated; NaN for other ``n``, as SciPy's own value."""
    return ans_bar * (polygamma_scale(n) * special.zeta(n + 2, x))


@defadjoint(special.zeta, elementwise=True, diff=("q",))
def zeta(ans_bar, ans, x, q=None):
    """Hurwitz's ``zeta(s, q)`` (SciPy's ``x`` is ``s``): ``d/dq = -s zeta(s + 1, q)``
    (DLMF 25.11.17).  ``s`` is not differentiated (refused given a value being differentiated)."""
    return ans_bar * (-x * special.zeta(x + 1, q))


@defadjoint(special.multigammaln, elementwise=True, diff=("a",))
def multigammaln(ans_bar, ans, a, d):
    """``log Gamma_d(a) = d (d-1) / 4 log(pi) + sum_j gammaln(a - j / 2)``, ``j < d`` (DLMF 35.3.1):
    ``sum_j psi(a - j / 2)``.  ``d`` is not differentiated."""
    halves = (np.arange(d) / 2).astype(np.result_type(a, 0.5))
    return ans_bar * np.sum(special.digamma(np.expand_dims(a, -1) - halves), axis=-1)


@defadjoint(special.beta, elementwise=True)
def beta(ans_bar, ans, a, b):
    """``B(a, b) = Gamma(a) Gamma(b) / Gamma(a + b)`` (DLMF 5.12.1): ``B (psi(a) - psi(a + b))``
    and ``B (psi(b) - psi(a + b))``."""
    return (unbroadcast(ans_bar * ans * (special.digamma(a) - special.digamma(a + b)), a),
            unbroadcast(ans_bar * ans * (special.digamma(b) - special.digamma(a + b)), b))


@defadjoint(special.betaln, elementwise=True)
def betaln(ans_bar, ans, a, b):
    """``log |B(a, b)|``: ``psi(a) - psi(a + b)``, ``psi(b) - psi(a + b)`` (DLMF 5.12.1, 5.2.2)."""
    return (unbroadcast(ans_bar * (special.digamma(a) - special.digamma(a + b)), a),
            unbroadcast(ans_bar * (special.digamma(b) - special.digamma(a + b)), b))


@defadjoint(special.xlogy, elementwise=True)
def xlogy(ans_bar, ans, x, y):
    """``x log y``, 0 where ``x == 0`` whatever ``y``: ``log y`` and ``x / y``, whose value
    where ``x == 0`` is 0 (also at ``y == 0``: ``xlogy(0, y)`` is constant in ``y``)."""
    return unbroadcast(ans_bar * np.log(y), x), unbroadcast(ans_bar * x / np.where(x == 0, 1, y), y)


@defadjoint(special.i0, elementwise=True)
def i0(ans_bar, ans, x):
    """``I0' = I1`` (DLMF 10.29.3)."""
    return ans_bar * special.i1(x)


@defadjoint(special.i1, elementwise=True)
def i1(ans_bar, ans, x):
    """``I1' = (I0 + I2) / 2`` (DLMF 10.29.1), finite at 0 (where ``I0 - I1 / x`` is not)."""
    return ans_bar * (0.5 * (special.i0(x) + special.iv(2, x)))


@defadjoint(special.iv, elementwise=True, diff=("x",))
def iv(ans_bar, ans, v, x):
    """``I_v' = (I_{v-1} + I_{v+1}) / 2`` (DLMF 10.29.1); the order ``v`` is not differentiated."""
    return ans_bar * (0.5 * (special.iv(v - 1, x) + special.iv(v + 1, x)))


@defadjoint(special.ive, elementwise=True, diff=("x",))
def ive(ans_bar, ans, v, x):
    """``ive = I_v(x) exp(-|x|)``: ``(ive(v-1) + ive(v+1)) / 2 - sign(x) ive(v)`` (DLMF 10.29.1);
    at ``x == 0`` the kink of ``exp(-|x|)`` gets ``sign(0) == 0``, as ``np.abs``."""
    return ans_bar * (0.5 * (special.ive(v - 1, x) + special.ive(v + 1, x)) - np.sign(x) * ans)


@defadjoint(special.jv, special.jn, elementwise=True, diff=("x",))
def jv(ans_bar, ans, v, x):
    """``J_v' = (J_{v-1} - J_{v+1}) / 2`` (DLMF 10.6.1); ``jn`` is ``jv``.  The order ``v`` is
    not differentiated (refused given a value being differentiated)."""
    return ans_bar * (0.5 * (special.jv(v - 1, x) - special.jv(v + 1, x)))


@defadjoint(special.yv, elementwise=True, diff=("x",))
def yv(ans_bar, ans, v, x):
    """``Y_v' = (Y_{v-1} - Y_{v+1}) / 2`` (DLMF 10.6.1); the order ``v`` is not differentiated."""
    return ans_bar * (0.5 * (special.yv(v - 1, x) - special.yv(v + 1, x)))


@defadjoint(special.yn, elementwise=True, diff=("x",))
def yn(ans_bar, ans, n, x):
    """As ``yv`` (``yn`` computes in float64: ``yv`` keeps float32); ``n``: an integer."""
    return ans_bar * (0.5 * (special.yv(n - 1, x) - special.yv(n + 1, x)))


# ---- reductions along an axis ------------------------------------------------


def _logsumexp_refuse(statics):
    if statics.get("return_sign", False) is not False:
        return ("srcgrad differentiates `logsumexp` without `return_sign=True` (which returns a pair)",
                "give `b` of one sign, or take `np.sign` of the sum yourself")
    return None


def _logsumexp_ndim(ndims, statics):
    if "b" in ndims or statics.get("b") is not None:  # (``b`` broadcast against ``a`` may add axes)
        return None
    return _ndim.reduced(ndims, statics, array="a")


@defadjoint(special.logsumexp, ndim=_logsumexp_ndim, diff=("a", "b"), refuse=_logsumexp_refuse)
def logsumexp(ans_bar, ans, a, axis=None, b=None, keepdims=False, return_sign=False):
    """``log sum(b exp(a))`` over ``axis``: ``a`` gets the weights ``b exp(a - ans)`` (the softmax
    when ``b`` is None), ``b`` gets ``exp(a - ans)`` (SciPy's definition, differentiated).

    Where ``b == 0``, ``a``'s weight is 0 although ``exp(a - ans)`` may overflow (``a`` far above the
    sum, which leaves it out; ``0 * inf`` is NaN): the exponent is masked before ``exp``, so that
    forward mode over this code (``hvp``) finds finite factors there too."""
    if is_constant(b) and b is None:
        weights = np.exp(a - broadcast_reduced(ans, a, axis, keepdims))
        return broadcast_reduced(ans_bar, a, axis, keepdims) * weights, None
    full = np.broadcast_to(a, np.broadcast_shapes(np.shape(a), np.shape(b)))
    level = broadcast_reduced(ans, full, axis, keepdims)
    spread = broadcast_reduced(ans_bar, full, axis, keepdims)
    return (unbroadcast(spread * (b * np.exp(np.where(b == 0, level, full) - level)), a),
            unbroadcast(spread * np.exp(full - level), b))


@deftangent(special.logsumexp)
def logsumexp_tangent(ans, a, axis=None, b=None, keepdims=False, return_sign=False, a_dot=None, b_dot=None):
    if is_constant(b) and b is None:
        weights = np.exp(a - broadcast_reduced(ans, a, axis, keepdims))
        return np.sum(weights * a_dot, axis=axis, keepdims=keepdims)
    full = np.broadcast_to(a, np.broadcast_shapes(np.shape(a), np.shape(b)))
    level = broadcast_reduced(ans, full, axis, keepdims)
    if is_constant(b_dot):  # (the adjoint's masked weights, for the same reason)
        return np.sum(b * np.exp(np.where(b == 0, level, full) - level) * a_dot, axis=axis, keepdims=keepdims)
    if is_constant(a_dot):
        return np.sum(np.exp(full - level) * b_dot, axis=axis, keepdims=keepdims)
    return np.sum(b * np.exp(np.where(b == 0, level, full) - level) * a_dot + np.exp(full - level) * b_dot,
                  axis=axis, keepdims=keepdims)


@defadjoint(special.softmax, ndim=_ndim.same_as("x"))
def softmax(ans_bar, ans, x, axis=None):
    """``s = exp(x - logsumexp(x))`` over ``axis`` (None: all): ``s (g - sum(g s))``.  The
    Jacobian ``diag(s) - s s^T`` is symmetric: the tangent is the same formula."""
    return ans * (ans_bar - np.sum(ans_bar * ans, axis=axis, keepdims=True))


@deftangent(special.softmax)
def softmax_tangent(ans, x, axis=None, x_dot=None):
    return ans * (x_dot - np.sum(x_dot * ans, axis=axis, keepdims=True))


@defadjoint(special.log_softmax, ndim=_ndim.same_as("x"))
def log_softmax(ans_bar, ans, x, axis=None):
    """``x - logsumexp(x)`` over ``axis``: ``g - exp(ans) sum(g)``; tangent ``v - sum(exp(ans) v)``."""
    return ans_bar - np.exp(ans) * np.sum(ans_bar, axis=axis, keepdims=True)


@deftangent(special.log_softmax)
def log_softmax_tangent(ans, x, axis=None, x_dot=None):
    return x_dot - np.sum(np.exp(ans) * x_dot, axis=axis, keepdims=True)
