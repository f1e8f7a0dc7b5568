"""srcgrad.optim against torch.optim (the oracle, skipped without it): the same float64
least-squares problem, the same starting point and each step's gradient computed from the
current parameters on both sides; the trajectories agree to 1e-10.

The gradient is the analytic one, 2 Aᵀ(A w - b), for both (never srcgrad.grad, never
autograd), so the update rules alone are compared.
"""
from __future__ import annotations

import numpy as np
import pytest

from srcgrad import optim

torch = pytest.importorskip("torch")

# (id, srcgrad class, torch class, keyword arguments for both)
CONFIGS = [
    ("sgd-nesterov", optim.SGD, "SGD", {"lr": 0.01, "momentum": 0.9, "nesterov": True, "weight_decay": 0.1}),
    ("sgd-dampening", optim.SGD, "SGD", {"lr": 0.01, "momentum": 0.8, "dampening": 0.3}),
    ("adam", optim.Adam, "Adam", {"lr": 0.05}),
    ("adam-wd", optim.Adam, "Adam", {"lr": 0.05, "betas": (0.8, 0.95), "eps": 1e-3, "weight_decay": 0.2}),
    ("adam-amsgrad", optim.Adam, "Adam",
     {"lr": 0.05, "betas": (0.8, 0.9), "weight_decay": 0.1, "amsgrad": True}),
    ("adamw", optim.AdamW, "AdamW", {"lr": 0.05}),
    ("adamw-amsgrad", optim.AdamW, "AdamW", {"lr": 0.05, "weight_decay": 0.3, "amsgrad": True}),
    ("adagrad", optim.Adagrad, "Adagrad", {"lr": 0.5, "lr_decay": 0.1, "weight_decay": 0.2,
                                           "initial_accumulator_value": 0.3, "eps": 1e-6}),
    ("rmsprop", optim.RMSprop, "RMSprop", {"lr": 0.01, "alpha": 0.8, "eps": 1e-4, "momentum": 0.5,
                                           "centered": True, "weight_decay": 0.1}),
    ("adadelta", optim.Adadelta, "Adadelta", {}),
    ("adadelta-all", optim.Adadelta, "Adadelta", {"lr": 0.5, "rho": 0.7, "eps": 1e-3, "weight_decay": 0.2}),
]
STEPS = 30


def problem(seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((12, 5))
    b = rng.standard_normal(12)
    return A, b, rng.standard_normal(5)


@pytest.mark.parametrize("name, cls, torch_name, kw", CONFIGS, ids=[c[0] for c in CONFIGS])
def test_trajectory_matches_torch(name, cls, torch_name, kw):
    A, b, w0 = problem()

    def grad(w):
        return 2 * A.T @ (A @ w - b)

    # split into two parameters, a matrix and a vector, to cover the structure
    params = {"a": w0[:4].reshape(2, 2).copy(), "b": w0[4:].copy()}
    ta = torch.tensor(w0[:4].reshape(2, 2), dtype=torch.float64, requires_grad=True)
    tb = torch.tensor(w0[4:], dtype=torch.float64, requires_grad=True)
    opt = cls(params, **kw)
    topt = getattr(torch.optim, torch_name)([ta, tb], **kw)
    for step in range(STEPS):
        g = grad(np.concatenate([params["a"].ravel(), params["b"]]))
        opt.step({"a": g[:4].reshape(2, 2), "b": g[4:]})
        tg = grad(np.concatenate([ta.detach().numpy().ravel(), tb.detach().numpy()]))
        ta.grad, tb.grad = torch.tensor(tg[:4].reshape(2, 2)), torch.tensor(tg[4:])
        topt.step()
        np.testing.assert_allclose(params["a"], ta.detach().numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=f"{name} step {step + 1}")
        np.testing.assert_allclose(params["b"], tb.detach().numpy(), rtol=1e-10, atol=1e-12,
                                   err_msg=f"{name} step {step + 1}")


@pytest.mark.parametrize("cls, torch_name", [(optim.SGD, "SGD"), (optim.Adam, "Adam"), (optim.AdamW, "AdamW"),
                                             (optim.Adagrad, "Adagrad"), (optim.RMSprop, "RMSprop"),
                                             (optim.Adadelta, "Adadelta")])
def test_defaults_are_torchs(cls, torch_name):
    """Each hyper-parameter srcgrad has defaults as PyTorch's does (SGD's lr has none in either)."""
    extra = {"lr": 0.1} if cls is optim.SGD else {}
    ours = cls({"w": np.zeros(1)}, **extra).param_groups[0]
    theirs = getattr(torch.optim, torch_name)([torch.zeros(1, requires_grad=True)], **extra).param_groups[0]
    for key in cls._hyper:
        assert ours[key] == theirs[key], key
