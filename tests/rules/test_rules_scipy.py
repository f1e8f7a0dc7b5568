"""SciPy's rules (``rules/scipy_special.py``, ``scipy_signal.py``, ``scipy_stats.py``) where code is written:
in loops and helpers, spelled as users import them, at second order (``hvp``: forward mode
over the gradient's code, which calls ``scipy.special`` itself), in float32; and what they
refuse.  Each rule alone is checked in ``test_rules.py``'s table (dot-product test,
finite differences, float32) and ``test_forward_rules.py`` (tangents).  Skipped without
SciPy, an optional dependency (``test_imports.py`` checks srcgrad works without it)."""
from __future__ import annotations

import math

import numpy as np
import pytest
from tests.finite_differences import numerical_grad

import srcgrad

special = pytest.importorskip("scipy.special")
signal = pytest.importorskip("scipy.signal")
stats = pytest.importorskip("scipy.stats")
import scipy  # noqa: E402 - the spellings users write, after the skip
import scipy.special as sp  # noqa: E402
from scipy.special import erf  # noqa: E402

OPTIMIZE = pytest.mark.parametrize("optimize", [True, False], ids=["opt", "noopt"])
rng = np.random.default_rng(0)
X = rng.uniform(0.5, 2.0, (3, 4))
K = rng.standard_normal((2, 2))


def _smooth(h, k):
    return special.log_softmax(signal.convolve(h, k, "same"), axis=-1)


def helper_in_a_loop(x, k):
    total = 0.0
    for i in range(3):
        x = special.expit(_smooth(x, k) + x)
        total = total + special.logsumexp(x, b=x) / (i + 1)
    return total


def orders_from_a_loop(x):
    total = 0.0
    for n in range(3):
        total = total + np.sum(special.polygamma(n, x) + special.jv(n, x) * special.yn(n, x))
    return total


def gamma_family(x):
    return np.sum(special.gammaln(x) * special.digamma(x) + special.multigammaln(x + 1.0, 2)
                  + special.betaln(x, x[::-1]) + special.beta(x, 2.0) + special.zeta(3, x))


def error_functions(x):
    return np.sum(special.erf(x) * special.erfc(x) + special.erfinv(x / 3) ** 2 + special.xlogy(x, x + 1.0))


def bessel(x):
    return np.sum(special.i0(x) * special.i1(x) + special.ive(1, x) + special.iv(0.5, x))


def softmax_model(x, k):
    p = special.softmax(signal.correlate(x, k, mode="valid"), axis=0)
    return np.sum(p * special.log_softmax(x[1:, 1:], axis=0))


def _log_likelihood(x, scale):
    return np.sum(stats.norm.logpdf(x, x[0], scale) + stats.t.logcdf(x, 3.0, 0.5, 2.0))


def distributions(x):
    total = 0.0
    for i in range(2):
        total = total + _log_likelihood(x, 1.0 + x[1] ** 2) / (i + 1)
        total = total + np.sum(stats.gamma.logpdf(x + 1.0, x[2] + 1.0) + stats.poisson.logpmf(3, x))
    return total + np.sum(stats.beta.pdf(x / 3, 2.0, x + 1.0) + stats.chi2.cdf(x, 2.5))


FUNCTIONS = [(helper_in_a_loop, (X, K)), (orders_from_a_loop, (X,)), (gamma_family, (X,)),
             (error_functions, (X,)), (bessel, (X,)), (softmax_model, (X, K)), (distributions, (X,))]
IDS = [f.__name__ for f, _ in FUNCTIONS]


