"""srcgrad.extend: HIPS autograd's @primitive / defvjp / defjvp over srcgrad's rule registry,
checked against central differences and, where it is installed, against autograd."""
import numpy as np
import pytest

import srcgrad
from srcgrad import errors
from srcgrad.extend import defjvp, defvjp, primitive
from srcgrad.testing import check_grads


@primitive
def logsumexp(x):
    """log(sum(exp(x))), computed stably, with an in-place write srcgrad never sees."""
    m = np.max(x)
    shifted = x.copy()
    shifted -= m
    return m + np.log(np.sum(np.exp(shifted)))


def logsumexp_vjp(ans, x):
    x_shape = x.shape
    return lambda g: np.full(x_shape, g) * np.exp(x - np.full(x_shape, ans))


defvjp(logsumexp, logsumexp_vjp)


def _lse(x):
    return np.log(np.sum(np.exp(x)))


def _rng(seed=0):
    return np.random.default_rng(seed)


# ---- the example, and where the primitive is called ----------------------------------

def example(y):
    z = y**2
    return np.sum(logsumexp(z))


def test_the_example_against_its_formula_and_finite_differences():
    y = _rng().standard_normal(10)
    got = srcgrad.grad(example)(y)
    np.testing.assert_allclose(got, 2 * y * np.exp(y**2 - _lse(y**2)), rtol=1e-12)
    check_grads(example, (y,))


def test_generated_code_inlines_the_makers_body_with_its_shape_check():
    source = srcgrad.source(srcgrad.grad(example), np.ones(3))
    assert "_t1 = logsumexp(z)" in source  # the primitive is called, not looked into
    assert "np.exp(z - np.full(" in source and "rt.checked_adjoint(" in source
    assert "dispatch" not in source


def in_a_loop(x, w):
    total = 0.0
    for i in range(3):
        total = total + logsumexp(x * w[i])
    return total


def _helper(x, s):
    return logsumexp(s * x) - logsumexp(x)


def in_a_helper(x, s):
    return _helper(x, s) ** 2


class Model:
    def __init__(self, w):
        self.w = w

    def score(self, x):
        return logsumexp(x @ self.w)


def as_a_method(m, x):
    return m.score(x) * 2.0


def test_in_a_loop():
    x, w = _rng(1).standard_normal(4), _rng(2).standard_normal(3)
    check_grads(in_a_loop, (x, w), wrt=(0, 1))


def test_in_a_helper():
    check_grads(in_a_helper, (_rng(3).standard_normal(5), 0.7), wrt=(0, 1))


def test_called_in_a_method_of_a_model():
    m, x = Model(_rng(4).standard_normal((3, 4))), _rng(5).standard_normal(3)
    g = srcgrad.grad(as_a_method)(m, x)
    eps, numeric = 1e-6, np.zeros_like(m.w)
    for i in np.ndindex(m.w.shape):
        for sign in (1, -1):
            m.w[i] += sign * eps
            numeric[i] += sign * as_a_method(m, x) / (2 * eps)
            m.w[i] -= sign * eps
    np.testing.assert_allclose(g.w, numeric, rtol=1e-6, atol=1e-8)
    check_grads(as_a_method, (m, x), wrt=1)


class Scaled:
    def __init__(self, k):
        self.k = k

    @primitive
    def apply(self, x):
        return self.k * np.sin(x)


defvjp(Scaled.apply, None, lambda ans, self, x: lambda g: g * self.k * np.cos(x))


def calls_a_primitive_method(x, s):
    return np.sum(s.apply(x) ** 2)


def test_a_method_that_is_a_primitive():
    check_grads(calls_a_primitive_method, (_rng(6).standard_normal(4), Scaled(1.5)))


def test_float32_stays_float32():
    y = _rng(7).standard_normal(6).astype(np.float32)
    g = srcgrad.grad(example)(y)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, 2 * y * np.exp(y**2 - _lse(y**2)), rtol=1e-5)


# ---- argnums, None makers, several arguments -----------------------------------------

@primitive
def weighted(a, x, y):
    """``a * sum(x * y)``: ``a`` is a scalar, ``x`` and ``y`` arrays."""
    return a * np.sum(x * y)


