"""`map`, `filter`, `functools.reduce` and `functools.partial` as autograd's users write
them (`sum(map(partial(loss, params), data))`): lowered to comprehensions and loops
(desugar), so each item's adjoint reaches what it was computed from.  Gradients against
central finite differences, in a loop, a helper, a method and float32."""
from __future__ import annotations

import functools
from functools import partial, reduce

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import check_gradient

DATA = [np.array([1.0, 2.0]), np.array([0.5, -0.1]), np.array([-0.3, 0.7])]


def energy(w, x, scale=1.0):
    return scale * np.sum(np.tanh(w * x))


def map_of_a_partial(w):
    return sum(map(partial(energy, w), DATA))


def map_of_a_partial_with_keywords(w):
    return sum(map(partial(energy, x=DATA[0], scale=2.0), [w, w * w]))


def map_of_a_lambda(w):
    return sum(map(lambda d: energy(w, d), DATA))


def map_over_two_lists(w):
    return sum(map(lambda a, b: np.sum(a * b * w), DATA, DATA[::-1]))


def list_of_a_map(w):
    return np.sum(np.stack(list(map(np.sin, [w, 2.0 * w, w ** 2]))))


def map_of_a_partial_with_a_computed_argument(w):
    return sum(map(partial(energy, np.cos(w)), DATA))


def filtered(w):
    kept = list(filter(lambda v: np.sum(v) > 0.0, [w * d for d in DATA]))
    return np.sum(kept[0] * kept[-1])


def reduced_with_a_start(w):
    return reduce(lambda total, d: total * energy(w, d), DATA, 1.0)


def reduced_without_a_start(w):
    return functools.reduce(lambda a, b: a + b, map(lambda d: energy(w, d) ** 2, DATA))


def reduced_products(w):
    return np.sum(reduce(np.multiply, [w, np.sin(w), w + 1.0]))


def _total(w, data):
    return sum(map(partial(energy, w), data))


def in_a_helper(w):
    return _total(w, DATA) * _total(2.0 * w, DATA[:2])


def in_a_loop(w):
    out = 0.0
    for k in range(3):
        out = out + sum(map(lambda d: energy(w, d, scale=k + 1.0), DATA[k:]))
    return out


class Model:
    def __init__(self, w):
        self.w = w

    def loss(self, data):
        return sum(map(partial(energy, self.w), data)) + reduce(lambda a, d: a + np.sum(d * self.w), data, 0.0)


FUNCTIONS = [map_of_a_partial, map_of_a_partial_with_keywords, map_of_a_lambda, map_over_two_lists,
             list_of_a_map, map_of_a_partial_with_a_computed_argument, filtered, reduced_with_a_start,
             reduced_without_a_start, reduced_products, in_a_helper, in_a_loop]


@pytest.mark.parametrize("f", FUNCTIONS)
def test_each_items_adjoint_reaches_its_source(f):
    check_gradient(f, np.array([0.4, -1.3]))


def test_as_a_method():
    check_gradient(lambda w: Model(w).loss(DATA), np.array([0.4, -1.3]))


@pytest.mark.parametrize("f", [map_of_a_partial, map_over_two_lists, reduced_without_a_start, in_a_loop])
def test_in_float32(f):
    w = np.array([0.4, -1.3], np.float32)
    g = srcgrad.grad(f)(w)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, srcgrad.grad(f)(w.astype(np.float64)), rtol=1e-5)


def test_exact_values():
    np.testing.assert_array_equal(srcgrad.grad(lambda w: sum(map(lambda v: 3.0 * np.sum(v), [w, w])))(np.ones(2)),
                                  [6.0, 6.0])
    np.testing.assert_array_equal(srcgrad.grad(lambda w: reduce(lambda a, b: a * b, [w, w, 2.0]) @ np.ones(2))(
        np.array([1.0, 3.0])), [4.0, 12.0])


def test_forward_mode():
    w, v = np.array([0.4, -1.3]), np.array([1.0, -2.0])
    for f in (map_of_a_partial, reduced_with_a_start, filtered):
        _, tangent = srcgrad.jvp(f)(w, v)
        np.testing.assert_allclose(tangent, np.dot(srcgrad.grad(f)(w), v), rtol=1e-12)


