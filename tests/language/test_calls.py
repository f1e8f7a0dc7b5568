"""Calls to the user's own code: module-level functions, recursion, functions
passed as arguments, keyword arguments and defaults, closures, callable
objects and methods, weight sharing and a depth drawn at random.

Each is checked against central finite differences.
"""
from __future__ import annotations

import random

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import numerical_grad


def layer(x, w):
    return np.maximum(x @ w, 0)


def shared_layer_net(x, w1, w2, y):
    h = layer(x, w1)
    for i in range(2):
        h = layer(h, w2)
    return np.sum((h - y) ** 2)


def power_by_recursion(x, n):
    if n <= 1:
        y = x
    else:
        y = x * power_by_recursion(x, n - 1)
    return y


def calls_recursive(x):
    return np.sum(power_by_recursion(x, 3))


def apply_twice(f, x):
    return np.sum(f(f(x)) * 2)


def act(z):
    return np.tanh(z) + 0.1 * z


def scaled(x, w, scale=2.0, shift=0.0):
    return x * w * scale + shift


def keywords_and_defaults(x, w):
    return np.sum(scaled(x, w) + scaled(x, w=w, scale=0.5, shift=1.0) ** 2)


def make_affine(bias):
    def affine(x, w):
        return x @ w + bias  # `bias` is captured: a constant, no gradient
    return affine


AFFINE = make_affine(np.array([0.5, -0.5]))


def uses_closure(x, w):
    return np.sum(AFFINE(x, w) ** 2)


class Scale:
    def __init__(self, factor):
        self.factor = factor

    def __call__(self, x):
        return x * self.factor

    def twice(self, x):
        return self(x) * 2


def calls_object(s, x):
    return np.sum(s(x) ** 2 + s.twice(x))


def dynamic_depth(x, w_in, w_mid, w_out):
    """The tutorial's dynamic net: the middle layer is applied 0-3 times."""
    h = np.maximum(x @ w_in, 0)
    for _ in range(random.randint(0, 3)):
        h = np.maximum(h @ w_mid, 0)
    y = h @ w_out
    return np.sum(y**2)


soft = lambda z: np.tanh(z) + 0.1 * z  # noqa: E731 - a lambda on purpose


rng = np.random.default_rng(3)
X = rng.standard_normal((4, 3))
W = rng.standard_normal((3, 2))


CASES = [
    (shared_layer_net, (X, rng.standard_normal((3, 5)), rng.standard_normal((5, 5)) * 0.5,
                        rng.standard_normal((4, 5))), (1, 2)),
    (calls_recursive, (X,), (0,)),
    (apply_twice, (act, X), (1,)),
    (apply_twice, (np.tanh, X), (1,)),
    (keywords_and_defaults, (X[:, :2], X[:, 1:] + 1), (0, 1)),
    (uses_closure, (X, W), (0, 1)),
    (calls_object, (Scale(1.5), X), (1,)),
    (apply_twice, (soft, X), (1,)),
    (apply_twice, (lambda z: z**3 - z, X * 0.3), (1,)),
]


@pytest.mark.parametrize("fn, args, wrt", CASES, ids=[
    "weight_sharing", "recursion", "function_argument", "primitive_argument",
    "keywords_defaults", "closure", "callable_object_and_method", "lambda", "inline_lambda"])
def test_calls_match_finite_differences(fn, args, wrt):
    grads = srcgrad.grad(fn, wrt=wrt)(*args)
    for i, g in zip(wrt, grads):
        np.testing.assert_allclose(g, numerical_grad(fn, args, i), rtol=1e-6, atol=1e-7)


def test_shared_layer_accumulates_into_one_gradient():
    code = srcgrad.source(srcgrad.grad(shared_layer_net, wrt=(1, 2)), *CASES[0][1])
    # The layer known at compile time is inlined: its lines, under its own comment, in
    # one flat function, and its adjoint accumulates over the loop.
    assert "layer_vjp" not in code and "pullback" not in code
    assert code.count("# test_calls.py:19  return np.maximum(x @ w, 0)") == 4
    assert "w2_bar += " in code


