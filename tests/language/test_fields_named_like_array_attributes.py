"""Fields named like array attributes (`T`, `shape`, ...) on objects, dataclasses and named
tuples are fields; the attributes of arrays are still arrays'."""
from __future__ import annotations

import collections
import dataclasses
import types

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad


OPT = [True, False]


def _fd_field(f, obj, name, args, eps=1e-6, make=None):
    """Central difference of ``f(obj, *args)`` in the float field ``name`` of ``obj``."""
    def at(v):
        o = make(v) if make is not None else dataclasses.replace(obj, **{name: v})
        return f(o, *args)
    v = getattr(obj, name)
    return (at(v + eps) - at(v - eps)) / (2 * eps)


class Temp:
    def __init__(self, T, W):
        self.T = T
        self.W = W


@dataclasses.dataclass
class DC:
    shape: float
    rate: float


Gamma = collections.namedtuple("Gamma", ["shape", "rate"])


P = collections.namedtuple("P", ["W", "T"])


def logits(m, x):
    return np.sum(np.tanh(x @ m.W / m.T))


def loss_temperature(m, x):
    return logits(m, x) ** 2  # a helper reads m.T


@pytest.mark.parametrize("optimize", OPT)
def test_field_named_T_on_an_object(optimize):
    m, x = Temp(2.0, np.full((2, 2), 0.3)), np.array([1.0, 2.0])
    for f in (logits, loss_temperature):
        g = srcgrad.grad(f, optimize=optimize)(m, x)
        want = _fd_field(f, m, "T", (x,), make=lambda v: Temp(v, m.W))
        assert g.T == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("optimize", OPT)
def test_fields_named_like_array_attributes(optimize):
    def f(p, x):
        out = 0.0
        for i in range(2):  # in a loop
            out = out + np.sum(x * p.shape) * p.rate ** i
        return out
    x = np.array([0.5, 1.5])
    for p, make in ((Gamma(2.0, 3.0), lambda **kw: Gamma(**kw)), (DC(2.0, 3.0), lambda **kw: DC(**kw)),
                    (types.SimpleNamespace(shape=2.0, rate=3.0), lambda **kw: types.SimpleNamespace(**kw))):
        g = srcgrad.grad(f, optimize=optimize)(p, x)
        for name in ("shape", "rate"):
            other = {"shape": p.shape, "rate": p.rate}

            def at(v, name=name, other=other):
                return f(make(**{**other, name: v}), x)
            want = (at(getattr(p, name) + 1e-6) - at(getattr(p, name) - 1e-6)) / 2e-6
            assert getattr(g, name) == pytest.approx(want, rel=1e-6)


@pytest.mark.parametrize("optimize", OPT)
def test_named_tuple_field_T_with_matmul(optimize):  # B9
    def f(p, x):
        return np.sum(x @ p.W * p.T)
    p, x = P(np.array([[1.0, 2.0], [0.5, -1.0]]), 2.0), np.array([1.0, 2.0])
    g = srcgrad.grad(f, optimize=optimize)(p, x)
    assert g.T == pytest.approx(np.sum(x @ p.W))
    np.testing.assert_allclose(g.W, np.outer(x, np.ones(2)) * 2.0)


@pytest.mark.parametrize("optimize", OPT)
def test_array_attributes_still_arrays(optimize):
    class M:
        def __init__(self):
            self.W = np.arange(6.0).reshape(3, 2) / 5

    def f(m, x):
        return np.sum(np.sin(x @ m.W.T)) * m.W.shape[0]

    def h(x, w):
        n = x.shape[0]
        return np.sum(x @ w.T) * n
    m, x = M(), np.array([0.4, -0.7])
    g = srcgrad.grad(f, optimize=optimize)(m, x)
    want = numerical_grad(lambda w: f(types.SimpleNamespace(W=w), x), (m.W,), 0)
    np.testing.assert_allclose(g.W, want, rtol=1e-6, atol=1e-8)
    w = np.ones((3, 2))
    got = srcgrad.grad(h, wrt=(0, 1), optimize=optimize)(x, w)
    np.testing.assert_allclose(got[0], numerical_grad(h, (x, w), 0), rtol=1e-6)
    np.testing.assert_allclose(got[1], numerical_grad(h, (x, w), 1), rtol=1e-6)


def _transpose_of(v):
    return v.T  # `v`'s kind known only when it runs: an array here


@pytest.mark.parametrize("optimize", OPT)
def test_T_on_a_value_known_only_at_run_time(optimize):
    def f(x):
        ys = [x * 2.0, x]
        return np.sum(ys[0].T @ np.array([[1.0, 2.0], [3.0, 4.0]])) + np.sum(_transpose_of(x) ** 2)
    x = np.array([[1.0, -2.0], [0.5, 3.0]])
    np.testing.assert_allclose(srcgrad.grad(f, optimize=optimize)(x), numerical_grad(f, (x,), 0), rtol=1e-6)
