"""Issue 11, the rules' part: every rule right or refused at the user's line.

* the non-differentiable table means "zero derivative in every argument": a
  value being differentiated that reaches a function srcgrad has no rule for,
  or a parameter a rule has no adjoint for, is refused at compile time;
* creation functions given a differentiated value (``full full_like linspace
  arange``) and random draws differentiated by reparameterisation;
* casts to integers, writes into integer arrays and reductions of integer
  arrays (the fill of ``np.mean``'s adjoint is float).

Each kind is checked against central differences in float64, with the
optimizer on and off, inside a loop and a called helper, and in float32.
"""
from __future__ import annotations

import random

import numpy as np
import pytest
from tests.finite_differences import numerical_grad

import srcgrad
from srcgrad import errors
from srcgrad.rules import reductions

OPT = pytest.mark.parametrize("optimize", [True, False], ids=["opt", "noopt"])
X = np.array([0.3, -1.2, 0.7])
XP = np.array([0.6, 1.3, 0.8])  # positive: scales of random draws


def check_gradient(f, x, optimize, atol=1e-6, reseed=None):
    """grad(f) against central differences in float64, and float32 stays float32 and close."""
    if reseed:
        reseed()
    g = srcgrad.grad(f, optimize=optimize)(x.copy())

    def value(*a):
        if reseed:
            reseed()
        return f(*a)
    np.testing.assert_allclose(g, numerical_grad(value, [x], 0), rtol=1e-5, atol=atol)
    if reseed:
        reseed()
    g32 = srcgrad.grad(f, optimize=optimize)(x.astype(np.float32))
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, g, rtol=2e-3, atol=2e-3)
    return g


def assert_refused(f, *args, kind=errors.UserCodeError, match=None, line_of=None):
    with pytest.raises(kind, match=match) as info:
        srcgrad.grad(f)(*args)
    assert __file__.rsplit("/", 1)[-1] in str(info.value)
    if line_of is not None:
        assert f":{line_of}:" in str(info.value)
    return info.value


# ---- creation functions given a differentiated value ---------------------------------


def full_scalar(x):
    return np.sum(np.full(3, x[0]) * x)


def full_rows(x):
    return np.sum(np.full((2, 3), x) * x)


def full_like_item(x):
    return np.sum(np.full_like(x, x[1]) * x)


def linspace_ends(x):
    return np.sum(np.linspace(x[0], x[1], 5) ** 2)


def linspace_open(x):
    return np.sum(np.linspace(x[0], x[1], 5, endpoint=False) ** 3)


def linspace_axis(x):
    return np.sum(np.linspace(x[:2], x[1:], 4, axis=1) ** 2)


def linspace_vector_start(x):
    return np.sum(np.linspace(x, 2.0, 4) ** 2)


def arange_start(x):
    return np.sum(np.arange(x[0], 3.0) ** 2)


def arange_step(x):
    return np.sum(np.arange(x[0], 3.0, x[2] + 1.0) ** 2)


def arange_count(x):
    return np.sum(np.arange(x[2] + 3.0) * x[0])


def _fill_helper(v, n):
    return np.full(n, v * 2.0)


def full_in_helper_and_loop(x):
    total = 0.0
    for i in range(3):
        total = total + np.sum(_fill_helper(x[i], 3) * x)
    return total


CREATION = [full_scalar, full_rows, full_like_item, linspace_ends, linspace_open, linspace_axis,
            linspace_vector_start, arange_start, arange_step, arange_count, full_in_helper_and_loop]


@OPT
@pytest.mark.parametrize("f", CREATION, ids=[f.__name__ for f in CREATION])
def test_creation_functions_given_a_differentiated_value(f, optimize):
    check_gradient(f, X, optimize)


def full_int(x):
    return np.sum(np.full(3, x[0] * 4.0, dtype=int)) * x[1] + np.sum(np.full_like(x.astype(int), x[2]))


