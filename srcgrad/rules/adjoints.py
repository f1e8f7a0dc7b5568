"""Rules of the runtime helpers that generated reverse-mode code calls, so that
srcgrad can transform its own output again (``srcgrad.hvp``: forward mode over
a gradient's code).

Each helper computes an adjoint, which is linear in the adjoint it is given
(``g``): its tangent is the helper applied to ``g``'s tangent (``"linear"``),
or, for the matmul adjoints, also linear in the other factor (``"bilinear"``).
The primal arguments a helper reads only for their shape, or through a mask
that is piecewise constant in them (which element of a window is its maximum),
have derivative zero (almost everywhere, the convention of ``np.maximum``'s
rule).  Each adjoint rule here is the transpose of that linear map:
``<u, helper(g)> = <helper^T(u), g>``.

A helper without a rule here is differentiated from its own source when forward
mode meets it (right, or refused at its line).
"""
from __future__ import annotations

import numpy as np

from ..runtime import (add, add_each, add_items, as_items, broadcast_reduced, cast_tangent, in_form_of, items_adjoint, no_items_dot, broadcast_tangent, cast_adjoint, count_reduced, diag_adjoint,
                       dtype_adjoint, einsum_adjoints, einsum_adjoints_tangent, einsum_adjoints_transposed,
                       fill_like, gather_adjoint, real_input, gathered, getitem_adjoint, is_constant, item_of,
                       item_of_transposed, items_extremum_adjoint, items_extremum_transposed, matmul_lhs,
                       matmul_rhs, max_adjoint, positions, quantile_adjoint, quantile_tangent, reshape_back,
                       sort_adjoint, sorted_like, unbroadcast, unbroadcast_to, unflattened_adjoint, unflattened_tangent,
                       window_adjoint, written_adjoint, written_entry, written_entry_transposed, overwritten_adjoint,
                       zeros_like, zeros_tangent)
from .registry import defadjoint, deftangent, nondifferentiable

nondifferentiable(count_reduced, zeros_tangent, zeros_like, positions)  # an element count; zeros; integers


@defadjoint(add, diff=("a", "b"))
def add_transposed(ans_bar, ans, a, b):
    """Accumulation (``x_bar = rt.add(x_bar, contribution)``): each addend gets it all."""
    return unbroadcast(ans_bar, a), unbroadcast(ans_bar, b)


@deftangent(add)
def add_tangent(ans, a, b, a_dot=None, b_dot=None):
    """Linear in the two addends together: their tangents accumulated alike."""
    if is_constant(a_dot):
        return broadcast_tangent(b_dot, ans)
    if is_constant(b_dot):
        return broadcast_tangent(a_dot, ans)
    return add(a_dot, b_dot)


# ---- the helpers of forward-mode code (a third derivative: forward mode over it)

@defadjoint(broadcast_tangent, diff=("t",), zero=("ans",), tangent="linear")
def broadcast_tangent_transposed(u, out, t, ans):
    """Spreading a tangent over its output's shape, transposed: summed back to its own."""
    return unbroadcast(u, t)


@defadjoint(cast_tangent, diff=("t",), zero=("ans", "lead"), tangent="linear")
def cast_tangent_transposed(u, out, t, ans, lead=()):
    """A cast to the output's floating dtype (the identity) or zeros (an integer output),
    transposed: the same, back in ``t``'s dtype."""
    return cast_tangent(cast_tangent(u, ans, lead), t)


# ---- the adjoint of a list, one adjoint per item (popped by the appends that grew it)

@defadjoint(as_items, diff=("g",), zero=("items",), tangent="linear")
def as_items_transposed(u, ans, g, items):
    """A list's adjoint as one adjoint per item, transposed: ``u`` in ``g``'s own form."""
    return in_form_of(u, g)


@defadjoint(items_adjoint, diff=("g",), zero=("items",), tangent="linear")
def items_adjoint_transposed(u, ans, g, items):
    return in_form_of(u, g) if isinstance(items, (list, tuple)) else u


@defadjoint(add_each, diff=("adjoints", "more"))
def add_each_transposed(u, ans, adjoints, more):
    """Accumulation item by item: each addend gets ``u``, in its own form."""
    return in_form_of(u, adjoints), in_form_of(u, more)


@deftangent(add_each)
def add_each_tangent(ans, adjoints, more, adjoints_dot=None, more_dot=None):
    """Linear in the two together (a zero tangent adds nothing)."""
    return add_each(no_items_dot(adjoints_dot, adjoints), no_items_dot(more_dot, more))


