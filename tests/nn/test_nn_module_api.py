"""The Module API PyTorch users reach for: named parameters, buffers and sub-modules
under PyTorch's names, apply, freezing with requires_grad_, state_dict and loading
PyTorch's weights (a torch state_dict or an .npz file), to(dtype), one dropout
generator per model, and clear errors for PyTorch's zero_grad/step habits."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad import nn, optim

rng = np.random.default_rng(41)


class Net(nn.Module):
    """Sub-modules in an attribute, a list (ModuleList) and a dict (ModuleDict)."""

    def __init__(self):
        self.stem = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2), nn.ReLU())
        self.blocks = [nn.Linear(8, 8), nn.Linear(8, 8)]
        self.heads = {"a": nn.Linear(8, 3), "b": nn.Linear(8, 1)}
        self.pool = nn.MaxPool2d(2)

    def forward(self, x):
        h = np.reshape(self.pool(self.stem(x)), (x.shape[0], -1))
        for block in self.blocks:
            h = np.tanh(block(h))
        return self.heads["a"](h), self.heads["b"](h)


def net_loss(model, x):
    a, b = model(x)
    return np.sum(a ** 2) + np.sum(np.sin(b))


def torch_net(torch):
    tnn = torch.nn

    class TorchNet(tnn.Module):
        def __init__(self):
            super().__init__()
            self.stem = tnn.Sequential(tnn.Conv2d(1, 2, 3, padding=1), tnn.BatchNorm2d(2), tnn.ReLU())
            self.blocks = tnn.ModuleList([tnn.Linear(8, 8), tnn.Linear(8, 8)])
            self.heads = tnn.ModuleDict({"a": tnn.Linear(8, 3), "b": tnn.Linear(8, 1)})
            self.pool = tnn.MaxPool2d(2)

        def forward(self, x):
            h = self.pool(self.stem(x)).reshape(x.shape[0], -1)
            for block in self.blocks:
                h = torch.tanh(block(h))
            return self.heads["a"](h), self.heads["b"](h)

    return TorchNet().double()


def test_names_match_pytorchs_for_sequential_lists_and_dicts():
    torch = pytest.importorskip("torch")
    ours, theirs = Net(), torch_net(torch)
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert [n for n, _ in ours.named_buffers()] == [n for n, _ in theirs.named_buffers()]
    assert list(ours.state_dict()) == list(theirs.state_dict())
    # (a plain list or dict stands for a ModuleList or ModuleDict, which is no module here)
    containers = (torch.nn.ModuleList, torch.nn.ModuleDict)
    assert [n for n, _ in ours.named_modules()] == [n for n, m in theirs.named_modules()
                                                    if not isinstance(m, containers)]
    assert [n for n, _ in ours.named_children()] == ["stem", "blocks.0", "blocks.1", "heads.a", "heads.b", "pool"]


def test_torch_weights_load_and_the_model_agrees(tmp_path):
    torch = pytest.importorskip("torch")
    theirs = torch_net(torch)
    theirs.train()
    theirs(torch.randn(4, 1, 4, 4, dtype=torch.float64))  # running statistics away from their start
    theirs.eval()
    ours = Net()
    ours.load_state_dict(theirs.state_dict())
    ours.eval()
    x = rng.standard_normal((3, 1, 4, 4))
    for got, want in zip(ours(x), theirs(torch.tensor(x))):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=1e-10, atol=1e-12)
    assert int(ours.stem[1].num_batches_tracked) == 1
    path = tmp_path / "weights.npz"  # an .npz written from PyTorch's state_dict
    np.savez(path, **{k: v.numpy() for k, v in theirs.state_dict().items()})
    fresh = Net()
    fresh.load_state_dict(path)
    for key, value in ours.state_dict().items():
        np.testing.assert_array_equal(fresh.state_dict()[key], value)


def test_load_state_dict_errors_and_strict():
    model = Net()
    state = model.state_dict()
    with pytest.raises(KeyError, match="missing"):
        Net().load_state_dict({k: v for k, v in state.items() if k != "pool.weight" and k != "heads.a.bias"})
    with pytest.raises(KeyError, match="unexpected"):
        Net().load_state_dict({**state, "extra": np.zeros(1)})
    with pytest.raises(ValueError, match="blocks.0.weight"):
        Net().load_state_dict({**state, "blocks.0.weight": np.zeros((2, 2))})
    other = Net()
    other.load_state_dict({"blocks.1.bias": np.full(8, 3.0)}, strict=False)
    np.testing.assert_array_equal(other.blocks[1].bias, 3.0)


def test_children_modules_and_apply():
    model = Net()
    assert model.children()[0] is model.stem and len(model.modules()) == 10
    seen = []
    model.apply(lambda m: seen.append(type(m).__name__))
    assert seen[:4] == ["Conv2d", "BatchNorm2d", "ReLU", "Sequential"] and seen[-1] == "Net"

    def zero_biases(m):
        if isinstance(m, nn.Linear):
            m.bias[...] = 0

    model.apply(zero_biases)
    assert not model.heads["b"].bias.any()


def test_frozen_parameters_get_no_gradient_and_no_step():
    model = Net()
    x = rng.standard_normal((2, 1, 4, 4))
    opt = optim.SGD(model, lr=0.1, momentum=0.9, weight_decay=0.1)  # made before freezing
    model.stem.requires_grad_(False)
    frozen = {name: p.copy() for name, p in model.named_parameters() if name.startswith("stem")}
    assert len(frozen) == 4 and len(model.parameters()) == 12  # frozen ones are still parameters
    g = srcgrad.grad(net_loss)(model, x)
    assert g.stem[0].weight is None and g.stem[1].bias is None
    assert g.blocks[0].weight.shape == (8, 8)
    before = model.blocks[0].weight.copy()
    for _ in range(2):
        opt.step(srcgrad.grad(net_loss)(model, x))
    for name, p in model.named_parameters():
        if name in frozen:
            np.testing.assert_array_equal(p, frozen[name], err_msg=name)
    assert not np.array_equal(model.blocks[0].weight, before)
    model.requires_grad_(True)
    g = srcgrad.grad(net_loss)(model, x)
    assert g.stem[0].weight.shape == (2, 1, 3, 3) and np.abs(g.stem[0].weight).sum() > 0
    optim.Adam(model.parameters(), lr=0.1).step(g)


def test_to_a_dtype_casts_parameters_and_float_buffers():
    model = Net().to(np.float32)
    assert all(p.dtype == np.float32 for p in model.parameters())
    assert model.stem[1].running_var.dtype == np.float32
    assert model.stem[1].num_batches_tracked.dtype == np.int64
    a, _ = model(rng.standard_normal((2, 1, 4, 4)).astype(np.float32))
    assert a.dtype == np.float32
    assert model.double().blocks[0].weight.dtype == np.float64
    with pytest.raises(TypeError, match="floating-point"):
        model.to(np.int32)


def dropped(model, x):
    return np.sum(model(x) ** 2)


def test_one_dropout_generator_per_model():
    model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5), nn.Linear(4, 4), nn.Dropout(0.5))
    model.set_rng(7)
    assert model[1].rng is model[3].rng
    x = np.ones((3, 4))
    first = srcgrad.grad(dropped, wrt=1)(model, x)
    model.set_rng(7)
    np.testing.assert_array_equal(srcgrad.grad(dropped, wrt=1)(model, x), first)
    nn.init.manual_seed(3)  # layers made without a generator share nn.init's, reseeded in place
    a = nn.Dropout(0.5)
    masks = a(np.ones(100))
    nn.init.manual_seed(3)
    np.testing.assert_array_equal(a(np.ones(100)), masks)


def test_pytorch_habits_get_clear_errors():
    model = nn.Linear(2, 2)
    opt = optim.Adam(model.parameters())
    with pytest.raises(TypeError, match=r"zero_grad\(\).*opt.step\(grads\)"):
        opt.zero_grad()
    with pytest.raises(TypeError, match=r"step\(\) needs the gradient"):
        opt.step()
    with pytest.raises(TypeError, match="nothing to zero"):
        model.zero_grad()


def test_repr_lists_children():
    text = repr(Net())
    assert "(stem): Sequential(" in text and "(blocks.0): Linear(in_features=8" in text