defvjp(weighted, lambda ans, a, x, y: lambda g: g * a * y, lambda ans, a, x, y: lambda g: g * a * x,
       argnums=(1, 2))


def uses_weighted(a, x, y):
    return weighted(a, np.tanh(x), y) ** 2


def test_argnums_gives_makers_for_those_positions():
    a, x, y = 1.3, _rng(8).standard_normal(4), _rng(9).standard_normal(4)
    check_grads(uses_weighted, (a, x, y), wrt=(1, 2))


def test_a_position_without_a_maker_is_refused_when_differentiated():
    a, x, y = 1.3, _rng(8).standard_normal(4), _rng(9).standard_normal(4)
    with pytest.raises(errors.NoDerivativeRuleError):
        srcgrad.grad(uses_weighted, wrt=0)(a, x, y)


@primitive
def clipped_scale(x, limit):
    return np.minimum(x, limit) * 2.0


defvjp(clipped_scale, lambda ans, x, limit: lambda g: g * 2.0 * (x < limit), None)


def uses_clipped(x, limit):
    return np.sum(clipped_scale(x, limit) ** 2)


def test_a_none_maker_means_a_zero_derivative():
    x = np.array([0.2, 1.5, -0.3])
    g_x, g_limit = srcgrad.grad(uses_clipped, wrt=(0, 1))(x, 1.0)
    np.testing.assert_allclose(g_x, 8 * x * (x < 1.0))
    assert g_limit == 0.0


# ---- wrong makers ----------------------------------------------------------------------

@primitive
def wrong_shape(x):
    return np.sum(x**2)


defvjp(wrong_shape, lambda ans, x: lambda g: g * 2.0 * np.sum(x))  # a scalar where x is a vector


def uses_wrong_shape(x):
    return wrong_shape(x) * 3.0


@primitive
def not_curried(x):
    return np.sum(np.sin(x))


_not_a_function = 2.0
defvjp(not_curried, lambda ans, x: _not_a_function)


def uses_not_curried(x):
    return not_curried(x)


def test_a_vjp_of_the_wrong_shape_is_refused_naming_the_maker():
    with pytest.raises(errors.NoDerivativeRuleError, match=r"shape \(\) for `x`, of shape \(3,\)") as caught:
        srcgrad.grad(uses_wrong_shape)(np.ones(3))
    assert "test_extend.py:" in str(caught.value) and "wrong_shape" in str(caught.value)


def test_a_maker_that_returns_no_function_is_refused():
    with pytest.raises(errors.NoDerivativeRuleError, match="not a function of the output's adjoint"):
        srcgrad.grad(uses_not_curried)(np.ones(3))


@primitive
def no_rule_yet(x):
    return np.sum(x)


def uses_no_rule_yet(x):
    return no_rule_yet(x * 2.0)


def test_a_primitive_without_defvjp_is_refused_not_looked_into():
    with pytest.raises(errors.NoDerivativeRuleError, match="no_rule_yet"):
        srcgrad.grad(uses_no_rule_yet)(np.ones(3))
    assert no_rule_yet(np.ones(3)) == 3.0  # (it still runs)


def test_defvjp_refuses_bad_argnums():
    with pytest.raises(TypeError, match="argnum 3"):
        defvjp(weighted, lambda ans, a, x, y: lambda g: g, argnums=(3,))
    with pytest.raises(TypeError, match="2 makers"):
        defvjp(weighted, None, None, argnums=(1,))


@primitive
def scaled_later(x):
    return _LATER * np.sum(x)


defvjp(scaled_later, lambda ans, x: lambda g: g * _LATER * np.ones_like(x))
_LATER = 2.0  # (defined after defvjp: the inlined rule reads the module's globals when it runs)


def uses_scaled_later(x):
    return scaled_later(x) ** 2


def test_an_inlined_maker_reads_its_modules_globals_as_they_are():
    global _LATER
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(srcgrad.grad(uses_scaled_later)(x), 2 * 2.0 * np.sum(x) * 2.0)
    _LATER, old = 3.0, _LATER
    try:
        np.testing.assert_allclose(srcgrad.grad(uses_scaled_later)(x), 2 * 3.0 * np.sum(x) * 3.0)
    finally:
        _LATER = old

# ---- makers run as written -------------------------------------------------------------

