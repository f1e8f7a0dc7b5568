"""``scipy.stats`` distributions: ``pdf logpdf cdf logcdf`` of ``norm t gamma beta chi2``
(``x``, the shapes, ``loc``, ``scale``) and ``pmf logpmf cdf logcdf`` of ``poisson`` (``mu``).

Registered only where SciPy is installed (see ``scipy_special.py``), as rules of the
methods of each distribution's class (``stats.norm.pdf`` is a bound method).  With
``z = (x - loc) / scale``, the score ``s = (log f)'(z)`` of the standard density ``f``
and ``logpdf = log f(z) - log scale``: ``x`` gets ``s / scale``, ``loc`` ``-s / scale``,
``scale`` ``-(z s + 1) / scale``; ``pdf`` the same times ``pdf``.  ``cdf = F(z)``: ``x``
gets ``pdf``, ``loc`` ``-pdf``, ``scale`` ``-pdf z``; ``logcdf`` those over ``cdf``
(``exp(logpdf - logcdf)``).  The shapes in ``logpdf``: each density's formula (SciPy's
documentation of the distribution) differentiated, with ``psi`` (DLMF 5.2.2).  A ``cdf``
has no closed-form derivative in a shape (the parameter of an incomplete gamma or beta
function): refused given a value being differentiated.  Poisson's ``cdf`` in ``mu`` is
``-pmf(floor(k - loc))`` (the sum of the pmf's derivatives telescopes); ``k`` and ``loc``
are integers (zero derivative, ``loc`` refused).  SciPy computes all of these in float64.
Where a ``pdf`` is 0 (outside its support, or underflowed) its derivatives are 0 (a density
is smallest there), but its score or ``log z`` is infinite or NaN, and ``0 * inf`` is NaN: ``z``
is 0.5 there (inside every support) before they are formed.
"""
from __future__ import annotations

import numpy as np
from scipy import special, stats

from ..runtime import gaussian_cdf_adjoints, gaussian_cdf_tangent, is_constant, unbroadcast
from .registry import defadjoint, deftangent

_LOCATION_SCALE = ("x", "loc", "scale")


def _method(distribution, name):
    return ((type(distribution), name),)


# ---- norm: s = -z ------------------------------------------------------------------


@defadjoint(methods=_method(stats.norm, "logpdf"), diff=_LOCATION_SCALE, elementwise=True)
def norm_logpdf(ans_bar, ans, x, loc=0, scale=1):
    z = (x - loc) / scale
    return (unbroadcast(-ans_bar * z / scale, x), unbroadcast(ans_bar * z / scale, loc),
            unbroadcast(ans_bar * (z * z - 1) / scale, scale))


@defadjoint(methods=_method(stats.norm, "pdf"), diff=_LOCATION_SCALE, elementwise=True)
def norm_pdf(ans_bar, ans, x, loc=0, scale=1):
    z = (x - loc) / scale
    g = ans_bar * ans
    return (unbroadcast(-g * z / scale, x), unbroadcast(g * z / scale, loc),
            unbroadcast(g * (z * z - 1) / scale, scale))


@defadjoint(methods=_method(stats.norm, "cdf"), diff=_LOCATION_SCALE, elementwise=True)
def norm_cdf(ans_bar, ans, x, loc=0, scale=1):
    z = (x - loc) / scale
    p = ans_bar * np.exp(-z * z / 2) / (2.5066282746310002 * scale)  # sqrt(2 pi)
    return unbroadcast(p, x), unbroadcast(-p, loc), unbroadcast(-p * z, scale)


@defadjoint(methods=_method(stats.norm, "logcdf"), diff=_LOCATION_SCALE, elementwise=True)
def norm_logcdf(ans_bar, ans, x, loc=0, scale=1):
    z = (x - loc) / scale
    p = ans_bar * np.exp(-z * z / 2 - ans) / (2.5066282746310002 * scale)
    return unbroadcast(p, x), unbroadcast(-p, loc), unbroadcast(-p * z, scale)


# ---- t: s = -(df + 1) z / (df + z^2) -----------------------------------------------


