"""Losses, activations and pooling as plain functions (differentiated by srcgrad),
with PyTorch's names, arguments and defaults (``torch.nn.functional``).

Shapes: ``logits`` (N, C) float, ``labels`` (N,) int in [0, C); images (N, C, H, W).
Every function keeps its input's float dtype (float32 in, float32 out).  Losses take
``reduction``: ``"mean"`` (default), ``"sum"`` or ``"none"`` (the elementwise losses,
(N,) for the classification ones); another value is a ``ValueError``.

Derivatives at kinks follow PyTorch's: ``leaky_relu`` and ``elu`` take the negative
side's slope at 0, ``smooth_l1_loss`` has derivative 0 where input equals target.
"""
from __future__ import annotations

import math

import numpy as np

from ..runtime import erf, stop_gradient
from . import init as _init



def _check_reduction(reduction):
    """ValueError unless ``reduction`` is one of PyTorch's three (a call, not a ``raise`` in the
    loss: library code with a ``raise`` is not inlined)."""
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


# ---- activations ---------------------------------------------------------------------
def relu(x):
    return np.maximum(x, 0)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def leaky_relu(x, negative_slope=0.01):
    """``x`` where ``x > 0``, else ``negative_slope * x`` (Maas et al. 2013)."""
    return np.where(x > 0, x, negative_slope * x)


def elu(x, alpha=1.0):
    """``x`` where ``x > 0``, else ``alpha * (exp(x) - 1)`` (Clevert et al. 2016).
    (The exponential is of ``min(x, 0)`` spelled with ``where``, so that a large ``x``
    neither overflows nor sends ``0 * inf`` into the adjoint.)"""
    return np.where(x > 0, x, alpha * (np.exp(np.where(x > 0, 0.0, x)) - 1))


def gelu(x, approximate="none"):
    """``x * Phi(x)``, Phi the standard normal CDF, ``0.5 * (1 + erf(x / sqrt 2))``
    (Hendrycks and Gimpel 2016); ``approximate="tanh"``: their approximation
    ``0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``.

    Raises:
        ImportError: the exact form without SciPy (``rt.erf`` imports it when called).
        ValueError: another ``approximate``.
    """
    if approximate == "tanh":
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    _check_exact_gelu(approximate)
    return 0.5 * x * (1 + erf(x / math.sqrt(2)))


def _check_exact_gelu(approximate):
    if approximate != "none":
        raise ValueError(f"approximate must be 'none' or 'tanh', got {approximate!r}")



def softmax(x, dim=-1):
    """``exp(x) / sum(exp(x))`` along ``dim``, shifted by the maximum first (which changes
    no value; ``stop_gradient``: its derivative is zero)."""
    e = np.exp(x - stop_gradient(np.max(x, axis=dim, keepdims=True)))
    return e / np.sum(e, axis=dim, keepdims=True)


def log_softmax(logits, dim=-1):
    """log softmax along ``dim`` (default the last axis), stable: shift by the maximum first.

    The shift changes no value (log-softmax is invariant to adding a constant per
    row), so its derivative is exactly zero: ``stop_gradient`` says so, and the
    backward sweep skips the maximum's adjoint."""
    shifted = logits - stop_gradient(np.max(logits, axis=dim, keepdims=True))
    return shifted - np.log(np.sum(np.exp(shifted), axis=dim, keepdims=True))


def dropout(x, p=0.5, training=True, rng=None):
    """Zero each element with probability ``p`` (drawn from ``rng``, a
    ``np.random.Generator``; default the one ``nn.init`` seeds), scaling the rest by
    ``1 / (1 - p)``; ``x`` itself when not ``training`` or ``p == 0``."""
    if not training or p == 0:
        return x
    if rng is None:
        rng = _init.generator()
    keep = rng.random(x.shape) >= p
    return x * keep / (1 - p)


# ---- losses --------------------------------------------------------------------------
def mse_loss(prediction, target, reduction="mean"):
    """Squared error ``(prediction - target)**2``, reduced (default: the mean over all elements)."""
    loss = (prediction - target) ** 2
    if reduction == "mean":
        return np.mean(loss)
    if reduction == "sum":
        return np.sum(loss)
    _check_reduction(reduction)
    return loss


def l1_loss(prediction, target, reduction="mean"):
    """Absolute error ``|prediction - target|``, reduced (derivative 0 where they are equal)."""
    loss = np.abs(prediction - target)
    if reduction == "mean":
        return np.mean(loss)
    if reduction == "sum":
        return np.sum(loss)
    _check_reduction(reduction)
    return loss


