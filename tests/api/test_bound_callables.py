"""``srcgrad.grad`` (and value_and_grad, vjp, jvp) of a bound method, a functools.partial and
a callable object: the function underneath, with the bound object or the fixed arguments
passed first as constants; ``wrt`` counts the parameters left to the caller.  Values against
central finite differences, with loops and helpers inside, in float32."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import srcgrad

rng = np.random.default_rng(3)
X = rng.normal(size=4)
W = rng.normal(size=(4, 4))


def fd(f, args, wrt, eps=1e-6):
    """Central differences of ``f(*args)`` in ``args[wrt]`` (an array or a float)."""
    args = list(args)
    x = np.array(args[wrt], dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        for sign in (1, -1):
            y = x.copy()
            y[i] += sign * eps
            args[wrt] = y if np.ndim(x) else float(y)
            g[i] += sign * f(*args) / (2 * eps)
    return g


def squash(h):
    return np.tanh(h) * 0.5


class Net:
    def __init__(self, w, steps=3):
        self.w, self.steps = w, steps

    def loss(self, x, scale=2.0):
        h = x
        for _ in range(self.steps):
            h = squash(self.w @ h)
        return np.sum(h ** 2) * scale

    def __call__(self, x):
        total = 0.0
        for k in range(self.steps):
            total = total + np.sum(np.sin(self.w[k] * x))
        return total


def energy(w, x, scale=1.0, bias=0.0):
    h = x
    for k in range(3):
        h = squash(w @ h + bias * k)
    return np.sum(h ** 2) * scale


def test_bound_method_against_finite_differences():
    net = Net(W)
    np.testing.assert_allclose(srcgrad.grad(net.loss)(X), fd(net.loss, (X,), 0), rtol=1e-6, atol=1e-9)
    g = srcgrad.grad(net.loss, wrt="scale")(X, 3.0)
    np.testing.assert_allclose(g, fd(net.loss, (X, 3.0), 1), rtol=1e-6)
    gx, gs = srcgrad.grad(net.loss, wrt=(0, 1))(X, 3.0)
    np.testing.assert_allclose(gs, g) and np.testing.assert_allclose(gx, fd(net.loss, (X, 3.0), 0), rtol=1e-6)


def test_bound_method_follows_the_object_as_it_changes():
    """The object is an argument of each call, not a value frozen at grad time."""
    net = Net(W)
    loss_grad = srcgrad.grad(net.loss)
    loss_grad(X)
    net.w = W * 0.5
    np.testing.assert_allclose(loss_grad(X), fd(net.loss, (X,), 0), rtol=1e-6, atol=1e-9)


def test_gradient_of_the_objects_parameters_through_the_class():
    net = Net(W)
    g = srcgrad.grad(Net.loss, wrt=0)(net, X)
    np.testing.assert_allclose(g.w, fd(lambda w: Net(w).loss(X), (W,), 0), rtol=1e-6, atol=1e-9)


def test_callable_object():
    net = Net(W)
    np.testing.assert_allclose(srcgrad.grad(net)(X), fd(net, (X,), 0), rtol=1e-6, atol=1e-9)
    value, g = srcgrad.value_and_grad(net)(X)
    np.testing.assert_allclose(value, net(X))


@pytest.mark.parametrize("make, call", [
    (lambda: functools.partial(energy, W), lambda x: energy(W, x)),
    (lambda: functools.partial(energy, W, scale=3.0), lambda x: energy(W, x, scale=3.0)),
    (lambda: functools.partial(functools.partial(energy, W), bias=0.5), lambda x: energy(W, x, bias=0.5)),
    (lambda: functools.partial(Net(W).loss, scale=0.5), lambda x: Net(W).loss(x, scale=0.5)),
], ids=["positional", "keyword", "nested", "of_a_bound_method"])
def test_partial_fixed_arguments_are_constants(make, call):
    np.testing.assert_allclose(srcgrad.grad(make())(X), fd(call, (X,), 0), rtol=1e-6, atol=1e-9)


def test_partial_wrt_counts_the_parameters_left():
    p = functools.partial(energy, W)
    g = srcgrad.grad(p, wrt=2)(X, 1.5, 0.25)  # (x, scale, bias): bias
    np.testing.assert_allclose(g, fd(lambda b: energy(W, X, 1.5, b), (0.25,), 0), rtol=1e-6)
    gx, gb = srcgrad.grad(p, wrt=("x", "bias"))(X, 1.5, 0.25)
    np.testing.assert_allclose(gb, g)


def test_vjp_and_jvp():
    net = Net(W)
    value, pullback = srcgrad.vjp(net.loss)(X)
    np.testing.assert_allclose(pullback(1.0), srcgrad.grad(net.loss)(X))
    v = rng.normal(size=4)
    value, tangent = srcgrad.jvp(functools.partial(energy, W))(X, v)
    np.testing.assert_allclose(tangent, fd(lambda x: energy(W, x), (X,), 0) @ v, rtol=1e-6)


def test_float32_stays_float32():
    net = Net(W.astype(np.float32))
    x = X.astype(np.float32)
    for f in (net.loss, net, functools.partial(energy, W.astype(np.float32))):
        g = srcgrad.grad(f)(x)
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, srcgrad.grad(f)(X), rtol=1e-3, atol=1e-5)


def test_source_of_a_bound_method():
    assert "def loss" in srcgrad.source(srcgrad.grad(Net(W).loss), X)


def test_fixed_parameter_in_wrt_refused():
    with pytest.raises(srcgrad.WrtError) as info:
        srcgrad.grad(functools.partial(energy, W), wrt="w")
    assert "srcgrad.grad(energy, wrt='w')" in str(info.value)
    with pytest.raises(srcgrad.WrtError) as info:
        srcgrad.grad(Net(W).loss, wrt=2)
    assert "leaves 2 parameters" in str(info.value)


@pytest.mark.parametrize("higher", [srcgrad.hvp, srcgrad.hessian, srcgrad.jacfwd, srcgrad.jacrev])
def test_higher_derivatives_refuse_with_what_to_write(higher):
    with pytest.raises(srcgrad.NoSourceError) as info:
        higher(Net(W).loss)
    assert "Net.loss, wrt=...)(obj, x, ...)" in str(info.value)


def _scaled(a, x):
    return a * x


def _loss_of_a_callable(x, g):
    return np.sum(g(x) ** 2)


def test_a_partial_given_as_an_argument_runs_its_function():
    # (it was refused, "cannot read the source of functools.partial(...)"; jvp crashed)
    x, v = np.array([0.3, 0.5]), np.array([1.0, -2.0])
    g = functools.partial(_scaled, 3.0)
    np.testing.assert_allclose(srcgrad.grad(_loss_of_a_callable)(x, g), 18 * x)
    _, tangent = srcgrad.jvp(_loss_of_a_callable)(x, g, v)
    assert tangent == pytest.approx(np.sum(18 * x * v))
