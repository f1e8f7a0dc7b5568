"""Adjoints of values read out of containers: every read of a tuple, list or
dict contributes to its adjoint, whatever path it took (unpacked twice, unpacked
and indexed, built by appends, returned from one branch of a recursion), and a
loop's carried adjoints have each iteration's own shape (layers of different
widths).  Each kind is checked against central finite differences, as a plain
function, in a loop, in a helper, as a method and in float32."""
from __future__ import annotations

import numpy as np
import optree
import pytest

import srcgrad
from tests.finite_differences import check_gradient, finite_differences


# ---- a tuple read twice ------------------------------------------------------

def unpacked_twice(pair):
    w, b = pair
    v, c = pair
    return w * b + v * c


def unpacked_twice_summed(pair):
    w, b = pair
    v, c = pair
    return np.sum(w * b + v * c)


def unpacked_and_indexed(pair):
    w, b = pair
    return np.sum(w * b + pair[0] * np.sin(pair[1]))


def unpacked_twice_in_loop(pair, n=3):
    total = 0.0
    for _ in range(n):
        w, b = pair
        v, c = pair
        total = total + w * b + v * np.cos(c)
    return np.sum(total)


def _unpack_sum(pair):
    a, b = pair
    return a * b


def unpacked_in_helper_twice(pair):
    return np.sum(_unpack_sum(pair) + _unpack_sum(pair) * pair[1])


class Scaler:
    def __init__(self, pair):
        self.pair = pair

    def value(self):
        w, b = self.pair
        v, c = self.pair
        return np.sum(w * b + v * c)


def method_unpacks_twice(model):
    return model.value()


def unpacked_twice_after_branch(x, flag):
    if flag > 0:
        t = (x * 2.0, x + 1.0)
    else:
        t = (x, x)
    a, b = t
    c, d = t
    return np.sum(a * b + c * d)


@pytest.mark.parametrize("f", [unpacked_twice_summed, unpacked_and_indexed, unpacked_twice_in_loop,
                               unpacked_in_helper_twice])
@pytest.mark.parametrize("pair", [(3.0, 5.0), (np.array([1.0, 2.0]), np.array([0.5, -1.5]))])
def test_a_tuple_read_twice_gets_both_adjoints(f, pair):
    check_gradient(f, pair)


def test_unpacked_twice_exact():
    assert srcgrad.grad(unpacked_twice)((3.0, 5.0)) == (10.0, 6.0)


def test_a_method_unpacking_its_field_twice():
    model = Scaler((np.array([1.0, 2.0]), np.array([3.0, -1.0])))
    g = srcgrad.grad(method_unpacks_twice)(model)
    np.testing.assert_allclose(g.pair[0], 2 * model.pair[1])
    np.testing.assert_allclose(g.pair[1], 2 * model.pair[0])


@pytest.mark.parametrize("flag", [1, -1])
def test_a_tuple_bound_in_both_branches_then_unpacked_twice(flag):
    check_gradient(unpacked_twice_after_branch, np.array([0.3, -1.2]), flag)


def test_a_tuple_read_twice_in_float32():
    pair = (np.array([1.0, 2.0], np.float32), np.array([0.5, -1.5], np.float32))
    g = srcgrad.grad(lambda p: np.sum(unpacked_and_indexed(p)))(pair)
    assert g[0].dtype == np.float32
    np.testing.assert_allclose(g[0], pair[1] + np.sin(pair[1]), rtol=1e-6)
    np.testing.assert_allclose(g[1], pair[0] + pair[0] * np.cos(pair[1]), rtol=1e-6)


# ---- a list built by appends, then unpacked -----------------------------------

def appended_then_unpacked(x):
    xs = []
    xs.append(2.0 * x)
    xs.append(3.0 * x)
    a, b = xs
    return np.sum(a + b)


def appended_in_loop_then_unpacked(x):
    xs = []
    for k in range(3):
        xs.append(np.sin(x) * (k + 1))
    a, b, c = xs
    return np.sum(a * b + c) + np.sum(xs[0])


def _collect(x):
    out = []
    out.append(x * x)
    out.append(np.exp(x))
    return out


def appended_in_helper_then_unpacked(x):
    a, b = _collect(x)
    return np.sum(a * b)


@pytest.mark.parametrize("f", [appended_then_unpacked, appended_in_loop_then_unpacked,
                               appended_in_helper_then_unpacked])
