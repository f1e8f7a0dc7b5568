"""How user code reaches the rules: import spellings, constants and
non-differentiable calls, random draws, and ``grad`` of reductions of
broadcasting expressions (the optimizer's own rewrites of ``full_like``).
"""
from __future__ import annotations

import math
import sys

import numpy
import numpy as np
import numpy as xp
import pytest
from tests.finite_differences import numerical_grad
from numpy import exp, linalg, sin
from numpy.linalg import norm

import srcgrad

OPTIMIZE = pytest.mark.parametrize("optimize", [True, False], ids=["opt", "noopt"])

X = np.array([[0.5, -1.0, 2.0, 0.25], [1.5, -0.5, -2.0, 1.0], [0.75, 1.25, -1.5, 0.1]])


# ---- however NumPy is imported ---------------------------------------------------


def spelled_numpy(x):
    return numpy.sum(numpy.exp(x) * numpy.sin(x))


def spelled_np(x):
    return np.sum(np.exp(x) * np.sin(x))


def spelled_alias(x):
    return xp.sum(xp.exp(x) * xp.sin(x))


def spelled_from_import(x):
    return np.sum(exp(x) * sin(x))


def norm_np(x):
    return np.linalg.norm(x)


def norm_submodule(x):
    return linalg.norm(x)


def norm_from_import(x):
    return norm(x)


@OPTIMIZE
@pytest.mark.parametrize("fn", [spelled_numpy, spelled_np, spelled_alias, spelled_from_import],
                         ids=["import numpy", "import numpy as np", "import numpy as xp",
                              "from numpy import exp"])
def test_import_spellings(fn, optimize):
    g = srcgrad.grad(fn, optimize=optimize)(X)
    np.testing.assert_allclose(g, np.exp(X) * (np.sin(X) + np.cos(X)), rtol=1e-14)


@OPTIMIZE
@pytest.mark.parametrize("fn", [norm_np, norm_submodule, norm_from_import],
                         ids=["np.linalg.norm", "from numpy import linalg", "from numpy.linalg import norm"])
def test_linalg_spellings(fn, optimize):
    g = srcgrad.grad(fn, optimize=optimize)(X)
    np.testing.assert_allclose(g, X / np.sqrt(np.sum(X**2)), rtol=1e-14)


def test_generated_code_uses_its_own_module_name():
    text = srcgrad.source(srcgrad.grad(spelled_alias), X)
    code = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
    assert not any("xp." in line for line in code)
    assert any("np.exp(x)" in line for line in code)


# ---- constants and non-differentiable calls ---------------------------------------


def with_constructors(x):
    c = np.zeros(x.shape) + np.ones((3, 4)) + np.zeros_like(x) + np.full((3, 4), 2.0)
    return np.sum(x * c)


def with_arange(x):
    return np.sum(x * np.arange(4))


def with_shape_and_len(x):
    n = len(x) * x.shape[1] * np.shape(x)[0]
    return np.sum(x) / n + x.ndim


def with_argmax(x):
    return np.ravel(x)[np.argmax(x)] * 3.0


def with_floor(x):
    return np.sum(x - np.floor(x))


