"""Attention and the Transformer encoder against PyTorch (the oracle, skipped without it):
the same weights loaded into both (``load_state_dict`` of the torch module's
``state_dict``, so parameter names must match), outputs and the gradients of a scalar of
the outputs with respect to the inputs and every parameter, in float64 at 1e-7, in eval
mode and in train mode with dropout 0; boolean and float masks; and a small Transformer
language model (Embedding, a positional-encoding buffer, TransformerEncoder, Linear,
cross-entropy) differentiated whole."""
from __future__ import annotations

import math

import numpy as np
import pytest

import srcgrad
from srcgrad import nn
from srcgrad.nn import functional as F

torch = pytest.importorskip("torch")
from tests.nn.torch_oracle import check_against_torch  # noqa: E402

rng = np.random.default_rng(31)
tnn = torch.nn


def as_torch(value):
    return torch.tensor(value) if isinstance(value, np.ndarray) else value


def perturbed(torch_module):
    """The module in float64 with every parameter moved off its initial value (biases start at
    zero, norms at one: moved so that each counts)."""
    torch_module = torch_module.double()
    with torch.no_grad():
        for p in torch_module.parameters():
            p.add_(0.1 * torch.randn(p.shape, dtype=p.dtype))
    return torch_module


# ---- MultiheadAttention ----------------------------------------------------------------------
def attention_loss(mha, query, key, value, bars, options):
    """A scalar of attention's output and (where returned) weights, whose adjoints are ``bars``."""
    out, weights = mha(query, key, value, **options)
    total = np.sum(out * bars[0])
    if weights is not None:
        total = total + np.sum(weights * bars[1])
    return total


def causal(length, source):
    """A boolean mask (L, S): True above the diagonal (a query may not attend to later keys)."""
    return np.triu(np.ones((length, source), dtype=bool), k=1)


def padding(batch, source):
    """A boolean key padding mask (N, S): the last keys of some sequences are padding (never all)."""
    mask = np.zeros((batch, source), dtype=bool)
    for i in range(batch):
        mask[i, source - i % 3:] = True
    return mask


E, HEADS, L, S, N = 8, 2, 5, 4, 3
ATTENTION = {  # name: (constructor keywords, (query, key, value) shapes, forward keywords)
    "cross": ({}, ((L, N, E), (S, N, E), (S, N, E)), {}),
    "self-batch-first-per-head": ({"batch_first": True}, "self", {"average_attn_weights": False}),
    "bool-masks": ({}, ((L, N, E), (L, N, E), (L, N, E)),
                   {"attn_mask": causal(L, L), "key_padding_mask": padding(N, L)}),
    "float-masks-3d": ({}, ((L, N, E), (S, N, E), (S, N, E)),
                       {"attn_mask": rng.standard_normal((N * HEADS, L, S)),
                        "key_padding_mask": rng.standard_normal((N, S))}),
    "float-causal-mask-is-causal": ({}, ((L, N, E), (L, N, E), (L, N, E)),
                                    {"attn_mask": nn.generate_square_subsequent_mask(L), "is_causal": True,
                                     "need_weights": False}),
    "kdim-vdim-no-bias": ({"kdim": 6, "vdim": 3, "bias": False}, ((L, N, E), (S, N, 6), (S, N, 3)), {}),
    "bias-kv-zero-attn-masks": ({"add_bias_kv": True, "add_zero_attn": True},
                                ((L, N, E), (S, N, E), (S, N, E)),
                                {"attn_mask": causal(L, S), "key_padding_mask": padding(N, S)}),
    "unbatched": ({}, ((L, E), (S, E), (S, E)), {"key_padding_mask": np.array([False, False, True, False])}),
    "no-weights": ({"num_heads": 4}, ((L, N, E), (S, N, E), (S, N, E)), {"need_weights": False}),
}


