"""Iterators and lambdas as values: ``next(g)`` on a generator a name holds (collected as
a list, read at a counter), ``it = iter(X); next(it); for x in it`` (what the iterator has
left), ``sorted(zip(...))`` / ``list(enumerate(...))`` (the list of tuples), a module's dict
of lambdas called by name (``ACTS[name](x)``: the lambda found by its column), and
``functools.partial(lambda ...)`` called, reduced or mapped."""
import functools

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad

X = np.array([[0.5, -1.0, 0.25], [1.5, 0.3, -0.7], [-0.2, 0.8, 1.1], [0.9, -0.4, 0.6], [0.1, 0.2, 0.3]])
ACTS = {"relu": lambda v: np.maximum(v, 0), "tanh": np.tanh, "sig": lambda v: 1 / (1 + np.exp(-v))}


def next_of_a_generator_expression(w):
    g = (np.sum(x * w) for x in X)
    a = next(g)
    b = next(g)
    c = next(g)
    return a * b + c


def _rows(xs, w):
    for x in xs:
        yield np.tanh(x @ w)


def next_in_a_loop(w):
    g = _rows(X, w)
    total = 0.0
    for i in range(2):
        v = next(g)
        if i > 0:
            next(g)  # (skipped)
        total = total + v * (i + 1)
    return total


def iterator_then_the_rest(w):
    it = iter(X)
    first = next(it)
    return np.sum(first * w) + sum(np.sum(x * w ** 2) for x in it)


def sorted_pairs(w):
    pairs = sorted(zip(X @ w, range(len(X))), key=lambda t: t[0], reverse=True)
    return sum(v * (i + 1) for v, i in pairs[:3])


def enumerated_list(w):
    ps = list(enumerate(X @ w))
    return sum(v * i for i, v in ps)


def enumerated_and_zipped_alone(w):
    # (nothing else here to lower: the list of tuples all the same, not a `zip` kept as an iterator)
    ps = list(enumerate(X @ w))
    qs = list(zip(["a", "b"], [w, np.sin(w)]))
    return ps[1][1] * ps[2][1] + np.sum(qs[0][1] * qs[1][1])


def activations_by_name(w, names=("tanh", "relu", "sig")):
    h = X
    for a in names:
        h = ACTS[a](h * w)
    return np.sum(h)


def partial_of_a_lambda(w):
    f = functools.partial(lambda a, b, c=1.0: a * b + c, c=0.5)
    return np.sum(f(X, w) ** 2)


def reduced_partial_of_a_lambda(w):
    return functools.reduce(functools.partial(lambda s, x, k: s + k * np.sum(x * w), k=2.0), X, 0.0)


def mapped_partial_of_a_lambda(w):
    return sum(map(functools.partial(lambda x, k: np.sum(x * w) * k, k=3.0), X))


class Net:
    def __init__(self, act):
        self.act = act

    def __call__(self, w):
        g = (ACTS[self.act](x * w) for x in X)
        first = next(g)
        second = next(g)
        return np.sum(first * second)


def as_a_method(w):
    return Net("sig")(w)


CASES = [next_of_a_generator_expression, next_in_a_loop, iterator_then_the_rest, sorted_pairs, enumerated_list,
         enumerated_and_zipped_alone,
         activations_by_name, partial_of_a_lambda, reduced_partial_of_a_lambda, mapped_partial_of_a_lambda,
         as_a_method]


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("f", CASES, ids=[f.__name__ for f in CASES])
def test_gradient_matches_finite_differences(f, optimize):
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(f, optimize=optimize)(w), numerical_grad(f, (w,), 0),
                               rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("f", CASES, ids=[f.__name__ for f in CASES])
def test_float32_and_forward_mode(f):
    w, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.5, -0.2])
    got = srcgrad.grad(f)(w.astype(np.float32))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, numerical_grad(f, (w,), 0), rtol=2e-3, atol=1e-4)
    _, tangent = srcgrad.jvp(f)(w, v)
    np.testing.assert_allclose(tangent, numerical_grad(f, (w,), 0) @ v, rtol=1e-6, atol=1e-8)


def next_then_the_rest_of_a_generator(w):
    g = (np.sum(x * w) for x in X)
    a = next(g)
    return a + sum(g)


def test_a_generator_read_by_next_and_otherwise_is_refused():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="generator expression"):
        srcgrad.grad(next_then_the_rest_of_a_generator)(np.ones(3))


def next_in_a_nested_function(w):
    g = (np.sum(x * w) for x in X)

    def take():
        return next(g)
    a = take()
    b = take()
    return a * b


def test_next_in_a_nested_function_is_refused_not_read_at_a_stale_counter():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="generator expression"):
        srcgrad.grad(next_in_a_nested_function)(np.ones(3))
