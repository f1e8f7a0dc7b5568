"""Batched forward mode (``srcgrad.jacfwd``, ``srcgrad.hessian``): the helpers of its
generated code, each putting the column axis of a tangent where it belongs."""
from __future__ import annotations

import numpy as np

from .. import tree
from ..tree import add
from .core import _skipping, array_module, cast_tangent, written_tangent


# ---- batched tangents (srcgrad.jacfwd, srcgrad.hessian) -------------------------------
# In a batched forward program every tangent carries a leading axis of columns: an
# array value of shape s has a tangent of shape (k,) + s, a Python number one of shape
# (k,), a structure a structure of them.  A tangent that is zero for every column has
# k = 1 (it broadcasts).  NumPy aligns axes from the right, so an operand of smaller
# rank than the output would meet the column axis in the wrong place: each helper
# below puts it where it belongs, or, where it cannot tell, loops over the columns
# (`batch_each`): slower, never wrong.

def batch_zeros(x):
    """The batched tangent of a value that does not depend on the inputs: zeros of
    shape ``(1,) + shape(x)`` (a structure of them; ``(1,)`` for a number or None)."""
    if tree.is_structure(x):
        _, leaves, spec = tree.flatten(x, tree.TANGENTS)
        return tree.unflatten(spec, [batch_zeros(leaf) for leaf in leaves])
    if x is None or isinstance(x, (int, float, bool)):
        return np.zeros(1)
    dtype = getattr(x, "dtype", None)
    dtype = dtype if dtype is not None and dtype.kind in "fc" else np.float64
    return array_module(x).zeros((1,) + np.shape(x), dtype)


def batch_size(t) -> int:
    """How many columns a batched tangent carries (1: the same for all)."""
    if tree.is_structure(t):
        return max((batch_size(leaf) for leaf in tree.flatten(t, tree.TANGENTS)[1]), default=1)
    return np.shape(t)[0] if np.ndim(t) else 1


def batch_column(t, i):
    """Column ``i`` of a batched tangent: an unbatched tangent."""
    if tree.is_structure(t):
        _, leaves, spec = tree.flatten(t, tree.TANGENTS)
        return tree.unflatten(spec, [batch_column(leaf, i) for leaf in leaves])
    if np.ndim(t) == 0:
        return t
    # (A 0-d array, not NumPy's scalar: np.float64 is a Python float, which a tangent
    # rule's `is_constant(x_dot)` takes for no tangent at all.)
    return t[i if np.shape(t)[0] > 1 else 0, ...]


def batch_stack(columns):
    """The batched tangent of unbatched ones (one per column)."""
    if tree.is_structure(columns[0]):
        flat = [tree.flatten(c, tree.TANGENTS) for c in columns]
        return tree.unflatten(flat[0][2], [batch_stack([f[1][j] for f in flat]) for j in range(len(flat[0][1]))])
    module = array_module(columns[0])
    return module.stack([module.asarray(c, dtype=np.result_type(c, 1.0)) for c in columns])


def batch_each(fn, *tangents):
    """``fn`` (linear in its arguments, which are unbatched tangents) applied column
    by column: the batched form of any linear map, for primitives whose batched form
    srcgrad does not write out."""
    k = max(batch_size(t) for t in tangents)
    return batch_stack([fn(*(batch_column(t, i) for t in tangents)) for i in range(k)])


def batch_aligned(t, ans):
    """``t`` with axes of length 1 after the column axis, up to ``ans``'s rank: so that
    broadcasting against ``ans``-shaped values keeps the columns apart."""
    return _lifted(t, np.ndim(ans))


def _lifted(t, rank):
    """``t`` (batched) as the tangent of a value of rank ``rank`` (axes of length 1 inserted)."""
    missing = rank + 1 - np.ndim(t)
    if missing <= 0:
        return t
    shape = np.shape(t)
    return t.reshape(shape[:1] + (1,) * missing + shape[1:])


def batch_broadcast(t, ans):
    """``broadcast_tangent`` for batched ``t``: shape ``(k,) + shape(ans)``."""
    t = batch_aligned(t, ans)
    shape = np.shape(t)[:1] + np.shape(ans)
    if np.shape(t) == shape:
        return t
    module = array_module(t)
    return module.array(module.broadcast_to(t, shape))


def batch_cast(t, ans):
    """``cast_tangent`` for batched ``t``."""
    return cast_tangent(t, ans, (1,))


def batch_axis(axis, a):
    """``axis`` of ``a`` as an axis of ``a``'s batched tangent (None: all but the columns)."""
    n = np.ndim(a)
    if axis is None:
        return tuple(range(1, n + 1))
    if isinstance(axis, tuple):
        return tuple(ax % n + 1 for ax in axis)
    return axis % n + 1


def batch_reduction_tangent(g, a_dot, axis=None, keepdims=False):
    """``reduction_tangent`` for batched ``a_dot`` (``g`` has ``a``'s shape)."""
    return np.sum(_skipping(g, a_dot), axis=batch_axis(axis, g), keepdims=keepdims)


