"""A model's layout (tree.Layout) is found once and kept while the model holds it.

Each training step passes the same model, whose parameters an optimizer updates
in place; the cache key and the gradient's structure come from a layout walked
once.  Every change that could make it stale is checked here: after each, the
gradient (a fresh one and the one already used, so its cache is exercised)
agrees with central differences and has the model's structure, shapes and dtypes.
"""
from __future__ import annotations

import gc

import numpy as np
import pytest

import srcgrad
from srcgrad import nn, pipeline, tree

rng = np.random.default_rng(11)
X = rng.standard_normal((4, 3))


class Affine(nn.Module):
    def __init__(self):
        self.w = rng.standard_normal((3, 2))
        self.b = rng.standard_normal(2)
        self.gain = np.ones(2, dtype=np.int64)  # an integer array: carried along, no gradient
        self.unused = rng.standard_normal(5)

    def forward(self, x):
        return (x @ self.w + self.b) * self.gain


class Scaled(nn.Module):
    """Another class in the same place, with other parameters."""

    def __init__(self):
        self.v = rng.standard_normal((3, 2))

    def forward(self, x):
        return np.sin(x @ self.v)


class Model(nn.Module):
    def __init__(self):
        self.layer = Affine()
        self.scale = 0.5
        self.steps = 2
        self.extra = []  # carried along while it holds no parameters
        self.name = "model"

    def forward(self, x):
        return np.tanh(self.layer(x)) * self.scale


def loss(model, x):
    return np.sum(model(x) ** 2)


def numerical(f, model, x, eps=1e-6):
    """Central differences for every float leaf of ``model``, by path (perturbed in place)."""
    paths, leaves, _ = tree.flatten(model)
    out = {}
    for path, leaf in zip(paths, leaves):
        if isinstance(leaf, np.ndarray) and leaf.dtype.kind == "f":
            g = np.zeros(leaf.shape)
            for i in np.ndindex(leaf.shape):
                old = leaf[i]
                leaf[i] = old + eps
                plus = f(model, x)
                leaf[i] = old - eps
                minus = f(model, x)
                leaf[i] = old
                g[i] = (plus - minus) / (2 * eps)
            out[path] = g
    return out


def flattened_rank(model):
    """The cache key's entry for ``model`` by flattening it (what the layout must agree with)."""
    original, tree.layout = tree.layout, lambda obj: None
    try:
        return pipeline.rank_of_argument(model)
    finally:
        tree.layout = original


def assert_right(gradient, model, x=X, f=loss):
    """The gradient has the model's structure, shapes and dtypes, and central differences' values;
    the cache key has the model's ranks."""
    assert pipeline.rank_of_argument(model) == flattened_rank(model)
    got = gradient(model, x)
    assert type(got) is type(model)
    expected = numerical(f, model, x)
    paths, leaves, _ = tree.flatten(got)
    got_leaves = {p: g for p, g in zip(paths, leaves) if isinstance(g, np.ndarray)}
    assert set(got_leaves) == set(expected)
    model_leaves = dict(zip(*tree.flatten(model)[:2]))
    for path, g in expected.items():
        param = model_leaves[path]
        assert got_leaves[path].shape == param.shape and got_leaves[path].dtype == param.dtype, path
        np.testing.assert_allclose(got_leaves[path], g, rtol=1e-6, atol=1e-8, err_msg=tree.path_name(path))
    return got


def twice(change, f=loss):
    """Check before and after ``change(model)`` with one gradient function, then with a fresh one."""
    model = Model()
    gradient = srcgrad.grad(f)
    assert_right(gradient, model, f=f)
    change(model)
    got = assert_right(gradient, model, f=f)
    assert_right(srcgrad.grad(f), model, f=f)
    return model, got


def test_in_place_updates_keep_the_layout():
    model = Model()
    gradient = srcgrad.grad(loss)
    layout = tree.layout(model)
    for _ in range(3):
        g = assert_right(gradient, model)
        model.layer.w -= 0.1 * g.layer.w  # an optimizer's step
        model.layer.b -= 0.1 * g.layer.b
    assert tree.layout(model) is layout
    assert g.scale != 0.0 and g.steps is None and g.name == "model" and g.layer.gain is None


def test_a_rebound_parameter_of_another_rank():
    def change(model):
        model.layer.b = rng.standard_normal((1, 2))
    _, g = twice(change)
    assert g.layer.b.shape == (1, 2)


def test_a_rebound_float():
    def change(model):
        model.scale = 2.0
    _, g = twice(change)
    assert isinstance(g.scale, float)


