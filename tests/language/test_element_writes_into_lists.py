"""``xs[i] = v`` into a Python list or dict whose items are known only when the code
runs: preallocated lists (``hs = [None] * (T + 1)``, ``[0.0] * k``), lists of an array's
rows (``list(m)``), copies of dicts (``dict(CONST)``, ``OrderedDict()``), arrays of
objects, and lists of known items written in a loop.  The write is done as written;
``v`` gets the adjoint of the entry it wrote and the entry's old adjoint is dropped
(``rt.written_entry``, ``rt.overwritten_adjoint``).  Once these gave zero gradients silently
(a list has no float dtype) or crashed in the backward sweep."""
import collections

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad

X = np.arange(6.0).reshape(2, 3) / 5.0
CONST = {"a": 1.0, "b": 2.0}


def preallocated(w):
    hs = [None] * 2
    hs[0] = w
    hs[1] = hs[0] * w
    return np.sum(hs[1])


def preallocated_by_length(w, xs=X):
    T = len(xs)
    hs = [None] * (T + 1)
    hs[0] = np.zeros(3)
    for t in range(1, T + 1):
        hs[t] = np.tanh(hs[t - 1] * w + xs[t - 1])
    return np.sum(hs[-1]) + np.sum(hs[1] ** 2)


def filled_by_enumerate(w):
    out = [None] * len(X)
    for i, x in enumerate(X):
        out[i] = np.sin(x * w)
    return np.sum(np.stack(out) ** 2)


def overwritten_twice(w):
    hs = [None] * 2
    hs[0] = w
    hs[0] = hs[0] * 2.0 + w
    return np.sum(hs[0] ** 2)


def accumulated(w):
    losses = [0.0] * 2
    for k in range(4):
        losses[k % 2] = losses[k % 2] + np.sum(w ** k)
    return losses[0] * losses[1]


def accumulated_in_place(w):
    losses = [0.0] * 2
    for k in range(4):
        losses[k % 2] += np.sum(w ** k)
    return losses[0] * losses[1]


def rows_of_an_array(w):
    xs = list(np.zeros((2, 3)))
    xs[1] = xs[1] + w
    xs[0] = xs[1] * w
    return np.sum(xs[0]) + np.sum(xs[1])


def rows_of_a_global(w):
    xs = list(X)
    xs[0] = xs[0] * w
    return np.sum(xs[0] * xs[1])


def copied_dict(w):
    d = dict(CONST)
    d["a"] = d["a"] * np.sum(w)
    return d["a"] * d["b"]


def ordered_dict(w):
    d = collections.OrderedDict()
    d["x"] = w * 2
    d["y"] = d["x"] * w
    return np.sum(d["y"])


def dict_filled_in_a_loop(w):
    d = dict()
    for k in range(3):
        d[k] = w * (k + 1.0)
    return np.sum(d[0] * d[2])


def array_of_objects(w):
    buf = np.empty(2, dtype=object)
    buf[0] = w * 2
    buf[1] = buf[0] * w
    return np.sum(buf[1] ** 2)


def items_read_twice(w):
    hs = [None] * 3
    for t in range(3):
        hs[t] = w * (t + 1.0)
    return np.sum(hs[0] * hs[2]) + np.sum(hs[0])


def known_items_written_in_a_loop(w):
    hs = [w, w]
    total = 0.0
    for t in range(3):
        total = total + np.sum(hs[0] * hs[1])
        hs[t % 2] = hs[0] * 0.5 + w
    return total


def iterated_while_written(w):
    hs = [w, w * 2.0, w * 3.0]
    for i, h in enumerate(hs):
        if i + 1 < 3:
            hs[i + 1] = hs[i + 1] * h
    return np.sum(hs[2]) + np.sum(hs[0])


def negative_index(w):
    hs = [None] * 3
    hs[-1] = w * 2.0
    hs[0] = hs[-1] * w
    return np.sum(hs[0]) + np.sum(hs[2])


def written_in_a_branch(w):
    hs = [w, w]
    k = 1 if np.sum(w) > 0 else 0
    if np.sum(w) > 0:
        hs[k] = hs[k] * w
    return np.sum(hs[0] + hs[1] * hs[1])


def _fill(hs, w):
    hs[0] = w * 3.0
    return hs


def through_a_helper(w):
    hs = _fill([None, None], w)
    hs[1] = hs[0] * w
    return np.sum(hs[0] ** 2) + np.sum(hs[1])


class Unrolled:
    def __init__(self, steps):
        self.steps = steps

    def run(self, w):
        hs = [None] * (self.steps + 1)
        hs[0] = w
        for t in range(self.steps):
            hs[t + 1] = np.cos(hs[t]) * w
        return np.sum(hs[self.steps])


def as_a_method(w):
    return Unrolled(3).run(w)


