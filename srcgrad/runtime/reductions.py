"""The mathematics of the rules of reductions (``rules/reductions.py``): ``np.max``'s
first extremum, ``np.prod``, ``np.var``, ``np.average``, ``np.quantile``, ``np.cumprod``,
and the builtins ``sum``, ``max``, ``min`` and ``sorted`` of a list."""
from __future__ import annotations

import itertools
import math

import numpy as np

from .core import (_as_array, array_module, broadcast_tangent, item_of, static, unbroadcast, unbroadcast_to,
                   zeros_like, zeros_tangent)
from .containers import dense_items, iterates_keys


def _axes(axis, ndim):
    return tuple(sorted(_axes_as_given(axis, ndim)))


@static
def _axes_as_given(axis, ndim):
    """``axis`` (None, an int or a tuple) as a tuple of non-negative axes, in its order."""
    if axis is None:
        return tuple(range(ndim))
    return tuple(a % ndim for a in (axis if isinstance(axis, tuple) else (axis,)))


def broadcast_reduced(g, x, axis=None, keepdims=False):
    """Broadcast the adjoint ``g`` of a reduction of ``x`` over ``axis`` back to ``x``'s shape."""
    if keepdims and type(x) is np.ndarray:  # (a softmax's sum: the common case, without NumPy's shape calls)
        return np.broadcast_to(g, x.shape)
    ndim = np.ndim(x)
    if not keepdims:
        g = np.expand_dims(g, _axes(axis, ndim)) if ndim else g
    return np.broadcast_to(g, np.shape(x))


def broadcast_reduced_transposed(ans_bar, ans, g, x, axis=None, keepdims=False):
    """Broadcasting over the reduced axes, transposed: summing over them."""
    return unbroadcast(np.sum(ans_bar, axis=axis, keepdims=keepdims), g)


def count_reduced(x, axis=None) -> int:
    """How many elements of ``x`` each output of a reduction over ``axis`` combines."""
    shape = np.shape(x)
    return int(np.prod([shape[a] for a in _axes(axis, len(shape))], dtype=np.int64))


def _with_kept_dims(value, x, axis, keepdims):
    """A reduction's result given back its reduced axes as size 1 (it then broadcasts)."""
    ndim = np.ndim(x)
    if keepdims or not ndim:
        return value
    return np.expand_dims(value, _axes(axis, ndim))


def max_adjoint(ans_bar, ans, x, axis=None, keepdims=False):
    """Adjoint of ``np.max``/``np.min`` over ``axis``: each output's adjoint goes whole to
    the first element of its window equal to it (row-major order over the reduced axes,
    the element ``np.argmax`` picks).

    Args:
        ans_bar: the adjoint of ``ans``, ``ans``'s shape (or one that broadcasts to it).
        ans: the reduction's result (with the reduced axes kept as size 1 if ``keepdims``).
        x: the reduced array, any shape; ``axis``: None, an int or a tuple, as NumPy's.

    Returns:
        An array of ``x``'s shape, dtype ``result_type(ans_bar, x)`` (a float): in each
        window, ``ans_bar`` at its first extremum, 0 elsewhere; 0 in a window whose
        extremum is NaN (no element equals it).

    The adjoint of a tied window is one vertex of ``max``'s subdifferential (Clarke
    1983): it still sums to ``ans_bar``, and needs no count of the ties.  It is the
    convention of PyTorch's ``max_pool2d`` and XLA's ``select_and_scatter``; PyTorch's
    ``amax`` and JAX's ``max`` split the adjoint among ties instead.
    """
    x = _as_array(x)
    axes = _axes(axis, x.ndim)
    window = [x.shape[a] for a in axes]
    dtype = np.result_type(getattr(ans_bar, "dtype", ans_bar), x.dtype, 1.0)
    # np.argmax costs ~20 ns a row, a pass per offset ~6 us: passes win for many rows
    # (about k**3 rows of k; measured).
    if x.size >= math.prod(window) ** 4:
        return _first_extremum_by_offset(ans_bar, ans, x, axes, window, keepdims, dtype)
    return _first_extremum_by_row(ans_bar, ans, x, axes, math.prod(window), dtype)


def max_adjoint_transposed(ans_bar, ans, g, m, x, axis=None, keepdims=False):
    """``g`` placed at each window's first extremum, transposed: the values there, summed per window."""
    mask = max_adjoint(np.ones_like(m), m, x, axis, keepdims)
    return unbroadcast(np.sum(ans_bar * mask, axis=axis, keepdims=keepdims), g)


