"""Recurrent cells and layers against PyTorch (skipped without it): the same weights
(loaded from the torch layer's ``state_dict``, so parameter names must match),
outputs, final states and the gradients of every parameter, of the input and of the
initial state, in float64 at 1e-7; a cell stepped in a Python loop and float32
against finite differences."""
from __future__ import annotations

import numpy as np
import pytest

import srcgrad
from srcgrad import nn, optim
from srcgrad.testing import check_grads

torch = pytest.importorskip("torch")
from tests.nn.torch_oracle import check_against_torch  # noqa: E402

rng = np.random.default_rng(7)
tnn = torch.nn

LAYERS = {
    "RNN": (lambda: nn.RNN(3, 4), lambda: tnn.RNN(3, 4), (5, 2, 3)),
    "RNN-relu-2-layers": (lambda: nn.RNN(3, 4, 2, nonlinearity="relu"),
                          lambda: tnn.RNN(3, 4, 2, nonlinearity="relu"), (4, 2, 3)),
    "RNN-bidirectional-batch-first": (lambda: nn.RNN(3, 2, batch_first=True, bidirectional=True),
                                      lambda: tnn.RNN(3, 2, batch_first=True, bidirectional=True), (2, 5, 3)),
    "LSTM": (lambda: nn.LSTM(3, 4), lambda: tnn.LSTM(3, 4), (5, 2, 3)),
    "LSTM-2-layers-bidirectional": (lambda: nn.LSTM(3, 4, num_layers=2, bidirectional=True),
                                    lambda: tnn.LSTM(3, 4, num_layers=2, bidirectional=True), (4, 3, 3)),
    "LSTM-batch-first-no-bias": (lambda: nn.LSTM(2, 3, batch_first=True, bias=False),
                                 lambda: tnn.LSTM(2, 3, batch_first=True, bias=False), (2, 6, 2)),
    "GRU": (lambda: nn.GRU(3, 4), lambda: tnn.GRU(3, 4), (5, 2, 3)),
    "GRU-3-layers-batch-first": (lambda: nn.GRU(2, 3, num_layers=3, batch_first=True),
                                 lambda: tnn.GRU(2, 3, num_layers=3, batch_first=True), (3, 4, 2)),
    "GRU-bidirectional": (lambda: nn.GRU(3, 2, bidirectional=True), lambda: tnn.GRU(3, 2, bidirectional=True),
                          (4, 2, 3)),
    "RNNCell": (lambda: nn.RNNCell(3, 4), lambda: tnn.RNNCell(3, 4), (5, 3)),
    "RNNCell-relu-no-bias": (lambda: nn.RNNCell(3, 2, bias=False, nonlinearity="relu"),
                             lambda: tnn.RNNCell(3, 2, bias=False, nonlinearity="relu"), (4, 3)),
    "LSTMCell": (lambda: nn.LSTMCell(3, 4), lambda: tnn.LSTMCell(3, 4), (5, 3)),
    "GRUCell": (lambda: nn.GRUCell(3, 4), lambda: tnn.GRUCell(3, 4), (5, 3)),
}


@pytest.mark.parametrize("name", LAYERS)
def test_recurrent_layer_matches_pytorch(name):
    ours, theirs, shape = LAYERS[name]
    torch.manual_seed(1)
    torch_layer, layer = theirs(), ours()
    assert list(layer.state_dict()) == list(torch_layer.state_dict())
    check_against_torch(layer, torch_layer, rng.standard_normal(shape), torch)


def run_with_state(layer, x, state, bars):
    """A scalar from the layer's outputs, given its initial state."""
    if isinstance(layer, nn.LSTM):
        out, (h, c) = layer(x, state)
        return np.sum(out * bars[0]) + np.sum(h * bars[1]) + np.sum(c * bars[2])
    out, h = layer(x, state)
    return np.sum(out * bars[0]) + np.sum(h * bars[1])


@pytest.mark.parametrize("kind", ["GRU", "LSTM", "RNN"])
def test_initial_state_gradient_matches_pytorch(kind):
    torch.manual_seed(2)
    theirs = getattr(tnn, kind)(3, 4, num_layers=2, bidirectional=True).double()
    ours = getattr(nn, kind)(3, 4, num_layers=2, bidirectional=True)
    ours.load_state_dict(theirs.state_dict())
    x = rng.standard_normal((5, 2, 3))
    states = [rng.standard_normal((4, 2, 4)) for _ in range(2 if kind == "LSTM" else 1)]
    state = tuple(states) if kind == "LSTM" else states[0]
    bars = [rng.standard_normal((5, 2, 8))] + [rng.standard_normal((4, 2, 4)) for _ in states]
    g_layer, g_state = srcgrad.grad(run_with_state, wrt=(0, 2))(ours, x, state, bars)
    tstates = [torch.tensor(s, requires_grad=True) for s in states]
    out, final = theirs(torch.tensor(x), tuple(tstates) if kind == "LSTM" else tstates[0])
    finals = list(final) if kind == "LSTM" else [final]
    total = (out * torch.tensor(bars[0])).sum() + sum((f * torch.tensor(b)).sum() for f, b in zip(finals, bars[1:]))
    total.backward()
    np.testing.assert_allclose(run_with_state(ours, x, state, bars), total.item(), rtol=1e-10)
    got_states = g_state if kind == "LSTM" else (g_state,)
    for got, want in zip(got_states, tstates):
        np.testing.assert_allclose(got, want.grad.numpy(), rtol=1e-7, atol=1e-10)
    grads = dict(g_layer.named_parameters())
    for name, p in theirs.named_parameters():
        np.testing.assert_allclose(grads[name], p.grad.numpy(), rtol=1e-7, atol=1e-10, err_msg=name)


