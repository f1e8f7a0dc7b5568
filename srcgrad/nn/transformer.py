"""Attention and the Transformer encoder, with PyTorch's constructor arguments, defaults,
initialisation, shapes, masks and parameter names (``torch.nn.MultiheadAttention``,
``TransformerEncoderLayer``, ``TransformerEncoder``; Vaswani et al. 2017).

Sequences are (L, N, E), or (N, L, E) with ``batch_first``; attention also takes an
unbatched (L, E).  A mask is boolean (True: this position takes no part) or float
(added to the attention scores), as PyTorch's: ``attn_mask`` (L, S) or
(N * num_heads, L, S), ``key_padding_mask`` (N, S).  A boolean mask becomes a float
one of 0 and -inf, added to the scores; a query whose keys are all masked gets NaN, as
in PyTorch.
"""
from __future__ import annotations

import copy
import math

import numpy as np

from . import functional as F
from . import init
from .layers import Dropout, LayerNorm, Linear
from .module import Module


def _float_mask(mask, dtype):
    """A boolean mask as 0 where False and -inf where True (PyTorch's ``_canonical_mask``), a
    float mask as it is, in ``dtype`` (the query's: a float64 mask keeps a float32 model float32)."""
    if mask.dtype == np.bool_:
        return np.where(mask, -np.inf, 0.0).astype(dtype)
    return mask.astype(dtype)


def _causal_hint_without_mask():
    """PyTorch's condition: ``is_causal`` is a hint that ``attn_mask`` is the causal mask,
    which is then applied as given (a call, not a ``raise`` in the forward: library code with
    a ``raise`` is not inlined)."""
    raise RuntimeError("is_causal is a hint that attn_mask is the causal mask: give the mask too "
                       "(nn.generate_square_subsequent_mask(L))")


def generate_square_subsequent_mask(sz, dtype=np.float64):
    """The causal mask (sz, sz): 0 on and below the diagonal, -inf above it (PyTorch's
    ``Transformer.generate_square_subsequent_mask``)."""
    return np.triu(np.full((sz, sz), -np.inf, dtype=dtype), k=1)