def items_extremum_adjoint(ans_bar, ans, items):
    """Adjoint of the builtin ``max(items)`` / ``min(items)`` (``max(a, b)`` is compiled as
    ``max((a, b))``, which Python evaluates alike): the whole of ``ans_bar`` to the first
    item equal to ``ans``, the one Python returns (:func:`max_adjoint`'s convention).

    Args:
        ans_bar: the adjoint of ``ans``.
        ans: the item ``max`` returned.
        items: a list or tuple of numbers (or 0-d / one-element arrays), or an array,
            which ``max`` iterates over its first axis.

    Returns:
        For a list or tuple, a list with ``ans_bar`` at the first item equal to ``ans``
        (``is`` it, or ``==``: a NaN returned is itself) and zeros of each other item's
        kind; for an array, :func:`max_adjoint` over axis 0; for a dict, none (its keys).
    """
    if iterates_keys(items):
        return {}
    if not isinstance(items, (list, tuple)):
        return max_adjoint(ans_bar, ans, items, 0)
    first = next((i for i, item in enumerate(items) if item is ans or item == ans), None)
    return [ans_bar if i == first else 0.0 if isinstance(item, (int, float)) else np.zeros_like(item)
            for i, item in enumerate(items)]


def items_extremum_adjoint_transposed(u, adjoints, ans_bar, ans, items):
    """``ans_bar`` put at the first extremum of the builtin ``max``/``min``, transposed: read there."""
    return unbroadcast(items_extremum_transposed(u, ans, items), ans_bar)


def items_extremum_transposed(u, ans, items):
    """The transpose of :func:`items_extremum_adjoint` in its ``ans_bar``: ``u``'s item at the
    first extremum (None: zero), or for an array, ``u`` summed over its first axis where the
    first extremum of each column is."""
    if iterates_keys(items):
        return zeros_like(ans)
    if not isinstance(items, (list, tuple)):
        return np.sum(u * max_adjoint(np.ones_like(ans), ans, items, 0), axis=0)
    first = next((i for i, item in enumerate(items) if item is ans or item == ans), None)
    return zeros_like(ans) if first is None or u[first] is None else u[first]


def items_extremum_tangent(ans, items, items_dot):
    """Tangent of the builtin ``max(items)`` / ``min(items)``: that of the first item equal
    to ``ans`` (see :func:`items_extremum_adjoint`); a dict's key has none."""
    if iterates_keys(items):
        return zeros_tangent(ans)
    if not isinstance(items, (list, tuple)):
        first = np.argmax(np.asarray(items) == ans, axis=0)
        return np.take_along_axis(items_dot, np.expand_dims(first, 0), axis=0)[0]
    return next(dot for item, dot in zip(items, items_dot) if item is ans or item == ans)


def sorted_order(items, key=None, reverse=False):
    """The positions of ``sorted(items, key=key, reverse=reverse)``'s items in ``items``:
    Python's sort is stable (``reverse`` too), so sorting the positions by their items
    gives ties in the order ``sorted`` keeps them."""
    items = list(items)
    by = (lambda i: items[i]) if key is None else (lambda i: key(items[i]))
    return sorted(range(len(items)), key=by, reverse=reverse)


def sorted_adjoint(ans_bar, items, key=None, reverse=False):
    """Adjoint of the builtin ``sorted(items, key=key, reverse=reverse)``: item ``j`` of
    ``ans_bar`` goes back to the position the ``j``-th sorted item came from (the
    permutation's inverse).  A list or tuple gets a list (zeros of an item's kind where
    nothing read it); an array, iterated over its first axis, an array."""
    if not isinstance(items, (list, tuple)) and not hasattr(items, "shape"):
        return {}  # (a dict's keys, a set's items: no adjoint reaches them)
    order = sorted_order(items, key, reverse)
    if not isinstance(items, (list, tuple)):
        out = zeros_like(items)
        for j, i in enumerate(order):
            part = item_of(ans_bar, j)
            if part is not None:
                out[i] = out[i] + part
        return out
    parts = [None] * len(order)
    for j, i in enumerate(order):
        parts[i] = item_of(ans_bar, j)
    return dense_items(parts, items)


def sorted_tangent(items, items_dot, key=None, reverse=False):
    """Tangent of ``sorted(items, ...)``: the items' tangents in the sorted order (a dict's
    keys: none)."""
    if iterates_keys(items):
        return [0.0] * len(items)
    return [items_dot[i] for i in sorted_order(items, key, reverse)]


