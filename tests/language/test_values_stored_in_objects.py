"""Values stored in objects: a differentiated value kept in an object by a call is refused in
every mode (reverse, jvp, jacfwd, hvp); attribute bookkeeping on a model runs, and
differentiated values stored there are stored as values."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad import errors


X3 = np.array([0.5, -1.0, 2.0])


# ---- silently wrong (forward mode): a value kept in an object ---------------------------
# Reverse mode refuses a differentiated value kept in an attribute by a call; forward mode
# dropped its tangent (jvp 0.0).  Refused alike now.

class Accumulator:
    def __init__(self):
        self.total = 0.0

    def add(self, v):
        self.total = self.total + v
        return self.total


class History:
    def __init__(self):
        self.xs = []

    def log(self, x):
        self.xs.append(x)


class StatefulCell:
    def __init__(self):
        self.h = 0.0

    def __call__(self, x):
        self.h = np.tanh(0.5 * self.h + x)


def kept_by_a_method(a):
    acc = Accumulator()
    acc.add(np.sum(a))
    return acc.total ** 2


def appended_by_a_method(a):
    h = History()
    h.log(np.sum(a))
    h.log(np.sum(a ** 2))
    return h.xs[0] * h.xs[1]


def kept_by_a_callable(a, cell):
    for i in range(2):
        cell(a[i])
    return cell.h


def stored_in_an_attribute(a, cell):
    cell.h = np.sum(a)
    return cell.h * 2.0


@pytest.mark.parametrize("f", [kept_by_a_method, appended_by_a_method, kept_by_a_callable, stored_in_an_attribute],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("transform", ["jvp", "jacfwd", "grad"])
def test_a_value_kept_in_an_object_is_refused_in_every_mode(f, transform):
    args = (X3,) if f.__code__.co_argcount == 1 else (X3, StatefulCell())
    if f is stored_in_an_attribute and transform == "grad":
        # Read back at once: differentiated through in reverse mode (tests/language/test_object_state.py).
        np.testing.assert_allclose(srcgrad.grad(f)(*args), 2.0 * np.ones_like(X3))
        return
    with pytest.raises(errors.UserCodeError, match="keeps a value|storing a value"):
        if transform == "jvp":
            srcgrad.jvp(f)(*args, np.ones(3))
        elif transform == "jacfwd":
            srcgrad.jacfwd(f)(*args)
        else:
            srcgrad.grad(f)(*args)


X = np.array([0.3, -1.2, 0.7])


class Counter(srcgrad.nn.Module):
    def __init__(self):
        self.w = np.ones(3)
        self.calls = 0

    def forward(self, x):
        self.calls += 1  # bookkeeping on the object: runs as written
        return np.sum(self.w * x)


def counter_loss(model, x):
    return model(x) * 2


def stores_a_differentiated_value(model, x):
    model.cache = x * 2
    return np.sum(x)


def test_attribute_bookkeeping_runs_and_differentiated_values_are_stored_as_values():
    model = Counter()
    g = srcgrad.grad(counter_loss)(model, X)
    np.testing.assert_array_equal(g.w, 2 * X)
    assert model.calls == 1
    # Stored and not read back: the value, with no adjoint (tests/language/test_object_state.py).
    np.testing.assert_array_equal(srcgrad.grad(stores_a_differentiated_value, wrt=1)(model, X), np.ones_like(X))
    np.testing.assert_array_equal(model.cache, 2 * X)


class _LazyLinear(srcgrad.nn.Module):
    def __init__(self):
        self.weight = None
        self.bias = np.zeros(3)

    def forward(self, x):
        if self.weight is None:  # made at the first call, as PyTorch's lazy layers are
            self.weight = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
        return x @ self.weight + self.bias


def _lazy_loss(model, x):
    return np.sum(model(x) ** 2)


def test_a_lazily_made_parameter_of_the_model_being_differentiated():
    x = np.linspace(0.1, 0.8, 8).reshape(4, 2)
    model = _LazyLinear()
    first = srcgrad.grad(_lazy_loss)(model, x)
    assert first.weight is None  # (none before the call: nothing replaced, nothing to report)
    made = _LazyLinear()
    made.weight = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    expected = srcgrad.grad(_lazy_loss)(made, x)
    np.testing.assert_allclose(first.bias, expected.bias)
    second = srcgrad.grad(_lazy_loss)(model, x)  # now a parameter like any other
    np.testing.assert_allclose(second.weight, expected.weight)


class _Replacing(srcgrad.nn.Module):
    def __init__(self):
        self.weight = np.ones((2, 3))

    def forward(self, x):
        if x.shape[0] > 1:
            self.weight = np.linspace(-1.0, 1.0, 6).reshape(2, 3)  # refused: replaces a parameter
        return x @ self.weight


def test_replacing_a_parameter_is_still_refused():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match="storing a float value"):
        srcgrad.grad(lambda m, x: np.sum(m(x)))(_Replacing(), np.ones((4, 2)))