CASES = [preallocated, preallocated_by_length, filled_by_enumerate, overwritten_twice, accumulated,
         accumulated_in_place, rows_of_an_array, rows_of_a_global, copied_dict, ordered_dict,
         dict_filled_in_a_loop, array_of_objects, items_read_twice, known_items_written_in_a_loop,
         iterated_while_written, negative_index, written_in_a_branch, through_a_helper, as_a_method]


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("f", CASES, ids=[f.__name__ for f in CASES])
def test_gradient_matches_finite_differences(f, optimize):
    w = np.array([0.3, -0.7, 1.1])
    got = srcgrad.grad(f, optimize=optimize)(w)
    np.testing.assert_allclose(got, numerical_grad(f, (w,), 0), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("f", [preallocated, preallocated_by_length, items_read_twice, as_a_method])
def test_float32_stays_float32(f):
    w = np.array([0.3, -0.7, 1.1], dtype=np.float32)
    got = srcgrad.grad(f)(w)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, numerical_grad(f, (w.astype(np.float64),), 0), rtol=2e-3, atol=1e-4)


def test_the_pullback_called_twice_finds_the_list_as_the_forward_left_it():
    w = np.array([0.3, -0.7, 1.1])
    value, pullback = srcgrad.vjp(preallocated_by_length)(w)
    first, second = pullback(1.0), pullback(1.0)
    np.testing.assert_allclose(first, second)
    np.testing.assert_allclose(first, numerical_grad(preallocated_by_length, (w,), 0), rtol=1e-6)


def test_forward_mode_through_a_preallocated_list():
    w, v = np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.5, -0.2])
    _, tangent = srcgrad.jvp(preallocated_by_length)(w, v)
    np.testing.assert_allclose(tangent, numerical_grad(preallocated_by_length, (w,), 0) @ v, rtol=1e-6)


def known_items_aliased(w):
    a = [w, w]
    b = a
    b[0] = 2 * w
    return np.sum(a[0])


def preallocated_aliased(w):
    a = [None] * 2
    b = a
    b[0] = 2 * w
    return np.sum(a[0]) + np.sum(b[0])


@pytest.mark.parametrize("f", [known_items_aliased, preallocated_aliased])
def test_a_write_seen_through_another_name_of_the_list_is_refused_at_the_write(f):
    # (`a[0]` read after `b[0] = ...` sees the new item: srcgrad follows adjoints by name)
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"`b` and `a` share memory") as raised:
        srcgrad.grad(f)(np.ones(3))
    assert "test_element_writes_into_lists.py:" in str(raised.value) and "b[0] = 2 * w" in str(raised.value)


def recurrence_of_a_length_known_when_it_runs(w, x):
    T = x.shape[0]
    hs = [None] * (T + 1)
    hs[0] = np.zeros(2)  # (a constant item: its tangent is zeros of its shape, not 0.0)
    for t in range(T):
        hs[t + 1] = np.tanh(w @ hs[t] + x[t])
    return np.sum(hs[-1])


def test_forward_mode_through_items_of_a_length_known_when_it_runs():
    w, x, w_dot = np.eye(2) * 0.5, np.full((3, 2), 0.3), np.ones((2, 2))
    _, tangent = srcgrad.jvp(recurrence_of_a_length_known_when_it_runs)(w, x, w_dot)
    grad = srcgrad.grad(recurrence_of_a_length_known_when_it_runs)(w, x)
    np.testing.assert_allclose(tangent, np.sum(grad * w_dot), rtol=1e-10)
    np.testing.assert_allclose(grad, numerical_grad(recurrence_of_a_length_known_when_it_runs, (w, x), 0),
                               rtol=1e-6)


def test_forward_mode_through_an_array_of_objects():
    w, w_dot = np.array([0.3, -0.7, 1.1]), np.array([1.0, 0.5, -0.2])
    _, tangent = srcgrad.jvp(array_of_objects)(w, w_dot)
    np.testing.assert_allclose(tangent, numerical_grad(array_of_objects, (w,), 0) @ w_dot, rtol=1e-6)


# ---- unpacked, reordered, and dicts unpacked ------------------------------------------

def filled_then_unpacked(x):
    hs = [None] * 2
    for t in range(2):
        hs[t] = x * (t + 1.0)
    a, b = hs  # (the items' adjoints given at once: the writes' adjoints read them)
    return np.sum(a * 10.0 + b)


def _unpacked_by_a_helper(items):
    a, b, c = items
    return a * 100.0 + b * 10.0 + c


def filled_then_unpacked_in_a_helper(x):
    hs = [None] * 3
    for t in range(3):
        hs[t] = x * (t + 1.0)
    return np.sum(_unpacked_by_a_helper(hs))


def sliced_then_reversed(x):
    hs = [None] * 3
    for t in range(3):
        hs[t] = x * (t + 1.0)
    ys = hs[1:]
    ys.reverse()
    return np.sum(ys[0] * 10.0 + ys[1])


def keys_of_a_dict_unpacked(x):
    d = {}
    for i in range(3):
        d[i] = x * (i + 1.0)
    a, b, c = d  # the keys, as Python unpacks a dict
    return np.sum(x * (a + b + c) + d[2])


@pytest.mark.parametrize("f", [filled_then_unpacked, filled_then_unpacked_in_a_helper, sliced_then_reversed,
                               keys_of_a_dict_unpacked])
