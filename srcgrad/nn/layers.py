"""Layers.  Shapes follow PyTorch: Linear (N, in) -> (N, out) with weight
(out, in); Conv2d (N, C, H, W) -> (N, out, H', W') with weight (out, C, kh, kw),
``H' = (H + 2 padding - kh) // stride + 1``; MaxPool2d / AvgPool2d (N, C, H, W)
-> (N, C, H', W'), ``H' = (H - kh) // stride + 1``.

Each forward is ordinary NumPy written the way a careful person writes it for
speed, since srcgrad differentiates exactly what is written: the convolution
as one matrix product (im2col), pooling over channels-last images.  Their
(N, C, H, W) results may be transposed views of channels-last arrays; NumPy's
elementwise functions keep that layout, so the next layer finds it contiguous.
"""
from __future__ import annotations

import numpy as np

from . import init
from .module import Module


def _pair(value):
    return (value, value) if isinstance(value, int) else tuple(value)


class Linear(Module):
    """``y = x @ weight.T + bias``; Kaiming-uniform initialisation (PyTorch's default)."""

    def __init__(self, in_features, out_features, bias=True, dtype=np.float64, rng=None):
        self.in_features, self.out_features = in_features, out_features
        self.weight = init.kaiming_uniform((out_features, in_features), dtype=dtype, rng=rng)
        self.bias = init.uniform_bias(out_features, in_features, dtype, rng) if bias else None

    def forward(self, x):
        y = x @ self.weight.T
        if self.bias is not None:
            y = y + self.bias
        return y

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}"


class Conv2d(Module):
    """2-D convolution (cross-correlation, as PyTorch) over sliding windows of the input.

    ``x`` (N, C, H, W) -> (N, out, H', W'), ``x``'s dtype (float32 or float64); the
    windows as an (N H' W', C kh kw) patch matrix (the transpose of a contiguous
    (C kh kw, N H' W') one) times the (C kh kw, out) weights
    (im2col: Chellapilla, Puri and Simard 2006), so the forward, the weight's adjoint
    ``patches.T @ y_bar`` and the input's adjoint are each one BLAS matrix product.
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=True,
                 dtype=np.float64, rng=None):
        self.kernel_size, self.stride, self.padding = _pair(kernel_size), stride, padding
        self.in_channels, self.out_channels = in_channels, out_channels
        shape = (out_channels, in_channels) + self.kernel_size
        self.weight = init.kaiming_uniform(shape, dtype=dtype, rng=rng)
        fan = in_channels * self.kernel_size[0] * self.kernel_size[1]
        self.bias = init.uniform_bias(out_channels, fan, dtype, rng) if bias else None

    def forward(self, x):
        n, c, h, w = x.shape
        kh, kw = self.kernel_size
        p, s = self.padding, self.stride
        if p > 0:
            padded = np.zeros((n, c, h + 2 * p, w + 2 * p), dtype=x.dtype)
            padded[:, :, p:p + h, p:p + w] = x
            x = padded
        windows = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(2, 3))
        if s > 1:
            windows = windows[:, :, ::s, ::s]
        oh, ow = windows.shape[2], windows.shape[3]
        # im2col: one column per output pixel, one row per (channel, kernel offset), so
        # that the forward and both adjoints are single matrix products (BLAS); an einsum
        # over the six-axis windows costs ~10x more in the weight's adjoint.  Copied in
        # this order, the copy's inner loop runs along an image row rather than along a
        # kh x kw window (2x faster for 3x3); BLAS takes the transposed matrix as it is.
        cols = np.reshape(np.transpose(windows, (1, 4, 5, 0, 2, 3)), (c * kh * kw, n * oh * ow))
        y = cols.T @ np.reshape(self.weight, (self.out_channels, c * kh * kw)).T
        if self.bias is not None:
            y = y + self.bias
        # Rows are channels-last pixels: the (N, out, H', W') result is a transposed view.
        return np.transpose(np.reshape(y, (n, oh, ow, self.out_channels)), (0, 3, 1, 2))

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")


class _Pool2d(Module):
    """Windows of ``kernel_size`` every ``stride`` (default: the kernel size) over H, W;
    windows that do not fit are dropped (PyTorch's floor mode, no padding):
    (N, C, H, W) -> (N, C, (H - kh) // stride + 1, (W - kw) // stride + 1)."""

    maximum = True  # pool by the maximum (MaxPool2d), else by the mean (AvgPool2d)

    def __init__(self, kernel_size, stride=None):
        self.kernel_size = _pair(kernel_size)
        self.stride = stride if stride is not None else self.kernel_size[0]

    def forward(self, x):
        n, c, h, w = x.shape
        kh, kw = self.kernel_size
        s = self.stride
        oh, ow = (h - kh) // s + 1, (w - kw) // s + 1
        # Channels last, then the kh*kw window offsets as the leading axis: the reduction
        # combines kh*kw contiguous images elementwise.  Reducing axes of size 2 in place
        # (NCHW, or even channels-last) is 5-10x slower in NumPy.
        x = np.transpose(x, (0, 2, 3, 1))
        if s == kh == kw:
            # The windows tile the image: a reshape, whose adjoint is a reshape too.
            if h != oh * kh or w != ow * kw:
                x = x[:, :oh * kh, :ow * kw]
            windows = np.transpose(np.reshape(x, (n, oh, kh, ow, kw, c)), (2, 4, 0, 1, 3, 5))
        else:
            windows = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(1, 2))
            windows = np.transpose(windows[:, ::s, ::s], (4, 5, 0, 1, 2, 3))
        windows = np.reshape(windows, (kh * kw, n, oh, ow, c))
        if self.maximum:
            pooled = np.max(windows, axis=0)
        else:
            pooled = np.mean(windows, axis=0)
        return np.transpose(pooled, (0, 3, 1, 2))

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}"


