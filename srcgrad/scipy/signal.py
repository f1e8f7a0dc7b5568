"""HIPS autograd's generalised N-d convolution, ``autograd.scipy.signal.convolve``.

``convolve(A, B, axes, dot_axes, mode)`` convolves ``A`` with ``B`` along pairs of axes
and contracts other pairs as ``np.tensordot`` does: one call is a convolutional layer
(``axes=([2, 3], [2, 3]), dot_axes=([1], [0])``: images by channels in, channels in by
out filters).  SciPy has no counterpart.  Its derivative rule is in
``srcgrad/rules/scipy_signal.py``, beside ``scipy.signal.convolve``'s, and is registered
once ``scipy.signal`` is imported: importing this module does that.
"""
from __future__ import annotations

import numpy as np
import scipy.signal  # noqa: F401 - registers this function's rule (see the docstring)

__all__ = ["convolve"]


def convolve(A, B, axes=None, dot_axes=((), ()), mode="full"):
    """Convolution of ``A`` and ``B`` along ``axes``, contracting ``dot_axes``.

    ``out[a, b, n] = sum_d sum_{m + k = n} A[a, d, m] * B[d, b, k]`` for ``mode="full"``,
    written with ``A``'s and ``B``'s axes grouped, each of ``a b d m n k`` standing for
    several axes (``m``, ``k``, ``n`` one per convolution axis): a true convolution, ``B``
    flipped along the convolution axes, as ``scipy.signal.convolve``.

    Args:
        A: an array.
        B: an array.
        axes: ``(A's axes, B's axes)``, the pairs convolved; default all of ``A``'s axes
            with all of ``B``'s (equal ranks).
        dot_axes: ``(A's axes, B's axes)``, the pairs summed over, as ``np.tensordot``'s
            ``axes``; each pair of equal length.  Default: none.
        mode: ``"full"`` (each convolution axis ``nA + nB - 1`` long) or ``"valid"``
            (``|nA - nB| + 1``: where one array lies wholly within the other, which must
            be the larger along every convolution axis).

    Returns:
        An array whose axes are ``A``'s others (neither convolved nor contracted) in
        order, then ``B``'s others, then the convolution axes in the order of ``axes``;
        the dtype NumPy's ``tensordot`` gives the two.

    Raises:
        ValueError: an unknown ``mode``, axes of different lengths or sizes, an axis
            named twice, or for ``"valid"`` neither array the larger along every
            convolution axis.

    The semantics are HIPS autograd's (``autograd/scipy/signal.py``); the computation is
    srcgrad's: ``np.tensordot`` of the flipped smaller array with the sliding windows of
    the (zero-padded, for ``"full"``) larger one.
    """
    A, B = np.asarray(A), np.asarray(B)
    conv_a, conv_b, dot_a, dot_b = _axes(A.ndim, B.ndim, axes, dot_axes)
    if mode not in ("full", "valid"):
        raise ValueError(f"convolve: mode {mode!r}: expected 'full' or 'valid'")
    if len(conv_a) != len(conv_b) or len(dot_a) != len(dot_b):
        raise ValueError(f"convolve: axes {axes} and dot_axes {dot_axes}: each pair must be of equal length")
    if len(set(conv_a + dot_a)) < len(conv_a + dot_a) or len(set(conv_b + dot_b)) < len(conv_b + dot_b):
        raise ValueError(f"convolve: axes {axes} and dot_axes {dot_axes} name an axis more than once")
    if [A.shape[i] for i in dot_a] != [B.shape[i] for i in dot_b]:
        raise ValueError(f"convolve: dot_axes {dot_axes} join axes of different sizes "
                         f"({A.shape} and {B.shape})")
    size_a, size_b = [A.shape[i] for i in conv_a], [B.shape[i] for i in conv_b]
    if mode == "valid" and not (all(a >= b for a, b in zip(size_a, size_b))
                                or all(b >= a for a, b in zip(size_a, size_b))):
        raise ValueError(f"convolve: mode 'valid' needs one array the larger along every convolution axis "
                         f"(sizes {size_a} and {size_b})")
    # Convolution commutes: slide the smaller kernel (fewer products per output element).
    if mode == "valid" and any(b > a for a, b in zip(size_a, size_b)) \
            or mode == "full" and np.prod(size_b) > np.prod(size_a):
        out = _slide(B, A, conv_b, conv_a, dot_b, dot_a, mode)  # B's others first: swapped with A's
        n_b, n = B.ndim - len(conv_b) - len(dot_b), out.ndim - len(conv_b)  # B's others, all others
        return np.transpose(out, [*range(n_b, n), *range(n_b), *range(n, out.ndim)])
    return _slide(A, B, conv_a, conv_b, dot_a, dot_b, mode)


def _axes(ndim_a, ndim_b, axes, dot_axes):
    """``(conv_a, conv_b, dot_a, dot_b)``: lists of non-negative axes."""
    conv_a, conv_b = (range(ndim_a), range(ndim_b)) if axes is None else axes
    dot_a, dot_b = dot_axes
    return ([a % ndim_a for a in conv_a], [b % ndim_b for b in conv_b],
            [a % ndim_a for a in dot_a], [b % ndim_b for b in dot_b])


def _slide(big, kernel, conv_big, conv_kernel, dot_big, dot_kernel, mode):
    """``convolve(big, kernel)`` sliding ``kernel`` over ``big``: for each output position
    ``n`` along the convolution axes, ``sum_k window(n)[k] * flip(kernel)[k]``, the window
    of ``big`` (padded with ``kernel``'s size less one zeros on each side for ``"full"``)
    starting at ``n``."""
    window = [kernel.shape[i] for i in conv_kernel]
    if mode == "full":
        pad = [(0, 0)] * big.ndim
        for axis, k in zip(conv_big, window):
            pad[axis] = (k - 1, k - 1)
        big = np.pad(big, pad)
    windows = np.lib.stride_tricks.sliding_window_view(big, window, axis=conv_big)
    out = np.tensordot(windows, np.flip(kernel, conv_kernel),
                       ([*range(big.ndim, windows.ndim), *dot_big], [*conv_kernel, *dot_kernel]))
    # tensordot's axes: big's uncontracted ones (its others and the convolution's, in its
    # order), then the kernel's others; the convolution's go last, in the order of `axes`.
    kept = [i for i in range(big.ndim) if i not in dot_big]
    rest = [p for p, i in enumerate(kept) if i not in conv_big]
    conv = [kept.index(i) for i in conv_big]
    return np.transpose(out, [*rest, *range(len(kept), out.ndim), *conv])
