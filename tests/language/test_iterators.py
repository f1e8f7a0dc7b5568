"""Iterators: ``iter``, ``map``, ``filter``, ``zip``, ``enumerate``, ``reversed`` held in a
name (``transforms/iterators.py``) or iterated in place (``desugar.lazy_loop``).  A name
read by ``next`` calls and then once whole is followed (``it[0]``, ``it[1:]``); a loop
over ``map``/``filter`` calls the function item by item, as Python's lazy iterators do;
what does not fit is refused at the read, with advice that compiles.  (These once
crashed in the forward sweep: an iterator has no ``len``.)"""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad

W = np.array([0.5, -1.0])
X = np.arange(6.0).reshape(3, 2) / 3 - 0.4


def skip_a_header(w, X):
    it = iter(X)
    next(it)  # (the header row)
    tot = 0.0
    for x in it:
        tot = tot + np.sum(x * w ** 2)
    return tot


def first_and_the_rest(w, X):
    it = iter(X)
    first = next(it)
    return np.sum(first * w) + sum(np.sum(np.sin(x * w)) for x in it)


def two_nexts_in_a_statement(w, X):
    it = iter(X)
    return np.sum(next(it) * w) * np.sum(next(it) * w ** 2)


def map_in_a_name(w, X):
    rows = map(np.tanh, X)
    tot = 0.0
    for x in rows:
        tot = tot + np.sum(x * w ** 2)
    return tot


def zip_in_a_name(w, X):
    pairs = zip(X, X[::-1])
    tot = 0.0
    for a, b in pairs:
        tot = tot + np.sum(a * b * w ** 2)
    return tot


def zip_and_next(w, X):
    pairs = zip(X, X[::-1])
    a0, b0 = next(pairs)
    tot = np.sum(a0 * b0 * w)
    for a, b in pairs:
        tot = tot + np.sum(np.cos(a * w) * b)
    return tot


def enumerate_in_a_name(w, X):
    e = enumerate(X)
    next(e)
    tot = 0.0
    for i, x in e:
        tot = tot + i * np.sum(x * w ** 2)
    return tot


def reversed_in_a_name(w, X):
    r = reversed(X)
    tot = 0.0
    for x in r:
        tot = tot * 0.5 + np.sum(x * w ** 2)
    return tot


def filter_in_a_name(w, X):
    kept = filter(lambda r: np.sum(r) > 0.0, X)
    return sum(np.sum(r * w ** 2) for r in kept)


def iterator_made_in_a_loop(w, X):
    tot = 0.0
    for k in range(2):
        it = iter(X * (k + 1.0))
        next(it)
        for x in it:
            tot = tot + np.sum(np.sin(x * w))
    return tot


def rebound_to_its_list(w, X):
    pairs = zip(X, X[::-1])
    pairs = list(pairs)
    return sum(np.sum(a * b * w ** 2) for a, b in pairs)


def one_name_two_iterators(w, X):
    it = iter(X)
    tot = 0.0
    for x in it:
        tot = tot + np.sum(x * w)
    it = iter(X[::-1])
    next(it)
    for x in it:
        tot = tot * np.sum(x * w)
    return tot


def _layers(w, X):
    for x in X:
        yield np.tanh(x * w)


def iter_of_a_generator(w, X):
    it = iter(_layers(w, X))
    first = next(it)
    return np.sum(first) + sum(np.sum(h ** 2) for h in it)


def _head_and_tail(w, X):
    it = iter(X)
    head = next(it)
    return np.sum(head * w) + sum(np.sum(x * w ** 2) for x in it)


def in_a_helper(w, X):
    return _head_and_tail(w, X) * 2.0


class Reader:
    def __init__(self, X):
        self.X = X

    def loss(self, w):
        rows = map(np.tanh, self.X)
        tot = 0.0
        for r in rows:
            tot = tot + np.sum(r * w ** 2)
        return tot


def as_a_method(w, X):
    return Reader(X).loss(w)


def loops_over_iterators_in_place(w, X):
    tot = 0.0
    for x in iter(X):
        tot = tot + np.sum(x * w)
    for x in map(np.tanh, X):
        tot = tot + np.sum(x * w ** 2)
    for x in filter(lambda r: r[0] > 0.0, X):
        tot = tot + np.sum(x * w ** 3)
    for a, b in zip(map(np.sin, X), X):
        tot = tot + np.sum(a * b * w)
    for i, h in enumerate(map(lambda r: r * w, X)):
        tot = tot + i * np.sum(h ** 2)
    return tot


