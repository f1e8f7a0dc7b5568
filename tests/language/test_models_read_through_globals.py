"""A model or its arrays read through a global: the differentiated object read through a
global is refused, another object is differentiated, a layer held in a global is
differentiated and one changing its argument is refused."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad import errors
from tests.finite_differences import numerical_grad


X3 = np.array([0.5, -1.0, 2.0])


# ---- silently wrong: a function stored on the model that reaches the model -------------
# `model.act = functools.partial(act, model)` (or a lambda, a closure naming `model`, one
# holding `model.w`): `m.act(x)` read the model's arrays through the partial, not through
# `m`, so the gradient with respect to `m` was zero.

class Model:
    def __init__(self):
        self.w = np.array([0.3, -1.2, 0.8])


# ---- silently wrong: the model being differentiated read through a global ---------------
# `loss(m, x)` whose helper reads the global `model`, the very object passed as `m` (or `W =
# model.w`, or a closure over it): the values read there were constants, the gradient lost
# that path.  Refused when compiling, at the line that reads the global.

GLOBAL_MODEL = Model()


GLOBAL_W = GLOBAL_MODEL.w


GLOBAL_PARAMS = {"w": np.array([0.3, -1.2, 0.8])}


def _helper_reading_the_global_model(x):
    return np.sin(GLOBAL_MODEL.w * x)


def loss_through_a_global_model(m, x):
    return np.sum(_helper_reading_the_global_model(x)) + np.sum(m.w * x)


def loss_through_a_global_array(m, x):
    return np.sum(GLOBAL_W * x * m.w)


def loss_through_global_params(p, x):
    return np.sum(GLOBAL_PARAMS["w"] * x) + np.sum(p["w"] * x)


def _closure_loss(model):
    def loss(m, x):
        return np.sum(model.w * x * m.w)
    return loss


@pytest.mark.parametrize("f, arg", [(loss_through_a_global_model, GLOBAL_MODEL),
                                    (loss_through_a_global_array, GLOBAL_MODEL),
                                    (loss_through_global_params, GLOBAL_PARAMS),
                                    (_closure_loss(GLOBAL_MODEL), GLOBAL_MODEL)],
                         ids=["helper reads the model", "a field of it", "a dict of params", "a closure"])
def test_the_differentiated_object_read_through_a_global_is_refused(f, arg):
    with pytest.raises(errors.UserCodeError, match="being differentiated: srcgrad follows it through"):
        srcgrad.grad(f)(arg, X3)


def test_another_object_than_the_global_is_differentiated():
    other = Model()
    g = srcgrad.grad(loss_through_a_global_array)(other, X3)
    np.testing.assert_allclose(g.w, GLOBAL_W * X3, rtol=1e-12)


# ---- a layer held in a global (found by an outside tester: refused as changing its arguments) ----

_GLOBAL_LINEAR = None


_GLOBAL_CONV = None


_GLOBAL_POOL = None


def _through_global_layers(x):
    return np.sum(_GLOBAL_LINEAR(np.reshape(_GLOBAL_POOL(_GLOBAL_CONV(x)), (x.shape[0], -1))) ** 2)


class _ScalesItsInput:
    def __call__(self, z):
        z *= 2.0  # changes its argument in place
        return z


_GLOBAL_SCALER = _ScalesItsInput()


def _through_a_global_that_changes_its_argument(x):
    y = x * 1.0
    return np.sum(_GLOBAL_SCALER(y) * x)


def test_a_layer_held_in_a_global_differentiates_and_one_changing_its_argument_is_refused():
    global _GLOBAL_LINEAR, _GLOBAL_CONV, _GLOBAL_POOL
    from srcgrad import nn

    _GLOBAL_CONV = nn.Conv2d(1, 2, 3, padding=1)
    _GLOBAL_POOL = nn.MaxPool2d(2)
    _GLOBAL_LINEAR = nn.Linear(8, 3)
    x = np.random.default_rng(2).standard_normal((2, 1, 4, 4))
    assert np.allclose(srcgrad.grad(_through_global_layers)(x),
                       numerical_grad(_through_global_layers, (x,), 0), rtol=1e-5, atol=1e-7)
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="changes its arguments in place"):
        srcgrad.grad(_through_a_global_that_changes_its_argument)(x)