@defadjoint(add_items, diff=("adjoints", "more"), zero=("items",))
def add_items_transposed(u, ans, adjoints, more, items):
    if isinstance(items, (list, tuple)):
        return in_form_of(u, adjoints), in_form_of(u, more)
    return unbroadcast(u, adjoints), unbroadcast(u, more)


@deftangent(add_items)
def add_items_tangent(ans, adjoints, more, items, adjoints_dot=None, more_dot=None):
    if not isinstance(items, (list, tuple)):
        return add_tangent(ans, adjoints, more, adjoints_dot, more_dot)
    return add_each(no_items_dot(adjoints_dot, adjoints), no_items_dot(more_dot, more))


@defadjoint(cast_adjoint, diff=("g",), zero=("like",), tangent="linear")
def cast_adjoint_transposed(ans_bar, ans, g, like):
    """The identity or zero (by ``like``'s dtype): its own transpose."""
    return cast_adjoint(ans_bar, like)


@defadjoint(written_entry, diff=("g",), zero=("y", "index", "value"), tangent="linear")
def written_entry_rule(ans_bar, ans, g, y, index, value):
    """``y[index] = value``'s adjoint of ``value`` (``y`` a list or dict known when the code runs):
    a selection, whose transpose puts ``ans_bar`` back at the entry."""
    return written_entry_transposed(ans_bar, g, y, index, value)


@defadjoint(overwritten_adjoint, diff=("g",), zero=("y", "index"), tangent="linear")
def overwritten_adjoint_rule(ans_bar, ans, g, y, index):
    """The entries ``y[index] = v`` overwrote, dropped: a projection, its own transpose."""
    return overwritten_adjoint(ans_bar, y, index)


@defadjoint(real_input, diff=("g",), zero=("val",), tangent="linear")
def real_input_transposed(ans_bar, ans, g, val):
    return real_input(ans_bar, val)


@defadjoint(dtype_adjoint, diff=("g",), tangent="linear")
def dtype_adjoint_transposed(ans_bar, ans, g, dtype):
    return dtype_adjoint(ans_bar, dtype)


@defadjoint(unbroadcast_to, diff=("g",), tangent="linear")
def unbroadcast_to_transposed(ans_bar, ans, g, shape):
    return ans_bar + np.zeros_like(g)


@defadjoint(window_adjoint, diff=("g",), zero=("x",), tangent="linear")
def window_adjoint_transposed(ans_bar, ans, g, x, window_shape, axis=None):
    """Overlapping windows' adjoints added into ``x``'s shape, transposed: the windows again."""
    return np.lib.stride_tricks.sliding_window_view(ans_bar, window_shape, axis)


@defadjoint(written_adjoint, diff=("g",), zero=("value",), tangent="linear")
def written_adjoint_transposed(ans_bar, ans, g, index, value):
    """The elements of ``g`` that a write ``y[index] = value`` lands on (the last of a repeated
    index), transposed: scattered back there, each the sum over what ``value`` broadcast to."""
    lands = written_adjoint(np.ones_like(g), index, g[index])
    return getitem_adjoint(np.broadcast_to(ans_bar, np.shape(lands)) * lands, g, index)


@defadjoint(sort_adjoint, diff=("ans_bar",), zero=("a",), tangent="linear")
def sort_adjoint_transposed(u, ans, ans_bar, a, axis=-1):
    """Elements put back where they came from, transposed: moved where they go (``np.sort``)."""
    return sorted_like(u, a, axis)


@defadjoint(quantile_adjoint, diff=("ans_bar",), zero=("a",), tangent="linear")
def quantile_adjoint_transposed(u, ans, ans_bar, a, q, axis=None, keepdims=False):
    """The order statistics' weights spread back, transposed: read again (``np.quantile``)."""
    return quantile_tangent(u, a, q, axis, keepdims)


@defadjoint(quantile_tangent, diff=("a_dot",), zero=("a",), tangent="linear")
def quantile_tangent_transposed(u, ans, a_dot, a, q, axis=None, keepdims=False):
    return quantile_adjoint(u, a, q, axis, keepdims)


@defadjoint(unbroadcast, diff=("g",), zero=("x",), tangent="linear")
def unbroadcast_transposed(ans_bar, ans, g, x):
    """Summing down to ``x``'s shape, transposed: broadcasting back to ``g``'s."""
    return ans_bar + np.zeros_like(g)


@defadjoint(broadcast_reduced, diff=("g",), zero=("x",), tangent="linear")
def broadcast_reduced_transposed(ans_bar, ans, g, x, axis=None, keepdims=False):
    """Broadcasting over the reduced axes, transposed: summing over them."""
    return unbroadcast(np.sum(ans_bar, axis=axis, keepdims=keepdims), g)


@defadjoint(fill_like, diff=("value",), zero=("a",), tangent="linear")
def fill_like_transposed(ans_bar, ans, a, value):
    return unbroadcast(ans_bar, value)


