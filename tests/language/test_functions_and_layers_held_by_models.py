"""Functions and layers held by a model: a function stored on the model, a forward set on
the instance, layers reached through a property, a bound method, a lambda, a partial, a
weak reference or a hook, a list of layers indexed at run time.  Each is differentiated or
refused at the user's line."""
from __future__ import annotations

import functools
import types
import weakref

import numpy as np
import pytest

import srcgrad
from srcgrad import errors
from srcgrad import nn


X3 = np.array([0.5, -1.0, 2.0])


# ---- silently wrong: a function stored on the model that reaches the model -------------
# `model.act = functools.partial(act, model)` (or a lambda, a closure naming `model`, one
# holding `model.w`): `m.act(x)` read the model's arrays through the partial, not through
# `m`, so the gradient with respect to `m` was zero.

class Model:
    def __init__(self):
        self.w = np.array([0.3, -1.2, 0.8])


def act(self, x):
    return np.sin(self.w * x)


def model_loss(m, x):
    return np.sum(m.act(x))


def _closure_over(model):
    def a(x):
        return np.sin(model.w * x)
    return a


def _closure_over_field(w):
    return lambda x: np.sin(w * x)


STORED = {
    "partial": lambda model: functools.partial(act, model),
    "keyword partial": lambda model: functools.partial(act, self=model),
    "closure": _closure_over,
    "closure over a field": lambda model: _closure_over_field(model.w),
    "partial of a partial": lambda model: functools.partial(functools.partial(act, model)),
}


@pytest.mark.parametrize("how", list(STORED))
def test_a_function_stored_on_the_model_reaching_it_is_refused(how):
    model = Model()
    model.act = STORED[how](model)
    with pytest.raises(errors.UserCodeError, match="reached other than as a layer stored in it"):
        srcgrad.grad(model_loss)(model, X3)


def test_a_method_bound_on_the_instance_is_differentiated():
    model = Model()
    model.act = types.MethodType(act, model)
    np.testing.assert_allclose(srcgrad.grad(model_loss)(model, X3).w, X3 * np.cos(model.w * X3), rtol=1e-12)


def test_a_stored_function_holding_nothing_of_the_model_is_differentiated():
    model = Model()
    model.act = np.tanh
    g = srcgrad.grad(model_loss, wrt=(0, 1))(model, X3)
    np.testing.assert_allclose(g[1], 1 - np.tanh(X3) ** 2, rtol=1e-12)


class WithProperty(nn.Module):
    def __init__(self):
        self._encoder = nn.Linear(3, 3, rng=np.random.default_rng(1))

    @property
    def encoder(self):
        return self._encoder

    def forward(self, x):
        return np.tanh(self.encoder(x))


class WithBoundStep(nn.Module):
    def __init__(self):
        self.lin = nn.Linear(3, 3, rng=np.random.default_rng(2))
        self.step = self.lin.forward

    def forward(self, x):
        return np.tanh(self.step(x)) + self.lin(x)


class WithPropertyOfABoundMethod(nn.Module):
    def __init__(self):
        self.a = nn.Linear(3, 3, rng=np.random.default_rng(3))

    @property
    def enc(self):
        return self.a.forward

    def forward(self, x):
        return np.tanh(self.enc(x))


def model_sum_of_sines(m, x):
    return np.sum(np.sin(m(x)))


def _numerical_layer_grad(m, layer, x):
    out = np.zeros_like(layer.weight)
    for i in np.ndindex(layer.weight.shape):
        old = layer.weight[i]
        layer.weight[i] = old + 1e-6
        up = model_sum_of_sines(m, x)
        layer.weight[i] = old - 1e-6
        down = model_sum_of_sines(m, x)
        layer.weight[i] = old
        out[i] = (up - down) / 2e-6
    return out


XS3 = np.random.default_rng(0).standard_normal((4, 3))


@pytest.mark.parametrize("cls, field", [(WithProperty, "_encoder"), (WithBoundStep, "lin"),
                                        (WithPropertyOfABoundMethod, "a")], ids=lambda v: getattr(v, "__name__", v))