def generator_expression_in_a_name(w, X):
    k = 1.0
    g = (np.sum(np.sin(x * w)) * k for x in X if x[0] > -0.3)
    k = 3.0  # (read when the items are: Python's generator sees it)
    return sum(g)


def loop_over_a_generator_expression(w, X):
    x = 5.0
    tot = 0.0
    for v in (np.tanh(x * w) for x in X):  # (its `x` is its own)
        tot = tot + np.sum(v ** 2)
    return tot + x


CASES = [generator_expression_in_a_name, loop_over_a_generator_expression, skip_a_header, first_and_the_rest, two_nexts_in_a_statement, map_in_a_name, zip_in_a_name,
         zip_and_next, enumerate_in_a_name, reversed_in_a_name, filter_in_a_name, iterator_made_in_a_loop,
         one_name_two_iterators, iter_of_a_generator, in_a_helper, as_a_method,
         loops_over_iterators_in_place]


@pytest.mark.parametrize("f", CASES)
def test_an_iterator_read_once(f):
    want = numerical_grad(f, [W, X], 0)
    np.testing.assert_allclose(srcgrad.grad(f)(W, X), want, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(srcgrad.grad(f, wrt=1)(W, X), numerical_grad(f, [W, X], 1), rtol=1e-6, atol=1e-8)
    v = np.array([1.0, -0.5])
    value, tangent = srcgrad.jvp(f)(W, X, v)
    assert value == pytest.approx(f(W, X))
    assert tangent == pytest.approx(want @ v, rel=1e-6, abs=1e-8)


@pytest.mark.parametrize("f", [first_and_the_rest, zip_and_next, as_a_method])
def test_an_iterator_read_once_in_float32(f):
    g = srcgrad.grad(f)(W.astype(np.float32), X.astype(np.float32))
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, numerical_grad(f, [W, X], 0), rtol=1e-4, atol=1e-5)


def test_a_zip_rebound_to_its_list():
    # `pairs = list(zip(X, X[::-1]))` once the name is followed: right in `w`, and in `X`
    # (`list(...)` of a zip has a rule of its own, `rt.sequence_of`)
    for wrt in (0, 1):
        g = srcgrad.grad(rebound_to_its_list, wrt=wrt)(W, X)
        np.testing.assert_allclose(g, numerical_grad(rebound_to_its_list, [W, X], wrt), rtol=1e-6)


def test_the_keys_of_a_dict_by_next():
    def f(w, d):
        keys = iter(d)
        k0 = next(keys)
        return np.sum(d[k0] * w)

    d = {"a": X[0], "b": X[1]}
    np.testing.assert_allclose(srcgrad.grad(f)(W, d), X[0])


# ---- refused, at the read, with advice that compiles -------------------------------------------

def read_twice(w, X):
    it = iter(X)
    return sum(np.sum(x * w) for x in it) + sum(np.sum(x * w) for x in it)  # (the second: empty)


def next_on_some_paths(w, X):
    it = iter(X)
    if np.sum(w) > 0:
        next(it)
    tot = 0.0
    for x in it:
        tot = tot + np.sum(x * w)
    return tot


def changed_while_iterated(w, X):
    xs = list(X)
    it = iter(xs)
    next(it)
    xs.append(X[0] * 5.0)  # (Python's iterator would read it too)
    tot = 0.0
    for x in it:
        tot = tot + np.sum(x * w)
    return tot


def next_on_a_map(w, X):
    rows = map(np.tanh, X)
    first = next(rows)
    return np.sum(first * w)


def filter_in_a_zip(w, X):
    tot = 0.0
    for a, b in zip(filter(lambda r: r[0] > 0.0, X), X):
        tot = tot + np.sum(a * b * w)
    return tot


def next_on_a_generator_expression(w, X):  # (collected as a list read at a counter: right)
    g = (np.sum(x * w) for x in X)
    first = next(g)
    return first * 2.0


@pytest.mark.parametrize("f, line, text", [
    (read_twice, "return sum(", "kept as an iterator"),
    (next_on_some_paths, "for x in it:", "kept as an iterator"),
    (changed_while_iterated, "xs.append(", "changes `xs` while `it` iterates"),
    (next_on_a_map, "first = next(rows)", "`map` object that `next` reads"),
    (filter_in_a_zip, "for a, b in zip(filter(", "cannot index this `filter"),
])
def test_what_does_not_fit_is_refused_at_its_line(f, line, text):
    with pytest.raises(srcgrad.UserCodeError, match=text) as info:
        srcgrad.grad(f)(W, X)
    assert info.value.origin.filename.endswith("test_iterators.py")
    assert line in info.value.origin.text


