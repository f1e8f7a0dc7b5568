"""Forward mode (``srcgrad.jvp``) on the kinds of code reverse mode takes: loops,
branches, helpers (known when compiling and at run time), methods, in-place
writes, lists, structures in and out, float32; each tangent against central
differences, with the optimizer on and off.  The generated code is pinned by a
golden test; refusals name the user's line."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad


def tree_map(fn, *trees):
    _, leaves, spec = srcgrad.tree.flatten(trees[0])
    others = [srcgrad.tree.flatten(t)[1] for t in trees[1:]]
    return srcgrad.tree.unflatten(spec, [fn(*parts) for parts in zip(leaves, *others)])


def central(f, xs, vs, eps=1e-6):
    """``J v`` by central differences of ``f`` along ``vs`` (structures leaf by leaf)."""
    def moved(sign):
        return [tree_map(lambda x, v: x + sign * eps * v, x, v) for x, v in zip(xs, vs)]
    plus, minus = f(*moved(1)), f(*moved(-1))
    if isinstance(plus, tuple):
        return tuple((np.asarray(p) - np.asarray(m)) / (2 * eps) for p, m in zip(plus, minus))
    return (np.asarray(plus) - np.asarray(minus)) / (2 * eps)


def check_tangent(f, args, wrt=0, rtol=1e-6, atol=1e-8):
    """``jvp(f, wrt)`` at ``args`` along random tangents, against central differences."""
    wrts = wrt if isinstance(wrt, tuple) else (wrt,)
    rng = np.random.default_rng(0)
    vs = [tree_map(lambda a: rng.standard_normal(np.shape(a)) if np.ndim(a) else float(rng.standard_normal()),
                           args[i]) for i in wrts]
    expected = central(lambda *ws: f(*[ws[wrts.index(i)] if i in wrts else a for i, a in enumerate(args)]),
                       [args[i] for i in wrts], vs)
    for optimize in (True, False):
        value, tangent = srcgrad.jvp(f, wrt=wrt, optimize=optimize)(*args, tuple(vs) if isinstance(wrt, tuple)
                                                                    else vs[0])
        if isinstance(expected, tuple):
            assert isinstance(tangent, tuple) and len(tangent) == len(expected)
            for t, e in zip(tangent, expected):
                np.testing.assert_allclose(t, e, rtol=rtol, atol=atol)
        else:
            np.testing.assert_allclose(tangent, expected, rtol=rtol, atol=atol)
    return value, tangent


X = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
W1 = np.linspace(0.5, -0.5, 12).reshape(3, 4)
W2 = np.linspace(-0.3, 0.4, 4).reshape(4, 1)


# ---- straight-line, several inputs and outputs ------------------------------
def net(x, w1, w2):
    h = np.tanh(x @ w1)
    return np.sum((h @ w2) ** 2)


def test_two_layer_net_every_wrt():
    for wrt in (0, 1, 2, (0, 1), (0, 1, 2)):
        check_tangent(net, (X, W1, W2), wrt)


def pair(x, w):
    h = x @ w
    return np.sin(h), np.sum(h), w.shape[0]


def test_tuple_output_and_a_constant_output():
    value, tangent = check_tangent(pair, (X, W1), 0)
    assert np.all(tangent[2] == 0)


def test_output_independent_of_the_input_is_zero():
    def f(x, y):
        return y * 2.0

    value, tangent = srcgrad.jvp(f)(X, X, np.ones_like(X))
    np.testing.assert_array_equal(tangent, np.zeros_like(X))


# ---- control flow --------------------------------------------------------------
def loop_branch(x, n):
    s = x
    acc = 0.0
    for i in range(n):
        if i % 2:
            s = s * x
        else:
            s = np.sin(s)
        acc = acc + np.sum(s)
    return acc


def while_loop(x):
    y = x
    k = 0
    while k < 4:
        y = np.cos(y) + x
        k += 1
    return y


def early_exit(x):
    total = 0.0
    for i in range(5):
        if total > 1.5:
            break
        total = total + np.sum(x * i)
    return total


def test_loops_and_branches():
    check_tangent(loop_branch, (X, 5))
    check_tangent(while_loop, (X,))
    check_tangent(early_exit, (np.full(3, 0.2),))


def branch_binds_once(x, c):
    if c:
        z = x * 2.0
    else:
        z = 1.0
    return z * x


def test_a_branch_that_binds_a_constant():
    check_tangent(branch_binds_once, (X, True))
    check_tangent(branch_binds_once, (X, False))


# ---- calls -----------------------------------------------------------------------
def layer(x, w):
    return np.maximum(x @ w, 0.0)


def two_layers(x, w1, w2):
    h = layer(x, w1)
    return layer(h, w2)


class Scale:
    def __init__(self, a):
        self.a = a

    def apply(self, x):
        return self.a * np.exp(x)


def method_call(x, s):
    return s.apply(x) + x


def recursive(x, n):
    if n == 0:
        return x
    return np.sin(recursive(x, n - 1))


def test_calls():
    check_tangent(two_layers, (X, W1, W2), (0, 1, 2))
    check_tangent(method_call, (X, Scale(2.0)))
    check_tangent(recursive, (X, 3))


def test_call_with_a_tuple_result():
    def f(x, w):
        a, b, _ = pair(x, w)
        return a * b

    check_tangent(f, (X, W1), (0, 1))


# ---- in-place writes and lists ------------------------------------------------------
def writes(x):
    y = np.zeros(4)
    for i in range(3):
        y[i] = np.sum(x[i:]) * x[0]
    y[3] = 2.0
    return y


def write_into_copy(x):
    z = x + 0.0   # z's tangent must not be x's: the write below would reach x_dot
    z[0] = 5.0
    return z * x


def int_array_write(x):
    y = np.zeros(3, dtype=np.int64)
    y[0] = x[0] * 10   # truncated: zero derivative
    return y * x


def lists(x):
    hs = []
    for i in range(3):
        hs.append(x * i)
    last = hs.pop()
    return hs[1] * last + np.sum(np.stack(hs))


def test_writes_and_lists():
    check_tangent(writes, (np.array([0.3, -0.2, 0.5]),))
    v = np.ones(3)
    x = np.array([0.3, -0.2, 0.5])
    check_tangent(write_into_copy, (x,))
    _, t = srcgrad.jvp(write_into_copy)(x, v)
    np.testing.assert_array_equal(v, np.ones(3))  # the caller's tangent is untouched
    check_tangent(int_array_write, (np.array([0.33, -0.2, 0.5]),))
    check_tangent(lists, (x,))


# ---- structures ------------------------------------------------------------------------
def dict_params(x, params):
    h = np.tanh(x @ params["w1"])
    return {"out": h @ params["w2"], "h": h}


def test_structures_in_and_out():
    params = {"w1": W1, "w2": W2}
    value, tangent = srcgrad.jvp(dict_params, wrt=1)(X, params, {"w1": np.ones_like(W1), "w2": np.zeros_like(W2)})
    assert set(tangent) == {"out", "h"}
    eps = 1e-6
    plus = dict_params(X, {"w1": W1 + eps, "w2": W2})
    minus = dict_params(X, {"w1": W1 - eps, "w2": W2})
    for key in ("out", "h"):
        np.testing.assert_allclose(tangent[key], (plus[key] - minus[key]) / (2 * eps), rtol=1e-6, atol=1e-8)


def test_model_object():
    model = srcgrad.nn.Linear(3, 2)

    def f(model, x):
        return np.sum(np.tanh(model(x)))

    tangent_model = srcgrad.nn.Linear(3, 2)
    tangent_model.weight = np.ones_like(model.weight)
    tangent_model.bias = np.arange(2.0)
    value, tangent = srcgrad.jvp(f)(model, X, tangent_model)
    _, grads = srcgrad.value_and_grad(f)(model, X)
    assert tangent == pytest.approx(np.sum(grads.weight * tangent_model.weight)
                                    + np.sum(grads.bias * tangent_model.bias))


# ---- dtypes, API, refusals ----------------------------------------------------------
def test_float32_stays_float32():
    x32, w32 = X.astype(np.float32), W1.astype(np.float32)
    value, tangent = srcgrad.jvp(lambda x, w: np.tanh(x @ w))(x32, w32, np.ones_like(x32))
    assert tangent.dtype == np.float32


def test_tangent_shape_is_checked():
    with pytest.raises(ValueError, match=r"shape \(3,\).*shape \(2, 3\)"):
        srcgrad.jvp(net)(X, W1, W2, np.ones(3))


def test_nondifferentiable_outputs_have_no_tangent():
    def f(x):
        k = np.argmax(x)
        return x[k] * 2.0, x > 0

    value, tangent = srcgrad.jvp(f)(np.array([0.1, 0.7, -0.3]), np.array([1.0, 2.0, 3.0]))
    assert tangent[0] == 4.0 and not np.any(tangent[1])


def no_tangent_rule(x):
    return np.i0(x)


def test_refusals_of_reverse_mode_hold():
    def writes_through_view(x):
        y = np.copy(x)
        v = y[0:2]
        v[0] = 3.0 * x[1]
        return np.sum(y * x)

    with pytest.raises(srcgrad.UserCodeError):
        srcgrad.jvp(writes_through_view)(np.ones(3), np.ones(3))


def test_a_view_read_after_a_write_into_its_base_is_made_again():
    def reads_view(x):
        y = np.copy(x)
        v = y[0:2]
        y[0] = 3.0 * x[2]
        return np.sum(v * x[:2])

    x, dx = np.array([0.3, -1.2, 0.7]), np.array([1.0, 2.0, -0.5])
    value, tangent = srcgrad.jvp(reads_view)(x, dx)
    assert value == pytest.approx(reads_view(x))
    assert tangent == pytest.approx(np.dot(srcgrad.grad(reads_view)(x), dx))


def test_missing_rule_refused():
    with pytest.raises(srcgrad.NoDerivativeRuleError, match="i0"):
        srcgrad.jvp(no_tangent_rule)(np.ones(4), np.ones(4))


# ---- the generated code ------------------------------------------------------------------
GOLDEN = '''\
# srcgrad: forward mode of net (test_forward.py:56) | wrt: x, w1 | backend: numpy
import numpy as np
from srcgrad import runtime as rt

def net_jvp(x, w1, w2, x_dot, w1_dot):
    # test_forward.py:57  h = np.tanh(x @ w1)
    _t1 = x @ w1
    _t1_dot = x_dot @ w1 + x @ w1_dot
    h = np.tanh(_t1)
    h_dot = _t1_dot * (1 - h ** 2)
    # test_forward.py:58  return np.sum((h @ w2) ** 2)
    _t2 = h @ w2
    _t2_dot = h_dot @ w2
    _t3 = _t2 ** 2
    _t3_dot = _t2_dot * (2 * _t2)
    result = np.sum(_t3)
    result_dot = np.sum(_t3_dot)
    return (result, result_dot)
'''


def test_golden_source():
    assert srcgrad.source(srcgrad.jvp(net, wrt=(0, 1)), X, W1, W2) == GOLDEN


def test_entries_of_varargs():
    def f(x, *ws, **opts):
        return np.sum(x * ws[0] + ws[1] * opts["scale"])

    xs = (np.ones(3), np.arange(3.0), np.full(3, 2.0))
    value, tangent = srcgrad.jvp(f, wrt=(2,))(*xs, (np.ones(3),), scale=0.5)
    assert tangent == pytest.approx(0.5 * 3)


class Box:
    def __init__(self, v):
        self.v = v

    @property
    def doubled(self):
        return np.sin(self.v) * 2.0


def test_property():
    def f(x):
        return np.sum(Box(x).doubled)

    check_tangent(f, (np.array([0.1, 0.5, -0.3]),))


def _slope(x):
    return 3.0 * x ** 2


@srcgrad.custom_adjoint
def cube(x):
    return x ** 3


@cube.defadjoint
def _cube_adjoint(ans_bar, ans, x):
    return ans_bar * 3.0 * x ** 2


@cube.defjvp
def _cube_tangent(ans, x, x_dot=None):
    return _slope(x) * x_dot  # calls a helper of the user's: run as a function, not inlined


def test_custom_tangent_rule_that_calls_a_helper():
    def f(x):
        return np.sum(cube(x) * x)

    check_tangent(f, (np.array([0.5, -1.0, 2.0]),))