def test_a_layer_reached_through_a_property_or_a_bound_method(cls, field):
    m = cls()
    g = srcgrad.grad(model_sum_of_sines)(m, XS3)
    layer = getattr(m, field)
    np.testing.assert_allclose(getattr(g, field).weight, _numerical_layer_grad(m, layer, XS3), rtol=1e-6, atol=1e-9)
    jac = srcgrad.jacfwd(model_sum_of_sines)(m, XS3)  # (forward mode: a scalar's Jacobian is its gradient)
    np.testing.assert_allclose(getattr(jac, field).weight, getattr(g, field).weight, rtol=1e-6, atol=1e-9)


class HoldingALambda(nn.Module):
    def __init__(self):
        self.lin = nn.Linear(3, 3, rng=np.random.default_rng(4))
        lin = self.lin
        self.f = lambda h: np.tanh(lin(h))

    def forward(self, x):
        return self.f(x)


class HoldingAPartial(nn.Module):
    def __init__(self):
        self.lin = nn.Linear(3, 3, rng=np.random.default_rng(4))
        self.f = functools.partial(_apply_layer, self.lin)

    def forward(self, x):
        return self.f(x)


def _apply_layer(layer, h):
    return np.tanh(layer(h))


class HoldingAWeakReference(nn.Module):
    def __init__(self):
        self.lin = nn.Linear(3, 3, rng=np.random.default_rng(4))
        self.f = weakref.ref(self.lin)

    def forward(self, x):
        return self.f()(x)


class WithHooks(nn.Module):
    def __init__(self):
        self.lin = nn.Linear(3, 3, rng=np.random.default_rng(4))
        self.hooks = []

    def forward(self, x):
        h = self.lin(x)
        for hook in self.hooks:
            h = hook(h)
        return h


@pytest.mark.parametrize("cls", [HoldingALambda, HoldingAPartial, HoldingAWeakReference], ids=lambda c: c.__name__)
@pytest.mark.parametrize("transform", ["grad", "jacfwd"])
def test_a_callable_reading_a_layer_is_refused(cls, transform):
    with pytest.raises(errors.UserCodeError, match="reached other than as a layer stored in it"):
        getattr(srcgrad, transform)(model_sum_of_sines)(cls(), XS3)


def test_a_hook_in_a_list_reading_the_model_is_refused():
    m = WithHooks()
    m.hooks.append(lambda h: h + m.lin.bias)
    with pytest.raises(errors.UserCodeError, match="reads parameters other than through its arguments"):
        srcgrad.grad(model_sum_of_sines)(m, XS3)
    plain = WithHooks()
    plain.hooks.append(lambda h: np.tanh(h) * 2.0)  # reads nothing of the model: differentiated
    g = srcgrad.grad(model_sum_of_sines)(plain, XS3)
    np.testing.assert_allclose(g.lin.weight, _numerical_layer_grad(plain, plain.lin, XS3), rtol=1e-6, atol=1e-9)


class StepsOfBoundMethods(nn.Module):
    def __init__(self):
        self.a = nn.Linear(3, 3, rng=np.random.default_rng(6))
        self.steps = [self.a.forward, np.tanh]

    def forward(self, x):
        for step in self.steps:
            x = step(x)
        return x


class ForwardKeptInAName(nn.Module):
    def __init__(self):
        self.a = nn.Linear(3, 3, rng=np.random.default_rng(7))

    def forward(self, x):
        f = self.a.forward
        return np.tanh(f(x))


@pytest.mark.parametrize("cls", [StepsOfBoundMethods, ForwardKeptInAName], ids=lambda c: c.__name__)
@pytest.mark.parametrize("transform", ["grad", "jacfwd"])
def test_a_bound_method_kept_apart_from_its_layer_is_right_or_refused(cls, transform):
    """`self.steps = [self.a.forward, np.tanh]` gave zero gradients: the method's receiver's
    adjoint went to the list's item.  Right (against central differences) or refused."""
    m = cls()
    try:
        g = getattr(srcgrad, transform)(model_sum_of_sines)(m, XS3)
    except errors.UserCodeError as e:
        assert "bound method kept apart" in str(e) and "test_functions_and_layers_held_by_models.py" in str(e), str(e)
        return
    np.testing.assert_allclose(g.a.weight, _numerical_layer_grad(m, m.a, XS3), rtol=1e-6, atol=1e-9)