def test_unpacked_reordered_and_dict_keys(f):
    w = np.array([0.3, -0.7, 1.1])
    value, grad = srcgrad.value_and_grad(f)(w)
    assert value == pytest.approx(f(w))
    np.testing.assert_allclose(grad, numerical_grad(f, (w,), 0), rtol=1e-6, atol=1e-8)
    _, tangent = srcgrad.jvp(f)(w, np.ones(3))
    assert tangent == pytest.approx(numerical_grad(f, (w,), 0).sum(), rel=1e-6)


def reversed_through_another_name(x):
    hs = [None] * 3
    for t in range(3):
        hs[t] = x * (t + 1.0)
    ys = hs
    ys.reverse()  # refused here: `hs` is the same list
    return np.sum(ys[0] * 10.0 + hs[1])


def reversed_through_a_container(x):
    hs = [None] * 3
    for t in range(3):
        hs[t] = x * (t + 1.0)
    m = [hs]
    m[0].reverse()  # refused when it runs: the items' adjoints go by position
    return np.sum(hs[0] * 10.0 + hs[1])


@pytest.mark.parametrize("f", [reversed_through_another_name, reversed_through_a_container])
def test_a_reorder_seen_through_another_name_is_refused(f):
    # (ignored before: the value right, the gradient another order's)
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="reverse"):
        srcgrad.grad(f)(np.ones(3))


def keys_of_a_dict_used_as_numbers(x):
    d = {}
    for i in range(3):
        d[i] = x * (i + 1.0)
    total = 0.0
    for k in d:  # (a key has no tangent: forward mode gave it its entry's position)
        total = total + x * k
    return np.sum(total)


def test_forward_mode_over_a_dicts_keys():
    w = np.array([0.3, -0.7, 1.1])
    _, tangent = srcgrad.jvp(keys_of_a_dict_used_as_numbers)(w, np.ones(3))
    assert tangent == pytest.approx(numerical_grad(keys_of_a_dict_used_as_numbers, (w,), 0).sum(), rel=1e-6)


def _filled(x):
    d = {}
    for i in range(3):
        d[i] = x * (i + 1.0)
    return d


def keys_listed(x):
    d = _filled(x)
    total = 0.0
    for k in list(d):
        total = total + x * k
    return np.sum(total)


def keys_sorted(x):
    d = _filled(x)
    ks = sorted(d, reverse=True)
    return np.sum(x * ks[0] + d[ks[1]])


def keys_as_a_tuple(x):
    d = _filled(x)
    ks = tuple(d)
    return np.sum(x * ks[2])


def keys_summed(x):
    d = _filled(x)
    return np.sum(x * sum(d) + d[1])


def largest_key(x):
    d = _filled(x)
    return np.sum(x * max(d) + d[min(d)])


def keys_as_an_array(x):
    d = _filled(x)
    return np.sum(x * np.array(list(d)))


@pytest.mark.parametrize("f", [keys_listed, keys_sorted, keys_as_a_tuple, keys_summed, largest_key,
                               keys_as_an_array])
def test_a_dicts_keys_read_by_list_sorted_sum_or_max_carry_no_derivative(f):
    # (forward mode gave each key the tangent of the entry at that position: silently wrong;
    # `max(d)`'s gradient crashed)
    w = np.array([0.3, -0.7, 1.1])
    expected = numerical_grad(f, (w,), 0)
    np.testing.assert_allclose(srcgrad.grad(f)(w), expected, rtol=1e-6, atol=1e-8)
    _, tangent = srcgrad.jvp(f)(w, np.ones(3))
    assert tangent == pytest.approx(expected.sum(), rel=1e-6)


def keys_of_another_name_as_a_tuple(x):
    d = _filled(x)  # (the helper's dict, under the caller's name: a copy of the name)
    ks = tuple(d)
    return np.sum(x * ks[2])


def test_a_tuple_of_a_dicts_keys_gives_the_entries_no_adjoint():
    # (`rt.as_tuple` passed the keys' adjoint on to the entries: 4.1 where 2.0 is right)
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(keys_of_another_name_as_a_tuple)(w), [2.0, 2.0, 2.0], rtol=1e-12)
    _, tangent = srcgrad.jvp(keys_of_another_name_as_a_tuple)(w, np.ones(3))
    assert tangent == pytest.approx(6.0, rel=1e-12)


# ---- written while a loop iterates over it ----------------------------------------------
# (`for i, r in enumerate(rows): rows[i] = ...` over a list whose items are known when it runs
# only was refused, `r` "a view of" the list; over a dict whose keys are, `d.items()` was a
# call that "may keep" the dict)

def rows_of_a_global_squashed(w):
    rows = list(X)
    for i, r in enumerate(rows):
        rows[i] = np.tanh(r * w)
    return np.sum(rows[0] * rows[1])


def rows_of_the_argument_squashed(w):
    rows = list(w)
    for i, r in enumerate(rows):
        rows[i] = np.tanh(r * 2.0) * w[0]
    return rows[0] * rows[1] + rows[2]