class MultiheadAttention(Module):
    """Scaled dot-product attention over ``num_heads`` heads of ``embed_dim // num_heads``
    (Vaswani et al. 2017, §3.2): ``softmax(q k^T / sqrt(head_dim) + mask) v`` per head, the
    heads concatenated and projected by ``out_proj``.

    Args:
        embed_dim, num_heads: the query's width E (divisible by ``num_heads``) and the heads.
        dropout: drop attention weights with this probability while training (from ``rng``,
            as :class:`Dropout`; ``Module.set_rng``).
        bias: biases of the projections (``in_proj_bias`` (3E,), ``out_proj.bias``).
        add_bias_kv: learnt ``bias_k``, ``bias_v`` (1, 1, E) appended to the keys and values.
        add_zero_attn: a key and a value of zeros appended (after the heads are split).
        kdim, vdim: the key's and value's widths (default E); where either differs from E the
            projections are ``q_proj_weight`` (E, E), ``k_proj_weight`` (E, kdim) and
            ``v_proj_weight`` (E, vdim) instead of ``in_proj_weight`` (3E, E).
        batch_first: sequences (N, L, E) rather than (L, N, E).

    Initialisation as PyTorch's: the input projections Xavier-uniform, the biases zeros,
    ``out_proj.weight`` as :class:`Linear`'s, ``bias_k``/``bias_v`` Xavier-normal.

    ``forward(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True, is_causal=False)`` returns ``(output, weights)``: output as
    the query, (L, N, E); weights None unless ``need_weights``, else the attention
    weights (after dropout) averaged over the heads, (N, L, S), or per head
    (N, num_heads, L, S) where not ``average_attn_weights``.  ``is_causal`` is a hint that
    ``attn_mask`` is the causal mask (which is applied as given, and must be given).
    """

    _constant_fields = ("dropout",)  # (a hyper-parameter: read as a constant, no gradient)
    draws_random = True  # (attention dropout: Module.set_rng)

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False, add_zero_attn=False,
                 kdim=None, vdim=None, batch_first=False, dtype=np.float64, rng=None):
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} "
                             f"and num_heads={num_heads}")
        if embed_dim % num_heads:
            raise ValueError(f"embed_dim ({embed_dim}) must be divisible by num_heads ({num_heads})")
        gen = rng or init.generator()
        self.embed_dim, self.num_heads, self.head_dim = embed_dim, num_heads, embed_dim // num_heads
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.dropout, self.batch_first, self.add_zero_attn = dropout, batch_first, add_zero_attn
        if self._qkv_same_embed_dim:
            self.in_proj_weight = init.xavier_uniform((3 * embed_dim, embed_dim), dtype=dtype, rng=gen)
            self.q_proj_weight = self.k_proj_weight = self.v_proj_weight = None
        else:
            self.q_proj_weight = init.xavier_uniform((embed_dim, embed_dim), dtype=dtype, rng=gen)
            self.k_proj_weight = init.xavier_uniform((embed_dim, self.kdim), dtype=dtype, rng=gen)
            self.v_proj_weight = init.xavier_uniform((embed_dim, self.vdim), dtype=dtype, rng=gen)
            self.in_proj_weight = None
        self.in_proj_bias = np.zeros(3 * embed_dim, dtype=dtype) if bias else None
        if add_bias_kv:  # (set before out_proj: PyTorch lists a module's own parameters first)
            self.bias_k = init.xavier_normal((1, 1, embed_dim), dtype=dtype, rng=gen)
            self.bias_v = init.xavier_normal((1, 1, embed_dim), dtype=dtype, rng=gen)
        else:
            self.bias_k = self.bias_v = None
        self.out_proj = Linear(embed_dim, embed_dim, bias=bias, dtype=dtype, rng=gen)
        if bias:
            self.out_proj.bias[...] = 0
        self.rng = gen

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        if is_causal and attn_mask is None:
            _causal_hint_without_mask()
        batched = query.ndim == 3
        if not batched:  # (L, E): a batch of one (``batch_first`` is ignored, as PyTorch's)
            query, key, value = query[:, None], key[:, None], value[:, None]
            if key_padding_mask is not None:
                key_padding_mask = key_padding_mask[None]
        elif self.batch_first:
            query, key, value = np.swapaxes(query, 0, 1), np.swapaxes(key, 0, 1), np.swapaxes(value, 0, 1)
        target, n, e = query.shape
        heads, width = self.num_heads, self.head_dim
        # The projections (L, N, E) @ (E, E)^T: the packed weight's rows are q's, k's, v's.
        if self.in_proj_weight is not None:
            w_q, w_k, w_v = np.split(self.in_proj_weight, 3)
        else:
            w_q, w_k, w_v = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight
        q, k, v = query @ w_q.T, key @ w_k.T, value @ w_v.T
        if self.in_proj_bias is not None:
            b_q, b_k, b_v = np.split(self.in_proj_bias, 3)
            q, k, v = q + b_q, k + b_k, v + b_v
        # The masks, as one float mask added to the scores, (N or 1, heads or 1, L, S).
        mask = None
        if attn_mask is not None:
            mask = _float_mask(attn_mask, query.dtype)
            if mask.ndim == 3:
                mask = np.reshape(mask, (n, heads, mask.shape[1], mask.shape[2]))
        if key_padding_mask is not None:
            padding = _float_mask(key_padding_mask, query.dtype)
            padding = np.reshape(padding, (n, 1, 1, padding.shape[-1]))
            if mask is None:
                mask = padding
            else:
                mask = mask + padding
        if self.bias_k is not None:  # one more key and value, attended to through any mask
            k = np.concatenate([k, self.bias_k + np.zeros((1, n, e), dtype=k.dtype)])
            v = np.concatenate([v, self.bias_v + np.zeros((1, n, e), dtype=v.dtype)])
            if mask is not None:
                mask = np.concatenate([mask, np.zeros(mask.shape[:-1] + (1,), dtype=mask.dtype)], axis=-1)
        # Heads: q (N, heads, L, width), k^T (N, heads, width, S), v (N, heads, S, width).
        q = np.transpose(np.reshape(q, (target, n, heads, width)), (1, 2, 0, 3))
        k = np.transpose(np.reshape(k, (k.shape[0], n, heads, width)), (1, 2, 3, 0))
        v = np.transpose(np.reshape(v, (v.shape[0], n, heads, width)), (1, 2, 0, 3))
        if self.add_zero_attn:
            k = np.concatenate([k, np.zeros((n, heads, width, 1), dtype=k.dtype)], axis=-1)
            v = np.concatenate([v, np.zeros((n, heads, 1, width), dtype=v.dtype)], axis=-2)
            if mask is not None:
                mask = np.concatenate([mask, np.zeros(mask.shape[:-1] + (1,), dtype=mask.dtype)], axis=-1)
        scores = (q * (1 / math.sqrt(width))) @ k  # (N, heads, L, S)
        if mask is not None:
            scores = scores + mask
        weights = F.softmax(scores, -1)
        if self.training and self.dropout > 0:
            weights = weights * (self.rng.random(weights.shape) >= self.dropout) / (1 - self.dropout)
        heads_out = weights @ v  # (N, heads, L, width)
        out = self.out_proj(np.reshape(np.transpose(heads_out, (2, 0, 1, 3)), (target, n, e)))
        if not batched:
            out = out[:, 0]
        elif self.batch_first:
            out = np.swapaxes(out, 0, 1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = np.mean(weights, axis=1)
        if not batched:
            weights = weights[0]
        return out, weights

    def extra_repr(self):
        return f"embed_dim={self.embed_dim}, num_heads={self.num_heads}"


def _activation(activation):
    """``"relu"``/``"gelu"`` as the function (PyTorch's ``_get_activation_fn``), a callable as it is."""
    if activation == "relu":
        return F.relu
    if activation == "gelu":
        return F.gelu
    if isinstance(activation, str):
        raise ValueError(f"activation should be relu/gelu, not {activation}")
    return activation


class TransformerEncoderLayer(Module):
    """Self-attention then a feed-forward network, each inside a residual connection with
    layer normalisation (Vaswani et al. 2017, §3.1; PyTorch's ``TransformerEncoderLayer``)::

        x = norm1(x + dropout1(self_attn(x, x, x)))           # norm_first=False (post-norm)
        x = norm2(x + dropout2(linear2(dropout(activation(linear1(x))))))

    or, with ``norm_first``, ``x = x + dropout1(self_attn(norm1(x)))`` and
    ``x = x + dropout2(ff(norm2(x)))`` (Xiong et al. 2020).

    Args:
        d_model, nhead: the width and the attention's heads.
        dim_feedforward: the feed-forward network's hidden width.
        dropout: every dropout's probability (the attention's too).
        activation: ``"relu"``, ``"gelu"`` or a callable (a function or a layer).
        layer_norm_eps, batch_first, norm_first, bias: as PyTorch's.

    ``forward(src, src_mask=None, src_key_padding_mask=None, is_causal=False)``: the
    masks as :class:`MultiheadAttention`'s ``attn_mask`` and ``key_padding_mask``.
    """

    def __init__(self, d_model, nhead, dim_feedforward=2048, dropout=0.1, activation="relu",
                 layer_norm_eps=1e-5, batch_first=False, norm_first=False, bias=True, dtype=np.float64,
                 rng=None):
        self.self_attn = MultiheadAttention(d_model, nhead, dropout=dropout, bias=bias,
                                            batch_first=batch_first, dtype=dtype, rng=rng)
        self.linear1 = Linear(d_model, dim_feedforward, bias=bias, dtype=dtype, rng=rng)
        self.dropout = Dropout(dropout, rng=rng)
        self.linear2 = Linear(dim_feedforward, d_model, bias=bias, dtype=dtype, rng=rng)
        self.norm_first = norm_first
        self.norm1 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.norm2 = LayerNorm(d_model, eps=layer_norm_eps, bias=bias, dtype=dtype)
        self.dropout1 = Dropout(dropout, rng=rng)
        self.dropout2 = Dropout(dropout, rng=rng)
        self.activation = _activation(activation)

    def forward(self, src, src_mask=None, src_key_padding_mask=None, is_causal=False):
        x = src
        if self.norm_first:
            x = x + self._sa_block(self.norm1(x), src_mask, src_key_padding_mask, is_causal)
            x = x + self._ff_block(self.norm2(x))
        else:
            x = self.norm1(x + self._sa_block(x, src_mask, src_key_padding_mask, is_causal))
            x = self.norm2(x + self._ff_block(x))
        return x

    def _sa_block(self, x, attn_mask, key_padding_mask, is_causal):
        out, _ = self.self_attn(x, x, x, attn_mask=attn_mask, key_padding_mask=key_padding_mask,
                                need_weights=False, is_causal=is_causal)
        return self.dropout1(out)

    def _ff_block(self, x):
        return self.dropout2(self.linear2(self.dropout(self.activation(self.linear1(x)))))


class TransformerEncoder(Module):
    """``num_layers`` copies of ``encoder_layer`` (deep copies, as PyTorch's: each its own
    parameters, ``layers.0.self_attn.in_proj_weight``), applied in order, then ``norm`` (a
    layer, or None).  The copies' dropout draws from the generator the layer drew from (the
    generator is shared, not copied: copies of it would draw the same masks).

    ``forward(src, mask=None, src_key_padding_mask=None, is_causal=None)``: the masks as
    :class:`TransformerEncoderLayer`'s, given to every layer.
    """

    def __init__(self, encoder_layer, num_layers, norm=None, enable_nested_tensor=True, mask_check=True):
        shared = {id(m.rng): m.rng for m in encoder_layer.modules() if getattr(m, "draws_random", False)}
        self.layers = [copy.deepcopy(encoder_layer, dict(shared)) for _ in range(num_layers)]
        self.num_layers = num_layers
        self.norm = norm
        self.enable_nested_tensor, self.mask_check = enable_nested_tensor, mask_check

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=mask, src_key_padding_mask=src_key_padding_mask,
                           is_causal=bool(is_causal))
        if self.norm is not None:
            output = self.norm(output)
        return output
