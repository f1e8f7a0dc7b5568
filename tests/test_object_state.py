"""Object state as forward bookkeeping: caches (`self.cache = x`, `self.X.append(x)`),
counters (`self.calls += 1`), running statistics and lazily made parameters run as
written on primal values; what is stored is the value, with no adjoint (as PyTorch
under no_grad); a value stored and read back in the same block is differentiated
through; one read back where srcgrad cannot tell which value it is (after a branch,
in a later iteration, through code not inlined) is refused."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from test_container_adjoints import finite_differences

RS = np.random.RandomState(0)
X = RS.randn(4, 3)


class Dense:
    def __init__(self, w):
        self.w = w
        self.cache = None
        self.calls = 0

    def forward(self, x):
        self.cache = x
        self.calls += 1
        return x @ self.w


class Tanh:
    def __init__(self):
        self.out = None

    def forward(self, x):
        self.out = np.tanh(x)        # kept for a hand-written backward
        return self.out              # read back at once: differentiated through


class Net:
    def __init__(self, widths, dtype=np.float64):
        self.layers = []
        for m, n in zip(widths[:-1], widths[1:]):
            self.layers.append(Dense(RS.randn(m, n).astype(dtype)))
            self.layers.append(Tanh())

    def forward(self, x):
        for layer in self.layers:
            x = layer.forward(x)
        return x


def dense_loss(layer, x):
    return np.sum(layer.forward(x) ** 2)


def net_loss(net, x):
    return np.sum(net.forward(x) ** 2)


def _through_helper(layer, x):
    return layer.forward(x) * 2.0


def helper_loss(layer, x):
    return np.sum(_through_helper(layer, x))


def test_a_cache_and_a_counter_run_as_written():
    layer = Dense(RS.randn(3, 2))
    g = srcgrad.grad(dense_loss)(layer, X)
    np.testing.assert_allclose(g.w, 2 * X.T @ (X @ layer.w), rtol=1e-12)
    assert layer.calls == 1 and layer.cache is X
    srcgrad.grad(dense_loss)(layer, X)
    assert layer.calls == 2


def test_caches_in_a_loop_over_layers_of_different_widths():
    net = Net((3, 4, 2))
    g = srcgrad.grad(net_loss)(net, X)
    ws = [layer.w for layer in net.layers if isinstance(layer, Dense)]

    def loss(ws, x):
        for w in ws:
            x = np.tanh(x @ w)
        return np.sum(x ** 2)
    expected = finite_differences(loss, (ws, X), 0)
    got = [layer.w for layer in g.layers if hasattr(layer, "w")]
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(net.layers[-1].out, np.tanh(np.tanh(X @ ws[0]) @ ws[1]))


def test_a_cache_in_a_helper_and_with_respect_to_the_input():
    layer = Dense(RS.randn(3, 2))
    g = srcgrad.grad(helper_loss, wrt=1)(layer, X)
    np.testing.assert_allclose(g, 2.0 * np.ones((4, 2)) @ layer.w.T, rtol=1e-12)


def test_caches_in_float32():
    net = Net((3, 2), np.float32)
    g = srcgrad.grad(net_loss)(net, X.astype(np.float32))
    assert g.layers[0].w.dtype == np.float32
    w = net.layers[0].w.astype(np.float64)
    expected = finite_differences(lambda w, x: np.sum(np.tanh(x @ w) ** 2), (w, X), 0)[0]
    np.testing.assert_allclose(g.layers[0].w, expected, rtol=1e-3, atol=1e-4)


class BatchNorm:
    def __init__(self, n, momentum=0.1):
        self.gamma, self.beta = np.ones(n), np.zeros(n)
        self.running_mean, self.running_var = np.zeros(n), np.ones(n)
        self.momentum = momentum

    def forward(self, x):
        mean, var = np.mean(x, axis=0), np.var(x, axis=0)
        self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * mean
        self.running_var = (1 - self.momentum) * self.running_var + self.momentum * var
        return self.gamma * (x - mean) / np.sqrt(var + 1e-5) + self.beta


def bn_loss(bn, x):
    return np.sum(np.sin(bn.forward(x)))


def test_running_statistics_are_kept_and_not_differentiated():
    bn = BatchNorm(3)
    g = srcgrad.grad(bn_loss)(bn, X)
    np.testing.assert_allclose(bn.running_mean, 0.1 * X.mean(0), rtol=1e-12)
    np.testing.assert_allclose(bn.running_var, 0.9 + 0.1 * X.var(0), rtol=1e-12)
    xhat = (X - X.mean(0)) / np.sqrt(X.var(0) + 1e-5)
    np.testing.assert_allclose(g.gamma, np.sum(np.cos(xhat) * xhat, axis=0), rtol=1e-10)
    np.testing.assert_allclose(g.running_mean, 0.0)
    gx = srcgrad.grad(bn_loss, wrt=1)(BatchNorm(3), X)
    np.testing.assert_allclose(gx, finite_differences(bn_loss, (BatchNorm(3), X), 1)[0], rtol=1e-6, atol=1e-8)


class Lazy:
    def __init__(self, n_out):
        self.n_out, self.w = n_out, None

    def forward(self, x):
        if self.w is None:
            self.n_in = x.shape[1]
            self.w = np.random.RandomState(1).randn(self.n_in, self.n_out)
        return x @ self.w


def lazy_loss(layer, x):
    return np.sum(np.tanh(layer.forward(x)))


def test_a_lazily_made_parameter():
    layer = Lazy(2)
    g = srcgrad.grad(lazy_loss, wrt=1)(layer, X)
    assert layer.n_in == 3 and layer.w.shape == (3, 2)
    np.testing.assert_allclose(g, (1 - np.tanh(X @ layer.w) ** 2) @ layer.w.T, rtol=1e-12)
    g = srcgrad.grad(lazy_loss)(layer, X)  # made now: a parameter like any other
    np.testing.assert_allclose(g.w, X.T @ (1 - np.tanh(X @ layer.w) ** 2), rtol=1e-12)


class ReadsBackLater:
    def __init__(self, w):
        self.w = w

    def forward(self, x, flag):
        if flag:
            self.h = np.tanh(x @ self.w)
        else:
            self.h = x @ self.w
        return np.sum(self.h ** 2)


class ReadsBackNextIteration:
    def __init__(self, w):
        self.w, self.h = w, None

    def forward(self, x):
        total = 0.0
        for _ in range(2):
            if self.h is not None:
                total = total + np.sum(self.h)
            self.h = x @ self.w
        return total


def test_a_store_read_back_where_srcgrad_cannot_tell_the_value_is_refused():
    w = RS.randn(3, 2)
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="storing a value that is being differentiated"):
        srcgrad.grad(lambda m, x: m.forward(x, True))(ReadsBackLater(w), X)
    with pytest.raises(srcgrad.UnsupportedSyntaxError):
        srcgrad.grad(lambda m, x: m.forward(x), wrt=1)(ReadsBackNextIteration(w), X)


def test_a_store_read_back_at_once_is_differentiated_through():
    class Square:
        def forward(self, x):
            self.y = x * x
            return np.sum(self.y * 3.0)
    g = srcgrad.grad(lambda m, x: m.forward(x), wrt=1)(Square(), X)
    np.testing.assert_allclose(g, 6.0 * X, rtol=1e-12)


class Appends:
    def __init__(self, w):
        self.w, self.inputs = w, []

    def forward(self, x):
        self.inputs.append(x)
        return np.tanh(x @ self.w)


def test_an_appended_cache():
    layer = Appends(RS.randn(3, 2))
    g = srcgrad.grad(lambda m, x: np.sum(m.forward(x)))(layer, X)
    np.testing.assert_allclose(g.w, X.T @ (1 - np.tanh(X @ layer.w) ** 2), rtol=1e-12)
    assert len(layer.inputs) == 1 and layer.inputs[0] is X
