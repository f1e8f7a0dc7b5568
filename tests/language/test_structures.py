"""Gradients of structures: dicts, lists, tuples, nestings, and objects with
array attributes; the gradient has the argument's structure.  Checked against
central finite differences on every parameter."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad import tree
from tests.finite_differences import numerical_grad


class Linear:
    def __init__(self, n_in, n_out, rng):
        self.weight = rng.standard_normal((n_in, n_out)) * 0.3
        self.bias = rng.standard_normal(n_out) * 0.1
        self.n_in = n_in  # not a parameter

    def __call__(self, x):
        return x @ self.weight + self.bias


class TwoLayerNet:
    def __init__(self, rng):
        self.linear1 = Linear(3, 4, rng)
        self.linear2 = Linear(4, 2, rng)

    def __call__(self, x):
        return self.forward(x)

    def forward(self, x):
        h = np.maximum(self.linear1(x), 0)
        return self.linear2(h)


class Stack:
    """Layers in a list, applied in a loop; the middle one shared."""

    def __init__(self, rng):
        self.layers = [Linear(3, 3, rng), Linear(3, 3, rng)]

    def __call__(self, x):
        for layer in self.layers:
            x = np.tanh(layer(x))
        x = np.tanh(self.layers[1](x))
        return x


def model_loss(model, x, y):
    return np.sum((model(x) - y) ** 2)


def dict_loss(params, x):
    h = np.tanh(x @ params["w"] + params["b"])
    return np.sum(h**2) + np.sum(params["layers"][1] ** 2) * params["scale"]


def tuple_loss(params, x):
    w, b = params
    return np.sum(np.sin(x @ w + b))


def _check_every_leaf(fn, args, index=0):
    grad = srcgrad.grad(fn, wrt=index)(*args)
    paths, leaves, spec = tree.flatten(args[index])
    g_paths, g_leaves, g_spec = tree.flatten(grad)
    assert g_paths == paths and type(grad) is type(args[index])
    for path, leaf, g in zip(paths, leaves, g_leaves):
        def at_leaf(value, path=path):
            values = [value if p == path else l for p, l in zip(paths, leaves)]
            replaced = list(args)
            replaced[index] = tree.unflatten(spec, values)
            return fn(*replaced)
        expected = numerical_grad(at_leaf, (leaf,), 0)
        np.testing.assert_allclose(g, expected, rtol=1e-6, atol=1e-7, err_msg=tree.path_name(path))
    return grad


rng = np.random.default_rng(7)
X = rng.standard_normal((5, 3))
Y = rng.standard_normal((5, 2))


def test_object_with_layers():
    model = TwoLayerNet(rng)
    grad = _check_every_leaf(model_loss, (model, X, Y))
    assert grad.linear1.weight.shape == (3, 4) and grad.linear1.n_in is None  # no gradient


def test_layers_in_a_list_and_a_shared_layer():
    _check_every_leaf(model_loss, (Stack(rng), X, rng.standard_normal((5, 3))))


def test_dict_with_nested_list_and_float():
    params = {"w": rng.standard_normal((3, 2)), "b": np.zeros(2), "layers": [np.ones(2), np.ones(3)],
              "scale": 0.5}
    grad = _check_every_leaf(dict_loss, (params, X))
    np.testing.assert_array_equal(grad["layers"][0], np.zeros(2))
    assert isinstance(grad["scale"], float)


def test_tuple_of_arrays():
    _check_every_leaf(tuple_loss, ((rng.standard_normal((3, 2)), np.zeros(2)), X))


def test_float32_structure_keeps_float32():
    params = {"w": rng.standard_normal((3, 2)).astype(np.float32), "b": np.zeros(2, np.float32),
              "layers": [np.ones(2, np.float32), np.ones(3, np.float32)], "scale": 0.5}
    grad = srcgrad.grad(dict_loss)(params, X.astype(np.float32))
    assert grad["w"].dtype == np.float32 and grad["layers"][1].dtype == np.float32


def test_generated_code_for_a_model_reads_cleanly():
    code = srcgrad.source(srcgrad.grad(model_loss), TwoLayerNet(rng), X, Y)
    # The model's __call__, its forward and each layer inlined: one flat function, each
    # layer read into a name once, its lines under its own comment.
    assert "vjp" not in code and "pullback" not in code
    assert "linear1 = model.linear1" in code and "linear2 = model.linear2" in code
    assert code.count("# test_structures.py:21  return x @ self.weight + self.bias") == 4
    assert "model_bar = rt.add(model_bar, {'linear1': linear1_bar})" in code
    inner = srcgrad.source(srcgrad.api.GradientFunction(TwoLayerNet.forward, "vjp", ("self", "x")),
                           TwoLayerNet(rng), X)
    assert "linear1 = self.linear1" in inner and "vjp_method" not in inner
    assert "self_bar = rt.add(self_bar, {'linear1': linear1_bar})" in inner