def rows_made_here_squashed(w):
    rows = [X[0] * 1.0, X[1] * 2.0]
    for i, r in enumerate(rows):
        rows[i] = np.tanh(r @ w)
    return np.sum(rows[0] * rows[1]) + np.sum(rows[1])


def split_rows_squashed(w):
    rows = np.split(X * 1.0, 2)
    for i, r in enumerate(rows):
        rows[i] = np.tanh(r * w)
    return np.sum(rows[0] * rows[1])


def preallocated_then_squashed(w):
    hs = [None] * 2
    for t in range(2):
        hs[t] = w * (t + 1.0)
    for i, h in enumerate(hs):
        hs[i] = np.sin(h) * w
    return np.sum(hs[0] * hs[1])


def squashed_twice_and_read_twice(w):
    rows = list(X)
    for i, r in enumerate(rows):
        rows[i] = np.tanh(r * w)
    for i, r in enumerate(rows):
        rows[i] = r * rows[0]  # (rows[0] already written: its new value)
    return np.sum(rows[0] * rows[1]) + np.sum(rows[1])


def _squash(rows, w):
    for i, r in enumerate(rows):
        rows[i] = np.tanh(r * w)
    return rows


def squashed_in_a_helper(w):
    rows = _squash(list(X), w)
    return np.sum(rows[0] * rows[1])


class Squasher:
    def __init__(self, scale):
        self.scale = scale

    def run(self, w):
        rows = list(X)
        for i, r in enumerate(rows):
            rows[i] = np.tanh(r * w * self.scale)
        return np.sum(rows[0] * rows[1])


def squashed_by_a_method(w):
    return Squasher(1.5).run(w)


def entries_scaled(w):
    d = {"a": w, "b": w * 2.0}
    for k, v in d.items():
        d[k] = v * w
    return np.sum(d["a"] * d["b"])


def entries_of_a_copied_dict_scaled(w):
    d = dict(CONST)
    for k, v in d.items():
        d[k] = v * w
    return np.sum(d["a"] * d["b"])


def entries_added_in_a_loop_scaled(w):
    d = {}
    for k in range(3):
        d[k] = w * (k + 1.0)
    for k, v in d.items():
        d[k] = np.sin(v) * w
    return np.sum(d[0] * d[2]) + np.sum(d[1])


def entries_of_an_ordered_dict_scaled(w):
    d = collections.OrderedDict()
    d["x"] = w * 2
    d["y"] = w * 3
    for k, v in d.items():
        d[k] = v * w
    return np.sum(d["x"] * d["y"])


def entries_scaled_by_key(w):
    d = {}
    for k in range(2):
        d[k] = w * (k + 1.0)
    for k in d.keys():
        d[k] = d[k] * w + d[0]  # (d[0] written in the first iteration: its new value)
    return np.sum(d[0] * d[1])


def _filled_by_a_helper(w):
    d = {}
    for k in range(2):
        d[k] = w * (k + 1.0)
    return d


def entries_of_a_helpers_dict_scaled(w):
    d = _filled_by_a_helper(w)
    total = 0.0
    for v in d.values():
        total = total + np.sum(v)
    for k, v in d.items():
        d[k] = v * w
    return np.sum(d[0] * d[1]) + total


WRITTEN_WHILE_ITERATED = [
    rows_of_a_global_squashed, rows_of_the_argument_squashed, rows_made_here_squashed, split_rows_squashed,
    preallocated_then_squashed, squashed_twice_and_read_twice, squashed_in_a_helper, squashed_by_a_method,
    entries_scaled, entries_of_a_copied_dict_scaled, entries_added_in_a_loop_scaled,
    entries_of_an_ordered_dict_scaled, entries_scaled_by_key, entries_of_a_helpers_dict_scaled]


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("f", WRITTEN_WHILE_ITERATED, ids=[f.__name__ for f in WRITTEN_WHILE_ITERATED])
def test_written_while_a_loop_iterates_over_it(f, optimize):
    w = np.array([0.3, -0.7, 1.1])
    value, grad = srcgrad.value_and_grad(f, optimize=optimize)(w)
    expected = numerical_grad(f, (w,), 0)
    assert value == pytest.approx(f(w))
    np.testing.assert_allclose(grad, expected, rtol=1e-6, atol=1e-8)
    _, tangent = srcgrad.jvp(f)(w, np.ones(3))
    assert tangent == pytest.approx(expected.sum(), rel=1e-6)


@pytest.mark.parametrize("f", [rows_of_a_global_squashed, entries_added_in_a_loop_scaled, squashed_by_a_method])
def test_written_while_iterated_float32_stays_float32(f):
    w = np.array([0.3, -0.7, 1.1], dtype=np.float32)
    got = srcgrad.grad(f)(w)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, numerical_grad(f, (w.astype(np.float64),), 0), rtol=2e-3, atol=1e-4)


# ---- several items written by one assignment ------------------------------------------
# (`a[0], a[1] = ...` and `hs[t], cs[t] = h, c` were refused: "this assignment target is not
# supported yet")

def items_swapped(w):
    a = [w, w * 2.0]
    a[0], a[1] = a[1] * w, a[0]  # (the right side read whole first, as Python does)
    return np.sum(a[0] * 3.0 + a[1] ** 2)