def _closure_maker(scale):
    def maker(ans, x):
        return lambda g: g * scale * np.cos(x)
    return maker


@primitive
def scaled_sin(x):
    return 3.0 * np.sin(x)


defvjp(scaled_sin, _closure_maker(3.0))  # (a closure: not inlined, run when the gradient runs)


def uses_scaled_sin(x):
    return np.sum(scaled_sin(x) ** 2)


def test_a_closure_maker_runs_as_written():
    x = _rng(10).standard_normal(4)
    check_grads(uses_scaled_sin, (x,))
    assert "dispatch.vjp_call(scaled_sin" in srcgrad.source(srcgrad.grad(uses_scaled_sin), x)


@primitive
def wrong_closure(x):
    return np.sum(x**2)


_closure_wrong = _closure_maker(1.0)
# (a maker with a default is run as written, not inlined)
defvjp(wrong_closure, lambda ans, x, f=_closure_wrong: lambda g: np.sum(f(ans, x)(g)))


def uses_wrong_closure(x):
    return wrong_closure(x)


def test_a_vjp_of_the_wrong_shape_is_refused_when_run_as_written():
    with pytest.raises(errors.NoDerivativeRuleError, match=r"an array of shape \(\), where `x` has shape"):
        srcgrad.grad(uses_wrong_closure)(np.ones(3))

# ---- forward mode and second order -------------------------------------------------------

def test_second_order_through_the_inlined_vjp():
    y = _rng(11).standard_normal(5)
    check_grads(example, (y,), order=2)
    hess = srcgrad.hessian(example)(y)
    eps, g = 1e-6, srcgrad.grad(example)
    numeric = np.stack([(g(y + eps * e) - g(y - eps * e)) / (2 * eps) for e in np.eye(5)])
    np.testing.assert_allclose(hess, numeric, rtol=1e-6, atol=1e-8)


def test_jvp_from_the_vjp_makers_without_defjvp():
    y, v = _rng(12).standard_normal(5), _rng(13).standard_normal(5)
    value, tangent = srcgrad.jvp(example)(y, v)
    np.testing.assert_allclose(tangent, srcgrad.grad(example)(y) @ v, rtol=1e-12)


@primitive
def cube(x):
    return x**3


defvjp(cube, lambda ans, x: lambda g: g * 3 * x**2)
defjvp(cube, lambda g, ans, x: g * 3 * x**2)


def uses_cube(x):
    return np.sum(np.sin(cube(x)))


def test_defjvp_for_forward_mode():
    x, v = _rng(14).standard_normal(4), _rng(15).standard_normal(4)
    _, tangent = srcgrad.jvp(uses_cube)(x, v)
    np.testing.assert_allclose(tangent, np.cos(x**3) * 3 * x**2 @ v, rtol=1e-12)
    check_grads(uses_cube, (x,), order=2)


def test_second_order_through_a_closure_maker_is_refused_clearly():
    with pytest.raises(errors.UnsupportedSyntaxError, match="scaled_sin"):
        srcgrad.hessian(uses_scaled_sin)(np.ones(3))


# ---- against autograd ----------------------------------------------------------------------

def test_against_autograd():
    autograd = pytest.importorskip("autograd")
    anp = pytest.importorskip("autograd.numpy")
    from autograd.extend import defvjp as a_defvjp, primitive as a_primitive

    a_lse = a_primitive(lambda x: np.log(np.sum(np.exp(x))))
    a_defvjp(a_lse, logsumexp_vjp)
    a_weighted = a_primitive(lambda a, x, y: a * np.sum(x * y))
    a_defvjp(a_weighted, lambda ans, a, x, y: lambda g: g * a * y, lambda ans, a, x, y: lambda g: g * a * x,
             argnums=(1, 2))
    y, x, z = _rng(16).standard_normal(6), _rng(17).standard_normal(6), _rng(18).standard_normal(6)
    want = autograd.grad(lambda y: anp.sum(a_lse(y**2)))(y)
    np.testing.assert_allclose(srcgrad.grad(example)(y), want, rtol=1e-12)
    want = autograd.grad(lambda x, z: a_weighted(1.3, anp.tanh(x), z) ** 2, argnum=(0, 1))(x, z)
    got = srcgrad.grad(uses_weighted, wrt=(1, 2))(1.3, x, z)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-12)
