"""The mathematics of the rules of ``scipy.special`` (``rules/scipy_special.py``)."""
from __future__ import annotations

import math

import numpy as np


def polygamma_scale(n):
    """``(-1)^n (n+1)!``, the factor in ``psi^(n+1)(x) = (-1)^n (n+1)! zeta(n+2, x)`` (DLMF
    5.15.2), for SciPy's orders: an int or integer-valued float (a Python number, so that
    float32 stays float32 under NumPy's promotion), or an array of them (float64); NaN for
    any other order, as ``special.polygamma`` itself gives."""
    if isinstance(n, (int, float)):
        return (-1) ** int(n) * math.factorial(int(n) + 1) if float(n).is_integer() and n >= 0 else math.nan
    from scipy import special  # (only polygamma's own rule calls this)

    n = np.asarray(n)
    return np.where((n == np.floor(n)) & (n >= 0), np.where(n % 2 == 1, -1.0, 1.0) * special.factorial(n + 1),
                    np.nan)
