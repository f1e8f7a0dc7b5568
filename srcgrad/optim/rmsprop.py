"""RMSprop (Hinton, Coursera lecture 6e), with the centred variant and momentum."""
from __future__ import annotations

from typing import Any

import numpy as np

from .base import Optimizer, _buffer, _real


class RMSprop(Optimizer):
    r"""RMSprop: Tieleman & Hinton, "Neural Networks for Machine Learning",
    Coursera lecture 6e (2012): divide the gradient by a running root mean
    square of recent gradients.  The centred variant (Graves, "Generating
    Sequences With Recurrent Neural Networks", 2013, eqs. 38-41) subtracts the
    squared running mean, estimating the variance.  Exactly the algorithm PyTorch
    documents for ``torch.optim.RMSprop``
    (https://pytorch.org/docs/stable/generated/torch.optim.RMSprop.html), with
    ε outside the square root.  With learning rate γ, smoothing α, weight decay
    λ, momentum μ, at step t (v_0 = b_0 = ḡ_0 = 0)::

        g_t ← g_t + λ θ_{t-1}                      if λ ≠ 0
        v_t = α v_{t-1} + (1 - α) g_t²
        ṽ_t = v_t
        ḡ_t = α ḡ_{t-1} + (1 - α) g_t;  ṽ_t ← ṽ_t - ḡ_t²        if centered
        b_t = μ b_{t-1} + g_t / (√ṽ_t + ε);  θ_t = θ_{t-1} - γ b_t      if μ > 0
        θ_t = θ_{t-1} - γ g_t / (√ṽ_t + ε)                              otherwise

    In exact arithmetic ṽ_t ≥ 0 (a weighted mean of squares is at least the
    square of the mean, and the weights sum to 1 - α^t ≤ 1); it is clamped at 0
    so that rounding with near-constant gradients cannot produce NaN.

    Args:
        params: a model (an object whose attributes hold arrays), or a dict/list/tuple
            nesting of floating-point ndarrays of any shape; float32 stays float32.
        lr: learning rate γ ≥ 0.
        alpha: smoothing constant α in [0, 1].
        eps: ε ≥ 0.
        weight_decay: L2 penalty λ ≥ 0, added to the gradient.
        momentum: μ ≥ 0.
        centered: subtract the squared running mean of the gradient.

    State per parameter: ``square_avg`` (v), and ``grad_avg`` (ḡ) if centered,
    ``momentum_buffer`` (b) if μ > 0; each the parameter's shape and dtype.

    Raises:
        TypeError: a parameter is not a floating-point ndarray (names its path).
        ValueError: a hyper-parameter is out of range.
    """

    _hyper = ("lr", "alpha", "eps", "weight_decay", "momentum", "centered")
    _buffers = ("square_avg", "grad_avg", "momentum_buffer")

    def __init__(self, params: Any, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False) -> None:
        super().__init__(params, lr=lr, alpha=alpha, eps=eps, weight_decay=weight_decay,
                         momentum=momentum, centered=centered)

    def _check_hyper(self) -> None:
        self.lr = _real("RMSprop", "lr", self.lr)
        self.alpha = _real("RMSprop", "alpha", self.alpha, high=1.0)
        self.eps = _real("RMSprop", "eps", self.eps)
        self.weight_decay = _real("RMSprop", "weight_decay", self.weight_decay)
        self.momentum = _real("RMSprop", "momentum", self.momentum)
        self.centered = bool(self.centered)

    def _update(self, p: np.ndarray, g: np.ndarray, state: dict[str, np.ndarray], t: int) -> None:
        a = self.alpha
        if self.weight_decay != 0:
            g = g + self.weight_decay * p
        v = _buffer(state, "square_avg", p)
        v *= a
        v += (1 - a) * (g * g)
        if self.centered:
            gbar = _buffer(state, "grad_avg", p)
            gbar *= a
            gbar += (1 - a) * g
            v_tilde = np.maximum(v - gbar * gbar, 0)
        else:
            v_tilde = v
        step = g / (np.sqrt(v_tilde) + self.eps)
        if self.momentum > 0:
            buf = _buffer(state, "momentum_buffer", p)
            buf *= self.momentum
            buf += step
            step = buf
        p -= self.lr * step
