"""The mathematics of the rules of indexing and shapes (``rules/shape.py``): ``a[index]``,
reshapes, joins and splits, windows, sorts, gathers, ``np.unique``."""
from __future__ import annotations

import numpy as np
import optree

from .. import errors, tree
from .core import array_module, is_basic_index, item_of, static, unbroadcast


@static
def counts_from_the_end(index) -> bool:
    """A constant index into a list or tuple that is not already one of its keys:
    negative (``xs[-1]``) or a slice."""
    return isinstance(index, slice) or isinstance(index, int) and index < 0


@static
def inverse_permutation(axes, ndim=None):
    """The axes that undo ``np.transpose(x, axes)`` for an ``x`` of rank ``ndim``
    (negative axes count from the end, as NumPy reads them)."""
    if ndim is None:
        ndim = len(axes)
    return tuple(int(i) for i in np.argsort([int(a) % ndim for a in axes]))


def reshape_back(g, a, order):
    """Adjoint of ``np.reshape(a, shape, order)`` / ``np.ravel(a, order)``: ``g``
    reshaped to ``a``'s shape in the same index order (a reshape in one order is a
    bijection of positions in that order).  ``'A'`` is ``'F'`` for an ``a`` that is
    Fortran- and not C-contiguous, else ``'C'`` (NumPy's reading of it).

    Raises:
        ValueError: ``order='K'`` (memory order, not modelled).
    """
    order = order.upper() if isinstance(order, str) else order
    if order == "A":
        order = "F" if getattr(a, "flags", None) is not None and a.flags.f_contiguous \
            and not a.flags.c_contiguous else "C"
    if order not in ("C", "F"):
        raise ValueError(f"srcgrad differentiates reshape/ravel with order 'C', 'F' or 'A', not {order!r}")
    return array_module(g).reshape(g, np.shape(a), order=order)


def reshape_back_transposed(ans_bar, ans, g, a, order):
    return np.reshape(ans_bar, np.shape(g), order=order)


def real_input(g, val):
    """``g``, the adjoint of ``np.real(val)`` (or of ``np.imag``, times 0) for a real ``val``.

    Raises:
        UnsupportedSyntaxError: ``val`` is complex (srcgrad does not differentiate complex
            numbers yet).
    """
    if np.iscomplexobj(val):
        raise errors.UnsupportedSyntaxError(
            "the real or imaginary part of a complex value that is being differentiated: srcgrad does "
            "not differentiate complex numbers yet", None, "compute with real arrays (the real and "
            "imaginary parts as two arrays)")
    return g


def real_input_transposed(ans_bar, ans, g, val):
    return real_input(ans_bar, val)


def dtype_adjoint(g, dtype):
    """``g``, or zeros where a reduction computes in an integer or boolean ``dtype``
    (``np.sum(x, dtype=int)`` rounds each element: derivative zero)."""
    if dtype is None or np.dtype(dtype).kind in "fc":
        return g
    return array_module(g).zeros_like(g)


def dtype_adjoint_transposed(ans_bar, ans, g, dtype):
    return dtype_adjoint(ans_bar, dtype)


def index_concat(concat, items):
    """``np.r_[items]`` or ``np.c_[items]`` (``concat`` is one of them, or CuPy's): how
    generated code writes them, so that their items get adjoints."""
    return concat[tuple(items)]


def index_concat_adjoint(ans_bar, concat, items):
    """One adjoint per item of ``np.r_[...]`` (joined along the first axis) or
    ``np.c_[...]`` (the last; a vector is a column): each item's piece of ``ans_bar``,
    in the item's shape; None for a slice (a range of numbers, no derivative)."""
    axis = getattr(concat, "axis", 0)  # np.r_: 0, np.c_: -1
    pieces = [concat[item] if isinstance(item, slice) else concat[item,] for item in items]
    sizes = [np.shape(p)[axis] for p in pieces]
    split = np.split(ans_bar, np.cumsum(sizes)[:-1], axis=axis)
    return [None if isinstance(item, slice) else np.reshape(part, np.shape(item))
            for item, part in zip(items, split)]


