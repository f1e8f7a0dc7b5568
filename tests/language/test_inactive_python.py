"""Python that computes shapes, indices and masks (values not being differentiated) runs
as written inside differentiated code: tuple and list joins (`x.shape + (1,)`,
`[0] * 3`), bitwise operators on masks and integers.  Given a value being differentiated,
the same operators are refused at the user's line."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad


def _differences(f, x, eps=1e-6):
    g = np.zeros_like(x, dtype=np.float64)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x, dtype=np.float64)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def shape_join(x):
    y = x.reshape(x.shape + (1,))
    return np.sum(np.tanh(y) ** 2)


def index_list(x):
    rows = [0] * 2 + [2]
    return np.sum(x[rows] ** 2)


def masks(x):
    inside = (x > -0.5) & (x < 0.5) | (x > 1.5)
    return np.sum(np.where(inside ^ (x > 10), x ** 3, np.sin(x)))


def shifted(x):
    power = 1 << 1
    return np.sum(x ** power) * (8 >> 2)


def _helper(x, extra):
    return np.sum(np.cos(x.reshape(x.shape + extra)))


def in_loop_through_helper(x):
    total = 0.0
    for i in range(3):
        total = total + _helper(x * i, (1,) * (i + 1))
    return total


class Reshaper:
    def __init__(self, extra):
        self.extra = extra

    def apply(self, x):
        return np.exp(x.reshape((1,) + x.shape + self.extra))


def as_method(x):
    return np.sum(Reshaper((1, 1)).apply(x) * ~(x > 0))


@pytest.mark.parametrize("fn", [shape_join, index_list, masks, shifted, in_loop_through_helper, as_method])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_inactive_python_runs_as_written(fn, dtype):
    x = np.random.default_rng(0).uniform(-2, 2, (4, 3)).astype(dtype)
    g = srcgrad.grad(fn)(x)
    assert g.dtype == dtype
    expected = _differences(lambda v: fn(v.astype(np.float64)), x.astype(np.float64))
    tolerance = 1e-6 if dtype == np.float64 else 2e-3
    np.testing.assert_allclose(g, expected, rtol=tolerance, atol=tolerance)


def joins_active(x):
    hs = [x]
    hs = hs + [x * 2]
    return np.sum(hs[1])


def repeats_active(x):
    pair = (x, 1.0) * 2
    return np.sum(pair[2])


def ands_active(x):
    return np.sum((x > 0) & x)


def test_joined_and_repeated_sequences_are_differentiated():
    np.testing.assert_array_equal(srcgrad.grad(joins_active)(np.ones((2, 2))), 2 * np.ones((2, 2)))
    np.testing.assert_array_equal(srcgrad.grad(repeats_active)(np.ones((2, 2))), np.ones((2, 2)))


@pytest.mark.parametrize("fn, says", [(ands_active, "`&` is given a value being differentiated")])
def test_given_a_value_being_differentiated_they_are_refused_at_the_users_line(fn, says):
    with pytest.raises(srcgrad.errors.UserCodeError) as refused:
        srcgrad.grad(fn)(np.ones((2, 2)))
    message = str(refused.value)
    assert says in message and message.split(":")[0].endswith("test_inactive_python.py")


def _get(d, key):
    return d.get(key) * 2.0


def _values_and_items(d):
    total = 0.0
    for v in d.values():
        total = total + np.sum(v ** 2)
    for k, v in d.items():
        total = total + np.sum(np.sin(v)) * (2.0 if k == "b" else 1.0)
    return total


def dict_methods(w):
    d = {"a": w, "b": w * 3.0}
    return np.sum(_get({"a": w, "b": w * 3.0}, "b") ** 2) + _values_and_items(d)


def test_forward_mode_of_dict_methods_on_a_dict_known_when_the_code_runs():
    # `d.get(key)` in a helper given a dict: forward mode once gave it a zero tangent.
    rng = np.random.default_rng(0)
    w, w_dot = rng.normal(size=3), rng.normal(size=3)
    value, tangent = srcgrad.jvp(dict_methods)(w, w_dot)
    eps = 1e-6
    expected = (dict_methods(w + eps * w_dot) - dict_methods(w - eps * w_dot)) / (2 * eps)
    assert value == pytest.approx(dict_methods(w))
    assert tangent == pytest.approx(expected, rel=1e-6)
    assert tangent == pytest.approx(srcgrad.grad(dict_methods)(w) @ w_dot, rel=1e-10)


class _Counting:
    def __init__(self):
        self.n = 0

    def __mul__(self, k):
        self.n += 1
        return self

    def __gt__(self, k):
        self.n += 10
        return True


def unused_operators_of_an_object(x, c):
    c * 2
    c > 0
    return np.sum(x ** 2) + c.n


def test_an_unused_operator_of_an_object_still_runs():
    # A primitive alone on a line is dropped as dead code; an object's `__mul__`/`__gt__`
    # may do something, so it runs.
    c = _Counting()
    g = srcgrad.grad(unused_operators_of_an_object)(np.ones(2), c)
    np.testing.assert_allclose(g, [2.0, 2.0])
    assert c.n == 11


# ---- constants read from NumPy's type information and strings -------------------------

def machine_epsilon_added(x):
    eps = np.finfo(float).eps
    return np.sum(x * x) + eps * np.sum(x)


def tiny_of_the_dtype(x):
    return np.sum(x) * np.finfo(x.dtype).tiny + np.sum(x * 2.0) + np.iinfo(np.int32).max * 0.0


def a_formatted_name(x, n=3):
    name = "layer{}"
    label = name.format(n)
    return np.sum(x ** 2) * len(label) + len(name.upper())


@pytest.mark.parametrize("f", [machine_epsilon_added, tiny_of_the_dtype, a_formatted_name])
def test_type_information_and_strings_are_not_arrays(f):
    x = np.array([0.5, -1.5, 2.0])
    np.testing.assert_allclose(srcgrad.grad(f)(x), _differences(f, x), rtol=1e-6)
    assert srcgrad.grad(f)(x.astype(np.float32)).dtype == np.float32


# ---- a shape spread into a call (`np.random.randn(*std.shape)`, `x.reshape(*shape)`) -------

def reparameterised(mu, logvar):
    std = np.exp(0.5 * logvar)
    eps = np.random.RandomState(0).randn(*std.shape)
    return np.sum((mu + eps * std) ** 2)


def flattened(x):
    shape = (x.shape[0], -1) if x.ndim > 1 else (1, -1)
    return np.sum(np.tanh(x.reshape(*shape)) * 2.0)


def test_a_shape_spread_into_a_draw():
    mu, logvar = np.array([0.5, -1.0, 0.3]), np.array([0.1, 0.2, -0.4])
    g_mu, g_logvar = srcgrad.grad(reparameterised, wrt=(0, 1))(mu, logvar)
    np.testing.assert_allclose(g_mu, _differences(lambda m: reparameterised(m, logvar), mu), rtol=1e-6)
    np.testing.assert_allclose(g_logvar, _differences(lambda v: reparameterised(mu, v), logvar), rtol=1e-6)


def test_a_shape_spread_into_reshape():
    x = np.arange(6.0).reshape(2, 3) / 6.0
    np.testing.assert_allclose(srcgrad.grad(flattened)(x), 2.0 * (1.0 - np.tanh(x) ** 2), rtol=1e-12)
    assert srcgrad.grad(flattened)(x.astype(np.float32)).dtype == np.float32


def _weighted_by_key_codes(d, x):
    total = 0.0
    for k, v in d.items():
        total = total + ord(k[0]) * np.sum(v * x) + len(str(k)) + (1.0 if hasattr(v, "shape") else 0.0)
    return total


def test_strings_and_codes_of_keys_have_no_derivative():
    from srcgrad.testing import check_grads

    check_grads(_weighted_by_key_codes, ({"a": np.ones(2), "bc": np.arange(2.0)}, np.array([0.5, -1.0])),
                wrt=(0, 1))
