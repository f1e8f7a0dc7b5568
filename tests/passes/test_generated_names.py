"""A user's name that the generated code also uses: its modules (``np``, ``rt``,
``dispatch``, ``math``, ``scipy``), its stacks (``loop1_stack``, ``if1_stack``), a saved
shape (``h_shape``), its pullback (``f_pullback``).  The user's local keeps its meaning
(renamed in the code, ``rt`` → ``rt_2``: ``anf._rename_reserved``) or the generated name
is a fresh one; a GRU's reset gate ``rt`` once hid ``rt.fill_like``."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad

W = np.array([0.3, -0.7, 1.1])
X = np.array([[0.5, 1.0, -0.4], [1.5, -0.2, 0.8]])


def check_gradient(f, *args, index=0, dtype=np.float64):
    args = [a.astype(dtype) if isinstance(a, np.ndarray) else a for a in args]
    g = srcgrad.grad(f, wrt=index)(*args)
    assert g.dtype == dtype
    want = numerical_grad(f, [a.astype(np.float64) if isinstance(a, np.ndarray) else a for a in args], index)
    np.testing.assert_allclose(g, want, rtol=1e-4 if dtype == np.float32 else 1e-6, atol=1e-5)


def local_rt(w, x):
    rt = np.tanh(w * x)  # a GRU's reset gate
    return np.sum(rt + w)


def local_np(w, x):
    np = 3.0
    return (w[0] * np * x[0, 0]) ** 2


def local_modules(w, x):
    dispatch = w * 2
    math = dispatch ** 2
    scipy = math * x
    cp = scipy.sum(axis=0)
    return cp @ w


def parameter_rt(rt, x):
    return np.sum(np.tanh(rt * x) ** 2)


def loop_variable_rt(w, x):
    s = 0.0
    for rt in x:
        s = s + np.sum(np.tanh(rt * w))
    return s


def rt_in_a_loop(w, x):
    h = w
    for i in range(2):
        rt = 1 / (1 + np.exp(-(x[i] * h)))
        h = np.tanh(rt * h)
        rt = rt * h
    return np.sum(h * rt)


def rt_in_a_branch(w, x):
    s = 0.0
    for i in range(2):
        if i > 0:
            rt = np.sin(w * x[i])
            s = s + np.sum(rt ** 2)
    return s


def _gate(a, b):
    rt = np.tanh(a * b)
    np_ = rt
    return rt * np_


def rt_in_a_helper(w, x):
    return np.sum(_gate(w, x))


def _gate_of(rt, b):
    return np.tanh(rt * b)


def rt_a_helpers_parameter(w, x):
    return np.sum(_gate_of(w, x) ** 2)


def nested_def_rt(w, x):
    def rt(a, np=2.0):
        return a * np
    return np.sum(np.sin(rt(w, np=3.0)) * x)


class Cell:
    def __init__(self, w):
        self.w = w

    def __call__(self, x):
        rt = np.tanh(self.w * x)
        dispatch = rt * self.w
        return np.sum(dispatch ** 2)


def method_rt(w, x):
    return Cell(w)(x)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("f", [local_rt, local_np, local_modules, parameter_rt, loop_variable_rt,
                               rt_in_a_loop, rt_in_a_branch, rt_in_a_helper, rt_a_helpers_parameter,
                               nested_def_rt, method_rt])
def test_a_local_named_like_a_module_of_the_generated_code(f, dtype):
    check_gradient(f, W, X, dtype=dtype)


def test_a_parameter_named_rt_by_name_in_wrt_jvp_and_value_and_grad():
    want = numerical_grad(parameter_rt, [W, X], 0)
    np.testing.assert_allclose(srcgrad.grad(parameter_rt, wrt="rt")(W, X), want, rtol=1e-6)
    g_rt, g_x = srcgrad.grad(parameter_rt, wrt=("rt", "x"))(W, X)
    np.testing.assert_allclose(g_x, numerical_grad(parameter_rt, [W, X], 1), rtol=1e-6)
    value, g = srcgrad.value_and_grad(parameter_rt)(W, X)
    assert value == pytest.approx(parameter_rt(W, X))
    np.testing.assert_allclose(g, want, rtol=1e-6)
    v = np.array([1.0, -2.0, 0.5])
    value, tangent = srcgrad.jvp(parameter_rt)(W, X, v)
    assert tangent == pytest.approx(want @ v, rel=1e-6)


def test_forward_mode_and_second_order_with_locals_named_np_and_rt():
    def f(w):
        np = 3.0
        rt = w * np
        return rt[0] ** 2 * rt[2] + rt[1]

    v = np.array([1.0, -2.0, 0.5])
    _, tangent = srcgrad.jvp(f)(W, v)
    assert tangent == pytest.approx(numerical_grad(f, [W], 0) @ v, rel=1e-6)
    hessian = srcgrad.hessian(f)(W)
    want = np.array([numerical_grad(lambda w: srcgrad.grad(f)(w)[i], [W], 0) for i in range(3)])
    np.testing.assert_allclose(hessian, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(srcgrad.hvp(f)(W, v), want @ v, rtol=1e-5, atol=1e-6)


def test_intermediates_and_hooks_name_a_local_rt():
    def f(w):
        rt = np.sin(w)
        return np.sum(rt ** 2)

    g, watched = srcgrad.grad(f, intermediates=("rt",))(W)
    np.testing.assert_allclose(watched["rt"], 2 * np.sin(W))
    np.testing.assert_allclose(srcgrad.grad(f, hooks={"rt": lambda g: 0 * g})(W), 0 * W)


def user_stacks(w, x):
    loop1_stack = [w]
    if1_stack = w * 2
    for i in range(3):
        loop1_stack.append(np.sin(loop1_stack[-1]) * w)
        if i > 0:
            t = np.cos(loop1_stack[-1])
            loop1_stack.append(t * if1_stack)
    return np.sum(loop1_stack[-1] * x)


def user_saved_shape(w, x):
    s = 0.0
    for i in range(3):
        h = w * i
        h_shape = np.sin(w) * i  # the backward sweep reads only `h`'s shape: saved as a new name
        s = s + np.sum((h + x) ** 2) + np.sum(h_shape ** 2)
    return s


@pytest.mark.parametrize("f", [user_stacks, user_saved_shape])
def test_a_local_named_like_a_stack_or_a_saved_shape(f):
    check_gradient(f, W, X)
    check_gradient(f, W, X, dtype=np.float32)


def test_a_local_named_like_the_pullback():
    def f(w):
        f_pullback = w * 2
        f_grad = f_pullback ** 2
        return np.sum(np.sin(f_grad))

    value, pullback = srcgrad.vjp(f)(W)
    np.testing.assert_allclose(pullback(1.0), numerical_grad(f, [W], 0), rtol=1e-6)
    check_gradient(f, W)


# ---- the user's free names (globals) named like a module of the generated code ------------

def rt(x, n=2):  # recursive: called, not inlined, under its own name
    if n == 0:
        return np.sin(x)
    return rt(x, n - 1) * 1.5


def dispatch(x, n=1):
    if n == 0:
        return np.cos(x)
    return dispatch(x, n - 1) * 2.0


def reads_a_global_rt(w, x):
    return np.sum(rt(w) ** 2 * x[0])


def _reads_dispatch(w):
    return dispatch(w) * w


def a_helper_reads_a_global_dispatch(w, x):
    return np.sum(_reads_dispatch(w) * x[1])


@pytest.mark.parametrize("f", [reads_a_global_rt, a_helper_reads_a_global_dispatch])
def test_a_global_named_like_a_module_of_the_generated_code(f):
    check_gradient(f, W, X)
    check_gradient(f, W, X, dtype=np.float32)
    v = np.array([1.0, -2.0, 0.5])
    _, tangent = srcgrad.jvp(f)(W, X, v)
    assert tangent == pytest.approx(numerical_grad(f, [W, X], 0) @ v, rel=1e-6)


# ---- the tester's GRU: its reset gate is `rt`, its states a list written by index ---------

def _sigmoid(z):
    return 1 / (1 + np.exp(-z))


def gru(Wz, Wr, Wh, xs):
    T = len(xs)
    hs = [None] * (T + 1)
    hs[0] = np.zeros(3)
    for t in range(1, T + 1):
        xh = np.concatenate([xs[t - 1], hs[t - 1]])
        zt = _sigmoid(Wz @ xh)
        rt = _sigmoid(Wr @ xh)
        hh = np.tanh(Wh @ np.concatenate([xs[t - 1], rt * hs[t - 1]]))
        hs[t] = (1 - zt) * hs[t - 1] + zt * hh
    return np.sum(hs[-1]) + 0.5 * np.sum(hs[T // 2] ** 2)


@pytest.mark.parametrize("index", [0, 1, 2])
def test_a_gru_whose_reset_gate_is_rt(index):
    r = np.random.default_rng(2)
    args = [r.standard_normal((3, 5)) * 0.5 for _ in range(3)] + [r.standard_normal((5, 2))]
    np.testing.assert_allclose(srcgrad.grad(gru, wrt=index)(*args), numerical_grad(gru, args, index),
                               rtol=1e-6, atol=1e-8)


class _PaddedPool(srcgrad.nn.Module):
    def __init__(self):
        self.conv = srcgrad.nn.Conv2d(1, 2, 3, padding=1)
        self.pool = srcgrad.nn.MaxPool2d(2, padding=1)  # (functional.py reads `-np.inf`)

    def forward(self, x):
        return self.pool(self.conv(x))


def _pooled_loss(model, x):
    return (model(x) ** 2).sum()  # (this module's `np` unread: the layers' is the first)


def test_numpy_read_by_inlined_layers_keeps_its_name():
    """Layers from other modules (layers.py, functional.py) read NumPy as `np`, as the code
    does: `np.inf`, not `np4.inf`."""
    import re
    model, x = _PaddedPool(), np.random.default_rng(0).standard_normal((2, 1, 5, 5))
    code = srcgrad.source(srcgrad.grad(_pooled_loss), model, x)
    assert "-np.inf" in code and not re.search(r"\bnp\d+\b", code)
    srcgrad.testing.check_grads(_pooled_loss, (model, x), wrt=1)


def test_the_header_says_what_the_checks_after_calls_are():
    """`specialised.check(...)` is bound when the code is loaded: the header names it."""
    model, x = _ResidualLike(), np.ones((4, 3))
    code = srcgrad.source(srcgrad.grad(_guarded_loss), model, x)
    assert "specialised.check((" in code
    assert "#   specialised.check(...): after a call not inlined" in code


class _ResidualLike(srcgrad.nn.Module):
    def __init__(self):
        self.lin, self.bn = srcgrad.nn.Linear(3, 3), srcgrad.nn.BatchNorm1d(3)  # (BatchNorm: called, checked after)

    def forward(self, x):
        return self.bn(self.lin(x)) + x


def _guarded_loss(model, x):
    return np.sum(model(x) ** 2)