@OPT
def test_creation_with_an_integer_dtype_has_zero_derivative_there(optimize):
    g = srcgrad.grad(full_int, optimize=optimize)(X.copy())
    np.testing.assert_allclose(g, [0.0, np.sum(np.full(3, X[0] * 4.0, dtype=int)), 0.0])


# ---- random draws: reparameterisation ------------------------------------------------


def _seed():
    np.random.seed(5)
    random.seed(5)


def normal_loc(x):
    return np.sum(np.random.normal(x, 1.0) ** 2)


def normal_loc_scale(x):
    return np.sum(np.random.normal(x[0], x[1] ** 2, size=4) ** 2)


def normal_keywords(x):
    return np.sum(np.sin(np.random.normal(scale=x, loc=x[::-1])))


def uniform_bounds(x):
    return np.sum(np.random.uniform(x[0], x[2] + 2.0, size=(2, 3)) ** 2)


def exponential_scale(x):
    return np.sum(np.random.exponential(x ** 2) ** 2)


def python_random(x):
    return random.gauss(x[0], 2.0) ** 2 + random.uniform(x[1], x[2]) ** 2 + random.expovariate(x[2]) ** 2


def _noisy(m, s):
    return np.random.normal(m, s)


def random_in_helper_and_loop(x):
    total = 0.0
    for i in range(3):
        total = total + _noisy(x[i], x[(i + 1) % 3] ** 2) ** 2
    return total


RANDOM = [normal_loc, normal_loc_scale, normal_keywords, uniform_bounds, exponential_scale, python_random,
          random_in_helper_and_loop]


@OPT
@pytest.mark.parametrize("f", RANDOM, ids=[f.__name__ for f in RANDOM])
def test_random_draws_are_differentiated_by_reparameterisation(f, optimize):
    """With the seed reset before every evaluation the draw is a smooth function of its
    parameters: finite differences see ``loc + scale * z`` with ``z`` fixed."""
    check_gradient(f, XP, optimize, atol=1e-5, reseed=_seed)


GEN = np.random.default_rng(0)


def generator_method(x):
    return np.sum(GEN.normal(x, 2.0) ** 2) + np.sum(GEN.uniform(0.0, x + 1.0))


def generator_passed_in(x, rng):
    return np.sum(rng.normal(x, x ** 2) ** 2) + np.sum(rng.exponential(x))


@OPT
def test_generator_methods_are_differentiated(optimize):
    def reseed():
        GEN.bit_generator.state = np.random.default_rng(11).bit_generator.state
    check_gradient(generator_method, XP, optimize, atol=1e-5, reseed=reseed)
    g = srcgrad.grad(generator_passed_in, optimize=optimize)(XP.copy(), np.random.default_rng(3))
    expected = numerical_grad(lambda x: generator_passed_in(x, np.random.default_rng(3)), [XP.copy()], 0)
    np.testing.assert_allclose(g, expected, rtol=1e-5, atol=1e-5)


@OPT
def test_a_random_draw_with_a_rule_still_happens_once(optimize):
    np.random.seed(1)
    srcgrad.grad(normal_loc, optimize=optimize)(X.copy())
    after = np.random.standard_normal()
    np.random.seed(1)
    np.random.normal(X, 1.0)
    assert after == np.random.standard_normal()


def gamma_of_x(x):
    return np.sum(np.random.gamma(x ** 2))


def poisson_of_x(x):
    lam = x ** 2
    return np.sum(np.random.poisson(lam) * x)


def generator_gamma(x, rng):
    return np.sum(rng.gamma(x ** 2))


def test_other_random_draws_given_a_differentiated_value_are_refused():
    err = assert_refused(gamma_of_x, X, kind=errors.NoDerivativeRuleError, match="np.random.gamma")
    assert "reparameterisation" in str(err)
    assert_refused(poisson_of_x, X, kind=errors.NoDerivativeRuleError, match="poisson")
    with pytest.raises(errors.NoDerivativeRuleError, match="gamma"):  # known only when it runs
        srcgrad.grad(generator_gamma)(X.copy(), np.random.default_rng(0))