def items_sum_adjoint(ans_bar, items):
    """Adjoint of the builtin ``sum(items, start)``: each item gets ``ans_bar`` summed back
    to its own shape (items broadcast against each other); an array, iterated over its
    first axis, gets ``ans_bar`` in each row; a dict (its keys), none."""
    if iterates_keys(items):
        return {}
    if not isinstance(items, (list, tuple)):
        return broadcast_tangent(ans_bar, items)
    return [unbroadcast(ans_bar, item) for item in items]


def items_sum_tangent(ans, items, items_dot, start_dot=None):
    """Tangent of the builtin ``sum(items, start)``, of ``ans``'s shape (the sum of a dict's
    keys: ``start``'s)."""
    if iterates_keys(items) or items_dot is None:
        return zeros_tangent(ans) if start_dot is None else broadcast_tangent(start_dot, ans)
    total = sum(items_dot) if start_dot is None else sum(items_dot, start_dot)
    return broadcast_tangent(total, ans)


def _first_extremum_by_offset(ans_bar, ans, x, axes, window, keepdims, dtype):
    """:func:`max_adjoint` one window offset at a time (each a slice of ``x``), later ties
    masked by the earlier ones: a pooling layer's 4 or 9 offsets over a batch of images.
    The comparison and the product run once over all of ``x``; only the masking of ties
    (cheap operations on booleans) goes offset by offset."""
    xp = array_module(x)
    if np.shape(ans_bar) != np.shape(ans):
        ans_bar = xp.broadcast_to(ans_bar, np.shape(ans))
    if not keepdims:  # (a reshape: np.expand_dims costs more than the masking below)
        kept = tuple(1 if a in axes else n for a, n in enumerate(x.shape))
        ans, ans_bar = xp.reshape(ans, kept), xp.reshape(ans_bar, kept)
    hit = x == ans
    offsets = list(itertools.product(*map(range, window)))
    leading = axes == tuple(range(len(axes)))  # (the windows' offsets first: hit[offset] is a slice)
    taken = None
    for k, offset in enumerate(offsets):
        if not leading:
            where = [slice(None)] * x.ndim
            for a, i in zip(axes, offset):
                where[a] = i
            offset = tuple(where)
        here = hit[offset]
        if taken is None:
            taken = here.copy()
        else:
            xp.greater(here, taken, out=here)  # equal, and no earlier offset was: `here & ~taken`
            if k + 1 < len(offsets):
                taken |= here
    return _masked(hit, ans_bar, dtype)


def _masked(hit, ans_bar, dtype):
    """``hit * ans_bar`` in ``dtype``: the mask cast, then multiplied in place (a product of
    booleans with floats goes through NumPy's casting buffers: 2x slower, measured)."""
    x_bar = hit.astype(dtype)
    x_bar *= ans_bar
    return x_bar


def _first_extremum_by_row(ans_bar, ans, x, axes, size, dtype):
    """:func:`max_adjoint` with each window as a row and ``np.argmax`` in each row."""
    xp = array_module(x)
    rest = [a for a in range(x.ndim) if a not in axes]
    order = rest + list(axes)
    moved = x if order == sorted(order) else xp.transpose(x, order)
    rows = xp.reshape(moved, (-1, size))
    hit = rows == xp.reshape(ans, (-1, 1))
    hit &= xp.arange(size) == xp.argmax(hit, axis=1)[:, None]
    if np.shape(ans_bar) != np.shape(ans):
        ans_bar = xp.broadcast_to(ans_bar, np.shape(ans))
    x_bar = _masked(hit, xp.reshape(ans_bar, (-1, 1)), dtype)
    if moved is x:
        return xp.reshape(x_bar, x.shape)
    return xp.transpose(xp.reshape(x_bar, moved.shape), np.argsort(order))


def nanmean_adjoint(ans_bar, x, axis=None, keepdims=False):
    """Adjoint of ``np.nanmean``: ``ans_bar / n`` on the elements that are not NaN, ``n``
    their count in each window (NaNs, and all-NaN windows, get 0)."""
    kept = ~np.isnan(x)
    count = np.maximum(np.sum(kept, axis=axis, keepdims=True), 1)
    g = broadcast_reduced(ans_bar, x, axis, keepdims)
    return kept * (g / count.astype(np.result_type(g, 1.0)))


def _weights_like(weights, a, axis):
    """``np.average``'s weights given ``a``'s rank: 1-d weights along ``axis`` get size-1 axes."""
    a, w = _as_array(a), _as_array(weights)
    if w.shape == a.shape:
        return w
    return np.reshape(w, [n if d == axis % a.ndim else 1 for d, n in enumerate(a.shape)])


