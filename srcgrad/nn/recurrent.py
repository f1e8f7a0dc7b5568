"""Recurrent cells and layers with PyTorch's equations, gate order, shapes and
parameter names (``torch.nn.RNNCell``/``LSTMCell``/``GRUCell``, ``RNN``/``LSTM``/``GRU``).

A cell maps one step: ``x`` (N, input_size), state (N, hidden_size) -> the next
state (unbatched, ``x`` (input_size,) and state (hidden_size,), when the state is
given).  A layer runs cells over a sequence (L, N, input_size), or
(N, L, input_size) with ``batch_first``, layer after layer (and backwards too where
``bidirectional``), returning every step's output of the last layer and each cell's
last state, (num_layers * directions, N, hidden_size).  Every weight and bias is
initialised U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), PyTorch's default.
"""
from __future__ import annotations

import numpy as np

from . import functional as F
from . import init
from .module import Module


def _uniform(gen, bound, shape, dtype):
    return gen.uniform(-bound, bound, shape).astype(dtype)


class _Cell(Module):
    """The four arrays every cell holds: ``weight_ih`` (G hidden, input), ``weight_hh``
    (G hidden, hidden), ``bias_ih`` and ``bias_hh`` (G hidden), G the number of gates."""

    gates = 1

    def __init__(self, input_size, hidden_size, bias=True, dtype=np.float64, rng=None):
        self.input_size, self.hidden_size = input_size, hidden_size
        bound, gen, rows = 1 / np.sqrt(hidden_size), rng or init.generator(), self.gates * hidden_size
        self.weight_ih = _uniform(gen, bound, (rows, input_size), dtype)
        self.weight_hh = _uniform(gen, bound, (rows, hidden_size), dtype)
        self.bias_ih = _uniform(gen, bound, rows, dtype) if bias else None
        self.bias_hh = _uniform(gen, bound, rows, dtype) if bias else None

    def _input_part(self, x):
        z = x @ self.weight_ih.T
        if self.bias_ih is not None:
            z = z + self.bias_ih
        return z

    def _hidden_part(self, h):
        z = h @ self.weight_hh.T
        if self.bias_hh is not None:
            z = z + self.bias_hh
        return z

    def _zeros(self, x):
        """The initial state of a batch ``x`` (N, input_size): zeros (N, hidden_size)."""
        return np.zeros((x.shape[0], self.hidden_size), dtype=x.dtype)

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}"


class RNNCell(_Cell):
    """``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (Elman 1990); ``nonlinearity="relu"``
    for ``max(., 0)``.  ``h`` None: zeros."""

    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", dtype=np.float64, rng=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
        super().__init__(input_size, hidden_size, bias, dtype, rng)
        self.nonlinearity = nonlinearity

    def forward(self, x, h=None):
        if h is None:
            h = self._zeros(x)
        z = self._input_part(x) + self._hidden_part(h)
        if self.nonlinearity == "relu":
            return np.maximum(z, 0)
        return np.tanh(z)


class LSTMCell(_Cell):
    """Long short-term memory (Hochreiter and Schmidhuber 1997, with forget gate, Gers et
    al. 2000), PyTorch's gate order (input, forget, cell, output) in ``weight_ih``'s rows::

        i, f, g, o = split(x W_ih^T + b_ih + h W_hh^T + b_hh)
        c' = sigmoid(f) c + sigmoid(i) tanh(g),   h' = sigmoid(o) tanh(c')

    ``forward(x, (h, c))`` returns ``(h', c')``; the state None: zeros."""

    gates = 4

    def forward(self, x, state=None):
        if state is None:
            h, c = self._zeros(x), self._zeros(x)
        else:
            h, c = state
        z = self._input_part(x) + self._hidden_part(h)
        n = self.hidden_size
        i = F.sigmoid(z[..., :n])
        f = F.sigmoid(z[..., n:2 * n])
        g = np.tanh(z[..., 2 * n:3 * n])
        o = F.sigmoid(z[..., 3 * n:])
        c = f * c + i * g
        return o * np.tanh(c), c


class GRUCell(_Cell):
    """Gated recurrent unit (Cho et al. 2014), PyTorch's form and gate order (reset,
    update, new)::

        r = sigmoid(x W_ir^T + b_ir + h W_hr^T + b_hr),  z = sigmoid(... the same, for z)
        n = tanh(x W_in^T + b_in + r (h W_hn^T + b_hn)),  h' = (1 - z) n + z h

    ``h`` None: zeros."""

    gates = 3

    def forward(self, x, h=None):
        if h is None:
            h = self._zeros(x)
        a, b = self._input_part(x), self._hidden_part(h)
        n = self.hidden_size
        r = F.sigmoid(a[..., :n] + b[..., :n])
        z = F.sigmoid(a[..., n:2 * n] + b[..., n:2 * n])
        new = np.tanh(a[..., 2 * n:] + r * b[..., 2 * n:])
        return (1 - z) * new + z * h


