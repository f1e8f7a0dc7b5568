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
from srcgrad import nn, tree
from tests.modes.higher_cases import CASES, IDS, gradient_difference, loop_branch


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


@pytest.mark.parametrize("f, args, wrt", [CASES[i] for i in (0, 1, 5, 6, 7, 8, 9)],
                         ids=[IDS[i] for i in (0, 1, 5, 6, 7, 8, 9)])
def test_these_hessians_run_batched_and_match_differences(f, args, wrt):
    """The tutorial's loss, a shared layer, a model's method and the runtime helpers of
    `helpers` (its gradient code writes into arrays) batch.  (The gradient code of a
    loop pops values of a kind known only when it runs: column by column, above.)"""
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


def test_writes_into_arrays_batch():
    """``y[i] = v`` rebinds ``y_dot`` to a copy holding every column where it does not yet
    (a zero tangent has one column): the loop's Jacobian, and the finite differences'."""
    x = np.array([0.3, -1.2, 0.7])
    for J in (srcgrad.jacfwd(writes, chunk_size=2), srcgrad.jacrev(writes, chunk_size=2)):
        value = J(x)
        assert batched(J)
        np.testing.assert_allclose(value, columns(writes, (x,), 0, lambda *a: srcgrad.jvp(writes)(*a)[1]),
                                   rtol=1e-12)
        np.testing.assert_allclose(value, difference_jacobian(writes, x), rtol=1e-6, atol=1e-8)


def calls(x, fn):
    return fn(x) * x


def test_a_program_that_does_not_batch_runs_column_by_column():
    """A call of a function known only when it runs (compiled apart) does not batch: the
    loop gives the same Jacobian."""
    x = np.array([0.3, -1.2, 0.7])
    for J in (srcgrad.jacfwd(calls, chunk_size=2), srcgrad.jacrev(calls, chunk_size=2)):
        value = J(x, np.sin)
        assert not batched(J)
        np.testing.assert_allclose(value, np.diag(np.cos(x) * x + np.sin(x)), rtol=1e-12, atol=1e-15)


def difference_jacobian(f, x, eps=1e-6):
    """Central differences, column by column: ``y.shape + x.shape``."""
    cols = []
    for k in range(x.size):
        e = np.zeros(x.size)
        e[k] = eps
        e = e.reshape(x.shape)
        cols.append((np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps))
    return np.stack(cols, axis=-1).reshape(np.shape(cols[0]) + x.shape)


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


# ---- jacrev: batched forward mode over the pullback code (linear in the cotangent) ----

def helper_layer(w, h):
    return np.tanh(h @ w)


def with_helpers(x, w):
    """A helper called twice (inlined), broadcasting, a matrix output."""
    h = helper_layer(w, x[:, None] * np.ones(2))
    return helper_layer(w, h.T) + x[0]


def with_layer(x, model):
    """An srcgrad.nn model (a Linear layer, inlined) as an argument not differentiated."""
    return np.reshape(np.exp(-model(x) ** 2), -1)


def scalar_out(x, w):
    return np.sum(np.sin(x @ w) ** 2)


def _jacrev_cases(dtype):
    r = np.random.default_rng(7)
    nn.init.manual_seed(0)
    return [
        (outputs, (r.standard_normal(3), r.standard_normal((3, 4))), 0),
        (outputs, (r.standard_normal(3), r.standard_normal((3, 4))), (0, 1)),
        (outputs, (-np.abs(r.standard_normal(3)), np.abs(r.standard_normal((3, 4)))), 1),  # the other branch
        (with_helpers, (r.standard_normal(2), r.standard_normal((2, 2))), (0, 1)),
        (with_layer, (r.standard_normal((2, 3)), nn.Linear(3, 2, dtype=dtype)), 0),
        (scalar_out, (r.standard_normal(3), r.standard_normal((3, 2))), 1),
        (writes, (r.standard_normal(3),), 0),
    ]


JACREV_IDS = ["loop-branch", "loop-branch-both", "loop-other-branch", "helper-matrix-output", "nn-layer",
              "scalar-output", "writes"]


