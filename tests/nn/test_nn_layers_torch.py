"""Layers and functionals against PyTorch (the oracle, skipped without it): the same
weights loaded into both (``load_state_dict`` of the torch layer's ``state_dict``),
outputs and gradients of every parameter and of the input compared in float64 at
1e-7; float32 and a layer used inside a loop against finite differences."""
from __future__ import annotations

import math

import numpy as np
import pytest

import srcgrad
from srcgrad import nn
from srcgrad.nn import functional as F
from srcgrad.testing import check_grads

torch = pytest.importorskip("torch")
from tests.nn.torch_oracle import check_against_torch  # noqa: E402

rng = np.random.default_rng(23)
tnn = torch.nn

LAYERS = {
    "Linear": (lambda: nn.Linear(3, 4), lambda: tnn.Linear(3, 4), (5, 3)),
    "Linear-no-bias": (lambda: nn.Linear(3, 2, bias=False), lambda: tnn.Linear(3, 2, bias=False), (4, 3)),
    "LayerNorm": (lambda: nn.LayerNorm(6), lambda: tnn.LayerNorm(6), (3, 4, 6)),
    "LayerNorm-2d": (lambda: nn.LayerNorm((3, 4), eps=1e-3), lambda: tnn.LayerNorm((3, 4), eps=1e-3), (2, 3, 4)),
    "LayerNorm-no-affine": (lambda: nn.LayerNorm(5, elementwise_affine=False),
                            lambda: tnn.LayerNorm(5, elementwise_affine=False), (4, 5)),
    "LeakyReLU": (lambda: nn.LeakyReLU(0.2), lambda: tnn.LeakyReLU(0.2), (4, 5)),
    "ELU": (lambda: nn.ELU(0.7), lambda: tnn.ELU(0.7), (4, 5)),
    "GELU": (lambda: nn.GELU(), lambda: tnn.GELU(), (4, 5)),
    "GELU-tanh": (lambda: nn.GELU("tanh"), lambda: tnn.GELU(approximate="tanh"), (4, 5)),
    "Softmax-dim1": (lambda: nn.Softmax(dim=1), lambda: tnn.Softmax(dim=1), (3, 4, 5)),
    "LogSoftmax": (lambda: nn.LogSoftmax(dim=-1), lambda: tnn.LogSoftmax(dim=-1), (3, 6)),
    "MaxPool2d-padding": (lambda: nn.MaxPool2d(3, 2, padding=1), lambda: tnn.MaxPool2d(3, 2, padding=1),
                          (2, 3, 7, 6)),
    "MaxPool2d-2x3-padding": (lambda: nn.MaxPool2d((2, 3), (1, 2), padding=(1, 1)),
                              lambda: tnn.MaxPool2d((2, 3), (1, 2), padding=(1, 1)), (1, 2, 5, 6)),
    "AvgPool2d": (lambda: nn.AvgPool2d(2), lambda: tnn.AvgPool2d(2), (2, 3, 5, 4)),
    "AvgPool2d-padding": (lambda: nn.AvgPool2d(3, 2, padding=1), lambda: tnn.AvgPool2d(3, 2, padding=1),
                          (2, 2, 7, 6)),
    "AvgPool2d-padding-not-counted": (lambda: nn.AvgPool2d(3, 2, padding=1, count_include_pad=False),
                                      lambda: tnn.AvgPool2d(3, 2, padding=1, count_include_pad=False),
                                      (2, 2, 7, 6)),
    "AdaptiveAvgPool2d-divides": (lambda: nn.AdaptiveAvgPool2d(2), lambda: tnn.AdaptiveAvgPool2d(2),
                                  (2, 3, 4, 6)),
    "AdaptiveAvgPool2d-overlapping": (lambda: nn.AdaptiveAvgPool2d((3, 2)), lambda: tnn.AdaptiveAvgPool2d((3, 2)),
                                      (2, 2, 5, 7)),
    "AdaptiveAvgPool2d-1": (lambda: nn.AdaptiveAvgPool2d(1), lambda: tnn.AdaptiveAvgPool2d(1), (2, 3, 5, 5)),
    "Conv1d": (lambda: nn.Conv1d(3, 4, 3), lambda: tnn.Conv1d(3, 4, 3), (2, 3, 8)),
    "Conv1d-stride-padding": (lambda: nn.Conv1d(2, 3, 4, stride=2, padding=2),
                              lambda: tnn.Conv1d(2, 3, 4, stride=2, padding=2), (3, 2, 9)),
    "Conv1d-no-bias": (lambda: nn.Conv1d(2, 2, 1, bias=False), lambda: tnn.Conv1d(2, 2, 1, bias=False),
                       (2, 2, 5)),
    "Conv2d": (lambda: nn.Conv2d(2, 3, 3, stride=2, padding=1), lambda: tnn.Conv2d(2, 3, 3, stride=2, padding=1),
               (2, 2, 6, 5)),
    "Conv2d-pairs": (lambda: nn.Conv2d(2, 3, (3, 2), stride=(2, 1), padding=(1, 2), bias=False),
                     lambda: tnn.Conv2d(2, 3, (3, 2), stride=(2, 1), padding=(1, 2), bias=False),
                     (2, 2, 7, 5)),
    "Conv2d-dilation": (lambda: nn.Conv2d(2, 3, 3, stride=2, padding=2, dilation=(2, 1)),
                        lambda: tnn.Conv2d(2, 3, 3, stride=2, padding=2, dilation=(2, 1)), (2, 2, 9, 7)),
    "Conv2d-groups": (lambda: nn.Conv2d(4, 6, 3, padding=1, groups=2),
                      lambda: tnn.Conv2d(4, 6, 3, padding=1, groups=2), (2, 4, 5, 5)),
    "Conv2d-depthwise": (lambda: nn.Conv2d(3, 3, 2, groups=3), lambda: tnn.Conv2d(3, 3, 2, groups=3),
                         (2, 3, 4, 5)),
    "Conv2d-same-even-kernel": (lambda: nn.Conv2d(2, 3, (4, 3), padding="same", dilation=(1, 2)),
                                lambda: tnn.Conv2d(2, 3, (4, 3), padding="same", dilation=(1, 2)),
                                (2, 2, 6, 7)),
    "Conv2d-valid": (lambda: nn.Conv2d(2, 2, 3, padding="valid"),
                     lambda: tnn.Conv2d(2, 2, 3, padding="valid"), (1, 2, 5, 5)),
    # (after a layer: torch refuses an in-place activation of a leaf it differentiates)
    "ReLU-inplace": (lambda: nn.Sequential(nn.Linear(4, 3), nn.ReLU(True)),
                     lambda: tnn.Sequential(tnn.Linear(4, 3), tnn.ReLU(True)), (3, 4)),
    "LeakyReLU-inplace": (lambda: nn.Sequential(nn.Linear(4, 3), nn.LeakyReLU(0.2, inplace=True)),
                          lambda: tnn.Sequential(tnn.Linear(4, 3), tnn.LeakyReLU(0.2, inplace=True)), (3, 4)),
    "Sequential": (lambda: nn.Sequential(nn.Conv2d(1, 2, 3, padding=1), nn.BatchNorm2d(2), nn.GELU(),
                                         nn.MaxPool2d(2), nn.Flatten(), nn.LayerNorm(8), nn.Linear(8, 3)).eval(),
                   lambda: tnn.Sequential(tnn.Conv2d(1, 2, 3, padding=1), tnn.BatchNorm2d(2), tnn.GELU(),
                                          tnn.MaxPool2d(2), tnn.Flatten(), tnn.LayerNorm(8),
                                          tnn.Linear(8, 3)).eval(), (3, 1, 4, 4)),
}


