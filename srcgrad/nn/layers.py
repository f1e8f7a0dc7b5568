"""Layers, with PyTorch's constructor arguments, defaults, initialisation, shapes and
parameter names: Linear (N, in) -> (N, out) with weight (out, in); Conv1d (N, C, L)
and Conv2d (N, C, H, W) -> (N, out, H', W') with weight (out, C, kh, kw),
``H' = (H + 2 padding - kh) // stride + 1``; MaxPool2d / AvgPool2d (N, C, H, W)
-> (N, C, H', W'), ``H' = (H + 2 padding - kh) // stride + 1``; normalisation,
activations, dropout and embedding; ConvTranspose2d (N, C, H, W) -> (N, out, H', W') with weight
(C, out / groups, kh, kw), ``H' = (H - 1) stride - 2 padding + dilation (kh - 1) + output_padding + 1``.
Recurrent layers are in ``recurrent.py``, attention and the Transformer encoder in ``transformer.py``.

A layer's hyper-parameters (``eps``, a dropout ``p``, a kernel size) are named in its
class's ``_constant_fields``: differentiated code reads them as constants (a float
attribute would otherwise be an input with a gradient of its own).  Running
statistics are buffers (``Module.register_buffer``).

Each forward is ordinary NumPy written the way a careful person writes it for
speed, since srcgrad differentiates exactly what is written: the convolution
as one matrix product (im2col), pooling over channels-last images.  Their
(N, C, H, W) results may be transposed views of channels-last arrays; NumPy's
elementwise functions keep that layout, so the next layer finds it contiguous.
"""
from __future__ import annotations

import numpy as np

