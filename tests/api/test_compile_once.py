"""Compiled once per code: a closure or nested ``def`` made again at each call (a
factory's lambda, ``map(partial(f, params), data)``, a helper's nested function, a
``grad(f)`` made inside a differentiated function) runs the program compiled for its
code, reading its own captured values; a call site whose receiver's layer alternates
between classes switches between one program per class.  Counted, not timed
(``benchmarks/compile_once.py`` times it): ``pipeline._compile`` is wrapped to count.
"""
from __future__ import annotations

import functools

import numpy as np
import pytest

import srcgrad
from srcgrad import api, pipeline

from tests.finite_differences import numerical_grad

rng = np.random.default_rng(0)


@pytest.fixture
def compiles(monkeypatch):
    """The functions compiled since the test began, by qualified name, in order (from
    empty caches: nothing an earlier test compiled is reused)."""
    made = []
    original = pipeline._compile
    for cache in ("PROGRAMS", "VJPS", "JVPS", "_MADE"):
        monkeypatch.setattr(api, cache, {}, raising=False)

    def counting(fn, *args, **kwargs):
        made.append(fn.__qualname__)
        return original(fn, *args, **kwargs)
    monkeypatch.setattr(pipeline, "_compile", counting)
    return made


def assert_right(g, f, args, index=0, rtol=1e-6, atol=1e-8):
    np.testing.assert_allclose(g, numerical_grad(f, args, index), rtol=rtol, atol=atol)


# ---- closures made again ----------------------------------------------------------

def make_scaled(a):
    def scaled(x):
        return np.sum(a * np.sin(x) * x)
    return scaled


def test_a_closure_made_again_compiles_once_and_reads_its_own_values(compiles):
    x = rng.standard_normal(4)
    for i in range(10):
        a = rng.standard_normal(4) + i  # other values each time: never the first closure's
        f = make_scaled(a)
        g = srcgrad.grad(f)(x)
        np.testing.assert_allclose(g, a * (np.cos(x) * x + np.sin(x)), rtol=1e-12)
    assert compiles == ["make_scaled.<locals>.scaled"]


def test_a_closure_over_data_of_another_rank_compiles_for_it(compiles):
    x = rng.standard_normal(3)
    for a in (2.0, rng.standard_normal(3), 3.0, rng.standard_normal(3)):
        f = make_scaled(a)
        assert_right(srcgrad.grad(f)(x), f, (x,))
    assert len(compiles) == 2  # a number, an array: each once


def make_activated(act):
    def activated(w, x):
        return np.sum(act(x @ w))
    return activated


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


def test_closures_over_two_functions_alternate_without_compiling(compiles):
    w, x = rng.standard_normal((3, 2)), rng.standard_normal((4, 3))
    for i in range(10):
        f = make_activated(np.tanh if i % 2 else sigmoid)
        assert_right(srcgrad.grad(f)(w, x), f, (w, x))
    assert compiles.count("make_activated.<locals>.activated") == 2


def nested_loss(w, x):
    def layer(v):  # made at each call of nested_loss, reading its w
        return np.tanh(v @ w)
    return np.sum(layer(layer(x)) ** 2)


def test_a_nested_def_made_at_each_call_compiles_once(compiles):
    g = srcgrad.grad(nested_loss)
    x = rng.standard_normal((3, 3))
    g(rng.standard_normal((3, 3)), x)
    compiled = len(compiles)
    for _ in range(10):
        w = rng.standard_normal((3, 3))
        assert_right(g(w, x), nested_loss, (w, x))
    assert len(compiles) == compiled


def two_closures_loss(w):
    first, second = make_scaled(1.0), make_scaled(3.0)  # one code, live at once
    return first(w) + second(w * 2.0)


def test_two_closures_of_one_code_live_at_once_keep_their_own_values(compiles):
    w = rng.standard_normal(3)
    g = srcgrad.grad(two_closures_loss)
    for _ in range(3):
        assert_right(g(w), two_closures_loss, (w,))
    assert compiles.count("make_scaled.<locals>.scaled") == 1


def nll(params, datum):
    return np.sum((datum @ params["w"] + params["b"]) ** 2)


