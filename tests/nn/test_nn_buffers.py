"""Buffers (``register_buffer``): state that is not trained.  Batch normalisation's
running statistics against PyTorch's, step by step (momentum, the cumulative
average, the unbiased variance, ``num_batches_tracked``), updated during the
differentiated forward as bookkeeping; ``train()``/``eval()``; buffers out of
``parameters()``, gradients and optimizers, in ``state_dict`` and ``buffers()``."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad import nn, optim
from srcgrad.nn import functional as F
from srcgrad.testing import check_grads

rng = np.random.default_rng(31)


def weighted(model, x, bar):
    return np.sum(model(x) * bar)


BATCHNORMS = {
    "1d": (nn.BatchNorm1d, "BatchNorm1d", {}, (6, 3)),
    "1d-sequence": (nn.BatchNorm1d, "BatchNorm1d", {"momentum": 0.3}, (4, 3, 5)),
    "2d": (nn.BatchNorm2d, "BatchNorm2d", {}, (3, 2, 4, 5)),
    "2d-cumulative": (nn.BatchNorm2d, "BatchNorm2d", {"momentum": None}, (2, 3, 3, 3)),
    "2d-no-affine": (nn.BatchNorm2d, "BatchNorm2d", {"affine": False, "eps": 1e-3}, (2, 2, 3, 4)),
}


@pytest.mark.parametrize("name", BATCHNORMS)
def test_batchnorm_training_steps_match_pytorch(name):
    """Three differentiated training steps: each step's output, input and parameter
    gradients, and the running statistics after it, as PyTorch's."""
    torch = pytest.importorskip("torch")
    ours_cls, theirs_name, kwargs, shape = BATCHNORMS[name]
    theirs = getattr(torch.nn, theirs_name)(shape[1], **kwargs).double()
    ours = ours_cls(shape[1], **kwargs)
    if ours.weight is not None:
        with torch.no_grad():
            theirs.weight.uniform_(0.5, 1.5)
            theirs.bias.uniform_(-0.5, 0.5)
    ours.load_state_dict(theirs.state_dict())
    for step in range(3):
        x = rng.standard_normal(shape) * (step + 1) + step
        bar = rng.standard_normal(shape)
        g_model, g_x = srcgrad.grad(weighted, wrt=(0, 1))(ours, x, bar)
        xt = torch.tensor(x, requires_grad=True)
        out = theirs(xt)
        (out * torch.tensor(bar)).sum().backward()
        np.testing.assert_allclose(g_x, xt.grad.numpy(), rtol=1e-7, atol=1e-10)
        if ours.weight is not None:
            np.testing.assert_allclose(g_model.weight, theirs.weight.grad.numpy(), rtol=1e-7, atol=1e-10)
            np.testing.assert_allclose(g_model.bias, theirs.bias.grad.numpy(), rtol=1e-7, atol=1e-10)
            theirs.zero_grad()
        assert g_model.running_mean is None and g_model.running_var is None
        for key, value in theirs.state_dict().items():
            np.testing.assert_allclose(ours.state_dict()[key], value.numpy(), rtol=1e-12, err_msg=key)
    assert int(ours.num_batches_tracked) == 3
    ours.eval()
    theirs.eval()
    x = rng.standard_normal(shape)
    np.testing.assert_allclose(ours(x), theirs(torch.tensor(x)).detach().numpy(), rtol=1e-10, atol=1e-12)
    before = ours.state_dict()
    g_model, g_x = srcgrad.grad(weighted, wrt=(0, 1))(ours, x, np.ones(shape))
    xt = torch.tensor(x, requires_grad=True)
    theirs(xt).sum().backward()
    np.testing.assert_allclose(g_x, xt.grad.numpy(), rtol=1e-10)
    for key, value in ours.state_dict().items():  # eval: nothing updated
        np.testing.assert_array_equal(value, before[key])


def test_without_running_statistics_eval_uses_the_batch():
    layer = nn.BatchNorm1d(3, track_running_stats=False)
    x = rng.standard_normal((5, 3))
    assert layer.running_mean is None and layer.buffers() == [] and "running_mean" not in layer.state_dict()
    np.testing.assert_allclose(layer.eval()(x), layer.train()(x))
    check_grads(lambda m, x: np.sum(np.sin(m(x))), (layer.eval(), x), wrt=(0, 1))


def test_eval_gradient_uses_the_running_statistics():
    layer = nn.BatchNorm2d(2)
    layer.running_mean[...] = [0.5, -1.0]
    layer.running_var[...] = [2.0, 0.25]
    layer.eval()
    check_grads(weighted, (layer, rng.standard_normal((2, 2, 3, 3)), rng.standard_normal((2, 2, 3, 3))), wrt=(0, 1))