def test_partial_arguments_are_evaluated_once():
    calls = []

    def counted(w):
        calls.append(1)
        return w * 2.0

    def f(w):
        return sum(map(partial(energy, counted(w)), DATA))
    srcgrad.grad(f)(np.array([0.4, -1.3]))
    assert len(calls) == 1


# ---- a map or filter kept as an iterator: Python reads it lazily and once ----------------

def _square(v):
    return v * v


def map_read_twice(w):
    m = map(_square, [w, 2.0 * w])
    return sum(np.sum(v) for v in m) + 10.0 * sum(np.sum(v) for v in m)  # (the second: empty)


def map_read_after_a_change(w):
    k = 1.0
    m = map(lambda v: v * k, [w, w])
    k = 3.0  # (a lazy map sees it)
    return np.sum(sum(m))


def filter_kept(w):
    it = filter(lambda v: np.sum(v) > -10.0, [w, w * w])
    return np.sum(sum(it)) + np.sum(sum(it))


@pytest.mark.parametrize("f", [map_read_twice, filter_kept])
def test_a_map_kept_as_an_iterator_is_refused(f):
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="kept as an iterator|Lambda"):
        srcgrad.grad(f)(np.array([0.4, -1.3]))


def test_a_map_kept_and_read_once_is_read_lazily():
    # (written where it is read: its lambda sees `k = 3.0`, as Python's lazy map does)
    g = srcgrad.grad(map_read_after_a_change)(np.array([0.4, -1.3]))
    np.testing.assert_allclose(g, [6.0, 6.0])
    check_gradient(map_read_after_a_change, np.array([0.4, -1.3]))


def test_the_refusal_advice_compiles():
    def advised(w):
        return sum(np.sum(v) for v in list(map(_square, [w, 2.0 * w])))
    check_gradient(advised, np.array([0.4, -1.3]))


# ---- a partial made in the function, then called -----------------------------------------

def partial_called(w):
    g = partial(energy, x=DATA[0], scale=2.0)
    return g(w) + g(w * w, scale=0.5)  # (a call's keyword wins)


def partial_of_a_differentiated_value(w):
    h = partial(energy, w)
    return sum(h(d) for d in DATA)


def partial_given_to_map(w):
    g = functools.partial(energy, scale=3.0)
    return sum(map(g, [w, w * w], DATA[:2]))


def partial_in_a_loop(w):
    out = 0.0
    for k in range(2):
        g = partial(energy, np.cos(w) * (k + 1.0))
        out = out + g(DATA[k])
    return out


@pytest.mark.parametrize("f", [partial_called, partial_of_a_differentiated_value, partial_given_to_map,
                               partial_in_a_loop])
def test_a_partial_made_here_and_called(f):
    check_gradient(f, np.array([0.4, -1.3]))


# (called inside a lambda or a nested def: the call there is rewritten too, and reads the
# partial's bound arguments, which lambda lifting passes in; it was a NameError)

X = np.array([[0.3, -1.1], [0.8, 0.2], [-0.5, 0.9]])


def partial_of_numpy_in_a_lambda(w):
    p = functools.partial(np.dot, X)
    g = lambda v: np.tanh(p(v))  # noqa: E731
    return np.sum(g(w))


def partial_of_a_helper_in_a_lambda(w):
    p = partial(energy, X[0])
    g = lambda v: p(v) ** 2  # noqa: E731
    return g(w) + g(2.0 * w)


def partial_with_keywords_in_a_lambda(w):
    p = partial(energy, scale=2.0)
    g = lambda v: p(v, X[1]) + p(v, x=X[2], scale=0.5)  # noqa: E731
    return g(w)


def partial_of_a_differentiated_value_in_a_lambda(w):
    p = partial(energy, np.sin(w), scale=w[0])
    g = lambda v: p(v) * 3.0  # noqa: E731
    return g(X[0]) + sum(map(g, [X[1], w]))


