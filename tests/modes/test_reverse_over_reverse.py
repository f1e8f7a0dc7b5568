"""A srcgrad gradient function called inside a function being differentiated: reverse over
reverse (its pullback is the Hessian-vector product, ``higher.gradient_vjp``) and forward
over reverse (``higher.gradient_jvp``).  Each gradient against central differences of the
outer function (float64, ``srcgrad.testing.check_grads``): gradient penalties and MAML
inner steps, the gradient function called in a loop and inside a helper, with one and two
``wrt`` arguments, data it does not differentiate but the outer function does, structures,
``value_and_grad``, float32; and the refusals at the user's line."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad.testing import check_grads

RNG = np.random.default_rng(0)
W = RNG.normal(size=3)
X = RNG.normal(size=(4, 3))


def loss(w, x):
    return np.sum(np.tanh(x @ w) ** 2) + 0.5 * np.sum(w ** 3)


d_loss = srcgrad.grad(loss)
d_loss_both = srcgrad.grad(loss, wrt=(0, 1))
value_and_d_loss = srcgrad.value_and_grad(loss)


def penalised(w, x):
    return loss(w, x) + 0.3 * np.sum(d_loss(w, x) ** 2)


def one_step(w, x):
    w2 = w - 0.1 * d_loss(w, x)
    return loss(w2, x)


def three_steps(w, x):
    for _ in range(3):
        w = w - 0.1 * d_loss(w, x)
    return loss(w, x)


def inner_step(w, x):
    return w - 0.1 * d_loss(w, x)


def step_in_a_helper(w, x):
    return loss(inner_step(w, x), 2.0 * x)


def both_gradients(w, x):
    gw, gx = d_loss_both(w, x)
    return np.sum(gw ** 2) + np.sum(np.sin(gx))


def value_and_gradient(w, x):
    value, g = value_and_d_loss(w, x)
    return 2.0 * value + np.sum(g * g)


def made_inside(w, x):
    return np.sum(srcgrad.grad(loss)(w, x) ** 2)


CASES = [penalised, one_step, three_steps, step_in_a_helper, both_gradients, value_and_gradient, made_inside]


@pytest.mark.parametrize("fn", CASES, ids=[f.__name__ for f in CASES])
def test_grad_of_a_function_calling_a_gradient_matches_finite_differences(fn):
    check_grads(fn, (W, X), wrt=0)
    check_grads(fn, (W, X), wrt=(0, 1))  # x: data the inner gradient does not differentiate
    unoptimized = srcgrad.grad(fn, wrt=(0, 1), optimize=False)(W, X)
    for got, expected in zip(unoptimized, srcgrad.grad(fn, wrt=(0, 1))(W, X)):
        np.testing.assert_allclose(got, expected, rtol=1e-12)


@pytest.mark.parametrize("fn", CASES, ids=[f.__name__ for f in CASES])
def test_float32_is_kept(fn):
    g32 = srcgrad.grad(fn, wrt=(0, 1))(W.astype(np.float32), X.astype(np.float32))
    g64 = srcgrad.grad(fn, wrt=(0, 1))(W, X)
    for got, expected in zip(g32, g64):
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, expected, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("fn", CASES, ids=[f.__name__ for f in CASES])
def test_jvp_of_a_function_calling_a_gradient_matches_finite_differences(fn):
    v, vx = RNG.normal(size=W.shape), RNG.normal(size=X.shape)
    value, tangent = srcgrad.jvp(fn, wrt=(0, 1))(W, X, (v, vx))
    eps = 1e-6
    expected = (fn(W + eps * v, X + eps * vx) - fn(W - eps * v, X - eps * vx)) / (2 * eps)
    np.testing.assert_allclose(value, fn(W, X))
    np.testing.assert_allclose(tangent, expected, rtol=1e-6, atol=1e-8)


def test_vjp_of_a_gradient_call_is_the_hessian_vector_product():
    def doubled(w, x):
        return 2.0 * d_loss(w, x)

    u = RNG.normal(size=W.shape)
    value, pullback = srcgrad.vjp(doubled)(W, X)
    np.testing.assert_allclose(value, 2.0 * d_loss(W, X))
    np.testing.assert_allclose(pullback(u), 2.0 * srcgrad.hvp(loss)(W, X, u), rtol=1e-12)


def dict_loss(p, x):
    return np.sum(np.tanh(x @ p["w"] + p["b"]) ** 2)


d_dict_loss = srcgrad.grad(dict_loss)


def dict_step(p, x):
    g = d_dict_loss(p, x)
    return dict_loss({"w": p["w"] - 0.1 * g["w"], "b": p["b"] - 0.1 * g["b"]}, x)


def test_a_structure_of_parameters():
    p = {"w": RNG.normal(size=(3, 2)), "b": RNG.normal(size=2)}
    check_grads(dict_step, (p, X), wrt=(0, 1))


@pytest.mark.parametrize("f", [penalised, one_step, three_steps, step_in_a_helper])
def test_a_second_derivative_of_a_function_calling_a_gradient(f):
    """A third derivative of ``loss``: forward mode over the gradient code, whose backward
    sweep calls ``d_loss``'s pullback by name (``dispatch.gradient_pullback``)."""
    v = RNG.normal(size=W.shape)
    g, eps = srcgrad.grad(f), 1e-6
    np.testing.assert_allclose(srcgrad.hvp(f)(W, X, v), (g(W + eps * v, X) - g(W - eps * v, X)) / (2 * eps),
                               rtol=1e-6, atol=1e-8)