@pytest.mark.parametrize("name", LAYERS)
def test_layer_matches_pytorch(name):
    ours, theirs, shape = LAYERS[name]
    torch.manual_seed(0)
    torch_layer = theirs()
    layer = ours()
    with torch.no_grad():  # LayerNorm starts at ones and zeros: move them so they count
        for p in torch_layer.parameters():
            p.add_(0.1 * torch.randn(p.shape, dtype=p.dtype))
    check_against_torch(layer, torch_layer, rng.standard_normal(shape), torch)


def test_state_dict_names_are_pytorchs():
    ours = LAYERS["Sequential"][0]()
    theirs = LAYERS["Sequential"][1]()
    assert list(ours.state_dict()) == list(theirs.state_dict())


@pytest.mark.parametrize("padding_idx", [None, 1, -1])
def test_embedding_matches_pytorch(padding_idx):
    torch.manual_seed(0)
    theirs = tnn.Embedding(6, 3, padding_idx=padding_idx)
    ours = nn.Embedding(6, 3, padding_idx=padding_idx)
    if padding_idx is not None:
        assert not ours.weight[padding_idx].any()
        with torch.no_grad():  # a loaded padding row is read as it is (its gradient stays zero)
            theirs.weight[padding_idx] = 0.5
    indices = np.array([[0, 1, 5], [1, 1, 2]])
    check_against_torch(ours, theirs, indices, torch, x_grad=False)


