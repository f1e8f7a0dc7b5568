"""Tuples and lists built the ordinary ways: joined (`t + (h,)`, `xs + ys`), repeated
(`[h] * 3`), grown with `+=`, bound in parallel (`hs, cs = [], []`) — with items
known when compiling and with items known only when the code runs (a tuple grown in
a loop).  Gradients against central finite differences, in a loop, a helper, a
method and float32."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from test_container_adjoints import check


def joined_displays(x):
    t = (x,) + (x * 2.0,)
    return np.sum(t[0] * t[1])


def grown_in_a_loop(x):
    t = ()
    for i in range(3):
        t = t + (np.sin(x) * (i + 1),)
    a, b, c = t
    return np.sum(a + b * c)


def list_grown_in_a_loop_and_read_by_index(x):
    hs = []
    for i in range(3):
        hs = hs + [x * (i + 1.0)]
    return np.sum(hs[0] * hs[2]) + np.sum(hs[-2])


def repeated(x):
    hs = [x] * 3
    return np.sum(hs[0] * hs[2] + hs[1])


def repeated_in_a_loop(x):
    total = 0.0
    for k in range(1, 3):
        ts = (x * k,) * 2
        total = total + np.sum(ts[0] * ts[1])
    return total


def joined_lists(x, y):
    xs = [x, y]
    ys = xs + [x * y]
    return np.sum(ys[0] * ys[2]) + np.sum(ys[1])


def grown_with_augmented_add(x):
    outs = []
    for i in range(3):
        outs += [x * (i + 1)]
    return np.sum(outs[0] * outs[2])


def bound_in_parallel(x):
    hs, cs = [], []
    for i in range(2):
        hs.append(np.tanh(x) * i)
        cs.append(x)
    return np.sum(hs[1] * cs[0])


def _with_bias(t, b):
    return t + (b,)


def joined_in_a_helper(x):
    w, b = _with_bias((x * 2.0,), np.cos(x))
    return np.sum(w * b)


class Stack:
    def __init__(self, w):
        self.w = w

    def states(self, x):
        hs = ()
        for _ in range(2):
            x = np.tanh(x * self.w)
            hs = hs + (x,)
        return hs

    def loss(self, x):
        hs = self.states(x)
        return np.sum(hs[0] + hs[1] ** 2)


def stacked(model, x):
    return model.loss(x)


@pytest.mark.parametrize("f", [joined_displays, grown_in_a_loop, list_grown_in_a_loop_and_read_by_index, repeated,
                               repeated_in_a_loop, grown_with_augmented_add, bound_in_parallel,
                               joined_in_a_helper])
def test_built_sequences_carry_each_items_adjoint(f):
    check(f, np.array([0.4, -1.3]))


def test_joined_lists_in_each_argument():
    x, y = np.array([0.4, -1.3]), np.array([2.0, 0.5])
    check(joined_lists, x, y, index=0)
    check(joined_lists, x, y, index=1)


def test_a_method_growing_a_tuple():
    model, x = Stack(np.array([0.5, -0.7])), np.array([0.3, 1.1])
    g = srcgrad.grad(stacked)(model, x)
    check(lambda w, x: stacked(Stack(w), x), model.w, x)
    check(stacked, model, x, index=1)
    assert g.w.shape == (2,)


@pytest.mark.parametrize("f", [grown_in_a_loop, repeated, bound_in_parallel])
def test_built_sequences_in_float32(f):
    x = np.array([0.4, -1.3], np.float32)
    g = srcgrad.grad(f)(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, srcgrad.grad(f)(x.astype(np.float64)), rtol=1e-5)


def test_exact_values():
    np.testing.assert_array_equal(srcgrad.grad(joined_displays)(np.ones(2)), [4.0, 4.0])
    np.testing.assert_array_equal(srcgrad.grad(repeated)(np.ones(2)), [3.0, 3.0])
    np.testing.assert_array_equal(srcgrad.grad(grown_with_augmented_add)(np.ones(2)), [6.0, 6.0])


def test_shapes_still_join_as_written():
    def f(x):
        return np.sum(np.reshape(x, x.shape + (1,)) * 2.0)
    np.testing.assert_array_equal(srcgrad.grad(f)(np.ones(3)), [2.0, 2.0, 2.0])


@pytest.mark.parametrize("f", [joined_displays, grown_in_a_loop, repeated, repeated_in_a_loop, joined_in_a_helper])
def test_forward_mode_through_built_sequences(f):
    x, v = np.array([0.4, -1.3]), np.array([1.0, -2.0])
    _, tangent = srcgrad.jvp(f)(x, v)
    np.testing.assert_allclose(tangent, np.dot(srcgrad.grad(f)(x), v), rtol=1e-12)


def copied_parameters(params):
    ps = list(params)
    t = tuple(params)
    return np.sum(ps[0] * t[1]) + np.sum(ps[1])


def dict_of_keywords(w, b):
    p = dict(W=w, b=b)
    return np.sum(p["W"] * np.sin(p["b"]))


def item_replaced(x):
    xs = [x, x * 2.0]
    xs[0] = xs[0] * 3.0
    xs[-1] = np.sin(xs[1])
    return np.sum(xs[0] * xs[1])


def item_replaced_in_each_iteration(x):
    total = 0.0
    for k in range(3):
        xs = [x, x * k]
        xs[1] = xs[1] * x
        total = total + np.sum(xs[1] + xs[0])
    return total


def item_of_a_list_from_before_the_loop(x):
    xs = [x, x]
    for _ in range(2):
        xs[1] = xs[1] * x
    return np.sum(xs[1])


def test_list_and_tuple_of_passed_in_parameters():
    check(copied_parameters, (np.array([0.5, -1.0]), np.array([2.0, 0.3])))


def test_dict_of_keywords():
    check(dict_of_keywords, np.array([0.5, -1.0]), np.array([2.0, 0.3]), index=0)
    check(dict_of_keywords, np.array([0.5, -1.0]), np.array([2.0, 0.3]), index=1)


@pytest.mark.parametrize("f", [item_replaced, item_replaced_in_each_iteration])
def test_an_item_of_a_list_made_here_replaced(f):
    check(f, np.array([0.5, -1.0]))


def test_an_item_of_a_list_from_outside_the_loop_is_refused():
    # (each iteration would need the list's version from the one before: not followed yet)
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="writing into an element of the list"):
        srcgrad.grad(item_of_a_list_from_before_the_loop)(np.ones(2))