def unconcatenate(ans_bar, arrays, axis=0):
    """Split the adjoint of ``np.concatenate(arrays, axis)`` into one adjoint per input."""
    if axis is None:
        sizes = [np.size(a) for a in arrays]
        pieces = np.split(np.ravel(ans_bar), np.cumsum(sizes)[:-1])
        return [np.reshape(p, np.shape(a)) for p, a in zip(pieces, arrays)]
    sizes = [np.shape(a)[axis] for a in arrays]
    return np.split(ans_bar, np.cumsum(sizes)[:-1], axis=axis)


def flattened_adjoint(ans_bar, ans):
    """Adjoint of ``value`` in ``vector, unflatten = srcgrad.misc.flatten(value)``: the
    vector's adjoint put back in ``value``'s structure (``unflatten`` of it); None where
    nothing read the vector."""
    vector_bar = item_of(ans_bar, 0)
    return None if vector_bar is None else ans[1](vector_bar)


def flattened_tangent(ans, value_dot):
    """Tangent of ``srcgrad.misc.flatten(value)``: the tangent's leaves joined in the
    same order (zeros for a constant ``value``), and no tangent for ``unflatten``."""
    if value_dot is None:
        return np.zeros_like(ans[0]), None
    leaves = optree.tree_leaves(value_dot)
    return (np.concatenate([np.ravel(leaf) for leaf in leaves]) if leaves else np.zeros(0)), None


def unflattened_adjoint(ans_bar, ans):
    """Adjoint of ``vector`` in ``value = unflatten(vector)`` (from ``srcgrad.misc.flatten``):
    the adjoint of each leaf of ``value``, raveled and joined in ``flatten``'s order (zeros
    for a leaf nothing read)."""
    leaves = tree.flatten(tree.materialize(ans_bar, ans))[1]
    return np.concatenate([np.ravel(leaf) for leaf in leaves]) if leaves else np.zeros(0)


def unflattened_adjoint_transposed(u, value, ans_bar, ans):
    """A structure's leaves joined into a vector, transposed: the vector split back into them."""
    return unflattened_tangent(ans, u)


def unflattened_tangent(ans, vector_dot):
    """Tangent of ``unflatten(vector)``: ``vector_dot`` split into ``ans``'s leaves."""
    if vector_dot is None:
        return None
    _, leaves, spec = tree.flatten(ans)
    ends = np.cumsum([np.size(leaf) for leaf in leaves])[:-1]
    parts = np.split(np.asarray(vector_dot), ends)
    return tree.unflatten(spec, [p.reshape(np.shape(leaf)) for p, leaf in zip(parts, leaves)])


def getitem_adjoint(ans_bar, a, index):
    """Adjoint of ``a[index]`` for any ``a``: an array, or a list/tuple/dict of parameters.

    Arrays: ``ans_bar`` scattered into zeros, by assignment for a basic index (slices,
    ints), with ``np.add.at`` otherwise so that repeated integer indices accumulate.
    Structures: a sparse adjoint ``{index: ans_bar}``.
    """
    if isinstance(a, (list, tuple)) and isinstance(index, slice):
        positions = range(len(a))[index]
        parts = [ans_bar.get(j) for j in range(len(positions))] if isinstance(ans_bar, dict) else ans_bar
        return {i: g for i, g in zip(positions, parts) if g is not None}
    if isinstance(a, (list, tuple)):
        return {index % len(a): ans_bar}  # xs[-1] is xs[len(xs) - 1]: one key per item
    if isinstance(a, dict):
        return {index: ans_bar}
    listed = getattr(type(a), "_items", None)
    if isinstance(listed, str):  # `seq[i]` of an nn.Sequential: `seq.layers[i]`
        return {listed: getitem_adjoint(ans_bar, getattr(a, listed), index)}
    if tree._is_object(a):
        raise errors.UnsupportedSyntaxError(
            f"indexing a {type(a).__name__}, which holds values being differentiated, runs its class's "
            "`__getitem__`, which srcgrad does not differentiate", None,
            "index the list or array it holds (`obj.layers[i]`), or call a method that does the same")
    a_bar = np.zeros_like(a)
    if is_basic_index(index):  # each element read at most once: ~70x faster than np.add.at
        a_bar[index] = ans_bar
    else:
        np.add.at(a_bar, index, ans_bar)
    return a_bar


def getitem_adjoint_transposed(ans_bar, ans, g, a, index):
    """Scattering into zeros, transposed: reading the same elements again."""
    return ans_bar[index]


