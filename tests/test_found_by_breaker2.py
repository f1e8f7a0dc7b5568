"""Defects found by an outside tester of batched jacfwd/hessian, the desugaring pass,
the new NumPy rules and the array methods generated code calls: each checked against
central finite differences in float64 (fixed), or marked xfail."""
import numpy as np
import pytest

import srcgrad

X23 = np.array([[0.5, -0.7, 1.3], [0.2, 0.9, -1.1]])


def jacobian_fd(f, x, eps=1e-6):
    """Central differences: shape f(x).shape + x.shape."""
    x = np.asarray(x, dtype=np.float64)
    y0 = np.asarray(f(x))
    J = np.zeros(y0.shape + x.shape)
    for idx in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[idx] = eps
        J[(Ellipsis,) + idx] = (np.asarray(f(x + step)) - np.asarray(f(x - step))) / (2 * eps)
    return J


def method_of_transposed(x):
    return x.T.reshape(3, 2)


def method_of_transposed_summed(x):
    a = np.concatenate([x, x ** 2], axis=0)
    return np.sum(a.T.reshape(3, 4)) * x


@pytest.mark.parametrize("f", [method_of_transposed, method_of_transposed_summed])
def test_array_method_on_a_value_of_unknown_kind_keeps_its_tangent(f):
    # x.T.reshape(...): the method is dispatched at run time; its receiver's tangent was
    # taken for a callable's own (no tangent) and dropped: jvp and jacfwd were zero.
    J = jacobian_fd(f, X23)
    v = np.linspace(0.3, 1.1, 6).reshape(2, 3)
    np.testing.assert_allclose(srcgrad.jvp(f)(X23, v)[1], np.tensordot(J, v, axes=2), atol=1e-6)
    for chunk in (None, 1, 4):
        np.testing.assert_allclose(srcgrad.jacfwd(f, chunk_size=chunk)(X23), J, atol=1e-6)


def inserts_an_element(x):
    return np.insert(x, 2, x[0] * 3)


def appends_an_element(x):
    return np.append(x, x[0] * 2) * np.sum(x)


def linspace_from_an_element(x):
    return np.linspace(x[0], 3.0, 4) * x[1]


@pytest.mark.parametrize("f", [inserts_an_element, appends_an_element, linspace_from_an_element])
@pytest.mark.parametrize("chunk", [None, 1, 2])
def test_batched_tangent_rule_given_a_scalar_column(f, chunk):
    # rt.batch_each handed a tangent rule one column of a batched scalar as np.float64,
    # which the rule's is_constant(values_dot) took for no tangent: jacfwd dropped it.
    x = np.array([0.5, -0.7, 1.3])
    np.testing.assert_allclose(srcgrad.jacfwd(f, chunk_size=chunk)(x), jacobian_fd(f, x), atol=1e-6)


def calls_a_given_function(s, fn):
    return np.sum(fn(s, 3.0, 0.5) ** 2)


def appends_with_a_given_function(s, fn):
    return np.sum(fn(np.ones(3), s * 2.0) ** 2)


@pytest.mark.parametrize("f, fn", [(calls_a_given_function, np.arange), (appends_with_a_given_function, np.append),
                                   (appends_with_a_given_function, lambda a, v: np.insert(a, 1, v))])
def test_tangent_rule_reached_at_run_time_with_a_python_float_tangent(f, fn):
    # jvp of a primitive known only when it runs (dispatch.jvp_call): a tangent that is a
    # Python float was taken for no tangent (np.arange's: silently zero; np.append's: a crash).
    s = 0.7
    want = (f(s + 1e-6, fn) - f(s - 1e-6, fn)) / 2e-6
    value, tangent = srcgrad.jvp(f)(s, fn, 1.0)
    np.testing.assert_allclose(value, f(s, fn))
    np.testing.assert_allclose(tangent, want, rtol=1e-6)
    np.testing.assert_allclose(srcgrad.grad(f)(s, fn), want, rtol=1e-6)


NAN_AT = np.array([False, True, False, False, True, False])


def nansum_of_squares(x):
    return np.nansum(np.where(NAN_AT, np.nan, x) ** 2)


def test_jvp_of_nansum_skips_the_tangents_of_nans():
    """At a NaN that nansum skips, the tangent is 0 * nan (from `** 2`): the reduction's
    tangent leaves out the elements whose adjoint is zero, as grad's where-adjoint does."""
    x = np.array([0.5, -0.7, 1.3, 0.2, 0.9, -1.1])
    want = jacobian_fd(nansum_of_squares, x)
    np.testing.assert_allclose(srcgrad.grad(nansum_of_squares)(x), want, atol=1e-6)
    np.testing.assert_allclose(srcgrad.jacfwd(nansum_of_squares)(x), want, atol=1e-6)


def sums_a_generator_with_a_start_keyword(x):
    return sum((x[j] ** 2 for j in range(3)), start=x[0])


def test_sum_of_a_generator_with_start_keyword():
    x = np.array([0.5, -0.7, 1.3])
    np.testing.assert_allclose(srcgrad.grad(sums_a_generator_with_a_start_keyword)(x),
                               jacobian_fd(sums_a_generator_with_a_start_keyword, x), atol=1e-6)


def largest_of_a_generator(x):
    return max(v * v for v in x)


def smallest_of_a_generator_in_a_loop(x):
    s = 0.0
    for k in range(1, 3):
        s = s + min(np.sin(v * k) for v in x)
    return s


def largest_layer_output(x, ws):
    return max(np.sum(np.tanh(w @ x)) for w in ws)


class _Layers:
    def __init__(self, ws):
        self.ws = ws

    def loss(self, x):
        return max(np.sum(w @ x) for w in self.ws) - min(np.sum(w * x) for w in self.ws)


@pytest.mark.parametrize("f", [largest_of_a_generator, smallest_of_a_generator_in_a_loop],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_max_and_min_of_a_generator(f, dtype):
    x = np.array([0.5, -0.7, 1.3], dtype=dtype)
    g = srcgrad.grad(f)(x)
    assert g.dtype == dtype
    np.testing.assert_allclose(g, jacobian_fd(f, x.astype(np.float64)), rtol=1e-4, atol=1e-5)


def test_max_of_a_generator_over_layers_in_a_helper_and_a_method():
    rng = np.random.default_rng(3)
    ws = [rng.normal(size=(3, 3)) for _ in range(3)]
    x = rng.normal(size=3)
    g = srcgrad.grad(lambda x: largest_layer_output(x, ws) * 2.0)(x)
    np.testing.assert_allclose(g, jacobian_fd(lambda x: largest_layer_output(x, ws) * 2.0, x), rtol=1e-6)
    model = _Layers(ws)
    g = srcgrad.grad(_Layers.loss, wrt=1)(model, x)
    np.testing.assert_allclose(g, jacobian_fd(model.loss, x), rtol=1e-6, atol=1e-8)