@defadjoint(methods=_method(stats.t, "logpdf"), diff=("x", "df", "loc", "scale"), elementwise=True)
def t_logpdf(ans_bar, ans, x, df, loc=0, scale=1):
    z = (x - loc) / scale
    s = -(df + 1) * z / (df + z * z)
    d_df = 0.5 * (special.digamma((df + 1) / 2) - special.digamma(df / 2) - 1 / df - np.log1p(z * z / df)
                  + (df + 1) * z * z / (df * (df + z * z)))
    return (unbroadcast(ans_bar * s / scale, x), unbroadcast(ans_bar * d_df, df),
            unbroadcast(-ans_bar * s / scale, loc), unbroadcast(-ans_bar * (z * s + 1) / scale, scale))


@defadjoint(methods=_method(stats.t, "pdf"), diff=("x", "df", "loc", "scale"), elementwise=True)
def t_pdf(ans_bar, ans, x, df, loc=0, scale=1):
    z = (x - loc) / scale
    s = -(df + 1) * z / (df + z * z)
    d_df = 0.5 * (special.digamma((df + 1) / 2) - special.digamma(df / 2) - 1 / df - np.log1p(z * z / df)
                  + (df + 1) * z * z / (df * (df + z * z)))
    g = ans_bar * ans
    return (unbroadcast(g * s / scale, x), unbroadcast(g * d_df, df),
            unbroadcast(-g * s / scale, loc), unbroadcast(-g * (z * s + 1) / scale, scale))


# ---- gamma(a): s = (a - 1) / z - 1, d/da = log z - psi(a) -------------------------------


@defadjoint(methods=_method(stats.gamma, "logpdf"), diff=("x", "a", "loc", "scale"), elementwise=True)
def gamma_logpdf(ans_bar, ans, x, a, loc=0, scale=1):
    z = (x - loc) / scale
    s = (a - 1) / z - 1
    return (unbroadcast(ans_bar * s / scale, x), unbroadcast(ans_bar * (np.log(z) - special.digamma(a)), a),
            unbroadcast(-ans_bar * s / scale, loc), unbroadcast(-ans_bar * (z * s + 1) / scale, scale))


@defadjoint(methods=_method(stats.gamma, "pdf"), diff=("x", "a", "loc", "scale"), elementwise=True)
def gamma_pdf(ans_bar, ans, x, a, loc=0, scale=1):
    z = np.where(ans == 0, 0.5, (x - loc) / scale)  # (0.5: see the module's docstring)
    s = (a - 1) / z - 1
    g = ans_bar * ans
    return (unbroadcast(g * s / scale, x), unbroadcast(g * (np.log(z) - special.digamma(a)), a),
            unbroadcast(-g * s / scale, loc), unbroadcast(-g * (z * s + 1) / scale, scale))


# ---- chi2(df) = gamma(df / 2, scale 2): s = (df / 2 - 1) / z - 1 / 2 -------------------


@defadjoint(methods=_method(stats.chi2, "logpdf"), diff=("x", "df", "loc", "scale"), elementwise=True)
def chi2_logpdf(ans_bar, ans, x, df, loc=0, scale=1):
    z = (x - loc) / scale
    s = (df / 2 - 1) / z - 0.5
    d_df = 0.5 * (np.log(z) - 0.6931471805599453 - special.digamma(df / 2))  # log 2
    return (unbroadcast(ans_bar * s / scale, x), unbroadcast(ans_bar * d_df, df),
            unbroadcast(-ans_bar * s / scale, loc), unbroadcast(-ans_bar * (z * s + 1) / scale, scale))


@defadjoint(methods=_method(stats.chi2, "pdf"), diff=("x", "df", "loc", "scale"), elementwise=True)
def chi2_pdf(ans_bar, ans, x, df, loc=0, scale=1):
    z = np.where(ans == 0, 0.5, (x - loc) / scale)  # (0.5: see the module's docstring)
    s = (df / 2 - 1) / z - 0.5
    d_df = 0.5 * (np.log(z) - 0.6931471805599453 - special.digamma(df / 2))
    g = ans_bar * ans
    return (unbroadcast(g * s / scale, x), unbroadcast(g * d_df, df),
            unbroadcast(-g * s / scale, loc), unbroadcast(-g * (z * s + 1) / scale, scale))