@pytest.mark.parametrize("chunk_size", [None, 1, 5])
@pytest.mark.parametrize("case", range(7), ids=JACREV_IDS)
def test_jacrev_in_chunks_runs_batched_and_equals_jacfwd_and_differences(case, chunk_size):
    f, args, wrt = _jacrev_cases(np.float64)[case]
    J = srcgrad.jacrev(f, wrt=wrt, chunk_size=chunk_size)
    value = J(*args)
    assert batched(J)
    several = isinstance(wrt, tuple)
    forward = srcgrad.jacfwd(f, wrt=wrt)(*args)
    for got, want, i in zip(value if several else (value,), forward if several else (forward,),
                            wrt if several else (wrt,)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)

        def moved(xi, i=i):
            return f(*args[:i], xi, *args[i + 1:])
        np.testing.assert_allclose(got, difference_jacobian(moved, args[i]), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("case", range(7), ids=JACREV_IDS)
def test_jacrev_float32_stays_float32(case):
    f, args, wrt = _jacrev_cases(np.float32)[case]
    args32 = tuple(a.astype(np.float32) if isinstance(a, np.ndarray) else a for a in args)
    J = srcgrad.jacrev(f, wrt=wrt, chunk_size=3)
    value = J(*args32)
    assert batched(J)
    expected = srcgrad.jacrev(f, wrt=wrt)(*args)
    for got, want in zip(value if isinstance(wrt, tuple) else (value,),
                         expected if isinstance(wrt, tuple) else (expected,)):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("case", [1, 3], ids=["cnn-overlapping-max", "cnn-avg"])
def test_hessian_of_a_model_runs_batched_and_equals_hvp_column_by_column(case):
    """An srcgrad.nn model's parameters (a structure: its gradient, and the tangent of
    that, sparse): one batched run per chunk, its leaves put in the model's place."""
    from tests.modes.higher_cases import _leaves, _model_cases
    from srcgrad import tree
    f, model, x, y = _model_cases(np.float64)[case]
    H = srcgrad.hessian(f, chunk_size=16)
    value = H(model, x, y)
    assert batched(H)
    leaves = _leaves(model)
    spec = tree.flatten(model)[2]
    hvp = srcgrad.hvp(f)
    sizes = [leaf.size for leaf in leaves]
    for k in range(0, sum(sizes), 7):  # every 7th column, against hvp along its unit vector
        e = np.zeros(sum(sizes))
        e[k] = 1
        parts, at = [], 0
        for leaf in leaves:
            parts.append(e[at:at + leaf.size].reshape(leaf.shape))
            at += leaf.size
        column = _leaves(hvp(model, x, y, tree.unflatten(spec, parts)))
        a = int(np.searchsorted(np.cumsum(sizes), k, side="right"))
        p = k - sum(sizes[:a])
        blocks = _leaves(value)  # H[a][b] in order, a.shape + b.shape
        assert len(blocks) == len(leaves) ** 2
        for b, leaf in enumerate(leaves):
            row = blocks[a * len(leaves) + b].reshape(sizes[a], leaf.size)[p]
            np.testing.assert_allclose(row, column[b].ravel(), rtol=1e-10, atol=1e-12)


# ---- jacfwd / jacrev with respect to a structure: blocks in its structure (as jax on a pytree) ----

def dict_layer(params, x):
    """A dict of arrays, broadcasting the bias."""
    return np.tanh(x @ params["w"] + params["b"])


def stacked_layers(layers, x):
    """A list of (w, b) tuples, in a loop."""
    for w, b in layers:
        x = np.tanh(x @ w + b)
    return x


def model_output(model, x):
    """An srcgrad.nn model's output with respect to its parameters (an object of them)."""
    return np.sin(model(x))


def _structure_cases(dtype):
    r = np.random.default_rng(8)
    nn.init.manual_seed(1)

    def a(*shape):
        return r.standard_normal(shape).astype(dtype)
    model = nn.Sequential(nn.Linear(3, 4, dtype=dtype), nn.Tanh(), nn.Linear(4, 2, dtype=dtype))
    return [
        (dict_layer, ({"w": a(3, 2), "b": a(2)}, a(4, 3)), 0),
        (dict_layer, ({"w": a(3, 2), "b": a(2)}, a(4, 3)), (0, 1)),  # a structure and an array
        (stacked_layers, ([(a(3, 4), a(4)), (a(4, 2), a(2))], a(2, 3)), 0),
        (model_output, (model, a(2, 3)), 0),
    ]


STRUCTURE_IDS = ["dict", "dict-and-array", "list-of-tuples", "nn-sequential"]


def structure_difference(f, args, i, eps=1e-6):
    """Central differences of ``f`` in each leaf of ``args[i]``: that argument's structure
    (its leaves' blocks, ``y.shape + leaf.shape``), in float64."""
    leaves, spec = tree.flatten(args[i])[1:]
    blocks = []
    for a, leaf in enumerate(leaves):
        def moved(value, a=a):
            new = tree.unflatten(spec, [value if b == a else x for b, x in enumerate(leaves)])
            return f(*args[:i], new, *args[i + 1:])
        blocks.append(difference_jacobian(moved, np.asarray(leaf, float), eps))
    return tree.unflatten(spec, blocks)


@pytest.mark.parametrize("chunk_size", [None, 1, 5])
@pytest.mark.parametrize("case", range(4), ids=STRUCTURE_IDS)
def test_jacobians_with_respect_to_a_structure_are_blocks_in_it(case, chunk_size):
    f, args, wrt = _structure_cases(np.float64)[case]
    JF = srcgrad.jacfwd(f, wrt=wrt, chunk_size=chunk_size)
    JR = srcgrad.jacrev(f, wrt=wrt, chunk_size=chunk_size)
    forward, reverse = JF(*args), JR(*args)
    assert batched(JF) and batched(JR)
    several = isinstance(wrt, tuple)
    y = np.asarray(f(*args))
    for got_f, got_r, i in zip(forward if several else (forward,), reverse if several else (reverse,),
                               wrt if several else (wrt,)):
        assert type(got_f) is type(got_r)
        expected = structure_difference(f, args, i) if tree.is_structure(args[i]) \
            else difference_jacobian(lambda xi, i=i: f(*args[:i], xi, *args[i + 1:]), args[i])
        for a, b, e, x in zip(*(tree.flatten(t)[1] if tree.is_structure(args[i]) else [t]
                                for t in (got_f, got_r, expected, args[i]))):
            assert a.shape == y.shape + np.shape(x)
            np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(a, e, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("case", range(4), ids=STRUCTURE_IDS)
def test_jacobians_with_respect_to_a_float32_structure_stay_float32(case):
    f, args, wrt = _structure_cases(np.float32)[case]
    f64, args64, _ = _structure_cases(np.float64)[case]
    expected = srcgrad.jacrev(f64, wrt=wrt)(*args64)
    for J in (srcgrad.jacfwd(f, wrt=wrt, chunk_size=3), srcgrad.jacrev(f, wrt=wrt, chunk_size=3)):
        value = J(*args)
        assert batched(J)
        for got, want in zip(tree.flatten(value)[1], tree.flatten(expected)[1]):
            assert got.dtype == np.float32
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_jacobians_of_a_tuple_output_with_respect_to_a_structure():
    """One structure of blocks per output (outermost), the rows pulled back one at a time."""
    def two(params, x):
        y = np.tanh(x @ params["w"] + params["b"])
        return y, np.sum(y * params["b"])
    f, (params, x), _ = _structure_cases(np.float64)[0]
    forward, reverse = srcgrad.jacfwd(two)(params, x), srcgrad.jacrev(two)(params, x)
    for o, y in enumerate(two(params, x)):
        expected = structure_difference(lambda p, x: two(p, x)[o], (params, x), 0)
        for k in ("w", "b"):
            assert forward[o][k].shape == np.shape(y) + params[k].shape
            np.testing.assert_allclose(forward[o][k], reverse[o][k], rtol=1e-10, atol=1e-12)
            np.testing.assert_allclose(forward[o][k], expected[k], rtol=1e-6, atol=1e-8)


def test_an_integer_leaf_has_no_jacobian_block_as_it_has_no_gradient():
    """As grad gives None for it: no columns, None in its place (float32 kept)."""
    params = {"w": np.array([1.0, 2.0], np.float32), "n": np.array([2, 3])}

    def scaled(params):
        return params["w"] * params["n"]

    def loss(params):
        return np.sum(scaled(params) ** 2)
    assert srcgrad.grad(loss)(params)["n"] is None
    for J in (srcgrad.jacfwd(scaled, chunk_size=1), srcgrad.jacrev(scaled)):
        value = J(params)
        assert value["n"] is None and value["w"].dtype == np.float32
        np.testing.assert_allclose(value["w"], np.diag([2.0, 3.0]))
    H = srcgrad.hessian(loss)(params)
    assert H["n"] is None and H["w"]["n"] is None
    np.testing.assert_allclose(H["w"]["w"], np.diag([8.0, 18.0]))
