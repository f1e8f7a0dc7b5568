"""Writes into arrays: ``y[i] = v``, ``y[mask] = 0``, slices, ``s[i, j] += v``;
lists changed in place: ``xs.append(v)``, ``xs.pop(i)``.

The write stays in place; the overwritten elements are saved and put back in
the backward sweep, so an adjoint that still needs them gets the right values.
Writes that may reach another array (a view, an argument) are refused.
"""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad


def overwrite_value_an_adjoint_needs(x):
    s = 1 / (1 + np.exp(-x))
    s[1] = 5.0
    return np.sum(s * s)


def build_rows_in_a_loop(x):
    out = np.zeros((3, 2))
    for i in range(3):
        out[i] = x[i] * (i + 1)
    out[0, 1] += x[1, 0]
    return np.sum(out**2)


def write_through_a_mask(x):
    y = x * 2
    y[y > 1] = 0
    return np.sum(y * x)


def write_a_slice(x, v):
    y = np.copy(x)
    y[1:3] = v * 2
    return np.sum(np.sin(y) * x)


def augmented_write_in_a_loop(x):
    acc = np.zeros(2)
    for i in range(len(x)):
        acc[i % 2] += x[i] ** 2
    return np.sum(acc * acc)


def repeated_indices_write(x, v):
    y = np.copy(x)
    y[np.array([0, 0, 2])] = v
    return np.sum(y**2)


CASES = [
    (overwrite_value_an_adjoint_needs, (np.array([0.5, -0.3, 1.0]),), (0,)),
    (build_rows_in_a_loop, (np.arange(6.0).reshape(3, 2) / 5,), (0,)),
    (write_through_a_mask, (np.array([0.2, 0.7, 0.4]),), (0,)),
    (write_a_slice, (np.linspace(0, 1, 5), np.array([0.3, -0.2])), (0, 1)),
    (augmented_write_in_a_loop, (np.linspace(0.1, 1, 5),), (0,)),
    (repeated_indices_write, (np.linspace(0.1, 1, 4), 0.7), (0, 1)),
]


@pytest.mark.parametrize("optimize", [True, False], ids=["opt", "noopt"])
@pytest.mark.parametrize("fn, args, wrt", CASES, ids=[c[0].__name__ for c in CASES])
def test_writes_match_finite_differences(fn, args, wrt, optimize):
    grads = srcgrad.grad(fn, wrt=wrt, optimize=optimize)(*args)
    for i, g in zip(wrt, grads):
        np.testing.assert_allclose(g, numerical_grad(fn, args, i), rtol=1e-6, atol=1e-7)


def test_the_forward_value_sees_the_write():
    x = np.array([0.5, -0.3, 1.0])
    value, _ = srcgrad.value_and_grad(overwrite_value_an_adjoint_needs)(x)
    assert value == pytest.approx(overwrite_value_an_adjoint_needs(x.copy()))


def write_into_a_view(x):
    y = x[0:2]
    y[0] = 1.0
    return np.sum(y)


def write_into_an_argument(x):
    x[0] = 1.0
    return np.sum(x)


def write_into_another_name(x):
    y = x * 2
    z = y
    z[0] = 0.0
    return np.sum(y)


@pytest.mark.parametrize("fn, why", [
    (write_into_a_view, "y = x[0:2]"),
    (write_into_an_argument, "argument"),
])
def test_writes_that_may_alias_are_refused(fn, why):
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as excinfo:
        srcgrad.grad(fn)(np.ones(3))
    message = str(excinfo.value)
    assert why in message and "np.copy" in message


def test_a_write_through_a_copied_name_is_a_write_into_the_array():
    x = np.array([0.3, -1.2, 0.7])
    grad = srcgrad.grad(write_into_another_name)(x.copy())  # (`z = y`: one array, two names)
    np.testing.assert_allclose(grad, numerical_grad(write_into_another_name, (x,), 0), rtol=1e-6, atol=1e-7)


def collect_states_with_append(x, w):
    hs = []
    h = x
    for t in range(4):
        h = np.tanh(h @ w)
        hs.append(h)
    stacked = np.stack(hs)
    return np.sum(stacked**2) + np.sum(np.concatenate(hs, axis=0))


def test_list_append_then_stack_matches_finite_differences():
    x = np.random.default_rng(0).standard_normal((2, 3))
    w = np.eye(3) * 0.7
    grads = srcgrad.grad(collect_states_with_append, wrt=(0, 1))(x, w)
    for i, g in enumerate(grads):
        np.testing.assert_allclose(g, numerical_grad(collect_states_with_append, (x, w), i),
                                   rtol=1e-6, atol=1e-7)


def reads_item_of_appended_list(x):
    xs = []
    xs.append(x * 2)
    return np.sum(xs[0])


def reads_slice_of_appended_list(x):
    xs = []
    xs.append(x * 2)
    return np.sum(xs[0:1])


def test_reading_an_item_of_an_appended_list():
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(srcgrad.grad(reads_item_of_appended_list)(x), [2.0, 2.0, 2.0])
    # np.sum of a slice (a list of one array) is np.sum of its items: 2 each
    np.testing.assert_allclose(srcgrad.grad(reads_slice_of_appended_list)(x), [2.0, 2.0, 2.0])


# ---- list.pop: the list shrinks in place; the backward sweep puts the item back --