# ---- beta(a, b): s = (a - 1) / z - (b - 1) / (1 - z) --------------------------------


@defadjoint(methods=_method(stats.beta, "logpdf"), diff=("x", "a", "b", "loc", "scale"), elementwise=True)
def beta_logpdf(ans_bar, ans, x, a, b, loc=0, scale=1):
    z = (x - loc) / scale
    s = (a - 1) / z - (b - 1) / (1 - z)
    both = special.digamma(a + b)
    return (unbroadcast(ans_bar * s / scale, x),
            unbroadcast(ans_bar * (np.log(z) - special.digamma(a) + both), a),
            unbroadcast(ans_bar * (np.log1p(-z) - special.digamma(b) + both), b),
            unbroadcast(-ans_bar * s / scale, loc), unbroadcast(-ans_bar * (z * s + 1) / scale, scale))


@defadjoint(methods=_method(stats.beta, "pdf"), diff=("x", "a", "b", "loc", "scale"), elementwise=True)
def beta_pdf(ans_bar, ans, x, a, b, loc=0, scale=1):
    z = np.where(ans == 0, 0.5, (x - loc) / scale)  # (0.5: see the module's docstring)
    s = (a - 1) / z - (b - 1) / (1 - z)
    both = special.digamma(a + b)
    g = ans_bar * ans
    return (unbroadcast(g * s / scale, x), unbroadcast(g * (np.log(z) - special.digamma(a) + both), a),
            unbroadcast(g * (np.log1p(-z) - special.digamma(b) + both), b),
            unbroadcast(-g * s / scale, loc), unbroadcast(-g * (z * s + 1) / scale, scale))


# ---- cdf and logcdf of the shaped families: x, loc, scale (a shape is refused) --------


@defadjoint(methods=_method(stats.t, "cdf"), diff=_LOCATION_SCALE, elementwise=True)
def t_cdf(ans_bar, ans, x, df, loc=0, scale=1):
    p = ans_bar * stats.t.pdf(x, df, loc, scale)
    return unbroadcast(p, x), unbroadcast(-p, loc), unbroadcast(-p * (x - loc) / scale, scale)


@defadjoint(methods=_method(stats.t, "logcdf"), diff=_LOCATION_SCALE, elementwise=True)
def t_logcdf(ans_bar, ans, x, df, loc=0, scale=1):
    p = ans_bar * np.exp(stats.t.logpdf(x, df, loc, scale) - ans)
    return unbroadcast(p, x), unbroadcast(-p, loc), unbroadcast(-p * (x - loc) / scale, scale)


@defadjoint(methods=_method(stats.chi2, "cdf"), diff=_LOCATION_SCALE, elementwise=True)
def chi2_cdf(ans_bar, ans, x, df, loc=0, scale=1):
    p = ans_bar * stats.chi2.pdf(x, df, loc, scale)
    return unbroadcast(p, x), unbroadcast(-p, loc), unbroadcast(-p * (x - loc) / scale, scale)


@defadjoint(methods=_method(stats.chi2, "logcdf"), diff=_LOCATION_SCALE, elementwise=True)
def chi2_logcdf(ans_bar, ans, x, df, loc=0, scale=1):
    p = ans_bar * np.exp(stats.chi2.logpdf(x, df, loc, scale) - ans)
    return unbroadcast(p, x), unbroadcast(-p, loc), unbroadcast(-p * (x - loc) / scale, scale)


@defadjoint(methods=_method(stats.gamma, "cdf"), diff=_LOCATION_SCALE, elementwise=True)
def gamma_cdf(ans_bar, ans, x, a, loc=0, scale=1):
    p = ans_bar * stats.gamma.pdf(x, a, loc, scale)
    return unbroadcast(p, x), unbroadcast(-p, loc), unbroadcast(-p * (x - loc) / scale, scale)


@defadjoint(methods=_method(stats.gamma, "logcdf"), diff=_LOCATION_SCALE, elementwise=True)
def gamma_logcdf(ans_bar, ans, x, a, loc=0, scale=1):
    p = ans_bar * np.exp(stats.gamma.logpdf(x, a, loc, scale) - ans)
    return unbroadcast(p, x), unbroadcast(-p, loc), unbroadcast(-p * (x - loc) / scale, scale)


