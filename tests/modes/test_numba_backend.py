"""``backend="numba"``: the generated program compiled by ``numba.njit``.

Gradients equal the NumPy backend's and central differences on loop-heavy code
(scalar ``for`` and ``while`` loops, ``break``, an ``if`` in a loop, an RNN), in float32
and float64; what numba cannot compile is refused when srcgrad compiles, at the user's
line, naming ``backend="numpy"``.
"""
from __future__ import annotations

import sys

import numpy as np
import pytest

import srcgrad
from srcgrad import errors
from tests.finite_differences import numerical_grad

pytest.importorskip("numba")


def scalar_loop(x):
    for i in range(1000):
        x = x - 0.001 * np.sin(x) * x
    return x


def while_break(x):
    n = 0
    while x < 100.0:
        x = x * 1.5 + np.sin(x)
        n = n + 1
        if n > 8:
            break
    return x * x


def if_in_loop(x, n):
    s = 0.0
    for i in range(n):
        if x > 0.5:
            s = s + np.sin(x) * x
        else:
            s = s - x * x
        x = x * 0.9
    return s


def rnn(wx, wh, b, xs):
    h = np.zeros((xs.shape[1], wh.shape[0]), dtype=wx.dtype)
    for t in range(xs.shape[0]):
        h = np.tanh(xs[t] @ wx + h @ wh + b)
    return np.sum(h ** 2)


def _rnn_args(dtype, T=12, B=3, I=4, H=5):
    rng = np.random.default_rng(0)
    return tuple(a.astype(dtype) for a in (rng.normal(size=(I, H)) * 0.4, rng.normal(size=(H, H)) * 0.4,
                                           rng.normal(size=H) * 0.1, rng.normal(size=(T, B, I))))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_scalar_for_loop(dtype):
    x = dtype(0.7)
    g = srcgrad.grad(scalar_loop, backend="numba")(x)
    assert g == pytest.approx(srcgrad.grad(scalar_loop)(x), rel=1e-5 if dtype is np.float32 else 1e-12)
    rel = 1e-4 if dtype is np.float32 else 1e-6
    assert g == pytest.approx(numerical_grad(scalar_loop, (0.7,), 0), rel=rel)


@pytest.mark.parametrize("x", [0.3, 2.0, 50.0, 150.0])  # 8+ trips (the break), a few, one, none
def test_while_with_break(x):
    value, g = srcgrad.value_and_grad(while_break, backend="numba")(x)
    assert value == pytest.approx(while_break(x), rel=1e-12)
    assert g == pytest.approx(srcgrad.grad(while_break)(x), rel=1e-12)
    assert g == pytest.approx(numerical_grad(while_break, (x,), 0), rel=1e-6)


@pytest.mark.parametrize("x", [0.3, 0.7, 2.0])  # each branch, then both in one run
def test_if_inside_a_loop(x):
    g = srcgrad.grad(if_in_loop, backend="numba")(x, 12)
    assert g == pytest.approx(srcgrad.grad(if_in_loop)(x, 12), rel=1e-12)
    assert g == pytest.approx(numerical_grad(if_in_loop, (x, 12), 0), rel=1e-6, abs=1e-9)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rnn(dtype):
    args = _rnn_args(dtype)
    grads = srcgrad.grad(rnn, wrt=(0, 1, 2), backend="numba")(*args)
    expected = srcgrad.grad(rnn, wrt=(0, 1, 2))(*args)
    rtol = 1e-4 if dtype is np.float32 else 1e-10
    for k, (g, e) in enumerate(zip(grads, expected)):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=rtol, atol=rtol)
        wide = tuple(a.astype(np.float64) for a in args)
        loose = 1e-3 if dtype is np.float32 else 1e-6
        np.testing.assert_allclose(g, numerical_grad(rnn, wide, k), rtol=loose, atol=loose / 100)


def test_value_and_grad_of_the_rnn():
    args = _rnn_args(np.float64)
    value, grads = srcgrad.value_and_grad(rnn, wrt=(0, 1), backend="numba")(*args)
    assert value == pytest.approx(rnn(*args), rel=1e-12)
    for g, e in zip(grads, srcgrad.grad(rnn, wrt=(0, 1))(*args)):
        np.testing.assert_allclose(g, e, rtol=1e-10)


def test_jvp_of_the_scalar_loop():
    value, tangent = srcgrad.jvp(scalar_loop, backend="numba")(0.7, 1.0)
    assert (value, tangent) == pytest.approx(srcgrad.jvp(scalar_loop)(0.7, 1.0), rel=1e-12)


def test_vjp_is_refused():
    with pytest.raises(errors.UnsupportedSyntaxError, match="vjp returns a pullback closure"):
        srcgrad.vjp(scalar_loop, backend="numba")(0.7)


def test_the_code_shown_is_what_numba_compiles():
    text = srcgrad.source(srcgrad.grad(scalar_loop, backend="numba"), 0.5)
    assert "backend: numba" in text and "from srcgrad.backends import numba_runtime as rt" in text
    assert "range(999, -1, -1)" in text and "reversed" not in text
    numpy_text = srcgrad.source(srcgrad.grad(scalar_loop), 0.5)
    assert "reversed(range(1000))" in numpy_text and "numba_runtime" not in numpy_text


# ---- refusals: when srcgrad compiles, at the user's line -------------------------------

def weighted(params, x):
    return np.sum(params["w"] * x)


def contracted(a, b):
    return np.sum(np.einsum("ij,jk->ik", a, b))


SCALE = 2.0


def reads_a_global(x):
    return np.sum(x * SCALE)


def test_a_dict_argument_is_refused():
    g = srcgrad.grad(weighted, backend="numba")
    with pytest.raises(errors.UnsupportedSyntaxError) as caught:
        g({"w": np.ones(3)}, np.ones(3))
    message = str(caught.value)
    assert "argument `params` is a dict" in message and "def weighted(params, x):" in message
    assert "backend='numpy'" in message


def test_einsum_is_refused_at_its_line():
    with pytest.raises(errors.UnsupportedSyntaxError) as caught:
        srcgrad.grad(contracted, backend="numba")(np.ones((2, 3)), np.ones((3, 2)))
    message = str(caught.value)
    assert "np.einsum" in message and "numba backend" in message
    assert 'return np.sum(np.einsum("ij,jk->ik", a, b))' in message and "backend='numpy'" in message


def test_a_global_read_is_refused():
    with pytest.raises(errors.UnsupportedSyntaxError) as caught:
        srcgrad.grad(reads_a_global, backend="numba")(np.ones(3))
    message = str(caught.value)
    assert "reads `SCALE` from outside it" in message and "return np.sum(x * SCALE)" in message


def tuple_axis(x):
    return np.sum(np.sum(x ** 2, axis=(0, 1)))


def test_a_typing_error_at_the_first_call_is_srcgrads():
    g = srcgrad.grad(tuple_axis, backend="numba")
    with pytest.raises(errors.BackendError) as caught:
        g(np.ones((2, 3, 4)))
    message = str(caught.value)
    assert "numba could not compile tuple_axis's gradient" in message and "backend='numpy'" in message
    assert "Traceback" not in message and "During:" not in message


def test_without_numba_the_error_says_how_to_install_it(monkeypatch):
    from srcgrad.backends import numba as numba_backend

    monkeypatch.setitem(sys.modules, "numba", None)  # (an import of it then raises ImportError)
    with pytest.raises(errors.BackendError, match="pip install numba"):
        numba_backend.check_device()
