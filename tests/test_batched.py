"""Batched columns of ``jacfwd`` and ``hessian``: one run of a batched forward program
(every tangent with a leading axis of columns) per ``chunk_size`` columns.  Each
against the same derivative one column at a time (``srcgrad.jvp``/``srcgrad.hvp`` along
each unit vector) and central differences; whether the program ran batched or fell
back to the loop (a step it does not batch) is checked too, since both give the
same values."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from test_higher import CASES, IDS, gradient_difference, loop_branch


def columns(f, args, wrt, jvp):
    """The derivative along each unit vector of ``args[wrt]``, stacked last."""
    x = np.asarray(args[wrt])
    out = []
    for k in range(x.size):
        e = np.zeros(x.size, x.dtype if x.dtype.kind == "f" else np.float64)
        e[k] = 1
        out.append(np.asarray(jvp(*args, e.reshape(x.shape))))
    return np.stack(out, axis=-1).reshape(out[0].shape + x.shape)


def batched(fn) -> bool:
    return all(fn.columns.values())


@pytest.mark.parametrize("chunk_size", [None, 1, 3, 4, 7])  # all, one, a divisor (of 12), non-divisors
@pytest.mark.parametrize("f, args, wrt", CASES, ids=IDS)
def test_hessian_in_chunks_equals_hvp_column_by_column(f, args, wrt, chunk_size):
    H = srcgrad.hessian(f, wrt=wrt, chunk_size=chunk_size)
    value = H(*args)
    expected = columns(f, args, wrt, lambda *a: srcgrad.hvp(f, wrt=wrt)(*a))
    np.testing.assert_allclose(value, expected, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("f, args, wrt", [CASES[i] for i in (0, 1, 5, 6, 7)],
                         ids=[IDS[i] for i in (0, 1, 5, 6, 7)])
def test_these_hessians_run_batched_and_match_differences(f, args, wrt):
    """The tutorial's loss, a shared layer and a model's method batch.  (The gradient
    code of a loop pops values of a kind known only when it runs, and that of
    `helpers` has a step that does not batch yet: those go column by column, above.)"""
    H = srcgrad.hessian(f, wrt=wrt, chunk_size=5)
    value = H(*args)
    assert batched(H)
    shape = np.shape(args[wrt])
    for k in range(0, int(np.prod(shape)), 3):
        e = np.zeros(int(np.prod(shape)))
        e[k] = 1
        np.testing.assert_allclose(value.reshape(-1, e.size)[:, k],
                                   gradient_difference(f, args, wrt, e.reshape(shape)).ravel(), rtol=1e-5, atol=1e-6)


def outputs(x, w):
    """Broadcasting a smaller operand, matmul of vector and matrix, indexing, reshape, a
    reduction over an axis, a loop with a branch."""
    h = np.tanh(x @ w)
    y = h * x[0] + np.sum(w, axis=0)
    for i in range(2):
        if np.max(y) > 0:
            y = y * np.exp(-y ** 2) + x[1:3].reshape(2, 1).sum()
        else:
            y = np.sin(y)
    return np.concatenate([y, np.max(w * x[:, None], axis=0)])


@pytest.mark.parametrize("chunk_size", [None, 1, 4, 5])
@pytest.mark.parametrize("wrt", [0, 1, (0, 1)])
def test_jacfwd_in_chunks_equals_jvp_column_by_column_and_jacrev(wrt, chunk_size):
    rng = np.random.default_rng(3)
    args = (rng.standard_normal(3), rng.standard_normal((3, 4)))
    J = srcgrad.jacfwd(outputs, wrt=wrt, chunk_size=chunk_size)
    value = J(*args)
    assert batched(J)
    expected = srcgrad.jacrev(outputs, wrt=wrt)(*args)
    for got, want, i in zip(value if isinstance(wrt, tuple) else (value,),
                            expected if isinstance(wrt, tuple) else (expected,), wrt if isinstance(wrt, tuple) else (wrt,)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
        np.testing.assert_allclose(got, columns(outputs, args, i, lambda *a: srcgrad.jvp(outputs, wrt=i)(*a)[1]),
                                   rtol=1e-10, atol=1e-12)


def test_float32_columns_stay_float32():
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal(3).astype(np.float32), rng.standard_normal((3, 4)).astype(np.float32)
    J = srcgrad.jacfwd(outputs, chunk_size=2)(x, w)
    assert J.dtype == np.float32
    np.testing.assert_allclose(J, srcgrad.jacfwd(outputs)(x.astype(float), w.astype(float)), rtol=1e-4, atol=1e-5)
    H = srcgrad.hessian(loop_branch, chunk_size=2)(x, w[:, :3])
    assert H.dtype == np.float32


def writes(x):
    y = np.zeros(3)
    for i in range(3):
        y[i] = np.sin(x[i]) * x[(i + 1) % 3]
    return y


def test_a_program_that_does_not_batch_runs_column_by_column():
    """A write into an array (its tangent's columns would share memory) does not batch:
    the loop gives the same Jacobian."""
    x = np.array([0.3, -1.2, 0.7])
    J = srcgrad.jacfwd(writes, chunk_size=2)
    value = J(x)
    assert not batched(J)
    np.testing.assert_allclose(value, srcgrad.jacrev(writes)(x), rtol=1e-12)


def test_hessian_of_a_model_is_blocks_in_its_structure():
    """As jax.hessian on a pytree: H[a][b] of shape a.shape + b.shape, in the structure."""
    rng = np.random.default_rng(5)
    params = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal(2)}
    x = rng.standard_normal((4, 3))

    def loss(params, x):
        return np.sum(np.tanh(x @ params["w"] + params["b"]) ** 2)

    H = srcgrad.hessian(loss, chunk_size=3)(params, x)
    assert set(H) == {"w", "b"} and set(H["w"]) == {"w", "b"}
    assert H["w"]["b"].shape == (3, 2, 2) and H["b"]["w"].shape == (2, 3, 2)
    np.testing.assert_allclose(H["w"]["b"], np.moveaxis(H["b"]["w"], 0, -1), rtol=1e-10)
    flat = srcgrad.hessian(lambda w, b, x: loss({"w": w, "b": b}, x), wrt=(0, 1))(params["w"], params["b"], x)
    for a in ("w", "b"):
        for i, b in enumerate(("w", "b")):
            np.testing.assert_allclose(H[a][b], flat["wb".index(a)][i], rtol=1e-10, atol=1e-12)


def test_chunk_size_must_be_positive():
    with pytest.raises(ValueError, match="chunk_size"):
        srcgrad.jacfwd(outputs, chunk_size=0)(np.ones(3), np.ones((3, 4)))