@defadjoint(methods=_method(stats.beta, "cdf"), diff=_LOCATION_SCALE, elementwise=True)
def beta_cdf(ans_bar, ans, x, a, b, loc=0, scale=1):
    p = ans_bar * stats.beta.pdf(x, a, b, loc, scale)
    return unbroadcast(p, x), unbroadcast(-p, loc), unbroadcast(-p * (x - loc) / scale, scale)


@defadjoint(methods=_method(stats.beta, "logcdf"), diff=_LOCATION_SCALE, elementwise=True)
def beta_logcdf(ans_bar, ans, x, a, b, loc=0, scale=1):
    p = ans_bar * np.exp(stats.beta.logpdf(x, a, b, loc, scale) - ans)
    return unbroadcast(p, x), unbroadcast(-p, loc), unbroadcast(-p * (x - loc) / scale, scale)


# ---- poisson(mu): log pmf = k log mu - mu - gammaln(k + 1), k counted from loc --------


@defadjoint(methods=_method(stats.poisson, "logpmf"), diff=("mu",), elementwise=True)
def poisson_logpmf(ans_bar, ans, k, mu, loc=0):
    return unbroadcast(ans_bar * ((k - loc) / mu - 1), mu)


@defadjoint(methods=_method(stats.poisson, "pmf"), diff=("mu",), elementwise=True)
def poisson_pmf(ans_bar, ans, k, mu, loc=0):
    return unbroadcast(ans_bar * ans * ((k - loc) / mu - 1), mu)


@defadjoint(methods=_method(stats.poisson, "cdf"), diff=("mu",), elementwise=True)
def poisson_cdf(ans_bar, ans, k, mu, loc=0):
    return unbroadcast(-ans_bar * stats.poisson.pmf(np.floor(k - loc), mu), mu)


@defadjoint(methods=_method(stats.poisson, "logcdf"), diff=("mu",), elementwise=True)
def poisson_logcdf(ans_bar, ans, k, mu, loc=0):
    return unbroadcast(-ans_bar * np.exp(stats.poisson.logpmf(np.floor(k - loc), mu) - ans), mu)


# ---- multivariate_normal: log N(x; m, S) = -(d log 2 pi + log|S| + r^T S^-1 r) / 2, r = x - m ----
# SciPy reads ``x`` as points along its last axis, ``cov`` as a matrix (its lower triangle:
# ``scipy.linalg.eigh(cov, lower=True)``), a vector (the diagonal) or a number (times I).  With
# s = S^-1 r: x gets -s, mean s, S -(S^-1 - s s^T) / 2 (The Matrix Cookbook, 2012, eqs. 57
# and 61), which the triangle SciPy reads collects as tril(G) + tril(G^T, -1).


def _singular_refuse(statics):
    if statics.get("allow_singular", False) is not False:
        return ("srcgrad differentiates `multivariate_normal` with `allow_singular=False` only (a "
                "singular covariance's pseudo-inverse and pseudo-determinant jump where its rank changes)",
                "keep the covariance positive definite (`cov + 1e-9 * np.eye(d)`) and leave "
                "`allow_singular` out")
    return None


def _gaussian(cls_method):
    return {"methods": _method(stats.multivariate_normal, cls_method), "diff": ("x", "mean", "cov"),
            "refuse": _singular_refuse, "ndim": _squeezed,
            "tangent": _logpdf_tangent if cls_method == "logpdf" else _pdf_tangent}


def _covariance(cov, d):
    """The matrix SciPy reads from ``cov``: its lower triangle, a diagonal, or a multiple of I."""
    if np.ndim(cov) < 2:
        return np.diag(np.broadcast_to(cov, (d,)))
    sigma = np.reshape(cov, (np.shape(cov)[0], -1))
    return np.tril(sigma) + np.transpose(np.tril(sigma, -1))