def test_the_advice_compiles():
    def listed(w, X):  # read_twice's advice: a list, which each read sees whole
        it = list(X)
        return sum(np.sum(x * w) for x in it) + sum(np.sum(x * w) for x in it[1:])

    def mapped(w, X):  # next_on_a_map's
        rows = list(map(np.tanh, X))
        return np.sum(rows[0] * w) + sum(np.sum(v * w) for v in rows[1:])

    def kept(w, X):  # filter_in_a_zip's
        rows = [v for v in X if v[0] > 0.0]
        tot = 0.0
        for a, b in zip(rows, X):
            tot = tot + np.sum(a * b * w)
        return tot

    def generated(w, X):  # next_on_a_generator_expression's
        g = [np.sum(x * w) for x in X]
        return g[0] * 2.0

    for f in (listed, mapped, kept, generated):
        np.testing.assert_allclose(srcgrad.grad(f)(W, X), numerical_grad(f, [W, X], 0), rtol=1e-6, atol=1e-8)


def test_the_rows_of_an_array_as_a_list():
    # (`list(X)` of an array being differentiated: its rows carry their adjoints, `rt.sequence_of`)
    def f(w, X):
        rows = list(X)
        return np.sum(rows[0] * w) + sum(np.sum(np.sin(r * w)) for r in rows[1:])

    np.testing.assert_allclose(srcgrad.grad(f, wrt=1)(W, X), numerical_grad(f, [W, X], 1), rtol=1e-6, atol=1e-8)
    V = np.ones_like(X)
    _, tangent = srcgrad.jvp(f, wrt=1)(W, X, V)
    assert tangent == pytest.approx(np.sum(numerical_grad(f, [W, X], 1) * V), rel=1e-6)


def test_an_iterator_made_on_two_paths_is_refused_where_the_loop_reads_it():
    def f(w, X):
        if np.sum(w) > 0:
            pairs = zip(X, X[::-1])
        else:
            pairs = zip(X[::-1], X)
        tot = 0.0
        for a, b in pairs:
            tot = tot + np.sum(a * b * w)
        return tot

    with pytest.raises(srcgrad.UserCodeError, match="kept as an iterator") as info:
        srcgrad.grad(f)(W, X)
    assert "for a, b in pairs:" in info.value.origin.text


def test_next_on_a_generator_expression_held_in_a_name():
    np.testing.assert_allclose(srcgrad.grad(next_on_a_generator_expression)(W, X),
                               numerical_grad(next_on_a_generator_expression, [W, X], 0), rtol=1e-6)


# ---- enumerate(zip(...)) and zip(enumerate(...), ...) in a for loop ----------------------

def _enumerated_pairs(ws, bs, x):
    for i, (w, b) in enumerate(zip(ws, bs)):
        x = np.tanh(x @ w + b) * (i + 1)
    return np.sum(x)


def _zipped_enumeration(ws, bs, x):
    for (i, w), b in zip(enumerate(ws), bs):
        x = np.tanh(x @ w + b) * (i + 1)
    return np.sum(x)


@pytest.mark.parametrize("fn", [_enumerated_pairs, _zipped_enumeration])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_enumerate_of_zip_in_a_loop(fn, dtype):
    from srcgrad.testing import check_grads

    rng = np.random.default_rng(0)
    ws = [rng.standard_normal((2, 2)).astype(dtype) for _ in range(3)]
    bs = [rng.standard_normal(2).astype(dtype) for _ in range(3)]
    x = np.linspace(-1, 1, 4).reshape(2, 2).astype(dtype)
    g = srcgrad.grad(fn, wrt=(0, 1))(ws, bs, x)
    assert g[0][0].dtype == dtype
    if dtype == np.float64:
        check_grads(fn, (ws, bs, x), wrt=(0, 1))


def test_enumerate_of_zip_over_a_models_layers():
    from srcgrad import nn
    from srcgrad.testing import check_grads

    class Stack(nn.Module):
        def __init__(self):
            self.fcs, self.norms = [nn.Linear(2, 2), nn.Linear(2, 2)], [nn.LayerNorm(2), nn.LayerNorm(2)]

        def forward(self, x):
            for i, (fc, norm) in enumerate(zip(self.fcs, self.norms)):
                x = norm(fc(x)) * (i + 1)
            return x

    check_grads(lambda m, x: np.sum(m(x) ** 2), (Stack(), np.linspace(-1, 1, 4).reshape(2, 2)), wrt=0)