def test_random_depth_is_drawn_once_and_replayed():
    x, w_in, w_mid, w_out = X, W, rng.standard_normal((2, 2)), rng.standard_normal((2, 3))
    for seed in range(6):
        random.seed(seed)
        depth = random.randint(0, 3)
        random.seed(seed)
        g_in, g_mid = srcgrad.grad(dynamic_depth, wrt=(1, 2))(x, w_in, w_mid, w_out)
        after = random.random()
        random.seed(seed)
        random.randint(0, 3)
        assert after == random.random(), "the forward pass must draw exactly once"

        def fixed(x, w_in, w_mid, w_out):
            h = np.maximum(x @ w_in, 0)
            for _ in range(depth):
                h = np.maximum(h @ w_mid, 0)
            return np.sum((h @ w_out) ** 2)

        args = (x, w_in, w_mid, w_out)
        np.testing.assert_allclose(g_in, numerical_grad(fixed, args, 1), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(g_mid, numerical_grad(fixed, args, 2), rtol=1e-6, atol=1e-7)


def rnn_step(x, h, w):
    h_new = np.tanh(x @ w + h)
    return h_new, np.sum(h_new) * 2


def rnn_with_tuple_outputs(xs, w):
    h = np.zeros(3)
    total = 0.0
    for t in range(len(xs)):
        h, y = rnn_step(xs[t], h, w)
        total = total + y
    return total + np.sum(h**2)


def tuples_and_dicts(x, w):
    params = {"w": w, "scale": 2.0}
    pair = (x, params["w"])
    a, b = pair
    b, a = a, b  # swap: the right side is evaluated first
    return np.sum(a * b * params["scale"] + a**2)


def loss_with_aux(w, x):
    prediction = x @ w
    return np.sum(prediction**2), prediction


@pytest.mark.parametrize("fn, args, wrt", [
    (rnn_with_tuple_outputs, (X, np.eye(3) * 0.5), (1,)),
    (tuples_and_dicts, (X, X + 1), (0, 1)),
], ids=["tuple_returning_call_in_loop", "tuples_dicts_unpacking"])
def test_tuple_values_match_finite_differences(fn, args, wrt):
    grads = srcgrad.grad(fn, wrt=wrt)(*args)
    for i, g in zip(wrt, grads):
        np.testing.assert_allclose(g, numerical_grad(fn, args, i), rtol=1e-6, atol=1e-7)


def test_has_aux():
    g, aux = srcgrad.grad(loss_with_aux, has_aux=True)(W, X)
    np.testing.assert_allclose(g, 2 * X.T @ (X @ W), rtol=1e-12)
    np.testing.assert_allclose(aux, X @ W, rtol=1e-12)
    (value, aux), g2 = srcgrad.value_and_grad(loss_with_aux, has_aux=True)(W, X)
    assert value == pytest.approx(np.sum((X @ W) ** 2))
    np.testing.assert_array_equal(g, g2)
    value, pullback, aux = srcgrad.vjp(loss_with_aux, has_aux=True)(W, X)
    np.testing.assert_allclose(pullback(1.0), g, rtol=1e-12)


def test_tuple_output_needs_has_aux_or_vjp():
    with pytest.raises(srcgrad.NonScalarOutputError, match="has_aux"):
        srcgrad.grad(loss_with_aux)(W, X)
    value, pullback = srcgrad.vjp(loss_with_aux)(W, X)
    g = pullback((1.0, np.ones((4, 2))))
    np.testing.assert_allclose(g, 2 * X.T @ (X @ W) + X.T @ np.ones((4, 2)), rtol=1e-12)


def test_grad_of_a_lambda():
    assert srcgrad.grad(lambda a: a * a * 3)(2.0) == 12.0


def with_nested_def(x, w):
    scale = 2.0

    def layer(h, v):
        return np.tanh(h @ v) * scale  # `scale` is captured: a constant

    h = layer(x, w)
    h = layer(h, w)
    return np.sum(h**2)


def nested_def_capturing_a_weight(x, w):
    def layer(h):
        return np.tanh(h @ w)

    return np.sum(layer(x))


def test_nested_def_used_twice():
    srcgrad.testing.check_grads(with_nested_def, (X, rng.standard_normal((3, 3)) * 0.5), wrt=(0, 1))


def test_nested_def_capturing_a_differentiated_value():
    # Only called: what it reads is passed to it at each call (desugar's lambda lifting).
    srcgrad.testing.check_grads(nested_def_capturing_a_weight, (X, rng.standard_normal((3, 3))), wrt=(0, 1))


# ---- functions known at compile time are called through their compiled vjp ----

def _double(x):
    return 2.0 * x


def _triple(x):
    return 3.0 * x


swappable = _double


def calls_swappable(x):
    return np.sum(swappable(x) ** 2)


def test_a_rebound_global_function_is_called_afresh():
    """The code has ``swappable``'s body inlined; rebinding the global between
    calls must still reach the new function, as the original code would."""
    global swappable
    x = np.array([1.0, -2.0])
    g = srcgrad.grad(calls_swappable)
    np.testing.assert_allclose(g(x), 8.0 * x, rtol=1e-14)  # d/dx (2x)^2
    assert "return 2.0 * x" in srcgrad.source(g, x) and "vjp" not in srcgrad.source(g, x)
    swappable = _triple
    try:
        np.testing.assert_allclose(g(x), 18.0 * x, rtol=1e-14)  # d/dx (3x)^2
        assert "return 3.0 * x" in g._last.source
    finally:
        swappable = _double
    np.testing.assert_allclose(g(x), 8.0 * x, rtol=1e-14)


def scaled_pair(x, w):
    return x * w, x + w


def uses_one_of_two_outputs(x, w):
    a, b = scaled_pair(x, w)
    c, d = scaled_pair(a, w)
    return np.sum(c) + np.sum(b * d)


def test_a_tuple_returning_callee_called_directly():
    x, w = np.array([0.5, -1.5, 2.0]), np.array([1.5, 0.25, -0.5])
    g = srcgrad.grad(uses_one_of_two_outputs, wrt=(0, 1))
    code = srcgrad.source(g, x, w)
    assert "scaled_pair_vjp" not in code and "a = x * w" in code and "c = a * w" in code
    for i, got in enumerate(g(x, w)):
        np.testing.assert_allclose(got, numerical_grad(uses_one_of_two_outputs, (x, w), i),
                                   rtol=1e-7, atol=1e-9)


class Counter:
    """An object with state that its method updates (`self.n += 1`)."""

    def __init__(self):
        self.n = 0

    def step(self, x):
        self.n += 1
        return x * self.n


def object_made_inside(x):
    c = Counter()
    y = c.step(x)
    y = c.step(np.sin(y))  # n is 2 now
    c.n += 1  # augmented assignment on an attribute, in the function itself
    return np.sum(y * c.n)


def object_passed_in(c, x):
    y = c.step(x)
    return np.sum(c.step(y) ** 2)


def test_object_made_inside_with_augmented_attribute_updates():
    srcgrad.testing.check_grads(object_made_inside, (X,))
    np.testing.assert_allclose(srcgrad.grad(object_made_inside)(X), 6 * np.cos(X), rtol=1e-12)


def test_object_passed_in_with_augmented_attribute_updates():
    # A fresh Counter per evaluation: each call of the function advances it.
    srcgrad.testing.check_grads(lambda x: object_passed_in(Counter(), x), (X,))


class Accumulator:
    def __init__(self, h):
        self.h = h

    def add(self, x):
        self.h = self.h + x
        return self.h


def object_made_from_a_differentiated_value(x):
    a = Accumulator(x)
    return np.sum(a.h)


def differentiated_attribute_update(x):
    a = Accumulator(np.zeros(3))
    return np.sum(a.add(x))


def object_made_from_a_differentiated_value_then_updated(x):
    a = Accumulator(x)
    return np.sum(a.add(x))


def test_object_made_from_a_differentiated_value():
    # Accumulator.__init__ only stores its parameter: a.h is x (issue 11, class 5).
    np.testing.assert_allclose(srcgrad.grad(object_made_from_a_differentiated_value)(X), np.ones_like(X))
    # `self.h = self.h + x; return self.h`: read back at once, differentiated through.
    np.testing.assert_allclose(srcgrad.grad(object_made_from_a_differentiated_value_then_updated)(X),
                               2 * np.ones_like(X))


def test_differentiated_attribute_update_read_back_at_once():
    np.testing.assert_allclose(srcgrad.grad(differentiated_attribute_update)(X), np.ones_like(X))


# ---- *args and **kwargs -----------------------------------------------------
# A differentiated function takes *args as one tuple and **kwargs as one dict
# (structures); wrt counts positions as passed (JAX's argnums) or names them.


def tanh_chain(x, *ws):
    h = x
    for w in ws:
        h = np.tanh(h @ w)
    return h


def chain_loss(x, *ws):
    return np.sum(tanh_chain(x, *ws) ** 2)


def keyword_loss(x, **terms):
    return np.sum(x * terms["scale"]) + np.sum(terms["bias"] ** 2)


def relu_layer(x, **opts):
    return np.maximum(x * opts["scale"], 0)


def passes_a_keyword_through(x, s):
    return np.sum(relu_layer(x, scale=s) ** 2)


def spreads_a_dict(x, s):
    options = {"scale": s}
    return np.sum(relu_layer(x, **options) ** 2)


def callee_called_three_ways(x, w1, w2):
    pair = (w1, w2)
    return (np.sum(tanh_chain(x, w1, w2) ** 2) + np.sum(tanh_chain(x, *pair))
            + np.sum(tanh_chain(x, w2)))


def spreads_a_tuple_argument(x, ws):
    return np.sum(tanh_chain(x, *ws) ** 2)


def spreads_after_a_positional(x, w1, w2):
    rest = (w2,)
    return np.sum(tanh_chain(x, w1, *rest) ** 2)


def spreads_into_numpy(x, y):
    pair = (x, y)
    return np.sum(np.maximum(*pair) ** 2)


def defaults_keyword_only_and_var_positional(x, scale=2.0, *ws, shift, power=2, **extra):
    total = shift * x
    for w in ws:
        total = total + w * scale
    return np.sum(total**power) + extra["bias"] * 3.0


def shares_a_weight_across_argument_counts(x, w, c):
    h = tanh_chain(x, w)
    h = tanh_chain(h, w, c)  # `c` is data: the same wrt, a second specialisation
    return np.sum(h**2)


class ScaledBy:
    def __init__(self, rng):
        self.w = rng.standard_normal(3)

    def __call__(self, x, *scales):
        out = x * self.w
        for s in scales:
            out = out * s
        return out


def calls_an_object_with_var_positional(m, x, a, b):
    return np.sum(m(x, a, b) ** 2) + np.sum(m(x))


W3 = rng.standard_normal((3, 3)) * 0.7
W3B = rng.standard_normal((3, 3)) * 0.7


def _assert_matches_differences(fn, args, wrt, grads):
    for i, g in zip(wrt, grads):
        np.testing.assert_allclose(g, numerical_grad(fn, args, i), rtol=1e-6, atol=1e-7)


def test_var_positional_top_level_wrt_by_position():
    args = (X, W3, W3B)
    grads = srcgrad.grad(chain_loss, wrt=(0, 1, 2))(*args)
    _assert_matches_differences(chain_loss, args, (0, 1, 2), grads)
    srcgrad.testing.check_grads(chain_loss, args, wrt=(1, 2))
    one = srcgrad.grad(chain_loss, wrt=2)(*args)  # one position: one gradient, not a tuple
    np.testing.assert_array_equal(one, grads[2])


def test_var_positional_top_level_wrt_by_name():
    args = (X, W3, W3B)
    by_name = srcgrad.grad(chain_loss, wrt="ws")(*args)
    assert isinstance(by_name, tuple) and len(by_name) == 2
    by_position = srcgrad.grad(chain_loss, wrt=(1, 2))(*args)
    for got, expected in zip(by_name, by_position):
        np.testing.assert_array_equal(got, expected)
    _assert_matches_differences(chain_loss, args, (1, 2), by_name)
    # No *args at all: an empty tuple of gradients; the gradient of x is still right.
    assert srcgrad.grad(chain_loss, wrt="ws")(X) == ()
    np.testing.assert_allclose(srcgrad.grad(chain_loss)(X), 2 * X, rtol=1e-12)


def test_var_positional_value_and_grad_and_vjp():
    value, grads = srcgrad.value_and_grad(chain_loss, wrt=(1, 2))(X, W3, W3B)
    assert value == pytest.approx(chain_loss(X, W3, W3B), rel=1e-14)
    value, pullback = srcgrad.vjp(tanh_chain, wrt="ws")(X, W3, W3B)
    np.testing.assert_allclose(value, tanh_chain(X, W3, W3B), rtol=1e-14)
    pulled = pullback(2 * value)
    for got, expected in zip(pulled, grads):
        np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_var_keyword_top_level_wrt_kwargs():
    bias = np.array([0.5, -1.0])
    g = srcgrad.grad(keyword_loss, wrt="terms")(X, scale=1.5, bias=bias)
    assert set(g) == {"scale", "bias"} and isinstance(g["scale"], float)
    assert g["scale"] == pytest.approx(np.sum(X), rel=1e-12)
    np.testing.assert_allclose(g["bias"], 2 * bias, rtol=1e-12)
    # A keyword that lands in **terms, asked for by its name.
    g_x, g_bias = srcgrad.grad(keyword_loss, wrt=("x", "bias"))(X, scale=1.5, bias=bias)
    np.testing.assert_allclose(g_x, np.full_like(X, 1.5), rtol=1e-12)
    np.testing.assert_allclose(g_bias, 2 * bias, rtol=1e-12)


def test_callee_with_var_positional_called_normally_and_spread():
    args = (X, W3, W3B)
    grads = srcgrad.grad(callee_called_three_ways, wrt=(0, 1, 2))(*args)
    _assert_matches_differences(callee_called_three_ways, args, (0, 1, 2), grads)
    code = srcgrad.source(srcgrad.grad(callee_called_three_ways, wrt=(1, 2)), *args)
    assert code.count("dispatch.vjp_call(tanh_chain, (1, 2), x, w1, w2)") == 2  # *pair: its elements


def test_spread_of_a_tuple_argument_flows_back_into_the_tuple():
    ws = (W3, W3B)
    g = srcgrad.grad(spreads_a_tuple_argument, wrt=1)(X, ws)
    assert isinstance(g, tuple) and len(g) == 2
    for i in range(2):
        def at(w, i=i):
            return spreads_a_tuple_argument(X, tuple(w if j == i else ws[j] for j in range(2)))
        np.testing.assert_allclose(g[i], numerical_grad(at, (ws[i],), 0), rtol=1e-6, atol=1e-7)
    code = srcgrad.source(srcgrad.grad(spreads_a_tuple_argument, wrt=1), X, ws)
    assert "_t1 = ws[0]" in code and "ws_bar = " in code


def test_spread_after_a_positional_and_into_numpy():
    args = (X, W3, W3B)
    _assert_matches_differences(spreads_after_a_positional, args, (1, 2),
                                srcgrad.grad(spreads_after_a_positional, wrt=(1, 2))(*args))
    y = rng.standard_normal((4, 3))
    srcgrad.testing.check_grads(spreads_into_numpy, (X, y), wrt=(0, 1))
    assert "np.maximum(x, y)" in srcgrad.source(srcgrad.grad(spreads_into_numpy), X, y)


def test_var_keyword_pass_through():
    x = rng.standard_normal((4, 3))
    for fn in (passes_a_keyword_through, spreads_a_dict):
        g_x, g_s = srcgrad.grad(fn, wrt=(0, 1))(x, 1.5)
        np.testing.assert_allclose(g_x, 2 * 1.5**2 * np.maximum(x, 0), rtol=1e-12)
        assert g_s == pytest.approx(2 * 1.5 * np.sum(np.maximum(x, 0) ** 2), rel=1e-12)
        srcgrad.testing.check_grads(fn, (x, 1.5), wrt=(0, 1))


def test_defaults_keyword_only_and_var_positional_mixed():
    x = rng.standard_normal(3)
    args = (x, 1.5, x * 2, x * 3)
    g = srcgrad.grad(defaults_keyword_only_and_var_positional,
                     wrt=(0, 1, 2, 3, "shift", "bias"))(*args, shift=0.7, bias=0.2)

    def as_positional(x, scale, w1, w2, shift, bias):
        return defaults_keyword_only_and_var_positional(x, scale, w1, w2, shift=shift, bias=bias)
    full = args + (0.7, 0.2)
    for got, i in zip(g, range(6)):
        np.testing.assert_allclose(got, numerical_grad(as_positional, full, i), rtol=1e-6, atol=1e-7)
    assert g[5] == 3.0 and isinstance(g[4], float)
    # With its default scale and no *args at all.
    g_x = srcgrad.grad(defaults_keyword_only_and_var_positional)(x, shift=0.5, bias=0.0)
    np.testing.assert_allclose(g_x, 2 * 0.5 * (0.5 * x), rtol=1e-12)


def test_weight_shared_callee_with_different_argument_counts():
    c = rng.standard_normal((3, 3)) * 0.5
    args = (X, W3, c)
    grads = srcgrad.grad(shares_a_weight_across_argument_counts, wrt=(0, 1))(*args)
    _assert_matches_differences(shares_a_weight_across_argument_counts, args, (0, 1), grads)
    callee = srcgrad.api.VJPS[(tanh_chain, (0, 1), None)]
    assert len(callee._cache) == 2  # (x, (w,)) and (x, (w, c)): one program each
    top = srcgrad.grad(chain_loss, wrt=0)
    top(X, W3)
    top(X, W3, W3B)
    assert len(top._cache) == 2


def test_callable_object_with_var_positional():
    m = ScaledBy(rng)
    x = rng.standard_normal(3)
    args = (m, x, 1.5, 0.5)
    _assert_matches_differences(calls_an_object_with_var_positional, args, (1, 2, 3),
                                srcgrad.grad(calls_an_object_with_var_positional, wrt=(1, 2, 3))(*args))
    g_m = srcgrad.grad(calls_an_object_with_var_positional, wrt=0)(*args)
    # d/dw of sum((x w 1.5 0.5)^2) + sum(x w)
    np.testing.assert_allclose(g_m.w, 2 * x**2 * m.w * 0.75**2 + x, rtol=1e-12)


def spreads_a_list_grown_with_append(x):
    hs = []
    hs.append(x * 2)
    return np.sum(tanh_chain(x, *hs))


def tuple_returned(x):
    return x, x * 2


def tuple_returned_by_recursion(x, depth=1):
    # Recursive: not inlined, so what it returns is known only at run time.
    return (x, x * 2) if depth == 0 else tuple_returned_by_recursion(x, depth - 1)


def spreads_an_unknown_tuple_into_numpy(x):
    pair = tuple_returned_by_recursion(x)
    return np.sum(np.maximum(*pair))


def spreads_an_inlined_tuple_into_numpy(x):
    pair = tuple_returned(x)  # inlined: the tuple's length is known
    return np.sum(np.maximum(*pair))


def spreads_data_of_unknown_length(x, w):
    ws = []
    ws.append(w)
    return np.sum(tanh_chain(x, *ws))


def test_spread_whose_length_is_unknown_is_refused_when_differentiated():
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"test_calls.py:\d+.*adjoint of `hs`"):
        srcgrad.grad(spreads_a_list_grown_with_append)(W3)
    with pytest.raises(srcgrad.UnsupportedSyntaxError, match=r"how many values `pair` holds"):
        srcgrad.grad(spreads_an_unknown_tuple_into_numpy)(X)
    np.testing.assert_allclose(srcgrad.grad(spreads_an_inlined_tuple_into_numpy)(np.array([1.0, -2.0])),
                               [2.0, 1.0])
    # (`[*x]` is `list(x)`: tests/language/test_container_operations.py)
    # Not differentiated through the spread: the call runs as written.
    args = (X, W3)
    _assert_matches_differences(spreads_data_of_unknown_length, args, (0,),
                                [srcgrad.grad(spreads_data_of_unknown_length)(*args)])