# ---- a forward set on the instance, a function stored in a model ------------------------
# (found by an outside tester: the class's forward ran instead of the instance's own, and
# a plain function stored as a layer was asked for parameters of its own)

def _squared_output(m, x):
    return np.sum(m(x) ** 2)


def _fd_of_array(f, m, x, array, eps=1e-6):
    g = np.zeros_like(array)
    for i in np.ndindex(array.shape):
        old = array[i]
        array[i] = old + eps
        up = f(m, x)
        array[i] = old - eps
        down = f(m, x)
        array[i] = old
        g[i] = (up - down) / (2 * eps)
    return g


def test_a_forward_set_on_the_instance_is_the_one_that_runs():
    import types
    from srcgrad import nn

    x = np.random.default_rng(0).standard_normal((2, 3))
    lin = nn.Linear(3, 2)
    lin.forward = types.MethodType(lambda self, z: 3.0 * z @ self.weight.T, lin)
    value, g = srcgrad.value_and_grad(_squared_output)(lin, x)
    assert np.isclose(value, _squared_output(lin, x))
    assert np.allclose(g.weight, _fd_of_array(_squared_output, lin, x, lin.weight), atol=1e-6)
    assert np.allclose(g.bias, 0.0)  # this forward does not use the bias
    seq = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    seq.layers[1].forward = np.sin  # a NumPy function stored on the instance
    value, g = srcgrad.value_and_grad(_squared_output)(seq, x)
    assert np.isclose(value, _squared_output(seq, x))
    assert np.allclose(g.layers[0].weight, _fd_of_array(_squared_output, seq, x, seq.layers[0].weight), atol=1e-6)


@pytest.mark.parametrize("act", ["relu", "sigmoid", "lambda", "tanh"])
def test_a_function_stored_in_a_model_is_called_as_a_function(act):
    from srcgrad import nn

    fn = {"relu": nn.functional.relu, "sigmoid": nn.functional.sigmoid,
          "lambda": lambda z: z ** 3, "tanh": np.tanh}[act]

    class WithActivation(nn.Module):
        def __init__(self, act):
            self.linear = nn.Linear(3, 2)
            self.act = act

        def forward(self, z):
            return self.act(self.linear(z))

    x = np.random.default_rng(1).standard_normal((2, 3))
    m = WithActivation(fn)
    g = srcgrad.grad(_squared_output)(m, x)
    assert np.allclose(g.linear.weight, _fd_of_array(_squared_output, m, x, m.linear.weight), atol=1e-6)
    assert np.allclose(g.linear.bias, _fd_of_array(_squared_output, m, x, m.linear.bias), atol=1e-6)
    value, tangent = srcgrad.jvp(lambda z: _squared_output(m, z))(x, np.ones_like(x))
    numeric = (_squared_output(m, x + 1e-6) - _squared_output(m, x - 1e-6)) / 2e-6
    assert np.isclose(tangent, numeric, rtol=1e-5)


# ---- `self.layers[i](x)`: a list of layers indexed at run time (was refused as __getitem__) ----

class _IndexedLayers:
    def __init__(self, layers):
        self.layers = layers

    def __call__(self, x):
        for i in range(len(self.layers)):
            x = np.tanh(self.layers[i](x))
        return x


def _indexed_loss(m, x):
    return np.sum(m(x) ** 2)


def test_a_list_of_layers_indexed_at_run_time():
    from srcgrad import nn

    x = np.random.default_rng(3).standard_normal((2, 3))
    m = _IndexedLayers([nn.Linear(3, 3), nn.Linear(3, 2)])
    for _ in range(2):  # then with a layer more: compiled again
        g = srcgrad.grad(_indexed_loss)(m, x)
        assert len(g.layers) == len(m.layers)
        for k, layer in enumerate(m.layers):
            for name in ("weight", "bias"):
                assert np.allclose(getattr(g.layers[k], name),
                                   _fd_of_array(_indexed_loss, m, x, getattr(layer, name)), atol=1e-6)
        m.layers.append(nn.Linear(2, 2))