def test_an_added_parameter():
    def change(model):
        model.layer.more = rng.standard_normal((2, 2))
    _, g = twice(change)
    np.testing.assert_array_equal(g.layer.more, 0.0)


def test_a_removed_parameter():
    def change(model):
        del model.layer.unused
    _, g = twice(change)
    assert not hasattr(g.layer, "unused")


def test_an_attribute_renamed_with_its_value():
    def change(model):
        model.layer.spare = model.layer.__dict__.pop("unused")
    _, g = twice(change)
    assert not hasattr(g.layer, "unused") and g.layer.spare.shape == (5,)


def test_a_submodule_of_another_class():
    def change(model):
        model.layer = Scaled()
    _, g = twice(change)
    assert type(g.layer) is Scaled and g.layer.v.shape == (3, 2)


def test_a_parameter_reshaped_in_place():
    def change(model):
        model.layer.b.shape = (1, 2)  # the same array, another rank
    _, g = twice(change)
    assert g.layer.b.shape == (1, 2)


def test_an_integer_array_made_float_in_place():
    def change(model):
        model.layer.gain.dtype = np.float64  # the same array and bytes: now a parameter
        model.layer.gain[...] = 1.5
    _, g = twice(change)
    assert g.layer.gain.dtype == np.float64 and np.any(g.layer.gain != 0.0)


def test_a_parameter_whose_dtype_changes_in_place():
    def change(model):
        model.layer.unused.dtype = np.float32  # (5,) float64 bytes seen as (10,) float32
    _, g = twice(change)
    assert g.layer.unused.dtype == np.float32 and g.layer.unused.shape == (10,)


def test_a_carried_list_that_gains_a_parameter_in_place():
    def change(model):
        model.extra.append(rng.standard_normal(2))
    model, g = twice(change)
    assert tree.layout(model) is None  # a list of parameters: flattened
    np.testing.assert_array_equal(g.extra[0], 0.0)


def test_a_gradient_is_never_an_argument_or_shared():
    class Pair:
        def __init__(self):
            self.a = rng.standard_normal(3)
            self.b = rng.standard_normal(3)

    def product(m, x):
        return np.sum(x * m.a) + np.sum((m.b + m.a) * 1.0)

    x = rng.standard_normal(3)
    pair = Pair()
    gradient = srcgrad.grad(product)
    for _ in range(2):
        g = gradient(pair, x)
        np.testing.assert_allclose(g.a, x + 1.0)
        np.testing.assert_allclose(g.b, 1.0)
        assert not np.shares_memory(g.a, g.b)
        assert not any(np.shares_memory(g.a, v) or np.shares_memory(g.b, v) for v in (x, pair.a, pair.b))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float32_models_keep_their_dtype(dtype):
    model = Model()
    model.layer.w, model.layer.b = model.layer.w.astype(dtype), model.layer.b.astype(dtype)
    g = srcgrad.grad(loss)(model, X.astype(dtype))
    assert g.layer.w.dtype == dtype and g.layer.b.dtype == dtype


def test_a_layout_is_forgotten_with_its_model():
    model = Model()
    srcgrad.grad(loss)(model, X)
    key = id(model)
    assert key in tree._LAYOUTS
    del model
    gc.collect()
    assert key not in tree._LAYOUTS


def test_value_and_grad_of_a_model_takes_the_same_path():
    """``value_and_grad`` (what a training loop calls) builds its gradient from the layout too:
    the value is the loss's, the gradient as ``grad``'s, also after in-place updates and a change."""
    model = Model()
    both = srcgrad.value_and_grad(loss)
    calls = []
    original = tree.Layout.gradient
    tree.Layout.gradient = lambda self, sparse, like: calls.append(like) or original(self, sparse, like)
    try:
        for _ in range(2):
            value, g = both(model, X)
            np.testing.assert_allclose(value, loss(model, X), rtol=1e-12)
            expected = assert_right(srcgrad.grad(loss), model)
            np.testing.assert_allclose(g.layer.w, expected.layer.w, rtol=1e-12)
            np.testing.assert_allclose(g.layer.b, expected.layer.b, rtol=1e-12)
            assert type(g) is Model and g.steps is None and g.layer.gain is None
            assert not any(np.shares_memory(g.layer.w, v) for v in (model.layer.w, expected.layer.w))
            model.layer.w -= 0.1 * g.layer.w
        assert calls and all(m is model for m in calls)
        model.layer = Scaled()  # another class: compiled again
        value, g = both(model, X)
        np.testing.assert_allclose(value, loss(model, X), rtol=1e-12)
        assert type(g.layer) is Scaled and g.layer.v.shape == (3, 2)
    finally:
        tree.Layout.gradient = original


