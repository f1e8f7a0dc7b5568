"""Attention and the Transformer encoder without PyTorch: gradients against finite
differences (float64) with masks, dropout (a fixed mask) and the options; float32 in,
float32 out, agreeing with float64; arguments refused as PyTorch refuses them.  (Against
PyTorch's values and gradients: test_nn_attention_torch.py.)"""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad import nn
from srcgrad.nn import functional as F
from srcgrad.testing import check_grads

rng = np.random.default_rng(41)


class FixedDraws:
    """A generator whose ``random(shape)`` draws the same numbers at every call (a fixed dropout
    mask: finite differences of a layer in training mode then see one function)."""

    def __init__(self, seed):
        self.seed = seed

    def random(self, shape):
        return np.random.default_rng(self.seed).random(shape)


def attention_loss(mha, query, key, value, options):
    out, weights = mha(query, key, value, **options)
    total = np.sum(np.sin(out))
    if weights is not None:
        total = total + np.sum(weights * np.arange(weights.size).reshape(weights.shape))
    return total


PADDING = np.array([[False, False, True], [False, False, False]])
CAUSAL = np.triu(np.ones((4, 3), dtype=bool), k=1)
ATTENTION = {
    "masks": ({}, {"attn_mask": CAUSAL, "key_padding_mask": PADDING}),
    "float-masks-per-head": ({}, {"attn_mask": rng.standard_normal((4, 4, 3)), "average_attn_weights": False,
                                  "key_padding_mask": rng.standard_normal((2, 3))}),
    "kdim-vdim-bias-kv-zero-attn": ({"kdim": 3, "vdim": 5, "add_bias_kv": True, "add_zero_attn": True},
                                    {"key_padding_mask": PADDING}),
    "batch-first-no-bias": ({"batch_first": True, "bias": False}, {"need_weights": False}),
}


@pytest.mark.parametrize("name", ATTENTION)
def test_multihead_attention_gradients_match_finite_differences(name):
    options, forward = ATTENTION[name]
    mha = nn.MultiheadAttention(4, 2, rng=np.random.default_rng(0), **options)
    for p in (mha.in_proj_bias, mha.out_proj.bias):
        if p is not None:
            p[...] = rng.standard_normal(p.shape)  # (zeros at first)
    first = options.get("batch_first", False)
    query = rng.standard_normal((2, 4, 4) if first else (4, 2, 4))
    key = rng.standard_normal((2, 3, options.get("kdim", 4)) if first else (3, 2, options.get("kdim", 4)))
    value = rng.standard_normal((2, 3, options.get("vdim", 4)) if first else (3, 2, options.get("vdim", 4)))
    check_grads(attention_loss, (mha, query, key, value, forward), wrt=(0, 1, 2, 3))


def test_attention_dropout_gradient_matches_finite_differences_for_a_fixed_mask():
    mha = nn.MultiheadAttention(4, 2, dropout=0.4, rng=np.random.default_rng(1))
    mha.rng = FixedDraws(3)
    x = rng.standard_normal((3, 2, 4))
    mask = np.triu(np.ones((3, 3), dtype=bool), 1)
    check_grads(attention_loss, (mha, x, x, x, {"attn_mask": mask}), wrt=(0, 1))


def test_attention_dropout_drops_and_scales_the_weights_while_training():
    mha = nn.MultiheadAttention(4, 2, dropout=0.5, rng=np.random.default_rng(2))
    x = rng.standard_normal((5, 3, 4))
    kept = mha.eval()(x, x, x, average_attn_weights=False)[1]
    dropped = mha.train()(x, x, x, average_attn_weights=False)[1]
    assert (dropped == 0).any() and (dropped != 0).any()
    np.testing.assert_allclose(dropped[dropped != 0], 2 * kept[dropped != 0], rtol=1e-12)
    assert mha.train()(x, x, x, need_weights=False)[1] is None


def test_unbatched_attention_is_a_batch_of_one():
    mha = nn.MultiheadAttention(4, 2, batch_first=True, rng=np.random.default_rng(3))
    q, kv = rng.standard_normal((5, 4)), rng.standard_normal((3, 4))
    padding = np.array([False, True, False])
    out, weights = mha(q, kv, kv, key_padding_mask=padding)
    batch_out, batch_weights = mha(q[None], kv[None], kv[None], key_padding_mask=padding[None])
    np.testing.assert_allclose(out, batch_out[0], rtol=1e-12)
    np.testing.assert_allclose(weights, batch_weights[0], rtol=1e-12)
    assert not weights[:, 1].any()  # a padding key gets no attention