def written_adjoint(g, index, value):
    """Adjoint of ``value`` in the write ``y[index] = value``, given ``y``'s adjoint ``g``.

    Where an integer-array index repeats, only the last write lands (NumPy's
    assignment semantics), so only that element of ``value`` gets an adjoint.
    """
    picked = g[index]
    if is_basic_index(index):
        return unbroadcast(picked, value)
    xp = array_module(g)
    order = xp.arange(np.size(picked)).reshape(np.shape(picked))
    winner = xp.full(np.shape(g), -1)
    winner[index] = order
    return unbroadcast(picked * (winner[index] == order), value)


def written_adjoint_transposed(ans_bar, ans, g, index, value):
    """The elements of ``g`` that a write ``y[index] = value`` lands on (the last of a repeated
    index), transposed: scattered back there, each the sum over what ``value`` broadcast to."""
    lands = written_adjoint(np.ones_like(g), index, g[index])
    return getitem_adjoint(np.broadcast_to(ans_bar, np.shape(lands)) * lands, g, index)


def window_adjoint(g, x, window_shape, axis=None):
    """Adjoint of ``np.lib.stride_tricks.sliding_window_view(x, window_shape, axis)``.

    Each window offset is one strided slice of ``x``; their adjoints add up
    (windows overlap).  One vectorised add per offset, e.g. 9 for a 3x3 kernel.
    """
    x_bar = array_module(g).zeros(np.shape(x), dtype=getattr(g, "dtype", None) or np.result_type(g))
    window_shape = (window_shape,) if isinstance(window_shape, int) else tuple(window_shape)
    axes = tuple(range(np.ndim(x))) if axis is None else (axis,) if isinstance(axis, int) else tuple(axis)
    axes = tuple(a % np.ndim(x) for a in axes)
    for offsets in np.ndindex(*window_shape):
        where = [slice(None)] * np.ndim(x)
        for a, offset, width in zip(axes, offsets, window_shape):
            where[a] = slice(offset, offset + np.shape(x)[a] - width + 1)
        x_bar[tuple(where)] += g[(Ellipsis,) + offsets]
    return x_bar


def window_adjoint_transposed(ans_bar, ans, g, x, window_shape, axis=None):
    """Overlapping windows' adjoints added into ``x``'s shape, transposed: the windows again."""
    return np.lib.stride_tricks.sliding_window_view(ans_bar, window_shape, axis)


def joined_adjoint(ans_bar, arrays, how):
    """One adjoint per array of ``np.hstack`` / ``np.vstack`` / ``np.column_stack`` /
    ``np.dstack`` (``how``): each array's piece of ``ans_bar``, in its own shape.  The
    arrays are first made 1-d (hstack), 2-d rows (vstack), columns (column_stack) or 3-d
    (dstack), then joined along axis 0 (vstack, and hstack of vectors), 1 or 2 (dstack)."""
    if how == "vstack":
        axis, sizes = 0, [np.shape(np.atleast_2d(np.empty(np.shape(a), bool)))[0] for a in arrays]
    elif how == "dstack":
        axis, sizes = 2, [np.shape(np.atleast_3d(np.empty(np.shape(a), bool)))[2] for a in arrays]
    elif how == "column_stack":
        axis, sizes = 1, [1 if np.ndim(a) < 2 else np.shape(a)[1] for a in arrays]
    else:
        axis = 0 if np.ndim(ans_bar) == 1 else 1
        sizes = [np.shape(np.atleast_1d(np.empty(np.shape(a), bool)))[axis] for a in arrays]
    parts = np.split(ans_bar, np.cumsum(sizes)[:-1], axis=axis)
    return [np.reshape(p, np.shape(a)) for p, a in zip(parts, arrays)]


def cumsum_adjoint(ans_bar, a, axis=None):
    """Adjoint of ``np.cumsum``: the sums from the other end."""
    if axis is None:
        g = np.ravel(ans_bar)
        return np.reshape(np.cumsum(g[::-1])[::-1], np.shape(a))
    return np.flip(np.cumsum(np.flip(ans_bar, axis), axis), axis)


