"""The tutorial's two-layer network and the textbook's autograd example, exactly."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad


def two_layer_loss(w1, w2, x, y):
    h = x.dot(w1)
    h_relu = np.maximum(h, 0)
    y_pred = h_relu.dot(w2)
    return np.square(y_pred - y).sum()


def two_layer_loss_ops(w1, w2, x, y):
    h = x @ w1
    h_relu = np.maximum(h, 0)
    y_pred = h_relu @ w2
    return np.sum((y_pred - y) ** 2)


def hand_written(w1, w2, x, y):
    """The tutorial's NumPy warm-up backward pass."""
    h = x.dot(w1)
    h_relu = np.maximum(h, 0)
    y_pred = h_relu.dot(w2)
    grad_y_pred = 2.0 * (y_pred - y)
    grad_w2 = h_relu.T.dot(grad_y_pred)
    grad_h_relu = grad_y_pred.dot(w2.T)
    grad_h = grad_h_relu.copy()
    grad_h[h < 0] = 0
    grad_w1 = x.T.dot(grad_h)
    return grad_w1, grad_w2


def data(dtype=np.float64, n=64, d_in=1000, h=100, d_out=10):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, d_in)).astype(dtype)
    y = rng.standard_normal((n, d_out)).astype(dtype)
    w1 = rng.standard_normal((d_in, h)).astype(dtype)
    w2 = rng.standard_normal((h, d_out)).astype(dtype)
    return w1, w2, x, y


@pytest.mark.parametrize("loss", [two_layer_loss, two_layer_loss_ops])
def test_two_layer_matches_hand_written(loss):
    w1, w2, x, y = data()
    g1, g2 = srcgrad.grad(loss, wrt=(0, 1))(w1, w2, x, y)
    r1, r2 = hand_written(w1, w2, x, y)
    np.testing.assert_allclose(g1, r1, rtol=1e-12, atol=0)
    np.testing.assert_allclose(g2, r2, rtol=1e-12, atol=0)


def test_two_layer_float32_stays_float32():
    w1, w2, x, y = data(np.float32)
    g1, g2 = srcgrad.grad(two_layer_loss, wrt=(0, 1))(w1, w2, x, y)
    assert g1.dtype == np.float32 and g2.dtype == np.float32
    r1, r2 = hand_written(w1, w2, x, y)
    np.testing.assert_allclose(g1, r1, rtol=1e-4, atol=1e-2)


def test_value_and_grad_and_names():
    w1, w2, x, y = data(n=4, d_in=5, h=3, d_out=2)
    value, (g1, g2) = srcgrad.value_and_grad(two_layer_loss, wrt=("w1", "w2"))(w1, w2, x, y)
    assert value == pytest.approx(two_layer_loss(w1, w2, x, y), rel=1e-14)
    r1, r2 = hand_written(w1, w2, x, y)
    np.testing.assert_allclose(g1, r1, rtol=1e-12)
    np.testing.assert_allclose(g2, r2, rtol=1e-12)


def mean_of_square(x):
    y = x + 2
    z = y * y * 3
    return z.mean()


def test_textbook_mean_of_square_is_4_5():
    g = srcgrad.grad(mean_of_square)(np.ones((2, 2)))
    np.testing.assert_array_equal(g, np.full((2, 2), 4.5))


def test_python_float_in_python_float_out():
    def f(a):
        return 3.0 * a**2 + np.sin(a)

    g = srcgrad.grad(f)(0.5)
    assert type(g) is float
    assert g == pytest.approx(3.0 + np.cos(0.5), rel=1e-14)


def test_decorator_spellings():
    @srcgrad.grad
    def f(x):
        return np.sum(x**3)

    @srcgrad.grad(wrt="b")
    def h(a, b):
        return np.sum(a * b)

    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(f(x), 3 * x**2)
    np.testing.assert_array_equal(h(x, np.ones(2)), x)


GOLDEN = '''\
# srcgrad: reverse mode of two_layer_loss_ops (test_tutorial.py:17) | wrt: w1, w2 | backend: numpy
import numpy as np
from srcgrad import runtime as rt

def two_layer_loss_ops_grad(w1, w2, x, y, result_bar=1.0):
    # ---- forward sweep ----
    # test_tutorial.py:18  h = x @ w1
    h = x @ w1
    # test_tutorial.py:19  h_relu = np.maximum(h, 0)
    h_relu = np.maximum(h, 0)
    # test_tutorial.py:20  y_pred = h_relu @ w2
    y_pred = h_relu @ w2
    # test_tutorial.py:21  return np.sum((y_pred - y) ** 2)
    _t1 = y_pred - y
    # ---- backward sweep ----
    # test_tutorial.py:21  return np.sum((y_pred - y) ** 2)
    _t1_bar = result_bar * (2 * _t1)
    y_pred_bar = rt.unbroadcast(_t1_bar, y_pred)
    # test_tutorial.py:20  y_pred = h_relu @ w2
    h_relu_bar = y_pred_bar @ w2.T
    w2_bar = h_relu.T @ y_pred_bar
    # test_tutorial.py:19  h_relu = np.maximum(h, 0)
    h_bar = h_relu_bar * (h > 0)
    # test_tutorial.py:18  h = x @ w1
    w1_bar = x.T @ h_bar
    return (w1_bar, w2_bar)
'''


def test_golden_generated_code():
    dloss = srcgrad.grad(two_layer_loss_ops, wrt=(0, 1))
    text = srcgrad.source(dloss, *data(n=2, d_in=3, h=4, d_out=2))
    assert text == GOLDEN
    # Byte-identical from compile to compile.
    again = srcgrad.grad(two_layer_loss_ops, wrt=(0, 1))
    assert srcgrad.source(again, *data(n=2, d_in=3, h=4, d_out=2)) == text
