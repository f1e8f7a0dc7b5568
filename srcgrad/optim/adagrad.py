"""Adagrad (Duchi, Hazan & Singer 2011) with PyTorch's learning-rate decay."""
from __future__ import annotations

from typing import Any

import numpy as np

from .base import Optimizer, _buffer, _real


class Adagrad(Optimizer):
    r"""Adagrad: Duchi, Hazan & Singer, "Adaptive Subgradient Methods for Online
    Learning and Stochastic Optimization", JMLR 12, 2011 (the diagonal update,
    their eq. (1) with diag(G_t)), in the form PyTorch documents for
    ``torch.optim.Adagrad`` (https://pytorch.org/docs/stable/generated/torch.optim.Adagrad.html).

    With learning rate γ, decay η (``lr_decay``), weight decay λ, initial
    accumulator value s_0 and ε, at step t::

        γ̃ = γ / (1 + (t - 1) η)
        g_t ← g_t + λ θ_{t-1}                      if λ ≠ 0
        s_t = s_{t-1} + g_t²
        θ_t = θ_{t-1} - γ̃ g_t / (√s_t + ε)

    Args:
        params: a model (an object whose attributes hold arrays), or a dict/list/tuple
            nesting of floating-point ndarrays of any shape; float32 stays float32.
        lr: learning rate γ ≥ 0.
        lr_decay: η ≥ 0.
        weight_decay: L2 penalty λ ≥ 0, added to the gradient.
        initial_accumulator_value: s_0 ≥ 0.
        eps: ε ≥ 0.

    State per parameter: ``sum`` (s, the parameter's shape and dtype).

    Raises:
        TypeError: a parameter is not a floating-point ndarray (names its path).
        ValueError: a hyper-parameter is out of range.
    """

    _hyper = ("lr", "lr_decay", "weight_decay", "initial_accumulator_value", "eps")
    _buffers = ("sum",)

    def __init__(self, params: Any, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10) -> None:
        super().__init__(params, lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                         initial_accumulator_value=initial_accumulator_value, eps=eps)

    def _check_hyper(self) -> None:
        for key in self._hyper:
            setattr(self, key, _real("Adagrad", key, getattr(self, key)))

    def _update(self, p: np.ndarray, g: np.ndarray, state: dict[str, np.ndarray], t: int) -> None:
        clr = self.lr / (1 + (t - 1) * self.lr_decay)
        if self.weight_decay != 0:
            g = g + self.weight_decay * p
        s = _buffer(state, "sum", p, self.initial_accumulator_value)
        s += g * g
        p -= clr * g / (np.sqrt(s) + self.eps)
