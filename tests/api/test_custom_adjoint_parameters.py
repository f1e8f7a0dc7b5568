"""Custom adjoints' parameters and bodies: parameters with defaults, leading parameters named
otherwise than `ans_bar, ans`, locals named like the user's, a test known only when the rule
runs.  Each gradient checked against central finite differences in float64."""

import math

import numpy as np
import pytest

import srcgrad
from srcgrad import errors


# central differences, float64
def numerical_grad(f, x, eps=1e-6):
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[idx] = eps
        g[idx] = (f(x + step) - f(x - step)) / (2 * eps)
    return g


X3 = np.array([0.5, -1.0, 2.0])


# ---- silently wrong: a custom adjoint's parameter with a default, given a differentiated value
# `k`, `shift`, `n`, ... are NumPy's discrete parameters by name (an axis, a shift); a user's
# custom adjoint's `k=2.0` is a float: it was taken for one and treated as a constant.

@srcgrad.custom_adjoint
def scaled(x, k=2.0):
    return x * k


@scaled.defadjoint
def _scaled_adjoint(ans_bar, ans, x, k=2.0):
    return ans_bar * k


@srcgrad.custom_adjoint
def shifted(x, shift=0.0):
    return x + shift


@shifted.defadjoint(diff=("x", "shift"))
def _shifted_adjoint(ans_bar, ans, x, shift=0.0):
    return ans_bar, np.sum(ans_bar) if np.ndim(shift) == 0 else ans_bar


def scaled_by_a_differentiated_value(x):
    return np.sum(scaled(x, np.sum(x)) ** 2)


def scaled_by_a_constant(x):
    return np.sum(scaled(x, 3.0) ** 2)


def shifted_by_a_differentiated_value(x):
    return np.sum(shifted(x, shift=np.sum(x)) ** 2)


def test_a_default_parameter_given_a_differentiated_value_is_refused():
    with pytest.raises(errors.NoDerivativeRuleError, match="`k` of .*scaled.* has no derivative"):
        srcgrad.grad(scaled_by_a_differentiated_value)(X3)
    with pytest.raises(errors.NoDerivativeRuleError, match="diff="):
        srcgrad.grad(scaled_by_a_differentiated_value)(X3)
    with pytest.raises(errors.NoDerivativeRuleError, match="`k`"):
        srcgrad.grad(scaled_by_an_argument, wrt=1)(X3, 1.7)


def scaled_by_an_argument(x, k):
    return np.sum(scaled(x, k) ** 2)


def test_a_default_parameter_named_in_diff_is_differentiated():
    np.testing.assert_allclose(srcgrad.grad(shifted_by_a_differentiated_value)(X3),
                               numerical_grad(shifted_by_a_differentiated_value, X3), rtol=1e-7)
    np.testing.assert_allclose(srcgrad.grad(scaled_by_a_constant)(X3), 18 * X3, rtol=1e-12)


# ---- silently wrong: a rule of yours with a test known only when it runs ----------------
# Rules are inlined as templates; a test not known when compiling took the `else` (srcgrad's
# own rules put the general form there).  A rule of yours with a test now runs as written.

@srcgrad.custom_adjoint
def signed_square(x):
    if np.sum(x) > 0:
        return x ** 2
    return -x ** 2


@signed_square.defadjoint
def _signed_square_adjoint(ans_bar, ans, x):
    if np.sum(x) > 0:
        return ans_bar * 2 * x
    return -ans_bar * 2 * x


@signed_square.defjvp
def _signed_square_tangent(ans, x, x_dot=None):
    if np.sum(x) > 0:
        return 2 * x * x_dot
    return -2 * x * x_dot


@srcgrad.custom_adjoint
def product(a, b):
    return a * b


@product.defadjoint
def _product_adjoint(ans_bar, ans, a, b):
    return ans_bar * b, ans_bar * a


@product.defjvp
def _product_tangent(ans, a, b, a_dot=None, b_dot=None):
    if a_dot is not None and b_dot is not None:
        return a_dot * b + a * b_dot
    if a_dot is not None:
        return a_dot * b
    return a * b_dot


def signed_square_sum(x):
    return np.sum(signed_square(x))