def with_floor_divide(x):
    return np.sum(x - np.floor_divide(x, 0.5) * 0.5 + x // 0.25)


def with_sign(x):
    return np.sum(np.sign(x) * x)


def with_searchsorted(x):
    """A sorted table looked up by ``x``: the insertion indices are integers (zero derivative)."""
    table = np.sort(np.ravel(x))
    return table[np.searchsorted(table, 0.0)] * 2.0


def with_comparisons(x, y):
    return np.sum(x * (x > 0) + y * (x <= y) + (x == y))


def with_where_on_comparison(x, y):
    return np.sum(np.where(x > y, x * 2.0, y))


@OPTIMIZE
@pytest.mark.parametrize("fn, expected", [
    (with_constructors, lambda x: np.full((3, 4), 3.0)),
    (with_arange, lambda x: np.broadcast_to(np.arange(4.0), (3, 4))),
    (with_shape_and_len, lambda x: np.full((3, 4), 1 / 36)),
    (with_argmax, lambda x: 3.0 * (x == np.max(x))),
    (with_floor, lambda x: np.ones((3, 4))),
    (with_floor_divide, lambda x: np.ones((3, 4))),
    (with_sign, lambda x: np.sign(x)),
    (with_searchsorted, lambda x: 2.0 * (x == np.min(x[x > 0]))),
], ids=["zeros-ones-zeros_like-full", "arange", "shape-len-ndim", "argmax", "floor", "floor_divide", "sign",
        "searchsorted"])
def test_non_differentiable_calls_are_constants(fn, expected, optimize):
    np.testing.assert_allclose(srcgrad.grad(fn, optimize=optimize)(X), expected(X), rtol=1e-14)


@OPTIMIZE
@pytest.mark.parametrize("fn, expected_x, expected_y", [
    (with_comparisons, lambda x, y: 1.0 * (x > 0), lambda x, y: 1.0 * (x <= y)),
    (with_where_on_comparison, lambda x, y: 2.0 * (x > y), lambda x, y: 1.0 * (x <= y)),
], ids=["comparisons", "where-on-comparison"])
def test_comparisons_are_constants(fn, expected_x, expected_y, optimize):
    y = X[::-1].copy()
    gx, gy = srcgrad.grad(fn, wrt=(0, 1), optimize=optimize)(X, y)
    np.testing.assert_array_equal(gx, expected_x(X, y))
    np.testing.assert_array_equal(gy, expected_y(X, y))


def negative_literal_squared(x):
    return np.sum((-3.0) ** 2 * x)


def negative_literal_base(x):
    return np.sum((-2.0) ** x)


@OPTIMIZE
def test_negative_literal_base_keeps_its_parentheses(optimize):
    np.testing.assert_array_equal(srcgrad.grad(negative_literal_squared, optimize=optimize)(X), 9.0)
    x = np.array([1.0, 2.0, 3.0])
    value, _ = srcgrad.value_and_grad(negative_literal_base, optimize=optimize)(x)
    assert value == -6.0  # (-2) + 4 + (-8)


# ---- random draws inside the function -----------------------------------------------

RNG = np.random.default_rng(0)


def noisy_product(x):
    noise = np.random.standard_normal(x.shape)
    return np.sum(x * noise) + np.sum(noise)


def noise_added(x):
    return np.sum(x**2) + np.sum(np.random.uniform(-1.0, 1.0, x.shape))


def generator_noise(x):
    return np.sum(x * RNG.normal(0.0, 1.0, x.shape))


@OPTIMIZE
def test_random_draw_happens_once_and_is_a_constant(optimize):
    gfn = srcgrad.grad(noisy_product, optimize=optimize)
    np.random.seed(3)
    g = gfn(X)
    after = np.random.standard_normal()
    np.random.seed(3)
    np.testing.assert_array_equal(g, np.random.standard_normal(X.shape))
    assert after == np.random.standard_normal()  # no second draw, none skipped


@OPTIMIZE
def test_random_draw_does_not_change_the_gradient(optimize):
    gfn = srcgrad.grad(noise_added, optimize=optimize)
    np.testing.assert_array_equal(gfn(X), 2 * X)
    np.testing.assert_array_equal(gfn(X), 2 * X)


@OPTIMIZE
def test_generator_method_draw(optimize, monkeypatch):
    gfn = srcgrad.grad(generator_noise, optimize=optimize)
    monkeypatch.setattr(sys.modules[__name__], "RNG", np.random.default_rng(7))
    g = gfn(X)
    np.testing.assert_array_equal(g, np.random.default_rng(7).normal(0.0, 1.0, X.shape))


# ---- grad of a reduction of a broadcasting expression --------------------------------
# ``grad`` seeds the reduction's adjoint with ``np.full_like``, which the optimizer
# rewrites (shape forwarding, scalar-fill folding, copy propagation): these run the
# rules behind a reduction, with the optimizer on and off.


def sum_add(x, y):
    return np.sum(x + y)


def sum_sub(x, y):
    return np.sum(x - y)


def sum_mul(x, y):
    return np.sum(x * y)


def mean_div(x, y):
    return np.mean(x / y)


def sum_square_diff(x, y):
    return np.sum((x - y) ** 2)


def sum_plus_one(x, y):
    return np.sum(x + 1.0) + np.sum(y)


def sum_times_one(x, y):
    return np.sum(x * 1.0) + np.sum(y)


def sum_copy(x, y):
    return np.sum(np.copy(x)) + np.sum(y)


SHAPES = {"3x4,4": ((3, 4), (4,)), "3x1,1x4": ((3, 1), (1, 4)), "scalar,3x4": ((), (3, 4)),
          "3x4,scalar": ((3, 4), ())}



def _reduction_params():
    params = []
    for fn in (sum_add, sum_sub, sum_mul, mean_div, sum_square_diff, sum_plus_one, sum_times_one,
               sum_copy):
        for shapes_id, shapes in SHAPES.items():
            for optimize in (True, False):
                params.append(pytest.param(fn, shapes, optimize,
                                           id=f"{fn.__name__}|{shapes_id}|{'opt' if optimize else 'noopt'}"))
    return params


@pytest.mark.parametrize("fn, shapes, optimize", _reduction_params())
def test_grad_of_reduction_matches_finite_differences(fn, shapes, optimize):
    rng = np.random.default_rng(4)
    args = [float(rng.uniform(0.5, 2.0)) if s == () else rng.uniform(0.5, 2.0, s) for s in shapes]
    grads = srcgrad.grad(fn, wrt=(0, 1), optimize=optimize)(*args)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(g, numerical_grad(fn, args, i), rtol=1e-6, atol=1e-8)


# ---- the rules of issue 14 inside loops and called helpers --------------------------------


def _padded_rows(h):
    """A helper that selects, pads and rotates (gather rules), called in a loop."""
    return np.rot90(np.pad(np.take(h, [0, 2, 2], axis=0), 1, mode="edge"))


def gathers_in_a_loop(x):
    h = x
    total = 0.0
    for _ in range(3):
        h = np.tanh(_padded_rows(h) * 0.5)[1:-1, 1:-1].T
        total = total + np.sum(np.cumprod(np.tile(h, (1, 2)), axis=1) * np.fliplr(np.triu(h, 1)).sum())
    return total


def _statistics(h, w):
    return np.average(h, axis=1, weights=w) + np.nanmean(h, axis=1) + np.ptp(h, axis=1)


def reductions_in_a_helper(x):
    out = 0.0
    for i in range(2):
        out = out + np.sum(_statistics(np.arcsinh(x) * (i + 1), np.exp2(x[0])) ** 2)
    return out + np.sum(np.nansum(np.cbrt(x + 3.0), axis=0, keepdims=True) * np.max(x, axis=1, initial=0.0)[0])


def _split_and_join(x):
    parts = np.array_split(x, 3, axis=1)  # widths 2, 1, 1: pieces of different shapes
    return np.kron(parts[0], parts[2]) + np.sum(parts[1]), np.insert(parts[2], 1, parts[1][0], axis=0)


def pieces_in_a_loop(x):
    total = 0.0
    for k in range(2):
        joined, inserted = _split_and_join(x * (k + 1.0))
        total = total + np.sum(joined ** 2) + np.vdot(inserted, np.arange(4.0).reshape(4, 1)) \
            + np.sum(np.cross(x[:, :3], np.fmax(x[:, 1:], 0.3)) * np.logaddexp2(x[:, :3], 1.0))
    return total + np.inner(np.append(x[0], x[1, :2]), np.arange(6.0))


@OPTIMIZE
@pytest.mark.parametrize("fn", [gathers_in_a_loop, reductions_in_a_helper, pieces_in_a_loop])
def test_new_rules_in_loops_and_helpers(fn, optimize):
    g = srcgrad.grad(fn, optimize=optimize)(X)
    np.testing.assert_allclose(g, numerical_grad(fn, [X], 0), rtol=1e-5, atol=1e-6)
    g32 = srcgrad.grad(fn, optimize=optimize)(X.astype(np.float32))
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, g, rtol=2e-3, atol=2e-3)
    v = np.cos(X)
    _, tangent = srcgrad.jvp(fn, optimize=optimize)(X, v)
    assert tangent == pytest.approx(np.sum(g * v), rel=1e-9)