def test_embedding_initialisation_is_standard_normal():
    weight = nn.Embedding(2000, 50, rng=np.random.default_rng(0)).weight
    assert abs(weight.mean()) < 0.01 and abs(weight.std() - 1) < 0.01


def weighted_functional(x, fn, bar):
    return np.sum(fn(x) * bar)


FUNCTIONALS = {  # (one lambda a line: srcgrad tells a lambda by its line)
    "max_pool2d": (lambda x: F.max_pool2d(x, 3, 2, 1),
                   lambda x: torch.nn.functional.max_pool2d(x, 3, 2, 1), (2, 2, 7, 7)),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 2, padding=1),
                   lambda x: torch.nn.functional.avg_pool2d(x, 2, padding=1), (2, 2, 5, 4)),
    "avg_pool2d-not-counted": (lambda x: F.avg_pool2d(x, 3, 1, 1, count_include_pad=False),
                               lambda x: torch.nn.functional.avg_pool2d(x, 3, 1, 1, count_include_pad=False),
                               (1, 2, 4, 5)),
    "softmax": (lambda x: F.softmax(x, dim=0),
                lambda x: torch.softmax(x, dim=0), (4, 3)),
    "log_softmax": (lambda x: F.log_softmax(x, dim=1),
                    lambda x: torch.log_softmax(x, dim=1), (2, 5, 3)),
    "elu": (lambda x: F.elu(x, 1.5),
            lambda x: torch.nn.functional.elu(x, 1.5), (4, 5)),
    "leaky_relu": (lambda x: F.leaky_relu(x, 0.1),
                   lambda x: torch.nn.functional.leaky_relu(x, 0.1), (4, 5)),
    "gelu": (lambda x: F.gelu(x),
             lambda x: torch.nn.functional.gelu(x), (4, 5)),
    "dropout-eval": (lambda x: F.dropout(x, 0.5, training=False),
                     lambda x: torch.nn.functional.dropout(x, 0.5, training=False), (3, 2)),
}


@pytest.mark.parametrize("name", FUNCTIONALS)
def test_functional_matches_pytorch(name):
    ours, theirs, shape = FUNCTIONALS[name]
    x = rng.standard_normal(shape)
    bar = rng.standard_normal(ours(x).shape)
    xt = torch.tensor(x, requires_grad=True)
    out = theirs(xt)
    (out * torch.tensor(bar)).sum().backward()
    np.testing.assert_allclose(ours(x), out.detach().numpy(), rtol=1e-7, atol=1e-9)
    g = srcgrad.grad(weighted_functional)(x, ours, bar)
    np.testing.assert_allclose(g, xt.grad.numpy(), rtol=1e-7, atol=1e-9)


def leaky_sum(x):
    return np.sum(F.leaky_relu(x, 0.3))


def elu_sum(x):
    return np.sum(F.elu(x, 2.0))


def test_kinks_take_pytorchs_derivative():
    """At 0 leaky_relu and elu take the negative side's slope, as PyTorch's backward does."""
    x = np.array([0.0, 1.0, -1.0])
    for ours, theirs in [(leaky_sum, lambda v: torch.nn.functional.leaky_relu(v, 0.3)),
                         (elu_sum, lambda v: torch.nn.functional.elu(v, 2.0))]:
        xt = torch.tensor(x, requires_grad=True)
        theirs(xt).sum().backward()
        np.testing.assert_allclose(srcgrad.grad(ours)(x), xt.grad.numpy(), rtol=1e-12)