def lstm_cell_loop(cell, xs):
    """A cell stepped over a sequence in a Python loop, its state a pair."""
    state = None
    total = 0.0
    for t in range(len(xs)):
        state = cell(xs[t], state)
        total = total + np.sum(state[0] ** 2)
    return total + np.sum(np.sin(state[1]))


def gru_cell_loop(cell, xs):
    h = np.zeros((xs.shape[1], cell.hidden_size))
    for x in xs:
        h = cell(x, h)
    return np.sum(np.tanh(h) * np.arange(h.size).reshape(h.shape))


@pytest.mark.parametrize("fn, make", [(lstm_cell_loop, lambda: nn.LSTMCell(3, 4)),
                                      (gru_cell_loop, lambda: nn.GRUCell(3, 4))], ids=["LSTMCell", "GRUCell"])
def test_cell_in_a_loop_matches_finite_differences(fn, make):
    check_grads(fn, (make(), rng.standard_normal((4, 2, 3))), wrt=(0, 1))


def lstm_head(model, x):
    out, (h, c) = model(x)
    return np.sum(out[-1] ** 2) + np.sum(c)


def test_float32_lstm_stays_float32_and_matches_float64():
    model32 = nn.LSTM(3, 4, num_layers=2, dtype=np.float32)
    model64 = nn.LSTM(3, 4, num_layers=2)
    model64.load_state_dict(model32.state_dict())
    x = rng.standard_normal((5, 2, 3))
    g32, gx32 = srcgrad.grad(lstm_head, wrt=(0, 1))(model32, x.astype(np.float32))
    g64, gx64 = srcgrad.grad(lstm_head, wrt=(0, 1))(model64, x)
    assert gx32.dtype == np.float32
    np.testing.assert_allclose(gx32, gx64, rtol=1e-3, atol=1e-4)
    for (name, a), (_, b) in zip(g32.named_parameters(), g64.named_parameters()):
        assert a.dtype == np.float32, name
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4, err_msg=name)


def test_dropout_between_layers_only_while_training():
    model = nn.GRU(3, 4, num_layers=2, dropout=0.5).set_rng(0)
    x = rng.standard_normal((4, 2, 3))
    first, second = model(x)[0], model(x)[0]
    assert not np.allclose(first, second)  # a new mask each call
    model.eval()
    np.testing.assert_array_equal(model(x)[0], model(x)[0])
    check_grads(lambda m, x: np.sum(m(x)[0] ** 2), (model, x), wrt=(0, 1))


def test_parameter_names_and_initialisation_are_pytorchs():
    model = nn.LSTM(5, 10, num_layers=2, bidirectional=True, rng=np.random.default_rng(0))
    theirs = tnn.LSTM(5, 10, num_layers=2, bidirectional=True)
    assert [n for n, _ in model.named_parameters()] == [n for n, _ in theirs.named_parameters()]
    for (name, ours), (_, want) in zip(model.named_parameters(), theirs.named_parameters()):
        assert ours.shape == tuple(want.shape), name
        assert np.abs(ours).max() <= 1 / np.sqrt(10) and np.abs(ours).max() > 0.8 / np.sqrt(10)


class Tagger(nn.Module):
    """A PyTorch user's sequence classifier: embedding, LSTM, layer norm, linear."""

    def __init__(self):
        self.embed = nn.Embedding(10, 4, padding_idx=0)
        self.lstm = nn.LSTM(4, 5, batch_first=True, num_layers=2)
        self.norm = nn.LayerNorm(5)
        self.out = nn.Linear(5, 3)

    def forward(self, tokens):
        h, _ = self.lstm(self.embed(tokens))
        return self.out(self.norm(h[:, -1]))


def tagger_loss(model, tokens, labels):
    return nn.cross_entropy(model(tokens), labels)


def test_a_text_model_trains_as_pytorchs():
    """The same weights, then three SGD steps each: losses and weights as PyTorch's."""
    tnn_model = tnn.ModuleDict({"embed": tnn.Embedding(10, 4, padding_idx=0),
                                "lstm": tnn.LSTM(4, 5, batch_first=True, num_layers=2),
                                "norm": tnn.LayerNorm(5), "out": tnn.Linear(5, 3)}).double()
    model = Tagger()
    model.load_state_dict(tnn_model.state_dict())
    tokens, labels = rng.integers(0, 10, (4, 6)), np.array([0, 2, 1, 2])
    opt, topt = optim.SGD(model, lr=0.5, momentum=0.9), torch.optim.SGD(tnn_model.parameters(), lr=0.5, momentum=0.9)
    for _ in range(3):
        loss, grads = srcgrad.value_and_grad(tagger_loss)(model, tokens, labels)
        opt.step(grads)
        topt.zero_grad()
        h, _ = tnn_model["lstm"](tnn_model["embed"](torch.tensor(tokens)))
        tloss = torch.nn.functional.cross_entropy(tnn_model["out"](tnn_model["norm"](h[:, -1])), torch.tensor(labels))
        tloss.backward()
        topt.step()
        np.testing.assert_allclose(loss, tloss.item(), rtol=1e-10)
    for name, value in tnn_model.state_dict().items():
        np.testing.assert_allclose(model.state_dict()[name], value.numpy(), rtol=1e-8, atol=1e-10, err_msg=name)
