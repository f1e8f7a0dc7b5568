"""Writes into a list or dict whose kind is known only when the code runs (made by a call:
``collections.defaultdict(float)``, ``OrderedDict()``, ``dict(CONST)``, ``list(range(3))``,
``[0.0] * n``): ``y[k] = v`` and ``y[k] += v``.  The value's adjoint is the container's
entry (``rt.written_entry``), the overwritten entry's is dropped (``rt.overwritten_adjoint``),
and a container never rounds what it holds (``rt.cast_adjoint``).  These once crashed
(``d_bar['a'] = 0`` on a NumPy copy of a dict) or gave zero gradients silently (the list of
ints taken for an integer array)."""
from __future__ import annotations

import collections
from collections import OrderedDict, defaultdict

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad

W = np.array([0.3, -0.7, 1.1])
KEYS = ["a", "b", "a"]
CONST = {"a": np.ones(3)}


def defaultdict_add(w):
    d = collections.defaultdict(float)
    d["a"] += np.sum(w ** 2)
    d["a"] += np.sum(w)
    return d["a"]


def defaultdict_in_a_loop(w):
    d = defaultdict(float)
    for k in KEYS:
        d[k] += np.sum(w ** 2) * len(k)
    return d["a"] * d["b"]


def defaultdict_values(w):
    d = defaultdict(float)
    d["a"] += np.sum(np.sin(w))
    d["b"] = d["a"] * 2
    return sum(d.values())


def defaultdict_entry_overwritten(w):
    d = defaultdict(float)
    d["a"] = w * 2
    d["a"] = d["a"] * w
    d["b"] = np.sum(w)  # (nothing reads it: its adjoint is zeros)
    return np.sum(d["a"])


def _zero():
    return 0.0


def defaultdict_of_a_function(w):
    d = defaultdict(_zero)
    d["x"] += np.sum(w ** 3)
    return d["x"]


class Totals:
    def loss(self, w):
        tot = defaultdict(float)
        for i in range(3):
            tot["s"] += w[i] ** 2
        return tot["s"]


def defaultdict_in_a_method(w):
    return Totals().loss(w)


def ordered_dict(w):
    d = OrderedDict()
    d["x"] = w * 2
    return np.sum(d["x"])


def dict_of_a_global(w):
    d = dict(CONST)
    d["a"] = d["a"] * w
    return np.sum(d["a"] ** 2)


def list_of_a_range(w):
    xs = list(range(3))
    xs[1] = np.sum(w ** 2)
    xs[-1] = np.sum(np.sin(w))
    return sum(xs)


def list_of_zeros(w, n):
    xs = [0.0] * n
    xs[0] = np.sum(w ** 2)
    return xs[0] + xs[1]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("f", [defaultdict_add, defaultdict_in_a_loop, defaultdict_values,
                               defaultdict_entry_overwritten, defaultdict_of_a_function,
                               defaultdict_in_a_method, ordered_dict, dict_of_a_global, list_of_a_range])
def test_a_write_into_a_container_made_by_a_call(f, dtype):
    w = W.astype(dtype)
    g = srcgrad.grad(f)(w)
    assert g.dtype == dtype
    want = numerical_grad(f, [W], 0)
    np.testing.assert_allclose(g, want, rtol=1e-4 if dtype == np.float32 else 1e-6, atol=1e-6)
    if dtype == np.float64:
        v = np.array([1.0, -2.0, 0.5])
        _, tangent = srcgrad.jvp(f)(W, v)
        assert tangent == pytest.approx(want @ v, rel=1e-6)
        _, pullback = srcgrad.vjp(f)(W)
        np.testing.assert_allclose(pullback(2.0), 2 * want, rtol=1e-6, atol=1e-8)


def accumulated_in_a_list(w, k):
    losses = [0.0] * k
    for i in range(4):
        losses[i % k] = losses[i % k] + np.sum(w ** (i + 1))
    return losses[0] * 2.0 + sum(losses)