def signed_square_in_a_loop(x):
    t = 0.0
    for k in range(2):
        t = t + np.sum(signed_square(x * (k + 1))) * 0.5
    return t


def _helper_calling_the_rule(x):
    return signed_square(x) * 2.0


def signed_square_in_a_helper(x):
    return np.sum(_helper_calling_the_rule(x))


def product_squared(x):
    return np.sum(product(x, 2.0) ** 2)


@pytest.mark.parametrize("f", [signed_square_sum, signed_square_in_a_loop, signed_square_in_a_helper],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_rule_with_a_test_known_when_it_runs(f, sign, dtype):
    x = (sign * np.abs(X3)).astype(dtype)
    g = srcgrad.grad(f)(x)
    assert g.dtype == dtype
    tol = 1e-4 if dtype == np.float32 else 1e-7
    np.testing.assert_allclose(g, numerical_grad(f, sign * np.abs(X3)), rtol=tol)
    _, t = srcgrad.jvp(f)(x, np.ones(3, dtype))
    np.testing.assert_allclose(t, np.sum(numerical_grad(f, sign * np.abs(X3))), rtol=tol)


def test_a_tangent_rule_testing_for_a_constant():
    _, t = srcgrad.jvp(product)(1.5, 2.0, 1.0)  # a = 1.5, b = 2.0 (a constant), a_dot = 1
    assert t == 2.0
    _, t = srcgrad.jvp(lambda_free_product)(1.5, 1.0)
    assert t == 2.0
    np.testing.assert_allclose(srcgrad.hvp(product_squared)(X3[:2], np.ones(2)), [8.0, 8.0])


def lambda_free_product(x):
    return product(x, 2.0)


# ---- silently wrong: a rule's leading parameters named otherwise than ans_bar, ans ---------
# They were bound by name: `(g, y, x)` read undefined names (NameError in generated code),
# and `(result_bar, result, x)` read the generated function's own `result_bar` (1.0): the
# chain rule dropped with no error.  They are positional now, as when a rule runs as a function.

@srcgrad.custom_adjoint
def soft_clip(x):
    return np.tanh(x) * 2


@soft_clip.defadjoint
def _soft_clip_adjoint(result_bar, result, x):
    return result_bar * 2 * (1 - np.tanh(x) ** 2)


@soft_clip.defjvp
def _soft_clip_tangent(y, x, x_dot=None):
    return x_dot * (2 - y * y / 2)


@srcgrad.custom_adjoint
def cube(x):
    return x ** 3


@cube.defadjoint
def _cube_adjoint(g, y, x):
    return g * 3 * np.cbrt(y) ** 2  # (reads y: the output, by position)


def soft_clip_squared(x):
    return np.sum(soft_clip(x) ** 2)


def cube_in_a_loop(x):
    t = 0.0
    for k in range(2):
        t = t + np.sum(cube(x + k) * 0.5)
    return t


def _through_a_helper(x):
    return soft_clip(x) * cube(x)


def rules_in_a_helper(x):
    return np.sum(_through_a_helper(x))


@pytest.mark.parametrize("f", [soft_clip_squared, cube_in_a_loop, rules_in_a_helper], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rule_parameters_named_otherwise(f, dtype):
    g = srcgrad.grad(f)(X3.astype(dtype))
    assert g.dtype == dtype
    np.testing.assert_allclose(g, numerical_grad(f, X3), rtol=1e-4 if dtype == np.float32 else 1e-7)


def test_tangent_rule_parameters_named_otherwise():
    _, t = srcgrad.jvp(soft_clip_squared)(X3, np.ones(3))
    np.testing.assert_allclose(t, np.sum(numerical_grad(soft_clip_squared, X3)), rtol=1e-7)


def dist_of_p_and_q(p, q):
    return math.dist([p, q], [0.5, q]) * p + q * p


def prod_of_items(items, start):
    t = 0.0
    for k in range(2):
        t = t + math.prod([items, start, items + k], start=start) * items
    return t


def _named_like_the_rule(p, q):
    p_bar = p * q  # (a user's own `p_bar`)
    return math.dist([p, p_bar], [q, 1.0]) + p_bar


def dist_in_a_helper(p, q):
    return _named_like_the_rule(p, q) * q


@pytest.mark.parametrize("f", [dist_of_p_and_q, prod_of_items, dist_in_a_helper], ids=lambda f: f.__name__)
def test_a_rule_unpacking_into_names_like_the_users(f):
    p, q = 0.3, 1.7
    got = srcgrad.grad(f, wrt=(0, 1))(p, q)
    h = 1e-6
    expected = ((f(p + h, q) - f(p - h, q)) / (2 * h), (f(p, q + h) - f(p, q - h)) / (2 * h))
    np.testing.assert_allclose(got, expected, rtol=1e-6)


@srcgrad.custom_adjoint
def _sine_and_cosine(x):
    return np.sin(x), np.cos(x)


@_sine_and_cosine.defadjoint
def _sine_and_cosine_adjoint(ans_bar, ans, x):
    sin_bar, cos_bar = ans_bar
    return sin_bar * np.cos(x) - cos_bar * np.sin(x)


def _outputs_indexed(x):
    r = _sine_and_cosine(x)
    return np.sum(r[0] ** 2 + 3.0 * r[1])


def _one_output_used(x):
    return np.sum(_sine_and_cosine(x)[1])


def _outputs_iterated(x):
    total = 0.0
    for v in _sine_and_cosine(x):
        total = total + np.sum(v * 2.0)
    return total


@pytest.mark.parametrize("f", [_outputs_indexed, _one_output_used, _outputs_iterated])
def test_a_rule_of_several_outputs_read_by_index(f):
    # (its ans_bar came as the sparse {1: .., 0: ..} and was unpacked key first: silently wrong)
    for x in (np.array([0.3, 1.1, -0.7]), np.array([-0.2, 0.5, 2.0])):
        np.testing.assert_allclose(srcgrad.grad(f)(x), numerical_grad(f, x), rtol=1e-6, atol=1e-9)


def _dict_of_pairs(x):
    entries = dict([("a", x[0]), ("b", x[1])])
    return np.sum(entries["a"] * 5.0) + np.sum(entries["b"] ** 2)


def test_forward_mode_through_dict_of_pairs():
    # (the tangent dict took the keys' zero tangents for keys: tangents silently 0)
    x, v = np.array([[0.1, 0.2], [0.3, 0.4]]), np.array([[1.0, 2.0], [3.0, 4.0]])
    _, tangent = srcgrad.jvp(_dict_of_pairs)(x, v)
    assert tangent == pytest.approx(np.sum(numerical_grad(_dict_of_pairs, x) * v), rel=1e-6)


# ---- one adjoint returned in a tuple (JAX's custom_vjp and torch's backward return tuples) ----

@srcgrad.custom_adjoint
def _safe_norm(v):
    return np.sqrt(np.sum(v ** 2) + 1e-12)


@_safe_norm.defadjoint
def _safe_norm_adjoint(ans_bar, ans, v):
    return (ans_bar * v / ans,)


def _scaled_through_helper(g, v, a):
    return g * v / a


@srcgrad.custom_adjoint
def _safe_norm_by_helper(v):
    return np.sqrt(np.sum(v ** 2) + 1e-12)


@_safe_norm_by_helper.defadjoint
def _safe_norm_by_helper_adjoint(ans_bar, ans, v):
    return (_scaled_through_helper(ans_bar, v, ans),)


def _norms_in_a_loop(x):
    total = 0.0
    for row in x:
        total = total + _safe_norm(2.0 * row) * _safe_norm_by_helper(row)
    return total


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_one_adjoint_in_a_tuple(dtype):
    x = np.array([[3.0, 4.0, 1.0], [0.5, -2.0, 1.5]], dtype=dtype)
    for f in (lambda x: _safe_norm(2.0 * x), lambda x: _safe_norm(x[0]) + _safe_norm_by_helper(x[1]),
              _norms_in_a_loop):
        got = srcgrad.grad(f)(x)
        assert got.dtype == dtype
        np.testing.assert_allclose(got, numerical_grad(f, x), rtol=1e-4 if dtype == np.float32 else 1e-7)
