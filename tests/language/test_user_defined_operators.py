"""Operators a class of the user's defines dispatch to the class; an array times an object
NumPy would map over is refused."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad


OPT = [True, False]


# ---- A14: operators a class of the user's defines ---------------------------

class Vec:
    __array_ufunc__ = None  # NumPy defers `array * Vec` to Vec.__rmul__

    def __init__(self, w):
        self.w = w

    def __mul__(self, other):
        return np.sum(self.w * other) * 2.0  # not NumPy's elementwise product

    def __rmul__(self, other):
        return np.sum(other * self.w) * 3.0

    def __add__(self, other):
        return self.w ** 2 + other

    def __neg__(self):
        return self.w * -5.0


def _vec_times(v, x):
    return v * x  # in a helper


def op_mul(v, x):
    return np.sum(v * x)


def op_rmul(v, x):
    return np.sum(x * v)


def op_add(v, x):
    return np.sum(v + x)


def op_neg(v, x):
    return np.sum((-v) * x)


def op_loop(v, x):
    t = 0.0
    for i in range(2):
        t = t + _vec_times(v, x) * (i + 1)
    return t


@pytest.mark.parametrize("optimize", OPT)
@pytest.mark.parametrize("f", [op_mul, op_rmul, op_add, op_neg, op_loop])
def test_user_operators_dispatch_to_the_class(f, optimize):
    v, x = Vec(np.array([1.0, 2.0])), np.array([0.5, -1.5])
    g = srcgrad.grad(f, optimize=optimize)(v, x)
    want = numerical_grad(lambda w: f(Vec(w), x), (v.w,), 0)
    np.testing.assert_allclose(g.w, want, rtol=1e-6, atol=1e-8)
    gx = srcgrad.grad(f, wrt=1, optimize=optimize)(v, x)
    np.testing.assert_allclose(gx, numerical_grad(lambda y: f(v, y), (x,), 0), rtol=1e-6, atol=1e-8)


def test_array_times_object_numpy_would_map_over_is_refused():
    class S:
        def __init__(self, w):
            self.w = w

        def __rmul__(self, x):
            return x * self.w

    def f(m, x):
        return np.sum(x * m)
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="object array") as info:
        srcgrad.grad(f)(S(2.0), np.ones(2))
    assert "test_user_defined_operators.py" in str(info.value)
