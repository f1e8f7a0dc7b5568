"""Adam (Kingma & Ba 2015) and AdamW (Loshchilov & Hutter 2019)."""
from __future__ import annotations

from typing import Any

import numpy as np

from .base import Optimizer, _buffer, _real


def _adam_step(opt: Adam, p: np.ndarray, g: np.ndarray, state: dict[str, np.ndarray], t: int) -> None:
    """Kingma & Ba 2015, Algorithm 1, lines 7-12 (moments, bias correction, update) on ``p`` in place;
    with ``amsgrad``, the running maximum of v_t in place of v_t (Reddi et al. 2018)."""
    beta1, beta2 = opt.betas
    m = _buffer(state, "exp_avg", p)
    v = _buffer(state, "exp_avg_sq", p)
    m *= beta1
    m += (1 - beta1) * g                    # m_t = β1 m_{t-1} + (1 - β1) g_t
    v *= beta2
    v += (1 - beta2) * (g * g)              # v_t = β2 v_{t-1} + (1 - β2) g_t²
    if opt.amsgrad:
        v_max = _buffer(state, "max_exp_avg_sq", p)
        np.maximum(v_max, v, out=v_max)     # v_t^max = max(v_{t-1}^max, v_t)
        v = v_max
    m_hat = m / (1 - beta1**t)              # m̂_t = m_t / (1 - β1^t)
    v_hat = v / (1 - beta2**t)              # v̂_t = v_t / (1 - β2^t)
    p -= opt.lr * m_hat / (np.sqrt(v_hat) + opt.eps)   # θ_t = θ_{t-1} - α m̂_t / (√v̂_t + ε)


class Adam(Optimizer):
    r"""Adam, Kingma & Ba, "Adam: A Method for Stochastic Optimization", ICLR 2015, Algorithm 1.

    With step size α (``lr``), decay rates β1, β2, ε and L2 weight decay λ
    (added to the gradient, as PyTorch's ``torch.optim.Adam`` documents), at step t::

        g_t ← g_t + λ θ_{t-1}                      if λ ≠ 0
        m_t = β1 m_{t-1} + (1 - β1) g_t            (m_0 = 0)
        v_t = β2 v_{t-1} + (1 - β2) g_t²           (v_0 = 0)
        m̂_t = m_t / (1 - β1^t)
        v̂_t = v_t / (1 - β2^t)
        θ_t = θ_{t-1} - α m̂_t / (√v̂_t + ε)

    ε is added outside the square root, as in Algorithm 1 (not the ε̂ of the
    paper's "more efficient" reordering at the end of its section 2).

    With ``amsgrad=True`` (Reddi, Kale & Kumar, "On the Convergence of Adam and
    Beyond", ICLR 2018, Algorithm 2), the denominator uses the largest second
    moment seen so far, bias-corrected as PyTorch documents it::

        v_t^max = max(v_{t-1}^max, v_t)            (elementwise, v_0^max = 0)
        v̂_t = v_t^max / (1 - β2^t)

    Args:
        params: a model (an object whose attributes hold arrays), or a dict/list/tuple
            nesting of floating-point ndarrays of any shape; float32 stays float32.
        lr: step size α ≥ 0.
        betas: (β1, β2), each in [0, 1).
        eps: ε ≥ 0.
        weight_decay: L2 penalty λ ≥ 0 (coupled; see :class:`AdamW` for decoupled).
        amsgrad: use the running maximum of v_t (AMSGrad).

    State per parameter: ``exp_avg`` (m) and ``exp_avg_sq`` (v), and
    ``max_exp_avg_sq`` (v^max) with amsgrad; the parameter's shape and dtype.

    Raises:
        TypeError: a parameter is not a floating-point ndarray (names its path).
        ValueError: a hyper-parameter is out of range.
    """

    _hyper = ("lr", "betas", "eps", "weight_decay", "amsgrad")
    _buffers = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq")

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0, amsgrad: bool = False) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)

    def _check_hyper(self) -> None:
        name = type(self).__name__
        self.lr = _real(name, "lr", self.lr)
        try:
            beta1, beta2 = self.betas
        except (TypeError, ValueError):
            raise ValueError(f"{name}: betas must be a pair (beta1, beta2), got {self.betas!r}") from None
        self.betas = (_real(name, "betas[0]", beta1, high=1.0, high_open=True),
                      _real(name, "betas[1]", beta2, high=1.0, high_open=True))
        self.eps = _real(name, "eps", self.eps)
        self.weight_decay = _real(name, "weight_decay", self.weight_decay)
        self.amsgrad = bool(self.amsgrad)

    def _update(self, p: np.ndarray, g: np.ndarray, state: dict[str, np.ndarray], t: int) -> None:
        if self.weight_decay != 0:
            g = g + self.weight_decay * p
        _adam_step(self, p, g, state, t)


class AdamW(Adam):
    r"""Adam with decoupled weight decay: Loshchilov & Hutter, "Decoupled Weight
    Decay Regularization", ICLR 2019, Algorithm 2 ("AdamW").

    The decay shrinks the weights directly instead of entering the gradient, so
    it is not rescaled by the adaptive denominator and not stored in m or v.
    Parameterised as PyTorch's ``torch.optim.AdamW`` documents it
    (https://pytorch.org/docs/stable/generated/torch.optim.AdamW.html): with
    learning rate γ and decay λ, at step t::

        θ_t ← θ_{t-1} - γ λ θ_{t-1}
        m_t, v_t, m̂_t, v̂_t as in Adam (Kingma & Ba 2015, Algorithm 1) from g_t
        θ_t ← θ_t - γ m̂_t / (√v̂_t + ε)

    This is the paper's line 12, θ_t = θ_{t-1} - η_t (α m̂_t/(√v̂_t + ε) + λ' θ_{t-1}),
    with η_t α = γ and the paper's λ' = γ λ / η_t, i.e. the decay scales with the
    learning rate (so a schedule on ``lr`` also schedules the decay, as the
    paper's η_t does).

    Args:
        params: a model (an object whose attributes hold arrays), or a dict/list/tuple
            nesting of floating-point ndarrays of any shape; float32 stays float32.
        lr: learning rate γ ≥ 0.
        betas: (β1, β2), each in [0, 1).
        eps: ε ≥ 0.
        weight_decay: decoupled decay λ ≥ 0 (default 1e-2, as PyTorch).
        amsgrad: use the running maximum of v_t (AMSGrad; see :class:`Adam`).

    State per parameter: ``exp_avg`` (m) and ``exp_avg_sq`` (v), and
    ``max_exp_avg_sq`` with amsgrad.

    Raises:
        TypeError: a parameter is not a floating-point ndarray (names its path).
        ValueError: a hyper-parameter is out of range.
    """

    def __init__(self, params: Any, lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 1e-2, amsgrad: bool = False) -> None:
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, amsgrad=amsgrad)

    def _update(self, p: np.ndarray, g: np.ndarray, state: dict[str, np.ndarray], t: int) -> None:
        if self.weight_decay != 0:
            p *= 1 - self.lr * self.weight_decay
        _adam_step(self, p, g, state, t)