def roll_back(ans_bar, shift, axis=None):
    """Adjoint of ``np.roll(a, shift, axis)``: the roll the other way."""
    back = tuple(-s for s in shift) if isinstance(shift, (tuple, list)) else -shift
    return np.roll(ans_bar, back, axis)


def diff_adjoint(ans_bar, n=1, axis=-1):
    """Adjoint of ``np.diff(a, n, axis)``: ``diff`` is ``D a``; ``D^T g = -diff(pad(g, 1))``."""
    g = ans_bar
    for _ in range(n):
        pad = [(1, 1) if d == axis % np.ndim(g) else (0, 0) for d in range(np.ndim(g))]
        g = -np.diff(np.pad(g, pad), axis=axis)
    return g


def sort_adjoint(ans_bar, a, axis=-1):
    """Adjoint of ``np.sort``: each element gets the adjoint of the place it moved to
    (ties: the order ``argsort`` gives, one of the equally valid choices)."""
    if axis is None:
        order = np.argsort(np.ravel(a), kind="stable")
        bar = np.zeros(np.size(a), dtype=np.result_type(ans_bar, 1.0))
        bar[order] = ans_bar
        return np.reshape(bar, np.shape(a))
    order = np.argsort(a, axis=axis, kind="stable")
    bar = np.zeros(np.shape(a), dtype=np.result_type(ans_bar, 1.0))
    np.put_along_axis(bar, order, ans_bar, axis=axis)
    return bar


def sort_adjoint_transposed(u, ans, ans_bar, a, axis=-1):
    """Elements put back where they came from, transposed: moved where they go (``np.sort``)."""
    return sorted_like(u, a, axis)


def positions(a):
    """The flat position of each element of ``a``, in ``a``'s shape: a function that only
    selects, repeats, reorders or pads elements (``np.take``, ``np.tile``, ``np.insert``)
    applied to it tells where each element of its output came from."""
    xp = array_module(a)
    return xp.reshape(xp.arange(np.size(a)), np.shape(a))


def gather_adjoint(g, a, where):
    """Adjoint of a function that only selects, repeats or reorders elements of ``a``:
    ``where`` is that function applied to ``positions(a)`` (with ``-1`` where an output
    element comes from elsewhere, a pad or an inserted value).  Each element of ``a`` gets
    the sum of ``g`` over the places it went to (``np.bincount``).

    Args:
        g: the output's adjoint, float, of ``where``'s shape.
        a: the input (only its shape is read).
        where: integers, of the output's shape.

    Returns:
        An array of ``a``'s shape and ``g``'s float dtype.
    """
    xp = array_module(g)
    where, g = xp.ravel(xp.asarray(where)), xp.ravel(xp.asarray(g))
    kept = where >= 0
    total = xp.bincount(where[kept], weights=g[kept], minlength=np.size(a))
    return xp.reshape(total.astype(np.result_type(g, 1.0), copy=False), np.shape(a))


def gather_adjoint_transposed(ans_bar, ans, g, a, where):
    """Summing into the places elements came from, transposed: reading them there."""
    return gathered(ans_bar, where)


def gathered(u, where):
    """``u``'s elements at ``where`` (0 at ``-1``): the transpose of :func:`gather_adjoint`."""
    xp = array_module(u)
    flat = xp.ravel(u)
    return xp.where(where >= 0, flat[where], 0) if np.size(flat) else xp.zeros(np.shape(where), u.dtype)


def gathered_transposed(ans_bar, ans, u, where):
    return gather_adjoint(ans_bar, u, where)


def permuted_adjoint(g, a, ans, axis=-1):
    """Adjoint of a function whose output is a permutation of ``a`` along ``axis``
    (``np.partition``): output and input elements are matched by value (each sorted
    stably), so the pairing is right whatever order the function left the rest in; equal
    elements pair in order, one of the equally valid choices, as ``sort_adjoint``."""
    if axis is None:
        return np.reshape(permuted_adjoint(np.ravel(g), np.ravel(a), ans, 0), np.shape(a))
    src, dst = np.argsort(a, axis=axis, kind="stable"), np.argsort(ans, axis=axis, kind="stable")
    bar = np.zeros(np.shape(a), dtype=np.result_type(g, 1.0))
    np.put_along_axis(bar, src, np.take_along_axis(g, dst, axis=axis), axis=axis)
    return bar