@OPTIMIZE
@pytest.mark.parametrize("f, args", FUNCTIONS, ids=IDS)
def test_gradient_in_loops_and_helpers(f, args, optimize):
    wrt = tuple(range(len(args)))
    grads = srcgrad.grad(f, wrt=wrt, optimize=optimize)(*args)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(g, numerical_grad(f, args, i), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("f, args", FUNCTIONS, ids=IDS)
def test_float32_stays_float32(f, args):
    args32 = [a.astype(np.float32) for a in args]
    grads = srcgrad.grad(f, wrt=tuple(range(len(args))))(*args32)
    expected = srcgrad.grad(f, wrt=tuple(range(len(args))))(*args)
    for g, e in zip(grads, expected):
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, e, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("f, args", FUNCTIONS, ids=IDS)
def test_hvp_matches_differences_of_the_gradient(f, args):
    """Second order: the gradient's code calls ``scipy.special`` (``gammaln' = digamma``,
    ``digamma' = zeta(2, x)``), whose rules forward mode then follows."""
    v = np.random.default_rng(1).standard_normal(args[0].shape)
    g = srcgrad.grad(f, wrt=0)
    eps = 1e-5
    expected = (g(args[0] + eps * v, *args[1:]) - g(args[0] - eps * v, *args[1:])) / (2 * eps)
    np.testing.assert_allclose(srcgrad.hvp(f, wrt=0)(*args, v), expected, rtol=1e-5, atol=1e-6)


def test_second_derivative_of_gammaln_is_trigamma():
    def f(x):
        return np.sum(special.gammaln(x))

    x = np.array([0.5, 1.0, 2.5, -0.5])
    np.testing.assert_allclose(srcgrad.hvp(f)(x, np.ones(4)), special.polygamma(1, x), rtol=1e-12)


def test_generated_code_imports_scipy_by_its_full_name():
    """The adjoint reads ``scipy.special.digamma``: the user's own ``special`` (or none) is not
    what it relies on."""
    def f(x):
        return np.sum(special.gammaln(x))

    source = srcgrad.source(srcgrad.grad(f), X)
    assert "import scipy.special" in source and "scipy.special.digamma(x)" in source


def _erf_from(x):
    return np.sum(erf(x))


def _erf_through_scipy(x):
    return np.sum(scipy.special.erf(x))


def _erf_through_alias(x):
    return np.sum(sp.erf(x))


@pytest.mark.parametrize("f", [_erf_from, _erf_through_scipy, _erf_through_alias])
def test_import_spellings(f):
    np.testing.assert_allclose(srcgrad.grad(f)(X), 2 / np.sqrt(np.pi) * np.exp(-X**2), rtol=1e-12)


def test_convolve_is_bilinear_in_both_inputs():
    """Exact values: ``d/d in1 sum(convolve(in1, in2))`` is ``sum(in2)`` everywhere."""
    def f(a, b):
        return np.sum(signal.convolve(a, b))

    a, b = np.arange(5.0), np.array([1.0, 2.0, -0.5])
    ga, gb = srcgrad.grad(f, wrt=(0, 1))(a, b)
    np.testing.assert_array_equal(ga, np.full(5, 2.5))
    np.testing.assert_array_equal(gb, np.full(3, 10.0))


def test_a_differentiated_order_is_refused():
    def f(v, x):
        return np.sum(special.jv(v, x))

    with pytest.raises(srcgrad.NoDerivativeRuleError, match="jv"):
        srcgrad.grad(f, wrt=(0, 1))(1.5, X)
    np.testing.assert_allclose(srcgrad.grad(f, wrt=1)(1.5, X), numerical_grad(f, (1.5, X), 1), rtol=1e-6)


def test_zeta_is_not_differentiated_in_its_exponent():
    def f(s):
        return special.zeta(s, 2.0)

    with pytest.raises(srcgrad.NoDerivativeRuleError, match="zeta"):
        srcgrad.grad(f)(3.0)


def test_logsumexp_with_return_sign_is_refused():
    def f(x):
        value, sign = special.logsumexp(x, return_sign=True)
        return value * sign

    with pytest.raises(srcgrad.SrcgradError, match="return_sign"):
        srcgrad.grad(f)(X)


def test_a_function_without_a_rule_is_refused_by_its_name():
    def f(x):
        return np.sum(special.gamma(x))

    with pytest.raises(srcgrad.SrcgradError, match="no derivative rule for `scipy.special.gamma`"):
        srcgrad.grad(f)(X)


def test_a_cdf_is_not_differentiated_in_a_shape():
    """No closed form (the parameter of an incomplete gamma function): refused, not zero."""
    def f(x, a):
        return np.sum(stats.gamma.cdf(x, a))

    with pytest.raises(srcgrad.NoDerivativeRuleError, match="`a` of .*gamma_gen.cdf"):
        srcgrad.grad(f, wrt=(0, 1))(X, 2.0)
    np.testing.assert_allclose(srcgrad.grad(f)(X, 2.0), stats.gamma.pdf(X, 2.0), rtol=1e-12)


def test_poisson_cdf_in_mu_is_minus_the_pmf():
    def f(mu):
        return stats.poisson.cdf(2, mu)

    np.testing.assert_allclose(srcgrad.grad(f)(1.5), -stats.poisson.pmf(2, 1.5), rtol=1e-12)
    with pytest.raises(srcgrad.NoDerivativeRuleError, match="`loc`"):
        srcgrad.grad(lambda_loc, wrt=(0, 1))(1.5, 1.0)


def lambda_loc(mu, loc):
    return stats.poisson.pmf(3, mu, loc)


def test_a_frozen_distribution_calls_the_method_with_a_rule():
    """``stats.norm(loc, scale).cdf(x)`` runs SciPy's ``rv_frozen.cdf``, compiled when it runs,
    which calls ``norm.cdf``; forward mode over it (``hvp``) is refused, as for any such call."""
    def f(x):
        return np.sum(stats.norm(0.5, 2.0).cdf(x))

    np.testing.assert_allclose(srcgrad.grad(f)(X), stats.norm.pdf(X, 0.5, 2.0), rtol=1e-12)
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="forward mode does not follow"):
        srcgrad.hvp(f)(X, np.ones_like(X))


