"""The mathematics of the rules of array creation (``rules/creation.py``)."""
from __future__ import annotations

import numpy as np

from .core import array_module, unbroadcast


def linspace_adjoint(ans_bar, start, stop, num=50, endpoint=True, axis=0, which=0):
    """Adjoint of ``start`` (``which=0``) or ``stop`` (1) in ``np.linspace``:
    ``ans = start + (stop - start) t`` with ``t = i / (num - 1)`` (``i / num``
    without the endpoint), along ``axis``."""
    xp = array_module(ans_bar)
    g = xp.asarray(ans_bar)
    dtype = g.dtype if g.dtype.kind in "fc" else np.float64
    t = xp.linspace(0.0, 1.0, num, endpoint=endpoint).astype(dtype)
    axis = axis % g.ndim
    t = xp.reshape(t, [num if d == axis else 1 for d in range(g.ndim)])
    stop_bar = xp.sum(g * t, axis=axis)
    if which == 1:
        return unbroadcast(stop_bar, stop)
    return unbroadcast(xp.sum(g, axis=axis) - stop_bar, start)