from . import functional as F
from . import init
from ..runtime import stop_gradient
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

    ``x`` (N, C, H, W) -> (N, out, H', W'), ``x``'s dtype (float32 or float64),
    ``H' = (H + pad_top + pad_bottom - dilation (kh - 1) - 1) // stride + 1``; weight
    (out, C / groups, kh, kw).  ``stride``, ``dilation`` an int or a pair; ``padding`` an int,
    a pair, ``"valid"`` (none) or ``"same"`` (H' = H: ``dilation (k - 1)`` in all, the odd one
    at the bottom and right, as PyTorch's; stride 1 only); ``groups`` splits the channels into
    that many independent convolutions (PyTorch's arguments; ``padding_mode="zeros"`` only).
    ``stride`` and ``padding`` are kept as given (an int or a pair, as :class:`MaxPool2d`).

    The windows as an (N H' W', C kh kw) patch matrix (the transpose of a contiguous
    (C kh kw, N H' W') one) times the (C kh kw, out) weights
    (im2col: Chellapilla, Puri and Simard 2006), so the forward, the weight's adjoint
    ``patches.T @ y_bar`` and the input's adjoint are each one BLAS matrix product (one
    batched product over the groups).
    """

    # (hyper-parameters: read as constants, no gradient)
    _constant_fields = ("kernel_size", "_stride_pair", "_pads", "_dilation_pair")

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 bias=True, padding_mode="zeros", dtype=np.float64, rng=None):
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                             f"divisible by groups ({groups})")
        if padding_mode != "zeros":
            raise ValueError(f"Conv2d takes only padding_mode='zeros', got {padding_mode!r}")
        self.kernel_size, self.stride, self.padding = _pair(kernel_size), stride, padding
        self.dilation, self.groups = dilation, groups
        self._stride_pair, self._dilation_pair = _pair(stride), _pair(dilation)
        self._pads = _conv_pads(padding, self.kernel_size, self._stride_pair, self._dilation_pair)
        self.in_channels, self.out_channels = in_channels, out_channels
        shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = init.kaiming_uniform(shape, dtype=dtype, rng=rng)
        self.bias = init.uniform_bias(out_channels, init.fan_in(shape), dtype, rng) if bias else None

    def forward(self, x):
        n, c, h, w = x.shape
        kh, kw = self.kernel_size
        # (indexed, not unpacked: see ``functional.pool2d``)
        sh, sw = self._stride_pair[0], self._stride_pair[1]
        dh, dw = self._dilation_pair[0], self._dilation_pair[1]
        top, bottom, left, right = self._pads[0], self._pads[1], self._pads[2], self._pads[3]
        if top > 0 or bottom > 0 or left > 0 or right > 0:
            padded = np.zeros((n, c, h + top + bottom, w + left + right), dtype=x.dtype)
            padded[:, :, top:top + h, left:left + w] = x
            x = padded
        windows = np.lib.stride_tricks.sliding_window_view(x, (dh * (kh - 1) + 1, dw * (kw - 1) + 1),
                                                           axis=(2, 3))
        if dh > 1 or dw > 1:
            windows = windows[:, :, :, :, ::dh, ::dw]
        if sh > 1 or sw > 1:
            windows = windows[:, :, ::sh, ::sw]
        oh, ow = windows.shape[2], windows.shape[3]
        # im2col: one column per output pixel, one row per (channel, kernel offset), so
        # that the forward and both adjoints are single matrix products (BLAS); an einsum
        # over the six-axis windows costs ~10x more in the weight's adjoint.  Copied in
        # this order, the copy's inner loop runs along an image row rather than along a
        # kh x kw window (2x faster for 3x3); BLAS takes the transposed matrix as it is.
        cols = np.reshape(np.transpose(windows, (1, 4, 5, 0, 2, 3)), (c * kh * kw, n * oh * ow))
        if self.groups == 1:
            y = cols.T @ np.reshape(self.weight, (self.out_channels, c * kh * kw)).T
        else:  # (groups, N H' W', C kh kw / groups) @ (groups, C kh kw / groups, out / groups)
            g, size = self.groups, c // self.groups * kh * kw
            per_group = np.reshape(cols, (g, size, n * oh * ow))
            kernels = np.reshape(self.weight, (g, self.out_channels // g, size))
            y = np.transpose(per_group, (0, 2, 1)) @ np.transpose(kernels, (0, 2, 1))
            y = np.reshape(np.transpose(y, (1, 0, 2)), (n * oh * ow, self.out_channels))
        if self.bias is not None:
            y = y + self.bias
        # Rows are channels-last pixels: the (N, out, H', W') result is a transposed view.
        return np.transpose(np.reshape(y, (n, oh, ow, self.out_channels)), (0, 3, 1, 2))

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")


def _conv_pads(padding, kernel_size, stride, dilation):
    """``(top, bottom, left, right)`` zeros around the image for ``padding`` (an int, a pair,
    ``"valid"`` or ``"same"``: PyTorch's ``_ConvNd``, the odd one after the image).

    Raises:
        ValueError: an unknown string, or ``"same"`` with a stride other than 1 (as PyTorch)."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0, 0, 0)
        if padding != "same":
            raise ValueError(f"Invalid padding string {padding!r}, should be one of ('valid', 'same')")
        if stride != (1, 1):
            raise ValueError("padding='same' is not supported for strided convolutions")
        pads = []
        for k, d in zip(kernel_size, dilation):
            total = d * (k - 1)
            pads += [total // 2, total - total // 2]
        return tuple(pads)
    ph, pw = _pair(padding)
    return (ph, ph, pw, pw)


class ConvTranspose2d(Module):
    """2-D transposed convolution (the adjoint of :class:`Conv2d` in its input; see
    ``functional.conv_transpose2d``): ``x`` (N, C_in, H, W) -> (N, out, H', W'),
    ``H' = (H - 1) stride - 2 padding + dilation (kh - 1) + output_padding + 1``; weight
    (C_in, out / groups, kh, kw), Kaiming-uniform with fan-in ``out / groups * kh * kw`` and
    the bias uniform in ``±1 / sqrt(fan-in)`` (PyTorch's).  ``stride``, ``padding``,
    ``output_padding`` and ``dilation`` an int or a pair, kept as pairs (as PyTorch keeps
    them); ``output_padding`` must be smaller than ``stride`` or ``dilation``.
    ``forward(x, output_size=None)``: ``output_size`` ((H', W'), or a longer shape ending
    with them) picks the ``output_padding`` that gives that size, as PyTorch's."""

    _constant_fields = ("kernel_size", "stride", "padding", "output_padding", "dilation")  # (constants)

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", dtype=np.float64, rng=None):
        if in_channels % groups or out_channels % groups:
            raise ValueError(f"in_channels ({in_channels}) and out_channels ({out_channels}) must be "
                             f"divisible by groups ({groups})")
        if padding_mode != "zeros":
            raise ValueError(f"ConvTranspose2d takes only padding_mode='zeros' (as PyTorch's), "
                             f"got {padding_mode!r}")
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        self.kernel_size, self.stride, self.padding = _pair(kernel_size), _pair(stride), _pair(padding)
        self.output_padding, self.dilation = _pair(output_padding), _pair(dilation)
        _check_output_padding(self.output_padding, self.stride, self.dilation)
        shape = (in_channels, out_channels // groups) + self.kernel_size
        self.weight = init.kaiming_uniform(shape, dtype=dtype, rng=rng)
        fan = init.fan_in(shape)
        self.bias = init.uniform_bias(out_channels, fan, dtype, rng) if bias else None

    def forward(self, x, output_size=None):
        output_padding = self.output_padding
        if output_size is not None:
            # (given the sizes, not `x`: srcgrad refuses a call it does not inline that is given `x`
            # and appends to a list of its own integers computed from `x.shape`, a false refusal)
            output_padding = _output_padding(x.shape[-2:], output_size, self.kernel_size, self.stride,
                                             self.padding, self.dilation)
        return F.conv_transpose2d_to(x, self.weight, self.bias, self.stride, self.padding, output_padding,
                                     self.groups, self.dilation)

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")


def _check_output_padding(output_padding, stride, dilation):
    """PyTorch's condition: each side's ``output_padding`` smaller than its stride or its dilation."""
    if any(p < 0 or p >= max(s, d) for p, s, d in zip(output_padding, stride, dilation)):
        raise ValueError(f"output_padding {output_padding} must be smaller than either stride {stride} "
                         f"or dilation {dilation}")


def _output_padding(size, output_size, kernel_size, stride, padding, dilation):
    """The ``output_padding`` pair that makes a transposed convolution of an (H, W) ``size``
    image ``output_size[-2:]`` (PyTorch's ``_output_padding``), checked as PyTorch checks it.

    Raises:
        ValueError: the size is not reachable (each side between the smallest output and that
            plus ``max(stride, dilation) - 1``)."""
    pair = []
    for axis in range(2):
        smallest = ((size[axis] - 1) * stride[axis] - 2 * padding[axis]
                    + dilation[axis] * (kernel_size[axis] - 1) + 1)
        extra = output_size[len(output_size) - 2 + axis] - smallest
        if extra < 0 or extra >= max(stride[axis], dilation[axis]):
            raise ValueError(f"requested an output size of {tuple(output_size)}, but valid sizes on axis "
                             f"{axis} range from {smallest} to "
                             f"{smallest + max(stride[axis], dilation[axis]) - 1}")
        pair.append(extra)
    return tuple(pair)


class Conv1d(Module):
    """1-D convolution (cross-correlation, as PyTorch): ``x`` (N, C, L) -> (N, out, L'),
    ``L' = (L + 2 padding - k) // stride + 1``, weight (out, C, k), by one matrix product
    over the windows (im2col, as :class:`Conv2d`); Kaiming-uniform initialisation."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, bias=True,
                 dtype=np.float64, rng=None):
        self.kernel_size = kernel_size if isinstance(kernel_size, int) else kernel_size[0]
        self.stride = stride if isinstance(stride, int) else stride[0]
        self.padding = padding if isinstance(padding, int) else padding[0]
        self.in_channels, self.out_channels = in_channels, out_channels
        shape, fan = (out_channels, in_channels, self.kernel_size), in_channels * self.kernel_size
        self.weight = init.kaiming_uniform(shape, dtype=dtype, rng=rng)
        self.bias = init.uniform_bias(out_channels, fan, dtype, rng) if bias else None

    def forward(self, x):
        n, c, length = x.shape
        k, p, s = self.kernel_size, self.padding, self.stride
        if p > 0:
            padded = np.zeros((n, c, length + 2 * p), dtype=x.dtype)
            padded[:, :, p:p + length] = x
            x = padded
        windows = np.lib.stride_tricks.sliding_window_view(x, k, axis=2)  # (N, C, L', k)
        if s > 1:
            windows = windows[:, :, ::s]
        out_length = windows.shape[2]
        cols = np.reshape(np.transpose(windows, (1, 3, 0, 2)), (c * k, n * out_length))
        y = cols.T @ np.reshape(self.weight, (self.out_channels, c * k)).T
        if self.bias is not None:
            y = y + self.bias
        return np.transpose(np.reshape(y, (n, out_length, self.out_channels)), (0, 2, 1))

    def extra_repr(self):
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}, padding={self.padding}")


def _check_pool_padding(kernel_size, padding):
    """PyTorch's condition: each side's padding at most half the kernel (so that every
    window holds an element of the image)."""
    if any(p < 0 or p > k // 2 for p, k in zip(padding, kernel_size)):
        raise ValueError(f"padding {padding} must be between 0 and half the kernel size {kernel_size}")


class MaxPool2d(Module):
    """The maximum over windows of ``kernel_size`` every ``stride`` (default: the kernel
    size) after padding by ``padding`` (-inf); windows that do not fit are dropped
    (PyTorch's floor mode): (N, C, H, W) -> (N, C, (H + 2 padding - kh) // stride + 1, ...).
    Where a window's maximum is tied, its adjoint goes to the first of the tied elements
    in row-major order (``np.max``'s rule, as PyTorch's ``max_pool2d``)."""

    _constant_fields = ("kernel_size", "_stride_pair", "_padding_pair")  # (hyper-parameters: constants)

    def __init__(self, kernel_size, stride=None, padding=0):
        self.kernel_size = _pair(kernel_size)
        # (``stride`` and ``padding`` as given, an int or a pair, as PyTorch keeps them; the
        # pairs the forward reads are kept beside them)
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self._stride_pair, self._padding_pair = _pair(self.stride), _pair(padding)
        _check_pool_padding(self.kernel_size, self._padding_pair)

    def forward(self, x):
        return F.pool2d(x, self.kernel_size, self._stride_pair, self._padding_pair, True, True)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AvgPool2d(Module):
    """The mean over windows as :class:`MaxPool2d`'s, padding with zeros; with
    ``count_include_pad=False`` a window's sum is divided by the number of its elements
    inside the image."""

    _constant_fields = ("kernel_size", "_stride_pair", "_padding_pair")  # (hyper-parameters: constants)

    def __init__(self, kernel_size, stride=None, padding=0, count_include_pad=True):
        self.kernel_size = _pair(kernel_size)
        # (``stride`` and ``padding`` as given, an int or a pair, as PyTorch keeps them; the
        # pairs the forward reads are kept beside them)
        self.stride = stride if stride is not None else kernel_size
        self.padding = padding
        self._stride_pair, self._padding_pair = _pair(self.stride), _pair(padding)
        _check_pool_padding(self.kernel_size, self._padding_pair)
        self.count_include_pad = count_include_pad

    def forward(self, x):
        return F.pool2d(x, self.kernel_size, self._stride_pair, self._padding_pair, False,
                      self.count_include_pad)

    def extra_repr(self):
        return f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"


class AdaptiveAvgPool2d(Module):
    """The mean over an ``output_size`` grid of cells (PyTorch's bins, see
    ``functional.adaptive_avg_pool2d``): (N, C, H, W) -> (N, C, oh, ow)."""

    _constant_fields = ("output_size",)  # (hyper-parameters: read as constants, no gradient)

    def __init__(self, output_size):
        self.output_size = _pair(output_size)

    def forward(self, x):
        return F.adaptive_avg_pool2d_to(x, self.output_size)

    def extra_repr(self):
        return f"output_size={self.output_size}"


class Flatten(Module):
    """(N, ...) -> (N, prod(...))."""

    def forward(self, x):
        return np.reshape(x, (x.shape[0], -1))


class ReLU(Module):
    """``max(x, 0)``; derivative 0 at 0.  ``inplace`` is taken and ignored (a new array is
    the same value; NumPy code is not differentiated through in-place activations)."""

    def __init__(self, inplace=False):
        self.inplace = inplace

    def forward(self, x):
        return np.maximum(x, 0)


class Tanh(Module):
    def forward(self, x):
        return np.tanh(x)


class Sigmoid(Module):
    def forward(self, x):
        return 1 / (1 + np.exp(-x))


class LeakyReLU(Module):
    """``x`` where ``x > 0``, else ``negative_slope * x``; slope ``negative_slope`` at 0."""

    _constant_fields = ("negative_slope",)  # (hyper-parameters: read as constants, no gradient)

    def __init__(self, negative_slope=0.01, inplace=False):
        self.negative_slope, self.inplace = negative_slope, inplace  # (``inplace`` ignored, as ReLU's)

    def forward(self, x):
        return F.leaky_relu(x, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}"


class ELU(Module):
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)`` (``functional.elu``)."""

    _constant_fields = ("alpha",)  # (hyper-parameters: read as constants, no gradient)

    def __init__(self, alpha=1.0):
        self.alpha = alpha

    def forward(self, x):
        return F.elu(x, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}"


class GELU(Module):
    """``x * Phi(x)``, exact (erf) or ``approximate="tanh"`` (``functional.gelu``)."""

    def __init__(self, approximate="none"):
        if approximate not in ("none", "tanh"):
            raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate

    def forward(self, x):
        return F.gelu(x, self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class Softmax(Module):
    """Softmax along ``dim`` (PyTorch requires it named; the default here is the last axis)."""

    def __init__(self, dim=-1):
        self.dim = dim

    def forward(self, x):
        return F.softmax(x, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class LogSoftmax(Softmax):
    """Log-softmax along ``dim`` (stable: shifted by the maximum)."""

    def forward(self, x):
        return F.log_softmax(x, self.dim)


class Dropout(Module):
    """Zero each element with probability ``p`` while training, scaling the rest by
    ``1 / (1 - p)`` (inverted dropout, Srivastava et al. 2014); identity in eval.

    Draws from ``rng`` (a ``np.random.Generator``); by default from the generator that
    ``nn.init.manual_seed`` seeds, shared by every layer, so one seed fixes a model's
    dropout (``model.set_rng(seed)`` gives one model a generator of its own).  ``seed``:
    a generator of this layer's own.
    """

    _constant_fields = ("p",)  # (hyper-parameters: read as constants, no gradient)

    draws_random = True  # (Module.set_rng gives such layers the model's generator)

    def __init__(self, p=0.5, inplace=False, seed=None, rng=None):
        if not 0 <= p <= 1:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p
        if rng is None:
            rng = np.random.default_rng(seed) if seed is not None else init.generator()
        self.rng = rng

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        keep = self.rng.random(x.shape) >= self.p
        return x * keep / (1 - self.p)

    def extra_repr(self):
        return f"p={self.p}"


class Dropout2d(Dropout):
    """Zero whole channels of (N, C, H, W) ``x`` with probability ``p`` while training
    (Tompson et al. 2015), scaling the rest by ``1 / (1 - p)``; identity in eval."""

    def forward(self, x):
        if not self.training or self.p == 0:
            return x
        keep = self.rng.random((x.shape[0], x.shape[1], 1, 1)) >= self.p
        return x * keep / (1 - self.p)


class Embedding(Module):
    """Rows of ``weight`` (num_embeddings, embedding_dim) picked by integer ``indices`` of
    any shape: ``indices.shape + (embedding_dim,)``.  Initialised N(0, 1) (PyTorch's
    default), the ``padding_idx`` row zeros; that row gets no gradient (as PyTorch's)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, dtype=np.float64, rng=None):
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        if padding_idx is not None and padding_idx < 0:
            padding_idx += num_embeddings
        self.padding_idx = padding_idx
        self.weight = (rng or init.generator()).standard_normal((num_embeddings, embedding_dim)).astype(dtype)
        if padding_idx is not None:
            self.weight[padding_idx] = 0

    def forward(self, indices):
        rows = np.take(self.weight, indices, axis=0)  # (np.take: integers, so its rank is known)
        if self.padding_idx is None:
            return rows
        # The padding row's value is read, its adjoint dropped.
        return np.where(np.expand_dims(indices == self.padding_idx, -1), stop_gradient(rows), rows)

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


class LayerNorm(Module):
    """``(x - mean) / sqrt(var + eps) * weight + bias`` over the trailing
    ``normalized_shape`` axes (Ba, Kiros and Hinton 2016), ``var`` the biased variance;
    ``weight`` ones and ``bias`` zeros of ``normalized_shape`` (PyTorch's defaults)."""

    _constant_fields = ("eps", "normalized_shape", "axes")  # (hyper-parameters: read as constants)

    def __init__(self, normalized_shape, eps=1e-5, elementwise_affine=True, bias=True, dtype=np.float64):
        shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
        self.normalized_shape, self.eps = shape, eps
        self.axes = tuple(range(-len(shape), 0))
        self.weight = np.ones(shape, dtype=dtype) if elementwise_affine else None
        self.bias = np.zeros(shape, dtype=dtype) if elementwise_affine and bias else None

    def forward(self, x):
        mean = np.mean(x, axis=self.axes, keepdims=True)
        centred = x - mean
        var = np.mean(centred * centred, axis=self.axes, keepdims=True)
        y = centred / np.sqrt(var + self.eps)
        if self.weight is not None:
            y = y * self.weight
        if self.bias is not None:
            y = y + self.bias
        return y

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}"


class _BatchNorm(Module):
    """Batch normalisation (Ioffe and Szegedy 2015) over every axis but the channels (axis 1).

    Training: normalise by the batch's mean and biased variance, and update the
    buffers as PyTorch does: ``running = (1 - momentum) * running + momentum * batch``,
    the variance's batch value unbiased (``* n / (n - 1)``, n values per channel);
    ``momentum=None``: the cumulative average (factor ``1 / num_batches_tracked``);
    ``num_batches_tracked += 1``.  The updates are bookkeeping: what is stored has no
    gradient.  Eval (``model.eval()``): normalise by the running statistics (by the batch's
    where ``track_running_stats=False``).  ``weight`` ones, ``bias`` zeros, ``running_mean``
    zeros, ``running_var`` ones (PyTorch's defaults).
    """

    _constant_fields = ("eps", "momentum")  # (hyper-parameters: read as constants, no gradient)

    dims = 2  # the input's rank besides (N, C) allowed: see the subclasses

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True,
                 dtype=np.float64):
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.track_running_stats = track_running_stats
        self.weight = np.ones(num_features, dtype=dtype) if affine else None
        self.bias = np.zeros(num_features, dtype=dtype) if affine else None
        if track_running_stats:
            self.register_buffer("running_mean", np.zeros(num_features, dtype=dtype))
            self.register_buffer("running_var", np.ones(num_features, dtype=dtype))
            self.register_buffer("num_batches_tracked", np.array(0, dtype=np.int64))
        else:
            self.running_mean = self.running_var = self.num_batches_tracked = None

    def forward(self, x):
        axes = (0,) + tuple(range(2, x.ndim))
        shape = (1, -1) + (1,) * (x.ndim - 2)
        if self.training or not self.track_running_stats:
            mean = np.mean(x, axis=axes, keepdims=True)
            centred = x - mean
            var = np.mean(centred * centred, axis=axes, keepdims=True)
            if self.training and self.track_running_stats:
                # PyTorch's update (stored values are bookkeeping, with no adjoint; the batch's
                # statistics are held constant so that nothing differentiated flows into them).
                # (Computed first, stored last: nothing after the stores reads them back.)
                n = x.size // x.shape[1]
                count = np.array(self.num_batches_tracked + 1)  # (an array, as PyTorch's)
                factor = 1 / float(count) if self.momentum is None else self.momentum
                batch_mean = np.reshape(stop_gradient(mean), (-1,))
                running_mean = (1 - factor) * self.running_mean + factor * batch_mean
                unbiased = np.reshape(stop_gradient(var), (-1,)) * (n / max(n - 1, 1))
                running_var = (1 - factor) * self.running_var + factor * unbiased
                self.num_batches_tracked = count
                self.running_mean = running_mean
                self.running_var = running_var
        else:
            mean = np.reshape(self.running_mean, shape)
            var = np.reshape(self.running_var, shape)
            centred = x - mean
        y = centred / np.sqrt(var + self.eps)
        if self.weight is not None:
            y = y * np.reshape(self.weight, shape) + np.reshape(self.bias, shape)
        return y

    def extra_repr(self):
        return f"{self.num_features}, eps={self.eps}, momentum={self.momentum}"


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) inputs (see ``_BatchNorm``)."""


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) images, per channel (see ``_BatchNorm``)."""


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
        """The layer at ``index``; for a slice, a ``Sequential`` of those layers (as PyTorch's)."""
        if isinstance(index, slice):
            return Sequential(*self.layers[index])
        return self.layers[index]

    def __iter__(self):
        return iter(self.layers)

    def __len__(self):
        return len(self.layers)
