"""What compiled code was specialised on (a layer's class, a class's method, a
function) changed by a call of the user's code while the code runs (found by an
outside tester: the inlined code went on running the old layer).  The code checks
after each such call that was not inlined, and refuses the change at the call's
line; code whose calls were all inlined has no check."""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad

X = np.array([1.5, -2.0, 0.5])
W = np.array([1.0, 2.0, -1.0])


class Lin:
    def __init__(self, w):
        self.w = w

    def __call__(self, x):
        return x * self.w


class Sq:
    def __init__(self, w):
        self.w = w

    def __call__(self, x):
        return x * x * self.w


class Net:
    def __init__(self):
        self.l = Lin(W.copy())

    def __call__(self, x):
        return np.tanh(self.l(x))


NET = Net()
CALLS = 0


def swap():
    NET.l = Sq(NET.l.w)


def swap_deeper():
    swap()


def swapping(m, x):
    a = m(x)
    swap_deeper()
    return np.sum(a + m(x))


def swapping_given(m, x):
    a = m(x)
    swap_given(m)
    return np.sum(a + m(x))


def swap_given(m):
    m.l = Sq(m.l.w)


def test_a_layer_swapped_through_a_global_during_the_call_is_refused_at_the_call():
    global NET
    NET = Net()
    grad = srcgrad.grad(swapping, wrt=1)
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="changed, while the differentiated code ran") \
            as refused:
        grad(NET, X)
    first = str(refused.value).splitlines()
    # (swap_deeper is inlined: the call refused is its own `swap()`)
    assert first[0].startswith(f"{__file__}:{swap_deeper.__code__.co_firstlineno + 1}:") and "swap()" in first[1]
    # Called again, the layer swapped is of the same class: compiled for it, and right.
    got = grad(NET, X)

    def value(x):
        global NET
        NET = Net()
        NET.l = Sq(W.copy())
        return swapping(NET, x)
    np.testing.assert_allclose(got, numerical_grad(value, [X], 0), rtol=1e-6, atol=1e-8)
    NET = Net()


def test_a_layer_swapped_through_an_argument_during_the_call_is_refused():
    # (a call given the model may change it: refused when compiling, as any such call)
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="changes its arguments in place"):
        srcgrad.grad(swapping_given, wrt=1)(Net(), X)


class Patched:
    def __init__(self):
        self.w = W.copy()

    def __call__(self, x):
        return x * self.w


def patch():
    Patched.__call__ = lambda self, x: x * x * self.w


def patching(m, x):
    a = m(x)
    patch()
    return np.sum(a * m(x))


def test_a_method_patched_on_the_class_during_the_call_is_refused():
    original = Patched.__call__
    try:
        with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="replaced a method of a class"):
            srcgrad.grad(patching, wrt=1)(Patched(), X)
    finally:
        Patched.__call__ = original


def double(x):
    return 2.0 * x


def triple(x):
    return 3.0 * x


def rebind_double():
    global double
    double = triple


def rebinding_a_function(x):
    a = double(x)
    rebind_double()
    return np.sum(a * double(x))


def test_a_function_rebound_during_the_call_is_refused():
    global double
    original = double
    try:
        with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="rebound a function"):
            srcgrad.grad(rebinding_a_function)(X)
    finally:
        double = original


def count():
    global CALLS
    CALLS += 1


def counting(m, x):
    h = m(x)
    count()  # changes nothing the code was compiled for: checked, and passes
    return np.sum(h * m(x))


@pytest.mark.parametrize("optimize", [True, False])
def test_a_call_that_changes_nothing_the_code_depends_on_runs(optimize):
    net = Net()
    grad = srcgrad.grad(counting, wrt=1, optimize=optimize)
    got = grad(net, X)
    assert ".check(" in srcgrad.source(grad, net, X)
    np.testing.assert_allclose(got, numerical_grad(lambda x: counting(net, x), [X], 0), rtol=1e-6, atol=1e-8)


def test_a_model_whose_calls_are_all_inlined_has_no_check():
    sys.path.insert(0, str(Path(__file__).parents[2] / "examples"))
    try:
        import digits_cnn
    finally:
        sys.path.pop(0)
    model = digits_cnn.DigitsCNN()
    x = np.random.default_rng(0).random((4, 1, 8, 8)).astype(np.float32)
    labels = np.array([1, 2, 3, 4])
    code = srcgrad.source(srcgrad.value_and_grad(digits_cnn.loss), model, x, labels)
    assert ".check(" not in code and "specialised" not in code
    code = srcgrad.source(srcgrad.grad(lambda m, x: np.sum(m(x) * np.exp(x)), wrt=1), Net(), X)
    assert ".check(" not in code