@defadjoint(reshape_back, diff=("g",), zero=("a",), tangent="linear")
def reshape_back_transposed(ans_bar, ans, g, a, order):
    return np.reshape(ans_bar, np.shape(g), order=order)


@defadjoint(unflattened_adjoint, diff=("ans_bar",), zero=("ans",), tangent="linear")
def unflattened_adjoint_transposed(u, value, ans_bar, ans):
    """A structure's leaves joined into a vector, transposed: the vector split back into them."""
    return unflattened_tangent(ans, u)


@defadjoint(getitem_adjoint, diff=("g",), zero=("a",), tangent="linear")
def getitem_adjoint_transposed(ans_bar, ans, g, a, index):
    """Scattering into zeros, transposed: reading the same elements again."""
    return ans_bar[index]


@defadjoint(gather_adjoint, diff=("g",), zero=("a", "where"), tangent="linear")
def gather_adjoint_transposed(ans_bar, ans, g, a, where):
    """Summing into the places elements came from, transposed: reading them there."""
    return gathered(ans_bar, where)


@defadjoint(gathered, diff=("u",), zero=("where",), tangent="linear")
def gathered_transposed(ans_bar, ans, u, where):
    return gather_adjoint(ans_bar, u, where)


@defadjoint(max_adjoint, diff=("g",), zero=("m", "x"), tangent="linear")
def max_adjoint_transposed(ans_bar, ans, g, m, x, axis=None, keepdims=False):
    """``g`` placed at each window's first extremum, transposed: the values there, summed per window."""
    mask = max_adjoint(np.ones_like(m), m, x, axis, keepdims)
    return unbroadcast(np.sum(ans_bar * mask, axis=axis, keepdims=keepdims), g)


@defadjoint(matmul_lhs, diff=("g", "x2"), zero=("x1",), tangent="bilinear")
def matmul_lhs_transposed(ans_bar, ans, g, x1, x2):
    """``<u, matmul_lhs(g, x1, x2)> = <g, u @ x2>``: the adjoints of ``u @ x2``."""
    return unbroadcast(ans_bar @ x2, g), matmul_rhs(g, ans_bar, x2)


@defadjoint(matmul_rhs, diff=("g", "x1"), zero=("x2",), tangent="bilinear")
def matmul_rhs_transposed(ans_bar, ans, g, x1, x2):
    """``<u, matmul_rhs(g, x1, x2)> = <g, x1 @ u>``."""
    return unbroadcast(x1 @ ans_bar, g), matmul_lhs(g, x1, ans_bar)


@defadjoint(diag_adjoint, diff=("ans_bar",), zero=("v",), tangent="linear")
def diag_adjoint_transposed(u, ans, ans_bar, v, k=0):
    """A matrix's diagonal ``k`` read back, or a vector scattered onto it: each is the other's
    transpose, and ``np.diag(u, k)`` does whichever ``u`` (of ``v``'s shape) asks for."""
    return np.diag(u, k)


@defadjoint(items_extremum_adjoint, diff=("ans_bar",), zero=("ans", "items"), tangent="linear")
def items_extremum_adjoint_transposed(u, adjoints, ans_bar, ans, items):
    """``ans_bar`` put at the first extremum of the builtin ``max``/``min``, transposed: read there."""
    return unbroadcast(items_extremum_transposed(u, ans, items), ans_bar)


@defadjoint(einsum_adjoints, diff=("ans_bar", "operands"), sequence=("operands",))
def einsum_adjoints_transposed_rule(u, adjoints, subscripts, ans_bar, operands, optimize=False, which=None):
    """Each operand's adjoint is the transpose of the einsum in that operand: transposed back,
    the einsum itself (``rt.einsum_adjoints_transposed``)."""
    ans_bar_bar, operands_bar = einsum_adjoints_transposed(u, subscripts, ans_bar, operands, optimize)
    return ans_bar_bar, operands_bar


@deftangent(einsum_adjoints)
def einsum_adjoints_dot(ans, subscripts, ans_bar, operands, optimize=False, which=None, ans_bar_dot=None,
                        operands_dot=None):
    """Multilinear in ``ans_bar`` and the operands other than its own (``rt.einsum_adjoints_tangent``)."""
    return einsum_adjoints_tangent(subscripts, ans_bar, operands, optimize, which, ans_bar_dot, operands_dot)


@defadjoint(item_of, diff=("g",), tangent="linear")
def item_of_transposed_rule(u, item, g, key):
    """An item of a tuple's (list's, dict's) adjoint, read: transposed, put back at ``key``."""
    return item_of_transposed(u, g, key)