# ---- 0 * inf: a factor that is 0 in the formula times one that overflows --------------------
# `logsumexp(x, b=w)` leaves out x[i] where w[i] == 0: its derivative there is 0, however far
# x[i] lies above the sum (exp(x[i] - sum) overflows past ~709 in float64, ~88 in float32).

W = np.array([[1.0, 0.0, 2.0, 0.0], [0.5, 1.0, 0.0, 3.0], [0.0, 1.0, 1.0, 1.0]])
FAR = np.array([[0.1, 800.0, -0.3, 1e4], [0.2, -0.5, 1e3, 0.4], [750.0, 0.3, 0.1, -0.2]])


def weighted_lse(x, w):
    return np.sum(special.logsumexp(x, b=w, axis=1) ** 2)


def weighted_lse_in_a_loop(x, w):
    total = 0.0
    for i in range(2):
        total = total + special.logsumexp(x * (i + 1.0), b=w, axis=-1, keepdims=True)[i, 0]
    return total


def _lse(v, w):
    return sp.logsumexp(v, b=w)


def weighted_lse_in_a_helper(x, w):
    return _lse(x[0], w[0]) + _lse(x[2], w[2]) * 2.0


def _included_fd(f, x, w):
    """Central differences in the elements ``w`` keeps; 0 elsewhere (``f`` does not read them)."""
    def at(y):
        z = x.copy()
        z[w != 0] = y
        return f(z, w)
    g = np.zeros_like(x)
    g[w != 0] = numerical_grad(at, (x[w != 0],), 0)
    return g


@pytest.mark.parametrize("f", [weighted_lse, weighted_lse_in_a_loop, weighted_lse_in_a_helper])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@OPTIMIZE
def test_logsumexp_is_flat_where_b_is_zero_however_large_x_is(f, dtype, optimize):
    x, w = FAR.astype(dtype), W.astype(dtype)
    with np.errstate(over="raise", invalid="raise"):
        g = srcgrad.grad(f, optimize=optimize)(x, w)
    assert g.dtype == dtype and np.all(g[w == 0] == 0)
    expected = _included_fd(f, FAR, W)
    np.testing.assert_allclose(g, expected, rtol=1e-3 if dtype == np.float32 else 1e-6, atol=1e-6)


