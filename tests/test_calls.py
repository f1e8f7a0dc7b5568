"""Calls to the user's own code: module-level functions, recursion, functions
passed as arguments, keyword arguments and defaults, closures, callable
objects and methods, weight sharing and a depth drawn at random.

Each is checked against central finite differences.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

import srcgrad
from conftest import numerical_grad


def layer(x, w):
    return np.maximum(x @ w, 0)


def shared_layer_net(x, w1, w2, y):
    h = layer(x, w1)
    for i in range(2):
        h = layer(h, w2)
    return np.sum((h - y) ** 2)


def power_by_recursion(x, n):
    if n <= 1:
        y = x
    else:
        y = x * power_by_recursion(x, n - 1)
    return y


def calls_recursive(x):
    return np.sum(power_by_recursion(x, 3))


def apply_twice(f, x):
    return np.sum(f(f(x)) * 2)


def act(z):
    return np.tanh(z) + 0.1 * z


def scaled(x, w, scale=2.0, shift=0.0):
    return x * w * scale + shift


def keywords_and_defaults(x, w):
    return np.sum(scaled(x, w) + scaled(x, w=w, scale=0.5, shift=1.0) ** 2)


def make_affine(bias):
    def affine(x, w):
        return x @ w + bias  # `bias` is captured: a constant, no gradient
    return affine


AFFINE = make_affine(np.array([0.5, -0.5]))


def uses_closure(x, w):
    return np.sum(AFFINE(x, w) ** 2)


class Scale:
    def __init__(self, factor):
        self.factor = factor

    def __call__(self, x):
        return x * self.factor

    def twice(self, x):
        return self(x) * 2


def calls_object(s, x):
    return np.sum(s(x) ** 2 + s.twice(x))


def dynamic_depth(x, w_in, w_mid, w_out):
    """The tutorial's dynamic net: the middle layer is applied 0-3 times."""
    h = np.maximum(x @ w_in, 0)
    for _ in range(random.randint(0, 3)):
        h = np.maximum(h @ w_mid, 0)
    y = h @ w_out
    return np.sum(y**2)


soft = lambda z: np.tanh(z) + 0.1 * z  # noqa: E731 - a lambda on purpose


rng = np.random.default_rng(3)
X = rng.standard_normal((4, 3))
W = rng.standard_normal((3, 2))


CASES = [
    (shared_layer_net, (X, rng.standard_normal((3, 5)), rng.standard_normal((5, 5)) * 0.5,
                        rng.standard_normal((4, 5))), (1, 2)),
    (calls_recursive, (X,), (0,)),
    (apply_twice, (act, X), (1,)),
    (apply_twice, (np.tanh, X), (1,)),
    (keywords_and_defaults, (X[:, :2], X[:, 1:] + 1), (0, 1)),
    (uses_closure, (X, W), (0, 1)),
    (calls_object, (Scale(1.5), X), (1,)),
    (apply_twice, (soft, X), (1,)),
    (apply_twice, (lambda z: z**3 - z, X * 0.3), (1,)),
]


@pytest.mark.parametrize("fn, args, wrt", CASES, ids=[
    "weight_sharing", "recursion", "function_argument", "primitive_argument",
    "keywords_defaults", "closure", "callable_object_and_method", "lambda", "inline_lambda"])
def test_calls_match_finite_differences(fn, args, wrt):
    grads = srcgrad.grad(fn, wrt=wrt)(*args)
    for i, g in zip(wrt, grads):
        np.testing.assert_allclose(g, numerical_grad(fn, args, i), rtol=1e-6, atol=1e-7)


def test_shared_layer_accumulates_into_one_gradient():
    code = srcgrad.source(srcgrad.grad(shared_layer_net, wrt=(1, 2)), *CASES[0][1])
    # The layer known at compile time is called through its compiled vjp, by name.
    assert "h_2, h_2_pullback = layer_vjp(h, w2)" in code
    assert "h, h_pullback = layer_vjp_w(x, w1)" in code  # only w1 needs an adjoint there
    assert "w2_bar += " in code