def average_adjoint(ans_bar, ans, a, axis, weights, keepdims, which):
    """Adjoint of ``np.average(a, axis, weights)`` with respect to ``a`` (``which=0``) or the
    weights (1): ``ans = sum(w a) / sum(w)``, so ``a_bar = g w / sum(w)`` and
    ``w_bar = g (a - ans) / sum(w)`` (the quotient rule)."""
    w = _weights_like(weights, a, axis)
    g = broadcast_reduced(ans_bar, a, axis, keepdims) / np.sum(w, axis=axis, keepdims=True)
    if which == 0:
        return g * w
    spread = (a - _with_kept_dims(ans, a, axis, keepdims)) * g
    return np.reshape(unbroadcast_to(spread, w.shape), np.shape(weights))


def average_tangent(ans, a, axis, weights, keepdims, a_dot, weights_dot):
    """``J v`` of ``np.average``: ``(sum(w a_dot) + sum((a - ans) w_dot)) / sum(w)``."""
    w = _weights_like(weights, a, axis)
    t = 0.0 if a_dot is None else np.sum(w * a_dot, axis=axis, keepdims=True)
    if weights_dot is not None:
        t = t + np.sum((a - _with_kept_dims(ans, a, axis, keepdims)) * _weights_like(weights_dot, a, axis),
                       axis=axis, keepdims=True)
    t = t / np.sum(w, axis=axis, keepdims=True)
    return t if keepdims else np.reshape(t, np.shape(ans))


def _along_first(x, axis):
    return np.ravel(x) if axis is None else np.moveaxis(x, axis, 0)


def _from_first(t, x, axis):
    return np.reshape(t, np.shape(x)) if axis is None else np.moveaxis(t, 0, axis)


def cumprod_adjoint(ans_bar, a, axis=None):
    """Adjoint of ``np.cumprod``, exact where ``a`` has zeros (no division by ``a``):
    ``a_bar[k] = L[k] s[k]`` with ``L[k]`` the product of the elements before ``k`` and
    ``s[k] = g[k] + a[k+1] s[k+1]``, the reverse of the recurrence ``ans[k] = ans[k-1] a[k]``
    (one vectorised step per element along ``axis``)."""
    g, x = _along_first(ans_bar, axis), _along_first(a, axis)
    bar = np.zeros(np.shape(x), dtype=np.result_type(g, x, 1.0))
    if len(x) == 0:
        return _from_first(bar, a, axis)
    left = np.concatenate([np.ones_like(x[:1]), np.cumprod(x[:-1], axis=0)])
    s = g[-1]
    bar[-1] = left[-1] * s
    for k in range(len(x) - 2, -1, -1):
        s = g[k] + x[k + 1] * s
        bar[k] = left[k] * s
    return _from_first(bar, a, axis)


def cumprod_tangent(a_dot, a, ans, axis=None):
    """``J v`` of ``np.cumprod``: ``t[k] = t[k-1] a[k] + ans[k-1] a_dot[k]``."""
    v, x, y = _along_first(a_dot, axis), _along_first(a, axis), _along_first(ans, axis)
    t = np.zeros(np.shape(y), dtype=np.result_type(v, y, 1.0))
    if len(t):
        t[0] = v[0]
    for k in range(1, len(t)):
        t[k] = t[k - 1] * x[k] + y[k - 1] * v[k]
    return _from_first(t, ans, axis)


