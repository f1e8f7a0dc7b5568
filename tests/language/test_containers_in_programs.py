"""Lists, tuples and dicts in programs: joined and grown sequences, writes into dict keys,
tuples rebuilt in loops, copies of containers, negative indices, `enumerate` with a start,
unsupported operations named."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad.testing import check_grads


X = np.array([0.3, -1.2, 0.7])


def write_into_list_element(x):
    items = [x, x]
    items[0] = x * 3
    return np.sum(items[0] + items[1])


def write_into_dict_key(x):
    d = {"a": x, "b": x**2}
    d["c"] = d["a"] * d["b"]
    return np.sum(d["c"])


def augmented_list(x):
    items = []
    items += [x * 2]
    return np.sum(items[0])


def test_joined_and_grown_sequences_are_differentiated():
    # (refused before; tests/language/test_sequence_building.py tests the kind)
    np.testing.assert_allclose(srcgrad.grad(write_into_list_element)(X), 4 * np.ones_like(X))
    np.testing.assert_allclose(srcgrad.grad(augmented_list)(X), 2 * np.ones_like(X))
    np.testing.assert_allclose(srcgrad.grad(joins_tuples)(X), 2 * np.ones_like(X))


def test_write_into_a_dict_key_is_differentiated():
    np.testing.assert_allclose(srcgrad.grad(write_into_dict_key)(X), 3 * X ** 2, rtol=1e-12)


def swaps_a_tuple_in_a_loop(a, b):
    pair = (a, b)
    for _ in range(3):
        pair = (pair[1], pair[0] * 2.0)
    return pair[0] * 3.0 + pair[1]


def stacks_a_tuple_argument(xs):
    return np.sum(np.stack(xs) ** 2) + np.sum(xs[0])


def test_tuple_rebuilt_in_a_loop_is_not_read_as_its_first_contents():
    # Found with *args/**kwargs (spreading reads a tuple's elements the same way):
    # gave (3.0, 1.0), the elements of `pair` before the loop.
    assert srcgrad.grad(swaps_a_tuple_in_a_loop, wrt=(0, 1))(1.0, 10.0) == (4.0, 6.0)


def test_stack_of_a_tuple_argument_gets_its_gradient():
    # Gave zeros: the rule's adjoint (a list) was not matched to the tuple.
    xs = (X, X * 2)
    g = srcgrad.grad(stacks_a_tuple_argument)(xs)
    assert isinstance(g, tuple)
    np.testing.assert_allclose(g[0], 2 * X + 1, rtol=1e-12)
    np.testing.assert_allclose(g[1], 4 * X, rtol=1e-12)


def copies_a_list(x):
    xs = [x, 2 * x]
    ys = list(xs)
    return np.sum(ys[0] * ys[1])


def copies_into_a_tuple(x):
    ys = tuple([x, 2 * x])
    return np.sum(ys[0] * ys[1])


def rows_of_an_array(x):
    rows = list(x)
    return rows[0] * rows[1]


def copies_a_dict(x):
    e = dict({"a": x})
    return np.sum(e["a"] ** 2)


@pytest.mark.parametrize("fn", [copies_a_list, copies_into_a_tuple, rows_of_an_array])
def test_container_copies_of_known_items_carry_the_gradient(fn):
    """`list(xs)`, `tuple([...])` of items known when compiling: a new list or tuple of them;
    `list(x)` of an array: its rows, whose adjoints reach `x` (`rt.sequence_of`; once refused)."""
    check_grads(fn, (X,))


@pytest.mark.parametrize("fn", [copies_a_dict])
def test_container_copies_of_differentiated_values_carry_the_gradient(fn):
    """They gave a zero gradient silently, then were refused; now `list(x)` / `dict(d)` have
    a rule of their own (`rt.sequence_of`, `rt.mapping_of`): each item's adjoint is its own."""
    check_grads(fn, (X,))


def two_outputs(a):
    return a * 2, a[0]


def indexes_a_returned_tuple(x):
    p = two_outputs(x)
    return p[1] * np.sum(p[0])


def last_of_var_positional(*xs):
    return np.sum(xs[-1] * xs[0])


def spreads_into_last_of(x):
    return last_of_var_positional(*(x, x * 3), x)


def test_a_returned_tuple_indexed_and_negative_indices_into_tuples():
    """Each gave a zero or wrong gradient silently: a tuple a call returned, kept
    whole and indexed (its sparse adjoint was read as a sequence); `xs[-1]` into
    `*xs` (the key -1 matched no item)."""
    check_grads(indexes_a_returned_tuple, (X,))
    y = X[::-1].copy()
    np.testing.assert_allclose(srcgrad.grad(last_of_var_positional, wrt=(0, 1))(X, y), (y, X), rtol=1e-14)
    check_grads(spreads_into_last_of, (X,))


def enumerate_with_a_start(x):
    s = 0.0
    for i, v in enumerate(x, start=1):
        s = s + v * i
    return s