# ---- the mechanism: no silent zero through an argument without a derivative --------


def norm_with_active_order(x):
    return np.linalg.norm(X, ord=x[0] + 3.0)


def var_with_active_ddof(x):
    return np.var(x, ddof=x[0] * 0.0)


def complex_of_x(x):
    return np.real(complex(x[0], 1.0))


def test_a_parameter_without_a_derivative_given_a_differentiated_value_is_refused():
    assert_refused(norm_with_active_order, X, kind=errors.NoDerivativeRuleError, match="`ord`")
    assert_refused(var_with_active_ddof, X, kind=errors.NoDerivativeRuleError, match="`ddof`")


def test_a_class_without_a_rule_given_a_differentiated_value_is_refused():
    assert_refused(complex_of_x, X, kind=errors.UserCodeError)


def argmax_and_shape(x):
    i = np.argmax(x)
    return x[i] * np.size(x) + np.floor(x[0]) + len(x)


@OPT
def test_zero_derivative_functions_stay_accepted(optimize):
    check_gradient(argmax_and_shape, X, optimize)


# ---- integers: casts, writes, reductions -----------------------------------------------


def mean_of_cast(x):
    return np.mean(x.astype(int)) * np.sum(x)


def array_int_dtype(x):
    return np.sum(np.array(x * 3.0, dtype=int) * 1.5) + np.sum(np.asarray(x, dtype=np.float64) ** 2)


def write_into_int_array(x):
    c = np.zeros(3, dtype=int)
    c[0] = x[0] * 2.5
    return np.mean(c + 0.5) * x[1] + np.sum(c * x)


def write_into_int_array_in_loop(x):
    c = np.zeros(3, dtype=int)
    for i in range(3):
        c[i] = x[i] * 10.0
    return np.mean(c) * x[0]


INTEGER = [mean_of_cast, array_int_dtype, write_into_int_array, write_into_int_array_in_loop]


@OPT
@pytest.mark.parametrize("f", INTEGER, ids=[f.__name__ for f in INTEGER])
def test_values_rounded_to_integers_have_zero_derivative(f, optimize):
    x = np.array([1.33, 2.14, 0.77])  # away from the jumps of the rounding
    g = srcgrad.grad(f, optimize=optimize)(x.copy())
    np.testing.assert_allclose(g, numerical_grad(f, [x], 0), rtol=1e-6, atol=1e-6)


def test_the_fill_of_a_reductions_adjoint_is_float_for_an_integer_input():
    """``np.mean``'s adjoint of an integer array was ``np.full_like(a, g / n)``: 0."""
    a = np.arange(4)
    np.testing.assert_allclose(reductions.mean(1.0, 1.5, a), np.full(4, 0.25))
    np.testing.assert_allclose(reductions.sum(0.5, 6, a), np.full(4, 0.5))
    assert reductions.mean(np.float32(1.0), 1.5, np.zeros(4, np.float32)).dtype == np.float32


# ---- einsum in every form NumPy accepts ------------------------------------------------

M = np.array([[0.3, -1.2, 0.7], [1.1, 0.4, -0.5], [0.2, 0.9, -0.8]])


def einsum_three(x):
    return np.einsum('i,i,i->', x, x, x + 1.0)


def einsum_ellipsis(x):
    a = np.outer(x, x)[None]
    return np.sum(np.einsum('...ij,...jk->...ik', a, a))


def einsum_trace_times(x):
    return np.einsum('ii,i->', np.outer(x, x + 1.0), x)


def einsum_diagonal(x):
    return np.sum(np.einsum('ii->i', np.outer(x, x * 2.0)) ** 2)