def batch_reshape(t, ans):
    """The batched tangent of a C-order reshape (``reshape ravel squeeze expand_dims``)."""
    return t.reshape(np.shape(t)[:1] + np.shape(ans))


def _is_index_array(entry) -> bool:
    return isinstance(entry, (list, np.ndarray)) or hasattr(entry, "__cuda_array_interface__")


def batch_getitem(t, index):
    """``a[index]``'s batched tangent: ``t[:, index]`` where that keeps the columns first
    (basic indexing, or one index array among slices), else column by column.  An
    entry of a structure is the entry itself (its leaves are batched)."""
    if tree.is_structure(t) or not hasattr(t, "ndim"):
        return t[index]
    entries = index if isinstance(index, tuple) else (index,)
    arrays = sum(1 for e in entries if _is_index_array(e))
    if arrays == 0 or arrays == 1 and not any(isinstance(e, (int, np.integer)) for e in entries):
        return t[(slice(None),) + entries]
    return batch_each(lambda column: column[index], t)


def batch_written(y_dot, index, v_dot, y):
    """``y_dot`` after ``y[index] = v``'s tangent write, batched: ``y_dot[:, index] = v_dot``,
    column by column where the index does not keep the columns first (as
    :func:`batch_getitem`).  In place when ``y_dot`` is a writable array holding every
    column; else written into a copy of ``y_dot`` broadcast to every column (a zero
    tangent has one column, a broadcast one is read-only).  ``y``: the primal after
    the write (shape ``y.shape``, its dtype: an integer ``y`` gets a zero tangent)."""
    v_dot = written_tangent(v_dot, y)
    k = max(batch_size(y_dot), batch_size(v_dot))
    module = array_module(y)
    if not (hasattr(y_dot, "flags") and y_dot.flags.writeable and np.shape(y_dot) == (k,) + np.shape(y)):
        dtype = getattr(y_dot, "dtype", np.float64)
        y_dot = module.array(module.broadcast_to(y_dot, (k,) + np.shape(y)), dtype)
    entries = index if isinstance(index, tuple) else (index,)
    arrays = sum(1 for e in entries if _is_index_array(e))
    if np.ndim(v_dot) == 0 or arrays == 0 or arrays == 1 and not any(isinstance(e, (int, np.integer))
                                                                     for e in entries):
        if np.ndim(v_dot):  # (k or 1, *v.shape), v.shape broadcast against the written part's
            v_dot = _lifted(v_dot, np.ndim(y[index]))
        y_dot[(slice(None),) + entries] = v_dot
    else:
        for i in range(k):
            y_dot[i][index] = batch_column(v_dot, i)
    return y_dot


def batch_add(a_dot, b_dot, ans):
    """The tangent of ``add(a, b)`` (the adjoints' accumulation), batched."""
    if tree.is_structure(ans):  # leaf by leaf: the leaves' tangents have their own column axes
        return b_dot if a_dot is None else a_dot if b_dot is None else add(a_dot, b_dot)
    if a_dot is None:
        return batch_broadcast(b_dot, ans)
    if b_dot is None:
        return batch_broadcast(a_dot, ans)
    return batch_broadcast(batch_aligned(a_dot, ans) + batch_aligned(b_dot, ans), ans)


def batch_asarray(t):
    """A list or tuple of batched tangents read as one array by NumPy: its columns
    stay the first axis (``np.asarray`` would put the list's axis first)."""
    if not isinstance(t, (list, tuple)):
        return t
    items = [batch_asarray(e) for e in t]
    k = max(batch_size(e) for e in items)
    module = array_module(items[0])
    return module.stack([module.broadcast_to(e, (k,) + np.shape(e)[1:]) for e in items], axis=1)


def batch_matmul(x1, x2, batched: int):
    """``x1 @ x2`` with one operand a batched tangent (``batched``: 1 or 2 says which),
    for any ranks (NumPy's matmul: a 1-D operand is a vector, the rest stacks)."""
    if batched == 1:
        t, r1, r2 = x1, np.ndim(x1) - 1, np.ndim(x2)
        if r1 == 0 or r2 == 0:
            return batch_each(lambda c: c @ x2, t)  # (an error, as NumPy's)
        if r2 == 1:
            return t @ x2  # (k, ..., n) @ (n,): the vector contracts the last axis
        if r1 == 1:  # (k, n) as (k, 1..., 1, n): one row per column
            rows = t.reshape(t.shape[:1] + (1,) * (r2 - 1) + t.shape[1:])
            return (rows @ x2)[..., 0, :]
        return _lifted(t, max(r1, r2)) @ x2
    t, r1, r2 = x2, np.ndim(x1), np.ndim(x2) - 1
    if r1 == 0 or r2 == 0:
        return batch_each(lambda c: x1 @ c, t)
    if r2 == 1:  # (k, n) as (k, 1..., n, 1): one column vector per column
        vectors = t.reshape(t.shape[:1] + (1,) * (r1 - 2) + t.shape[1:] + (1,)) if r1 > 1 else t[..., None]
        return (x1 @ vectors)[..., 0]
    if r1 == 1:
        return x1 @ t
    return x1 @ _lifted(t, max(r1, r2))
