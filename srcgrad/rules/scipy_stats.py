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

from ..runtime import unbroadcast
from .registry import defadjoint

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