@pytest.mark.filterwarnings("ignore::numpy.exceptions.ComplexWarning")
def test_value_and_grad_still_refuses_a_complex_value():
    def complex_loss(model, x):
        return np.sum(model(x)) * 1j

    with pytest.raises(srcgrad.errors.UserCodeError, match="complex"):
        srcgrad.value_and_grad(complex_loss)(Model(), X)


# ---- lists and tuples of layers (nn.Sequential) ---------------------------------

class Turn(nn.Module):
    """2 -> 2 features: a layer of a class of its own."""

    def __init__(self):
        self.v = rng.standard_normal((2, 2))

    def forward(self, x):
        return np.sin(x @ self.v)


def stacked():
    return nn.Sequential(Affine(), nn.Tanh(), Turn())


def stack_loss(model, x):
    return np.sum(model(x) ** 2)


def stack_twice(change):
    """As :func:`twice`, for a model holding its layers in a list."""
    model = stacked()
    gradient = srcgrad.grad(stack_loss)
    assert_right(gradient, model, f=stack_loss)
    change(model)
    got = assert_right(gradient, model, f=stack_loss)
    assert_right(srcgrad.grad(stack_loss), model, f=stack_loss)
    return model, got


def test_a_list_of_layers_is_laid_out():
    model = stacked()
    gradient = srcgrad.grad(stack_loss)
    layout = tree.layout(model)
    assert layout is not None
    for _ in range(2):
        g = assert_right(gradient, model, f=stack_loss)
        model.layers[0].w -= 0.1 * g.layers[0].w  # an optimizer's step: the layout holds
    assert tree.layout(model) is layout
    assert type(g.layers) is list and [type(layer) for layer in g.layers] == [Affine, nn.Tanh, Turn]
    assert g.layers[0].gain is None and g.layers[1] is not model.layers[1]
    value, g2 = srcgrad.value_and_grad(stack_loss)(model, X)
    np.testing.assert_allclose(value, stack_loss(model, X), rtol=1e-12)
    np.testing.assert_allclose(g2.layers[2].v, gradient(model, X).layers[2].v, rtol=1e-12)


def test_a_layer_replaced_by_one_of_another_class():
    model, g = stack_twice(lambda model: model.layers.__setitem__(2, nn.Linear(2, 2)))
    assert type(g.layers[2]) is nn.Linear


def test_a_layer_replaced_by_one_of_the_same_class():
    model, g = stack_twice(lambda model: model.layers.__setitem__(0, Affine()))
    assert g.layers[0].w.shape == (3, 2)


def test_a_layer_appended_to_the_list():
    model, g = stack_twice(lambda model: model.layers.extend([nn.Linear(2, 4), nn.Tanh()]))
    assert len(g.layers) == 5 and g.layers[3].weight.shape == (4, 2)


def test_a_layer_removed_from_the_list():
    model, g = stack_twice(lambda model: model.layers.pop())
    assert len(g.layers) == 2


def test_the_list_turned_into_a_tuple():
    def change(model):
        model.layers = tuple(model.layers)
    model, g = stack_twice(change)
    assert type(g.layers) is tuple


def test_one_layer_twice_in_the_list():
    """Each path gets its own part of the gradient, as flattening gives (the optimizer sums
    tied parameters' parts: test_optim), never an array shared between them."""
    model = stacked()
    model.layers.append(model.layers[2])
    gradient = srcgrad.grad(stack_loss)
    got = gradient(model, X)
    assert tree.layout(model) is not None
    original, tree.layout = tree.layout, lambda obj: None
    try:
        flat = srcgrad.grad(stack_loss)(model, X)
    finally:
        tree.layout = original
    for i in (2, 3):
        np.testing.assert_allclose(got.layers[i].v, flat.layers[i].v, rtol=1e-12)
    total = numerical(stack_loss, model, X)[("layers", 2, "v")]
    np.testing.assert_allclose(got.layers[2].v + got.layers[3].v, total, rtol=1e-6, atol=1e-8)
    assert got.layers[2] is not got.layers[3] and not np.shares_memory(got.layers[2].v, got.layers[3].v)


def test_a_list_holding_an_array_is_flattened():
    model = stacked()
    model.layers.append(rng.standard_normal(2))
    assert tree.layout(model) is None


def test_an_object_inside_itself_is_not_laid_out():
    model = stacked()
    model.layers[0].owner = [model]
    assert tree.layout(model) is None
    model.layers[0].owner = model
    assert tree.layout(model) is None