def test_logsumexp_where_b_is_zero_in_b_and_at_second_order():
    """``b``'s own derivative is ``exp(x - sum)`` wherever it is 0 (finite here); the Hessian
    is finite and flat along the left-out elements, also when they lie far above the sum."""
    x = np.array([[0.1, 2.0, -0.3], [0.2, -0.5, 1.0]])
    w = np.array([[1.0, 0.0, 2.0], [0.0, 1.0, 3.0]])
    g_b = srcgrad.grad(weighted_lse, wrt=1)(x, w)
    np.testing.assert_allclose(g_b, numerical_grad(weighted_lse, (x, w), 1), rtol=1e-6)
    v = np.ones_like(FAR)
    with np.errstate(over="raise", invalid="raise"):
        hv = srcgrad.hvp(weighted_lse)(FAR, W, v)
    gradient, eps = srcgrad.grad(weighted_lse), 1e-4
    shift = np.where(W == 0, 0.0, v)  # (FAR's left-out elements moved would overflow the differences)
    expected = (gradient(FAR + eps * shift, W) - gradient(FAR - eps * shift, W)) / (2 * eps)
    np.testing.assert_allclose(hv, expected, rtol=1e-5, atol=1e-6)
    assert np.all(hv[W == 0] == 0)


@pytest.mark.parametrize("density, shapes", [(stats.gamma, (2.5,)), (stats.chi2, (5.0,)),
                                              (stats.beta, (2.5, 3.0))])
def test_a_density_is_flat_where_it_is_zero(density, shapes):
    """Outside the support (and at its edge, for shapes whose density is flat there) a ``pdf``
    is 0 nearby: its derivatives are 0, though its score and ``log z`` are infinite or NaN."""
    def f(x, *params):
        return np.sum(density.pdf(x, *params) ** 2)

    x = np.array([-1.0, 0.0, 0.4, 1.0, 1.5])
    with np.errstate(divide="raise", invalid="raise"):
        grads = srcgrad.grad(f, wrt=tuple(range(1 + len(shapes))))(x, *shapes)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(g, numerical_grad(f, (x, *shapes), i, eps=1e-7), rtol=1e-5, atol=1e-7)
def _gaussian_fit(x, mean, scale):
    total = 0.0
    for i in range(2):
        cov = scale @ scale.T + (i + 1.0) * np.eye(3)
        total = total + np.sum(stats.multivariate_normal.logpdf(x, mean, cov))
    return total + np.sum(stats.multivariate_normal.pdf(x[:, :2], cov=np.diag(mean[:2] ** 2 + 1.0)))


def _dirichlet_of_softmax(z, alpha):
    """All K components given, kept on the simplex by the softmax: only directions along it vary."""
    return np.sum(stats.dirichlet.logpdf(special.softmax(z, axis=0), alpha)) + stats.dirichlet.pdf(
        special.softmax(z[:, 0]), alpha + 1.0)


@OPTIMIZE
@pytest.mark.parametrize("f, args", [
    (_gaussian_fit, (rng.standard_normal((4, 3)), rng.standard_normal(3), rng.standard_normal((3, 3)))),
    (_dirichlet_of_softmax, (rng.standard_normal((3, 2)), rng.uniform(0.5, 2.0, 3)))],
    ids=["multivariate_normal", "dirichlet"])
def test_multivariate_distributions_in_loops_and_helpers(f, args, optimize):
    grads = srcgrad.grad(f, wrt=(0, 1, 2)[:len(args)], optimize=optimize)(*args)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(g, numerical_grad(f, args, i), rtol=1e-6, atol=1e-7)
    v = np.random.default_rng(1).standard_normal(args[0].shape)
    g0 = srcgrad.grad(f, wrt=0)
    eps = 1e-5
    expected = (g0(args[0] + eps * v, *args[1:]) - g0(args[0] - eps * v, *args[1:])) / (2 * eps)
    np.testing.assert_allclose(srcgrad.hvp(f, wrt=0)(*args, v), expected, rtol=1e-5, atol=1e-6)


def test_gaussian_log_density_gradient_in_the_mean_is_the_whitened_residual():
    """Exact values: d/dmean log N(x; mean, S) = S^-1 (x - mean)."""
    def f(mean):
        return stats.multivariate_normal.logpdf(np.array([1.0, 2.0]), mean,
                                                np.array([[2.0, 0.5], [0.5, 1.0]]))

    mean = np.array([0.5, -1.0])
    np.testing.assert_allclose(srcgrad.grad(f)(mean),
                               np.linalg.solve([[2.0, 0.5], [0.5, 1.0]], [0.5, 3.0]), rtol=1e-14)