def loss_of(fn, prediction, target, reduction):
    out = fn(prediction, target, reduction=reduction)
    return np.sum(out * np.arange(1.0, out.size + 1).reshape(out.shape)) if reduction == "none" else out


LOSSES = {
    "mse": (F.mse_loss, torch.nn.functional.mse_loss, "real"),
    "l1": (F.l1_loss, torch.nn.functional.l1_loss, "real"),
    "smooth_l1": (F.smooth_l1_loss, torch.nn.functional.smooth_l1_loss, "real"),
    "smooth_l1-beta": (lambda p, t, reduction: F.smooth_l1_loss(p, t, reduction, beta=0.3),
                       lambda p, t, reduction: torch.nn.functional.smooth_l1_loss(p, t, reduction=reduction,
                                                                                  beta=0.3), "real"),
    "smooth_l1-beta0": (lambda p, t, reduction: F.smooth_l1_loss(p, t, reduction, beta=0.0),
                        lambda p, t, reduction: torch.nn.functional.smooth_l1_loss(p, t, reduction=reduction,
                                                                                   beta=0.0), "real"),
    "bce": (F.binary_cross_entropy, torch.nn.functional.binary_cross_entropy, "probability"),
    "bce-weight": (lambda p, t, reduction: F.binary_cross_entropy(p, t, WEIGHT, reduction),
                   lambda p, t, reduction: torch.nn.functional.binary_cross_entropy(
                       p, t, torch.tensor(WEIGHT), reduction=reduction), "probability"),
    "bce_with_logits": (F.binary_cross_entropy_with_logits, torch.nn.functional.binary_cross_entropy_with_logits,
                        "real-target01"),
    "bce_with_logits-pos_weight": (
        lambda p, t, reduction: F.binary_cross_entropy_with_logits(p, t, WEIGHT, reduction, POS_WEIGHT),
        lambda p, t, reduction: torch.nn.functional.binary_cross_entropy_with_logits(
            p, t, torch.tensor(WEIGHT), reduction=reduction, pos_weight=torch.tensor(POS_WEIGHT)),
        "real-target01"),
    "cross_entropy": (F.cross_entropy, torch.nn.functional.cross_entropy, "labels"),
    "nll": (F.nll_loss, torch.nn.functional.nll_loss, "labels"),
}
WEIGHT = rng.uniform(0.5, 2.0, (4, 3))
LABEL_WEIGHT = rng.uniform(0.5, 2.0, 3)

CRITERIA = {  # the layers (``criterion = nn.NLLLoss()``), each with its kind of target
    "MSELoss": (lambda r: nn.MSELoss(reduction=r), lambda r: tnn.MSELoss(reduction=r), "real"),
    "L1Loss": (lambda r: nn.L1Loss(reduction=r), lambda r: tnn.L1Loss(reduction=r), "real"),
    "SmoothL1Loss": (lambda r: nn.SmoothL1Loss(reduction=r, beta=0.5),
                     lambda r: tnn.SmoothL1Loss(reduction=r, beta=0.5), "real"),
    "NLLLoss": (lambda r: nn.NLLLoss(LABEL_WEIGHT, reduction=r, ignore_index=1),
                lambda r: tnn.NLLLoss(torch.tensor(LABEL_WEIGHT), reduction=r, ignore_index=1), "labels"),
    "CrossEntropyLoss": (lambda r: nn.CrossEntropyLoss(reduction=r, label_smoothing=0.1),
                         lambda r: tnn.CrossEntropyLoss(reduction=r, label_smoothing=0.1), "labels"),
    "BCELoss": (lambda r: nn.BCELoss(WEIGHT, reduction=r),
                lambda r: tnn.BCELoss(torch.tensor(WEIGHT), reduction=r), "probability"),
    "BCEWithLogitsLoss": (lambda r: nn.BCEWithLogitsLoss(reduction=r, pos_weight=POS_WEIGHT),
                          lambda r: tnn.BCEWithLogitsLoss(reduction=r, pos_weight=torch.tensor(POS_WEIGHT)),
                          "real-target01"),
}


def criterion_of(criterion, prediction, target):
    return np.sum(criterion(prediction, target))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", CRITERIA)
