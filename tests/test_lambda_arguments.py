"""A lambda given to a call as an argument (``layer(x, act=lambda z: z)``) is made by a
statement of its own first, a nested function as ``act = lambda z: z`` is: as a keyword
or a positional argument, in a loop, to a method, in float32; a default lambda too."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from test_container_adjoints import finite_differences

RS = np.random.RandomState(0)
X = RS.randn(5, 3)
W = RS.randn(3, 2)


def layer(x, w, act=lambda z: np.tanh(z)):
    return act(x @ w)


def as_a_keyword(w, x):
    return np.sum(layer(x, w, act=lambda z: z * 2.0) ** 2)


def as_a_positional_argument(w, x):
    return np.sum(layer(x, w, lambda z: z ** 2))


def the_default(w, x):
    return np.sum(layer(x, w) ** 2)


def in_a_loop(w, x):
    total = 0.0
    for k in range(3):
        total = total + np.sum(layer(x, w, act=lambda z: np.sin(z) * (k + 1.0)))
    return total


def two_in_one_statement(w, x):
    h = layer(layer(x, w, act=lambda z: np.exp(-z)), np.ones((2, 2)), act=lambda z: np.cos(z))
    return np.sum(h)


def with_a_literal_default(w, x):
    return np.sum(layer(x, w, act=lambda z, *, c=3.0: z * c) ** 2)


class Dense:
    def __init__(self, w):
        self.w = w

    def forward(self, x, act=None):
        h = x @ self.w
        return act(h) if act is not None else h


def to_a_method(m, x):
    return np.sum(m.forward(x, act=lambda h: np.maximum(h, 0.0) ** 2))


@pytest.mark.parametrize("loss", [as_a_keyword, as_a_positional_argument, the_default, in_a_loop,
                                  two_in_one_statement, with_a_literal_default])
def test_a_lambda_given_to_a_helper(loss):
    g_w, g_x = srcgrad.grad(loss, wrt=(0, 1))(W, X)
    np.testing.assert_allclose(g_w, finite_differences(loss, (W, X), 0)[0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g_x, finite_differences(loss, (W, X), 1)[0], rtol=1e-6, atol=1e-8)


def test_a_lambda_given_to_a_method():
    g = srcgrad.grad(to_a_method)(Dense(W), X)
    expected = finite_differences(lambda w, x: to_a_method(Dense(w), x), (W, X), 0)[0]
    np.testing.assert_allclose(g.w, expected, rtol=1e-6, atol=1e-8)


def test_a_lambda_argument_in_float32():
    g = srcgrad.grad(as_a_keyword)(W.astype(np.float32), X.astype(np.float32))
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, srcgrad.grad(as_a_keyword)(W, X), rtol=1e-4, atol=1e-4)
