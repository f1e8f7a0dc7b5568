"""A list or tuple of numbers (or of equal-shaped arrays) differentiated where NumPy
takes it for an array (``x @ w``, ``x * w``, ``w + 1``): its gradient comes back in
its own structure, entry by entry.  It once came back as zeros (the array adjoint was
not laid out in the list)."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad

X = np.arange(12.0).reshape(4, 3) / 10.0


def matmul(w, x):
    return np.sum((x @ w) ** 2)


def product(w, x):
    return np.sum((x * w) ** 2)


def added(w, x):
    return np.sum(np.tanh(x + w))


def _helper(w, x):
    return x @ w


def in_helper_and_loop(w, x):
    total = 0.0
    for i in range(2):
        total = total + np.sum(np.sin(_helper(w, x * i)))
    return total


def _differences(f, w, x, eps=1e-6):
    flat = np.asarray(w, dtype=np.float64)
    g = np.zeros_like(flat)
    for i in np.ndindex(flat.shape):
        e = np.zeros_like(flat)
        e[i] = eps
        g[i] = (f((flat + e).tolist(), x) - f((flat - e).tolist(), x)) / (2 * eps)
    return g


@pytest.mark.parametrize("f", [matmul, product, added, in_helper_and_loop])
@pytest.mark.parametrize("make", [list, tuple])
def test_a_list_of_numbers_taken_for_an_array(f, make):
    w = make([0.1, -0.2, 0.3])
    g = srcgrad.grad(f)(w, X)
    assert type(g) is make and all(type(v) is float for v in g)
    np.testing.assert_allclose(g, _differences(f, w, X), rtol=1e-6, atol=1e-9)


def test_nested_lists_and_lists_of_arrays():
    def f(w, x):
        return np.sum((x @ w) ** 2)
    nested = [[0.1, 0.2], [-0.2, 0.0], [0.3, 0.5]]
    g = srcgrad.grad(f)(nested, X)
    np.testing.assert_allclose(np.array(g), _differences(f, nested, X), rtol=1e-6)
    rows = [np.array([0.1, 0.2]), np.array([-0.2, 0.0]), np.array([0.3, 0.5])]
    g = srcgrad.grad(f)(rows, X)
    assert isinstance(g, list) and all(isinstance(r, np.ndarray) and r.shape == (2,) for r in g)
    np.testing.assert_allclose(np.array(g), _differences(f, nested, X), rtol=1e-6)


def test_vjp_and_jvp_of_a_list():
    w = [0.1, -0.2, 0.3]
    value, pullback = srcgrad.vjp(lambda w: X @ w)(w)
    u = np.array([1.0, 2.0, -1.0, 0.5])
    np.testing.assert_allclose(pullback(u), X.T @ u)
    _, tangent = srcgrad.jvp(matmul)(w, X, [1.0, 0.0, -1.0])
    assert tangent == pytest.approx(_differences(matmul, w, X) @ [1.0, 0.0, -1.0], rel=1e-6)