def states_kept_per_step(w):
    T = 3
    hs, cs = [None] * (T + 1), [None] * (T + 1)
    hs[0], cs[0] = w * 0.5, w * 0.1
    for t in range(T):
        c = cs[t] * 0.9 + np.tanh(hs[t] * w)
        h = np.tanh(c) * w
        hs[t + 1], cs[t + 1] = h, c
    return np.sum(hs[-1] * cs[-1]) + np.sum(hs[1])


def carried_and_kept(w):
    hs = [None] * 3
    h = w
    for t in range(3):
        h, hs[t] = np.tanh(h * w), h
    return np.sum(hs[2] * h) + np.sum(hs[1])


def index_bound_before_the_item(w):
    hs = [w, w * 2.0, w * 3.0]
    i = 0
    i, hs[i] = 2, hs[1] * w  # (Python binds `i` first: `hs[2]` is written)
    return np.sum(hs[0] * hs[2])


def index_bound_after_the_item(w):
    hs = [w, w * 2.0, w * 3.0]
    i = 0
    hs[i], i = hs[1] * w, 2  # (`hs[0]` is written, then `i` bound)
    return np.sum(hs[0] * hs[2]) + i


def entries_written_in_pairs(w):
    d = {}
    for k in range(2):
        d[k], d[k + 10] = w * (k + 1.0), w * w
    return np.sum(d[0] * d[11]) + np.sum(d[1])


def elements_of_an_array_swapped(w):
    y = w * 1.0
    y[0], y[1] = y[1] * 2.0, y[0]
    return np.sum(y * w)


def _step_both(hs, cs, t, w):
    hs[t + 1], cs[t + 1] = np.tanh(hs[t] * w), cs[t] + hs[t]
    return hs, cs


def states_kept_by_a_helper(w):
    hs, cs = [w, None, None], [w * 0.5, None, None]
    for t in range(2):
        hs, cs = _step_both(hs, cs, t, w)
    return np.sum(hs[2] * cs[2])


class Stepper:
    def __init__(self, steps):
        self.steps = steps

    def run(self, w):
        hs, cs = [None] * (self.steps + 1), [None] * (self.steps + 1)
        hs[0], cs[0] = w, w * 0.5
        for t in range(self.steps):
            hs[t + 1], cs[t + 1] = np.sin(hs[t] * w), cs[t] * hs[t]
        return np.sum(hs[-1] + cs[-1])


def states_kept_by_a_method(w):
    return Stepper(3).run(w)


WRITTEN_TOGETHER = [items_swapped, states_kept_per_step, carried_and_kept, index_bound_before_the_item,
                    index_bound_after_the_item, entries_written_in_pairs, elements_of_an_array_swapped,
                    states_kept_by_a_helper, states_kept_by_a_method]


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("f", WRITTEN_TOGETHER, ids=[f.__name__ for f in WRITTEN_TOGETHER])
def test_items_written_by_one_assignment(f, optimize):
    w = np.array([0.3, -0.7, 1.1])
    value, grad = srcgrad.value_and_grad(f, optimize=optimize)(w)
    expected = numerical_grad(f, (w,), 0)
    assert value == pytest.approx(f(w))
    np.testing.assert_allclose(grad, expected, rtol=1e-6, atol=1e-8)
    _, tangent = srcgrad.jvp(f)(w, np.ones(3))
    assert tangent == pytest.approx(expected.sum(), rel=1e-6)


@pytest.mark.parametrize("f", [states_kept_per_step, states_kept_by_a_method])
def test_items_written_by_one_assignment_float32_stays_float32(f):
    w = np.array([0.3, -0.7, 1.1], dtype=np.float32)
    got = srcgrad.grad(f)(w)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, numerical_grad(f, (w.astype(np.float64),), 0), rtol=2e-3, atol=1e-4)


# ---- a list or dict held by another, written by its own name ---------------------------
# (written as a new version of its own: what held it kept the old one, and the gradient was
# silently that of the old items, [1, 1, 1] where [5, 5, 5] is right)

def list_held_by_a_list_written(w):
    inner = [w, w]
    M = [inner, w]
    inner[0] = w * 5.0
    return np.sum(M[0][0] * inner[1])


def dict_held_by_a_dict_written(w):
    inner = {"b": w}
    d = {"a": inner}
    inner["b"] = w * 5.0
    return np.sum(d["a"]["b"]) + np.sum(inner["b"])


def list_put_into_a_list_written(w):
    M = [w, w]
    inner = [w, w * 2.0]
    M[0] = inner
    inner[0] = w * 5.0
    return np.sum(M[0][0] * M[0][1])


def held_and_written_in_a_loop(w):
    inner = [w, w]
    M = [inner, w]
    for t in range(2):
        inner[t] = inner[t] * w
    return np.sum(M[0][0] * M[0][1])


def dict_held_and_written_in_a_loop(w):
    inner = {"b": w, "c": w * 0.5}
    d = {"a": inner}
    for t in range(3):
        inner["b"] = inner["b"] * w + inner["c"]
    return np.sum(d["a"]["b"]) + np.sum(inner["b"])


