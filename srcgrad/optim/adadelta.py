"""Adadelta (Zeiler 2012) with PyTorch's learning rate and weight decay."""
from __future__ import annotations

from typing import Any

import numpy as np

from .base import Optimizer, _buffer, _real


class Adadelta(Optimizer):
    r"""Adadelta: Zeiler, "ADADELTA: An Adaptive Learning Rate Method", arXiv:1212.5701
    (2012), Algorithm 1, scaled by a learning rate and with L2 weight decay as PyTorch
    documents ``torch.optim.Adadelta``
    (https://pytorch.org/docs/stable/generated/torch.optim.Adadelta.html).

    With learning rate γ, decay ρ, ε and weight decay λ, at step t
    (v_0 = u_0 = 0)::

        g_t ← g_t + λ θ_{t-1}                               if λ ≠ 0
        v_t = ρ v_{t-1} + (1 - ρ) g_t²                      (E[g²]_t, Algorithm 1 line 4)
        Δx_t = √(u_{t-1} + ε) / √(v_t + ε) · g_t            (the RMS ratio, line 5)
        u_t = ρ u_{t-1} + (1 - ρ) Δx_t²                     (E[Δx²]_t, line 6)
        θ_t = θ_{t-1} - γ Δx_t                              (γ = 1 is the paper's update)

    Args:
        params: a model (an object whose attributes hold arrays), or a dict/list/tuple
            nesting of floating-point ndarrays of any shape; float32 stays float32.
        lr: learning rate γ ≥ 0 (default 1.0, the paper's unscaled update).
        rho: decay ρ in [0, 1].
        eps: ε ≥ 0 (default 1e-6, as PyTorch).
        weight_decay: L2 penalty λ ≥ 0, added to the gradient.

    State per parameter: ``square_avg`` (v) and ``acc_delta`` (u), the parameter's
    shape and dtype.

    Raises:
        TypeError: a parameter is not a floating-point ndarray (names its path).
        ValueError: a hyper-parameter is out of range.
    """

    _hyper = ("lr", "rho", "eps", "weight_decay")
    _buffers = ("square_avg", "acc_delta")

    def __init__(self, params: Any, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0) -> None:
        super().__init__(params, lr=lr, rho=rho, eps=eps, weight_decay=weight_decay)

    def _check_hyper(self) -> None:
        self.lr = _real("Adadelta", "lr", self.lr)
        self.rho = _real("Adadelta", "rho", self.rho, high=1.0)
        self.eps = _real("Adadelta", "eps", self.eps)
        self.weight_decay = _real("Adadelta", "weight_decay", self.weight_decay)

    def _update(self, p: np.ndarray, g: np.ndarray, state: dict[str, np.ndarray], t: int) -> None:
        rho = self.rho
        if self.weight_decay != 0:
            g = g + self.weight_decay * p
        v = _buffer(state, "square_avg", p)
        u = _buffer(state, "acc_delta", p)
        v *= rho
        v += (1 - rho) * (g * g)
        delta = np.sqrt(u + self.eps) / np.sqrt(v + self.eps) * g
        u *= rho
        u += (1 - rho) * (delta * delta)
        p -= self.lr * delta
