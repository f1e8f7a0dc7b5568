"""Forward mode and Jacobians with respect to objects and structures that hold Python
numbers besides arrays, and Jacobians of functions returning structures.

``grad`` decides which leaves are differentiable: an object's float attribute gets a
gradient (a float), an int attribute (a count, a stride) gets None.  ``jvp``, ``jacfwd``,
``jacrev``, ``hvp`` and ``hessian`` must agree leaf for leaf: the same leaves get
tangents, columns and blocks, the others none, and a tangent given for an int is never
used.  Each value against central differences of the function itself."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import srcgrad
from srcgrad import nn

EPS = {np.float64: 1e-6, np.float32: 1e-2}
TOL = {np.float64: 1e-6, np.float32: 2e-2}


def central(f, make, value, eps):
    """``∂f(make(v))/∂v`` at ``value`` by central differences: shape ``y.shape + v.shape``."""
    value = np.asarray(value, dtype=np.float64)
    columns = []
    for i in range(value.size):
        step = np.zeros(value.size)
        step[i] = eps
        plus, minus = value + step.reshape(value.shape), value - step.reshape(value.shape)
        if value.ndim == 0:
            plus, minus = float(plus), float(minus)
        columns.append((np.asarray(f(make(plus)), np.float64) - np.asarray(f(make(minus)), np.float64)) / (2 * eps))
    y_shape = np.shape(columns[0])
    return np.moveaxis(np.array(columns), 0, -1).reshape(y_shape + value.shape)


class Model:
    def __init__(self, dtype=np.float64, seed=0):
        rng = np.random.default_rng(seed)
        self.w = rng.standard_normal((3, 2)).astype(dtype)
        self.scale = 0.7      # a float setting: differentiated (grad gives it a float)
        self.power = 2        # an int setting: not differentiated (grad gives None)


def with_w(m, w):
    m = copy.deepcopy(m)
    m.w = np.asarray(w, m.w.dtype)
    return m


def with_scale(m, s):
    m = copy.deepcopy(m)
    m.scale = s
    return m


X = np.random.default_rng(1).standard_normal((4, 3))


def vector_out(m, x):
    return np.tanh(x @ m.w).sum(axis=1) * m.scale ** m.power


def scalar_out(m, x):
    return np.sum(np.tanh(x @ m.w) * m.scale) * m.power


@pytest.mark.parametrize("jacobian", [srcgrad.jacfwd, srcgrad.jacrev])
@pytest.mark.parametrize("f", [vector_out, scalar_out])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_jacobian_of_an_object_with_float_and_int_attributes(jacobian, f, dtype):
    m, x = Model(dtype), X.astype(dtype)
    J = jacobian(f)(m, x)
    assert type(J) is Model and J.power is None
    assert J.w.dtype == dtype and J.w.shape == np.shape(f(m, x)) + m.w.shape
    np.testing.assert_allclose(J.w, central(lambda a: f(a, x), lambda w: with_w(m, w), m.w, EPS[dtype]),
                               rtol=TOL[dtype], atol=TOL[dtype])
    np.testing.assert_allclose(J.scale, central(lambda a: f(a, x), lambda s: with_scale(m, s), m.scale,
                                                EPS[dtype]), rtol=TOL[dtype], atol=TOL[dtype])
    if np.ndim(f(m, x)) == 0:  # the same leaves as grad's
        g = srcgrad.grad(f)(m, x)
        np.testing.assert_allclose(J.w, g.w, rtol=TOL[dtype])
        np.testing.assert_allclose(J.scale, g.scale, rtol=TOL[dtype])


@pytest.mark.parametrize("chunk_size", [None, 1, 4])
def test_jacobian_chunks_of_an_object(chunk_size):
    m = Model()
    expected = central(lambda a: vector_out(a, X), lambda w: with_w(m, w), m.w, 1e-6)
    for jacobian in (srcgrad.jacfwd, srcgrad.jacrev):
        J = jacobian(vector_out, chunk_size=chunk_size)(m, X)
        np.testing.assert_allclose(J.w, expected, rtol=1e-6, atol=1e-8)
        assert J.power is None


def test_jvp_ignores_the_tangent_objects_int_attribute():
    """A tangent made as a copy of the model holds its int setting (2): not a tangent."""
    m = Model()
    v = copy.deepcopy(m)
    v.w = np.random.default_rng(5).standard_normal((3, 2))
    v.scale = 0.0
    _, t = srcgrad.jvp(scalar_out)(m, X, v)
    expected = central(lambda e: scalar_out(with_w(m, m.w + e * v.w), X), lambda e: e, 0.0, 1e-6)
    np.testing.assert_allclose(t, expected, rtol=1e-6)
    v.scale = 0.5  # the float setting's tangent is one (grad differentiates it)
    _, t = srcgrad.jvp(scalar_out)(m, X, v)
    expected = central(lambda e: scalar_out(with_scale(with_w(m, m.w + e * v.w), m.scale + 0.5 * e), X),
                       lambda e: e, 0.0, 1e-6)
    np.testing.assert_allclose(t, expected, rtol=1e-6)


def test_dict_of_parameters_with_a_python_float_and_int():
    d = {"w": Model().w, "s": 0.7, "n": 2}

    def f(d, x):
        return np.tanh(x @ d["w"]).sum(axis=1) * d["s"] * d["n"]

    for jacobian in (srcgrad.jacfwd, srcgrad.jacrev):
        J = jacobian(f)(d, X)
        assert J["n"] is None
        np.testing.assert_allclose(J["w"], central(lambda a: f(a, X), lambda w: {**d, "w": w}, d["w"], 1e-6),
                                   rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(J["s"], central(lambda a: f(a, X), lambda s: {**d, "s": s}, 0.7, 1e-6),
                                   rtol=1e-6)
    # A tangent given for the int is ignored (grad gives it None): zero here.
    _, t = srcgrad.jvp(f)(d, X, {"w": np.zeros((3, 2)), "s": 0.0, "n": 5})
    np.testing.assert_array_equal(t, np.zeros(4))


def test_objects_inside_structures():
    a, b = Model(seed=2), Model(seed=3)
    b.scale = 1.3

    def f(ms, x):
        first, second = ms["pair"]  # (`ms["pair"][0].w` is refused, in grad too: taken for an array's)
        return np.tanh(x @ first.w) @ second.w.T * second.scale * first.power

    params = {"pair": [a, b]}
    for jacobian in (srcgrad.jacfwd, srcgrad.jacrev):
        J = jacobian(f)(params, X)
        ja, jb = J["pair"]
        assert ja.power is None and jb.power is None
        np.testing.assert_allclose(ja.w, central(lambda p: f(p, X), lambda w: {"pair": [with_w(a, w), b]},
                                                 a.w, 1e-6), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(jb.scale, central(lambda p: f(p, X), lambda s: {"pair": [a, with_scale(b, s)]},
                                                     b.scale, 1e-6), rtol=1e-6, atol=1e-8)
        np.testing.assert_allclose(ja.scale, 0.0)  # (a's scale is not used)


class ConvNet(nn.Module):
    """A module with int settings (the convolution's stride, padding, channels) and a
    float one (a temperature)."""

    def __init__(self, dtype):
        self.conv = nn.Conv2d(1, 2, 3, stride=2, padding=1, dtype=dtype, rng=np.random.default_rng(0))
        self.temperature = 0.5

    def forward(self, x):
        return np.tanh(self.conv(x) / self.temperature).sum(axis=(1, 2, 3))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_module_with_int_and_float_settings(dtype):
    net = ConvNet(dtype)
    x = np.random.default_rng(4).standard_normal((2, 1, 5, 5)).astype(dtype)

    def f(net, x):
        return net(x)

    def with_weight(w):
        n = copy.deepcopy(net)
        n.conv.weight = np.asarray(w, dtype)
        return n

    def with_temperature(t):
        n = copy.deepcopy(net)
        n.temperature = t
        return n

    expected_w = central(lambda n: f(n, x), with_weight, net.conv.weight, EPS[dtype])
    expected_t = central(lambda n: f(n, x), with_temperature, net.temperature, EPS[dtype])
    for jacobian in (srcgrad.jacfwd, srcgrad.jacrev):
        J = jacobian(f)(net, x)
        assert J.conv.stride is None and J.conv.padding is None
        np.testing.assert_allclose(J.conv.weight, expected_w, rtol=TOL[dtype], atol=TOL[dtype])
        np.testing.assert_allclose(J.temperature, expected_t, rtol=TOL[dtype], atol=TOL[dtype])
    v = copy.deepcopy(net)  # the tangent: the weight's direction, everything else as the model's
    v.conv.weight = np.ones_like(net.conv.weight)
    v.conv.bias = np.zeros_like(net.conv.bias)
    v.temperature = 0.0
    _, t = srcgrad.jvp(f)(net, x, v)
    np.testing.assert_allclose(t, expected_w.reshape(2, -1).sum(axis=1), rtol=TOL[dtype], atol=TOL[dtype])


def test_hessian_and_hvp_of_parameters_with_a_float_and_an_int():
    d = {"w": Model().w, "s": 0.7, "n": 2}

    def f(d, x):
        return np.sum(np.tanh(x @ d["w"]) ** 2) * d["s"] ** 2 * d["n"]

    H = srcgrad.hessian(f)(d, X)
    assert H["n"] is None
    grad_of = lambda key: lambda a: srcgrad.grad(f)(a, X)[key]  # noqa: E731
    np.testing.assert_allclose(H["w"]["w"], central(grad_of("w"), lambda w: {**d, "w": w}, d["w"], 1e-6),
                               rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(H["w"]["s"], central(grad_of("w"), lambda s: {**d, "s": s}, 0.7, 1e-6), rtol=1e-5)
    np.testing.assert_allclose(H["s"]["s"], central(grad_of("s"), lambda s: {**d, "s": s}, 0.7, 1e-6), rtol=1e-5)
    v = {"w": np.ones((3, 2)), "s": 0.0, "n": 7}  # (the int's entry: no tangent, ignored)
    hv = srcgrad.hvp(f)(d, X, v)
    np.testing.assert_allclose(hv["w"], np.einsum("abcd,cd->ab", H["w"]["w"], v["w"]), rtol=1e-6)
    np.testing.assert_allclose(hv["s"], np.sum(H["s"]["w"] * v["w"]), rtol=1e-6)


def test_hessian_of_an_object_with_settings_is_right_or_refused():
    """Forward mode over grad's code of an object's non-array field is refused (a pullback
    closure, ``dispatch.vjp_field``); the arrays alone are right."""
    m = Model()

    def f(m, x):
        return np.sum(np.tanh(x @ m.w) ** 2) * m.scale ** 2 * m.power

    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="pullback closure"):
        srcgrad.hessian(f)(m, X)

    def g(m, x):
        return np.sum(np.tanh(x @ m.w) ** 2)

    H = srcgrad.hessian(g)(m, X)
    assert H.power is None and H.w.power is None
    np.testing.assert_allclose(H.w.w, central(lambda a: srcgrad.grad(g)(a, X).w, lambda w: with_w(m, w), m.w,
                                              1e-6), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(H.w.scale, 0.0)


def dict_out(x):
    return {"s": np.sum(x ** 2), "v": np.cos(x)}


def list_out(x):
    return [np.sum(x ** 2), np.cos(x)]


def nested_out(x):
    return (np.sum(x ** 2), {"a": np.sin(x), "b": [x * 2.0]})


@pytest.mark.parametrize("jacobian", [srcgrad.jacfwd, srcgrad.jacrev])
@pytest.mark.parametrize("chunk_size", [None, 2])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_jacobian_of_structured_outputs(jacobian, chunk_size, dtype):
    """As jax.jacfwd/jacrev: the output's structure, each leaf's Jacobian in it (exact
    values: 2x, -sin x, cos x, 2 on the diagonals)."""
    x = np.array([0.5, 1.0, 1.5], dtype)
    for f in (dict_out, list_out, nested_out):
        J = jacobian(f, chunk_size=chunk_size)(x)
        expected = {"s": 2 * x, "v": np.diag(-np.sin(x)), "a": np.diag(np.cos(x)), "b": 2 * np.eye(3)}
        if f is dict_out:
            assert set(J) == {"s", "v"}
            pairs = [(J["s"], "s"), (J["v"], "v")]
        elif f is list_out:
            assert isinstance(J, list) and len(J) == 2
            pairs = [(J[0], "s"), (J[1], "v")]
        else:
            assert isinstance(J, tuple) and set(J[1]) == {"a", "b"} and isinstance(J[1]["b"], list)
            pairs = [(J[0], "s"), (J[1]["a"], "a"), (J[1]["b"][0], "b")]
        for block, key in pairs:
            assert block.dtype == dtype
            np.testing.assert_allclose(block, expected[key], rtol=TOL[dtype], atol=1e-6)


@pytest.mark.parametrize("jacobian", [srcgrad.jacfwd, srcgrad.jacrev])
def test_jacobian_of_dict_output_with_respect_to_an_object(jacobian):
    m = Model()

    def f(m, x):
        return {"h": np.tanh(x @ m.w) * m.scale, "n": np.sum(m.w ** 2)}

    J = jacobian(f)(m, X)
    np.testing.assert_allclose(J["h"].w, central(lambda a: f(a, X)["h"], lambda w: with_w(m, w), m.w, 1e-6),
                               rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(J["h"].scale, central(lambda a: f(a, X)["h"], lambda s: with_scale(m, s),
                                                     m.scale, 1e-6), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(J["n"].w, 2 * m.w, rtol=1e-9)
    assert J["h"].power is None and J["n"].power is None


def test_pullback_refuses_a_cotangent_not_of_the_outputs_structure():
    """An array given for a dict output reached no output: zeros, silently, before."""
    x = np.array([0.5, 1.0, 1.5])
    _, pullback = srcgrad.vjp(dict_out)(x)
    for wrong in (1.0, np.ones(3), [1.0, np.ones(3)], {"s": 1.0, "t": 1.0}):
        with pytest.raises(ValueError, match="structure"):
            pullback(wrong)
    np.testing.assert_allclose(pullback({"s": 1.0}), 2 * x)  # a missing key: zero
    np.testing.assert_allclose(pullback({"s": 1.0, "v": np.ones(3)}), 2 * x - np.sin(x))
    _, pullback = srcgrad.vjp(list_out)(x)
    with pytest.raises(ValueError, match="structure"):
        pullback([1.0])
    np.testing.assert_allclose(pullback([1.0, None]), 2 * x)


def test_the_hessian_of_a_layer_with_a_float_hyper_parameter():
    """LayerNorm's ``eps`` (a float the class reads as a constant) has no tangent and no
    block: the Hessian's blocks are its weight's and bias's, against differences of grad."""
    from srcgrad import nn

    layer, x = nn.LayerNorm(3), np.random.default_rng(0).standard_normal((5, 3))
    layer.weight[:] = [1.5, 0.5, -1.0]

    def cubed(m, x):
        return np.sum(m(x) ** 3)
    H = srcgrad.hessian(cubed)(layer, x)
    grad, eps = srcgrad.grad(cubed), 1e-6
    for j in range(3):
        plus, minus = nn.LayerNorm(3), nn.LayerNorm(3)
        for m, sign in ((plus, 1), (minus, -1)):
            m.weight[:] = layer.weight
            m.weight[j] += sign * eps
        column = (grad(plus, x).weight - grad(minus, x).weight) / (2 * eps)
        np.testing.assert_allclose(H.weight.weight[:, j], column, rtol=1e-6, atol=1e-8)
        column = (grad(plus, x).bias - grad(minus, x).bias) / (2 * eps)
        np.testing.assert_allclose(H.bias.weight[:, j], column, rtol=1e-6, atol=1e-8)