HELD_WRITTEN = [list_held_by_a_list_written, dict_held_by_a_dict_written, list_put_into_a_list_written,
                held_and_written_in_a_loop, dict_held_and_written_in_a_loop]


@pytest.mark.parametrize("f", HELD_WRITTEN, ids=[f.__name__ for f in HELD_WRITTEN])
def test_a_list_or_dict_held_by_another_is_written_in_place(f):
    w = np.array([0.3, -0.7, 1.1])
    value, grad = srcgrad.value_and_grad(f)(w)
    expected = numerical_grad(f, (w,), 0)
    assert value == pytest.approx(f(w))
    np.testing.assert_allclose(grad, expected, rtol=1e-6, atol=1e-8)
    _, tangent = srcgrad.jvp(f)(w, np.ones(3))
    assert tangent == pytest.approx(expected.sum(), rel=1e-6)


def held_list_read_whole_after(w):
    inner = [w, w]
    M = [inner]
    inner[0] = w * 5.0
    return np.sum(np.array(M))


def held_as_an_entry_read_after(w):
    inner = [w, w]
    d = {}
    d["a"] = inner
    inner[0] = w * 5.0
    return np.sum(d["a"][0])


def held_by_a_preallocated_list_read_after(w):
    hs = [None] * 2
    inner = [w, w]
    for t in range(2):
        hs[t] = inner
    inner[0] = w * 5.0
    return np.sum(hs[1][0])


def held_by_an_appended_list_read_after(w):
    M = []
    inner = [w, w]
    M.append(inner)
    inner[0] = w * 5.0
    return np.sum(M[0][0])


def row_written_then_the_table_read_whole(w):
    M = [[w, w * 2.0], [w * 3.0, w]]
    row = M[0]
    row[1] = w * 5.0
    return np.sum(np.array(M) ** 2)


@pytest.mark.parametrize("f", [held_list_read_whole_after, held_as_an_entry_read_after,
                               held_by_a_preallocated_list_read_after, held_by_an_appended_list_read_after,
                               row_written_then_the_table_read_whole])
def test_a_write_into_a_held_list_seen_through_its_holder_is_refused(f):
    # (not followed: the holder's adjoint reached the list before the write; silently wrong before)
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"holds it .* is read after the write") as raised:
        srcgrad.grad(f)(np.ones(3))
    assert "test_element_writes_into_lists.py:" in str(raised.value) and "] = w * 5.0" in str(raised.value)


def rows_made_in_a_loop_written_then_stored(w):
    n = 3
    M = [None] * n
    for i in range(n):
        row = [0.0] * n
        for j in range(n):
            row[j] = np.sum(w) * (i + j) + (M[i - 1][j] * 0.5 if i > 0 else 0.0)
        M[i] = row  # (`M` holds the rows of earlier iterations, not this one, while it is written)
    return M[1][2] * M[2][2]


def test_a_row_made_and_written_in_a_loop_then_stored_is_followed():
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(rows_made_in_a_loop_written_then_stored)(w),
                               numerical_grad(rows_made_in_a_loop_written_then_stored, (w,), 0), rtol=1e-6)


def array_stored_in_a_dict_then_written(w):
    d = dict()
    h = w * 1.0
    d["a"] = h
    h[0] = 5.0 * w[1]
    return np.sum(d["a"] ** 2)


def array_stored_in_a_list_in_a_loop_then_written(w):
    hs = [None] * 2
    for t in range(2):
        h = w * (t + 1.0)
        hs[t] = h
        h[0] = 5.0 * w[1]
    return np.sum(hs[0] ** 2 + hs[1])


@pytest.mark.parametrize("f", [array_stored_in_a_dict_then_written,
                               array_stored_in_a_list_in_a_loop_then_written])
def test_an_array_stored_in_a_list_or_dict_then_written_in_place_is_refused(f):
    # (the list's entry is the same array: its adjoint missed the write, silently)
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="may share memory") as raised:
        srcgrad.grad(f)(np.array([0.3, -0.7, 1.1]))
    assert "h[0] = 5.0 * w[1]" in str(raised.value)


# ---- an item of an item: M[0][1] = v, d["a"]["b"] = v --------------------------------
# (refused before: "this assignment target is not supported yet")

def table_of_arrays(w):
    M = [[w, w * 2.0], [w * 3.0, w * 4.0]]
    M[0][1] = M[1][0] * w
    return np.sum(M[0][1] * M[0][0] + M[1][1])


def table_of_floats_read_whole(w):
    M = [[1.0, 2.0], [3.0, 4.0]]
    M[0][1] = np.sum(w * w)
    M[1][0] += np.sum(w)
    return M[0][1] * M[1][0] + M[0][0] + np.sum(np.array(M))  # (`M` made again after the writes)


def table_written_in_a_loop(w):
    M = [[w, w * 2.0], [w * 3.0, w * 4.0]]
    for t in range(3):
        M[0][1] = np.tanh(M[0][1] * w + M[1][0])
    return np.sum(M[0][1] * M[0][0])


