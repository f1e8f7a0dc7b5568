"""The mathematics of the rules of Python's operators (``rules/operators.py``):
``a @ b``'s adjoints (also ``np.dot``'s), ``a ** b``'s logarithm of the base."""
from __future__ import annotations

import math

import numpy as np

from .core import static, unbroadcast


@static
def log_of_base(base) -> float:
    """``log(base)`` of a constant base of ``base ** x``, as a Python float (so it keeps
    float32 float32); 0.0 at ``base == 0`` (the power rule's convention there), NaN below."""
    if base == 0:
        return 0.0
    return math.log(base) if base > 0 else math.nan


def matmul_lhs(ans_bar, x1, x2):
    """Adjoint of ``x1 @ x2`` with respect to ``x1``, for any ranks (NumPy matmul semantics)."""
    if np.ndim(x2) == 1:
        g = np.multiply.outer(ans_bar, x2) if np.ndim(x1) > 1 else ans_bar * x2
    elif np.ndim(x1) == 1:
        g = (x2 @ ans_bar[..., None])[..., 0]
    else:
        g = ans_bar @ np.swapaxes(x2, -1, -2)
    return unbroadcast(g, x1)


def matmul_lhs_transposed(ans_bar, ans, g, x1, x2):
    """``<u, matmul_lhs(g, x1, x2)> = <g, u @ x2>``: the adjoints of ``u @ x2``."""
    return unbroadcast(ans_bar @ x2, g), matmul_rhs(g, ans_bar, x2)


def matmul_rhs(ans_bar, x1, x2):
    """Adjoint of ``x1 @ x2`` with respect to ``x2``, for any ranks (NumPy matmul semantics)."""
    if np.ndim(x1) == 1:
        g = x1[:, None] * ans_bar[..., None, :] if np.ndim(x2) > 1 else ans_bar * x1
    elif np.ndim(x2) == 1:
        g = (np.swapaxes(x1, -1, -2) @ ans_bar[..., None])[..., 0]
    elif np.ndim(x2) == 2 and np.ndim(x1) > 2:
        # (a stack of inputs times one matrix, `x @ W` for x (T, B, k): the sum over the stack of
        # x_t^T g_t is one product of the stacked rows, not a stack of products summed after)
        k, n = np.shape(x1)[-1], np.shape(ans_bar)[-1]
        return np.reshape(x1, (-1, k)).T @ np.reshape(ans_bar, (-1, n))
    else:
        g = np.swapaxes(x1, -1, -2) @ ans_bar
    return unbroadcast(g, x2)


def matmul_rhs_transposed(ans_bar, ans, g, x1, x2):
    """``<u, matmul_rhs(g, x1, x2)> = <g, x1 @ u>``."""
    return unbroadcast(x1 @ ans_bar, g), matmul_lhs(g, x1, ans_bar)