def test_random_depth_is_drawn_once_and_replayed():
    x, w_in, w_mid, w_out = X, W, rng.standard_normal((2, 2)), rng.standard_normal((2, 3))
    for seed in range(6):
        random.seed(seed)
        depth = random.randint(0, 3)
        random.seed(seed)
        g_in, g_mid = srcgrad.grad(dynamic_depth, wrt=(1, 2))(x, w_in, w_mid, w_out)
        after = random.random()
        random.seed(seed)
        random.randint(0, 3)
        assert after == random.random(), "the forward pass must draw exactly once"

        def fixed(x, w_in, w_mid, w_out):
            h = np.maximum(x @ w_in, 0)
            for _ in range(depth):
                h = np.maximum(h @ w_mid, 0)
            return np.sum((h @ w_out) ** 2)

        args = (x, w_in, w_mid, w_out)
        np.testing.assert_allclose(g_in, numerical_grad(fixed, args, 1), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(g_mid, numerical_grad(fixed, args, 2), rtol=1e-6, atol=1e-7)


def rnn_step(x, h, w):
    h_new = np.tanh(x @ w + h)
    return h_new, np.sum(h_new) * 2


def rnn_with_tuple_outputs(xs, w):
    h = np.zeros(3)
    total = 0.0
    for t in range(len(xs)):
        h, y = rnn_step(xs[t], h, w)
        total = total + y
    return total + np.sum(h**2)


def tuples_and_dicts(x, w):
    params = {"w": w, "scale": 2.0}
    pair = (x, params["w"])
    a, b = pair
    b, a = a, b  # swap: the right side is evaluated first
    return np.sum(a * b * params["scale"] + a**2)


def loss_with_aux(w, x):
    prediction = x @ w
    return np.sum(prediction**2), prediction


@pytest.mark.parametrize("fn, args, wrt", [
    (rnn_with_tuple_outputs, (X, np.eye(3) * 0.5), (1,)),
    (tuples_and_dicts, (X, X + 1), (0, 1)),
], ids=["tuple_returning_call_in_loop", "tuples_dicts_unpacking"])
def test_tuple_values_match_finite_differences(fn, args, wrt):
    grads = srcgrad.grad(fn, wrt=wrt)(*args)
    for i, g in zip(wrt, grads):
        np.testing.assert_allclose(g, numerical_grad(fn, args, i), rtol=1e-6, atol=1e-7)


def test_has_aux():
    g, aux = srcgrad.grad(loss_with_aux, has_aux=True)(W, X)
    np.testing.assert_allclose(g, 2 * X.T @ (X @ W), rtol=1e-12)
    np.testing.assert_allclose(aux, X @ W, rtol=1e-12)
    (value, aux), g2 = srcgrad.value_and_grad(loss_with_aux, has_aux=True)(W, X)
    assert value == pytest.approx(np.sum((X @ W) ** 2))
    np.testing.assert_array_equal(g, g2)
    value, pullback, aux = srcgrad.vjp(loss_with_aux, has_aux=True)(W, X)
    np.testing.assert_allclose(pullback(1.0), g, rtol=1e-12)


def test_tuple_output_needs_has_aux_or_vjp():
    with pytest.raises(srcgrad.NonScalarOutputError, match="has_aux"):
        srcgrad.grad(loss_with_aux)(W, X)
    value, pullback = srcgrad.vjp(loss_with_aux)(W, X)
    g = pullback((1.0, np.ones((4, 2))))
    np.testing.assert_allclose(g, 2 * X.T @ (X @ W) + X.T @ np.ones((4, 2)), rtol=1e-12)


def test_grad_of_a_lambda():
    assert srcgrad.grad(lambda a: a * a * 3)(2.0) == 12.0


def with_nested_def(x, w):
    scale = 2.0

    def layer(h, v):
        return np.tanh(h @ v) * scale  # `scale` is captured: a constant

    h = layer(x, w)
    h = layer(h, w)
    return np.sum(h**2)


def nested_def_capturing_a_weight(x, w):
    def layer(h):
        return np.tanh(h @ w)

    return np.sum(layer(x))


def test_nested_def_used_twice():
    srcgrad.testing.check_grads(with_nested_def, (X, rng.standard_normal((3, 3)) * 0.5), wrt=(0, 1))


def test_nested_def_capturing_a_differentiated_value_is_refused():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="pass `w` to `layer` as an argument"):
        srcgrad.grad(nested_def_capturing_a_weight, wrt=1)(X, rng.standard_normal((3, 3)))
    # Not differentiated with respect to w: the capture is a constant, and that is fine.
    srcgrad.testing.check_grads(nested_def_capturing_a_weight, (X, rng.standard_normal((3, 3))), wrt=0)