# ---- np.linalg decompositions in loops and helpers; their refusals -------------------


def _whiten(a):
    low = np.linalg.cholesky(a @ a.T + 3.0 * np.eye(3))
    w, v = np.linalg.eigh(a[:, :3] + a[:, :3].T)
    return np.linalg.solve(low, a), w, v


def decompositions_in_a_loop(x):
    total = 0.0
    for k in range(2):
        z, w, v = _whiten(x * (k + 1.0))
        u, s, vt = np.linalg.svd(z, full_matrices=False)
        q, r = np.linalg.qr(z.T)
        sign, logdet = np.linalg.slogdet(np.linalg.matrix_power(z[:, :3], 2) + np.eye(3))
        total = total + np.sum(s ** 2) + np.sum(w * v[0] ** 2) + np.sum(u[:, 0] * u[0, 0]) * np.sum(vt[0] * vt[0, 0]) \
            + np.sum(q * r[0]) + logdet + np.sum(np.linalg.pinv(z) ** 2) + np.linalg.det(z[:, 1:])
    return total


@OPTIMIZE
def test_decompositions_in_loops_and_helpers(optimize):
    fn = decompositions_in_a_loop
    g = srcgrad.grad(fn, optimize=optimize)(X)
    np.testing.assert_allclose(g, numerical_grad(fn, [X], 0), rtol=1e-5, atol=1e-6)
    g32 = srcgrad.grad(fn, optimize=optimize)(X.astype(np.float32))
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, g, rtol=1e-2, atol=1e-2)
    v = np.cos(X)
    _, tangent = srcgrad.jvp(fn, optimize=optimize)(X, v)
    assert tangent == pytest.approx(np.sum(g * v), rel=1e-9)