def pop_last(x):
    xs = [x, 2 * x, 3 * x]
    a = xs.pop()
    return np.sum(a * xs[0])


def pop_at_indices_then_stack(x):
    xs = [x, np.sin(x), x * x, np.cos(x)]
    b = xs.pop(1)
    c = xs.pop(-2)  # x * x
    xs.pop()  # the value is dropped: its adjoint is zero
    return np.sum(np.stack(xs) * b) + np.sum(c)


def stack_built_then_drained(x, w):
    stack = []
    h = x
    for i in range(3):
        h = np.tanh(h * w)
        stack.append(h)
    total = 0.0
    k = 1.0
    while len(stack) > 0:
        top = stack.pop()
        total = total + np.sum(top) * k
        k = k + 1
    return total


def drained_while_not_empty(x):
    stack = [x, x * 2]
    stack.append(np.sin(x))
    total = 0.0
    while stack:
        total = total * 0.5 + np.sum(stack.pop() ** 2)
    return total


def work_list_popped_and_pushed(x):
    work = [x]
    for i in range(3):
        v = work.pop()
        work.append(np.sin(v) + x)
        work.append(v * 2)
    return np.sum(np.stack(work) ** 2)


def pop_in_one_branch(x):
    xs = [x, x * 3]
    if np.sum(x) > 0:
        a = xs.pop(0)
    else:
        a = x * 5
    return np.sum(a) + np.sum(np.stack(xs) ** 2)


def pop_after_appends_then_stack(x):
    xs = []
    for i in range(4):
        xs.append(x * (i + 1))
    last = xs.pop()
    return np.sum(np.stack(xs) * last)


def _grown(x):
    ys = []
    for i in range(3):
        ys.append(np.sin(x * (i + 1)))
    return ys


def pop_from_a_copy_of_a_grown_list(x):
    ys = []
    for i in range(3):
        ys.append(np.tanh(x * (i + 1)))
    zs = list(ys)  # a list of this function's own: popped, read whole, the original too
    a = zs.pop()
    return np.sum(a ** 3) + np.sum(np.vstack(zs) ** 2) + np.sum(np.stack(ys) * x)


def pop_from_a_copy_of_a_helpers_list(x):
    zs = list(_grown(x))
    zs.append(np.cos(x))
    b = zs.pop(0)
    return np.sum(b * np.stack(zs))


POPS = [
    (pop_last, (np.array([0.3, -0.7, 1.1]),), (0,)),
    (pop_at_indices_then_stack, (np.array([0.3, -0.7, 1.1]),), (0,)),
    (stack_built_then_drained, (np.array([0.3, -0.7, 1.1]), 0.8), (0, 1)),
    (drained_while_not_empty, (np.array([0.3, -0.7, 1.1]),), (0,)),
    (work_list_popped_and_pushed, (np.array([0.3, -0.7, 1.1]),), (0,)),
    (pop_in_one_branch, (np.array([0.3, -0.7, 1.1]),), (0,)),
    (pop_in_one_branch, (np.array([-0.3, -0.7, 0.1]),), (0,)),
    (pop_after_appends_then_stack, (np.array([0.3, -0.7, 1.1]),), (0,)),
    (pop_from_a_copy_of_a_grown_list, (np.array([0.3, -0.7, 1.1]),), (0,)),
    (pop_from_a_copy_of_a_helpers_list, (np.array([0.3, -0.7, 1.1]),), (0,)),
]


@pytest.mark.parametrize("optimize", [True, False], ids=["opt", "noopt"])
@pytest.mark.parametrize("fn, args, wrt", POPS, ids=[c[0].__name__ for c in POPS])
def test_list_pop_matches_finite_differences(fn, args, wrt, optimize):
    grads = srcgrad.grad(fn, wrt=wrt, optimize=optimize)(*args)
    for i, g in zip(wrt, grads):
        np.testing.assert_allclose(g, numerical_grad(fn, args, i), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("fn", [pop_from_a_copy_of_a_grown_list, pop_from_a_copy_of_a_helpers_list])
def test_list_pop_from_a_copy_in_forward_mode(fn):
    x, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, -0.5, 2.0])
    value, tangent = srcgrad.jvp(fn)(x, v)
    assert value == pytest.approx(fn(x))
    np.testing.assert_allclose(tangent, srcgrad.grad(fn)(x) @ v, rtol=1e-12)


def test_a_pullback_of_a_drained_stack_can_be_called_twice():
    """The backward sweep puts popped items back: into a copy, not the forward's list."""
    x = np.array([0.3, -0.7, 1.1])
    value, pullback = srcgrad.vjp(stack_built_then_drained, wrt=(0, 1))(x, 0.8)
    assert value == pytest.approx(stack_built_then_drained(x, 0.8))
    first, second = pullback(1.0), pullback(1.0)
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


def pop_from_an_argument(xs):
    return np.sum(xs.pop())


def pop_from_a_shared_list(x):
    xs = [x, x * 2]
    ys = xs
    a = xs.pop()
    return np.sum(a) + np.sum(ys[0])


@pytest.mark.parametrize("fn, args, why", [
    (pop_from_an_argument, ([np.ones(2), np.ones(2)],), "caller's list `xs`"),
    (pop_from_a_shared_list, (np.ones(2),), "no other name refers to"),
])
def test_pops_srcgrad_cannot_follow_are_refused(fn, args, why):
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=why):
        srcgrad.grad(fn)(*args)