def test_loss_layer_matches_pytorch(name, reduction):
    ours, theirs, kind = CRITERIA[name]
    prediction = rng.uniform(0.05, 0.95, (4, 3)) if kind == "probability" else rng.standard_normal((4, 3))
    target = rng.uniform(0, 1, (4, 3)) if kind != "real" else rng.standard_normal((4, 3))
    if kind == "labels":
        target = np.array([0, 2, 1, 2])
    pt = torch.tensor(prediction, requires_grad=True)
    out = theirs(reduction)(pt, torch.tensor(target))
    out.sum().backward()
    criterion = ours(reduction)
    np.testing.assert_allclose(criterion(prediction, target), out.detach().numpy(), rtol=1e-7, atol=1e-12)
    g = srcgrad.grad(criterion_of, wrt=1)(criterion, prediction, target)
    np.testing.assert_allclose(g, pt.grad.numpy(), rtol=1e-7, atol=1e-12)
POS_WEIGHT = rng.uniform(0.5, 3.0, 3)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("name", LOSSES)
def test_loss_matches_pytorch(name, reduction):
    ours, theirs, kind = LOSSES[name]
    prediction = rng.standard_normal((4, 3))
    if kind == "probability":
        prediction = rng.uniform(0.05, 0.95, (4, 3))
    target = rng.standard_normal((4, 3))
    if kind in ("probability", "real-target01"):
        target = rng.uniform(0, 1, (4, 3))
    if kind == "labels":
        target = np.array([0, 2, 1, 2])
    if name == "smooth_l1":
        target[0, 0] = prediction[0, 0]  # derivative 0 where they are equal
    pt = torch.tensor(prediction, requires_grad=True)
    out = theirs(pt, torch.tensor(target), reduction=reduction)
    weights = torch.arange(1.0, out.numel() + 1, dtype=torch.float64).reshape(out.shape)
    (out * weights).sum().backward() if reduction == "none" else out.backward()
    np.testing.assert_allclose(ours(prediction, target, reduction=reduction), out.detach().numpy(),
                               rtol=1e-7, atol=1e-12)
    g = srcgrad.grad(loss_of, wrt=1)(ours, prediction, target, reduction)
    np.testing.assert_allclose(g, pt.grad.numpy(), rtol=1e-7, atol=1e-12)


def test_pool_padding_beyond_half_the_kernel_is_refused():
    with pytest.raises(ValueError, match="half the kernel"):
        nn.MaxPool2d(2, padding=2)


def test_unknown_reduction_is_refused():
    with pytest.raises(ValueError, match="reduction must be"):
        F.mse_loss(np.ones(2), np.zeros(2), reduction="average")


def test_bce_clamps_the_log_as_pytorch():
    p, t = np.array([0.0, 1.0, 0.5]), np.array([1.0, 0.0, 1.0])
    expected = torch.nn.functional.binary_cross_entropy(torch.tensor(p), torch.tensor(t), reduction="none")
    with np.errstate(divide="ignore"):  # log(0), clamped
        np.testing.assert_allclose(F.binary_cross_entropy(p, t, reduction="none"), expected.numpy(), rtol=1e-12)


# ---- float32, and layers inside loops, against finite differences --------------------
class Repeated(nn.Module):
    """One layer applied ``times`` times in a loop, with a residual connection."""

    def __init__(self, layer, times=3):
        self.layer, self.times = layer, times

    def forward(self, x):
        for _ in range(self.times):
            x = x + 0.5 * self.layer(x)
        return x


def squared_sine(model, x):
    return np.sum(np.sin(model(x)) ** 2)


@pytest.mark.parametrize("make, shape", [
    (lambda: nn.Sequential(nn.Linear(4, 4), nn.LayerNorm(4), nn.GELU()), (3, 4)),
    (lambda: nn.Sequential(nn.Linear(4, 4), nn.ELU(), nn.LeakyReLU(0.2)), (3, 4)),
    (lambda: nn.Sequential(nn.Conv1d(2, 2, 3, padding=1), nn.Softmax(dim=1)), (2, 2, 6)),
    (lambda: nn.Sequential(nn.Conv2d(2, 2, 3, padding=1), nn.AvgPool2d(3, 1, 1, count_include_pad=False)),
     (1, 2, 4, 4)),
    (lambda: nn.Sequential(nn.Conv2d(2, 2, 3, padding=1), nn.MaxPool2d(3, 1, 1)), (1, 2, 4, 4)),
], ids=["layernorm-gelu", "elu-leaky", "conv1d-softmax", "avgpool-padding", "maxpool-padding"])
def test_layer_inside_a_loop_matches_finite_differences(make, shape):
    check_grads(squared_sine, (Repeated(make()), rng.standard_normal(shape)), wrt=(0, 1))