def test_eigenvectors_of_a_repeated_eigenvalue_are_refused():
    def vectors(x):
        return np.sum(np.linalg.eigh(x)[1] ** 3)

    def values(x):
        return np.sum(np.linalg.eigh(x)[0] ** 2)

    eye = np.eye(3)
    np.testing.assert_allclose(srcgrad.grad(values)(eye), 2 * eye)  # values alone: defined
    with pytest.raises(srcgrad.NoDerivativeRuleError, match="repeated value"):
        srcgrad.grad(vectors)(eye)
    _, tangent = srcgrad.jvp(lambda_free_eigh)(eye, np.ones((3, 3)))
    assert np.isnan(tangent)  # forward mode: NaN where undefined, never a number


def lambda_free_eigh(x):
    return np.sum(np.linalg.eigh(x)[1])


def test_svd_full_matrices_extra_columns_are_refused_when_read():
    def first_columns(x):
        u, s, vt = np.linalg.svd(x)  # full_matrices=True: U is 4 x 4
        return np.sum(u[:, :3] * u[0, 0]) + np.sum(s)

    def all_columns(x):
        return np.sum(np.linalg.svd(x)[0] ** 3)

    a = X.T.copy()
    np.testing.assert_allclose(srcgrad.grad(first_columns)(a), numerical_grad(first_columns, [a], 0),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(srcgrad.NoDerivativeRuleError, match="beyond min"):
        srcgrad.grad(all_columns)(a)


@pytest.mark.parametrize("expr, match", [("np.linalg.svd(x, hermitian=True)[1]", "hermitian=False"),
                                         ("np.linalg.qr(x, mode='complete')[1]", "mode='reduced'"),
                                         ("np.linalg.pinv(x, hermitian=True)", "hermitian=False")])
def test_linalg_forms_without_a_rule_are_refused(expr, match):
    from tests.rules.rule_table import user_function

    with pytest.raises(srcgrad.SrcgradError, match=match):
        srcgrad.grad(user_function(f"np.sum({expr})", ("x",)))(np.eye(3) + 0.1)


def test_pinv_of_a_rank_deficient_matrix_is_refused():
    def f(x):
        return np.sum(np.linalg.pinv(x))

    with pytest.raises(srcgrad.NoDerivativeRuleError, match="rank-deficient"):
        srcgrad.grad(f)(np.ones((3, 2)))


# ---- Python's builtins: max, min, sum, pow, divmod, round ---------------------


def _clipped_norm(a, b):
    return min(max(a, b), 2.0)


def builtins_in_a_loop(xs, b):
    total = 0.0
    for x in xs:
        q, r = divmod(x, 0.75)
        total = total + _clipped_norm(x, b) * pow(x, 2) + r + round(x) + q
    best = max(x * b for x in xs)
    return total + best + sum([x * x for x in xs], b)


@pytest.mark.parametrize("optimize", [True, False])
def test_builtins_in_a_loop_and_a_helper(optimize):
    xs, b = [0.3, 1.7, 2.6, -0.4], 1.1
    gx, gb = srcgrad.grad(builtins_in_a_loop, wrt=(0, 1), optimize=optimize)(xs, b)
    for i in range(len(xs)):
        np.testing.assert_allclose(gx[i], numerical_grad(builtins_in_a_loop, [np.array(xs), b], 0)[i], rtol=1e-6)
    np.testing.assert_allclose(gb, numerical_grad(builtins_in_a_loop, [np.array(xs), b], 1), rtol=1e-6)


def builtin_max_tied(a, b):
    return max(a, b, a) + min([b, a])


def test_builtin_max_tie_goes_to_the_first_extremum():
    """As ``np.max``'s (``rt.max_adjoint``): the item Python returns gets the whole adjoint."""
    assert srcgrad.grad(builtin_max_tied, wrt=(0, 1))(1.0, 1.0) == (1.0, 1.0)
    assert srcgrad.grad(builtin_max_tied, wrt=(0, 1))(2.0, 1.0) == (1.0, 1.0)
    assert srcgrad.grad(builtin_max_tied, wrt=(0, 1))(1.0, 2.0) == (1.0, 1.0)
    np.testing.assert_array_equal(srcgrad.grad(lambda_free_max)(np.array([1.0, 3.0, 3.0])), [0.0, 1.0, 0.0])


def lambda_free_max(x):
    return max(x)


def builtin_max_with_key(a, b):
    return max(a, b, key=abs)


def test_builtin_max_with_key_is_refused():
    with pytest.raises(srcgrad.NoDerivativeRuleError, match="without `key=`"):
        srcgrad.grad(builtin_max_with_key)(1.0, -2.0)


# ---- math.* on floats ----------------------------------------------------------


def _pendulum_step(theta, omega, dt):
    return theta + dt * omega, omega - dt * math.sin(theta)


def math_in_a_loop(theta, omega):
    for _ in range(5):
        theta, omega = _pendulum_step(theta, omega, 0.1)
    return math.exp(-omega * omega) + math.hypot(theta, omega) + math.lgamma(2.5 + math.tanh(theta))


@pytest.mark.parametrize("optimize", [True, False])
def test_math_in_a_loop_and_a_helper(optimize):
    g = srcgrad.grad(math_in_a_loop, wrt=(0, 1), optimize=optimize)
    grads = g(0.4, -0.3)
    for i in range(2):
        np.testing.assert_allclose(grads[i], numerical_grad(math_in_a_loop, [0.4, -0.3], i), rtol=1e-6)
    text = srcgrad.source(g, 0.4, -0.3)
    assert "math.sin(" in text and "math.cos(" in text and "np.sin" not in text


def where_one_argument(x):
    rows, cols = np.where(x > 0)
    return np.sum(x[rows, cols] ** 2) + np.sum(x[np.where(x < 0)])


@pytest.mark.parametrize("optimize", [True, False])
def test_where_with_one_argument_gives_indices(optimize):
    """``np.where(cond)``: a tuple of index arrays (``np.nonzero``), no derivative; used to index."""
    np.testing.assert_allclose(srcgrad.grad(where_one_argument, optimize=optimize)(X),
                               np.where(X > 0, 2 * X, 1.0))
