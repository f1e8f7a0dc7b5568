"""srcgrad.nn.utils.clip_grad_norm_ / clip_grad_value_ on gradients held as values (what
srcgrad.grad returns): worked by hand, on a model's gradient, errors; and against
torch.nn.utils (the oracle, skipped without it)."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad import nn, optim
from srcgrad.nn.utils import clip_grad_norm_, clip_grad_value_


def test_clip_grad_norm_by_hand():
    g = {"a": np.array([3.0, 0.0]), "b": np.array([[4.0]])}
    total = clip_grad_norm_(g, max_norm=1.0)
    assert total == 5.0 and isinstance(total, np.float64)
    np.testing.assert_allclose(g["a"], [3 / (5 + 1e-6), 0], rtol=1e-15)
    np.testing.assert_allclose(g["b"], [[4 / (5 + 1e-6)]], rtol=1e-15)


def test_a_gradient_within_the_bound_is_unchanged():
    g = [np.array([0.3, -0.4])]
    assert clip_grad_norm_(g, max_norm=1.0) == pytest.approx(0.5)
    np.testing.assert_array_equal(g[0], [0.3, -0.4])


@pytest.mark.parametrize("norm_type, total", [(1, 9.0), (float("inf"), 4.0), (3.0, (27 + 8 + 64) ** (1 / 3))])
def test_other_norms(norm_type, total):
    g = {"a": np.array([3.0, -2.0]), "b": np.array(-4.0)}
    assert clip_grad_norm_(g, max_norm=2.0, norm_type=norm_type) == pytest.approx(total, rel=1e-14)
    np.testing.assert_allclose(g["b"], -4.0 * 2.0 / (total + 1e-6), rtol=1e-14)


def test_float32_gradient_stays_float32():
    g = {"w": np.full(4, 2.0, dtype=np.float32)}
    total = clip_grad_norm_(g, max_norm=1.0)
    assert isinstance(total, np.float32) and total == 4.0
    assert g["w"].dtype == np.float32
    np.testing.assert_allclose(g["w"], 0.5, rtol=1e-6)


def test_one_array_held_twice_is_counted_twice_and_scaled_once():
    shared = np.array([1.0, 1.0])
    total = clip_grad_norm_({"a": shared, "b": shared}, max_norm=1.0)
    assert total == 2.0
    np.testing.assert_allclose(shared, 1 / (2 + 1e-6), rtol=1e-15)


def test_nonfinite_total():
    g = {"w": np.array([np.inf, 1.0])}
    with pytest.raises(RuntimeError, match="not be clipped|cannot be clipped"):
        clip_grad_norm_(g, 1.0, error_if_nonfinite=True)
    np.testing.assert_array_equal(g["w"], [np.inf, 1.0])   # (raised before changing it)
    g = {"w": np.array([np.nan, 1.0])}
    assert np.isnan(clip_grad_norm_(g, 1.0))
    assert np.isnan(g["w"]).all()                        # scaled by nan, as PyTorch


def test_clip_grad_value_by_hand():
    g = {"a": np.array([-3.0, 0.5, 2.0]), "b": [np.array([[1.5]])]}
    assert clip_grad_value_(g, 1.0) is None
    np.testing.assert_array_equal(g["a"], [-1.0, 0.5, 1.0])
    np.testing.assert_array_equal(g["b"][0], [[1.0]])
    with pytest.raises(ValueError, match="clip_value"):
        clip_grad_value_(g, -1.0)


class Net(nn.Module):
    def __init__(self):
        rng = np.random.default_rng(0)
        self.a, self.b = nn.Linear(3, 4, rng=rng), nn.Linear(4, 1, rng=rng)
        self.scale = 2.0                                 # a float field: not a parameter

    def forward(self, x):
        return self.b(np.tanh(self.a(x))) * self.scale


def loss(model, x, y):
    return nn.mse_loss(model(x), y)


def test_a_models_gradient_clipped_then_stepped():
    model = Net()
    x, y = np.ones((5, 3)), np.full((5, 1), 10.0)
    g = srcgrad.grad(loss)(model, x, y)
    arrays = [g.a.weight, g.a.bias, g.b.weight, g.b.bias]
    expected = np.sqrt(sum(np.sum(a**2) for a in arrays))
    before = [a.copy() for a in arrays]
    total = clip_grad_norm_(g, max_norm=0.1)
    assert total == pytest.approx(expected, rel=1e-14) and total > 0.1
    for a, b in zip(arrays, before):
        np.testing.assert_allclose(a, b * 0.1 / (expected + 1e-6), rtol=1e-14)
    assert np.sqrt(sum(np.sum(a**2) for a in arrays)) == pytest.approx(0.1, rel=1e-5)
    optim.SGD(model, lr=0.1).step(g)


def test_a_frozen_layers_gradient_none_is_left_out():
    model = Net()
    model.a.requires_grad_(False)
    g = srcgrad.grad(loss)(model, np.ones((5, 3)), np.full((5, 1), 10.0))
    assert g.a.weight is None
    expected = np.sqrt(np.sum(g.b.weight**2) + np.sum(g.b.bias**2))
    assert clip_grad_norm_(g, max_norm=1e-3) == pytest.approx(expected, rel=1e-14)


def test_errors_say_what_to_pass():
    model = Net()
    with pytest.raises(TypeError, match=r"no \.grad.*pass the gradient itself"):
        clip_grad_norm_(model.parameters(), 1.0)
    with pytest.raises(TypeError, match=r"'t' is a float.*0-d array"):
        clip_grad_norm_({"w": np.ones(2), "t": 0.5}, 1.0)
    frozen = np.ones(2)
    frozen.flags.writeable = False
    with pytest.raises(ValueError, match="'w' is a read-only"):
        clip_grad_value_({"w": frozen}, 1.0)


# ---- against torch.nn.utils -----------------------------------------------------------------


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf"), 3.0, 0.5])
@pytest.mark.parametrize("max_norm", [0.5, 100.0])
def test_clip_grad_norm_matches_torch(norm_type, max_norm):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    grads = [rng.standard_normal(s) for s in [(3, 4), (4,), (2, 2, 2), ()]]
    params = [torch.zeros(g.shape, dtype=torch.float64, requires_grad=True) for g in grads]
    for p, g in zip(params, grads):
        p.grad = torch.tensor(g)
    ours = [g.copy() for g in grads]
    total = clip_grad_norm_(ours, max_norm, norm_type=norm_type)
    expected = torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type)
    assert total == pytest.approx(float(expected), rel=1e-13)
    for ours_g, p in zip(ours, params):
        np.testing.assert_allclose(ours_g, p.grad.numpy(), rtol=1e-13, atol=1e-15)


def test_clip_grad_value_matches_torch():
    torch = pytest.importorskip("torch")
    g = np.random.default_rng(2).standard_normal((4, 5)) * 3
    p = torch.zeros(4, 5, dtype=torch.float64, requires_grad=True)
    p.grad = torch.tensor(g)
    torch.nn.utils.clip_grad_value_([p], 1.25)
    clip_grad_value_([g], 1.25)
    np.testing.assert_array_equal(g, p.grad.numpy())