@pytest.mark.parametrize("make, shape", [
    (lambda dtype: nn.Sequential(nn.Linear(4, 5, dtype=dtype), nn.LayerNorm(5, dtype=dtype), nn.GELU(),
                                 nn.Linear(5, 2, dtype=dtype), nn.LogSoftmax()), (3, 4)),
    (lambda dtype: nn.Sequential(nn.Conv1d(2, 3, 3, dtype=dtype), nn.ELU(), nn.Flatten()), (2, 2, 5)),
    (lambda dtype: nn.Sequential(nn.Conv2d(1, 2, 3, dtype=dtype), nn.AdaptiveAvgPool2d((2, 3)),
                                 nn.LeakyReLU()), (2, 1, 6, 7)),
], ids=["mlp", "conv1d", "adaptive-pool"])
def test_float32_stays_float32_and_matches_float64(make, shape):
    model32 = make(np.float32)
    model64 = make(np.float64)
    model64.load_state_dict(model32.state_dict())
    x = rng.standard_normal(shape)
    g32, gx32 = srcgrad.grad(squared_sine, wrt=(0, 1))(model32, x.astype(np.float32))
    g64, gx64 = srcgrad.grad(squared_sine, wrt=(0, 1))(model64, x)
    assert model32(x.astype(np.float32)).dtype == np.float32 and gx32.dtype == np.float32
    np.testing.assert_allclose(gx32, gx64, rtol=1e-3, atol=1e-4)
    for (name, a), (_, b) in zip(g32.named_parameters(), g64.named_parameters()):
        assert a.dtype == np.float32, name
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4, err_msg=name)


CLASS_WEIGHT = rng.uniform(0.5, 2.0, 4)


def cross_entropy_with(logits, labels, options):
    return np.sum(F.cross_entropy(logits, labels, **options) * 1.5)