class RNN(Module):
    """A stack of ``num_layers`` recurrent cells run over a sequence (Elman ``RNNCell``s;
    ``LSTM`` and ``GRU`` below swap the cell).

    Args:
        input_size, hidden_size, num_layers, nonlinearity, bias: as PyTorch's.
        batch_first: ``x`` (N, L, input_size) and the output (N, L, ...), else (L, N, ...).
        dropout: drop each layer's output but the last's with this probability while
            training (from ``rng``, as :class:`Dropout`).
        bidirectional: each layer also runs from the last step to the first, its
            outputs concatenated after the forward ones (output ``2 hidden_size`` wide).

    ``forward(x, hx=None)``: ``hx`` (num_layers * directions, N, hidden_size) initial
    states (zeros if None; for ``LSTM`` a pair ``(h_0, c_0)``); returns ``(output, h_n)``
    (``LSTM``: ``(output, (h_n, c_n))``), output (L, N, directions * hidden_size).
    Input is batched (PyTorch's unbatched (L, input_size) is not taken).

    Parameters are named as PyTorch names them, ``weight_ih_l0``, ``bias_hh_l1_reverse``,
    in ``named_parameters`` and ``state_dict``; they are held by one cell per layer and
    direction (``self.cells``).
    """

    cell_class = RNNCell
    lstm = False  # (whether the cells carry a pair of states)
    draws_random = True  # (between-layer dropout: Module.set_rng)
    _constant_fields = ("dropout",)  # (a hyper-parameter: read as a constant, no gradient)
    _flat_items = "cells"  # (its cells' parameters are named as the layer's own, with a suffix)

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0.0, bidirectional=False, dtype=np.float64, rng=None):
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.batch_first, self.dropout, self.bidirectional = batch_first, dropout, bidirectional
        self.rng = rng or init.generator()
        directions = 2 if bidirectional else 1
        self.cells = []
        for layer in range(num_layers):
            for direction in range(directions):
                size = input_size if layer == 0 else hidden_size * directions
                extra = {"nonlinearity": nonlinearity} if self.cell_class is RNNCell else {}
                cell = self.cell_class(size, hidden_size, bias, dtype=dtype, rng=rng, **extra)
                cell._name_suffix = f"_l{layer}" + ("_reverse" if direction else "")
                cell.reverse = direction == 1
                cell.ends_layer = direction == directions - 1  # (the layer's outputs are complete)
                cell.last_layer = layer == num_layers - 1
                self.cells.append(cell)

    def forward(self, x, hx=None):
        output, h_n, _ = self._run(x, hx)
        return output, h_n

    def _run(self, x, hx):
        """``(output, h_n, c_n)``: the layers run over ``x`` (c_n the last cell states of
        LSTM cells, else h_n again)."""
        if self.batch_first:
            x = np.swapaxes(x, 0, 1)
        steps = x.shape[0]
        lstm = self.lstm
        finals, cell_finals, outputs = [], [], []
        k = 0
        for cell in self.cells:
            # (each state reshaped to its (N, hidden_size): the code is compiled knowing its rank)
            size = (x.shape[1], self.hidden_size)
            if hx is None:
                h = np.zeros(size, dtype=x.dtype)
                c = h
            elif lstm:
                h, c = np.reshape(hx[0][k], size), np.reshape(hx[1][k], size)
            else:
                h = np.reshape(hx[k], size)
                c = h
            k = k + 1
            hs = []
            for t in range(steps):
                step = t
                if cell.reverse:
                    step = steps - 1 - t
                if lstm:
                    h, c = cell(x[step], (h, c))
                else:
                    h = cell(x[step], h)
                hs.append(h)
            finals.append(h)
            cell_finals.append(c)
            sequence = np.stack(hs)
            if cell.reverse:
                sequence = sequence[::-1]
            outputs.append(sequence)
            if cell.ends_layer:
                x = np.concatenate(outputs, axis=-1)
                outputs = []
                if self.dropout > 0 and self.training and not cell.last_layer:
                    x = x * (self.rng.random(x.shape) >= self.dropout) / (1 - self.dropout)
        if self.batch_first:
            x = np.swapaxes(x, 0, 1)
        return x, np.stack(finals), np.stack(cell_finals)

    def extra_repr(self):
        return f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}"


class LSTM(RNN):
    """:class:`RNN` of :class:`LSTMCell`s: ``forward(x, (h_0, c_0))`` returns
    ``(output, (h_n, c_n))``."""

    cell_class = LSTMCell
    lstm = True

    def forward(self, x, hx=None):
        output, h_n, c_n = self._run(x, hx)
        return output, (h_n, c_n)

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, dtype=np.float64, rng=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, dtype, rng)


class GRU(RNN):
    """:class:`RNN` of :class:`GRUCell`s."""

    cell_class = GRUCell

    def __init__(self, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, dtype=np.float64, rng=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, dtype, rng)
