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

``srcgrad.scipy.signal.convolve``, HIPS autograd's generalised convolution (``axes``,
``dot_axes``), is bilinear too: its adjoints are convolutions of the zero-padded ``ans_bar``
with the other input flipped, ``'valid'``, contracting ``ans_bar``'s axes that came from the
other input (see ``generalised_convolve``).
"""
from __future__ import annotations

import numpy as np
from scipy import signal

from ..scipy import signal as generalised
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


def _generalised_ndim(ndims, statics):
    """Its output's rank: each input's rank less its contracted axes, less the convolution
    axes counted once."""
    a, b, axes, dot = ndims.get("A"), ndims.get("B"), statics.get("axes"), statics.get("dot_axes", ((), ()))
    if a is None or b is None or axes is _ndim.UNKNOWN or dot is _ndim.UNKNOWN:
        return None
    return a + b - 2 * len(dot[0]) - (a if axes is None else len(axes[0]))


@defadjoint(generalised.convolve, ndim=_generalised_ndim, zero=("dot_axes",), tangent="bilinear")
def generalised_convolve(ans_bar, ans, A, B, axes=None, dot_axes=((), ()), mode="full"):
    conv_a, conv_b, dot_a, dot_b = generalised._axes(np.ndim(A), np.ndim(B), axes, dot_axes)
    full_bar = ans_bar
    if mode == "valid":  # the centre of the full output: padded back by min(nA, nB) - 1 at each end
        edges = [min(np.shape(A)[i], np.shape(B)[j]) - 1 for i, j in zip(conv_a, conv_b)]
        full_bar = np.pad(ans_bar, [(0, 0)] * (np.ndim(ans_bar) - len(edges)) + [(e, e) for e in edges])
    # convolve(B, A) is convolve(A, B) with the others of A and of B swapped: B's adjoint is A's of it.
    n_a, n = np.ndim(A) - len(conv_a) - len(dot_a), np.ndim(ans_bar) - len(conv_a)  # A's others, all others
    swapped_bar = np.transpose(full_bar, [*range(n_a, n), *range(n_a), *range(n, np.ndim(ans_bar))])
    return (_first_adjoint(full_bar, A, B, conv_a, conv_b, dot_a, dot_b),
            _first_adjoint(swapped_bar, B, A, conv_b, conv_a, dot_b, dot_a))


def _first_adjoint(full_bar, A, B, conv_a, conv_b, dot_a, dot_b):
    """``A``'s adjoint from ``full_bar``, of the full output's shape.  With its axes grouped as
    ``(a, b, n)`` (A's others, B's others, convolution) and ``A[a, d, m]``, ``B[d, b, k]``:
    ``A_bar[a, d, m] = sum_{b, k} full_bar[a, b, m + k] B[d, b, k]``, the ``'valid'``
    convolution of ``full_bar`` with ``B`` flipped, contracting ``b``.  That comes out as
    ``(a, d in B's order, m)``: transposed back to ``A``'s order."""
    others_a = [i for i in range(np.ndim(A)) if i not in conv_a + dot_a]
    others_b = [i for i in range(np.ndim(B)) if i not in conv_b + dot_b]
    from_b = list(range(len(others_a), len(others_a) + len(others_b)))
    conv = list(range(len(others_a) + len(others_b), np.ndim(full_bar)))
    bar = generalised.convolve(full_bar, np.flip(B, conv_b), (conv, conv_b), (from_b, others_b), "valid")
    dots = [a for _, a in sorted(zip(dot_b, dot_a))]
    return np.transpose(bar, np.argsort(others_a + dots + conv_a))