def test_a_list_built_by_appends_then_unpacked(f):
    check_gradient(f, np.array([0.4, -0.7]))


def test_appended_then_unpacked_exact_and_float32():
    np.testing.assert_array_equal(srcgrad.grad(appended_then_unpacked)(np.ones(2)), [5.0, 5.0])
    g = srcgrad.grad(appended_then_unpacked)(np.ones(2, np.float32))
    assert g.dtype == np.float32 and np.all(g == 5.0)


# ---- a recursion's result returned from one branch ---------------------------

def _recurse(x, p):
    if p == "same":
        return _recurse(x, 1)
    return x * 2.0, p


def recursion_returned_directly(x):
    y, p = _recurse(x, "same")
    return np.sum(y)


def _early(x, flag):
    if flag:
        return x * 3.0, x
    return np.sin(x), x * x


def early_return_then_unpacked(x, flag):
    a, b = _early(x, flag)
    return np.sum(a * b)


def test_a_recursive_call_returned_directly():
    np.testing.assert_array_equal(srcgrad.grad(recursion_returned_directly)(np.ones(2)), [2.0, 2.0])
    check_gradient(recursion_returned_directly, np.array([0.5, 1.5]))


@pytest.mark.parametrize("flag", [True, False])
def test_an_early_return_then_unpacking(flag):
    check_gradient(early_return_then_unpacked, np.array([0.5, -1.5]), flag)


# ---- loops whose carried values change shape -----------------------------------

def _logsumexp(x, axis=None, keepdims=False):
    m = np.max(x, axis=axis, keepdims=True)
    return m + np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True))


def mlp(params, inputs):
    for W, b in params:
        outputs = np.dot(inputs, W) + b
        inputs = np.tanh(outputs)
    return outputs - _logsumexp(outputs, axis=1, keepdims=True)


def mlp_loss(params, inputs):
    return np.sum(mlp(params, inputs) ** 2)


def mlp_indexed_loss(params, inputs):
    for i in range(len(params)):
        outputs = inputs @ params[i][0] + params[i][1]
        inputs = np.tanh(outputs)
    return np.sum(outputs ** 2)


class MLP:
    def __init__(self, params):
        self.params = params

    def __call__(self, x):
        for W, b in self.params:
            h = x @ W + b
            x = np.tanh(h)
        return h


def mlp_method_loss(model, x):
    return np.sum(model(x) ** 2)


def _params(widths, dtype=np.float64, seed=0):
    rs = np.random.RandomState(seed)
    return [(rs.randn(m, n).astype(dtype), rs.randn(n).astype(dtype)) for m, n in zip(widths[:-1], widths[1:])]


@pytest.mark.parametrize("widths", [(5, 4, 3), (5, 1, 3), (3, 4, 1, 2), (2, 6, 6, 1)])
@pytest.mark.parametrize("loss", [mlp_loss, mlp_indexed_loss])
def test_a_loop_over_layers_of_different_widths(widths, loss):
    params = _params(widths)
    x = np.random.RandomState(1).randn(6, widths[0])
    check_gradient(loss, params, x)


@pytest.mark.parametrize("widths", [(5, 4, 3), (4, 1, 2)])
def test_layers_of_different_widths_as_a_method(widths):
    model = MLP(_params(widths))
    x = np.random.RandomState(1).randn(6, widths[0])
    g = srcgrad.grad(mlp_method_loss)(model, x)
    expected = finite_differences(lambda p, x: mlp_method_loss(MLP(p), x), (model.params, x), 0)
    got = optree.tree_leaves(g.params)
    for a, b in zip(got, expected):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)


def test_layers_of_different_widths_in_float32():
    params = _params((5, 1, 3), np.float32)
    x = np.random.RandomState(1).randn(6, 5).astype(np.float32)
    g = srcgrad.grad(mlp_loss)(params, x)
    expected = finite_differences(mlp_loss, ([tuple(np.float64(v) for v in p) for p in params], np.float64(x)), 0)
    for a, b in zip(optree.tree_leaves(g), expected):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=2e-3, atol=2e-3)


def growing(x):
    h = x
    for _ in range(3):
        h = np.concatenate([h, np.sin(h[-1:])])
    return np.sum(h ** 2)


def test_a_carried_array_that_grows_each_iteration():
    check_gradient(growing, np.array([0.3, -0.8]))


# ---- a layer unpacked and the same list iterated; a list returned by a helper ----