def encoder_loss(encoder, x, mask):
    return np.sum(np.tanh(encoder(x, mask)) * np.arange(x.size).reshape(x.shape) / x.size)


@pytest.mark.parametrize("mode", ["eval", "train-fixed-dropout"])
@pytest.mark.parametrize("norm_first", [False, True], ids=["post-norm", "pre-norm"])
def test_transformer_encoder_gradients_match_finite_differences(norm_first, mode):
    layer = nn.TransformerEncoderLayer(4, 2, 6, dropout=0.3, activation="gelu", norm_first=norm_first,
                                       rng=np.random.default_rng(4))
    encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(4))
    for name, p in encoder.named_parameters():  # (norms start at ones and zeros: move them)
        p += 0.1 * rng.standard_normal(p.shape)
    if mode == "eval":
        encoder.eval()
    else:
        for module in encoder.modules():
            if getattr(module, "draws_random", False):
                module.rng = FixedDraws(5)
    x = rng.standard_normal((3, 2, 4))
    check_grads(encoder_loss, (encoder, x, nn.generate_square_subsequent_mask(3)), wrt=(0, 1))


def squared_sine(model, x):
    return np.sum(np.sin(model(x)) ** 2)


@pytest.mark.parametrize("make, shape", [
    (lambda dtype: nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 6, 0.0, dtype=dtype), 2,
                                         norm=nn.LayerNorm(4, dtype=dtype)), (3, 2, 4)),
], ids=["transformer-encoder"])
def test_float32_stays_float32_and_matches_float64(make, shape):
    model32, model64 = make(np.float32), make(np.float64)
    model64.load_state_dict(model32.state_dict())
    x = rng.standard_normal(shape)
    g32, gx32 = srcgrad.grad(squared_sine, wrt=(0, 1))(model32, x.astype(np.float32))
    g64, gx64 = srcgrad.grad(squared_sine, wrt=(0, 1))(model64, x)
    assert model32(x.astype(np.float32)).dtype == np.float32 and gx32.dtype == np.float32
    np.testing.assert_allclose(gx32, gx64, rtol=1e-3, atol=1e-4)
    for (name, a), (_, b) in zip(g32.named_parameters(), g64.named_parameters()):
        assert a.dtype == np.float32, name
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4, err_msg=name)


def masked_attention_loss(mha, x, mask):
    return np.sum(mha(x, x, x, attn_mask=mask)[0] ** 2)


@pytest.mark.parametrize("kind", ["bool", "float64"])
def test_float32_attention_with_a_mask_stays_float32(kind):
    mha = nn.MultiheadAttention(4, 2, dtype=np.float32)
    x, mask = rng.standard_normal((3, 2, 4)).astype(np.float32), np.triu(np.ones((3, 3), dtype=bool), 1)
    if kind == "float64":
        mask = nn.generate_square_subsequent_mask(3)
    out, weights = mha(x, x, x, attn_mask=mask)
    assert out.dtype == weights.dtype == np.float32
    g_model, g_x = srcgrad.grad(masked_attention_loss, wrt=(0, 1))(mha, x, mask)
    assert g_x.dtype == g_model.in_proj_weight.dtype == g_model.out_proj.bias.dtype == np.float32


def test_causal_mask_is_pytorchs():
    mask = nn.generate_square_subsequent_mask(3)
    np.testing.assert_array_equal(mask, [[0, -np.inf, -np.inf], [0, 0, -np.inf], [0, 0, 0]])


@pytest.mark.parametrize("make, error, match", [
    (lambda: nn.MultiheadAttention(6, 4), ValueError, "divisible by num_heads"),
    (lambda: nn.MultiheadAttention(0, 1), ValueError, "greater than 0"),
    (lambda: nn.TransformerEncoderLayer(4, 2, activation="tanh"), ValueError, "relu/gelu"),
])
def test_unsupported_arguments_are_refused_at_construction(make, error, match):
    with pytest.raises(error, match=match):
        make()


def test_is_causal_without_a_mask_is_refused_as_pytorch():
    mha = nn.MultiheadAttention(4, 2)
    x = rng.standard_normal((3, 2, 4))
    with pytest.raises(RuntimeError, match="is_causal"):
        mha(x, x, x, is_causal=True)


def test_encoder_gradient_is_one_inlined_function():
    encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(4, 2, 6), 1)
    x = rng.standard_normal((3, 2, 4))
    source = srcgrad.source(srcgrad.grad(encoder_loss), encoder, x, nn.generate_square_subsequent_mask(3))
    assert "dispatch.vjp_call(encoder" not in source
