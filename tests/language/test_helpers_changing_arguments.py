"""A helper that changes what it is given — appends to a list, fills a dict, writes into
or updates (`-=`) an array — is inlined, so the change is the caller's own: right where
the caller's own write would be, and refused where it would be (another name reads the
array after the change).  Gradients against central finite differences, in a loop, as a
method and in float32."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import check_gradient


def _push(hs, h):
    hs.append(h * 2.0)


def appended_by_a_helper(x):
    hs = []
    _push(hs, x)
    _push(hs, np.sin(x))
    return np.sum(hs[0] * hs[1])


def appended_in_a_loop(x):
    hs = [x]
    for _ in range(3):
        _push(hs, np.tanh(hs[-1]))
    return np.sum(hs[-1] * hs[1])


def _record(d, key, v):
    d[key] = v * v


def filled_by_a_helper(x):
    d = {}
    _record(d, "a", x)
    _record(d, "b", np.cos(x))
    return np.sum(d["a"] + d["b"] * x)


def _project(vx, vy):
    # fluidsim's projection: updates its (fresh) arguments in place and returns them
    p = vx * vy
    vx -= 0.5 * p
    vy -= 0.25 * p
    return vx, vy


def updated_in_place_by_a_helper(x):
    a, b = _project(x * 1.0, np.sin(x))
    return np.sum(a * b)


def updated_in_a_loop(x):
    vx, vy = x * 1.0, np.cos(x)
    for _ in range(3):
        vx, vy = _project(np.tanh(vx), vy * 1.0)
    return np.sum(vx * vy)


def _zero_first(a):
    a[0] = 0.0


def written_into_by_a_helper(x):
    y = x * 2.0
    _zero_first(y)
    return np.sum(y * x)


class Simulator:
    def __init__(self, w):
        self.w = w

    def step(self, v):
        v -= self.w * v
        return v

    def loss(self, x):
        return np.sum(self.step(x * 1.0) ** 2)


FUNCTIONS = [appended_by_a_helper, appended_in_a_loop, filled_by_a_helper, updated_in_place_by_a_helper,
             updated_in_a_loop, written_into_by_a_helper]


@pytest.mark.parametrize("f", FUNCTIONS)
def test_a_helpers_change_is_the_callers_own(f):
    check_gradient(f, np.array([0.4, -1.3, 0.8]))


def test_as_a_method():
    w, x = np.array([0.5, -0.2, 0.1]), np.array([0.4, -1.3, 0.8])
    check_gradient(lambda w, x: Simulator(w).loss(x), w, x)
    check_gradient(lambda w, x: Simulator(w).loss(x), w, x, index=1)


@pytest.mark.parametrize("f", [appended_by_a_helper, updated_in_a_loop, written_into_by_a_helper])
def test_in_float32(f):
    x = np.array([0.4, -1.3, 0.8], np.float32)
    g = srcgrad.grad(f)(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, srcgrad.grad(f)(x.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_the_callers_array_after_the_change_is_the_changed_one():
    def f(x):
        y = x * 2.0
        _zero_first(y)
        return y[0] + np.sum(y)
    np.testing.assert_allclose(srcgrad.grad(f)(np.ones(3)), [0.0, 2.0, 2.0])


def test_another_name_read_after_the_change_is_the_changed_array():
    def f(x):
        u = x * 1.0
        a, b = _project(u, np.sin(x))
        return np.sum(a * b) + np.sum(u)  # (`u` is `a`, changed: read as the changed array)
    check_gradient(f, np.array([0.4, -1.3, 0.8]))


def test_the_callers_argument_changed_is_refused():
    def f(x):
        _zero_first(x)
        return np.sum(x)
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError):
        srcgrad.grad(f)(np.ones(3))