def einsum_sublist(x):
    return np.sum(np.einsum(np.outer(x, x + 1.0), [0, 1], [1, 0]) * np.arange(9).reshape(3, 3))


def einsum_sublist_two(x):
    return np.sum(np.einsum(np.outer(x, x), [0, 1], x, [1], [0]) ** 2)


def einsum_sublist_ellipsis(x):
    return np.sum(np.einsum(np.outer(x, x), [Ellipsis, 0], x, [0]) ** 2)


def einsum_implicit(x):
    return np.sum(np.einsum('ij,kj', np.outer(x, x), np.outer(x + 1.0, x)) ** 2)


def einsum_summed_alone(x):
    return np.sum(np.einsum('ij,k->ik', np.outer(x, x), x) ** 2)


def _contract(a, b, c):
    return np.einsum('ij,jk,k->i', a, b, c)


def einsum_helper_loop(x):
    total = 0.0
    for i in range(2):
        total = total + np.sum(_contract(np.outer(x, x), np.outer(x, x * i), x) ** 2)
    return total


EINSUM = [einsum_three, einsum_ellipsis, einsum_trace_times, einsum_diagonal, einsum_sublist,
          einsum_sublist_two, einsum_sublist_ellipsis, einsum_implicit, einsum_summed_alone,
          einsum_helper_loop]


@OPT
@pytest.mark.parametrize("f", EINSUM, ids=[f.__name__ for f in EINSUM])
def test_einsum_every_form(f, optimize):
    check_gradient(f, X, optimize, atol=1e-5)


def einsum_sublists_from_a_variable(x):
    axes = [0, 1]
    return np.sum(np.einsum(np.outer(x, x), axes, [1, 0]))


def test_einsum_sublists_known_only_when_running_are_refused():
    assert_refused(einsum_sublists_from_a_variable, X, kind=errors.NoDerivativeRuleError, match="subscripts")


# ---- np.linalg.norm of matrices: every order, refused at compile time only if NumPy would --


def norm_two(x):
    return np.linalg.norm(np.outer(x, x + 1.0) + M, ord=2)


def norm_nuclear(x):
    return np.linalg.norm(np.outer(x, x + 1.0) + M, ord="nuc")


def norm_orders_in_a_loop(x):
    total = 0.0
    for order in (2, -2, "nuc", "fro", 1, -1, np.inf, -np.inf):
        total = total + np.linalg.norm(np.outer(x, x + 1.0) + M, ord=order)
    return total


def _vector_norm(v, p):
    return np.linalg.norm(v, ord=p)


NORMS = [norm_two, norm_nuclear, norm_orders_in_a_loop]


@OPT
@pytest.mark.parametrize("f", NORMS, ids=[f.__name__ for f in NORMS])
def test_matrix_norms(f, optimize):
    check_gradient(f, X, optimize, atol=1e-5)


def vector_norms(x):
    return _vector_norm(x + 2.0, 1) + _vector_norm(x, 3) + _vector_norm(x, -np.inf) + _vector_norm(x + 2.0, 0.5)


@OPT
def test_vector_norms_in_a_helper(optimize):
    check_gradient(vector_norms, X, optimize, atol=1e-5)


# ---- x ** y at a zero base ---------------------------------------------------------------


def power_of_scalars(x, y):
    return x ** y


def np_power_of_arrays(x, y):
    return np.sum(np.power(x, y))