def nll_with(logp, labels, options):
    return np.sum(F.nll_loss(logp, labels, **options) * 1.5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("options", [
    {}, {"weight": CLASS_WEIGHT}, {"ignore_index": 2}, {"label_smoothing": 0.2},
    {"weight": CLASS_WEIGHT, "ignore_index": 1, "label_smoothing": 0.1}, {"ignore_index": -100},
], ids=["plain", "weight", "ignore_index", "label_smoothing", "all", "ignored-default"])
def test_cross_entropy_and_nll_options_match_pytorch(options, reduction):
    logits = rng.standard_normal((6, 4))
    labels = np.array([0, 2, 1, 3, 2, 1])
    if options.get("ignore_index") == -100:
        labels[1] = -100  # PyTorch's default ignore_index
    topts = {k: torch.tensor(v) if isinstance(v, np.ndarray) else v for k, v in options.items()}
    for ours, theirs, x in [(cross_entropy_with, torch.nn.functional.cross_entropy, logits),
                            (nll_with, torch.nn.functional.nll_loss, F.log_softmax(logits))]:
        if theirs is torch.nn.functional.nll_loss and "label_smoothing" in options:
            continue
        xt = torch.tensor(x, requires_grad=True)
        out = theirs(xt, torch.tensor(labels), reduction=reduction, **topts)
        (out.sum() * 1.5).backward()
        opts = {**options, "reduction": reduction}
        np.testing.assert_allclose(ours(x, labels, opts), out.sum().item() * 1.5, rtol=1e-10)
        g = srcgrad.grad(ours)(x, labels, opts)
        np.testing.assert_allclose(g, xt.grad.numpy(), rtol=1e-7, atol=1e-12)


# ---- ConvTranspose2d ----------------------------------------------------------------------------
CONV_TRANSPOSE = {
    "plain": ((2, 3, 3), {}, (2, 2, 4, 5)),
    "stride-padding-output-padding": ((2, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1},
                                      (2, 2, 4, 5)),
    "rectangular-groups-dilation": ((4, 6, (2, 3)), {"stride": (2, 1), "padding": (0, 1), "groups": 2,
                                                     "dilation": (1, 2)}, (1, 4, 3, 4)),
    "no-bias-stride-3-dilation-2": ((2, 2, 3), {"stride": 3, "padding": 2, "bias": False, "dilation": 2,
                                                "output_padding": (2, 1)}, (2, 2, 3, 3)),
    "1x1": ((3, 2, 1), {}, (2, 3, 3, 2)),
}


@pytest.mark.parametrize("name", CONV_TRANSPOSE)
def test_conv_transpose2d_matches_pytorch(name):
    args, options, shape = CONV_TRANSPOSE[name]
    torch.manual_seed(4)
    theirs, ours = tnn.ConvTranspose2d(*args, **options), nn.ConvTranspose2d(*args, **options)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert ours.weight.shape == tuple(theirs.weight.shape)
    with torch.no_grad():  # (moved off their initial values, as the other layers')
        for p in theirs.parameters():
            p.add_(0.1 * torch.randn(p.shape, dtype=p.dtype))
    check_against_torch(ours, theirs, rng.standard_normal(shape), torch)


def transposed_with_size(layer, x, size, bar):
    return np.sum(layer(x, output_size=size) * bar)


def test_conv_transpose2d_output_size_matches_pytorch():
    torch.manual_seed(5)
    theirs = tnn.ConvTranspose2d(2, 3, 3, stride=2, padding=1).double()
    ours = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1)
    ours.load_state_dict(theirs.state_dict())
    x = rng.standard_normal((1, 2, 4, 4))
    for size in [(7, 8), (1, 3, 8, 7)]:
        xt = torch.tensor(x, requires_grad=True)
        out = theirs(xt, output_size=list(size))
        bar = rng.standard_normal(tuple(out.shape))
        (out * torch.tensor(bar)).sum().backward()
        assert ours(x, output_size=size).shape == tuple(out.shape)
        g_x = srcgrad.grad(transposed_with_size, wrt=1)(ours, x, size, bar)
        np.testing.assert_allclose(g_x, xt.grad.numpy(), rtol=1e-7, atol=1e-9)
    with pytest.raises(ValueError, match="output size"):
        ours(x, output_size=(9, 9))


def weighted_conv_transpose(x, weight, bias, bar):
    return np.sum(F.conv_transpose2d(x, weight, bias, stride=2, padding=(1, 0), output_padding=(1, 0),
                                     groups=2, dilation=(2, 1)) * bar)


def test_functional_conv_transpose2d_matches_pytorch():
    x, weight = rng.standard_normal((2, 4, 3, 3)), rng.standard_normal((4, 3, 2, 3))
    bias = rng.standard_normal(6)
    tensors = [torch.tensor(a, requires_grad=True) for a in (x, weight, bias)]
    out = torch.nn.functional.conv_transpose2d(*tensors, stride=2, padding=(1, 0), output_padding=(1, 0),
                                               groups=2, dilation=(2, 1))
    bar = rng.standard_normal(tuple(out.shape))
    (out * torch.tensor(bar)).sum().backward()
    total = (out * torch.tensor(bar)).sum().item()
    np.testing.assert_allclose(weighted_conv_transpose(x, weight, bias, bar), total, rtol=1e-10)
    grads = srcgrad.grad(weighted_conv_transpose, wrt=(0, 1, 2))(x, weight, bias, bar)
    for got, t in zip(grads, tensors):
        np.testing.assert_allclose(got, t.grad.numpy(), rtol=1e-7, atol=1e-9)


def test_conv_transpose2d_initialisation_bounds_are_pytorchs():
    layer = nn.ConvTranspose2d(6, 8, 3, groups=2, rng=np.random.default_rng(0))
    bound = 1 / math.sqrt(8 // 2 * 3 * 3)  # fan-in of a weight (in, out / groups, kh, kw): out / groups kh kw
    assert layer.weight.shape == (6, 4, 3, 3)
    assert bound * 0.9 < np.abs(layer.weight).max() <= bound and np.abs(layer.bias).max() <= bound
