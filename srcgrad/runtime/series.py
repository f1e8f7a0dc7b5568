"""The mathematics of the rules of series (``rules/series.py``): convolutions' padding,
``np.interp``, ``np.polyval``, ``np.trapezoid``, ``np.ediff1d``, ``np.gradient``."""
from __future__ import annotations

import numpy as np

from .core import item_of, static


@static
def full_padding(n, m, mode, correlate=False):
    """``(before, after)``: where ``np.convolve(a, v, mode)`` (or ``np.correlate``) of lengths
    ``n`` and ``m`` sits in the full result, of length ``n + m - 1`` (found from NumPy's
    definitions: ``'same'`` is centred on the longer input, ``'valid'`` drops ``min - 1`` each side)."""
    short = min(n, m)
    if mode == "full":
        return (0, 0)
    if mode == "valid":
        return (short - 1, short - 1)
    before = short // 2 if correlate and n < m else (short - 1) // 2
    return (before, short - 1 - before)


def interp_segments(x, xp):
    """For ``np.interp(x, xp, fp)``: the right end ``i`` of the segment ``[xp[i-1], xp[i]]`` each
    ``x`` is interpolated on and the weight ``t`` of ``fp[i]``, 0 below ``xp[0]`` and 1 from
    ``xp[-1]`` on (``np.interp`` gives ``fp[0]``/``fp[-1]`` there).  A knot starts the segment
    to its right, the last knot ends the last one (JAX's ``interp``: ``searchsorted(xp, x,
    'right')`` clipped to ``[1, len(xp) - 1]``)."""
    xp = np.asarray(xp)
    i = np.clip(np.searchsorted(xp, x, side="right"), 1, max(len(xp) - 1, 1))
    width = xp[i] - xp[i - 1]
    t = np.clip((x - xp[i - 1]) / np.where(width == 0, 1, width), 0, 1)
    return i, t


def interp_slope(x, xp, fp):
    """``d np.interp(x, xp, fp) / dx``: the slope of the segment ``x`` is on (``interp_segments``;
    at the last knot the last segment's, as JAX), 0 outside ``[xp[0], xp[-1]]`` (the value is
    constant there) and on an empty segment."""
    xp, fp = np.asarray(xp), np.asarray(fp)
    i, _ = interp_segments(x, xp)
    width = xp[i] - xp[i - 1]
    inside = (x >= xp[0]) & (x <= xp[-1]) & (width != 0)
    return np.where(inside, (fp[i] - fp[i - 1]) / np.where(width == 0, 1, width), 0)


def polyval_powers(x, n):
    """``x^(n-1), ..., x, 1`` along a new last axis, as cumulative products (exact at 0, where
    ``x ** 0`` would give NaN derivatives): the partials of ``np.polyval(p, x)`` in ``p``."""
    x = np.asarray(x)
    steps = np.concatenate([np.ones(np.shape(x) + (1,), dtype=np.result_type(x, np.float32)),
                            np.repeat(x[..., None], n - 1, axis=-1)], axis=-1)
    return np.flip(np.cumprod(steps, axis=-1), axis=-1)


def trapezoid_weights(y, x=None, dx=1.0, axis=-1):
    """The weights ``w`` with ``np.trapezoid(y, x, dx, axis) == sum(w * y, axis)``: half of each
    spacing on either end of its interval, in ``y``'s floating dtype."""
    ndim = np.ndim(y)
    axis = axis % ndim
    n = np.shape(y)[axis]
    along = tuple(n - 1 if i == axis else 1 for i in range(ndim))
    if x is None:
        d = np.full(along, dx, dtype=np.float64)
    elif np.ndim(x) == 1:
        d = np.reshape(np.diff(x), along)
    else:
        d = np.diff(x, axis=axis)
    before = tuple((1, 0) if i == axis else (0, 0) for i in range(np.ndim(d)))
    after = tuple((0, 1) if i == axis else (0, 0) for i in range(np.ndim(d)))
    return ((np.pad(d, before) + np.pad(d, after)) / 2).astype(np.result_type(np.asarray(y), np.float32))


def ediff1d_adjoint(ans_bar, ary, to_end=None, to_begin=None):
    """Adjoint of ``np.ediff1d``: ``d[i] = a[i + 1] - a[i]`` so ``a_bar[i] = g[i - 1] - g[i]``
    (0 beyond the ends), ``to_begin``/``to_end``'s places dropped."""
    start = 0 if to_begin is None else np.size(to_begin)
    stop = np.size(ans_bar) - (0 if to_end is None else np.size(to_end))
    g = ans_bar[start:stop]
    padded = np.concatenate([np.zeros(1, g.dtype), g, np.zeros(1, g.dtype)])
    return np.reshape(padded[:-1] - padded[1:], np.shape(ary))


def _gradient_transposed(g, axis):
    """Transpose of ``np.gradient``'s stencil along ``axis`` (unit spacing, ``edge_order=1``):
    ``out[0] = f[1] - f[0]``, ``out[i] = (f[i + 1] - f[i - 1]) / 2``, ``out[-1] = f[-1] - f[-2]``."""
    g = np.moveaxis(g, axis, -1)
    none = [(0, 0)] * (np.ndim(g) - 1)
    half = g[..., 1:-1] / 2
    bar = np.pad(half, none + [(2, 0)]) - np.pad(half, none + [(0, 2)])
    first, last = g[..., :1], g[..., -1:]
    n = np.shape(g)[-1]
    bar = bar + np.pad(first, none + [(1, n - 2)]) - np.pad(first, none + [(0, n - 1)])
    bar = bar + np.pad(last, none + [(n - 1, 0)]) - np.pad(last, none + [(n - 2, 1)])
    return np.moveaxis(bar, -1, axis)


def gradient_adjoint(ans_bar, ans, f, axis=None):
    """Adjoint of ``np.gradient(f)`` (unit spacing, ``edge_order=1``; Fornberg's central and
    one-sided first differences): the sum over the axes of each output's stencil, transposed."""
    axes = tuple(range(np.ndim(f))) if axis is None else \
        tuple(int(a) % np.ndim(f) for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
    if not isinstance(ans, tuple):
        return _gradient_transposed(ans_bar, axes[0])
    total = np.zeros(np.shape(f), dtype=np.result_type(np.asarray(f), np.float32))
    for k, ax in enumerate(axes):
        g = item_of(ans_bar, k)
        if g is not None:
            total = total + _gradient_transposed(g, ax)
    return total


def interp_knot_partials(x, xp, fp):
    """``d np.interp(x, xp, fp) / d xp``: on the segment ``[xp[i-1], xp[i]]`` with slope ``s``
    and ``x = xp[i-1] + t (xp[i] - xp[i-1])``, ``s (t - 1)`` in ``xp[i-1]`` and ``-s t`` in
    ``xp[i]`` (differentiating the interpolation formula); 0 outside the range, where the value
    is an end of ``fp`` (or a given ``left``/``right``).  Returns ``(i, low, high)``."""
    i, t = interp_segments(x, xp)
    slope = interp_slope(x, xp, fp)
    return i, slope * (t - 1), -slope * t