def test_multivariate_normal_allow_singular_and_a_lower_limit_are_refused():
    def singular(x):
        return stats.multivariate_normal.logpdf(x, np.zeros(2), np.eye(2), allow_singular=True)

    def singular_cdf(x):
        return stats.multivariate_normal.cdf(x, np.zeros(2), np.eye(2), allow_singular=True)

    def box(x):
        return stats.multivariate_normal.logcdf(x, cov=np.eye(2), lower_limit=-np.ones(2))

    for f in (singular, singular_cdf):
        with pytest.raises(srcgrad.NoDerivativeRuleError, match="allow_singular=False"):
            srcgrad.grad(f)(np.ones(2))
    with pytest.raises(srcgrad.NoDerivativeRuleError, match="lower_limit") as info:
        srcgrad.grad(box)(np.ones(2))
    assert "test_rules_scipy.py" in str(info.value) and "inclusion-exclusion" in str(info.value)


# ---- multivariate_normal.cdf / logcdf: Phi_d(x; m, S) ------------------------------------
S3 = np.array([[2.0, 0.6, -0.3], [0.6, 1.5, 0.4], [-0.3, 0.4, 1.2]])
X3 = np.array([[0.3, -0.2, 0.5], [-1.0, 0.4, 1.1]])
M3 = np.array([0.1, 0.2, -0.1])


def test_multivariate_normal_cdf_of_a_diagonal_covariance_is_a_product():
    """Exact values: with S = diag(s), Phi = prod_i ndtr(z_i), z_i = (x_i - m_i) / sqrt(s_i), so
    x_i gets n_i prod_{j != i} ndtr(z_j) (n_i = phi(z_i) / sqrt(s_i)), mean minus that, s_i
    -n_i z_i / (2 sqrt(s_i)) times the others, and S_ij (i != j, Plackett) n_i n_j times the rest."""
    s = np.array([2.0, 0.5, 1.5])
    z = (X3 - M3) / np.sqrt(s)
    cdfs, n = special.ndtr(z), stats.norm.pdf(z) / np.sqrt(s)
    others = np.prod(cdfs, axis=1, keepdims=True) / cdfs
    x_bar = n * others
    s_bar = np.sum(-x_bar * z / (2 * np.sqrt(s)), axis=0)
    pair = np.einsum("pi,pj,pk->ij", n / cdfs, n / cdfs, np.prod(cdfs, axis=1, keepdims=True))
    for cov, expected_cov in ((s, s_bar), (np.diag(s), np.tril(pair, -1) + np.diag(s_bar))):
        def f(x, mean, cov):
            return np.sum(stats.multivariate_normal.cdf(x, mean, cov, rng=0))

        g_x, g_mean, g_cov = srcgrad.grad(f, wrt=(0, 1, 2))(X3, M3, cov)
        np.testing.assert_allclose(g_x, x_bar, rtol=1e-10)
        np.testing.assert_allclose(g_mean, -x_bar.sum(axis=0), rtol=1e-10)
        np.testing.assert_allclose(g_cov, expected_cov, rtol=1e-10, atol=1e-14)