# ---- functions known at compile time are called through their compiled vjp ----

def _double(x):
    return 2.0 * x


def _triple(x):
    return 3.0 * x


swappable = _double


def calls_swappable(x):
    return np.sum(swappable(x) ** 2)


def test_a_rebound_global_function_is_called_afresh():
    """The code calls ``swappable_vjp`` directly; rebinding the global between
    calls must still reach the new function, as the original code would."""
    global swappable
    x = np.array([1.0, -2.0])
    g = srcgrad.grad(calls_swappable)
    np.testing.assert_allclose(g(x), 8.0 * x, rtol=1e-14)  # d/dx (2x)^2
    assert "swappable_vjp(x)" in srcgrad.source(g, x)
    swappable = _triple
    try:
        np.testing.assert_allclose(g(x), 18.0 * x, rtol=1e-14)  # d/dx (3x)^2
    finally:
        swappable = _double
    np.testing.assert_allclose(g(x), 8.0 * x, rtol=1e-14)


def scaled_pair(x, w):
    return x * w, x + w


def uses_one_of_two_outputs(x, w):
    a, b = scaled_pair(x, w)
    c, d = scaled_pair(a, w)
    return np.sum(c) + np.sum(b * d)


def test_a_tuple_returning_callee_called_directly():
    x, w = np.array([0.5, -1.5, 2.0]), np.array([1.5, 0.25, -0.5])
    g = srcgrad.grad(uses_one_of_two_outputs, wrt=(0, 1))
    assert "scaled_pair_vjp(x, w)" in srcgrad.source(g, x, w)
    for i, got in enumerate(g(x, w)):
        np.testing.assert_allclose(got, numerical_grad(uses_one_of_two_outputs, (x, w), i),
                                   rtol=1e-7, atol=1e-9)


class Counter:
    """An object with state that its method updates (`self.n += 1`)."""

    def __init__(self):
        self.n = 0

    def step(self, x):
        self.n += 1
        return x * self.n


def object_made_inside(x):
    c = Counter()
    y = c.step(x)
    y = c.step(np.sin(y))  # n is 2 now
    c.n += 1  # augmented assignment on an attribute, in the function itself
    return np.sum(y * c.n)


def object_passed_in(c, x):
    y = c.step(x)
    return np.sum(c.step(y) ** 2)


def test_object_made_inside_with_augmented_attribute_updates():
    srcgrad.testing.check_grads(object_made_inside, (X,))
    np.testing.assert_allclose(srcgrad.grad(object_made_inside)(X), 6 * np.cos(X), rtol=1e-12)


def test_object_passed_in_with_augmented_attribute_updates():
    # A fresh Counter per evaluation: each call of the function advances it.
    srcgrad.testing.check_grads(lambda x: object_passed_in(Counter(), x), (X,))


class Accumulator:
    def __init__(self, h):
        self.h = h

    def add(self, x):
        self.h = self.h + x
        return self.h


def object_made_from_a_differentiated_value(x):
    a = Accumulator(x)
    return np.sum(a.h)


def differentiated_attribute_update(x):
    a = Accumulator(np.zeros(3))
    return np.sum(a.add(x))


def test_object_made_from_a_differentiated_value_is_refused():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="create the object outside the function"):
        srcgrad.grad(object_made_from_a_differentiated_value)(X)


def test_differentiated_attribute_update_is_refused():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="`self.h`") as excinfo:
        srcgrad.grad(differentiated_attribute_update)(X)
    assert "self.h = self.h + x" in str(excinfo.value)