def permuted_tangent(t, a, ans, axis=-1):
    """The tangent of such a permutation: each element's tangent goes where the element went."""
    if axis is None:
        a, ans, t, axis = np.ravel(a), np.ravel(ans), np.ravel(t), 0
    src, dst = np.argsort(a, axis=axis, kind="stable"), np.argsort(ans, axis=axis, kind="stable")
    out = np.zeros(np.shape(ans), dtype=np.result_type(t, 1.0))
    np.put_along_axis(out, dst, np.take_along_axis(t, src, axis=axis), axis=axis)
    return out


def split_adjoint(ans_bar, ary, indices_or_sections, axis, how):
    """Adjoint of ``np.split`` / ``array_split`` / ``hsplit`` / ``vsplit`` / ``dsplit`` (``how``):
    the pieces' adjoints joined again, zeros for a piece nothing read."""
    pieces = getattr(np, how)(positions(ary), indices_or_sections, **({} if how[0] in "hvd" else {"axis": axis}))
    parts = [item_of(ans_bar, i) for i in range(len(pieces))]
    xp = array_module(ary)
    dtype = np.result_type(*[p for p in parts if p is not None], 1.0)
    flat = [xp.zeros(np.size(w), dtype) if p is None else xp.ravel(p) for p, w in zip(parts, pieces)]
    return gather_adjoint(xp.concatenate(flat), ary, xp.concatenate([xp.ravel(w) for w in pieces]))


def sorted_like(t, a, axis=-1):
    """``t`` reordered as ``np.sort`` reorders ``a`` (ties in ``argsort``'s stable order,
    as ``sort_adjoint``)."""
    if axis is None:
        return np.ravel(t)[np.argsort(np.ravel(a), kind="stable")]
    return np.take_along_axis(t, np.argsort(a, axis=axis, kind="stable"), axis=axis)


@static
def rollaxis_destination(ndim, axis, start=0):
    """Where ``np.rollaxis(a, axis, start)`` puts ``axis`` (NumPy's own normalisation)."""
    axis = axis % ndim
    start = start + ndim if start < 0 else start
    return start - 1 if axis < start else start


def broadcast_arrays_adjoint(ans_bar, ans, args):
    """Adjoint of ``np.broadcast_arrays``: each output's adjoint summed back to its input's shape
    (``unbroadcast``); nothing for an output nothing read."""
    return [None if item_of(ans_bar, k) is None else unbroadcast(item_of(ans_bar, k), arg)
            for k, arg in enumerate(args)]


def meshgrid_adjoint(ans_bar, ans, xi, indexing="xy"):
    """Adjoint of ``np.meshgrid``: output ``k`` repeats ``xi[k]`` (flattened) along every axis but
    its own (axis ``k``; with ``indexing='xy'`` the first two swapped), so its adjoint is summed
    over the others."""
    out = []
    for k, x in enumerate(xi):
        g = item_of(ans_bar, k)
        own = (1 - k if k < 2 else k) if indexing == "xy" and len(xi) > 1 else k
        out = out + [None if g is None else np.reshape(
            np.sum(g, axis=tuple(i for i in range(np.ndim(g)) if i != own)), np.shape(x))]
    return out


def unique_adjoint(ans_bar, ans, ar, equal_nan=True):
    """Adjoint of ``np.unique``'s values (the first item when it returns a tuple; the indices,
    inverse and counts are integers): each value is an element of ``ar``, and its adjoint goes to
    the value's first occurrence (``return_index``), as JAX's ``unique`` (a stable sort's first of
    equal elements).  Between distinct elements this is the derivative; where elements are equal
    (a tie, where ``unique`` jumps in size) it is one choice."""
    g = item_of(ans_bar, 0) if isinstance(ans, tuple) else ans_bar
    first = np.unique(ar, return_index=True, equal_nan=equal_nan)[1]
    return np.reshape(getitem_adjoint(g, np.ravel(ar), first), np.shape(ar))


def unique_tangent(ar_dot, ans, ar, equal_nan=True):
    first = np.unique(ar, return_index=True, equal_nan=equal_nan)[1]
    values_dot = np.ravel(ar_dot)[first]
    if isinstance(ans, tuple):
        return (values_dot,) + tuple(np.zeros_like(item) for item in ans[1:])
    return values_dot