def prod_adjoint(ans_bar, x, axis=None, keepdims=False):
    """Adjoint of ``np.prod``: the product of all *other* elements, exact at zeros.

    Computed from exclusive cumulative products from the left and the right,
    so no division by ``x`` (which would fail where ``x`` is 0).
    """
    x = _as_array(x)
    ndim = np.ndim(x)
    axes = _axes(axis, ndim)
    rest = [a for a in range(ndim) if a not in axes]
    moved = np.transpose(x, rest + list(axes))
    flat = np.reshape(moved, np.shape(moved)[: len(rest)] + (-1,))
    ones = np.ones_like(flat[..., :1])
    left = np.cumprod(np.concatenate([ones, flat[..., :-1]], axis=-1), axis=-1)
    right = np.cumprod(np.concatenate([ones, flat[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    others = np.reshape(left * right, np.shape(moved))
    others = np.transpose(others, np.argsort(rest + list(axes)))
    return others * broadcast_reduced(ans_bar, x, axis, keepdims)


def var_adjoint(ans_bar, x, axis=None, ddof=0, keepdims=False):
    """Adjoint of ``np.var``: ``2 (x - mean) / (N - ddof)`` times the broadcast adjoint."""
    centred = x - np.mean(x, axis=axis, keepdims=True)
    scale = 2.0 / (count_reduced(x, axis) - ddof)
    return broadcast_reduced(ans_bar, x, axis, keepdims) * centred * scale


def std_adjoint(ans_bar, ans, x, axis=None, ddof=0, keepdims=False):
    """Adjoint of ``np.std = sqrt(var)``: ``var_bar = ans_bar / (2 ans)``; 0 where ``ans`` is 0."""
    var_bar = np.where(ans == 0, 0, ans_bar / np.where(ans == 0, 1, 2 * ans))
    return var_adjoint(var_bar, x, axis, ddof, keepdims)


def _quantile_weights(a, q, axis):
    """``W`` of shape ``shape(q) + shape(a)`` with ``np.quantile(a, q, axis, keepdims=True) ==
    sum(W * a)`` over the reduced axes, for the default ``method='linear'`` (Hyndman & Fan 1996,
    definition 7: the virtual index ``q (n - 1)``, interpolated between the order statistics
    either side).  Each place in the sorted order is the element ``argsort`` (stable) puts there,
    so ties give the weight to one element each, as JAX's ``quantile`` and PyTorch's do; the
    weights are piecewise constant in ``a``."""
    a = np.asarray(a)
    axes = tuple(range(a.ndim)) if axis is None else tuple(
        int(ax) % a.ndim for ax in (axis if isinstance(axis, (tuple, list)) else (axis,)))
    rest = [i for i in range(a.ndim) if i not in axes]
    moved = np.transpose(a, rest + list(axes))
    flat = np.reshape(moved, moved.shape[:len(rest)] + (-1,))
    n = flat.shape[-1]
    ranks = np.argsort(np.argsort(flat, axis=-1, kind="stable"), axis=-1, kind="stable")
    ranks = np.transpose(np.reshape(ranks, moved.shape), np.argsort(rest + list(axes)))
    position = np.asarray(q, dtype=np.float64) * (n - 1)
    low = np.floor(position)
    frac = (position - low).astype(np.result_type(a.dtype, np.float32))
    high = np.minimum(low + 1, n - 1)
    spread = (Ellipsis,) + (None,) * a.ndim
    return (1 - frac)[spread] * (ranks == low[spread]) + frac[spread] * (ranks == high[spread]), axes


def quantile_adjoint(ans_bar, a, q, axis=None, keepdims=False):
    """Adjoint of ``np.quantile`` (``method='linear'``) in ``a``: each of the (one or two)
    order statistics a quantile interpolates gets its weight of that quantile's adjoint
    (``_quantile_weights``), summed over ``q``'s values."""
    weights, axes = _quantile_weights(a, q, axis)
    lead = np.ndim(q)
    if not keepdims:
        ans_bar = np.expand_dims(ans_bar, tuple(lead + ax for ax in axes))
    return np.sum(weights * ans_bar, axis=tuple(range(lead))).astype(np.result_type(ans_bar, a, np.float32))


def quantile_adjoint_transposed(u, ans, ans_bar, a, q, axis=None, keepdims=False):
    """The order statistics' weights spread back, transposed: read again (``np.quantile``)."""
    return quantile_tangent(u, a, q, axis, keepdims)


def quantile_tangent(a_dot, a, q, axis=None, keepdims=False):
    """Tangent of ``np.quantile`` (``method='linear'``): the same interpolation of ``a_dot``'s
    elements that sit, in ``a``, at the order statistics read."""
    weights, axes = _quantile_weights(a, q, axis)
    lead = np.ndim(q)
    return np.sum(weights * a_dot, axis=tuple(lead + ax for ax in axes), keepdims=keepdims)


def quantile_tangent_transposed(u, ans, a_dot, a, q, axis=None, keepdims=False):
    return quantile_adjoint(u, a, q, axis, keepdims)


def nanvar_adjoint(ans_bar, a, axis=None, ddof=0, keepdims=False):
    """Adjoint of ``np.nanvar``: ``2 (a - nanmean) / (count - ddof)`` over the elements that are
    not NaN (as ``np.var``'s), 0 at NaNs."""
    kept = ~np.isnan(a)
    centred = np.where(kept, a - np.nanmean(a, axis=axis, keepdims=True), 0)
    scale = (2.0 / (np.sum(kept, axis=axis, keepdims=True) - ddof)).astype(centred.dtype)
    return broadcast_reduced(ans_bar, a, axis, keepdims) * centred * scale