def _logpdf_tangent(ans, x, mean=None, cov=1, allow_singular=False, x_dot=None, mean_dot=None, cov_dot=None):
    """d log N = -s . (dx - dm) + (s^T dS s - tr(S^-1 dS)) / 2 per point, s = S^-1 r (the
    adjoint's formulas above, read forwards)."""
    d = np.shape(x)[-1] if np.ndim(x) else np.size(mean)
    sigma = _covariance(cov, d)
    r = np.reshape(x, (-1, d)) - (0.0 if mean is None else mean)
    s = np.transpose(np.linalg.solve(sigma, np.transpose(r)))
    out = np.zeros(np.shape(s)[0])
    if x_dot is not None:
        out = out - np.sum(s * np.reshape(x_dot, (-1, d)), axis=1)
    if mean_dot is not None:
        out = out + np.sum(s * mean_dot, axis=1)
    if cov_dot is not None:
        sigma_dot = _covariance(cov_dot, d)
        out = out + 0.5 * (np.sum((s @ sigma_dot) * s, axis=1) - np.trace(np.linalg.solve(sigma, sigma_dot)))
    return np.reshape(out, np.shape(ans))


def _pdf_tangent(ans, x, mean=None, cov=1, allow_singular=False, x_dot=None, mean_dot=None, cov_dot=None):
    return ans * _logpdf_tangent(ans, x, mean, cov, allow_singular, x_dot, mean_dot, cov_dot)


def _squeezed(ndims, statics):
    return None  # SciPy squeezes every axis of length 1 out of the output: known when it runs


@defadjoint(**_gaussian("logpdf"))
def multivariate_normal_logpdf(ans_bar, ans, x, mean=None, cov=1, allow_singular=False):
    """``x``: points along the last axis (SciPy's reading); ``mean`` ``(d,)`` or None; ``cov``
    ``(d, d)``, ``(d,)`` (a diagonal) or a number.  Float64 adjoints (SciPy's precision)."""
    if np.ndim(cov) < 2:
        sigma = np.diag(np.broadcast_to(cov, (np.size(mean),)))
    else:  # (also where cov's rank is not known when compiling: a matrix, else NumPy raises)
        sigma = np.reshape(cov, (np.shape(cov)[0], -1))
        sigma = np.tril(sigma) + np.transpose(np.tril(sigma, -1))
    r = np.reshape(x, (-1, np.shape(sigma)[0]))
    if not (is_constant(mean) and mean is None):
        r = r - mean
    g = np.reshape(ans_bar, (-1, 1))
    s = np.transpose(np.linalg.solve(sigma, np.transpose(r)))
    spread = 0.5 * (np.transpose(s) @ (g * s) - np.sum(g) * np.linalg.inv(sigma))
    if np.ndim(cov) < 2:
        cov_bar = unbroadcast(np.diagonal(spread), cov)
    else:
        cov_bar = np.tril(spread) + np.tril(np.transpose(spread), -1)
    if is_constant(mean) and mean is None:
        return np.reshape(-g * s, np.shape(x)), None, cov_bar
    return np.reshape(-g * s, np.shape(x)), unbroadcast(np.sum(g * s, axis=0), mean), cov_bar


@defadjoint(**_gaussian("pdf"))
def multivariate_normal_pdf(ans_bar, ans, x, mean=None, cov=1, allow_singular=False):
    """``logpdf``'s adjoints, given ``ans_bar * pdf``."""
    if np.ndim(cov) < 2:
        sigma = np.diag(np.broadcast_to(cov, (np.size(mean),)))
    else:  # (also where cov's rank is not known when compiling: a matrix, else NumPy raises)
        sigma = np.reshape(cov, (np.shape(cov)[0], -1))
        sigma = np.tril(sigma) + np.transpose(np.tril(sigma, -1))
    r = np.reshape(x, (-1, np.shape(sigma)[0]))
    if not (is_constant(mean) and mean is None):
        r = r - mean
    g = np.reshape(ans_bar * ans, (-1, 1))
    s = np.transpose(np.linalg.solve(sigma, np.transpose(r)))
    spread = 0.5 * (np.transpose(s) @ (g * s) - np.sum(g) * np.linalg.inv(sigma))
    if np.ndim(cov) < 2:
        cov_bar = unbroadcast(np.diagonal(spread), cov)
    else:
        cov_bar = np.tril(spread) + np.tril(np.transpose(spread), -1)
    if is_constant(mean) and mean is None:
        return np.reshape(-g * s, np.shape(x)), None, cov_bar
    return np.reshape(-g * s, np.shape(x)), unbroadcast(np.sum(g * s, axis=0), mean), cov_bar


