"""A callee given a literal (`simulate(x, ax=None)`, `pad(X, "same")`, a default left as it
is) is inlined with the literal in place, and the branches it decides are folded: the
branch the call never takes is neither inlined nor differentiated, so plotting code, a
`raise` for a bad mode, or a cache the other mode keeps do not stop it.  Gradients
against central finite differences, in a loop, a helper, a method and float32."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from tests.finite_differences import check_gradient


class Axes:
    def __init__(self):
        self.shown = []

    def matshow(self, m):
        self.shown.append(m)


def pad(x, mode):
    if mode == "same":
        return np.concatenate([x[:1], x, x[-1:]])
    elif mode == "valid":
        return x
    raise ValueError(f"unknown mode {mode}")


def plot(ax, m):
    if ax:
        ax.matshow(m)
        ax.last = m


def simulate(x, steps, ax=None, verbose=False):
    for t in range(steps):
        if ax is not None:
            ax.matshow(x)
        plot(ax, x)
        x = np.tanh(1.3 * x) + 0.1 * x
        if verbose and t > 0:
            print("step", t)
    return x


def dead_plotting_branch(x):
    return np.sum(simulate(x, 3) ** 2)


def string_modes(x):
    return np.sum(pad(x, "same") ** 2) + np.sum(np.sin(pad(x, "valid")))


def literal_in_a_loop(x):
    total = 0.0
    for k in range(2):
        total = total + np.sum(simulate(x * (k + 1.0), 2, None) * pad(x, "valid"))
    return total


def _helper(x, training=False):
    if training:
        raise RuntimeError("not in this call")
    if not training:
        return np.cos(x) * 2.0
    return x


def literal_default_in_a_helper(x):
    return np.sum(_helper(x) * _helper(x, False))


def assigned_parameter(x, scale=2.0):
    scale = scale * 1.5  # (assigned in the function: kept as a local, not folded)
    return x * scale


def assigned_in_the_callee(x):
    return np.sum(assigned_parameter(x) ** 2)


class Layer:
    def __init__(self, w):
        self.w = w

    def forward(self, x, retain_derived=True):
        out = np.tanh(x * self.w)
        if retain_derived:
            self.derived = out  # (a cache the other mode keeps)
        return out

    def loss(self, x):
        return np.sum(self.forward(x, retain_derived=False) ** 2)


FUNCTIONS = [dead_plotting_branch, string_modes, literal_in_a_loop, literal_default_in_a_helper,
             assigned_in_the_callee]


@pytest.mark.parametrize("f", FUNCTIONS)
def test_literal_arguments_fold_the_branches_they_decide(f):
    check_gradient(f, np.array([0.4, -1.3, 0.7]))


def test_a_method_given_a_literal():
    layer, x = Layer(np.array([0.5, -0.7, 1.1])), np.array([0.3, 1.1, -0.4])
    check_gradient(lambda w, x: Layer(w).loss(x), layer.w, x)
    srcgrad.grad(lambda layer, x: layer.loss(x))(layer, x)
    assert not hasattr(layer, "derived")


@pytest.mark.parametrize("f", [dead_plotting_branch, string_modes])
def test_in_float32(f):
    x = np.array([0.4, -1.3, 0.7], np.float32)
    g = srcgrad.grad(f)(x)
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, srcgrad.grad(f)(x.astype(np.float64)), rtol=1e-5)


def test_the_branch_taken_still_runs():
    ax = Axes()

    def f(x):
        return np.sum(simulate(x, 2, ax))
    x = np.array([0.4, -1.3])
    value, _ = srcgrad.value_and_grad(lambda x: np.sum(simulate(x, 2, None)))(x)
    assert np.isclose(value, f(x)) and len(ax.shown) == 4


def test_a_raise_a_literal_decides_still_raises():
    def f(x):
        return np.sum(pad(x, "reflect"))
    with pytest.raises(ValueError, match="unknown mode reflect"):
        srcgrad.grad(f)(np.ones(3))


def test_the_dead_branch_is_not_in_the_generated_code():
    text = srcgrad.source(srcgrad.grad(dead_plotting_branch), np.ones(3))
    assert "matshow" not in text and "print" not in text
