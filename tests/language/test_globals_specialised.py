"""Data a function reads from its module or closure (``u = np.ones(3)`` at module level)
is specialised on its rank, as an argument is: ``u * x`` is NumPy's product in the
generated code (no run-time dispatch, so forward mode over that code, hvp, works),
and the code checks at each call that ``u`` still holds a value of that kind,
compiling again when it does not (rank, float or array, list).  The value itself is
still read where the source reads it."""
from __future__ import annotations

import types

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad

OPT = [True, False]
X = np.array([0.3, -1.2, 2.0])

u = np.array([1.0, 2.0, 3.0])
W = np.array([[1.0, -0.5, 0.2], [0.3, 0.7, -1.1]])
cfg = types.ModuleType("cfg")  # a module read by attribute (`cfg.scale`)


@pytest.fixture(autouse=True)
def _fresh_globals():
    global u, W
    yield
    u = np.array([1.0, 2.0, 3.0])
    W = np.array([[1.0, -0.5, 0.2], [0.3, 0.7, -1.1]])


def loss(x):
    return np.sum(u * np.sin(x))


def _check(g, f, x):
    np.testing.assert_allclose(g(x), numerical_grad(f, [x], 0), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("optimize", OPT)
def test_array_global_is_numpy_in_the_code(optimize):
    g = srcgrad.grad(loss, optimize=optimize)
    text = srcgrad.source(g, X)
    assert "dispatch." not in text
    assert ".u\n" in text and "np.cos(x)" in text
    _check(g, loss, X)


def test_hvp_over_a_global_array():
    global u
    v = np.array([0.5, -1.0, 2.0])
    got = srcgrad.hvp(loss)(X, v)
    np.testing.assert_allclose(got, -u * np.sin(X) * v, rtol=1e-12)
    u = np.array([2.0, 0.5, -1.0])  # rebound: the second-order code sees it
    np.testing.assert_allclose(srcgrad.hvp(loss)(X, v), -u * np.sin(X) * v, rtol=1e-12)


KINDS = {
    "float": 2.5,
    "rank1": np.array([1.0, -2.0, 0.5]),
    "rank2": np.array([[1.0, -2.0, 0.5], [0.3, 0.2, -0.1]]),
    "np.float32": np.float32(1.5),                              # a NumPy number
    "list": [1.0, -2.0, 0.5],                                   # general code
    "float32": np.array([1.0, -2.0, 0.5], dtype=np.float32),
    "0d": np.array(3.0),
    "int": 3,
}


@pytest.mark.parametrize("optimize", OPT)
@pytest.mark.parametrize("first, then", [
    ("float", "rank2"),  # compiled for a number: no unbroadcast of u * g, which a matrix needs
    ("0d", "rank2"), ("int", "rank1"), ("rank1", "rank2"), ("rank2", "float"), ("rank1", "float"),
    ("rank1", "np.float32"), ("rank1", "list"), ("list", "rank2"), ("float", "list"),
    ("rank1", "float32"), ("float32", "rank1"), ("rank1", "0d"),
])
def test_rebinding_between_calls(optimize, first, then):
    global u
    u = KINDS[first]
    g = srcgrad.grad(loss, optimize=optimize)
    _check(g, loss, X)
    before = srcgrad.source(g, X)
    u = KINDS[then]
    _check(g, loss, X)
    assert g(X).shape == X.shape
    u = KINDS[first]  # and back
    _check(g, loss, X)
    assert srcgrad.source(g, X) == before


def matmul_loss(x):
    return np.sum(np.tanh(W @ x))


@pytest.mark.parametrize("optimize", OPT)
def test_rank_of_a_matrix_global_changes(optimize):
    """The matmul rule's form depends on the ranks (``W.T @ g`` for a matrix)."""
    global W
    g = srcgrad.grad(matmul_loss, optimize=optimize)
    _check(g, matmul_loss, X)
    W = np.array([0.5, -1.0, 2.0])  # a vector: W @ x is a number
    _check(g, matmul_loss, X)
    W = np.arange(12.0).reshape(2, 2, 3) / 10  # a stack of matrices
    _check(g, matmul_loss, X)
    W = 2.0  # a float: W @ x is a TypeError, as in NumPy
    with pytest.raises((TypeError, ValueError)):
        g(X)


def make_closure(scale):
    def f(x):
        return np.sum(scale * x ** 2)

    def rebind(value):
        nonlocal scale
        scale = value
    return f, rebind


@pytest.mark.parametrize("optimize", OPT)
def test_closure_variable(optimize):
    f, rebind = make_closure(np.array([1.0, 2.0, 3.0]))
    g = srcgrad.grad(f, optimize=optimize)
    assert "dispatch." not in srcgrad.source(g, X)
    _check(g, f, X)
    for value in (np.ones((2, 3)), 3.0, [1.0, 0.0, -1.0], np.float32(2.0)):
        rebind(value)
        _check(g, f, X)


def uses_module_attribute(x):
    return np.sum(cfg.scale * np.exp(x))


@pytest.mark.parametrize("optimize", OPT)
def test_attribute_of_a_module(optimize):
    cfg.scale = np.array([1.0, -1.0, 0.5])
    g = srcgrad.grad(uses_module_attribute, optimize=optimize)
    assert "dispatch." not in srcgrad.source(g, X)
    _check(g, uses_module_attribute, X)
    for value in (np.ones((4, 3)), -2.0, [1.0, 2.0, 3.0]):
        cfg.scale = value
        _check(g, uses_module_attribute, X)


def helper(x):
    return u * np.tanh(x)


def in_helper_and_loop(x):
    total = 0.0
    for i in range(3):
        total = total + np.sum(helper(x) * W[i % 2])
    return total


@pytest.mark.parametrize("optimize", OPT)
def test_inlined_helper_and_loop(optimize):
    global u
    g = srcgrad.grad(in_helper_and_loop, optimize=optimize)
    assert "dispatch." not in srcgrad.source(g, X)
    _check(g, in_helper_and_loop, X)
    u = 3.0
    _check(g, in_helper_and_loop, X)
    u = np.ones((2, 3))
    _check(g, in_helper_and_loop, X)


class Model:
    def __call__(self, x):
        return np.sum(u * x * x)


def model_loss(model, x):
    return model(x)


@pytest.mark.parametrize("optimize", OPT)
def test_method_reading_a_global(optimize):
    global u
    g = srcgrad.grad(model_loss, wrt=1, optimize=optimize)
    m = Model()
    assert "dispatch." not in srcgrad.source(g, m, X)
    np.testing.assert_allclose(g(m, X), 2 * u * X)
    u = np.ones((2, 3))
    np.testing.assert_allclose(g(m, X), 4 * X)
    u = 0.5
    np.testing.assert_allclose(g(m, X), X)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float32(dtype):
    global u
    u = np.array([1.0, 2.0, 3.0], dtype=dtype)
    x = X.astype(np.float32)
    got = srcgrad.grad(loss)(x)
    np.testing.assert_allclose(got, u * np.cos(x), rtol=1e-6)


def grow():
    global u
    u = np.ones((2, 3))


def rebinds_while_running(x):
    a = np.sum(u * x)
    grow()
    return a + np.sum(u * x)


def test_rebound_to_another_rank_while_the_code_runs():
    """A call (not inlined) that rebinds the global to another rank while the code
    runs: the code after it was specialised on the old rank, so it is refused."""
    g = srcgrad.grad(rebinds_while_running)
    with pytest.raises(srcgrad.errors.UserCodeError, match="changed"):
        g(X)


def rebinds_same_kind():
    global u
    u = u + 1.0


def rebinds_same_kind_while_running(x):
    a = np.sum(u * x)
    rebinds_same_kind()
    return a + np.sum(u * x)


def test_rebound_to_the_same_rank_while_the_code_runs():
    g = srcgrad.grad(rebinds_same_kind_while_running)
    np.testing.assert_allclose(g(X), np.array([1.0, 2.0, 3.0]) + np.array([2.0, 3.0, 4.0]))


def becomes_array():
    global u
    u = np.array([1.0, 2.0, 3.0])


def general_then_array(x):
    a = np.sum(u * x)
    becomes_array()
    return a + np.sum(u * x)


def test_general_code_takes_any_kind_while_it_runs():
    """Compiled for a list (general code: operators dispatched when they run), a
    rebinding to an array while the code runs is followed; the next call is
    compiled for the array."""
    global u
    u = [1.0, 1.0, 1.0]
    g = srcgrad.grad(general_then_array)
    np.testing.assert_allclose(g(X), [2.0, 3.0, 4.0])
    np.testing.assert_allclose(g(X), [2.0, 4.0, 6.0])  # (u is the array now)
    assert "dispatch." not in srcgrad.source(g, X)


# ---- rows unpacked from an array: `a, b = m` ---------------------------------------

def unpack_rows(x, m):
    a, b = m
    return np.sum(x * a + np.sin(b * x))


def unpack_rows_in_loop(x, m):
    total = 0.0
    for _ in range(2):
        a, b = m
        total = total + np.sum(np.tanh(a * x) * b)
    return total


def unpack_global_rows(x):
    a, b = W
    return np.sum(np.cos(a * x) + b)


@pytest.mark.parametrize("optimize", OPT)
@pytest.mark.parametrize("f", [unpack_rows, unpack_rows_in_loop])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_unpacked_rows_are_arrays(optimize, f, dtype):
    m = W.astype(dtype)
    x = X.astype(dtype)
    g = srcgrad.grad(f, wrt=(0, 1), optimize=optimize)
    assert "dispatch." not in srcgrad.source(g, x, m)
    x_bar, m_bar = g(x, m)
    tol = 1e-3 if dtype == np.float32 else 1e-6
    np.testing.assert_allclose(x_bar, numerical_grad(f, [X, W], 0), rtol=tol, atol=tol)
    np.testing.assert_allclose(m_bar, numerical_grad(f, [X, W], 1), rtol=tol, atol=tol)


@pytest.mark.parametrize("optimize", OPT)
def test_unpacked_rows_of_a_global(optimize):
    g = srcgrad.grad(unpack_global_rows, optimize=optimize)
    assert "dispatch." not in srcgrad.source(g, X)
    _check(g, unpack_global_rows, X)


def unpack_tuple(x, ws):
    a, b = ws
    return np.sum(x * a * b)


def test_unpacked_entries_of_a_tuple():
    g = srcgrad.grad(unpack_tuple, wrt=(0, 1))
    ws = (np.array([1.0, -2.0, 0.5]), 3.0)
    assert "dispatch." not in srcgrad.source(g, X, ws)
    x_bar, (a_bar, b_bar) = g(X, ws)
    np.testing.assert_allclose(x_bar, ws[0] * 3.0)
    np.testing.assert_allclose(a_bar, X * 3.0)
    np.testing.assert_allclose(b_bar, np.sum(X * ws[0]))


# ---- a method called on a model's result: `model(x).ravel()` -------------------------

class Layer:
    def __init__(self):
        self.w = np.array([[0.5, -1.0], [0.3, 0.2], [1.1, -0.4]])

    def __call__(self, x):
        return np.tanh(x @ self.w)


def method_on_result(model, x):
    return np.sum(model(x).ravel() ** 2)


def method_on_named_result(model, x):
    h = model(x)
    return np.sum(h.reshape(-1) ** 2) + np.sum(h.T)


@pytest.mark.parametrize("optimize", OPT)
@pytest.mark.parametrize("f", [method_on_result, method_on_named_result])
def test_method_on_a_models_result_is_inlined(optimize, f):
    model, x = Layer(), np.array([[0.3, -1.2, 2.0], [0.1, 0.4, -0.7]])
    g = srcgrad.grad(f, optimize=optimize)
    assert "dispatch." not in srcgrad.source(g, model, x)
    got = g(model, x)

    def value(w):
        model.w = w
        return f(model, x)
    w = model.w.copy()
    np.testing.assert_allclose(got.w, numerical_grad(value, [w], 0), rtol=1e-6, atol=1e-8)


def test_source_follows_a_rebinding():
    """srcgrad.source shows the code the next call runs, compiled again if needed."""
    global u
    u = 2.0
    g = srcgrad.grad(loss)
    g(X)
    assert "unbroadcast" not in srcgrad.source(g, X)  # u * g has g's shape
    u = np.ones((2, 3))
    assert "unbroadcast" in srcgrad.source(g, X)
    np.testing.assert_allclose(srcgrad.hvp(loss)(X, np.ones(3)), -2 * np.sin(X))
