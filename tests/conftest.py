"""Shared test helpers: central finite differences in float64."""
from __future__ import annotations

import numpy as np


def numerical_grad(f, args, index, eps=1e-6):
    """Central finite-difference gradient of scalar ``f(*args)`` w.r.t. ``args[index]``.

    Source: central difference (f(x+h) - f(x-h)) / 2h, error O(h^2)
    (Nocedal & Wright, Numerical Optimization, 2nd ed., §8.1).
    """
    args = list(args)
    x = np.array(args[index], dtype=np.float64, order="C")  # reshape(-1) below must be a view
    grad = np.zeros_like(x)
    flat = x.reshape(-1)
    gflat = grad.reshape(-1)
    for i in range(flat.size):
        old = flat[i]
        flat[i] = old + eps
        args[index] = x.copy() if x.ndim else float(x)
        plus = float(f(*args))
        flat[i] = old - eps
        args[index] = x.copy() if x.ndim else float(x)
        minus = float(f(*args))
        flat[i] = old
        gflat[i] = (plus - minus) / (2 * eps)
    return grad
