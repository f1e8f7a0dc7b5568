"""One training step of the gallery's digits CNN, for ``benchmarks.run``.

The model is ``examples/digits_cnn.py``'s ``DigitsCNN`` (``srcgrad.nn``: conv
1 -> 16 3x3 padding 1, ReLU, 2x2 max pool, flatten, linear 256 -> 10) and its
loss (``nn.cross_entropy``), on a batch of 32 8x8 images in float32.  The
gradient is w.r.t. the model's four parameter arrays (the images are data),
returned in the order ``conv.weight, conv.bias, fc.weight, fc.bias``.

This module holds what ``benchmarks.run`` needs for the workload: the inputs,
srcgrad's gradient (the gallery's own model and loss), a hand-written NumPy
step (im2col convolution, its weight gradient as one matrix product), and
each peer's version of the same step as that library expresses it.  It does
not time anything itself.  It does not import NumPy before ``benchmarks.run``
has pinned the threads (it is imported after).
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
BATCH, SIDE, CHANNELS, CLASSES = 32, 8, 16, 10
PARAMS = ("conv.weight", "conv.bias", "fc.weight", "fc.bias")


def load_gallery():
    """``examples/digits_cnn.py`` as a module (it needs the ``examples`` extra: scikit-learn, tqdm)."""
    name = "srcgrad_gallery_digits_cnn"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / "digits_cnn.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def make_inputs(seed=0, batch=BATCH):
    """``(model, x, labels, params)``: the gallery's model (seeded), ``batch`` images in
    [0, 1), labels.

    ``params`` are the model's arrays in :data:`PARAMS` order, for the hand-written
    step and the peers (which receive copies converted to their own arrays).
    """
    gallery = load_gallery()
    from srcgrad import nn

    nn.init.manual_seed(seed)
    model = gallery.DigitsCNN(dtype=np.float32)
    rng = np.random.default_rng(seed)
    x = rng.random((batch, 1, SIDE, SIDE), dtype=np.float32)
    labels = rng.integers(0, CLASSES, size=batch)
    named = dict(model.named_parameters())
    return model, x, labels, tuple(named[p] for p in PARAMS)


def srcgrad_step(gallery):
    """srcgrad's gradient of the gallery's loss, returning the four arrays in :data:`PARAMS` order."""
    import srcgrad

    gradient = srcgrad.grad(gallery.loss)

    def step(model, x, labels):
        g = gradient(model, x, labels)
        return g.conv.weight, g.conv.bias, g.fc.weight, g.fc.bias

    return step, gradient


def hand_step(conv_w, conv_b, fc_w, fc_b, x, labels):
    """Forward and backward by hand: im2col convolution, ReLU, 2x2 max pool, linear, cross-entropy.

    The convolution is one matrix product of the (N*H*W, C*3*3) patch matrix
    with the (C*3*3, 16) weights, in NHWC order; its weight gradient is the
    transposed product of the patch matrix with the output's adjoint.
    """
    n, c, h, w = x.shape
    o = conv_w.shape[0]
    padded = np.zeros((n, c, h + 2, w + 2), dtype=x.dtype)
    padded[:, :, 1:h + 1, 1:w + 1] = x
    # im2col: (n, c, h, w, 3, 3) windows -> (n, h, w, c, 3, 3) -> (n*h*w, c*9)
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))
    cols = np.ascontiguousarray(windows.transpose(0, 2, 3, 1, 4, 5)).reshape(n * h * w, c * 9)
    w_mat = conv_w.reshape(o, c * 9)
    z = cols @ w_mat.T + conv_b  # (n*h*w, o)
    r = np.maximum(z, 0)
    r6 = r.reshape(n, h // 2, 2, w // 2, 2, o)
    pooled = r6.max(axis=(2, 4))  # (n, h/2, w/2, o)
    # flatten in the model's (o, h/2, w/2) order
    feats = pooled.transpose(0, 3, 1, 2).reshape(n, -1)
    logits = feats @ fc_w.T + fc_b
    shifted = logits - logits.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    probs = exp / exp.sum(axis=1, keepdims=True)
    # backward
    g_logits = probs
    g_logits[np.arange(n), labels] -= 1
    g_logits /= n
    g_fc_w = g_logits.T @ feats
    g_fc_b = g_logits.sum(axis=0)
    g_feats = g_logits @ fc_w
    g_pooled = g_feats.reshape(n, o, h // 2, w // 2).transpose(0, 2, 3, 1)
    mask = r6 == pooled[:, :, None, :, None, :]  # ties only at 0, where the ReLU mask below zeroes them
    g_r = (mask * g_pooled[:, :, None, :, None, :]).reshape(n * h * w, o)
    g_z = g_r * (z > 0)
    g_conv_w = (g_z.T @ cols).reshape(conv_w.shape)
    g_conv_b = g_z.sum(axis=0)
    return g_conv_w, g_conv_b, g_fc_w, g_fc_b


# ---------------------------------------------------------------------------
# Peers, each as its library expresses the step.


def autograd_loss(anp):
    """The step in ``autograd.numpy``: im2col by nine shifted slices (no sliding windows in autograd)."""

    def loss(conv_w, conv_b, fc_w, fc_b, x, labels):
        n, c, h, w = x.shape
        padded = anp.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        cols = anp.stack([padded[:, 0, i:i + h, j:j + w] for i in range(3) for j in range(3)], axis=-1)
        z = anp.dot(cols, anp.reshape(conv_w, (conv_w.shape[0], 9)).T) + conv_b  # (n, h, w, o)
        r = anp.maximum(z, 0)
        pooled = anp.max(anp.reshape(r, (n, h // 2, 2, w // 2, 2, -1)), axis=(2, 4))
        feats = anp.reshape(anp.transpose(pooled, (0, 3, 1, 2)), (n, -1))
        logits = anp.dot(feats, fc_w.T) + fc_b
        shifted = logits - anp.max(logits, axis=1, keepdims=True)
        logp = shifted - anp.log(anp.sum(anp.exp(shifted), axis=1, keepdims=True))
        return -anp.mean(logp[anp.arange(n), labels])

    return loss


def torch_loss(torch):
    """The step in PyTorch: ``F.conv2d``, ``relu``, ``max_pool2d``, ``linear``, ``cross_entropy``."""
    import torch.nn.functional as F

    def loss(conv_w, conv_b, fc_w, fc_b, x, labels):
        h = F.max_pool2d(F.relu(F.conv2d(x, conv_w, conv_b, padding=1)), 2)
        return F.cross_entropy(F.linear(h.flatten(1), fc_w, fc_b), labels)

    return loss


def jax_loss(jax, jnp):
    """The step in JAX: ``lax.conv_general_dilated``, ``reduce_window`` max pool, ``log_softmax``."""
    lax = jax.lax

    def loss(conv_w, conv_b, fc_w, fc_b, x, labels):
        z = lax.conv_general_dilated(x, conv_w, (1, 1), ((1, 1), (1, 1))) + conv_b[:, None, None]
        r = jax.nn.relu(z)
        pooled = lax.reduce_window(r, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")
        logits = pooled.reshape(pooled.shape[0], -1) @ fc_w.T + fc_b
        logp = jax.nn.log_softmax(logits, axis=1)
        return -jnp.mean(jnp.take_along_axis(logp, labels[:, None], axis=1))

    return loss