def partial_loss(params, data):
    return sum(map(functools.partial(nll, params), data))


def test_map_of_a_partial_compiles_once(compiles):
    params = {"w": rng.standard_normal(3), "b": 0.5}
    data = [rng.standard_normal(3) for _ in range(4)]
    g = srcgrad.grad(partial_loss)
    g(params, data)
    compiled = len(compiles)
    for _ in range(5):
        got = g(params, data)
        expected = numerical_grad(lambda w: partial_loss({"w": w, "b": 0.5}, data), (params["w"],), 0)
        np.testing.assert_allclose(got["w"], expected, rtol=1e-6, atol=1e-8)
    assert len(compiles) == compiled


def test_a_closure_made_in_a_loop(compiles):
    x = rng.standard_normal(3)
    for c in np.linspace(0.5, 2.0, 10):
        f = lambda v: c * np.sum(v ** 3)  # noqa: E731 (a lambda made in each iteration)
        np.testing.assert_allclose(srcgrad.grad(f)(x), 3 * c * x ** 2, rtol=1e-12)
    assert len(compiles) == 1


def gradient_in_a_helper(x, scale):
    f = make_scaled(scale)
    return srcgrad.grad(f)(x)


def test_a_closure_made_inside_a_helper(compiles):
    x = rng.standard_normal(4)
    for scale in (1.0, 2.0, -3.0):
        np.testing.assert_allclose(gradient_in_a_helper(x, scale), scale * (np.cos(x) * x + np.sin(x)),
                                   rtol=1e-12)
    assert len(compiles) == 1


class Regression:
    def __init__(self, w):
        self.w = w

    def loss(self, x):
        def residual(v):  # a closure over self, made at each call
            return v @ self.w - 1.0
        return np.sum(residual(x) ** 2)


def test_a_closure_made_in_a_method(compiles):
    x = rng.standard_normal((5, 3))
    g = srcgrad.grad(Regression.loss)
    model = Regression(rng.standard_normal(3))
    g(model, x)
    compiled = len(compiles)
    for _ in range(5):
        model = Regression(rng.standard_normal(3))
        expected = numerical_grad(lambda w: Regression(w).loss(x), (model.w,), 0)
        np.testing.assert_allclose(g(model, x).w, expected, rtol=1e-6, atol=1e-8)
    assert len(compiles) == compiled


def test_float32_closures(compiles):
    x = rng.standard_normal(4).astype(np.float32)
    for i in range(5):
        a = (rng.standard_normal(4) + i).astype(np.float32)
        g = srcgrad.grad(make_scaled(a))(x)
        assert g.dtype == np.float32
        np.testing.assert_allclose(g, a * (np.cos(x) * x + np.sin(x)), rtol=1e-5)
    assert len(compiles) == 1


def test_forward_mode_of_closures_made_again(compiles):
    x, v = rng.standard_normal(4), rng.standard_normal(4)
    for i in range(5):
        a = rng.standard_normal(4) + i
        value, tangent = srcgrad.jvp(make_scaled(a))(x, v)
        np.testing.assert_allclose(tangent, np.sum(a * (np.cos(x) * x + np.sin(x)) * v), rtol=1e-12)
        np.testing.assert_allclose(value, make_scaled(a)(x), rtol=1e-12)
    assert len(compiles) == 1


# ---- second order ------------------------------------------------------------------

def make_cubic(a):
    return lambda x: a * np.sin(x) * x ** 3


def test_second_derivative_of_closures_made_again(compiles):
    x = 0.7
    for a in (1.0, 2.0, -0.5, 3.0):
        got = srcgrad.grad(srcgrad.grad(make_cubic(a)))(x)
        expected = a * (-np.sin(x) * x ** 3 + 6 * np.cos(x) * x ** 2 + 6 * np.sin(x) * x)
        np.testing.assert_allclose(got, expected, rtol=1e-10)
    first = len(compiles)
    srcgrad.grad(srcgrad.grad(make_cubic(5.0)))(x)
    assert len(compiles) == first  # the gradient and its forward mode: compiled once each