@pytest.mark.parametrize("mode", ["eval", "train-dropout-0"])
@pytest.mark.parametrize("name", ATTENTION)
def test_multihead_attention_matches_pytorch(name, mode):
    options, shapes, forward = ATTENTION[name]
    options = {"embed_dim": E, "num_heads": HEADS, **options}
    torch.manual_seed(0)
    theirs = perturbed(tnn.MultiheadAttention(**options))
    ours = nn.MultiheadAttention(**options)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert [n for n, _ in ours.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    ours.load_state_dict(theirs.state_dict())
    if mode == "eval":
        ours.eval(), theirs.eval()
    if shapes == "self":
        x = rng.standard_normal((N, L, E))
        inputs = (x, x, x)
    else:
        inputs = tuple(rng.standard_normal(shape) for shape in shapes)
    out, weights = ours(*inputs, **forward)
    bars = (rng.standard_normal(out.shape), None if weights is None else rng.standard_normal(weights.shape))

    leaves = [torch.tensor(a, requires_grad=True) for a in inputs[:1 if shapes == "self" else 3]]
    t_inputs = leaves * 3 if shapes == "self" else leaves
    t_out, t_weights = theirs(*t_inputs, **{k: as_torch(v) for k, v in forward.items()})
    assert (t_weights is None) == (weights is None)
    total = (t_out * torch.tensor(bars[0])).sum()
    if t_weights is not None:
        total = total + (t_weights * torch.tensor(bars[1])).sum()
        np.testing.assert_allclose(weights, t_weights.detach().numpy(), rtol=1e-7, atol=1e-9)
    total.backward()
    np.testing.assert_allclose(out, t_out.detach().numpy(), rtol=1e-7, atol=1e-9)

    wrt = (0, 1) if shapes == "self" else (0, 1, 2, 3)
    loss = attention_self_loss if shapes == "self" else attention_loss
    args = (ours, inputs[0], bars, forward) if shapes == "self" else (ours, *inputs, bars, forward)
    np.testing.assert_allclose(loss(*args), total.item(), rtol=1e-10)
    g_model, *g_inputs = srcgrad.grad(loss, wrt=wrt)(*args)
    for got, leaf in zip(g_inputs, leaves):
        np.testing.assert_allclose(got, leaf.grad.numpy(), rtol=1e-7, atol=1e-9)
    grads = dict(g_model.named_parameters())
    for pname, p in theirs.named_parameters():
        np.testing.assert_allclose(grads[pname], p.grad.numpy(), rtol=1e-7, atol=1e-9, err_msg=pname)


def attention_self_loss(mha, x, bars, options):
    """Self-attention: one array as query, key and value (its gradient is the three summed)."""
    return attention_loss(mha, x, x, x, bars, options)


def test_multihead_attention_initialisation_is_pytorchs():
    ours = nn.MultiheadAttention(64, 4, rng=np.random.default_rng(0))
    theirs = tnn.MultiheadAttention(64, 4)
    assert not ours.in_proj_bias.any() and not ours.out_proj.bias.any()
    bound = math.sqrt(6 / (64 + 3 * 64))  # xavier_uniform of (3E, E)
    for w in (ours.in_proj_weight, theirs.in_proj_weight.detach().numpy()):
        assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound
        assert abs(w.std() - bound / math.sqrt(3)) < 0.05 * bound
    separate = nn.MultiheadAttention(8, 2, kdim=5, vdim=3, add_bias_kv=True)
    assert separate.in_proj_weight is None and separate.k_proj_weight.shape == (8, 5)
    assert separate.bias_k.shape == (1, 1, 8)


# ---- TransformerEncoderLayer / TransformerEncoder ---------------------------------------------------
ENCODERS = {  # name: (our module, theirs, input shape)
    "post-norm-relu": (lambda: nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0),
                       lambda: tnn.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0), (5, 3, 8)),
    "pre-norm-gelu-batch-first": (
        lambda: nn.TransformerEncoderLayer(8, 4, 12, 0.0, "gelu", layer_norm_eps=1e-6, batch_first=True,
                                           norm_first=True),
        lambda: tnn.TransformerEncoderLayer(8, 4, 12, 0.0, "gelu", layer_norm_eps=1e-6, batch_first=True,
                                            norm_first=True), (3, 5, 8)),
    "callable-activation-no-bias": (
        lambda: nn.TransformerEncoderLayer(6, 3, 10, 0.0, activation=F.gelu, bias=False),
        lambda: tnn.TransformerEncoderLayer(6, 3, 10, 0.0, activation=torch.nn.functional.gelu, bias=False),
        (4, 2, 6)),
    "layer-activation": (lambda: nn.TransformerEncoderLayer(6, 2, 10, 0.0, activation=nn.GELU("tanh")),
                         lambda: tnn.TransformerEncoderLayer(6, 2, 10, 0.0, activation=tnn.GELU("tanh")),
                         (4, 2, 6)),
    "encoder-2-layers-norm": (
        lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, 0.0), 2, norm=nn.LayerNorm(8)),
        lambda: tnn.TransformerEncoder(tnn.TransformerEncoderLayer(8, 2, 16, 0.0), 2, norm=tnn.LayerNorm(8),
                                       enable_nested_tensor=False), (5, 2, 8)),
    "encoder-3-layers-pre-norm-batch-first": (
        lambda: nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True,
                                                                 norm_first=True), 3),
        lambda: tnn.TransformerEncoder(tnn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True,
                                                                   norm_first=True), 3,
                                       enable_nested_tensor=False), (2, 5, 8)),
}


