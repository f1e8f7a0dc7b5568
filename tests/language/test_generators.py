"""Generator functions (`yield`) consumed by `for`, `list`, `sum` and `zip` in a differentiated
function: collected (the list of what they yield), so each yielded value's adjoint reaches what
it was computed from.  Against central finite differences: in a loop, a helper, a method, a
nested generator, `yield from`, float32; a `while True:` generator is refused."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import check_gradient

RS = np.random.RandomState(0)
PARAMS = [(RS.randn(2, 3) * 0.5, RS.randn(3) * 0.1), (RS.randn(3, 1) * 0.5, RS.randn(1) * 0.1)]
X = RS.randn(4, 2)


def layers(params):
    for W, b in params:
        yield W, b


def mlp(params, x):
    for W, b in layers(params):
        x = np.tanh(x @ W + b)
    return np.sum(x ** 2)


def unpack(weights, shapes):
    """autograd's examples: the layers of a flat parameter vector, the vector shrinking."""
    for m, n in shapes:
        yield weights[:m * n].reshape((m, n))
        weights = weights[m * n:]


def from_a_vector(weights):
    x = np.ones((1, 2))
    for W in unpack(weights, [(2, 3), (3, 1)]):
        x = np.sin(x @ W)
    return np.sum(x)


def powers(w, n):
    k = 0
    while k < n:
        yield w ** (k + 1)
        k += 1


def consumed_by_sum_list_and_zip(w):
    total = sum(np.sum(p) for p in powers(w, 3))
    first, second = list(powers(w, 2))
    paired = 0.0
    for a, b in zip(powers(w, 3), powers(np.cos(w), 3)):
        paired = paired + np.sum(a * b)
    return total + np.sum(first * second) + paired


def chained(w):
    yield from powers(w, 2)
    yield np.sin(w)


def yielded_from(w):
    return sum(np.sum(v) for v in chained(w))


def nested_generator(w):
    def scaled():
        for i in range(3):
            yield w * (i + 1.0)
    t = 0.0
    for v in scaled():
        t = t + np.sum(v ** 2)
    return t


class Model:
    def __init__(self, params):
        self.params = params

    def layers(self):
        for W, b in self.params:
            yield W, b

    def loss(self, x):
        for W, b in self.layers():
            x = np.tanh(x @ W + b)
        return np.sum(x)


def model_loss(params, x):
    return Model(params).loss(x)


def test_a_generator_of_layers_in_a_loop():
    check_gradient(mlp, PARAMS, X)
    check_gradient(mlp, PARAMS, X, index=1)


def test_a_generator_over_a_shrinking_vector():
    check_gradient(from_a_vector, RS.randn(9))


@pytest.mark.parametrize("f", [consumed_by_sum_list_and_zip, yielded_from, nested_generator])
def test_generators_consumed_by_sum_list_zip(f):
    check_gradient(f, np.array([0.4, -1.3]))


def test_a_generator_method():
    check_gradient(model_loss, PARAMS, X)


def test_generators_in_float32():
    p32 = [(W.astype(np.float32), b.astype(np.float32)) for W, b in PARAMS]
    g = srcgrad.grad(mlp)(p32, X.astype(np.float32))
    assert g[0][0].dtype == np.float32
    np.testing.assert_allclose(g[0][0], srcgrad.grad(mlp)(PARAMS, X)[0][0], rtol=1e-4, atol=1e-6)


def test_exact_values():
    w = np.array([2.0])
    # d/dw (w + w^2 + sin w) = 1 + 2w + cos w
    np.testing.assert_allclose(srcgrad.grad(yielded_from)(w), [1 + 2 * 2.0 + np.cos(2.0)])


def endless(w):
    while True:
        yield w


def reads_an_endless_generator(w):
    total = 0.0
    for v, _ in zip(endless(w), range(3)):
        total = total + np.sum(v)
    return total


def test_an_endless_generator_is_refused():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="may never end"):
        srcgrad.grad(reads_an_endless_generator)(np.ones(2))


def _layers(x):
    for k in range(3):
        yield x * k


def test_a_generator_read_twice_is_refused():
    def f(x):
        gen = _layers(x)
        return sum(np.sum(v) for v in gen) + sum(np.sum(v ** 2) for v in gen)  # (the second: empty)
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="holds a generator, which is read once"):
        srcgrad.grad(f)(np.array([0.5, -1.0]))


def test_a_generator_read_in_each_iteration_is_refused():
    def f(x):
        gen = _layers(x)
        total = 0.0
        for _ in range(2):
            total = total + sum(np.sum(v) for v in gen)
        return total
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="read once"):
        srcgrad.grad(f)(np.array([0.5, -1.0]))


def test_a_generator_a_name_holds_read_once_is_right():
    def f(x):
        gen = _layers(x)
        total = 0.0
        for v in gen:
            total = total + np.sum(v ** 2)
        return total
    x = np.array([0.5, -1.0])
    np.testing.assert_allclose(srcgrad.grad(f)(x), 10.0 * x)


# ---- a `return` in a generator ends the iteration -------------------------------------------

def _until_large(X, w, limit):
    for x in X:
        v = np.sum(np.sin(x * w))
        if v > limit:
            return  # (what was yielded so far is all the consumer sees)
        yield v


def _until_in_nested_loops(X, w):
    for k in range(2):
        for x in X:
            v = np.sum(x * w) * (k + 1)
            if v > 1.0:
                return
            yield v
        yield -np.sum(w ** 2)


class _Stream:
    def __init__(self, X):
        self.X = X

    def rows(self, w):
        for x in self.X:
            if np.sum(x) > 1.5:
                return
            yield np.tanh(x * w)


def returns_on_the_data(w, X):
    return sum(_until_large(X, w, 0.5)) + 0.0


def returns_in_nested_loops(w, X):
    total = 0.0
    for v in _until_in_nested_loops(X, w):
        total = total + v ** 2
    return total


def returns_in_a_method(w, X):
    return sum(np.sum(h ** 2) for h in _Stream(X).rows(w)) + 0.0


RETURNING_X = np.array([[0.2, -0.1], [0.3, 0.4], [2.0, -0.3], [-0.5, 0.2]])


@pytest.mark.parametrize("f", [returns_on_the_data, returns_in_nested_loops, returns_in_a_method])
def test_a_return_inside_a_generators_loop_ends_it(f):
    w = np.array([0.7, -0.4])
    check_gradient(f, w, RETURNING_X)
    g32 = srcgrad.grad(f)(w.astype(np.float32), RETURNING_X.astype(np.float32))
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, srcgrad.grad(f)(w, RETURNING_X), rtol=1e-4, atol=1e-6)
    v = np.array([1.0, 0.5])
    _, tangent = srcgrad.jvp(f)(w, RETURNING_X, v)
    assert tangent == pytest.approx(srcgrad.grad(f)(w, RETURNING_X) @ v, rel=1e-6, abs=1e-9)


def test_a_return_stops_before_the_large_values():
    w = np.array([0.7, -0.4])
    seen = list(_until_large(RETURNING_X, w, 0.5))
    assert 0 < len(seen) < len(RETURNING_X)  # (the case is one that returns early)
    assert returns_on_the_data(w, RETURNING_X) == pytest.approx(sum(seen))
