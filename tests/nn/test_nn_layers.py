"""Convolution and pooling layers: values against a loop over output pixels, gradients
against finite differences (float64), over strides, paddings, kernel shapes, windows
that do not tile the image, float32 and memory layouts; max-pool ties with exact values;
the transposed convolution against finite differences and as the convolution's adjoint."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import srcgrad
from srcgrad import nn
from srcgrad.nn import functional as F
from srcgrad.testing import check_grads

rng = np.random.default_rng(5)


def conv_by_loops(x, weight, bias, stride, padding):
    """PyTorch's ``conv2d`` (cross-correlation), one output pixel at a time."""
    n, _, h, w = x.shape
    o, _, kh, kw = weight.shape
    x = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    oh, ow = (h + 2 * padding - kh) // stride + 1, (w + 2 * padding - kw) // stride + 1
    y = np.zeros((n, o, oh, ow))
    for i in range(oh):
        for j in range(ow):
            patch = x[:, :, i * stride:i * stride + kh, j * stride:j * stride + kw]
            y[:, :, i, j] = np.einsum("ncij,ocij->no", patch, weight)
    return y if bias is None else y + bias[:, None, None]


def pool_by_loops(x, kernel_size, stride, reduce):
    """PyTorch's ``max_pool2d`` / ``avg_pool2d`` (floor mode, no padding), one window at a time."""
    kh, kw = kernel_size
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    n, c, h, w = x.shape
    oh, ow = (h - kh) // sh + 1, (w - kw) // sw + 1
    y = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            window = x[:, :, i * sh:i * sh + kh, j * sw:j * sw + kw]
            y[:, :, i, j] = reduce(window, axis=(2, 3))
    return y


# (in, out, kernel, stride, padding, bias, input shape)
CONVS = {
    "3x3": (2, 3, 3, 1, 0, True, (2, 2, 5, 6)),
    "3x3-padding": (1, 4, 3, 1, 1, True, (3, 1, 4, 4)),
    "stride-2-padding": (2, 3, 3, 2, 1, True, (2, 2, 5, 5)),
    "stride-2-not-tiling": (2, 2, 2, 2, 0, True, (1, 2, 5, 7)),
    "2x3-no-bias": (1, 2, (2, 3), 1, 0, False, (2, 1, 4, 5)),
    "1x1": (3, 2, 1, 1, 0, True, (2, 3, 3, 3)),
    "stride-3-padding-2": (2, 2, (3, 2), 3, 2, True, (1, 2, 6, 5)),
}

# (layer class, kernel, stride, input shape)
POOLS = {
    "max-2": (nn.MaxPool2d, 2, None, (2, 3, 4, 6)),
    "max-2-not-tiling": (nn.MaxPool2d, 2, None, (2, 2, 5, 7)),
    "max-3-stride-2-overlapping": (nn.MaxPool2d, 3, 2, (2, 2, 7, 6)),
    "max-2x3-stride-1": (nn.MaxPool2d, (2, 3), 1, (1, 2, 4, 5)),
    "max-3x2-stride-3-not-tiling": (nn.MaxPool2d, (3, 2), 3, (2, 1, 7, 8)),
    "avg-2": (nn.AvgPool2d, 2, None, (2, 3, 4, 4)),
    "avg-2-not-tiling": (nn.AvgPool2d, 2, None, (2, 2, 5, 3)),
    "avg-3-stride-2-overlapping": (nn.AvgPool2d, 3, 2, (1, 2, 7, 7)),
}


def make_conv(name, dtype=np.float64):
    c_in, c_out, kernel, stride, padding, bias, shape = CONVS[name]
    layer = nn.Conv2d(c_in, c_out, kernel, stride=stride, padding=padding, bias=bias, dtype=dtype,
                      rng=rng)
    return layer, rng.standard_normal(shape).astype(dtype)


def make_pool(name):
    cls, kernel, stride, shape = POOLS[name]
    return cls(kernel, stride), rng.standard_normal(shape)


def weighted(layer, x, out_bar):
    """A scalar with adjoint ``out_bar`` for the layer's output."""
    return np.sum(layer(x) * out_bar)