@pytest.mark.parametrize("mode", ["eval", "train-dropout-0"])
@pytest.mark.parametrize("name", ENCODERS)
def test_transformer_encoder_matches_pytorch(name, mode):
    ours, theirs, shape = ENCODERS[name]
    torch.manual_seed(1)
    torch_module, module = perturbed(theirs()), ours()
    assert list(module.state_dict()) == list(torch_module.state_dict())
    if mode == "eval":
        module.eval(), torch_module.eval()
    check_against_torch(module, torch_module, rng.standard_normal(shape), torch)


def encoder_with_masks(encoder, x, mask, padding_mask, bar):
    return np.sum(encoder(x, mask, padding_mask) * bar)


@pytest.mark.parametrize("kind", ["bool", "float"])
def test_transformer_encoder_masks_match_pytorch(kind):
    torch.manual_seed(2)
    theirs = perturbed(tnn.TransformerEncoder(tnn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True), 2,
                                              enable_nested_tensor=False)).eval()
    ours = nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, 16, 0.0, batch_first=True), 2).eval()
    ours.load_state_dict(theirs.state_dict())
    x, bar = rng.standard_normal((3, 5, 8)), rng.standard_normal((3, 5, 8))
    mask, padding_mask = causal(5, 5), padding(3, 5)
    if kind == "float":
        mask, padding_mask = np.where(mask, -np.inf, 0.0), rng.standard_normal((3, 5))
    xt = torch.tensor(x, requires_grad=True)
    total = (theirs(xt, as_torch(mask), as_torch(padding_mask)) * torch.tensor(bar)).sum()
    total.backward()
    np.testing.assert_allclose(encoder_with_masks(ours, x, mask, padding_mask, bar), total.item(), rtol=1e-10)
    g_model, g_x = srcgrad.grad(encoder_with_masks, wrt=(0, 1))(ours, x, mask, padding_mask, bar)
    np.testing.assert_allclose(g_x, xt.grad.numpy(), rtol=1e-7, atol=1e-9)
    grads = dict(g_model.named_parameters())
    for pname, p in theirs.named_parameters():
        np.testing.assert_allclose(grads[pname], p.grad.numpy(), rtol=1e-7, atol=1e-9, err_msg=pname)