def test_enumerate_with_a_start_counts_from_it():
    """Its start was ignored silently, then refused; now `i = _i + start` in the body."""
    check_grads(enumerate_with_a_start, (X,))
    np.testing.assert_allclose(srcgrad.grad(enumerate_with_a_start)(X), np.arange(1, len(X) + 1), rtol=1e-14)


def last_of_a_local_tuple(x):
    ys = (x, x * 3, x * 2)
    a, b = ys[1:]
    return np.sum(ys[-1]) + np.sum(a * b)


def rows_unpacked(m):
    a, b = m
    return np.sum(a * b)


def test_negative_indices_slices_and_rows_unpacked():
    """Each crashed inside the generated code."""
    check_grads(last_of_a_local_tuple, (X,))
    m = np.array([[0.3, 1.2], [0.5, -0.7]])
    np.testing.assert_allclose(srcgrad.grad(rows_unpacked)(m), [m[1], m[0]], rtol=1e-14)


def joins_tuples(x):
    t = (x,) + (x * 2,)
    return np.sum(t[1])


def reads_a_dict_with_get(x):
    d = {"b": x**2}
    return np.sum(d.get("b", x))


def fills(x):
    y = x * 1.0
    y.fill(1.0)
    return np.sum(y)


@pytest.mark.parametrize("fn, message", [
    (fills, r"write it as an assignment"),
])
def test_unsupported_container_and_array_operations_are_named(fn, message):
    """Each crashed inside srcgrad or the generated code (or advised `np.fill`).
    (`d.get("b", x)` was refused here; now it is `d["b"]`: tests/soundness/test_trust_containers.py.)"""
    with pytest.raises(srcgrad.errors.UserCodeError, match=message):
        srcgrad.grad(fn)(X)


# ---- pytree helpers written by hand: `type(t)(...)` rebuilds what they were given -------

def _tree_map(fn, t):
    if isinstance(t, dict):
        return {k: _tree_map(fn, v) for k, v in t.items()}
    if isinstance(t, (list, tuple)):
        return type(t)(_tree_map(fn, v) for v in t)
    return fn(t)


def _tree_sum(t):
    if isinstance(t, dict):
        return sum(_tree_sum(v) for v in t.values())
    if isinstance(t, (list, tuple)):
        return sum(_tree_sum(v) for v in t)
    return np.sum(t)


def _sgd_step(p, g):
    if isinstance(p, (list, tuple)):
        return type(p)([a - 0.1 * b for a, b in zip(p, g)])
    return p - 0.1 * g


def _regularised(p, x):
    h = x
    for layer in p["enc"]:
        h = np.tanh(h @ layer["W"] + layer["b"])
    dec, bias = p["dec"]
    return np.sum((h @ dec["W"] + bias) ** 2) + 1e-2 * _tree_sum(_tree_map(lambda a: a ** 2, p))


def _after_a_step(ws, x):
    q = _sgd_step(ws, (x, x * 2))
    return np.sum(q[0] * q[1])


def test_pytree_helpers_that_rebuild_with_type_of_the_container():
    from srcgrad.testing import check_grads

    rng = np.random.default_rng(12)
    p = {"enc": [{"W": rng.standard_normal((3, 4)), "b": np.zeros(4)},
                 {"W": rng.standard_normal((4, 4)), "b": np.zeros(4)}],
         "dec": ({"W": rng.standard_normal((4, 2))}, 0.5 * np.ones(2))}
    x = rng.standard_normal((5, 3))
    check_grads(_regularised, (p, x), wrt=0)
    for ws in ([rng.standard_normal(3), rng.standard_normal(3)], (rng.standard_normal(3), rng.standard_normal(3))):
        check_grads(_after_a_step, (ws, rng.standard_normal(3)), wrt=(0, 1))


def _flatten_tree(t):
    out = []
    if isinstance(t, dict):
        for k in sorted(t):
            out.extend(_flatten_tree(t[k]))
    elif isinstance(t, (list, tuple)):
        for v in t:
            out.extend(_flatten_tree(v))
    else:
        out.append(t)
    return out


def _flattened_loss(p, x):
    leaves = _flatten_tree(p)
    rows = []
    rows.extend(np.tanh(leaf * x[: leaf.shape[0]]) for leaf in leaves)  # (a generator: its items)
    return sum(np.sum(r ** 2) for r in rows) + np.sum(leaves[0] * leaves[-1][:2])


def test_a_list_extended_by_items_known_when_it_runs():
    from srcgrad.testing import check_grads

    rng = np.random.default_rng(4)
    p = {"a": [rng.standard_normal(2), rng.standard_normal(1)], "b": rng.standard_normal(3)}
    check_grads(_flattened_loss, (p, rng.standard_normal(3)), wrt=(0, 1))
    p32 = {"a": [v.astype(np.float32) for v in p["a"]], "b": p["b"].astype(np.float32)}
    g = srcgrad.grad(_flattened_loss)(p32, rng.standard_normal(3).astype(np.float32))
    assert g["b"].dtype == np.float32
