"""Writes into arrays: ``y[i] = v``, ``y[mask] = 0``, slices, ``s[i, j] += v``.

The write stays in place; the overwritten elements are saved and put back in
the backward sweep, so an adjoint that still needs them gets the right values.
Writes that may reach another array (a view, an argument) are refused.
"""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from conftest import numerical_grad


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
    (write_into_another_name, "z = y"),
])
def test_writes_that_may_alias_are_refused(fn, why):
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as excinfo:
        srcgrad.grad(fn)(np.ones(3))
    message = str(excinfo.value)
    assert why in message and "np.copy" in message


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


def test_reading_an_item_of_an_appended_list_is_reported():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="np.stack"):
        srcgrad.grad(reads_item_of_appended_list)(np.ones(3))