@deftangent(stats.multivariate_normal.logpdf)
def multivariate_normal_logpdf_tangent(ans, x, mean=None, cov=1, allow_singular=False, x_dot=None,
                                       mean_dot=None, cov_dot=None):
    """``-s.x_dot + s.mean_dot + (s^T S_dot s - tr(S^-1 S_dot)) / 2`` per point, ``s = S^-1 r``."""
    if np.ndim(cov) < 2:
        sigma = np.diag(np.broadcast_to(cov, (np.size(mean),)))
    else:  # (also where cov's rank is not known when compiling: a matrix, else NumPy raises)
        sigma = np.reshape(cov, (np.shape(cov)[0], -1))
        sigma = np.tril(sigma) + np.transpose(np.tril(sigma, -1))
    r = np.reshape(x, (-1, np.shape(sigma)[0]))
    if not (is_constant(mean) and mean is None):
        r = r - mean
    s = np.transpose(np.linalg.solve(sigma, np.transpose(r)))
    t = np.zeros(np.shape(s)[:1])
    if not is_constant(x_dot):
        t = t - np.sum(s * np.reshape(x_dot, np.shape(s)), axis=1)
    if not is_constant(mean_dot):
        t = t + np.sum(s * mean_dot, axis=1)
    if not is_constant(cov_dot):
        if np.ndim(cov) < 2:
            sigma_dot = np.diag(np.broadcast_to(cov_dot, np.shape(sigma)[:1]))
        else:
            sigma_dot = np.reshape(cov_dot, np.shape(sigma))
            sigma_dot = np.tril(sigma_dot) + np.transpose(np.tril(sigma_dot, -1))
        t = t + 0.5 * (np.sum((s @ sigma_dot) * s, axis=1) - np.trace(np.linalg.solve(sigma, sigma_dot)))
    return np.reshape(t, np.shape(ans))


@deftangent(stats.multivariate_normal.pdf)
def multivariate_normal_pdf_tangent(ans, x, mean=None, cov=1, allow_singular=False, x_dot=None,
                                    mean_dot=None, cov_dot=None):
    """``pdf`` times ``logpdf``'s tangent."""
    if np.ndim(cov) < 2:
        sigma = np.diag(np.broadcast_to(cov, (np.size(mean),)))
    else:  # (also where cov's rank is not known when compiling: a matrix, else NumPy raises)
        sigma = np.reshape(cov, (np.shape(cov)[0], -1))
        sigma = np.tril(sigma) + np.transpose(np.tril(sigma, -1))
    r = np.reshape(x, (-1, np.shape(sigma)[0]))
    if not (is_constant(mean) and mean is None):
        r = r - mean
    s = np.transpose(np.linalg.solve(sigma, np.transpose(r)))
    t = np.zeros(np.shape(s)[:1])
    if not is_constant(x_dot):
        t = t - np.sum(s * np.reshape(x_dot, np.shape(s)), axis=1)
    if not is_constant(mean_dot):
        t = t + np.sum(s * mean_dot, axis=1)
    if not is_constant(cov_dot):
        if np.ndim(cov) < 2:
            sigma_dot = np.diag(np.broadcast_to(cov_dot, np.shape(sigma)[:1]))
        else:
            sigma_dot = np.reshape(cov_dot, np.shape(sigma))
            sigma_dot = np.tril(sigma_dot) + np.transpose(np.tril(sigma_dot, -1))
        t = t + 0.5 * (np.sum((s @ sigma_dot) * s, axis=1) - np.trace(np.linalg.solve(sigma, sigma_dot)))
    return ans * np.reshape(t, np.shape(ans))