def test_a_second_derivative_of_a_function_calling_value_and_grad_is_refused_by_name():
    with pytest.raises(srcgrad.UnsupportedSyntaxError) as refused:
        srcgrad.hvp(value_and_gradient)(W, X, W)
    message = str(refused.value)
    assert f"{__file__}:{value_and_gradient.__code__.co_firstlineno}:" in message.splitlines()[0]
    assert "`value_and_d_loss`" in message and "pullback" in message


# ---- a gradient penalty with respect to a model's parameters -----------------------------
# (the pullback's adjoint of an object argument came back laid out as an object, which the
# caller took for an empty structure: zeros, or a crash where the model was also used directly)

from srcgrad import nn  # noqa: E402


class _Critic:  # a plain class of the user's holding parameters
    def __init__(self, w):
        self.w = w

    def __call__(self, x):
        return np.tanh(x @ self.w)


def _critic_sum(x, critic):
    return np.sum(np.tanh(critic(x)))


_d_critic_dx = srcgrad.grad(_critic_sum)  # d/dx, the critic a parameter it does not differentiate
_d_critic_dmodel = srcgrad.grad(_critic_sum, wrt=1)  # d/d(critic)
_value_and_d_critic_dx = srcgrad.value_and_grad(_critic_sum)


def _gradient_penalty(critic, x):
    return np.sum(_d_critic_dx(x, critic) ** 2)


def _wgan_gp(critic, x):  # the critic used directly too
    return np.sum(critic(x)) + 10.0 * (np.sqrt(np.sum(_d_critic_dx(x, critic) ** 2)) - 1.0) ** 2


def _penalty_on_the_models_gradient(critic, x):
    g = _d_critic_dmodel(x, critic)
    return np.sum(g.weight ** 2) if hasattr(g, "weight") else np.sum(g.w ** 2)


def _penalty_with_value(critic, x):
    value, g = _value_and_d_critic_dx(x, critic)
    return value + np.sum(g ** 2)


@pytest.mark.parametrize("loss", [_gradient_penalty, _wgan_gp, _penalty_on_the_models_gradient, _penalty_with_value])
@pytest.mark.parametrize("make", [lambda dtype: nn.Linear(3, 2, dtype=dtype),
                                  lambda dtype: _Critic(RNG.normal(size=(3, 2)).astype(dtype))])
def test_a_gradient_penalty_with_respect_to_a_models_parameters(loss, make):
    critic, x = make(np.float64), np.linspace(-1, 1, 6).reshape(2, 3)
    check_grads(loss, (critic, x), wrt=0)
    check_grads(loss, (critic, x), wrt=1)


def test_a_gradient_penalty_with_respect_to_a_model_in_float32():
    critic, x = nn.Linear(3, 2, dtype=np.float32), np.linspace(-1, 1, 6).reshape(2, 3).astype(np.float32)
    g = srcgrad.grad(_wgan_gp)(critic, x)
    assert g.weight.dtype == np.float32
    g64 = srcgrad.grad(_wgan_gp)(critic.double(), x.astype(np.float64))
    np.testing.assert_allclose(g.weight, g64.weight, rtol=1e-3, atol=1e-4)
