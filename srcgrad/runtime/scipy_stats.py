"""The mathematics of the rules of ``scipy.stats`` (``rules/scipy_stats.py``): the
multivariate normal's cdf and its partials."""
from __future__ import annotations

import math

import numpy as np

from .core import unbroadcast


def _gaussian_cdf_points(x, mean, cov):
    """``(r, sigma)`` of ``multivariate_normal.cdf(x, mean, cov)``: the points less the mean,
    ``(n, d)``, and the covariance as the symmetric matrix of the triangle SciPy reads (a
    vector: its diagonal; a number: times the identity)."""
    sigma = _covariance_matrix(cov, np.size(mean))
    r = np.reshape(x, (-1, np.shape(sigma)[0]))
    return (r if mean is None else r - mean), sigma


def _covariance_matrix(cov, d):
    if np.ndim(cov) < 2:
        return np.diag(np.broadcast_to(cov, (d,)))
    sigma = np.reshape(cov, (np.shape(cov)[0], -1)) * 1.0
    return np.tril(sigma) + np.transpose(np.tril(sigma, -1))


def gaussian_cdf_adjoints(ans_bar, ans, x, mean, cov, maxpts, abseps, releps, rng, log=False, wanted_cov=True):
    """``(x_bar, mean_bar, cov_bar)`` of ``multivariate_normal.cdf`` (``log``: ``logcdf``, whose
    value ``ans`` is), by :func:`gaussian_cdf_partials`: ``x`` gets the gradient, ``mean`` its
    negative (None for a mean of None), ``cov`` half the second partials (Plackett 1954),
    collected by the triangle SciPy reads (a vector's diagonal; a number's sum); None where
    ``wanted_cov`` is false.  Float64 (SciPy's precision)."""
    r, sigma = _gaussian_cdf_points(x, mean, cov)
    log_cdf = np.reshape(ans, (-1,)) if log else None
    g = np.reshape(ans_bar, (-1, 1))
    cov_bar = None
    if not wanted_cov:
        x_bar = g * gaussian_cdf_partials(r, sigma, maxpts, abseps, releps, rng, False, log_cdf)[0]
    else:
        gradient, second = gaussian_cdf_partials(r, sigma, maxpts, abseps, releps, rng, True, log_cdf)
        x_bar = g * gradient
        spread = 0.5 * np.tensordot(np.reshape(ans_bar, (-1,)), second, 1)
        if np.ndim(cov) < 2:
            cov_bar = unbroadcast(np.diagonal(spread), cov)
        else:
            cov_bar = np.tril(spread) + np.tril(np.transpose(spread), -1)
    mean_bar = None if mean is None else unbroadcast(-np.sum(x_bar, axis=0), mean)
    return np.reshape(x_bar, np.shape(x)), mean_bar, cov_bar


def gaussian_cdf_tangent(ans, x, mean, cov, maxpts, abseps, releps, rng, x_dot, mean_dot, cov_dot, log=False):
    """The tangent of ``multivariate_normal.cdf`` (``log``: ``logcdf``) per point: the gradient
    times ``x_dot - mean_dot``, plus half the second partials times ``cov_dot`` (each tangent
    None for a constant)."""
    r, sigma = _gaussian_cdf_points(x, mean, cov)
    log_cdf = np.reshape(ans, (-1,)) if log else None
    t = np.zeros(np.shape(r)[:1])
    if cov_dot is None:
        gradient = gaussian_cdf_partials(r, sigma, maxpts, abseps, releps, rng, False, log_cdf)[0]
    else:
        gradient, second = gaussian_cdf_partials(r, sigma, maxpts, abseps, releps, rng, True, log_cdf)
        sigma_dot = _covariance_matrix(cov_dot, np.shape(sigma)[0])
        t = t + 0.5 * np.sum(second * sigma_dot, axis=(1, 2))
    if x_dot is not None:
        t = t + np.sum(gradient * np.reshape(x_dot, np.shape(r)), axis=1)
    if mean_dot is not None:
        t = t - np.sum(gradient * mean_dot, axis=1)
    return np.reshape(t, np.shape(ans))


