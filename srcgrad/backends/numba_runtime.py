"""The numba forms of the runtime helpers generated code calls (``rt.<name>`` under
``backend="numba"``, where this module is imported as ``rt``).

Each helper is a plain function numba replaces by its ``numba.extending.overload``,
chosen for the argument types when the program is compiled (``srcgrad.runtime``'s
helpers read shapes and types when they run, which numba's nopython mode cannot):
the same results as ``srcgrad.runtime``'s, for numbers and NumPy arrays.  A helper
missing here is refused where the generated code would call it
(``transforms/numba_subset.py``).  Importing this module imports numba.
"""
from __future__ import annotations

import numpy as np
from numba import types
from numba.core.extending import overload, register_jitable


def unbroadcast(g, x):
    """``g`` summed down to ``x``'s shape (``srcgrad.runtime.unbroadcast``)."""
    raise NotImplementedError("called from numba-compiled code only")


def unbroadcast_to(g, shape):
    """``unbroadcast`` given the primal's shape (``srcgrad.runtime.unbroadcast_to``)."""
    raise NotImplementedError("called from numba-compiled code only")


def fill_like(a, value):
    """``value`` in ``a``'s shape, of a floating dtype (``srcgrad.runtime.fill_like``)."""
    raise NotImplementedError("called from numba-compiled code only")


def add(a, b):
    """The sum of two adjoints (``srcgrad.runtime.add``)."""
    raise NotImplementedError("called from numba-compiled code only")


def zeros_like(x):
    """A zero adjoint for ``x`` (``srcgrad.runtime.zeros_like``)."""
    raise NotImplementedError("called from numba-compiled code only")


def weak(value, like):
    """The Python float ``value`` as NumPy 2 reads it beside ``like`` (NEP 50's "weak"
    scalar): in ``like``'s float type where that is floating, else as it is."""
    raise NotImplementedError("called from numba-compiled code only")


def size_one_seed(value, seed, where):
    """``grad``'s seed for an array output of one element (``srcgrad.runtime.size_one_seed``)."""
    raise NotImplementedError("called from numba-compiled code only")


def scalar_seed(value, seed, where):
    """``grad``'s seed where the output's rank is known when the code runs only."""
    raise NotImplementedError("called from numba-compiled code only")


# ---- the overloads: one per helper, chosen on the argument types --------------------------

def _is_array(t) -> bool:
    return isinstance(t, types.Array)


def _float_dtype(t):
    """The NumPy dtype of an adjoint of ``t``: its own if floating, else float64."""
    dtype = t.dtype if _is_array(t) else t
    return np.float32 if dtype == types.float32 else np.float64


@register_jitable
def _summed_to(g, shape):
    """``g`` summed over the axes it was broadcast along, to ``shape`` (a tuple no longer
    than ``g.ndim``): each element of ``g`` added into the element of the result it was
    broadcast from, in one pass over ``g``."""
    n, m = g.ndim, len(shape)
    out = np.zeros(shape, g.dtype)
    flat = out.reshape(-1)
    source = np.ascontiguousarray(g).reshape(-1)
    stride = np.zeros(n, np.int64)  # the step in ``flat`` along each of g's axes (0: summed)
    step = 1
    for i in range(m - 1, -1, -1):
        if shape[i] != 1:
            stride[n - m + i] = step
        step *= shape[i]
    have = np.array(g.shape)
    index = np.zeros(n, np.int64)
    at = 0
    for k in range(source.size):
        flat[at] += source[k]
        axis = n - 1
        while axis >= 0:
            index[axis] += 1
            at += stride[axis]
            if index[axis] < have[axis]:
                break
            at -= stride[axis] * index[axis]
            index[axis] = 0
            axis -= 1
    return out


@overload(unbroadcast)
def _unbroadcast(g, x):
    if _is_array(g) and _is_array(x):
        if g.ndim == x.ndim:
            def same_rank(g, x):
                if g.shape == x.shape:
                    return g
                return _summed_to(g, x.shape)
            return same_rank
        return lambda g, x: _summed_to(g, x.shape)
    if _is_array(g):
        return lambda g, x: g.sum()
    if _is_array(x):
        return lambda g, x: np.full(x.shape, g)
    return lambda g, x: g


@overload(unbroadcast_to)
def _unbroadcast_to(g, shape):
    rank = len(shape) if isinstance(shape, types.BaseTuple) else None
    if not _is_array(g):
        return lambda g, shape: g
    if rank == 0:
        return lambda g, shape: g.sum()
    if rank == g.ndim:
        def same_rank(g, shape):
            if g.shape == shape:
                return g
            return _summed_to(g, shape)
        return same_rank
    return lambda g, shape: _summed_to(g, shape)


@overload(fill_like)
def _fill_like(a, value):
    if _is_array(a):
        dtype = _float_dtype(a)
        return lambda a, value: np.full(a.shape, value, dtype)
    return lambda a, value: float(value)


@overload(add)
def _add(a, b):
    if isinstance(a, types.NoneType):
        return lambda a, b: b
    if isinstance(b, types.NoneType):
        return lambda a, b: a
    return lambda a, b: a + b


@overload(zeros_like)
def _zeros_like(x):
    if _is_array(x):
        return lambda x: np.zeros_like(x)
    if x == types.float32:
        return lambda x: np.float32(0.0)
    return lambda x: 0.0


@overload(weak)
def _weak(value, like):
    dtype = like.dtype if _is_array(like) else like
    if isinstance(dtype, types.Float) and isinstance(value, types.Float) and dtype != value:
        cast = np.float32 if dtype == types.float32 else np.float64
        return lambda value, like: cast(value)
    return lambda value, like: value


@overload(size_one_seed)
def _size_one_seed(value, seed, where):
    dtype = _float_dtype(value)

    def seeded(value, seed, where):
        if value.size != 1:
            raise ValueError("grad needs a scalar output, but the function returned an array of more than "
                             "one element")
        return np.full(value.shape, seed, dtype)
    return seeded


@overload(scalar_seed)
def _scalar_seed(value, seed, where):
    if _is_array(value):
        return _size_one_seed(value, seed, where)
    return lambda value, seed, where: seed
