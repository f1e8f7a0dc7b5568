"""A slice of a list whose items are known when the code runs only (grown with append,
built by a comprehension, a MAML step's list of parameters): a new list of the same
items, each item's adjoint added back to the one it came from (``rt.add_item``)."""
import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad


def of_a_comprehension(w):
    hs = [w * i for i in range(4)]
    tail = hs[1:]
    return np.sum(np.stack(tail) ** 2) + np.sum(hs[-1])


def all_but_the_last_parameter(w):
    params = [w, w * 2.0, w * 3.0]
    for _ in range(2):
        grads = [p * 0.1 for p in params]
        params = [p - g * 0.5 for p, g in zip(params, grads)]
    hidden = params[:-1]
    return sum(np.sum(p ** 2) for p in hidden) + np.sum(params[-1])


def of_appended_states_with_a_step(w):
    hs = []
    h = w
    for _ in range(4):
        h = np.tanh(h * w)
        hs.append(h)
    return np.sum(np.stack(hs[1:])) + np.sum(hs[::2][0]) + np.sum(hs[::2][1])


def in_a_loop(w):
    hs = [w]
    total = 0.0
    for _ in range(3):
        hs.append(hs[-1] * w)
        last_two = hs[-2:]
        total = total + np.sum(last_two[0] * last_two[-1])
    return total


class Stack:
    def __init__(self, depth):
        self.depth = depth

    def run(self, w):
        outs = [np.sin(w * k) for k in range(self.depth)]
        return np.sum(np.stack(outs[1:-1]) ** 2)


def as_a_method(w):
    return Stack(4).run(w)


CASES = [of_a_comprehension, all_but_the_last_parameter, of_appended_states_with_a_step, in_a_loop, as_a_method]


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("f", CASES, ids=[f.__name__ for f in CASES])
def test_gradient_matches_finite_differences(f, optimize):
    w = np.array([0.3, -0.7, 1.1])
    got = srcgrad.grad(f, optimize=optimize)(w)
    np.testing.assert_allclose(got, numerical_grad(f, (w,), 0), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("f", CASES, ids=[f.__name__ for f in CASES])
def test_float32(f):
    w = np.array([0.3, -0.7, 1.1], dtype=np.float32)
    got = srcgrad.grad(f)(w)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, numerical_grad(f, (w.astype(np.float64),), 0), rtol=2e-3, atol=1e-4)


def test_an_index_list_is_still_refused_at_the_users_line():
    def picked(w):
        hs = [w * i for i in range(4)]
        return np.sum(hs[[0, 2]])

    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="one integer index or a slice") as raised:
        srcgrad.grad(picked)(np.ones(3))
    assert "test_slices_of_lists.py:" in str(raised.value)


def popped_from_a_slice(w):
    hs = [w * (i + 1.0) for i in range(3)]
    ys = hs[1:]
    last = ys.pop()
    return np.sum(last * w)


def popped_from_a_preallocated_list(w):
    hs = [None] * 3
    for i in range(3):
        hs[i] = w * (i + 1.0)
    last = hs.pop()
    return np.sum(last * w)


def read_by_index_instead(w):
    hs = [w * (i + 1.0) for i in range(3)]
    ys = hs[1:]
    last = ys[-1]
    ys = ys[:-1]
    return np.sum(last * w) + np.sum(ys[-1])


@pytest.mark.parametrize("mode", ["grad", "jvp"])
@pytest.mark.parametrize("f", [popped_from_a_slice, popped_from_a_preallocated_list])
def test_a_method_of_a_list_known_when_it_runs_is_refused_not_zero(f, mode):
    # (list.pop called through dispatch took the list for a function without parameters:
    # the popped item's derivative was dropped, silently)
    w = np.array([0.3, -0.7, 1.1])
    transformed = srcgrad.grad(f) if mode == "grad" else srcgrad.jvp(f)
    args = (w,) if mode == "grad" else (w, np.ones(3))
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"`\.pop\(\)` of `(ys|hs)`, a list") as raised:
        transformed(*args)
    assert "test_slices_of_lists.py:" in str(raised.value)


def test_the_refusals_advice_compiles():
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(read_by_index_instead)(w),
                               numerical_grad(read_by_index_instead, (w,), 0), rtol=1e-6)


def rows_of_the_argument_written(w):
    rows = list(w.reshape(3, 1) * np.ones((3, 2)))
    rows[0] = rows[0] * 2.0
    return np.sum(rows[0] * rows[2])


def items_of_the_argument_reversed_by_a_slice(w):
    vals = list(w)
    vals = vals[::-1]
    return vals[0] * vals[1]


def items_of_the_argument_joined(w):
    vals = list(w)
    vals = vals + [w[0] * 3.0]
    return vals[0] * vals[-1] + sum(vals)


@pytest.mark.parametrize("f", [rows_of_the_argument_written, items_of_the_argument_reversed_by_a_slice,
                               items_of_the_argument_joined])
def test_a_list_of_an_arrays_rows(f):
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(f)(w), numerical_grad(f, (w,), 0), rtol=1e-6, atol=1e-8)
    _, tangent = srcgrad.jvp(f)(w, np.ones(3))
    np.testing.assert_allclose(tangent, numerical_grad(f, (w,), 0).sum(), rtol=1e-6)


def reversed_in_place(w):
    vals = list(w)
    vals.reverse()  # (a new version of `vals`: rt.reversed_list)
    return vals[0] * vals[1]


def test_a_change_of_order_in_place():
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(reversed_in_place)(w), numerical_grad(reversed_in_place, (w,), 0),
                               rtol=1e-6)