def gaussian_cdf_partials(r, sigma, maxpts=None, abseps=1e-5, releps=1e-5, rng=None, second=True,
                          log_cdf=None):
    """First and second partials of ``Phi_d(r; 0, sigma)`` in its upper limits, at n points.

    ``Phi_d`` is the normal probability of the box below ``r``.  Its gradient is a density
    times a conditional probability (Genz & Bretz, *Computation of Multivariate Normal and t
    Probabilities*, Springer 2009, §2.1; Plackett, Biometrika 41, 1954, for the mixed
    partials)::

        dPhi/dr_i         = phi_1(r_i; s_ii) Phi_{d-1}(r_-i - S_-i,i r_i / s_ii; S_-i,-i - S_-i,i S_i,-i / s_ii)
        d2Phi/dr_i dr_j   = phi_2(r_ij; S_ij,ij) Phi_{d-2}(conditional on both), i != j
        d2Phi/dr_i^2      = -(r_i / s_ii) dPhi/dr_i - sum_{j != i} (s_ij / s_ii) d2Phi/dr_i dr_j

    (the last from ``S grad phi = -r phi`` integrated over the other coordinates).  Plackett's
    identity makes the covariance's derivative ``dPhi/ds_ij = d2Phi/dr_i dr_j`` (i != j, one
    parameter per pair) and ``dPhi/ds_ii = d2Phi/dr_i^2 / 2``.  ``Phi_1`` is ``ndtr``,
    ``Phi_0`` is 1, and the others SciPy's ``multivariate_normal.cdf`` given ``maxpts``,
    ``abseps``, ``releps`` and ``rng`` (for d >= 4 they are random to ``abseps``).

    Args:
        r: ``(n, d)`` float64, the points less the mean.
        sigma: ``(d, d)`` float64, symmetric positive definite.
        maxpts, abseps, releps, rng: passed on to SciPy's ``multivariate_normal.cdf``.
        second: whether to compute the second partials.
        log_cdf: ``(n,)``, ``log Phi_d`` at the points, or None.  Given, each partial is
            divided by ``Phi_d``, through logs (``exp(log phi + log Phi_k - log_cdf)``), so
            that a tiny probability gives a ratio, not ``0 / 0``.

    Returns:
        ``(gradient, hessian)``: ``(n, d)`` and ``(n, d, d)`` float64 (None unless ``second``).
    """
    from scipy import special, stats  # (only multivariate_normal.cdf's rules call this)

    n, d = np.shape(r)
    log = log_cdf is not None

    def scaled(log_density, points, cov):
        """``exp(log_density) Phi_k(points; 0, cov)``, over ``Phi_d`` where ``log``."""
        k = np.shape(cov)[0]
        if k == 0:
            inner = np.zeros(n) if log else np.ones(n)
        elif k == 1:
            z = points[:, 0] / math.sqrt(cov[0, 0])
            inner = special.log_ndtr(z) if log else special.ndtr(z)
        else:
            method = stats.multivariate_normal.logcdf if log else stats.multivariate_normal.cdf
            inner = np.reshape(method(points, cov=cov, maxpts=maxpts, abseps=abseps, releps=releps, rng=rng),
                               (n,))
        return np.exp(log_density + inner - log_cdf) if log else np.exp(log_density) * inner

    gradient = np.empty((n, d))
    for i in range(d):
        rest = [j for j in range(d) if j != i]
        slope = sigma[rest, i] / sigma[i, i]
        log_density = -0.5 * (r[:, i] ** 2 / sigma[i, i] + math.log(2 * math.pi * sigma[i, i]))
        gradient[:, i] = scaled(log_density, r[:, rest] - np.outer(r[:, i], slope),
                                sigma[np.ix_(rest, rest)] - np.outer(slope, sigma[i, rest]))
    if not second:
        return gradient, None
    hessian = np.zeros((n, d, d))
    for i in range(d):
        for j in range(i):
            pair, rest = [i, j], [k for k in range(d) if k not in (i, j)]
            block = sigma[np.ix_(pair, pair)]
            whitened = np.linalg.solve(block, np.transpose(r[:, pair]))
            log_density = -0.5 * (np.sum(r[:, pair] * np.transpose(whitened), axis=1)
                                  + math.log(4 * math.pi ** 2 * np.linalg.det(block)))
            slopes = np.linalg.solve(block, sigma[np.ix_(pair, rest)])  # (2, d - 2)
            hessian[:, i, j] = hessian[:, j, i] = scaled(
                log_density, r[:, rest] - r[:, pair] @ slopes,
                sigma[np.ix_(rest, rest)] - sigma[np.ix_(rest, pair)] @ slopes)
    for i in range(d):
        hessian[:, i, i] = -(r[:, i] * gradient[:, i] + hessian[:, i] @ sigma[i]) / sigma[i, i]
    return gradient, hessian