def test_hvp_of_closures_made_again(compiles):
    x, v = rng.standard_normal(4), rng.standard_normal(4)
    for a in (1.0, 2.0, 3.0):
        f = make_scaled(a)
        g = srcgrad.grad(f)
        eps = 1e-6
        expected = (g(x + eps * v) - g(x - eps * v)) / (2 * eps)
        np.testing.assert_allclose(srcgrad.hvp(f)(x, v), expected, rtol=1e-6, atol=1e-8)
    first = len(compiles)
    srcgrad.hvp(make_scaled(4.0))(x, v)
    assert len(compiles) == first


def penalised(w, x):
    def inner(v):
        return np.sum(np.tanh(v @ x))
    g = srcgrad.grad(inner)  # made inside the differentiated function, at each call
    return np.sum(w ** 2) + np.sum(g(w) ** 2)


def test_a_gradient_made_inside_a_differentiated_function(compiles):
    w, x = rng.standard_normal(3), rng.standard_normal((3, 2))
    outer = srcgrad.grad(penalised)
    outer(w, x)
    penalised(w, x)  # (the differences call it too: its own srcgrad.grad(inner), compiled once)
    compiled = len(compiles)
    for _ in range(5):
        w = rng.standard_normal(3)
        assert_right(outer(w, x), penalised, (w, x), rtol=1e-5, atol=1e-7)
    assert len(compiles) == compiled


def make_penalty(f):
    g = srcgrad.grad(f)  # a gradient function made again with each closure

    def penalty(w):
        return np.sum(g(w) ** 2)
    return penalty


def sin_squared(w):
    return np.sum(np.sin(w) ** 2)


def test_a_closure_over_a_gradient_function_made_again(compiles):
    w = rng.standard_normal(3)
    for _ in range(4):
        f = make_penalty(sin_squared)
        assert_right(srcgrad.grad(f)(w), f, (w,), rtol=1e-5, atol=1e-7)
    assert compiles.count("make_penalty.<locals>.penalty") == 1
    f = make_penalty(lambda w: np.sum(np.cos(w) ** 2))  # another function: its own program
    assert_right(srcgrad.grad(f)(w), f, (w,), rtol=1e-5, atol=1e-7)
    assert compiles.count("make_penalty.<locals>.penalty") == 2


class Scaled:
    def __init__(self, s):
        self.s = s

    def act(self, v):
        return np.tanh(v * self.s)


def make_bound(model):
    act = model.act  # a bound method, made again at each read

    def total(w):
        return np.sum(act(w))
    return total


def test_a_closure_over_a_bound_method_made_again(compiles):
    w = rng.standard_normal(3)
    model = Scaled(2.0)
    for _ in range(4):
        f = make_bound(model)
        assert_right(srcgrad.grad(f)(w), f, (w,))
    assert compiles.count("make_bound.<locals>.total") == 1
    f = make_bound(Scaled(3.0))  # another object: the code checks it as before
    assert_right(srcgrad.grad(f)(w), f, (w,))


# ---- receivers whose class alternates ----------------------------------------------

class Sigmoid:
    def __call__(self, v):
        return 1 / (1 + np.exp(-v))


class Tanh:
    def __call__(self, v):
        return np.tanh(v)


class Dense:
    def __init__(self, w, act):
        self.w, self.act = w, act

    def __call__(self, x):
        return self.act(x @ self.w)


def cell_loss(layers, x):
    h = x
    for i in range(len(layers)):
        h = layers[i % 2](h)  # a layer picked when the code runs: Dense.__call__ through dispatch
    return np.sum(h)


def test_alternating_receiver_classes_compile_once_per_class(compiles):
    x = rng.standard_normal((4, 3))
    layers = [Dense(rng.standard_normal((3, 3)), Sigmoid()), Dense(rng.standard_normal((3, 3)), Tanh())]
    g = srcgrad.grad(cell_loss)
    for _ in range(10):
        got = g(layers, x)
        for i in range(2):
            def at(w, i=i):
                changed = [Dense(w if j == i else layer.w, layer.act) for j, layer in enumerate(layers)]
                return cell_loss(changed, x)
            np.testing.assert_allclose(got[i].w, numerical_grad(at, (layers[i].w,), 0), rtol=1e-6, atol=1e-8)
    assert compiles.count("Dense.__call__") == 2