def table_accumulated_in_a_loop(w):
    M = [[0.0, 0.0], [0.0, 0.0]]
    for t in range(3):
        M[0][1] += np.sum(w * (t + 1.0))
    return M[0][1] * M[0][1] + M[1][1]


def table_written_in_a_branch(w):
    M = [[w, w * 2.0], [w * 3.0, w]]
    if np.sum(w) > 0:
        M[0][1] = M[0][1] * w
    else:
        M[1][0] = M[1][0] * 2.0
    return np.sum(np.array(M) ** 2)


def table_row_read_twice(w):
    M = [[w, w * 2.0], [w * 3.0, w * 4.0]]
    a = M[0]
    M[0][1] = a[0] * w
    b = M[0]
    return np.sum(b[1] * M[0][1]) + np.sum(b[0] + a[1])  # (`a` is `M[0]`: it sees the write)


def three_deep(w):
    T = [[[w, w], [w, w]]]
    T[0][1][0] = T[0][0][1] * w
    return np.sum(T[0][1][0] * T[0][1][1])


def list_in_a_tuple(w):
    t = ([w, w * 2.0], w)
    t[0][1] = t[0][0] * w
    return np.sum(t[0][1] * t[1])


def nested_dicts(w):
    d = {"a": {"b": w, "c": 1.0}, "z": w * 2.0}
    d["a"]["b"] = d["a"]["b"] * w
    d["a"]["e"] = d["a"]["b"] + d["z"]  # (a new key)
    return np.sum(d["a"]["b"] * d["a"]["e"]) * d["a"]["c"]


def nested_dicts_in_a_loop(w):
    d = {"a": {"b": w, "c": w * 0.5}}
    for t in range(3):
        d["a"]["b"] = d["a"]["b"] * w + d["a"]["c"]
    return np.sum(d["a"]["b"])


def nested_dict_iterated_after(w):
    d = {"a": {"b": w, "c": w * 0.5}}
    d["a"]["b"] = d["a"]["b"] * w
    total = 0.0
    for k, v in d["a"].items():
        total = total + np.sum(v)
    return total


def _set_corner(M, w):
    M[0][1] = M[0][0] * w
    return M


def table_written_by_a_helper(w):
    M = [[w, w * 2.0], [w, w]]
    M = _set_corner(M, w)
    return np.sum(M[0][1] * M[1][0])


class Grid:
    def __init__(self, scale):
        self.scale = scale

    def run(self, w):
        M = [[w * self.scale, w], [w * 2.0, w]]
        M[1][0] = M[0][1] * w + M[0][0]
        return np.sum(M[1][0] * M[0][0])


def table_written_by_a_method(w):
    return Grid(1.5).run(w)


NESTED = [table_of_arrays, table_of_floats_read_whole, table_written_in_a_loop, table_accumulated_in_a_loop,
          table_written_in_a_branch, table_row_read_twice, three_deep, list_in_a_tuple, nested_dicts,
          nested_dicts_in_a_loop, nested_dict_iterated_after, table_written_by_a_helper,
          table_written_by_a_method]


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("f", NESTED, ids=[f.__name__ for f in NESTED])
def test_an_item_of_an_item_written(f, optimize):
    for w in (np.array([0.3, -0.7, 1.1]), np.array([-0.3, 0.7, -1.1])):
        value, grad = srcgrad.value_and_grad(f, optimize=optimize)(w)
        expected = numerical_grad(f, (w,), 0)
        assert value == pytest.approx(f(w))
        np.testing.assert_allclose(grad, expected, rtol=1e-6, atol=1e-8)
        _, tangent = srcgrad.jvp(f)(w, np.ones(3))
        assert tangent == pytest.approx(expected.sum(), rel=1e-6)


@pytest.mark.parametrize("f", [table_of_arrays, table_written_in_a_loop, nested_dicts_in_a_loop])
def test_an_item_of_an_item_written_float32_stays_float32(f):
    w = np.array([0.3, -0.7, 1.1], dtype=np.float32)
    got = srcgrad.grad(f)(w)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, numerical_grad(f, (w.astype(np.float64),), 0), rtol=2e-3, atol=1e-4)


def table_written_in_a_loop_read_whole(w):
    M = [[w, w * 2.0], [w * 3.0, w * 4.0]]
    for t in range(2):
        M[0][1] = np.tanh(M[0][1] * w)
    return np.sum(np.array(M))


def test_a_table_written_in_a_loop_and_read_whole_after_it_is_refused():
    # (`M` made before the loop holds the row the loop writes into: its adjoint would miss it)
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"cannot write into `M\[0\]` here: `M` holds it"):
        srcgrad.grad(table_written_in_a_loop_read_whole)(np.ones(3))


def table_written_at_an_index_known_when_it_runs(w):
    M = [[w, w * 2.0], [w * 3.0, w * 4.0]]
    for i in range(2):
        M[i][0] = M[i][1] * w
    return np.sum(M[0][0] * M[1][0])


