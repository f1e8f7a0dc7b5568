"""Output-rank functions shared by several rules (see ``Rule.ndim``)."""
from __future__ import annotations

UNKNOWN = object()


def reduced(ndims, statics, array="a"):
    """Rank after a reduction over ``axis`` (None: all) with ``keepdims``."""
    rank = ndims.get(array)
    axis, keepdims = statics.get("axis", UNKNOWN), statics.get("keepdims", UNKNOWN)
    if axis is None and keepdims is False:
        return 0  # a full reduction is a scalar whatever the input's rank
    if rank is None or axis is UNKNOWN or keepdims is UNKNOWN:
        return None
    if keepdims:
        return rank
    if axis is None:
        return 0
    return rank - (len(axis) if isinstance(axis, tuple) else 1)


def same_as(param):
    return lambda ndims, statics: ndims.get(param)


def fixed(rank):
    return lambda ndims, statics: rank


def matmul(ndims, statics, left="x1", right="x2"):
    a, b = ndims.get(left), ndims.get(right)
    if a is None or b is None:
        return None
    if a == 1 and b == 1:
        return 0
    if a == 1 or b == 1:
        return max(a, b) - 1
    return max(a, b)


def dot(ndims, statics):
    a, b = ndims.get("a"), ndims.get("b")
    if a is None or b is None:
        return None
    if a == 0 or b == 0:
        return max(a, b)
    return a + b - 2


def shape_length(param):
    """Rank of an array created with (or reshaped to) the static shape in ``param``."""
    def rank(ndims, statics):
        shape = statics.get(param, UNKNOWN)
        if shape is UNKNOWN:
            return None
        return len(shape) if isinstance(shape, (tuple, list)) else 1
    return rank


def windows(ndims, statics):
    """``sliding_window_view(x, window_shape)``: one more axis per window dimension."""
    rank, shape = ndims.get("x"), statics.get("window_shape", UNKNOWN)
    if rank is None or shape is UNKNOWN:
        return None
    return rank + (len(shape) if isinstance(shape, (tuple, list)) else 1)