@OPT
def test_power_with_a_zero_base_and_a_variable_exponent(optimize):
    """The exponent's adjoint ``ans log(x)`` is 0 where ``x == 0`` (JAX's and autograd's
    convention); the base's is NumPy's power: ``inf`` for ``d sqrt(x)`` at 0, never a crash."""
    grad = srcgrad.grad(power_of_scalars, wrt=(0, 1), optimize=optimize)
    assert grad(0.0, 2.0) == (0.0, 0.0)
    with np.errstate(divide="ignore"):
        assert grad(0.0, 0.5) == (np.inf, 0.0)
    assert grad(np.float32(0.0), np.float32(3.0)) == (0.0, 0.0)
    x, y = np.array([0.0, 1.5, 2.0]), np.array([2.0, 3.0, 0.5])
    gx, gy = srcgrad.grad(np_power_of_arrays, wrt=(0, 1), optimize=optimize)(x, y)
    np.testing.assert_allclose(gx, y * x ** (y - 1))
    np.testing.assert_allclose(gy, [0.0, 1.5 ** 3 * np.log(1.5), 2.0 ** 0.5 * np.log(2.0)])
    assert np.isfinite(gy).all()


def sqrt_by_power(x):
    return np.sum(x ** 0.5)


def test_a_literal_fractional_exponent_at_a_python_zero():
    with np.errstate(divide="ignore"):
        assert srcgrad.grad(lambda s: s ** 0.5)(0.0) == np.inf


# ---- np.r_ and np.c_ ---------------------------------------------------------------------


def r_pair(x):
    return np.sum(np.r_[x, x * 2.0] ** 2)


def r_with_scalar(x):
    return np.sum(np.r_[x, 1.0] * np.arange(4))


def r_with_slice(x):
    return np.sum(np.r_[x[0], x[1:], 0:3] ** 2)


def c_pair(x):
    return np.sum(np.c_[x, x * 2.0] ** 2 * np.arange(6).reshape(3, 2))


def c_matrix_and_column(x):
    return np.sum(np.c_[np.outer(x, x), x] ** 2)


def r_matrices(x):
    return np.sum(np.r_[np.outer(x, x), np.outer(x, x + 1.0)] @ x)


def _rows(a, b):
    return np.r_[a, b]


def r_in_helper_and_loop(x):
    total = 0.0
    for i in range(3):
        total = total + np.sum(_rows(x[i], x * i) ** 2)
    return total


INDEX_CONCAT = [r_pair, r_with_scalar, r_with_slice, c_pair, c_matrix_and_column, r_matrices,
                r_in_helper_and_loop]


@OPT
@pytest.mark.parametrize("f", INDEX_CONCAT, ids=[f.__name__ for f in INDEX_CONCAT])
def test_r_and_c_carry_the_gradient(f, optimize):
    check_gradient(f, X, optimize)


def r_with_directive(x):
    return np.sum(np.r_['0,2', x, x])


def r_slice_from_x(x):
    return np.sum(np.r_[x, 0.0:x[0] + 3.0])


def test_r_forms_without_a_rule_are_refused():
    assert_refused(r_with_directive, X, kind=errors.NoDerivativeRuleError)
    assert_refused(r_slice_from_x, X, kind=errors.NoDerivativeRuleError)


# ---- primitives known only when running (passed in): the same rules, the same refusals --


def einsum_passed_in(x, op):
    return np.sum(op('ij,jk,k->i', np.outer(x, x), np.outer(x, x + 1.0), x) ** 2)


def norm_passed_in(x, nrm):
    return nrm(x, x[0] + 3.0)


def test_a_primitive_passed_in_uses_its_rule_and_refuses_what_it_has_no_adjoint_for():
    g = srcgrad.grad(einsum_passed_in)(X.copy(), np.einsum)
    np.testing.assert_allclose(g, numerical_grad(lambda x: einsum_passed_in(x, np.einsum), [X.copy()], 0),
                               rtol=1e-6)
    with pytest.raises(errors.NoDerivativeRuleError, match="`ord`"):
        srcgrad.grad(norm_passed_in)(X.copy(), np.linalg.norm)


# ---- siblings: reductions in an integer dtype, literal sequences, forms refused -----------


def sum_in_int_dtype(x):
    return np.sum(x * 3.0, dtype=int) * x[0] + np.mean(x, dtype=np.float64)