# ---- multivariate_normal.cdf: Phi_d(x; m, S), the probability of the box below x ----
# ``rt.gaussian_cdf_partials`` gives the gradient in x (a density times a conditional
# probability, Genz & Bretz 2009, §2.1) and the second partials H; mean gets minus the
# gradient, and S (Plackett 1954) H / 2, which the triangle of a matrix collects as for
# ``pdf`` (a symmetric covariance's derivative: SciPy reads a triangle that depends on the
# points where d >= 3, the other one where d = 2).  ``logcdf``: each divided by ``cdf``.
# SciPy's cdf is exact for d <= 2 and random to ``abseps`` above, so the gradient is exact
# for d <= 3 (its inner probabilities have d - 1 and d - 2 dimensions).


def _cdf_refuse(statics):
    if statics.get("lower_limit", None) is not None:
        return ("srcgrad differentiates `multivariate_normal.cdf`/`logcdf` below `x` only (the "
                "probability of a box with a `lower_limit` has a derivative at each corner)",
                "leave `lower_limit` out, or write the box's probability as a sum over its corners "
                "(inclusion-exclusion) of cdfs below each")
    return _singular_refuse(statics)


def _gaussian_cdf(cls_method):
    return {**_gaussian(cls_method), "refuse": _cdf_refuse}


@defadjoint(**_gaussian_cdf("cdf"))
def multivariate_normal_cdf(ans_bar, ans, x, mean=None, cov=1, allow_singular=False, maxpts=None, abseps=1e-5,
                            releps=1e-5, *, lower_limit=None, rng=None):
    """``x``: points along the last axis; ``mean`` ``(d,)``, a number or None; ``cov`` ``(d, d)``,
    ``(d,)`` (a diagonal) or a number.  Float64 adjoints (SciPy's precision)."""
    x_bar, mean_bar, cov_bar = gaussian_cdf_adjoints(ans_bar, ans, x, mean, cov, maxpts, abseps, releps, rng,
                                                     False, not is_constant(cov))
    return x_bar, mean_bar, cov_bar


@defadjoint(**_gaussian_cdf("logcdf"))
def multivariate_normal_logcdf(ans_bar, ans, x, mean=None, cov=1, allow_singular=False, maxpts=None,
                               abseps=1e-5, releps=1e-5, *, lower_limit=None, rng=None):
    """``cdf``'s adjoints over ``cdf``, through logs."""
    x_bar, mean_bar, cov_bar = gaussian_cdf_adjoints(ans_bar, ans, x, mean, cov, maxpts, abseps, releps, rng,
                                                     True, not is_constant(cov))
    return x_bar, mean_bar, cov_bar


@deftangent(stats.multivariate_normal.cdf)
def multivariate_normal_cdf_tangent(ans, x, mean=None, cov=1, allow_singular=False, maxpts=None, abseps=1e-5,
                                    releps=1e-5, *, lower_limit=None, rng=None, x_dot=None, mean_dot=None,
                                    cov_dot=None):
    """``grad . (x_dot - mean_dot) + sum(H * S_dot) / 2`` per point."""
    return gaussian_cdf_tangent(ans, x, mean, cov, maxpts, abseps, releps, rng, x_dot, mean_dot, cov_dot)


@deftangent(stats.multivariate_normal.logcdf)
def multivariate_normal_logcdf_tangent(ans, x, mean=None, cov=1, allow_singular=False, maxpts=None,
                                       abseps=1e-5, releps=1e-5, *, lower_limit=None, rng=None, x_dot=None,
                                       mean_dot=None, cov_dot=None):
    """``cdf``'s tangent over ``cdf``, through logs."""
    return gaussian_cdf_tangent(ans, x, mean, cov, maxpts, abseps, releps, rng, x_dot, mean_dot, cov_dot, True)


# ---- dirichlet(alpha): log f = sum((alpha - 1) log x) - sum(gammaln(alpha)) + gammaln(sum(alpha)) ----
# SciPy reads the components along ``x``'s first axis, all K of them on the simplex or the first
# K - 1 (the last is one minus their sum).  d/d alpha_i = log x_i - psi(alpha_i) + psi(sum alpha)
# (psi = gammaln', DLMF 5.2.2); d/d x_i = (alpha_i - 1) / x_i, less the last component's where
# it is computed.  Given all K, SciPy refuses a point off the simplex: the partials are the
# density formula's (as JAX's), right along every direction that stays on it.


