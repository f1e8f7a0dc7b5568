"""A call given a value being differentiated whose result is not differentiated, and
which keeps a value computed from it outside itself (an object's field, a global, a
list it was given), is refused at the call: read back later, that value would carry no
gradient.  Calls that keep nothing of it run as written (``analysis/outside.stores``)."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad

X = np.array([0.5, -1.0, 2.0])


class Tracker:
    def __init__(self):
        self.total, self.calls, self.history = 0.0, 0, []

    def add(self, v):
        self.total = self.total + v

    def add_through(self, v):
        self._keep(v * 2)

    def _keep(self, v):
        self.total = v

    def record(self, v):
        self.history.append(v)

    def count(self, v):
        self.calls += 1
        return v * 2


class Box:
    pass


BOX, STORE = Box(), {}


def keep_in_global(v):
    BOX.h = v


def keep_in_global_dict(v):
    STORE["v"] = np.sin(v)


def keep_through_helper(v):
    keep_in_global(v * 3)


def local_only(v):
    d = {"a": v}
    out = np.zeros(3)
    out[0] = v[0]
    return d, out


def stored_by_method(x):
    t = Tracker()
    t.add(x[0] ** 2)
    return t.total


def stored_by_a_chain_of_methods(x):
    t = Tracker()
    t.add_through(x[1])
    return t.total


def recorded_in_a_loop(x):
    t = Tracker()
    s = 0.0
    for i in range(3):
        t.record(x[i] * 2)
        s = s + x[i]
    return s + t.history[0]


def stored_in_a_global(x):
    keep_in_global(x * 3)
    return np.sum(BOX.h)


def stored_in_a_global_dict(x):
    keep_in_global_dict(x)
    return np.sum(STORE["v"])


def stored_through_a_helper(x):
    keep_through_helper(x)
    return np.sum(BOX.h)


@pytest.mark.parametrize("fn, call", [
    (stored_by_method, "t.add("), (stored_by_a_chain_of_methods, "t.add_through("),
    (recorded_in_a_loop, "t.record("), (stored_in_a_global, "keep_in_global("),
    (stored_in_a_global_dict, "keep_in_global_dict("),
    (stored_through_a_helper, "keep_in_global(v * 3)"),  # (the helper is inlined: its own call is refused)
])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_call_keeping_a_differentiated_value_is_refused_at_the_call(fn, call, dtype):
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="keeps a value computed from it") as refused:
        srcgrad.grad(fn)(X.astype(dtype))
    message = str(refused.value)
    line = message.split(":")[1]
    assert message.split(":")[0].endswith("test_trust_stores.py")
    import linecache
    assert call in linecache.getline(__file__, int(line))


def counts_and_keeps_locally(x):
    t = Tracker()
    y = t.count(x)  # a counter: nothing of x kept
    t.count(x)
    local_only(x)
    return np.sum(y ** 2)


def recorded_with_stop_gradient(x):
    t = Tracker()
    t.record(srcgrad.stop_gradient(x * 2))
    return np.sum(np.sin(x))


@pytest.mark.parametrize("fn, expected", [(counts_and_keeps_locally, lambda x: 8 * x),
                                          (recorded_with_stop_gradient, np.cos)])
def test_calls_that_keep_nothing_of_it_run_as_written(fn, expected):
    np.testing.assert_allclose(srcgrad.grad(fn)(X), expected(X), rtol=1e-12)
