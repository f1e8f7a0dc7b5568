"""A data global (or closure variable) rebound while the differentiated code runs,
by a call at any depth: the generated code reads it where the source does (found by
an outside tester: it read each global once per call, so the reads after the call
used the old value)."""
from __future__ import annotations

import importlib.util
import sys

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad

OPT = [True, False]
X = np.array([0.3, -1.2, 2.0])

G = 1.0
ARRAY = np.array([1.0, 2.0, 3.0])


def _reset():
    global G, ARRAY
    G, ARRAY = 1.0, np.array([1.0, 2.0, 3.0])


@pytest.fixture(autouse=True)
def _fresh_globals():
    _reset()
    yield
    _reset()


def check_gradient(f, x, optimize):
    """srcgrad's gradient of ``f`` at ``x`` against central differences, the globals
    reset before each evaluation (``f`` rebinds them)."""
    got = srcgrad.grad(f, optimize=optimize)(x)
    _reset()

    def value(x):
        _reset()
        return f(x)
    want = numerical_grad(value, [x], 0)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
    return got


def bump():
    global G
    G = G + 1.0


def one_deep():
    bump()


def two_deep():
    one_deep()


def before_and_after_one(x):
    a = x * G
    bump()
    return np.sum(a * a + x * G)  # G is 1.0, then 2.0


def before_and_after_two(x):
    a = np.sin(x) * G
    one_deep()
    return np.sum(a + x * x * G)


def before_and_after_three(x):
    a = x * G
    two_deep()
    return np.sum(np.tanh(a) * G + x * G)


@pytest.mark.parametrize("optimize", OPT)
@pytest.mark.parametrize("f, factors", [(before_and_after_one, (2.0, 2.0)), (before_and_after_two, None),
                                        (before_and_after_three, None)])
def test_a_global_rebound_one_two_three_calls_deep(f, factors, optimize):
    got = check_gradient(f, X, optimize)
    if factors is not None:  # d/dx (x*x + 2x) = 2x + 2: the second read is the new value
        np.testing.assert_allclose(got, factors[0] * X + factors[1])


def rebinding_in_a_loop(x):
    s = 0.0
    for _ in range(3):
        s = s + np.sum(x * G)  # 1, 2, 3
        bump()
    return s + np.sum(x * x * G)  # 4


@pytest.mark.parametrize("optimize", OPT)
def test_a_global_rebound_in_each_iteration_of_a_loop(optimize):
    got = check_gradient(rebinding_in_a_loop, X, optimize)
    np.testing.assert_allclose(got, 6.0 + 8.0 * X)


def saved_for_the_backward_sweep(x):
    s = 0.0
    for _ in range(3):
        s = s + np.sum(np.sin(x * G) * G)  # the backward sweep needs each iteration's G
        two_deep()
    return s


@pytest.mark.parametrize("optimize", OPT)
def test_each_iterations_value_is_saved_for_the_backward_sweep(optimize):
    check_gradient(saved_for_the_backward_sweep, X, optimize)


class Scaled:
    def __init__(self, w):
        self.w = w

    def __call__(self, x):
        h = x * self.w * G
        two_deep()
        return h + x * G


def in_a_method(model, x):
    return np.sum(model(x) ** 2)


@pytest.mark.parametrize("optimize", OPT)
def test_a_global_rebound_inside_a_method_of_a_model(optimize):
    model, x = Scaled(np.array([0.5, 1.5, -1.0])), X.copy()
    got = srcgrad.grad(in_a_method, wrt=1, optimize=optimize)(model, x)

    def value(x):
        _reset()
        return in_a_method(model, x)
    np.testing.assert_allclose(got, numerical_grad(value, [x], 0), rtol=1e-6, atol=1e-8)


def float32(x):
    a = x * np.float32(G)
    bump()
    return np.sum(a * x * np.float32(G))


@pytest.mark.parametrize("optimize", OPT)
def test_float32(optimize):
    x = X.astype(np.float32)
    got = srcgrad.grad(float32, optimize=optimize)(x)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, 4.0 * X, rtol=1e-6)  # x*x*1*2


def swap_array():
    global ARRAY
    ARRAY = np.array([-2.0, 0.5, 4.0])


def array_rebound(x):
    a = np.sum(x * ARRAY)
    swap_array()
    return a + np.sum(np.cos(x) * ARRAY)


@pytest.mark.parametrize("optimize", OPT)
def test_a_global_array_rebound_to_another_array(optimize):
    got = check_gradient(array_rebound, X, optimize)
    np.testing.assert_allclose(got, [1.0, 2.0, 3.0] - np.sin(X) * [-2.0, 0.5, 4.0])


def test_a_closure_variable_rebound_by_nonlocal():
    def make():
        scale = 1.0

        def grow():
            nonlocal scale
            scale = scale * 3.0

        def f(x):
            a = np.sum(x * scale)
            grow()
            return a + np.sum(x * x * scale)
        return f
    got = srcgrad.grad(make())(X)
    np.testing.assert_allclose(got, 1.0 + 6.0 * X)


def test_globals_no_module_in_sys_modules_holds_are_read_live(tmp_path):
    path = tmp_path / "srcgrad_unlisted_module.py"
    path.write_text("import numpy as np\nG = 1.0\n\n\ndef bump():\n    global G\n    G = 5.0\n\n\n"
                    "def f(x):\n    a = np.sum(x * G)\n    bump()\n    return a + np.sum(x * G)\n")
    spec = importlib.util.spec_from_file_location("srcgrad_unlisted_module", path)
    module = importlib.util.module_from_spec(spec)  # (not put in sys.modules)
    spec.loader.exec_module(module)
    np.testing.assert_allclose(srcgrad.grad(module.f)(X), 6.0 * np.ones(3))
    module.G = 1.0
    module.f = lambda x: 0.0  # the name the module binds no longer holds the function: its globals do
    assert "srcgrad_unlisted_module" not in sys.modules


def test_rebound_between_calls_too():
    def read(x):
        return np.sum(x * G)
    grad = srcgrad.grad(read)
    np.testing.assert_allclose(grad(X), np.ones(3))
    global G
    G = 7.0
    np.testing.assert_allclose(grad(X), 7.0 * np.ones(3))