@defadjoint(methods=_method(stats.dirichlet, "logpdf"), diff=("x", "alpha"), ndim=_squeezed)
def dirichlet_logpdf(ans_bar, ans, x, alpha):
    """``x``: ``(K,)``, ``(K, n)``, or ``(K - 1,)``, ``(K - 1, n)``; ``alpha``: ``(K,)``."""
    given = np.shape(x)[0]
    full = np.concatenate([x, (1 - np.sum(x, axis=0, keepdims=True))[:np.size(alpha) - given]])
    points = np.reshape(full, (np.size(alpha), -1))
    g = np.reshape(ans_bar, (-1,))
    full_bar = np.reshape(np.reshape(alpha - 1, (-1, 1)) / points * g, np.shape(full))
    x_bar = full_bar[:given] - np.sum(full_bar[given:], axis=0, keepdims=True)
    return x_bar, np.log(points) @ g + np.sum(g) * (special.digamma(np.sum(alpha)) - special.digamma(alpha))


@defadjoint(methods=_method(stats.dirichlet, "pdf"), diff=("x", "alpha"), ndim=_squeezed)
def dirichlet_pdf(ans_bar, ans, x, alpha):
    """``logpdf``'s adjoints, given ``ans_bar * pdf``."""
    given = np.shape(x)[0]
    full = np.concatenate([x, (1 - np.sum(x, axis=0, keepdims=True))[:np.size(alpha) - given]])
    points = np.reshape(full, (np.size(alpha), -1))
    g = np.reshape(ans_bar * ans, (-1,))
    full_bar = np.reshape(np.reshape(alpha - 1, (-1, 1)) / points * g, np.shape(full))
    x_bar = full_bar[:given] - np.sum(full_bar[given:], axis=0, keepdims=True)
    return x_bar, np.log(points) @ g + np.sum(g) * (special.digamma(np.sum(alpha)) - special.digamma(alpha))


@deftangent(stats.dirichlet.logpdf)
def dirichlet_logpdf_tangent(ans, x, alpha, x_dot=None, alpha_dot=None):
    given = np.shape(x)[0]
    full = np.concatenate([x, (1 - np.sum(x, axis=0, keepdims=True))[:np.size(alpha) - given]])
    points = np.reshape(full, (np.size(alpha), -1))
    t = np.zeros(np.shape(points)[1:])
    if not is_constant(x_dot):
        full_dot = np.concatenate([x_dot, -np.sum(x_dot, axis=0, keepdims=True)[:np.size(alpha) - given]])
        t = t + np.sum(np.reshape(alpha - 1, (-1, 1)) * np.reshape(full_dot, np.shape(points)) / points,
                       axis=0)
    if not is_constant(alpha_dot):
        score = np.log(points) + np.reshape(special.digamma(np.sum(alpha)) - special.digamma(alpha), (-1, 1))
        t = t + alpha_dot @ score
    return np.reshape(t, np.shape(ans))


@deftangent(stats.dirichlet.pdf)
def dirichlet_pdf_tangent(ans, x, alpha, x_dot=None, alpha_dot=None):
    """``pdf`` times ``logpdf``'s tangent."""
    given = np.shape(x)[0]
    full = np.concatenate([x, (1 - np.sum(x, axis=0, keepdims=True))[:np.size(alpha) - given]])
    points = np.reshape(full, (np.size(alpha), -1))
    t = np.zeros(np.shape(points)[1:])
    if not is_constant(x_dot):
        full_dot = np.concatenate([x_dot, -np.sum(x_dot, axis=0, keepdims=True)[:np.size(alpha) - given]])
        t = t + np.sum(np.reshape(alpha - 1, (-1, 1)) * np.reshape(full_dot, np.shape(points)) / points,
                       axis=0)
    if not is_constant(alpha_dot):
        score = np.log(points) + np.reshape(special.digamma(np.sum(alpha)) - special.digamma(alpha), (-1, 1))
        t = t + alpha_dot @ score
    return ans * np.reshape(t, np.shape(ans))
