"""Tuples and lists built the ordinary ways: joined (`t + (h,)`, `xs + ys`), repeated
(`[h] * 3`), grown with `+=`, bound in parallel (`hs, cs = [], []`) — with items
known when compiling and with items known only when the code runs (a tuple grown in
a loop).  Gradients against central finite differences, in a loop, a helper, a
method and float32."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import check_gradient


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
    check_gradient(f, np.array([0.4, -1.3]))


def test_joined_lists_in_each_argument():
    x, y = np.array([0.4, -1.3]), np.array([2.0, 0.5])
    check_gradient(joined_lists, x, y, index=0)
    check_gradient(joined_lists, x, y, index=1)


def test_a_method_growing_a_tuple():
    model, x = Stack(np.array([0.5, -0.7])), np.array([0.3, 1.1])
    g = srcgrad.grad(stacked)(model, x)
    check_gradient(lambda w, x: stacked(Stack(w), x), model.w, x)
    check_gradient(stacked, model, x, index=1)
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
    check_gradient(copied_parameters, (np.array([0.5, -1.0]), np.array([2.0, 0.3])))


def test_dict_of_keywords():
    check_gradient(dict_of_keywords, np.array([0.5, -1.0]), np.array([2.0, 0.3]), index=0)
    check_gradient(dict_of_keywords, np.array([0.5, -1.0]), np.array([2.0, 0.3]), index=1)


@pytest.mark.parametrize("f", [item_replaced, item_replaced_in_each_iteration])
def test_an_item_of_a_list_made_here_replaced(f):
    check_gradient(f, np.array([0.5, -1.0]))


def test_an_item_of_a_list_from_outside_the_loop_replaced():
    # (its items are then known when the code runs only: the write is done as written)
    check_gradient(item_of_a_list_from_before_the_loop, np.array([0.5, -1.0]))


def _concat_and_multiply(weights, *args):
    cat_state = np.hstack(args + (np.ones((args[0].shape[0], 1)),))
    return np.dot(cat_state, weights)


def variadic_joined_in_a_loop(w, xs):
    h = np.zeros((2, 3))
    for x in xs:
        h = np.tanh(_concat_and_multiply(w, x, h))
    return np.sum(h ** 2)


def passed_in_joined_and_repeated(params):
    more = params + [params[0] * 2.0]
    twice = tuple(params) * 2
    return np.sum(more[2] * more[1]) + np.sum(twice[3] * twice[0])


class Cell:
    def __init__(self, w):
        self.w = w

    def step(self, *inputs):
        return np.tanh(np.hstack(inputs + (inputs[0] * 0.5,)) @ self.w)


def variadic_method_in_a_loop(cell, xs):
    h = np.zeros((2, 3))
    for x in xs:
        h = cell.step(x, h)
    return np.sum(h)


def test_a_variadic_tuple_joined_in_a_loop():
    rng = np.random.default_rng(0)
    w, xs = rng.normal(size=(8, 3)) * 0.5, rng.normal(size=(3, 2, 4))
    check_gradient(variadic_joined_in_a_loop, w, xs)
    g32 = srcgrad.grad(variadic_joined_in_a_loop)(w.astype(np.float32), xs.astype(np.float32))
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, srcgrad.grad(variadic_joined_in_a_loop)(w, xs), rtol=1e-4, atol=1e-6)


def test_a_passed_in_list_joined_and_repeated():
    check_gradient(passed_in_joined_and_repeated, [np.array([0.5, -1.0]), np.array([2.0, 0.3])])


def test_a_variadic_method_joined_in_a_loop():
    rng = np.random.default_rng(1)
    cell, xs = Cell(rng.normal(size=(11, 3)) * 0.5), rng.normal(size=(3, 2, 4))
    check_gradient(lambda w, xs: variadic_method_in_a_loop(Cell(w), xs), cell.w, xs)
    np.testing.assert_allclose(srcgrad.grad(variadic_method_in_a_loop)(cell, xs).w,
                               srcgrad.grad(lambda w, xs: variadic_method_in_a_loop(Cell(w), xs))(cell.w, xs),
                               rtol=1e-12)


def _parts(params):
    return np.tanh(params["a"]), params["b"], params["c"] * 2.0


def zipped_call(params, x):
    out = []
    for a, b, c in zip(*_parts(params)):
        out.append(a * b + np.sum(c) * x)
    return np.sum(np.vstack(out) ** 2)


def zipped_pairs(w):
    pairs = [(w * 1.0, w[::-1]), (np.sin(w), w * w)]
    total = 0.0
    for firsts, seconds in zip(*pairs):  # (the transpose: the firsts, then the seconds)
        total = total + np.sum(firsts * seconds)
    return total


def test_zip_of_a_starred_call_and_of_a_list_made_here():
    params = {"a": np.array([0.3, -0.4, 1.1]), "b": np.array([1.0, 2.0, -0.5]),
              "c": np.array([[0.1, 0.2], [0.3, -0.4], [0.5, 0.6]])}
    check_gradient(zipped_call, params, np.array([1.0, -2.0]))
    check_gradient(zipped_pairs, np.array([0.4, -1.3]))


def test_zip_of_a_starred_list_grown_in_a_loop_is_refused_with_its_reason():
    def grown(w):
        pairs = []
        for k in range(2):
            pairs.append((w * k, w))
        total = 0.0
        for a, b in zip(*pairs):
            total = total + np.sum(a * b)
        return total
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"`zip\(\*xs\)` is read where the length"):
        srcgrad.grad(grown)(np.ones(2))


def test_an_augmented_write_into_a_lists_item_held_by_another_name_is_refused():
    # NumPy's `ys[0] += v` changes the array `y` in place too: computing it as a new array
    # gave y's old value to the rest of the function (silently wrong before).
    def shared(x):
        y = x * 1.0
        ys = [y]
        ys[0] += 1.0
        return np.sum(y * x)

    def own_item(x):
        ys = [x * 2.0, 0.5]
        ys[0] *= x      # an array made for this item alone
        ys[1] += 1.0    # a number
        return np.sum(ys[0]) * ys[1]
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"changes the array in that entry in place"):
        srcgrad.grad(shared)(np.ones(2))
    check_gradient(own_item, np.array([0.4, -1.3]))


# ---- tuples grown with `+=` (immutable: each `+=` binds a new tuple) ------------

def tuple_grown_with_augmented_add(x):
    t = (x,)
    t += (2.0 * x,)
    return np.sum(t[0] * t[1])


def _states(x, n):
    hs = ()
    for _ in range(n):
        x = np.tanh(1.5 * x)
        hs += (x,)
    return hs


def tuple_grown_in_a_helper_and_unpacked(x):
    a, b, c = _states(x, 3)
    return np.sum(a * b * c) + np.sum(_states(x, 2)[1])


def _pooled(inputs, pool):
    # autograd's convnet example builds the pooled shape this way
    shape = inputs.shape[:1]
    for p, n in zip(pool, inputs.shape[1:]):
        shape += (n // p, p)
    return np.max(np.max(inputs.reshape(shape), axis=2), axis=3)


def shape_grown_with_augmented_add(x):
    return np.sum(_pooled(np.sin(x).reshape(2, 2, 4) * x.reshape(2, 2, 4), (1, 2)) ** 2)


class Unrolled:
    def __init__(self, w):
        self.w = w

    def loss(self, x):
        hs = ()
        for _ in range(2):
            x = np.tanh(x * self.w)
            hs += (x,)
        return np.sum(hs[0] * hs[1])


@pytest.mark.parametrize("f", [tuple_grown_with_augmented_add, tuple_grown_in_a_helper_and_unpacked])
def test_tuples_grown_with_augmented_add(f):
    check_gradient(f, np.array([0.4, -1.3]))


def test_a_shape_tuple_grown_with_augmented_add():
    check_gradient(shape_grown_with_augmented_add, np.linspace(-1.0, 1.3, 16))


def test_a_method_growing_a_tuple_with_augmented_add():
    model, x = Unrolled(np.array([0.5, -0.7])), np.array([0.3, 1.1])
    check_gradient(lambda w, x: Unrolled(w).loss(x), model.w, x)
    check_gradient(lambda w, x: Unrolled(w).loss(x), model.w, x, index=1)


@pytest.mark.parametrize("f", [tuple_grown_with_augmented_add, tuple_grown_in_a_helper_and_unpacked,
                               shape_grown_with_augmented_add])
def test_tuples_grown_with_augmented_add_in_float32(f):
    x = np.linspace(-1.0, 1.3, 16).astype(np.float32)
    g = srcgrad.grad(f)(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, srcgrad.grad(f)(x.astype(np.float64)), rtol=1e-4, atol=1e-5)


def test_augmented_add_on_a_tuple_leaves_other_names_alone():
    def f(x):
        t = (x,)
        u = t
        t += (x * 3.0,)
        return np.sum(u[0]) * len(u) + np.sum(t[1])
    np.testing.assert_array_equal(srcgrad.grad(f)(np.ones(2)), [4.0, 4.0])


# ---- zip of known sequences, slices of tuples, dict writes by method --------------------

def zipped_parameters(params):
    Ws, bs = zip(*params)
    total = 0.0
    for W, b in zip(Ws, bs):
        total = total + np.sum(np.tanh(W * b))
    pairs = list(zip(Ws, bs[::-1]))
    return total + np.sum(pairs[0][0] * pairs[-1][1] * Ws[-1])


def columns_of_rows(rows):
    out = 0.0
    for col in zip(*rows):
        out = out + np.sum(col[0] * np.sin(col[1]))
    return out


def one_sequence_zipped(xs):
    out = 0.0
    for t in zip(xs):  # (each item a tuple of one)
        a, = t
        out = out + np.sum(a * t[0])
    return out


def sliced_tuple(x, y):
    t = (x, y, x * y)
    u, v = t[::-1], t[1:]
    return np.sum(u[0] * v[0]) + np.sum(t[-2:][1])


def dict_written_by_methods(x, w):
    d = {"a": x}
    v = d.setdefault("a", x * w)
    d.update({"c": v * 2.0}, e=w)
    d.setdefault("c", 5.0)
    d.setdefault("f", np.cos(w))
    return np.sum(v * d["a"] * d["c"] * d["e"] + d["f"])


PAIRS = [(np.array([1.0, 0.5]), np.array([2.0, 3.0])), (np.array([0.3, 0.2]), np.array([0.1, 0.4])),
         (np.array([-0.7, 0.9]), np.array([1.1, -0.4]))]


@pytest.mark.parametrize("f", [zipped_parameters, columns_of_rows, one_sequence_zipped])
def test_zipped_sequences_of_known_length(f):
    check_gradient(f, PAIRS if f is not one_sequence_zipped else [a for a, _ in PAIRS])


def test_zip_of_tuples_against_autograd():
    autograd = pytest.importorskip("autograd")
    anp = autograd.numpy

    def theirs(params):
        Ws, bs = zip(*params)
        return sum(anp.sum(anp.tanh(W * b)) for W, b in zip(Ws, bs)) + anp.sum(Ws[0] * bs[-1])

    def ours(params):
        Ws, bs = zip(*params)
        return sum(np.sum(np.tanh(W * b)) for W, b in zip(Ws, bs)) + np.sum(Ws[0] * bs[-1])
    for a, b in zip(srcgrad.grad(ours)(PAIRS), autograd.grad(theirs)(PAIRS)):
        np.testing.assert_allclose(a, b, rtol=1e-12)


@pytest.mark.parametrize("f", [sliced_tuple, dict_written_by_methods])
def test_slices_and_dict_methods(f):
    x, y = np.array([0.4, -1.3]), np.array([2.0, 0.5])
    check_gradient(f, x, y, index=0)
    check_gradient(f, x, y, index=1)


def test_setdefault_where_a_loop_may_add_the_key():
    # (refused before; `if "a" not in d: d["a"] = ...` in each iteration: the first one's stays)
    def f(x):
        d = {}
        out = 0.0
        for i in range(3):
            out = out + np.sum(d.setdefault("a", x * (i + 1.0)))
        return out
    np.testing.assert_allclose(srcgrad.grad(f)(np.array([0.5, -1.0])), [3.0, 3.0])


def _tree(x, depth):
    if depth == 0:
        return (x,)
    return _tree(x * 2.0, depth - 1) + _tree(np.sin(x), depth - 1)


def test_tuples_joined_from_recursive_calls():
    def f(x):
        leaves = _tree(x, 2)
        return np.sum(leaves[0] * leaves[3]) + np.sum(leaves[1])
    check_gradient(f, np.array([0.4, -1.3]))


def test_dict_update_evaluates_every_value_first():
    def f(x):
        d = {"a": x}
        d.update(a=d["a"] * 2.0, b=d["a"] * 3.0)  # (b from the old `a`)
        d.update({"c": d["a"], "a": x ** 2})
        return np.sum(d["a"] * d["b"] + d["c"])
    x = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(srcgrad.grad(f)(x), 9.0 * x ** 2 + 2.0, rtol=1e-12)


def _appended_through_an_alias(x):
    b = []
    c = b
    c.append(x ** 2)
    return np.sum(b[0])


def _appended_through_an_item(x):
    outer = [[]]
    inner = outer[0]
    inner.append(x ** 2)
    return np.sum(outer[0][0])


def _appended_through_an_entry(x):
    d = {"h": []}
    h = d["h"]
    h.append(x ** 2)
    return np.sum(d["h"][0])


def _appended_through_a_loop_variable(x):
    a, b = [], []
    for lst in (a, b):
        lst.append(x ** 2)
    return np.sum(a[0] + b[0])


@pytest.mark.parametrize("f", [_appended_through_an_alias, _appended_through_an_item, _appended_through_an_entry,
                               _appended_through_a_loop_variable])
def test_appending_through_another_name_for_a_list_is_refused(f):
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="cannot append"):
        srcgrad.grad(f)(np.array([0.5, -1.0]))


def tuple_of_a_generator(params):
    bs = tuple(p[1] for p in params)
    ws = tuple([p[0] * 2.0 for p in params])
    return np.sum(bs[0] * ws[1]) + np.sum(bs[-1] ** 2)


def test_a_tuple_of_a_generator_or_a_grown_list():
    check_gradient(tuple_of_a_generator, PAIRS)
    _, tangent = srcgrad.jvp(lambda x: tuple_of_a_generator([(x, 2.0 * x), (3.0 * x, x)]))(
        np.array([1.0, 2.0]), np.array([1.0, 0.0]))
    np.testing.assert_allclose(tangent, 26.0)
