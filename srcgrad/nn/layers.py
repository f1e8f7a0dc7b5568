"""Layers.  Shapes follow PyTorch: Linear (N, in) -> (N, out) with weight
(out, in); Conv2d (N, C, H, W) -> (N, out, H', W') with weight (out, C, kh, kw),
``H' = (H + 2 padding - kh) // stride + 1``."""
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
    """2-D convolution (cross-correlation, as PyTorch) over sliding windows of the input."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=True,
                 dtype=np.float64, rng=None):
        self.kernel_size, self.stride, self.padding = _pair(kernel_size), stride, padding
        self.in_channels, self.out_channels = in_channels, out_channels
        shape = (out_channels, in_channels) + self.kernel_size
        self.weight = init.kaiming_uniform(shape, dtype=dtype, rng=rng)
        fan = in_channels * self.kernel_size[0] * self.kernel_size[1]
        self.bias = init.uniform_bias(out_channels, fan, dtype, rng) if bias else None

    def forward(self, x):
        p, s = self.padding, self.stride
        if p > 0:
            n, c, h, w = x.shape
            padded = np.zeros((n, c, h + 2 * p, w + 2 * p), dtype=x.dtype)
            padded[:, :, p:p + h, p:p + w] = x
            x = padded
        windows = np.lib.stride_tricks.sliding_window_view(x, self.kernel_size, axis=(2, 3))
        windows = windows[:, :, ::s, ::s]
        # optimize=True contracts through BLAS (tensordot) instead of a plain loop.
        y = np.einsum("nchwij,ocij->nohw", windows, self.weight, optimize=True)
        if self.bias is not None:
            y = y + self.bias[:, None, None]
        return y

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")


class _Pool2d(Module):
    """Windows of ``kernel_size`` every ``stride`` (default: the kernel size) over H, W."""

    def __init__(self, kernel_size, stride=None):
        self.kernel_size = _pair(kernel_size)
        self.stride = stride if stride is not None else self.kernel_size[0]

    def windows(self, x):
        s = self.stride
        return np.lib.stride_tricks.sliding_window_view(x, self.kernel_size, axis=(2, 3))[:, :, ::s, ::s]


class MaxPool2d(_Pool2d):
    """Maximum over each window; ties share the adjoint."""

    def forward(self, x):
        kh, kw = self.kernel_size
        n, c, h, w = x.shape
        if self.stride == kh == kw and h % kh == 0 and w % kw == 0:
            # Non-overlapping windows tile the image: a reshape, cheaper than windows.
            return np.max(np.reshape(x, (n, c, h // kh, kh, w // kw, kw)), axis=(3, 5))
        return np.max(self.windows(x), axis=(4, 5))


class AvgPool2d(_Pool2d):
    """Mean over each window."""

    def forward(self, x):
        return np.mean(self.windows(x), axis=(4, 5))


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
    """Layers applied in order."""

    def __init__(self, *layers):
        self.layers = list(layers)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def __getitem__(self, index):
        return self.layers[index]

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