def first_layer_then_all(params, x):
    w, b = params[0]
    h = x @ w + b
    for layer in params:
        h = np.tanh(h @ layer[0] + layer[1])
    return np.sum(h)


def test_a_layer_unpacked_and_the_list_iterated_in_one_function():
    rs = np.random.RandomState(0)
    params = [(rs.randn(3, 3), rs.randn(3)), (rs.randn(3, 3), rs.randn(3))]
    check_gradient(first_layer_then_all, params, rs.randn(2, 3))


def _built_beside_a_nested_def(x):
    out = []

    def double(v):
        return v * 2.0
    out.append(double(x))
    out.append(x * 3.0)
    return out


def reads_items_of_a_returned_list(x):
    ys = _built_beside_a_nested_def(x)
    return np.sum(ys[0] * ys[1])


def unpacks_a_returned_list(x):
    a, b = _built_beside_a_nested_def(x)
    return np.sum(a * np.sin(b))


@pytest.mark.parametrize("f", [reads_items_of_a_returned_list, unpacks_a_returned_list])
def test_a_list_built_by_appends_in_a_helper_read_by_its_caller(f):
    check_gradient(f, np.array([1.0, 2.0]))


def test_a_pullback_leaves_the_callers_adjoint_list_alone():
    value, pullback = srcgrad.vjp(_built_beside_a_nested_def)(np.array([1.0, 2.0]))
    given = [np.ones(2), np.ones(2)]
    np.testing.assert_array_equal(pullback(given), [5.0, 5.0])
    assert len(given) == 2


# ---- an intermediate array unpacked into its rows --------------------------------

def rows_one_used(w):
    a, b = np.exp(w)
    return np.sum(a)


def rows_and_an_index(v):
    w = np.sin(v)
    a, b = w
    return np.sum(a * b + w[1])


def rows_twice_and_whole(v):
    w = v * 1.5
    a, b = w
    c, d = w
    return np.sum(a * d + b * c ** 2) + np.sum(w ** 2)


def columns_of_a_transpose(p):
    xs, ys = p.T
    return np.sum(xs * ys)


def rows_of_a_scaled_array(w):
    a, b = -(w * 2.0)
    return np.sum(a * b) + np.sum(w)


def _split(h):
    a, b = h
    return a, b


def rows_split_in_a_helper(w, x):
    h = np.tanh(w @ x)
    mu, log_var = _split(h)
    return np.sum(mu ** 2 + np.exp(log_var)) + np.sum(h[0])


def rows_in_a_branch(w, flag):
    h = np.exp(w)
    if flag:
        a, b = h
    else:
        b, a = h
    return np.sum(a * 2.0) + np.sum(h)


class Halves:
    def __init__(self, v):
        self.v = v

    def value(self):
        w = np.sin(self.v)
        a, b = w
        return np.sum(a * b + w[1])


@pytest.mark.parametrize("f, args", [
    (rows_one_used, (np.array([[-1.6, 0.6], [0.2, 0.3]]),)),
    (rows_and_an_index, (np.array([0.3, -0.2]),)),
    (rows_and_an_index, (np.array([[0.3, -0.2], [1.0, 2.0]]),)),
    (rows_twice_and_whole, (np.array([[0.3, -0.2], [1.0, 2.0]]),)),
    (columns_of_a_transpose, (np.arange(6.0).reshape(3, 2),)),
    (rows_of_a_scaled_array, (np.arange(6.0).reshape(2, 3),)),
    (rows_split_in_a_helper, (np.array([[0.3, -0.2, 0.5], [1.0, 0.1, -0.4]]), np.ones((3, 2)))),
    (rows_in_a_branch, (np.array([0.3, -0.2]), True)),
    (rows_in_a_branch, (np.array([0.3, -0.2]), False)),
])
def test_an_array_unpacked_into_rows_sums_every_use(f, args):
    check_gradient(f, *args)


def test_an_array_unpacked_in_a_method_and_in_float32():
    model = Halves(np.array([0.3, -0.2]))
    g = srcgrad.grad(lambda m: m.value())(model)
    np.testing.assert_allclose(g.v, finite_differences(rows_and_an_index, (model.v,), 0)[0], rtol=1e-6)
    g32 = srcgrad.grad(rows_and_an_index)(np.array([0.3, -0.2], np.float32))
    assert g32.dtype == np.float32
    np.testing.assert_allclose(g32, g.v, rtol=1e-5)