def partial_in_a_nested_def(w):
    p = partial(energy, w)

    def inner(v):
        q = lambda t: p(t) * 2.0  # noqa: E731
        return q(v) + p(v)
    return inner(X[0]) + inner(X[1])


def partial_in_a_lambda_in_a_loop(w):
    p = functools.partial(np.dot, X)
    total = 0.0
    for k in range(3):
        g = lambda v: np.sum(np.tanh(p(v)) * (k + 1.0))  # noqa: E731
        total = total + g(w * k)
    return total


def _partial_helper(w, x):
    p = partial(energy, x)
    g = lambda v: p(v, scale=3.0)  # noqa: E731
    return g(w)


def partial_in_a_lambda_in_a_helper(w):
    return _partial_helper(w, X[0]) * _partial_helper(w * w, X[1])


class PartialModel:
    def __init__(self, w):
        self.w = w

    def loss(self, x):
        p = partial(energy, scale=2.0)
        g = lambda v: p(self.w, v)  # noqa: E731
        return g(x[0]) + g(x[1])


PARTIALS_IN_LAMBDAS = [partial_of_numpy_in_a_lambda, partial_of_a_helper_in_a_lambda,
                       partial_with_keywords_in_a_lambda, partial_of_a_differentiated_value_in_a_lambda,
                       partial_in_a_nested_def, partial_in_a_lambda_in_a_loop, partial_in_a_lambda_in_a_helper]


@pytest.mark.parametrize("f", PARTIALS_IN_LAMBDAS)
def test_a_partial_called_inside_a_lambda(f):
    check_gradient(f, np.array([0.4, -1.3]))


def test_a_partial_called_inside_a_lambda_as_a_method():
    check_gradient(lambda w: PartialModel(w).loss(X), np.array([0.4, -1.3]))


@pytest.mark.parametrize("f", PARTIALS_IN_LAMBDAS)
def test_a_partial_called_inside_a_lambda_in_float32(f):
    w = np.array([0.4, -1.3], np.float32)
    g = srcgrad.grad(f)(w)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, srcgrad.grad(f)(w.astype(np.float64)), rtol=1e-4)


def test_a_partial_called_inside_a_lambda_in_forward_mode():
    w, v = np.array([0.4, -1.3]), np.array([1.0, -2.0])
    for f in PARTIALS_IN_LAMBDAS:
        _, tangent = srcgrad.jvp(f)(w, v)
        np.testing.assert_allclose(tangent, np.dot(srcgrad.grad(f)(w), v), rtol=1e-12)


def test_a_partial_of_numpy_calls_the_primitive():
    # (a module's attribute is read again at the call: `np.dot(...)`, which has a rule)
    assert "np.dot(" in srcgrad.source(srcgrad.grad(partial_of_numpy_in_a_lambda), np.array([0.4, -1.3]))


def _other_energy(w, x, scale=1.0):
    return scale * np.sum(np.cos(w * x)) * 3.0


def partial_of_a_name_bound_again(w):
    f = energy
    p = partial(f, w)
    f = _other_energy  # (the partial keeps `energy`)
    return p(X[0]) + f(w, X[1])


def test_a_partial_keeps_its_function_when_the_name_is_bound_again():
    # (the call read the name again: `_other_energy`'s gradient, silently)
    check_gradient(partial_of_a_name_bound_again, np.array([0.4, -1.3]))


def test_a_partial_used_other_than_by_calling_it_stays_a_partial():
    def f(w):
        g = partial(energy, w)
        fs = [g]  # (kept in a list: the object itself, holding `w`)
        return fs[0](DATA[0])
    with pytest.raises(srcgrad.errors.SrcgradError):
        srcgrad.grad(f)(np.array([0.4, -1.3]))


def test_bools_and_arrays_in_operators():
    def f(w):
        return any([True, False]) + np.sum(w ** 2) * (np.sum(w) > 0)
    np.testing.assert_allclose(srcgrad.grad(f)(np.array([0.4, 1.3])), 2 * np.array([0.4, 1.3]))
