"""A lambda in an expression (given to a call as an argument, ``layer(x, act=lambda z: z)``;
called where it is made, ``(lambda t: t * w)(x)``; an item of a list, a dict or a comprehension,
``[lambda v, k=k: v * k for k in range(3)]``) is made by a statement of its own first, a nested
function as ``act = lambda z: z`` is: as a keyword or a positional argument, in a loop, to a
method, in float32; a default lambda too; one with computed defaults where Python makes it."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import finite_differences

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


# ---- a lambda called where it is made, or kept in a list or a dict ------------------------

def called_in_a_comprehension(w, x):
    return np.sum([(lambda t: t @ w)(xi) for xi in x])


def called_in_a_generator(w, x):
    return sum(np.sum((lambda a, b=2.0: np.tanh(a) * b)(xi @ w)) for xi in x)


def called_where_it_is_made(w, x):
    return np.sum((lambda t: np.sin(t @ w))(x) ** 2)


def a_list_of_lambdas_with_defaults(w, x):
    fs = [lambda v, k=k: np.sin(v) * (k + 1.0) for k in range(3)]
    return sum(np.sum(fn(x @ w)) for fn in fs)


def a_list_of_lambdas_read_in_a_loop(w, x):
    fs = [lambda v, k=k: v * k for k in range(3)]
    h = x @ w
    for fn in fs:
        h = np.tanh(fn(h))
    return np.sum(h)


def a_dict_of_lambdas(w, x):
    acts = {name: (lambda v, p=p: np.abs(v) ** p) for name, p in [("l1", 1.0), ("l2", 2.0)]}
    return np.sum(acts["l2"](x @ w)) + np.sum(acts["l1"](w))


def a_display_of_lambdas(w, x):
    fs = [lambda v: v * 2.0, lambda v: np.sin(v)]
    d = {"exp": lambda v: np.exp(-v)}
    return np.sum(fs[0](x @ w) + fs[1](x @ w)) + np.sum(d["exp"](w))


def chosen_by_a_condition(w, x):
    act = (lambda v: np.maximum(v, 0.0)) if x[0, 0] > 0 else (lambda v: np.tanh(v))
    return np.sum(act(x @ w) ** 2)


def with_a_computed_default(w, x):
    return np.sum(layer(x, w, act=lambda z, c=np.sqrt(2.0): z * c) ** 2)


def _rows_through(w, x):
    return [(lambda t: np.tanh(t @ w))(xi) for xi in x]


def in_a_helper(w, x):
    return np.sum(np.stack(_rows_through(w, x)) * np.stack(_rows_through(2.0 * w, x)))


def in_a_loop_of_comprehensions(w, x):
    total = 0.0
    for k in range(2):
        total = total + np.sum([(lambda t: t @ w * (k + 1.0))(xi) for xi in x[k:]])
    return total


class Rows:
    def __init__(self, w):
        self.w = w

    def loss(self, x):
        fs = [lambda v, k=k: v * k for k in (1.0, 2.0)]
        return np.sum([(lambda t: np.sin(t @ self.w))(fn(xi)) for fn in fs for xi in x])


MADE_HERE = [called_in_a_comprehension, called_in_a_generator, called_where_it_is_made,
             a_list_of_lambdas_with_defaults, a_list_of_lambdas_read_in_a_loop, a_dict_of_lambdas,
             a_display_of_lambdas, chosen_by_a_condition, with_a_computed_default, in_a_helper,
             in_a_loop_of_comprehensions]


@pytest.mark.parametrize("loss", MADE_HERE)
def test_a_lambda_made_in_an_expression(loss):
    g_w, g_x = srcgrad.grad(loss, wrt=(0, 1))(W, X)
    np.testing.assert_allclose(g_w, finite_differences(loss, (W, X), 0)[0], rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(g_x, finite_differences(loss, (W, X), 1)[0], rtol=1e-6, atol=1e-8)


def test_a_lambda_made_in_an_expression_in_a_method():
    g = srcgrad.grad(lambda m, x: m.loss(x))(Rows(W), X)
    expected = finite_differences(lambda w, x: Rows(w).loss(x), (W, X), 0)[0]
    np.testing.assert_allclose(g.w, expected, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("loss", [called_in_a_comprehension, a_list_of_lambdas_with_defaults, a_dict_of_lambdas])
def test_a_lambda_made_in_an_expression_in_float32(loss):
    g = srcgrad.grad(loss)(W.astype(np.float32), X.astype(np.float32))
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, srcgrad.grad(loss)(W, X), rtol=1e-4, atol=1e-4)


def test_a_lambda_made_in_an_expression_in_forward_mode():
    v = RS.randn(*W.shape)
    for loss in MADE_HERE:
        _, tangent = srcgrad.jvp(loss)(W, X, v)
        np.testing.assert_allclose(tangent, np.sum(srcgrad.grad(loss)(W, X) * v), rtol=1e-10)


def test_a_computed_default_is_computed_where_python_computes_it():
    calls = []

    def logged(name, value):
        calls.append(name)
        return value

    def loss(w, x):
        return np.sum(layer(logged("x", x), w, act=lambda z, c=logged("c", 2.0): z * c))
    calls.clear()
    expected = loss(W, X)
    python_order = list(calls)
    calls.clear()
    value, g = srcgrad.value_and_grad(loss)(W, X)
    assert python_order == ["x", "c"] and calls == python_order
    np.testing.assert_allclose(value, expected)
    np.testing.assert_allclose(g, finite_differences(loss, (W, X), 0)[0], rtol=1e-6, atol=1e-8)


def test_a_kept_lambda_reading_a_differentiated_value_is_refused_in_its_words():
    def loss(w, x):
        fs = [lambda v: v @ w for _ in range(2)]  # (stored: srcgrad does not follow `w` into it)
        return np.sum(fs[0](x) + fs[1](x))
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="this lambda reads `w`") as info:
        srcgrad.grad(loss)(W, X)
    assert "test_lambda_arguments.py" in str(info.value) and "`_lambda`" not in str(info.value)


def test_a_kept_lambda_whose_capture_is_assigned_again_is_refused_in_its_words():
    def loss(w, x):
        c = 1.0
        fs = [lambda v: v @ w * c]
        c = 5.0  # (Python's lambda reads this one when called)
        return np.sum(fs[0](x))
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="the lambda called here reads `c`") as info:
        srcgrad.grad(loss, wrt=1)(W, X)
    assert "`_lambda`" not in str(info.value)