def test_bivariate_normal_cdf_gradient_in_closed_form():
    """Exact values in d = 2 (SciPy's cdf is exact there): dPhi/dx_1 = phi(x_1 / s_1) / s_1
    ndtr((x_2 - rho s_2 x_1 / s_1) / (s_2 sqrt(1 - rho^2))), and dPhi/dS_12 = phi_2(x; S)
    (Plackett 1954); logcdf's gradient is those over Phi, also in the tail (Phi ~ 1e-10), where
    the ratio of two small numbers is formed through logs.  Further out SciPy's cdf (accurate to
    1e-15 absolutely) is 0 and logcdf -inf: the gradient is inf, not NaN."""
    cov = np.array([[2.0, -0.7], [-0.7, 1.0]])
    s1, s2 = np.sqrt(np.diag(cov))
    rho = cov[0, 1] / (s1 * s2)
    for x in (np.array([0.4, -0.3]), np.array([-9.0, 0.5])):
        phi = stats.norm.pdf(x[0] / s1) / s1 * special.ndtr((x[1] - rho * s2 * x[0] / s1) / (s2 * np.sqrt(1 - rho ** 2)))
        log_phi = stats.norm.logpdf(x[0] / s1) - np.log(s1) + special.log_ndtr(
            (x[1] - rho * s2 * x[0] / s1) / (s2 * np.sqrt(1 - rho ** 2)))
        density = stats.multivariate_normal.pdf(x, cov=cov)
        cdf = stats.multivariate_normal.cdf(x, cov=cov)
        g_x, g_cov = srcgrad.grad(lambda x, c: stats.multivariate_normal.cdf(x, cov=c), wrt=(0, 1))(x, cov)
        np.testing.assert_allclose(g_x[0], phi, rtol=1e-10, atol=1e-300)
        np.testing.assert_allclose(g_cov[1, 0], density, rtol=1e-10, atol=1e-300)
        assert g_cov[0, 1] == 0  # (the triangle the adjoint collects, as pdf's)
        l_x, l_cov = srcgrad.grad(lambda x, c: stats.multivariate_normal.logcdf(x, cov=c), wrt=(0, 1))(x, cov)
        np.testing.assert_allclose(l_x[0], np.exp(log_phi - np.log(cdf)), rtol=1e-8)
        np.testing.assert_allclose(l_cov[1, 0], np.exp(stats.multivariate_normal.logpdf(x, cov=cov) - np.log(cdf)),
                                   rtol=1e-8)
        assert np.all(np.isfinite(l_x)) and np.all(np.isfinite(l_cov))
    with np.errstate(divide="ignore"):  # (SciPy's log(0))
        far = srcgrad.grad(lambda x: stats.multivariate_normal.logcdf(x, cov=cov))(np.array([-60.0, 0.5]))
    assert not np.any(np.isnan(far))


def _symmetric_difference(f, args, i, eps):
    """Central differences of ``f`` in ``args[i]``; a matrix covariance moved symmetrically
    (S_ij and S_ji together: the derivative of a symmetric parameter), read off its lower triangle."""
    a = np.array(args[i], dtype=np.float64)
    out = np.zeros_like(a)
    for index in np.ndindex(a.shape):
        if a.ndim == 2 and i == 2 and index[0] < index[1]:
            continue
        step = np.zeros_like(a)
        step[index] = eps
        if a.ndim == 2 and i == 2:
            step[index[::-1]] = eps
        plus, minus = list(args), list(args)
        plus[i], minus[i] = a + step, a - step
        out[index] = (f(*plus) - f(*minus)) / (2 * eps)
    return out


@pytest.mark.parametrize("method", ["cdf", "logcdf"])
@pytest.mark.parametrize("d", [2, 3])
@pytest.mark.parametrize("cov", ["matrix", "diagonal", "number"])
def test_multivariate_normal_cdf_against_finite_differences(method, d, cov):
    """x (batched points), mean and cov, against central differences of SciPy's own cdf with
    its random draws fixed (``rng=0``: for d = 3 SciPy integrates by quasi-Monte Carlo)."""
    covariance = {"matrix": S3[:d, :d], "diagonal": np.diag(S3)[:d], "number": 1.3}[cov]

    def f(x, mean, cov):
        return np.sum(np.cos(x[:, :1]) * getattr(stats.multivariate_normal, method)(x, mean, cov, rng=0))

    args = (X3[:, :d], M3[:d], covariance)
    grads = srcgrad.grad(f, wrt=(0, 1, 2))(*args)
    for i, g in enumerate(grads):
        expected = _symmetric_difference(f, args, i, 1e-3)
        np.testing.assert_allclose(g, expected, rtol=1e-3, atol=1e-5 if d == 3 else 1e-7)


def _gaussian_probability(x, mean, scale):
    total = 0.0
    for i in range(2):
        cov = scale @ scale.T + (i + 1.0) * np.eye(3)
        total = total + _log_probability(x + i, mean, cov)
    return total + np.sum(stats.multivariate_normal.cdf(x[:, :2], mean[:2], np.exp(mean[1:])))


