"""``scipy.signal.convolve`` and ``correlate``: bilinear, so each adjoint is the other
operation and the tangent is the sum of the operation on each input's tangent.

Registered only where SciPy is installed (see ``scipy_special.py``).  Every ``mode``
(``full same valid``) and rank: the output of ``same`` and ``valid`` is the centred
part of the full one (SciPy's ``_centered``), so the adjoint first pads ``ans_bar``
back to the full shape with zeros; then, for ``full = in1 * in2``,
``in1_bar = correlate(g, in2, 'valid')`` and ``in2_bar = correlate(g, in1, 'valid')``
(the transpose of a convolution is a correlation with the same kernel; Goodfellow,
Bengio & Courville, *Deep Learning*, 2016, §9.5).  ``correlate(in1, in2)`` is
``convolve(in1, flip(in2))``.  ``method`` changes only how the sums are computed.
Real inputs.
"""
from __future__ import annotations

import numpy as np
from scipy import signal

from . import _ndim
from .registry import defadjoint


@defadjoint(signal.convolve, ndim=_ndim.same_as("in1"), tangent="bilinear")
def convolve(ans_bar, ans, in1, in2, mode="full", method="auto"):
    excess = np.add(np.shape(in1), np.shape(in2)) - 1 - np.shape(ans_bar)  # full shape less the output's
    full_bar = np.pad(ans_bar, np.stack([excess // 2, excess - excess // 2], -1))
    return signal.correlate(full_bar, in2, "valid"), signal.correlate(full_bar, in1, "valid")


@defadjoint(signal.correlate, ndim=_ndim.same_as("in1"), tangent="bilinear")
def correlate(ans_bar, ans, in1, in2, mode="full", method="auto"):
    excess = np.add(np.shape(in1), np.shape(in2)) - 1 - np.shape(ans_bar)
    full_bar = np.pad(ans_bar, np.stack([excess // 2, excess - excess // 2], -1))
    return signal.convolve(full_bar, in2, "valid"), np.flip(signal.correlate(full_bar, in1, "valid"))
