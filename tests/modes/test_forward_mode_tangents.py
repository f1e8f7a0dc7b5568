"""Forward mode (jvp, batched jacfwd) keeps every tangent: an array method on a value of
unknown kind, a tangent rule given one column of a batched scalar or a Python float tangent,
nansum skipping the tangents of NaNs.  Each checked against central finite differences in
float64."""

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


def index_named_as_a_later_item(w):
    xs = [w, w * 2.0]
    t = 0.0
    for k in range(2):
        t = t + xs[k] * (k + 1.0)
    for k in xs:  # (`k` carried out of this loop: the name varies, the index above does not)
        t = t + k * w
    return np.sum(t)


def index_named_as_a_later_key(w):
    d = {}
    for k in range(2):
        d[k] = w * (k + 1.0)
    t = 0.0
    for k in d:
        t = t + d[k] * w
    return np.sum(t)


@pytest.mark.parametrize("f", [index_named_as_a_later_item, index_named_as_a_later_key])
def test_a_loop_index_named_as_a_value_that_varies_has_a_zero_tangent(f):
    # (`k_dot` was read in the first loop and never bound: NameError)
    w = np.array([0.3, -0.7, 1.1])
    expected = jacobian_fd(f, w)
    _, tangent = srcgrad.jvp(f)(w, np.ones(3))
    assert tangent == pytest.approx(expected.sum(), rel=1e-6)
    np.testing.assert_allclose(srcgrad.jacfwd(f)(w), expected, rtol=1e-6, atol=1e-8)