def _log_probability(x, mean, cov):
    return np.sum(stats.multivariate_normal.logcdf(x, mean, cov, maxpts=30000, abseps=1e-6, rng=1))


@OPTIMIZE
def test_multivariate_normal_cdf_in_a_loop_and_a_helper_and_in_float32(optimize):
    args = (X3, M3, rng.standard_normal((3, 3)) * 0.5)
    grads = srcgrad.grad(_gaussian_probability, wrt=(0, 1, 2), optimize=optimize)(*args)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(g, numerical_grad(_gaussian_probability, args, i, eps=1e-3), rtol=1e-3,
                                   atol=1e-5)
    grads32 = srcgrad.grad(_gaussian_probability, wrt=(0, 1, 2), optimize=optimize)(
        *(a.astype(np.float32) for a in args))
    for g32, g in zip(grads32, grads):
        assert g32.dtype == np.float32
        np.testing.assert_allclose(g32, g, rtol=1e-3, atol=1e-4)


def test_multivariate_normal_cdf_forward_mode_and_its_second_derivative_refused():
    """jvp (the tangent rule) = <grad, v> from reverse mode; hvp is refused, naming the line."""
    def f(x, mean, cov):
        return np.sum(stats.multivariate_normal.logcdf(x, mean, cov, rng=0))

    args = (X3, M3, S3)
    vs = tuple(np.random.default_rng(4).standard_normal(np.shape(a)) for a in args)
    vs = (vs[0], vs[1], vs[2] + vs[2].T)  # a symmetric direction
    _, tangent = srcgrad.jvp(f, wrt=(0, 1, 2))(*args, vs)
    grads = srcgrad.grad(f, wrt=(0, 1, 2))(*args)
    along = sum(np.sum(g * v) for g, v in zip(grads[:2], vs[:2])) + np.sum(grads[2] * np.tril(vs[2]))
    np.testing.assert_allclose(tangent, along, rtol=1e-12)
    with pytest.raises(srcgrad.errors.UserCodeError, match="second derivative") as info:
        srcgrad.hvp(f, wrt=0)(*args, vs[0])
    assert "test_rules_scipy.py" in str(info.value)


def test_math_log_with_a_base():
    def f(x, b):
        return math.log(x, b) + math.log(x, 10)

    x, b = 3.0, 2.5
    gx, gb = srcgrad.grad(f, wrt=(0, 1))(x, b)
    assert gx == pytest.approx(1 / (x * math.log(b)) + 1 / (x * math.log(10)), rel=1e-14)
    assert gb == pytest.approx(-math.log(x) / (b * math.log(b) ** 2), rel=1e-14)


from scipy.stats import multivariate_normal as mvn  # noqa: E402 - a name bound to a distribution object


def _gaussian_loglik(mean, cov_root, data):
    return np.sum(mvn.logpdf(data, mean, cov_root @ cov_root.T + np.eye(2)))


def test_multivariate_normal_tangents_and_second_derivatives():
    rs = np.random.RandomState(3)
    mean, root, data = rs.randn(2), rs.randn(2, 2) * 0.5, rs.randn(5, 2)
    for wrt, primal in ((0, mean), (1, root)):
        direction = rs.randn(*primal.shape)

        def along(t, wrt=wrt, direction=direction):
            args = [mean, root, data]
            args[wrt] = args[wrt] + t * direction
            return _gaussian_loglik(*args)
        _, tangent = srcgrad.jvp(_gaussian_loglik, wrt=wrt)(mean, root, data, direction)
        np.testing.assert_allclose(tangent, (along(1e-6) - along(-1e-6)) / 2e-6, rtol=1e-6)
        g = srcgrad.grad(_gaussian_loglik, wrt=wrt)
        moved = [mean, root, data]
        expected = []
        for step in (1e-5, -1e-5):
            moved[wrt] = primal + step * direction
            expected.append(g(*moved))
        np.testing.assert_allclose(srcgrad.hvp(_gaussian_loglik, wrt=wrt)(mean, root, data, direction),
                                   (expected[0] - expected[1]) / 2e-5, rtol=1e-5, atol=1e-8)