@pytest.mark.parametrize("f", [list_of_zeros, accumulated_in_a_list])
def test_a_list_of_zeros_of_a_length_passed_in(f):
    # (the list's adjoint is dense, one per item: the entry overwritten is dropped from it)
    want = numerical_grad(f, [W, 2], 0)
    np.testing.assert_allclose(srcgrad.grad(f)(W, 2), want, rtol=1e-6)
    g32 = srcgrad.grad(f)(W.astype(np.float32), 2)
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, want, rtol=1e-4)
    v = np.array([1.0, -2.0, 0.5])
    assert srcgrad.jvp(f)(W, 2, v)[1] == pytest.approx(want @ v, rel=1e-6)


def test_an_array_of_objects_keeps_what_is_written():
    # (its dtype is not an integer's: the value written is held as it is, not rounded)
    def f(w):
        buf = np.empty(2, dtype=object)
        buf[0] = w * 2
        buf[1] = np.sin(w)
        buf[0] = buf[0] * buf[1]
        return np.sum(buf[0] ** 2) + np.sum(buf[1])

    np.testing.assert_allclose(srcgrad.grad(f)(W), numerical_grad(f, [W], 0), rtol=1e-6)


def test_a_dict_made_by_dict_fromkeys_is_written_into():
    def shared(w):
        d = dict.fromkeys(KEYS)  # (a new dict: rt.fromkeys)
        d["a"] = w ** 2
        return np.sum(d["a"])

    np.testing.assert_allclose(srcgrad.grad(shared)(W), 2 * W)

    def advised(w):
        d = dict.fromkeys(KEYS)
        d = dict(d)
        d["a"] = w ** 2
        return np.sum(d["a"])

    np.testing.assert_allclose(srcgrad.grad(advised)(W), 2 * W)


# ---- a dict whose keys a loop changes: known when it runs only ---------------------------

def keys_added_in_a_loop(w):
    d = {}
    d["a"] = w
    for _ in range(2):
        d["b"] = w * 2.0
    return sum(d.values())


def entry_read_with_a_default_in_a_loop(w):
    d = {}
    d["a"] = 1.0
    for _ in range(3):
        d["s"] = d.get("s", 0.0) + w * w
    return d["s"] * d["a"]


def keys_iterated_after_a_loop(w):
    d = {"a": w}
    for k in range(2):
        d[k] = w * (k + 1.0)
    total = 0.0
    for key in d:
        total = total + d[key] ** 2
    return total + len(d)


@pytest.mark.parametrize("f", [keys_added_in_a_loop, entry_read_with_a_default_in_a_loop,
                               keys_iterated_after_a_loop])
def test_a_dict_a_loop_adds_keys_to(f):
    # (its keys were taken as those before the loop: value and gradient silently wrong)
    for w in (0.7, -1.3):
        value, grad = srcgrad.value_and_grad(f)(w)
        assert value == pytest.approx(f(w))
        assert grad == pytest.approx((f(w + 1e-6) - f(w - 1e-6)) / 2e-6, rel=1e-6)


def set_default_in_a_loop(w):
    d = {}
    d["a"] = 0.0
    for _ in range(2):
        d.setdefault("b", w)
    return d["b"]


def test_set_default_in_a_loop_adds_the_key_once():
    # (refused before, rather than counted twice: `if "b" not in d: d["b"] = w` now, each iteration)
    value, grad = srcgrad.value_and_grad(set_default_in_a_loop)(1.3)
    assert value == pytest.approx(1.3) and grad == pytest.approx(1.0)


def comprehension_item_replaced(w):
    hs = [w * i for i in range(3)]
    hs[1] = np.exp(w)
    return np.sum(hs[1]) + np.sum(hs[2])


def test_an_item_of_a_comprehension_replaced_unread():
    # (the appends' adjoints pop the list's adjoint: the replaced item's must stay a zero there)
    w = np.array([0.3, -0.7])
    np.testing.assert_allclose(srcgrad.grad(comprehension_item_replaced)(w), np.exp(w) + 2.0)