def test_an_item_of_an_item_at_an_index_known_when_it_runs_is_refused_with_a_way_that_works():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"read with a literal index") as raised:
        srcgrad.grad(table_written_at_an_index_known_when_it_runs)(np.ones(3))
    assert "row = list(M[i])" in str(raised.value)


def rows_made_anew_and_put_back(w):
    M = [[w, w * 2.0], [w * 3.0, w * 4.0]]
    for i in range(2):
        row = list(M[i])
        row[0] = M[i][1] * w
        M[i] = row
    return np.sum(M[0][0] * M[1][0])


def test_the_way_the_refusal_advises_works():
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(rows_made_anew_and_put_back)(w),
                               numerical_grad(rows_made_anew_and_put_back, (w,), 0), rtol=1e-6, atol=1e-8)


# ---- setdefault and update where the dict's keys are known when it runs only -----------
# (refused before: "not after a loop that may add them")

def set_default_after_a_loop(w):
    d = {}
    for k in range(3):
        d[k] = w * (k + 1.0)
    a = d.setdefault(0, w * 9.0)  # (there: `d[0]`, the default unused)
    b = d.setdefault(5, w * 2.0)  # (not there: the default, added)
    return np.sum(d[0] * d[2] * a) + np.sum(d[5] * b)


def updated_after_a_loop(w):
    d = {}
    for k in range(3):
        d[k] = w * (k + 1.0)
    d.update({0: w * w, 7: w})
    d.update(s=d[1] * 2.0)
    return np.sum(d[0] * d[2]) + np.sum(d[7] * d["s"])


def set_default_in_a_loop_then_written(w):
    d = {}
    for k in range(4):
        d.setdefault(k % 2, 0.0)
        d[k % 2] = d[k % 2] + w * (k + 1.0)
    return np.sum(d[0] * d[1])


def set_default_value_read_in_a_loop(w):
    d = {}
    total = 0.0
    for k in range(4):
        v = d.setdefault(k % 2, w * (k + 1.0))
        total = total + v * w
    return np.sum(total) + np.sum(d[1])


def updated_in_a_loop(w):
    d = {}
    for k in range(3):
        d[k] = w * (k + 1.0)
        d.update({"s": d[k] * w})
    return np.sum(d["s"] * d[1])


def counted_in_an_ordered_dict(w):
    d = collections.OrderedDict()
    for i in range(4):
        d.setdefault(i % 2, 0.0)
        d[i % 2] += np.sum(w) * i
    d.update({5: np.sum(w * w)})
    return d[0] * d[1] + d[5]


def _accumulate(d, w):
    for k in range(3):
        d.setdefault(k % 2, 0.0)
        d[k % 2] = d[k % 2] + w
    return d


def set_default_in_a_helper(w):
    d = _accumulate({}, w)
    d.update({"z": d[0] * d[1]})
    return np.sum(d["z"])


class Tally:
    def __init__(self, n):
        self.n = n

    def run(self, w):
        d = {}
        for i in range(self.n):
            d.setdefault(i % 2, w)
            d[i % 2] = d[i % 2] * w
        return np.sum(d[0] + d[1])


def set_default_in_a_method(w):
    return Tally(4).run(w)


SET_DEFAULT = [set_default_after_a_loop, updated_after_a_loop, set_default_in_a_loop_then_written,
               set_default_value_read_in_a_loop, updated_in_a_loop, counted_in_an_ordered_dict,
               set_default_in_a_helper, set_default_in_a_method]


@pytest.mark.parametrize("optimize", [True, False])
@pytest.mark.parametrize("f", SET_DEFAULT, ids=[f.__name__ for f in SET_DEFAULT])
def test_set_default_and_update_where_the_keys_are_known_when_it_runs(f, optimize):
    w = np.array([0.3, -0.7, 1.1])
    value, grad = srcgrad.value_and_grad(f, optimize=optimize)(w)
    expected = numerical_grad(f, (w,), 0)
    assert value == pytest.approx(f(w))
    np.testing.assert_allclose(grad, expected, rtol=1e-6, atol=1e-8)
    _, tangent = srcgrad.jvp(f)(w, np.ones(3))
    assert tangent == pytest.approx(expected.sum(), rel=1e-6)


@pytest.mark.parametrize("f", [set_default_in_a_loop_then_written, set_default_in_a_method])
def test_set_default_float32_stays_float32(f):
    w = np.array([0.3, -0.7, 1.1], dtype=np.float32)
    got = srcgrad.grad(f)(w)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, numerical_grad(f, (w.astype(np.float64),), 0), rtol=2e-3, atol=1e-4)


def dict_written_under_another_name_then_iterated(w):
    d = {}
    for i in range(2):
        d[i] = w * (i + 1.0)
    e = d
    e[0] = w * 5.0
    total = 0.0
    for k in e:  # (its keys: a dict written in place is still a dict, never indexed as a list)
        total = total + np.sum(e[k])
    return total


def test_a_dict_written_under_another_name_is_iterated_by_its_keys():
    w = np.array([0.3, -0.7, 1.1])
    np.testing.assert_allclose(srcgrad.grad(dict_written_under_another_name_then_iterated)(w), [7.0, 7.0, 7.0])
