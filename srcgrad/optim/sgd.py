"""Stochastic gradient descent with momentum, Nesterov momentum, weight decay and dampening."""
from __future__ import annotations

from typing import Any

import numpy as np

from .base import Optimizer, _real


class SGD(Optimizer):
    r"""Stochastic gradient descent, as PyTorch documents ``torch.optim.SGD``.

    Source: the algorithm box of https://pytorch.org/docs/stable/generated/torch.optim.SGD.html
    (Nesterov momentum in the form of Sutskever et al., ICML 2013). With
    learning rate γ, weight decay λ, momentum μ and dampening τ, at step t::

        g_t ← g_t + λ θ_{t-1}                      if λ ≠ 0
        b_t ← g_t                                  if μ ≠ 0 and t = 1
        b_t ← μ b_{t-1} + (1 - τ) g_t              if μ ≠ 0 and t > 1
        g_t ← g_t + μ b_t   (nesterov)  or  b_t    if μ ≠ 0
        θ_t ← θ_{t-1} - γ g_t

    Args:
        params: a model (an object whose attributes hold arrays), or a dict/list/tuple
            nesting of floating-point ndarrays of any shape; float32 stays float32.
        lr: learning rate γ ≥ 0.
        momentum: μ ≥ 0.
        nesterov: use Nesterov momentum (needs μ > 0 and τ = 0).
        weight_decay: L2 penalty λ ≥ 0, added to the gradient.
        dampening: τ in [0, 1].

    State per parameter: ``momentum_buffer`` (b, the parameter's shape and dtype)
    once a step has run with μ ≠ 0.

    Raises:
        TypeError: a parameter is not a floating-point ndarray (names its path).
        ValueError: a hyper-parameter is out of range, or nesterov without
            momentum or with dampening (as PyTorch).
    """

    _hyper = ("lr", "momentum", "nesterov", "weight_decay", "dampening")
    _buffers = ("momentum_buffer",)

    def __init__(self, params: Any, lr: float, momentum: float = 0, nesterov: bool = False,
                 weight_decay: float = 0, dampening: float = 0) -> None:
        super().__init__(params, lr=lr, momentum=momentum, nesterov=nesterov,
                         weight_decay=weight_decay, dampening=dampening)

    def _check_hyper(self) -> None:
        self.lr = _real("SGD", "lr", self.lr)
        self.momentum = _real("SGD", "momentum", self.momentum)
        self.weight_decay = _real("SGD", "weight_decay", self.weight_decay)
        self.dampening = _real("SGD", "dampening", self.dampening, high=1.0)
        self.nesterov = bool(self.nesterov)
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise ValueError("SGD: nesterov=True needs momentum > 0 and dampening = 0")

    def _update(self, p: np.ndarray, g: np.ndarray, state: dict[str, np.ndarray], t: int) -> None:
        if self.weight_decay != 0:
            g = g + self.weight_decay * p
        if self.momentum != 0:
            buf = state.get("momentum_buffer")
            if buf is None:                       # b_1 = g_1 (no dampening on the first step)
                buf = state["momentum_buffer"] = np.array(g, dtype=p.dtype)
            else:
                buf *= self.momentum
                buf += (1 - self.dampening) * g
            g = g + self.momentum * buf if self.nesterov else buf
        p -= self.lr * g