class MaxPool2d(_Pool2d):
    """Maximum over each window; where a window's maximum is tied, its adjoint goes to
    the first of the tied elements in row-major order (``np.max``'s rule, as PyTorch's
    ``max_pool2d``)."""

    maximum = True


class AvgPool2d(_Pool2d):
    """Mean over each window."""

    maximum = False


class Flatten(Module):
    """(N, ...) -> (N, prod(...))."""

    def forward(self, x):
        return np.reshape(x, (x.shape[0], -1))


class ReLU(Module):
    """``max(x, 0)``; derivative 0 at 0."""

    def forward(self, x):
        return np.maximum(x, 0)


class Tanh(Module):
    def forward(self, x):
        return np.tanh(x)


class Sigmoid(Module):
    def forward(self, x):
        return 1 / (1 + np.exp(-x))


class Dropout(Module):
    """Zero each element with probability ``p`` while training, scaling the rest by
    ``1 / (1 - p)`` (inverted dropout, Srivastava et al. 2014); identity in eval."""

    def __init__(self, p=0.5, seed=0):
        self.p = p
        self.rng = np.random.default_rng(seed)

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        keep = self.rng.random(x.shape) >= self.p
        return x * keep / (1 - self.p)


class Sequential(Module):
    """Layers applied in order.  ``for layer in seq`` iterates ``seq.layers`` (the compiler
    unrolls it over the layers, as it does ``for layer in self.layers``: ``_items``)."""

    _items = "layers"  # (iterating a Sequential is iterating this list: see transforms/inline.py)

    def __init__(self, *layers):
        self.layers = list(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, index):
        return self.layers[index]

    def __iter__(self):
        return iter(self.layers)

    def __len__(self):
        return len(self.layers)


class RNNCell(Module):
    """``h' = tanh(x @ W_ih.T + b_ih + h @ W_hh.T + b_hh)`` (Elman 1990), PyTorch's layout."""

    def __init__(self, input_size, hidden_size, dtype=np.float64, rng=None):
        self.input_size, self.hidden_size = input_size, hidden_size
        bound = 1 / np.sqrt(hidden_size)
        gen = rng or init.generator()
        self.weight_ih = gen.uniform(-bound, bound, (hidden_size, input_size)).astype(dtype)
        self.weight_hh = gen.uniform(-bound, bound, (hidden_size, hidden_size)).astype(dtype)
        self.bias_ih = gen.uniform(-bound, bound, hidden_size).astype(dtype)
        self.bias_hh = gen.uniform(-bound, bound, hidden_size).astype(dtype)

    def forward(self, x, h):
        return np.tanh(x @ self.weight_ih.T + self.bias_ih + h @ self.weight_hh.T + self.bias_hh)
