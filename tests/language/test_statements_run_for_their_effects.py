"""Statements run for their effects: an expression whose value is unused, a random draw,
`print` of an f-string, a call whose unused result stores a differentiated value into an
object, a global or a model's attribute.  Each is right or refused at the user's line."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad import errors, nn


# central differences, float64
def numerical_grad(f, x, eps=1e-6):
    x = np.asarray(x, dtype=np.float64)
    g = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[idx] = eps
        g[idx] = (f(x + step) - f(x - step)) / (2 * eps)
    return g


X3 = np.array([0.5, -1.0, 2.0])


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


def method_called_in_a_loop(x):
    acc = Accumulator()
    for i in range(3):
        acc.add(x[i])
    return acc.total * 2


def method_called_in_a_comprehension(x):
    acc = Accumulator()
    [acc.add(v) for v in x]
    return acc.total


def method_result_bound_to_underscore(x):
    acc = Accumulator()
    _ = acc.add(x[0] * 3)
    return acc.total


def method_of_an_object_passed_in(x, acc):
    acc.add(x[0])
    return acc.total


def helper_writes_a_global_dict(x):
    store(x * 2)
    return np.sum(STORE["v"])


@pytest.mark.parametrize("f, call, callee, text", [
    (method_stores_into_a_local_object, "acc.add(", Accumulator.add, "self.total = self.total + v"),
    (helper_sets_a_global_attribute, "set_shared(", set_shared, "SHARED.h = v"),
    (helper_writes_a_global_dict, "store(", store, 'STORE["v"] = v'),
    (method_called_in_a_loop, "acc.add(", Accumulator.add, "self.total = self.total + v"),
    (method_called_in_a_comprehension, "acc.add(", Accumulator.add, "self.total = self.total + v"),
    (method_result_bound_to_underscore, "acc.add(", Accumulator.add, "self.total = self.total + v"),
])
def test_a_call_with_an_unused_result_storing_a_differentiated_value(f, call, callee, text):
    caller_line = line_of(f, call)
    try:
        got = srcgrad.grad(f)(X3)
    except errors.UserCodeError as error:
        # refused at the caller's call or at the store in the callee
        assert f"test_statements_run_for_their_effects.py:{caller_line}" in str(error) or \
            f"test_statements_run_for_their_effects.py:{line_of(callee, text)}" in str(error), str(error)
        return
    np.testing.assert_allclose(got, numerical_grad(f, X3), rtol=1e-6, atol=1e-8)


def test_a_method_of_an_object_passed_in_storing_a_differentiated_value():
    caller_line = line_of(method_of_an_object_passed_in, "acc.add(")
    try:
        got = srcgrad.grad(method_of_an_object_passed_in)(X3, Accumulator())
    except errors.UserCodeError as error:
        assert f"test_statements_run_for_their_effects.py:{caller_line}" in str(error) or \
            f"test_statements_run_for_their_effects.py:{line_of(Accumulator.add, 'self.total =')}" in str(error), str(error)
        return
    np.testing.assert_allclose(got, [1.0, 0.0, 0.0])


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
        located = [line_of(loss_of_the_recorded_activation, "model(x)"),
                   line_of(Recording.forward, "self.h =")]
        assert any(f"test_statements_run_for_their_effects.py:{line}" in str(error) for line in located), str(error)
        return
    np.testing.assert_allclose(g.w, numerical_grad(of_weight, model.w), rtol=1e-6, atol=1e-8)


# ---- crash: an expression statement whose value is unused -----------------------------
# `np.sin(x)` or `x * 2` alone on a line (left from debugging, or a call made for nothing) stops
# compilation with AttributeError: 'Expr' object has no attribute 'targets' (optimize.py).
# `_helper(x)`, `x[0]` and `print(x)` alone are fine; `x > 0` alone is refused as "a call whose
# result is not used ... if it changes its argument in place".

def unused_call(x):
    np.sin(x)
    return np.sum(x ** 2)


def unused_product(x):
    x * 2
    return np.sum(x ** 2)


def unused_call_in_a_branch(x):
    if np.sum(x) > 0:
        np.exp(x)
    return np.sum(x ** 2)


def unused_comparison(x):
    x > 0
    return np.sum(x ** 2)


def unused_in_a_loop(x):
    t = 0.0
    for i in range(2):
        np.tanh(x * i)
        -x
        x[i] < 0
        t = t + np.sum(x * x) / 2
    return t


def _unused_inside(v):
    np.log(v * v)
    v @ v
    return np.sum(v ** 2)


def unused_in_a_helper(x):
    return _unused_inside(x)


def unused_random_draw(x):
    np.random.normal(x)  # still drawn: the draws after it are the same as NumPy's
    return np.sum(x ** 2)


@pytest.mark.parametrize("f", [unused_call, unused_product, unused_call_in_a_branch, unused_comparison,
                               unused_in_a_loop, unused_in_a_helper], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_an_unused_expression_statement(f, dtype):
    g = srcgrad.grad(f)(X3.astype(dtype))
    assert g.dtype == dtype
    np.testing.assert_allclose(g, 2 * X3, rtol=1e-6)


def test_an_unused_random_draw_still_runs():
    np.random.seed(0)
    g = srcgrad.grad(unused_random_draw)(X3)
    after = np.random.normal()
    np.random.seed(0)
    np.random.normal(X3)
    assert after == np.random.normal()
    np.testing.assert_allclose(g, 2 * X3)


X = np.array([0.3, -1.2, 0.7])


def prints_an_f_string(x):
    y = np.sum(x**2)
    print(f"y = {y:.3f}")
    return y


def test_f_strings_in_print(capsys):
    np.testing.assert_allclose(srcgrad.grad(prints_an_f_string)(X), 2 * X)
    assert "y = " in capsys.readouterr().out


_RECORDED = []


def _record(v):
    _RECORDED.append(float(np.sum(v)))
    return len(_RECORDED)


srcgrad.nondifferentiable(_record)  # (no derivative, but an effect: never dropped)


def _records_then_squares(x):
    count = _record(x)  # the result unused: the call still runs
    return np.sum(x ** 2)


def test_a_nondifferentiable_function_of_the_users_keeps_its_effect():
    _RECORDED.clear()
    for optimize in (True, False):
        np.testing.assert_allclose(srcgrad.grad(_records_then_squares, optimize=optimize)(np.ones(2)), [2.0, 2.0])
    assert _RECORDED == [2.0, 2.0]


class _Counted:
    def __init__(self):
        self.steps = np.int64(0)  # a NumPy integer counter: bookkeeping, as a Python int is
        self.w = np.array([1.0, 2.0])

    def __call__(self, x):
        self.steps = self.steps + 1
        return np.sum(self.w * x)


def test_a_numpy_integer_counter_on_a_model_being_differentiated():
    model = _Counted()
    grads = srcgrad.grad(lambda m, x: m(x))(model, np.array([3.0, 4.0]))
    np.testing.assert_allclose(grads.w, [3.0, 4.0])
    assert model.steps == 1