def smooth_l1_loss(prediction, target, reduction="mean", beta=1.0):
    """Huber-like loss (Girshick 2015, Fast R-CNN eq. 3, with PyTorch's ``beta``):
    ``0.5 d**2 / beta`` where ``|d| < beta``, else ``|d| - 0.5 beta``, ``d = prediction - target``;
    ``beta = 0`` is the L1 loss."""
    diff = prediction - target
    size = np.abs(diff)
    if beta == 0:
        loss = size
    else:
        loss = np.where(size < beta, 0.5 * diff ** 2 / beta, size - 0.5 * beta)
    if reduction == "mean":
        return np.mean(loss)
    if reduction == "sum":
        return np.sum(loss)
    _check_reduction(reduction)
    return loss


def nll_loss(log_probabilities, labels, weight=None, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of the labels, ``-w[y_i] logp[i, y_i]``, reduced over i
    (PyTorch's ``nll_loss``): ``weight`` (C,) weighs each class (default 1); a label equal
    to ``ignore_index`` counts for nothing; ``"mean"`` divides the sum by the sum of the
    weights counted (the number of labels not ignored, without ``weight``)."""
    n = log_probabilities.shape[0]
    keep = labels != ignore_index
    safe = np.where(keep, labels, 0)
    if weight is None:
        counted = np.asarray(keep, dtype=log_probabilities.dtype)
    else:
        counted = weight[safe] * keep
    loss = -log_probabilities[np.arange(n), safe] * counted
    if reduction == "mean":
        return np.sum(loss) / np.sum(counted)
    if reduction == "sum":
        return np.sum(loss)
    _check_reduction(reduction)
    return loss


def cross_entropy(logits, labels, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """``nll_loss(log_softmax(logits), labels, weight, ignore_index, reduction)``, computed
    stably (the shift as in ``log_softmax``), with PyTorch's ``label_smoothing`` e: each
    counted sample's loss is ``(1 - e) nll_i + e / C * sum_c w_c (-logp[i, c])``.

    Shapes: ``logits`` (N, C) float, ``labels`` (N,) int; ``weight`` (C,) of the logits' dtype."""
    shifted = logits - stop_gradient(np.max(logits, axis=-1, keepdims=True))
    log_probabilities = shifted - np.log(np.sum(np.exp(shifted), axis=-1, keepdims=True))
    n = logits.shape[0]
    keep = labels != ignore_index
    safe = np.where(keep, labels, 0)
    if weight is None:
        counted = np.asarray(keep, dtype=logits.dtype)
    else:
        counted = weight[safe] * keep
    loss = -log_probabilities[np.arange(n), safe] * counted
    if label_smoothing != 0:
        spread = log_probabilities if weight is None else log_probabilities * weight
        smooth = -np.sum(spread, axis=-1) * keep / logits.shape[-1]
        loss = (1 - label_smoothing) * loss + label_smoothing * smooth
    if reduction == "mean":
        return np.sum(loss) / np.sum(counted)
    if reduction == "sum":
        return np.sum(loss)
    _check_reduction(reduction)
    return loss


def binary_cross_entropy(probabilities, target, weight=None, reduction="mean"):
    """``-(t log p + (1 - t) log(1 - p))`` elementwise, each log clamped at -100 as PyTorch
    does (so ``p`` of exactly 0 or 1 gives a finite loss), times ``weight`` if given."""
    loss = -(target * np.maximum(np.log(probabilities), -100.0)
             + (1 - target) * np.maximum(np.log(1 - probabilities), -100.0))
    if weight is not None:
        loss = loss * weight
    if reduction == "mean":
        return np.mean(loss)
    if reduction == "sum":
        return np.sum(loss)
    _check_reduction(reduction)
    return loss


def binary_cross_entropy_with_logits(logits, target, weight=None, reduction="mean", pos_weight=None):
    """``binary_cross_entropy(sigmoid(x), t)`` computed stably from the logits ``x``:
    ``(1 - t) x + (1 + (pos_weight - 1) t) softplus(-x)`` (``softplus(-x) = -log sigmoid(x)``,
    as ``np.logaddexp(0, -x)``), times ``weight`` if given."""
    if pos_weight is None:
        loss = (1 - target) * logits + np.logaddexp(0, -logits)
    else:
        loss = (1 - target) * logits + (1 + (pos_weight - 1) * target) * np.logaddexp(0, -logits)
    if weight is not None:
        loss = loss * weight
    if reduction == "mean":
        return np.mean(loss)
    if reduction == "sum":
        return np.sum(loss)
    _check_reduction(reduction)
    return loss


# ---- pooling -------------------------------------------------------------------------
def _pair(value):
    """``(value, value)`` for an int, else the pair itself (not ``tuple(value)``: srcgrad
    refuses ``tuple(...)`` given a field of a model being differentiated)."""
    if isinstance(value, int):
        return (value, value)
    return value


def max_pool2d(x, kernel_size, stride=None, padding=0):
    """The maximum over windows of ``kernel_size`` every ``stride`` (default: the kernel
    size), after padding H and W by ``padding`` on each side with -inf:
    (N, C, H, W) -> (N, C, (H + 2 padding - kh) // stride + 1, ...) (PyTorch's floor mode).
    Where a window's maximum is tied, its adjoint goes to the first of the tied elements
    in row-major order (``np.max``'s rule, as PyTorch's)."""
    return pool2d(x, _pair(kernel_size), _pair(kernel_size if stride is None else stride),
                  _pair(padding), True, True)


def avg_pool2d(x, kernel_size, stride=None, padding=0, count_include_pad=True):
    """The mean over windows as ``max_pool2d``'s, the padding zeros; with
    ``count_include_pad=False`` each window's sum is divided by the number of its
    elements inside the image rather than by ``kh * kw``."""
    return pool2d(x, _pair(kernel_size), _pair(kernel_size if stride is None else stride),
                  _pair(padding), False, count_include_pad)


def adaptive_avg_pool2d(x, output_size):
    """The mean over ``output_size`` (oh, ow) cells of (N, C, H, W) ``x``, cell ``i`` spanning
    rows ``floor(i H / oh)`` to ``ceil((i + 1) H / oh)`` (PyTorch's bins; they overlap where
    ``oh`` does not divide ``H``): (N, C, oh, ow)."""
    return adaptive_avg_pool2d_to(x, _pair(output_size))


def adaptive_avg_pool2d_to(x, output_size):
    """``adaptive_avg_pool2d`` with ``output_size`` a pair ``(oh, ow)``."""
    n, c, h, w = x.shape
    # (indexed rather than unpacked: the inliner takes a name unpacked from a layer's field
    # for one that may hold a layer, and a `range` given it for a call that may change it)
    oh, ow = output_size[0], output_size[1]
    if h % oh == 0 and w % ow == 0:  # equal cells tiling the image: one reshape
        return np.mean(np.reshape(x, (n, c, oh, h // oh, ow, w // ow)), axis=(3, 5))
    rows = []
    for i in range(oh):
        top, bottom = (i * h) // oh, -((-(i + 1) * h) // oh)
        cells = []
        for j in range(ow):
            left, right = (j * w) // ow, -((-(j + 1) * w) // ow)
            cells.append(np.mean(x[:, :, top:bottom, left:right], axis=(2, 3)))
        rows.append(np.stack(cells, axis=-1))
    return np.stack(rows, axis=-2)


def pool2d(x, kernel_size, stride, padding, maximum, count_include_pad):
    """Max (``maximum``) or average pooling of (N, C, H, W) ``x``, each argument a pair."""
    n, c, h, w = x.shape
    # (indexed, not unpacked: the inliner takes a name unpacked from a layer's field for one
    # that may hold a layer, and the layer's call then for one it cannot inline)
    kh, kw, sh, sw, ph, pw = kernel_size[0], kernel_size[1], stride[0], stride[1], padding[0], padding[1]
    if ph > 0 or pw > 0:
        fill = -np.inf if maximum else 0.0
        x = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)), constant_values=fill)
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    # Channels last, then the kh*kw window offsets as the leading axis: the reduction
    # combines kh*kw contiguous images elementwise.  Reducing axes of size 2 in place
    # (NCHW, or even channels-last) is 5-10x slower in NumPy.
    x = np.transpose(x, (0, 2, 3, 1))
    if sh == kh and sw == kw:
        # The windows tile the image: a reshape, whose adjoint is a reshape too.
        if h + 2 * ph != oh * kh or w + 2 * pw != ow * kw:
            x = x[:, :oh * kh, :ow * kw]
        windows = np.transpose(np.reshape(x, (n, oh, kh, ow, kw, c)), (2, 4, 0, 1, 3, 5))
    else:
        windows = np.lib.stride_tricks.sliding_window_view(x, (kh, kw), axis=(1, 2))
        windows = np.transpose(windows[:, ::sh, ::sw], (4, 5, 0, 1, 2, 3))
    windows = np.reshape(windows, (kh * kw, n, oh, ow, c))
    if maximum:
        pooled = np.max(windows, axis=0)
    elif count_include_pad or (ph == 0 and pw == 0):
        pooled = np.mean(windows, axis=0)
    else:  # divide by the number of the window's elements inside the image (the same windows of ones)
        inside = np.pad(np.ones((1, h, w, 1), dtype=x.dtype), ((0, 0), (ph, ph), (pw, pw), (0, 0)))
        cells = np.lib.stride_tricks.sliding_window_view(inside, (kh, kw), axis=(1, 2))[:, ::sh, ::sw]
        pooled = np.sum(windows, axis=0) / np.sum(cells, axis=(4, 5))
    return np.transpose(pooled, (0, 3, 1, 2))


# ---- transposed convolution -------------------------------------------------------------
def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """The transposed convolution (the adjoint of ``conv2d`` with respect to its input; also
    called fractionally strided, Dumoulin and Visin 2016), PyTorch's ``F.conv_transpose2d``:
    ``input`` (N, C_in, H, W), ``weight`` (C_in, C_out / groups, kh, kw), ``bias`` (C_out,) ->
    (N, C_out, H', W'), ``H' = (H - 1) stride - 2 padding + dilation (kh - 1) + output_padding + 1``;
    ``stride``, ``padding``, ``output_padding`` and ``dilation`` an int or a pair."""
    return conv_transpose2d_to(input, weight, bias, _pair(stride), _pair(padding), _pair(output_padding),
                               groups, _pair(dilation))


def conv_transpose2d_to(x, weight, bias, stride, padding, output_padding, groups, dilation):
    """``conv_transpose2d`` with each of ``stride``, ``padding``, ``output_padding`` and
    ``dilation`` a pair.

    Every input pixel scatters its (C_out, kh, kw) patch, ``x[n, :, i, j] @ weight``, into the
    output at ``(i stride + a dilation, j stride + b dilation)``: one matrix product
    (N H W, C_in) @ (C_in, C_out kh kw) for all the patches (per group), then kh kw strided
    additions into a channels-last output (col2im, the transpose of ``Conv2d``'s im2col), whose
    border of ``padding`` is then cut off."""
    n, c, h, w = x.shape
    # (indexed, not unpacked: see ``pool2d``)
    kh, kw, out_per_group = weight.shape[2], weight.shape[3], weight.shape[1]
    sh, sw, ph, pw = stride[0], stride[1], padding[0], padding[1]
    dh, dw, oph, opw = dilation[0], dilation[1], output_padding[0], output_padding[1]
    out_channels = out_per_group * groups
    rows = np.reshape(np.transpose(x, (0, 2, 3, 1)), (n * h * w, c))  # (N H W, C_in)
    if groups == 1:
        patches = rows @ np.reshape(weight, (c, out_channels * kh * kw))
    else:  # one product per group, (groups, N H W, C_in / groups) @ (groups, C_in / groups, ...)
        per_group = np.transpose(np.reshape(rows, (n * h * w, groups, c // groups)), (1, 0, 2))
        patches = per_group @ np.reshape(weight, (groups, c // groups, out_per_group * kh * kw))
        patches = np.transpose(np.reshape(patches, (groups, n * h * w, out_per_group, kh * kw)), (1, 0, 2, 3))
    patches = np.reshape(patches, (n, h, w, out_channels, kh, kw))
    full_h = (h - 1) * sh + dh * (kh - 1) + 1 + oph
    full_w = (w - 1) * sw + dw * (kw - 1) + 1 + opw
    y = np.zeros((n, full_h, full_w, out_channels), dtype=np.result_type(x, weight))
    for a in range(kh):
        for b in range(kw):
            top, left = a * dh, b * dw
            y[:, top:top + (h - 1) * sh + 1:sh, left:left + (w - 1) * sw + 1:sw] += patches[:, :, :, :, a, b]
    y = y[:, ph:full_h - ph, pw:full_w - pw]
    if bias is not None:
        y = y + bias
    return np.transpose(y, (0, 3, 1, 2))