def maximum_against_a_literal_tuple(x):
    return np.sum(np.maximum(x[0], (0.0, 1.0))) + np.sum(np.minimum((0.5, -0.5, 0.0), x))


@OPT
def test_reduction_dtype_and_literal_sequences(optimize):
    x = np.array([1.33, 2.14, 0.77])
    for f in (sum_in_int_dtype, maximum_against_a_literal_tuple):
        g = srcgrad.grad(f, optimize=optimize)(x.copy())
        np.testing.assert_allclose(g, numerical_grad(f, [x], 0), rtol=1e-6, atol=1e-6)


def linspace_with_step(x):
    return np.sum(np.linspace(x[0], x[1], 4, retstep=True)[0])


def test_linspace_retstep_is_refused_at_the_users_line():
    assert_refused(linspace_with_step, X, kind=errors.NoDerivativeRuleError, match="retstep")


def sum_of_a_list_display(x):
    return np.sum(np.power(x, 2.0) * 1.0) + np.sum([x[0], 2.0 * x[1]])


def test_a_list_display_given_to_a_rules_array_parameter_is_not_silently_zero():
    """``np.sum([x[0], 2 * x[1]])``: differentiated as ``np.array([...])`` or refused."""
    try:
        g = srcgrad.grad(sum_of_a_list_display)(X.copy())
    except errors.NoDerivativeRuleError as exc:
        assert "np.array" in str(exc)
    else:
        np.testing.assert_allclose(g, numerical_grad(sum_of_a_list_display, [X.copy()], 0), rtol=1e-6)


# ---- the same rules reached through a method --------------------------------------------


class Layer:
    def __init__(self, scale):
        self.scale = scale

    def mix(self, x):
        ramp = np.linspace(x[0], x[1], 3)
        filled = np.full_like(x, x[2] * self.scale)
        return np.einsum('i,i,i->', ramp, filled, x) + np.linalg.norm(np.outer(x, ramp), ord="nuc")

    def noisy(self, x):
        return np.sum(np.random.normal(x, self.scale * x[0] ** 2) ** 2) + np.sum(np.r_[x, x[1]] ** 2)


def through_methods(x):
    layer = LAYER
    total = 0.0
    for _ in range(2):
        total = total + layer.mix(x) + layer.noisy(x)
    return total


LAYER = Layer(0.5)


@OPT
def test_rules_reached_through_methods_in_a_loop(optimize):
    check_gradient(through_methods, X, optimize, atol=1e-5, reseed=_seed)


def zero_base_literal_factor(x, s):
    return np.sum((x * 0.0) ** s + x) + np.sum(np.power(x * 0.0, s)) + np.sum(0.0 ** s * x)


@OPT
def test_a_literal_zero_factor_has_no_derivative_even_where_the_adjoint_is_infinite(optimize):
    """The outside fuzzer's ``(x * 0.0) ** s``: the product is constant, gradient 1, not NaN."""
    with np.errstate(divide="ignore", invalid="ignore"):
        g = srcgrad.grad(zero_base_literal_factor, optimize=optimize)(X.copy(), 0.7)
    np.testing.assert_allclose(g, np.full(3, 1.0))


@srcgrad.custom_adjoint
def _squared_with_a_list_adjoint(x):
    return x ** 2


@_squared_with_a_list_adjoint.defadjoint
def _list_adjoint(ans_bar, ans, x):
    return [2 * x * ans_bar]  # (a list: not the adjoint of an array)


@pytest.mark.parametrize("uses", [1, 2])
def test_a_custom_adjoint_that_is_not_an_array_is_refused(uses):
    def f(x):
        y = _squared_with_a_list_adjoint(x)
        return np.sum(y * uses if uses == 1 else y + _squared_with_a_list_adjoint(x))
    with pytest.raises(errors.NoDerivativeRuleError, match="came out (as a list|of shape)"):
        srcgrad.grad(f)(np.array([0.5, 1.5]))
