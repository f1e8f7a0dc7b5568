"""Defects found by a fourth outside tester (programs written as PyTorch and JAX users
write them, each gradient checked against central finite differences in float64).
Each is a strict xfail asserting the right behaviour: the right value, or a refusal
located at the user's line, so that the fix flips it."""
import numpy as np
import pytest

import srcgrad
from srcgrad import errors, nn

X3 = np.array([0.5, -1.0, 2.0])


def numerical_grad(f, x, eps=1e-6):
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[idx] = eps
        g[idx] = (f(x + step) - f(x - step)) / (2 * eps)
    return g


def assert_right_or_refused(gradient, f, x, line):
    """The gradient matches finite differences of ``f``, or compiling refuses at ``line``
    (a line of this file)."""
    try:
        got = gradient(x)
    except errors.UserCodeError as error:
        assert f"{__file__}:{line}" in str(error) or f"test_found_by_breaker4.py:{line}" in str(error), \
            str(error)
        return
    np.testing.assert_allclose(got, numerical_grad(f, x), rtol=1e-6, atol=1e-8)


def line_of(fn, text):
    import inspect

    lines, start = inspect.getsourcelines(fn)
    return start + next(i for i, s in enumerate(lines) if text in s)


# ---- silently wrong: a call whose result is unused stores a differentiated value ---------
# The call runs in the forward sweep, but its body is neither inlined nor checked (as it is
# when its result is used, which refuses the store at the callee's line): the value stored
# into an attribute or a global dict is read back with no adjoint, and the gradient is 0.

class Accumulator:
    def __init__(self):
        self.total = 0.0

    def add(self, v):
        self.total = self.total + v


def method_stores_into_a_local_object(x):
    acc = Accumulator()
    acc.add(x[0] ** 2)
    return acc.total


class Namespace:
    pass


SHARED = Namespace()
STORE = {}


def set_shared(v):
    SHARED.h = v


def helper_sets_a_global_attribute(x):
    set_shared(x * 3)
    return np.sum(SHARED.h)


def store(v):
    STORE["v"] = v


def helper_writes_a_global_dict(x):
    store(x * 2)
    return np.sum(STORE["v"])


@pytest.mark.xfail(strict=True, reason="a call with an unused result that stores its "
                   "differentiated argument is not inspected: gradient 0")
@pytest.mark.parametrize("f, callee, text", [
    (method_stores_into_a_local_object, Accumulator.add, "self.total = self.total + v"),
    (helper_sets_a_global_attribute, set_shared, "SHARED.h = v"),
    (helper_writes_a_global_dict, store, 'STORE["v"] = v'),
])
def test_a_call_with_an_unused_result_storing_a_differentiated_value(f, callee, text):
    caller_line = line_of(f, "(x")
    try:
        got = srcgrad.grad(f)(X3)
    except errors.UserCodeError as error:
        # refused at the caller's call or at the store in the callee
        assert f"test_found_by_breaker4.py:{caller_line}" in str(error) or \
            f"test_found_by_breaker4.py:{line_of(callee, text)}" in str(error), str(error)
        return
    np.testing.assert_allclose(got, numerical_grad(f, X3), rtol=1e-6, atol=1e-8)


class Recording(nn.Module):
    """A model keeping its last activation, as PyTorch users do for hooks or plots."""

    def __init__(self):
        self.w = np.array([0.5, -1.0, 2.0])

    def forward(self, x):
        self.h = np.tanh(self.w * x)
        return self.h


def loss_of_the_recorded_activation(model, x):
    model(x)
    return np.sum(model.h ** 2)


@pytest.mark.xfail(strict=True, reason="model(x) with its result unused: forward's "
                   "`self.h = ...` is not seen, and the weight's gradient is 0")
def test_a_model_storing_its_activation_read_after_the_call():
    x = np.array([0.3, 0.2, 0.1])

    def of_weight(w):
        model = Recording()
        model.w = w
        return loss_of_the_recorded_activation(model, x)

    model = Recording()
    try:
        g = srcgrad.grad(loss_of_the_recorded_activation)(model, x)
    except errors.UserCodeError as error:
        assert "test_found_by_breaker4.py" in str(error), str(error)
        return
    np.testing.assert_allclose(g.w, numerical_grad(of_weight, model.w), rtol=1e-6, atol=1e-8)