@pytest.mark.parametrize("name", CONVS)
def test_conv_values_match_a_loop_over_output_pixels(name):
    layer, x = make_conv(name)
    expected = conv_by_loops(x, layer.weight, layer.bias, layer.stride, layer.padding)
    np.testing.assert_allclose(layer(x), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", POOLS)
def test_pool_values_match_a_loop_over_windows(name):
    layer, x = make_pool(name)
    reduce = np.max if isinstance(layer, nn.MaxPool2d) else np.mean
    expected = pool_by_loops(x, layer.kernel_size, layer.stride, reduce)
    np.testing.assert_allclose(layer(x), expected, rtol=1e-12)


@pytest.mark.parametrize("name", CONVS)
def test_conv_gradients_match_finite_differences(name):
    layer, x = make_conv(name)
    out_bar = rng.standard_normal(layer(x).shape)
    check_grads(weighted, (layer, x, out_bar), wrt=(0, 1))


@pytest.mark.parametrize("name", POOLS)
def test_pool_gradients_match_finite_differences(name):
    layer, x = make_pool(name)  # continuous values: no ties
    out_bar = rng.standard_normal(layer(x).shape)
    check_grads(weighted, (layer, x, out_bar), wrt=1)


def cnn_loss(model, x):
    return np.sum(np.tanh(model(x)) ** 2)


@pytest.mark.parametrize("pool", [nn.MaxPool2d(2), nn.AvgPool2d(3, 1), nn.MaxPool2d(3, 2)],
                         ids=["max", "avg", "max-3"])
def test_stacked_layers_gradients_match_finite_differences(pool):
    """Layers passing each other their layouts (a conv's output is a channels-last view)."""
    model = nn.Sequential(nn.Conv2d(2, 3, 3, padding=1, rng=rng), nn.ReLU(), pool,
                          nn.Conv2d(3, 2, 2, stride=1, rng=rng), nn.Tanh(), nn.Flatten())
    check_grads(cnn_loss, (model, rng.standard_normal((2, 2, 7, 7))), wrt=(0, 1))


@pytest.mark.parametrize("layout", ["channels-last", "transposed-spatial"])
def test_layers_take_any_memory_layout(layout):
    x = rng.standard_normal((2, 3, 6, 6))
    view = (np.ascontiguousarray(x.transpose(0, 2, 3, 1)).transpose(0, 3, 1, 2) if layout == "channels-last"
            else np.ascontiguousarray(x.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2))
    model = nn.Sequential(nn.Conv2d(3, 2, 3, padding=1, rng=rng), nn.MaxPool2d(2), nn.Flatten())
    np.testing.assert_array_equal(model(view), model(x))
    expected = srcgrad.grad(cnn_loss, wrt=(0, 1))(model, x)
    got = srcgrad.grad(cnn_loss, wrt=(0, 1))(model, view)
    np.testing.assert_allclose(got[1], expected[1], rtol=1e-12)
    np.testing.assert_allclose(got[0][0].weight, expected[0][0].weight, rtol=1e-12)


@pytest.mark.parametrize("make", [
    lambda: make_conv("stride-2-padding", np.float32),
    lambda: (nn.MaxPool2d(2), rng.standard_normal((2, 2, 4, 4)).astype(np.float32)),
    lambda: (nn.AvgPool2d(2), rng.standard_normal((2, 2, 5, 4)).astype(np.float32)),
    lambda: (nn.ConvTranspose2d(2, 3, 3, stride=2, dtype=np.float32, rng=rng),
             rng.standard_normal((2, 2, 3, 3)).astype(np.float32)),
], ids=["conv", "max-pool", "avg-pool", "conv-transpose"])
def test_float32_layers_keep_float32_and_match_float64(make):
    layer, x = make()
    out_bar = np.ones(layer(x).shape, dtype=np.float32)
    g_layer, g_x = srcgrad.grad(weighted, wrt=(0, 1))(layer, x, out_bar)
    assert layer(x).dtype == np.float32 and g_x.dtype == np.float32
    layer64 = copy.copy(layer)
    for name, value in vars(layer).items():
        if isinstance(value, np.ndarray):
            setattr(layer64, name, value.astype(np.float64))
    g64_layer, g64_x = srcgrad.grad(weighted, wrt=(0, 1))(layer64, x.astype(np.float64),
                                                          out_bar.astype(np.float64))
    np.testing.assert_allclose(g_x, g64_x, rtol=1e-4, atol=1e-5)
    if isinstance(layer, (nn.Conv2d, nn.ConvTranspose2d)):
        assert g_layer.weight.dtype == g_layer.bias.dtype == np.float32
        np.testing.assert_allclose(g_layer.weight, g64_layer.weight, rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(g_layer.bias, g64_layer.bias, rtol=1e-4, atol=1e-4)


def max_pooled(pool, x):
    return np.sum(pool(x) * np.arange(1.0, 5.0).reshape(1, 1, 2, 2))


@pytest.mark.parametrize("optimize", [True, False], ids=["opt", "noopt"])
def test_max_pool_tie_gives_the_adjoint_to_the_first_maximum_in_the_window(optimize):
    """Each window's adjoint goes whole to its first maximum in row-major order (as
    PyTorch's ``max_pool2d``), so it still sums to the window's adjoint."""
    x = np.array([[[[1.0, 1.0, 0.0, 2.0],
                    [1.0, 0.0, 2.0, 0.0],
                    [0.0, 0.0, 3.0, 3.0],
                    [0.0, 0.0, 3.0, 3.0]]]])
    expected = [[[[1, 0, 0, 2],
                  [0, 0, 0, 0],
                  [3, 0, 4, 0],
                  [0, 0, 0, 0]]]]
    g = srcgrad.grad(max_pooled, wrt=1, optimize=optimize)(nn.MaxPool2d(2), x)
    np.testing.assert_array_equal(g, np.array(expected, dtype=np.float64))


def test_overlapping_max_pool_ties_sum_each_windows_adjoint():
    """Overlapping windows over a constant image: every window's adjoint lands on its own
    top-left element, so the adjoint is 1 at each window's corner and 0 elsewhere."""
    pool = nn.MaxPool2d(2, stride=1)
    g = srcgrad.grad(lambda p, x: np.sum(p(x)), wrt=1)(pool, np.zeros((1, 1, 3, 4)))
    np.testing.assert_array_equal(g[0, 0], [[1, 1, 1, 0], [1, 1, 1, 0], [0, 0, 0, 0]])


def test_max_pool_matches_pytorch_also_at_ties():
    torch = pytest.importorskip("torch")
    x = rng.integers(0, 3, (2, 3, 7, 6)).astype(np.float64)  # many ties
    for kernel, stride in [(2, None), (3, 2), ((2, 3), 1)]:
        pool = nn.MaxPool2d(kernel, stride)
        out_bar = rng.standard_normal(pool(x).shape)
        g = srcgrad.grad(weighted, wrt=1)(pool, x, out_bar)
        xt = torch.tensor(x, requires_grad=True)
        yt = torch.nn.functional.max_pool2d(xt, kernel, stride)
        yt.backward(torch.tensor(out_bar))
        np.testing.assert_array_equal(pool(x), yt.detach().numpy())
        np.testing.assert_allclose(g, xt.grad.numpy(), rtol=1e-12, atol=1e-12)


def test_conv_matches_pytorch():
    torch = pytest.importorskip("torch")
    layer, x = make_conv("stride-3-padding-2")
    out_bar = rng.standard_normal(layer(x).shape)
    g_layer, g_x = srcgrad.grad(weighted, wrt=(0, 1))(layer, x, out_bar)
    xt, wt, bt = (torch.tensor(a, requires_grad=True) for a in (x, layer.weight, layer.bias))
    yt = torch.nn.functional.conv2d(xt, wt, bt, stride=layer.stride, padding=layer.padding)
    yt.backward(torch.tensor(out_bar))
    np.testing.assert_allclose(layer(x), yt.detach().numpy(), rtol=1e-12, atol=1e-12)
    for got, want in [(g_x, xt), (g_layer.weight, wt), (g_layer.bias, bt)]:
        np.testing.assert_allclose(got, want.grad.numpy(), rtol=1e-10, atol=1e-12)


class _IteratesItsSequential(nn.Module):
    def __init__(self, enumerate_it=False):
        self.seq = nn.Sequential(nn.Linear(3, 4, rng=np.random.default_rng(0)), nn.ReLU(),
                                 nn.Linear(4, 2, rng=np.random.default_rng(1)))
        self.enumerate_it = enumerate_it

    def forward(self, x):
        if self.enumerate_it:
            for i, layer in enumerate(self.seq):
                x = layer(x) * (i + 1)
            return x
        for layer in self.seq:
            x = layer(x)
        return x


def _sine_loss(m, x):
    return np.sum(np.sin(m(x)))


@pytest.mark.parametrize("enumerate_it", [False, True])
def test_iterating_a_sequential(enumerate_it):
    """`for layer in self.seq` (PyTorch's way) crashed in the backward sweep (an adjoint keyed
    by position met one keyed by field): it is `self.seq.layers`, unrolled or indexed."""
    m, x = _IteratesItsSequential(enumerate_it), np.random.default_rng(2).standard_normal((5, 3))
    g = srcgrad.grad(_sine_loss)(m, x)
    for k in (0, 2):
        w = m.seq.layers[k].weight
        expected = np.zeros_like(w)
        for i in np.ndindex(w.shape):
            old = w[i]
            w[i] = old + 1e-6
            up = _sine_loss(m, x)
            w[i] = old - 1e-6
            down = _sine_loss(m, x)
            w[i] = old
            expected[i] = (up - down) / 2e-6
        np.testing.assert_allclose(g.seq.layers[k].weight, expected, rtol=1e-6, atol=1e-9)
    m.seq.layers.append(nn.Linear(2, 2, rng=np.random.default_rng(3)))  # a layer added: compiled again
    g = srcgrad.grad(_sine_loss)(m, x)
    assert g.seq.layers[3].weight.shape == (2, 2) and np.abs(g.seq.layers[3].weight).sum() > 0


# ---- ConvTranspose2d --------------------------------------------------------------------------
def transposed_loss(layer, x):
    return np.sum(np.sin(layer(x)))


@pytest.mark.parametrize("args, options, shape", [
    ((2, 3, 3), {"stride": 2, "padding": 1, "output_padding": 1}, (2, 2, 3, 4)),
    ((4, 2, (2, 3)), {"stride": (1, 2), "padding": (1, 0), "groups": 2, "dilation": (2, 1)}, (1, 4, 3, 3)),
    ((1, 2, 2), {"stride": 3, "bias": False}, (2, 1, 2, 2)),
], ids=["stride-padding-output-padding", "groups-dilation", "stride-beyond-kernel"])
def test_conv_transpose2d_gradients_match_finite_differences(args, options, shape):
    layer = nn.ConvTranspose2d(*args, rng=np.random.default_rng(6), **options)
    check_grads(transposed_loss, (layer, rng.standard_normal(shape)), wrt=(0, 1))


def test_conv_transpose2d_is_the_adjoint_of_conv2d():
    """<conv(y), x> = <y, conv_transpose(x)> with the same weight (no bias): the transposed
    convolution is the convolution's adjoint in its input, shapes and stride included."""
    conv = nn.Conv2d(3, 2, 3, stride=2, padding=1, bias=False, rng=np.random.default_rng(7))
    transposed = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, output_padding=1, bias=False)
    transposed.weight[...] = conv.weight
    y, x = rng.standard_normal((2, 3, 8, 6)), rng.standard_normal((2, 2, 4, 3))
    assert transposed(x).shape == y.shape
    np.testing.assert_allclose(np.sum(conv(y) * x), np.sum(y * transposed(x)), rtol=1e-12)


@pytest.mark.parametrize("make, match", [
    (lambda: nn.ConvTranspose2d(2, 2, 3, stride=2, output_padding=2), "output_padding"),
    (lambda: nn.ConvTranspose2d(3, 2, 3, groups=2), "divisible by groups"),
    (lambda: nn.ConvTranspose2d(2, 2, 3, padding_mode="reflect"), "padding_mode"),
])
def test_conv_transpose2d_refuses_what_pytorch_refuses(make, match):
    with pytest.raises(ValueError, match=match):
        make()


# ---- second order through layers whose code checks its hyper-parameters -----------------

class _GeluHead(nn.Module):
    def __init__(self):
        self.l1, self.l2 = nn.Linear(3, 4), nn.Linear(4, 3)

    def forward(self, x):
        return self.l2(F.gelu(self.l1(x)))


def _gelu_cross_entropy(model, x, labels):
    return F.cross_entropy(model(x), labels)


def test_hvp_through_exact_gelu_and_a_loss_with_reduction():
    rng = np.random.default_rng(2)
    model, x, labels = _GeluHead(), rng.standard_normal((5, 3)), np.array([0, 2, 1, 1, 0])
    v = _GeluHead()
    got = srcgrad.hvp(_gelu_cross_entropy)(model, x, labels, v)
    grad, eps = srcgrad.grad(_gelu_cross_entropy), 1e-6
    shifted = [_GeluHead(), _GeluHead()]
    for m, sign in zip(shifted, (1, -1)):
        for name, p in model.named_parameters():
            dict(m.named_parameters())[name][...] = p + sign * eps * dict(v.named_parameters())[name]
    plus, minus = grad(shifted[0], x, labels), grad(shifted[1], x, labels)
    for name, g in got.named_parameters():
        want = (dict(plus.named_parameters())[name] - dict(minus.named_parameters())[name]) / (2 * eps)
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-7, err_msg=name)
    with pytest.raises(ValueError, match="approximate"):
        srcgrad.grad(lambda x: np.sum(F.gelu(x, approximate="bogus")))(x)