def test_encoder_layers_are_copies_as_pytorchs():
    layer = nn.TransformerEncoderLayer(4, 2, 8)
    encoder = nn.TransformerEncoder(layer, 2)
    theirs = tnn.TransformerEncoder(tnn.TransformerEncoderLayer(4, 2, 8), 2, enable_nested_tensor=False)
    assert [n for n, _ in encoder.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    assert encoder.layers[0] is not layer and encoder.layers[0].linear1.weight is not layer.linear1.weight
    np.testing.assert_array_equal(encoder.layers[1].linear1.weight, layer.linear1.weight)
    # one generator for every dropout, as PyTorch's (copies of a generator would draw the same masks)
    assert encoder.layers[0].dropout1.rng is encoder.layers[1].dropout1.rng is layer.dropout1.rng


# ---- a small Transformer language model ---------------------------------------------------------
def sinusoids(length, width):
    """The positional encoding of Vaswani et al. (2017, §3.5): sin and cos of position / 10000^(2i/d)."""
    position = np.arange(length)[:, None]
    rate = np.exp(np.arange(0, width, 2) * (-math.log(10000.0) / width))
    table = np.zeros((length, width))
    table[:, 0::2], table[:, 1::2] = np.sin(position * rate), np.cos(position * rate)
    return table


class TinyLM(nn.Module):
    def __init__(self, vocab, width, heads, layers, length):
        self.width = width
        self.embed = nn.Embedding(vocab, width)
        self.register_buffer("position", sinusoids(length, width))
        layer = nn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens, mask):
        x = self.embed(tokens) * math.sqrt(self.width) + self.position[:tokens.shape[1]]
        return self.head(self.encoder(x, mask=mask))


class TorchTinyLM(tnn.Module):
    def __init__(self, vocab, width, heads, layers, length):
        super().__init__()
        self.width = width
        self.embed = tnn.Embedding(vocab, width)
        self.register_buffer("position", torch.tensor(sinusoids(length, width)))
        layer = tnn.TransformerEncoderLayer(width, heads, 2 * width, dropout=0.0, batch_first=True)
        self.encoder = tnn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = tnn.Linear(width, vocab)

    def forward(self, tokens, mask):
        x = self.embed(tokens) * math.sqrt(self.width) + self.position[:tokens.shape[1]]
        return self.head(self.encoder(x, mask=mask))


def lm_loss(model, tokens, mask):
    """Next-token cross-entropy of a causal language model."""
    logits = model(tokens[:, :-1], mask)
    return F.cross_entropy(np.reshape(logits, (-1, logits.shape[-1])), np.reshape(tokens[:, 1:], (-1,)))


@pytest.mark.parametrize("mode", ["eval", "train-dropout-0"])
def test_transformer_language_model_gradient_matches_pytorch(mode):
    vocab, width, length = 11, 8, 7
    torch.manual_seed(3)
    theirs = TorchTinyLM(vocab, width, 2, 2, length).double()
    ours = TinyLM(vocab, width, 2, 2, length)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    ours.load_state_dict(theirs.state_dict())
    if mode == "eval":
        ours.eval(), theirs.eval()
    tokens = rng.integers(0, vocab, (3, length))
    mask = nn.generate_square_subsequent_mask(length - 1)
    logits = theirs(torch.tensor(tokens[:, :-1]), torch.tensor(mask))
    targets = torch.tensor(tokens[:, 1:]).reshape(-1)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), targets)
    loss.backward()
    value, g = srcgrad.value_and_grad(lm_loss)(ours, tokens, mask)
    np.testing.assert_allclose(value, loss.item(), rtol=1e-10)
    grads = dict(g.named_parameters())
    assert set(grads) == {name for name, _ in theirs.named_parameters()}
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(grads[name], p.grad.numpy(), rtol=1e-7, atol=1e-10, err_msg=name)
    assert g.position is None  # a buffer: no gradient