class Residual(nn.Module):
    """A BatchNorm applied three times in a loop (its statistics updated each time)."""

    def __init__(self):
        self.linear = nn.Linear(4, 4)
        self.norm = nn.BatchNorm1d(4)

    def forward(self, x):
        for _ in range(3):
            x = x + 0.5 * np.tanh(self.norm(self.linear(x)))
        return x


def sine_loss(model, x):
    return np.sum(np.sin(model(x)) ** 2)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_batchnorm_in_a_loop_updates_each_time_and_differentiates(dtype):
    model = Residual().to(dtype)
    x = rng.standard_normal((6, 4)).astype(dtype)
    g = srcgrad.grad(sine_loss)(model, x)
    assert int(model.norm.num_batches_tracked) == 3
    assert model.norm.running_mean.dtype == dtype and g.norm.weight.dtype == dtype
    assert g.norm.running_mean is None
    if dtype == np.float64:
        check_grads(sine_loss, (model, x), wrt=(0, 1))
        check_grads(sine_loss, (model.eval(), x), wrt=(0, 1))


class Scaled(nn.Module):
    """A custom module with a buffer of its own (a fixed scale) and a parameter."""

    def __init__(self):
        self.weight = np.ones(3)
        self.register_buffer("scale", np.array([1.0, 2.0, 3.0]))
        self.register_buffer("average", np.zeros(3), persistent=False)

    def forward(self, x):
        y = x * self.weight * self.scale
        self.average = 0.5 * self.average + 0.5 * np.mean(srcgrad.stop_gradient(y), axis=0)
        return y


def test_buffers_are_not_parameters():
    model = nn.Sequential(nn.Linear(3, 3), Scaled(), nn.BatchNorm1d(3))
    names = [name for name, _ in model.named_parameters()]
    assert names == ["0.weight", "0.bias", "1.weight", "2.weight", "2.bias"]
    assert [name for name, _ in model.named_buffers()] == [
        "1.scale", "1.average", "2.running_mean", "2.running_var", "2.num_batches_tracked"]
    assert "1.scale" in model.state_dict() and "1.average" not in model.state_dict()
    x = rng.standard_normal((4, 3))
    g = srcgrad.grad(sine_loss)(model, x)
    assert g[1].scale is None and g[2].running_var is None and g[1].weight.shape == (3,)
    assert model[1].average.any() and g[1].average is None
    scale = model[1].scale.copy()
    opt = optim.AdamW(model, lr=0.1, weight_decay=0.5)
    opt.step(g)
    np.testing.assert_array_equal(model[1].scale, scale)  # not stepped (nor decayed)
    assert "1.scale" not in [n for n, _ in model.named_parameters()]
    check_grads(sine_loss, (model, x), wrt=(0, 1))


def frozen_batchnorm_loss(model, x):
    return np.sum(model(x) ** 2)


def test_statistics_of_values_not_differentiated_are_stored():
    """A frozen convolution before the BatchNorm: the batch statistics do not depend on
    anything differentiated, and are stored all the same."""
    model = nn.Sequential(nn.Conv2d(1, 2, 3), nn.BatchNorm2d(2), nn.Flatten(), nn.Linear(16, 1))
    model[0].requires_grad_(False)
    model[1].requires_grad_(False)
    g = srcgrad.grad(frozen_batchnorm_loss)(model, rng.standard_normal((3, 1, 4, 6)))
    assert g[1].weight is None and g[1].running_mean is None and g[3].weight.shape == (1, 16)
    assert int(model[1].num_batches_tracked) == 1 and model[1].running_mean.any()


def test_train_and_eval_switch_dropout_and_batchnorm():
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.Dropout(0.5), nn.Dropout2d(0.5))
    assert all(m.training for m in model.modules())
    model.eval()
    assert not any(m.training for m in model.modules())
    x = rng.standard_normal((8, 4))
    np.testing.assert_array_equal(model[2](x), x)
    model.train()
    assert model[1].training and np.any(model[2](x) == 0)


def test_dropout2d_drops_whole_channels():
    layer = nn.Dropout2d(0.5, rng=np.random.default_rng(4))
    x = np.ones((3, 5, 2, 2))
    y = layer(x)
    per_channel = y.reshape(3, 5, 4)
    assert np.all((per_channel == 0).all(-1) | (per_channel == 2).all(-1))
    assert (per_channel == 0).any()


def test_register_buffer_refuses_a_parameters_name():
    model = Scaled()
    with pytest.raises(KeyError, match="weight"):
        model.register_buffer("weight", np.zeros(3))


def functional_dropout(x, rng):
    return np.sum(F.dropout(x, 0.25, training=True, rng=rng) * 3.0)


def test_functional_dropout_gradient_is_its_mask():
    x = np.ones((5, 4))
    g = srcgrad.grad(functional_dropout)(x, np.random.default_rng(9))
    keep = np.random.default_rng(9).random(x.shape) >= 0.25
    np.testing.assert_allclose(g, np.where(keep, 3.0 / 0.75, 0.0))