def test_wrt_into_var_positional_and_var_keyword_checked_at_call_time():
    with pytest.raises(srcgrad.WrtError, match="index 2 of chain_loss, but only 2 were passed"):
        srcgrad.grad(chain_loss, wrt=2)(X, W3)
    with pytest.raises(srcgrad.WrtError, match=r"no keyword argument passed to \*\*terms \(passed: bias"):
        srcgrad.grad(keyword_loss, wrt="scale")(X, bias=1.0)
    with pytest.raises(srcgrad.WrtError, match=r"names no parameter of tanh_chain"):
        srcgrad.grad(tanh_chain, wrt="scale")
    with pytest.raises(srcgrad.WrtError, match=r"`ws\[0\]`: it is an integer"):
        srcgrad.grad(chain_loss, wrt=1)(X, 3)
    with pytest.raises(srcgrad.WrtError, match=r"parameters are \(x, \*ws\)"):
        srcgrad.grad(chain_loss, wrt=-1)


# ---- the short call path: Python floats as well as float arrays ------------------------------
def _product_and_sine(a, b):
    return a * b + np.sin(a) * b


def _cubed(x):
    return x * x * x


def _applied_twice(f, x):
    return f(f(x)) + x


@pytest.mark.parametrize("wrt", [0, 1, (0, 1), (1, 0)])
def test_python_floats_take_the_short_path_and_get_float_gradients(wrt):
    gf = srcgrad.grad(_product_and_sine, wrt=wrt)
    a, b = 1.5, 0.5
    exact = {0: b + np.cos(a) * b, 1: a + np.sin(a)}
    assert gf._plain_call((a, b)) is not None  # answered by the short path
    asked = wrt if isinstance(wrt, tuple) else (wrt,)
    for _ in range(2):  # compiled, then cached
        got = gf(a, b) if isinstance(wrt, tuple) else (gf(a, b),)
        assert [type(g) for g in got] == [float] * len(asked)
        assert list(got) == pytest.approx([exact[i] for i in asked], rel=1e-14)


def test_the_short_path_mixes_floats_and_float32_arrays():
    gf = srcgrad.grad(lambda s, x: np.sum(s * x ** 2), wrt=(0, 1))
    x = np.arange(3, dtype=np.float32)
    s_bar, x_bar = gf(2.0, x)
    assert type(s_bar) is float and s_bar == pytest.approx(5.0)
    assert x_bar.dtype == np.float32 and np.allclose(x_bar, 4.0 * x)


def test_an_integer_still_takes_the_general_path_and_is_refused():
    gf = srcgrad.grad(_product_and_sine, wrt=(0, 1))
    assert gf._plain_call((1.5, 2)) is None
    with pytest.raises(srcgrad.WrtError, match="integer"):
        gf(1.5, 2)


def test_a_callee_known_at_run_time_called_with_python_floats():
    gf = srcgrad.grad(_applied_twice, wrt=1)
    x = 0.7
    for _ in range(3):  # compiled, then dispatch.vjp_call's short path
        g = gf(_cubed, x)
        assert type(g) is float and g == pytest.approx(9 * x ** 8 + 1, rel=1e-14)
