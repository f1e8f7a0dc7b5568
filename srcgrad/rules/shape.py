"""Shapes and indexing: ``reshape ravel expand_dims squeeze broadcast_to
transpose concatenate stack hstack vstack column_stack dstack flip fliplr flipud
rot90 roll moveaxis swapaxes tril triu atleast_1d/2d/3d cumsum diff sort
partition tile repeat pad diagonal take take_along_axis append insert delete
split array_split hsplit vsplit nancumsum rollaxis broadcast_arrays meshgrid unique``,
``np.r_``/``np.c_``, ``x[index]``, ``copy``.

A function that only selects, repeats, reorders or pads elements gets its adjoint by
running on ``rt.positions(a)`` (each element's flat position) and summing the adjoint
back to where each output element came from (``rt.gather_adjoint``): NumPy's own
semantics of ``obj``, ``mode``, broadcasting and negative indices, with no copy of them.

Reads ``x[index]`` scatter the adjoint back into zeros: with a compile-time
basic index (ints, slices, ``np.newaxis``) by assignment; otherwise with
``np.add.at``, so that repeated integer indices accumulate.
"""
from __future__ import annotations

import operator

import numpy as np

from .. import runtime
from ..misc.flatten import _Layout, flatten
from ..runtime import (broadcast_arrays_adjoint, meshgrid_adjoint, rollaxis_destination, unique_adjoint, unique_tangent,
                       flattened_adjoint, flattened_tangent, unflattened_adjoint, unflattened_tangent, concatenated_adjoints, repeated_adjoint, gather_adjoint, permuted_adjoint, permuted_tangent, positions,
                       split_adjoint, basic_index, cast_adjoint, counts_from_the_end, cumsum_adjoint, diff_adjoint,
                       dtype_adjoint, getitem_adjoint, index_concat_adjoint, inverse_permutation, is_array,
                       is_basic_index, is_constant, real_input, sorted_like, without_item, entry, cast_tangent, is_structure, iterated, iterated_adjoint, joined_adjoint, reshape_back, roll_back, sort_adjoint,
                       unbroadcast, unconcatenate, window_adjoint, sequence_of_adjoint, sequence_of_tangent,
                       iterates_keys,
                       mapping_of_adjoint, reversed_list_adjoint, inserted_adjoints,
                       inserted_tangent as inserted_list_tangent, without_key_adjoint, merged_adjoints,
                       fromkeys_adjoint, tolist_adjoint)
from . import _ndim
# the helpers' transposes (beside them in runtime/), for higher order: srcgrad.hvp
from ..runtime import (dtype_adjoint_transposed, gather_adjoint_transposed, gathered, gathered_transposed,
                       getitem_adjoint_transposed, real_input_transposed, reshape_back_transposed,
                       sort_adjoint_transposed, unflattened_adjoint_transposed, window_adjoint_transposed)
from .registry import defadjoint, deftangent, nondifferentiable


def _order_refuse(statics):
    order = statics.get("order", "C")
    if order in ("K", "k"):
        return ("srcgrad differentiates `order='C'`, `'F'` and `'A'` only: `order='K'` reads the "
                "elements in the order they lie in memory, which it does not model",
                "write `order='C'` or `order='F'`")
    return None


@defadjoint(np.reshape, ndim=_ndim.shape_length("shape"), refuse=_order_refuse, tangent="linear")
def reshape(ans_bar, ans, a, shape=None, order="C"):
    """The inverse reshape, in the same index order (``rt.reshape_back``)."""
    if is_constant(order) and order == "C":
        return np.reshape(ans_bar, np.shape(a))
    return reshape_back(ans_bar, a, order)


defadjoint(reshape_back, diff=("g",), zero=("a",), tangent="linear")(reshape_back_transposed)


@defadjoint(np.ravel, ndim=_ndim.fixed(1), refuse=_order_refuse, tangent="linear")
def ravel(ans_bar, ans, a, order="C"):
    if is_constant(order) and order == "C":
        return np.reshape(ans_bar, np.shape(a))
    return reshape_back(ans_bar, a, order)


@defadjoint(np.expand_dims, diff=("a",), tangent="linear")
def expand_dims(ans_bar, ans, a, axis):
    return np.reshape(ans_bar, np.shape(a))


@defadjoint(np.squeeze, tangent="linear")
def squeeze(ans_bar, ans, a, axis=None):
    return np.reshape(ans_bar, np.shape(a))


@defadjoint(np.broadcast_to, ndim=_ndim.shape_length("shape"), diff=("array",), tangent="linear")
def broadcast_to(ans_bar, ans, array, shape):
    return unbroadcast(ans_bar, array)


@defadjoint(np.transpose, ndim=_ndim.same_as("a"), tangent="linear")
def transpose(ans_bar, ans, a, axes=None):
    if axes is None:
        return ans_bar.T
    return np.transpose(ans_bar, inverse_permutation(axes, np.ndim(a)))


@defadjoint(np.real, ndim=_ndim.same_as("val"), tangent="linear")
def real(ans_bar, ans, val):
    """The real part of a real array is the array (complex values are refused: ``rt.real_input``)."""
    return real_input(ans_bar, val)


defadjoint(real_input, diff=("g",), zero=("val",), tangent="linear")(real_input_transposed)


@defadjoint(np.imag, ndim=_ndim.same_as("val"), tangent="linear")
def imag(ans_bar, ans, val):
    """The imaginary part of a real array is zeros."""
    return 0 * real_input(ans_bar, val)


if hasattr(np, "astype"):  # NumPy >= 2.1; also x.astype(dtype)
    @defadjoint(np.astype, elementwise=True, diff=("x",))
    def astype(ans_bar, ans, x, dtype, copy=True):
        """A cast: the adjoint passes through (it gets ``x``'s dtype back at the end);
        a cast to an integer or boolean dtype has derivative zero (``rt.cast_adjoint``)."""
        return cast_adjoint(ans_bar, ans)

    @deftangent(np.astype)
    def astype_tangent(ans, x, dtype, copy=True, x_dot=None):
        """The tangent in the new float dtype; zero for an integer or boolean one."""
        return cast_tangent(x_dot, ans)


@defadjoint(np.copy, elementwise=True, tangent="linear")
def copy(ans_bar, ans, a):
    return ans_bar


@defadjoint(np.lib.stride_tricks.sliding_window_view, diff=("x",), ndim=_ndim.windows, tangent="linear")
def sliding_window_view(ans_bar, ans, x, window_shape, axis=None, subok=False, writeable=False):
    """The windows of a convolution or pooling layer; overlapping windows add up."""
    return window_adjoint(ans_bar, x, window_shape, axis)


defadjoint(window_adjoint, diff=("g",), zero=("x",), tangent="linear")(window_adjoint_transposed)


@defadjoint(np.concatenate, sequence=("arrays",), tangent="linear")
def concatenate(ans_bar, ans, arrays, axis=0):
    """Returns one adjoint per array in ``arrays``."""
    return unconcatenate(ans_bar, arrays, axis)


@defadjoint(np.array, sequence=("object",), ndim=_ndim.same_as("object"), tangent="linear")
def array(ans_bar, ans, object, dtype=None, copy=True):  # noqa: A002 - NumPy's parameter name
    """``np.array(x)`` copies ``x``: its adjoint passes through.  ``np.array([a, b])``
    stacks the items along a new first axis: each gets its slice ``ans_bar[i]``
    (nested lists, their slices of slices).  An integer ``dtype``: zero."""
    if is_constant(dtype) and dtype is None:
        return ans_bar
    return cast_adjoint(ans_bar, ans)


@defadjoint(np.asarray, sequence=("a",), ndim=_ndim.same_as("a"), tangent="linear")
def asarray(ans_bar, ans, a, dtype=None):
    """As ``np.array`` (no copy of an array, which the compiler treats as a view)."""
    if is_constant(dtype) and dtype is None:
        return ans_bar
    return cast_adjoint(ans_bar, ans)


@defadjoint(runtime.index_concat, diff=("items",), sequence=("items",), zero=("concat",), tangent="linear")
def index_concat(ans_bar, ans, concat, items):
    """``np.r_[x, y]`` / ``np.c_[x, y]`` (how the compiler writes them): one adjoint
    per item, its piece of ``ans_bar`` (``rt.index_concat_adjoint``)."""
    return index_concat_adjoint(ans_bar, concat, items)


def _concatenated_tangent(ans, a, b, a_dot=None, b_dot=None):
    """The joined tangents (zeros for the items of a constant part)."""
    parts = [list(d) if d is not None else [runtime.zeros_like(v) for v in p] for p, d in ((a, a_dot), (b, b_dot))]
    return type(ans)(parts[0] + parts[1]) if isinstance(ans, (tuple, list)) else parts[0] + parts[1]


def _flatten_tangent(ans, value, value_dot=None):
    return flattened_tangent(ans, value_dot)


@defadjoint(flatten, tangent=_flatten_tangent)
def flatten_rule(ans_bar, ans, value):
    """``vector, unflatten = srcgrad.misc.flatten(value)`` (HIPS autograd's): the leaves
    joined into one vector, so its adjoint is the vector's, split back into them."""
    return flattened_adjoint(ans_bar, ans)


@defadjoint(methods=((_Layout, "unflatten"),), tangent=lambda ans, vector, vector_dot=None:
            unflattened_tangent(ans, vector_dot))
def unflatten_rule(ans_bar, ans, vector):
    """``value = unflatten(vector)``: each leaf is a piece of ``vector``, reshaped."""
    return unflattened_adjoint(ans_bar, ans)


defadjoint(unflattened_adjoint, diff=("ans_bar",), zero=("ans",), tangent="linear")(
    unflattened_adjoint_transposed)


@defadjoint(runtime.read_back, diff=("value",), tangent="linear")
def read_back(ans_bar, ans, obj, name, value):
    """``obj.name`` read right after ``obj.name = value``: ``value`` itself."""
    return ans_bar


@defadjoint(runtime.entry_read_back, diff=("value",), tangent="linear")
def entry_read_back(ans_bar, ans, container, key, value):
    """``obj.f[k]`` read right after ``obj.f[k] = value``: ``value`` itself."""
    return ans_bar


@defadjoint(runtime.concatenated, tangent=_concatenated_tangent)
def concatenated(ans_bar, ans, a, b):
    """``a + b`` on tuples or lists: each item's adjoint goes to the item it came from."""
    a_bar, b_bar = concatenated_adjoints(ans_bar, a, b)
    return a_bar, b_bar


def _sequence_of_tangent(ans, items, items_dot=None):
    return sequence_of_tangent(ans, items, items_dot)


@defadjoint(runtime.as_tuple, tangent=_sequence_of_tangent)
def as_tuple(ans_bar, ans, items):
    """``tuple(xs)``: each item's adjoint is its own (a tuple's adjoint reads as a list's; a
    dict's keys get none)."""
    return sequence_of_adjoint(ans_bar, items)


@defadjoint(runtime.sequence_of, ndim=lambda ndims, statics: None, tangent=_sequence_of_tangent)
def sequence_of(ans_bar, ans, items):
    """``list(xs)`` / ``tuple(xs)``: each item's adjoint is its own; an array's rows are
    gathered back into an array (``rt.sequence_of_adjoint``)."""
    return sequence_of_adjoint(ans_bar, items)


def _mapping_of_tangent(ans, items, items_dot=None):
    """``dict(pairs)``'s tangent keeps the primal keys (a key's own tangent, a zero, is no
    key); a mapping's is the dict of its entries' tangents."""
    if items_dot is None:
        return runtime.zeros_tangent(ans)
    if isinstance(items, (list, tuple)):
        return {pair[0]: dot[1] for pair, dot in zip(items, items_dot)}
    return runtime.mapping_of(items_dot)


@defadjoint(runtime.mapping_of, ndim=lambda ndims, statics: None, tangent=_mapping_of_tangent)
def mapping_of(ans_bar, ans, items):
    """``dict(d)``: each entry's adjoint is its own (``rt.mapping_of_adjoint``)."""
    return mapping_of_adjoint(ans_bar, items)


@defadjoint(runtime.reversed_list, sequence=("items",), ndim=lambda ndims, statics: None, tangent="linear")
def reversed_list(ans_bar, ans, items):
    """``xs.reverse()`` (``xs = rt.reversed_list(xs)``): each item's adjoint back in order."""
    return reversed_list_adjoint(ans_bar, items)


@defadjoint(runtime.inserted, sequence=("items",), diff=("items", "value"), ndim=lambda ndims, statics: None)
def inserted(ans_bar, ans, items, index, value):
    """``xs.insert(i, v)`` (``xs = rt.inserted(xs, i, v)``): the inserted item's adjoint to
    ``v``, the others' to the items they were."""
    items_bar, value_bar = inserted_adjoints(ans_bar, items, index, value)
    return items_bar, value_bar


@deftangent(runtime.inserted)
def inserted_tangent(ans, items, index, value, items_dot=None, value_dot=None):
    return inserted_list_tangent(items, index, value, items_dot, value_dot)


@defadjoint(runtime.without_key, diff=("d",), ndim=lambda ndims, statics: None, tangent="linear")
def without_key(ans_bar, ans, d, key, missing_ok=False):
    """``d.pop(k)`` / ``del d[k]`` (``d = rt.without_key(d, k)``): the other entries' adjoints."""
    return without_key_adjoint(ans_bar, d, key)


def _merged_tangent(ans, a, b, a_dot=None, b_dot=None):
    """The merged tangents (zeros for the entries of a constant dict)."""
    return runtime.merged(runtime.zeros_tangent(a) if a_dot is None else a_dot,
                          runtime.zeros_tangent(b) if b_dot is None else b_dot)


@defadjoint(runtime.merged, ndim=lambda ndims, statics: None, tangent=_merged_tangent)
def merged(ans_bar, ans, a, b):
    """``{**a, **b}``: each entry's adjoint to the dict whose value was kept."""
    a_bar, b_bar = merged_adjoints(ans_bar, a, b)
    return a_bar, b_bar


@defadjoint(runtime.fromkeys, diff=("value",), ndim=lambda ndims, statics: None, tangent="linear")
def fromkeys(ans_bar, ans, keys, value=None):
    """``dict.fromkeys(keys, v)``: ``v`` gets the sum of its entries' adjoints."""
    return fromkeys_adjoint(ans_bar, keys, value)


@defadjoint(runtime.tolist, ndim=lambda ndims, statics: None, tangent="linear")
def tolist(ans_bar, ans, a):
    """``a.tolist()``: the items' adjoints as an array of ``a``'s shape (``rt.tolist_adjoint``)."""
    return tolist_adjoint(ans_bar, a)


@defadjoint(runtime.repeated, diff=("items",), zero=("count",), tangent="linear")
def repeated(ans_bar, ans, items, count):
    """``items * count`` on a tuple or list: each copy's item adjoints summed."""
    return repeated_adjoint(ans_bar, items, count)


def _iterated_tangent(ans, items, items_dot=None):
    """A dict's keys (a set's items, a keys view's) have no tangent; a sequence's items
    have their own."""
    if items_dot is None or iterates_keys(items):
        return runtime.zeros_tangent(ans)
    return iterated(items_dot)


@defadjoint(iterated, tangent=_iterated_tangent)
def iterated_rule(ans_bar, ans, items):
    """``rt.iterated(items)``: the sequence a loop over a value of a kind unknown when
    compiling indexes (a dict: its keys, which carry no adjoint)."""
    return iterated_adjoint(ans_bar, ans, items)


def _with_item_tangent(ans, d, key, value, d_dot=None, value_dot=None):
    """The new dict's tangent: ``d``'s (zeros for a constant one) with ``value``'s at ``key``."""
    base = dict(d_dot) if d_dot is not None else {k: runtime.zeros_like(v) for k, v in d.items()}
    base[key] = runtime.zeros_like(value) if value_dot is None else value_dot
    return base


@defadjoint(runtime.with_item, diff=("d", "value"), zero=("key",), tangent=_with_item_tangent)
def with_item(ans_bar, ans, d, key, value):
    """``d[key] = value`` on a dict made here (``rt.with_item``): ``value`` gets the
    new dict's adjoint at ``key``, ``d`` the rest (its old value there was overwritten)."""
    return without_item(ans_bar, key), entry(ans_bar, key, value)


@defadjoint(np.stack, sequence=("arrays",), tangent="linear")
def stack(ans_bar, ans, arrays, axis=0):
    """Returns one adjoint per array in ``arrays``: the slices along ``axis``."""
    if is_constant(axis) and axis == 0:
        return ans_bar
    return np.moveaxis(ans_bar, axis, 0)


def _added_at_tangent(ans, a, index, values, a_dot=None, values_dot=None):
    return runtime.added_at_tangent(a, index, values, a_dot, values_dot)


@defadjoint(runtime.added_at, diff=("a", "values"), ndim=_ndim.same_as("a"), tangent=_added_at_tangent)
def added_at(ans_bar, ans, a, index, values):
    """``a`` with ``values`` added at ``index``: ``a``'s adjoint is the output's; each value's
    is the output's at its place (a repeated index read once per value)."""
    return ans_bar, unbroadcast(ans_bar[index], values)


def _getitem_ndim(ndims, statics):
    rank, index = ndims.get("a"), statics.get("index", _ndim.UNKNOWN)
    if isinstance(rank, int) and ndims.get("index") == 0:
        return rank - 1  # one integer (a loop index): x[t]
    if hasattr(rank, "get") and index is _ndim.UNKNOWN:  # xs[i] in a loop over a tuple
        same = {r for _, r in rank}
        return same.pop() if rank.kind == "sequence" and len(same) == 1 else None
    if rank is None or index is _ndim.UNKNOWN:
        return None
    if hasattr(rank, "get"):  # an entry of a structure
        return rank.get(index)
    if index is _ndim.UNKNOWN or rank is None:
        return None
    parts = index if isinstance(index, tuple) else (index,)
    if not is_basic_index(parts):
        return None
    return rank - builtins_sum(isinstance(p, int) for p in parts) + builtins_sum(p is None for p in parts)


builtins_sum = sum


@defadjoint(operator.getitem, diff=("a",), ndim=_getitem_ndim, tangent="linear")
def getitem(ans_bar, ans, a, index):
    """An array: scatter into zeros.  A list/tuple/dict of parameters: ``{index: ans_bar}``."""
    if is_array(a):
        # Basic indexing (a literal index, or one integer such as a loop index) reads
        # each element at most once: assignment.  Anything else may repeat: add.at, in
        # rt.getitem_adjoint (a function with its own linear tangent: hvp and hessian follow it).
        if basic_index(index):
            a_bar = np.zeros_like(a)
            a_bar[index] = ans_bar
            return a_bar
        return getitem_adjoint(ans_bar, a, index)
    if is_structure(a):
        if is_constant(index) and not counts_from_the_end(index):
            return {index: ans_bar}
        # xs[-1], xs[1:], xs[k:] or an index known only when it runs (maybe negative, maybe a
        # slice): keys of xs's own items.
        return getitem_adjoint(ans_bar, a, index)
    return getitem_adjoint(ans_bar, a, index)


defadjoint(getitem_adjoint, diff=("g",), zero=("a",), tangent="linear")(getitem_adjoint_transposed)


def _field_ndim(ndims, statics):
    parent, name = ndims.get("obj"), statics.get("name")
    return parent.get(name) if hasattr(parent, "get") else None


@defadjoint(getattr, diff=("obj",), ndim=_field_ndim, tangent="linear")
def field(ans_bar, ans, obj, name):
    """Reading ``obj.name`` (a parameter of a model): the adjoint is ``{name: ans_bar}``."""
    return {name: ans_bar}


@defadjoint(np.hstack, sequence=("tup",), diff=("tup",), tangent="linear")
def hstack(ans_bar, ans, tup, dtype=None, casting="same_kind"):
    """One adjoint per array: its piece (``rt.joined_adjoint``)."""
    return joined_adjoint(ans_bar, tup, "hstack")


@defadjoint(np.vstack, sequence=("tup",), diff=("tup",), tangent="linear")
def vstack(ans_bar, ans, tup, dtype=None, casting="same_kind"):
    return joined_adjoint(ans_bar, tup, "vstack")


@defadjoint(np.column_stack, sequence=("tup",), diff=("tup",), tangent="linear")
def column_stack(ans_bar, ans, tup):
    return joined_adjoint(ans_bar, tup, "column_stack")


@defadjoint(np.flip, ndim=_ndim.same_as("m"), diff=("m",), tangent="linear")
def flip(ans_bar, ans, m, axis=None):
    return np.flip(ans_bar, axis)


@defadjoint(np.roll, ndim=_ndim.same_as("a"), diff=("a",), tangent="linear")
def roll(ans_bar, ans, a, shift, axis=None):
    return roll_back(ans_bar, shift, axis)


@defadjoint(np.moveaxis, ndim=_ndim.same_as("a"), diff=("a",), tangent="linear")
def moveaxis(ans_bar, ans, a, source, destination):
    return np.moveaxis(ans_bar, destination, source)


@defadjoint(np.swapaxes, ndim=_ndim.same_as("a"), diff=("a",), tangent="linear")
def swapaxes(ans_bar, ans, a, axis1, axis2):
    return np.swapaxes(ans_bar, axis1, axis2)


@defadjoint(np.cumsum, diff=("a",), tangent="linear")
def cumsum(ans_bar, ans, a, axis=None, dtype=None, out=None):
    """Sums from the other end (``rt.cumsum_adjoint``)."""
    if not (is_constant(dtype) and dtype is None):
        ans_bar = dtype_adjoint(ans_bar, dtype)
    return cumsum_adjoint(ans_bar, a, axis)


defadjoint(dtype_adjoint, diff=("g",), tangent="linear")(dtype_adjoint_transposed)


def _diff_refuse(statics):
    if statics.get("prepend") is not None or statics.get("append") is not None:
        return ("srcgrad differentiates `np.diff` without `prepend=`/`append=`",
                "join the values first (`np.concatenate([[p], a])`), then take `np.diff`")
    return None


@defadjoint(np.diff, ndim=_ndim.same_as("a"), diff=("a",), refuse=_diff_refuse, tangent="linear")
def diff(ans_bar, ans, a, n=1, axis=-1, prepend=None, append=None):
    """``diff`` is a difference matrix ``D``: ``D^T g = -diff(pad(g))`` (``rt.diff_adjoint``)."""
    return diff_adjoint(ans_bar, n, axis)


@defadjoint(np.sort, ndim=_ndim.same_as("a"), diff=("a",))
def sort(ans_bar, ans, a, axis=-1, kind=None, order=None, stable=None):
    """Each element gets the adjoint of the place it moved to (``rt.sort_adjoint``)."""
    return sort_adjoint(ans_bar, a, axis)


defadjoint(sort_adjoint, diff=("ans_bar",), zero=("a",), tangent="linear")(sort_adjoint_transposed)


@deftangent(np.sort)
def sort_tangent(ans, a, axis=-1, kind=None, order=None, stable=None, a_dot=None):
    """Each element's tangent moves where the element moved (ties as ``sort_adjoint``)."""
    return sorted_like(a_dot, a, axis)


@defadjoint(np.fliplr, ndim=_ndim.same_as("m"), tangent="linear")
def fliplr(ans_bar, ans, m):
    return np.fliplr(ans_bar)


@defadjoint(np.flipud, ndim=_ndim.same_as("m"), tangent="linear")
def flipud(ans_bar, ans, m):
    return np.flipud(ans_bar)


@defadjoint(np.rot90, ndim=_ndim.same_as("m"), diff=("m",), tangent="linear")
def rot90(ans_bar, ans, m, k=1, axes=(0, 1)):
    """The rotation back."""
    return np.rot90(ans_bar, -k, axes)


@defadjoint(np.tril, diff=("m",), tangent="linear")
def tril(ans_bar, ans, m, k=0):
    """The same mask (a 1-d ``m`` is broadcast to rows first: summed back)."""
    return unbroadcast(np.tril(ans_bar, k), m)


@defadjoint(np.triu, diff=("m",), tangent="linear")
def triu(ans_bar, ans, m, k=0):
    return unbroadcast(np.triu(ans_bar, k), m)


def _atleast(rank):
    def ndim(ndims, statics):
        have = ndims.get("ary")
        return None if have is None else builtins_max(have, rank)
    return ndim


builtins_max = max


@defadjoint(np.atleast_1d, ndim=_atleast(1), tangent="linear")
def atleast_1d(ans_bar, ans, ary):
    """One array (several return a tuple: written one call each)."""
    return np.reshape(ans_bar, np.shape(ary))


@defadjoint(np.atleast_2d, ndim=_atleast(2), tangent="linear")
def atleast_2d(ans_bar, ans, ary):
    return np.reshape(ans_bar, np.shape(ary))


@defadjoint(np.atleast_3d, ndim=_atleast(3), tangent="linear")
def atleast_3d(ans_bar, ans, ary):
    return np.reshape(ans_bar, np.shape(ary))


@defadjoint(np.dstack, sequence=("tup",), diff=("tup",), tangent="linear")
def dstack(ans_bar, ans, tup):
    return joined_adjoint(ans_bar, tup, "dstack")


@defadjoint(np.partition, ndim=_ndim.same_as("a"), diff=("a",))
def partition(ans_bar, ans, a, kth, axis=-1, kind="introselect", order=None):
    """A permutation of ``a`` along ``axis``: each element gets the adjoint of the place it
    moved to, matched by value (``rt.permuted_adjoint``; ties as ``sort``)."""
    return permuted_adjoint(ans_bar, a, ans, axis)


@deftangent(np.partition)
def partition_tangent(ans, a, kth, axis=-1, kind="introselect", order=None, a_dot=None):
    return permuted_tangent(a_dot, a, ans, axis)


@defadjoint(np.tile, diff=("A",), tangent="linear")
def tile(ans_bar, ans, A, reps):
    """Each copy's adjoint, summed (``rt.gather_adjoint``)."""
    return gather_adjoint(ans_bar, A, np.tile(positions(A), reps))


nondifferentiable(positions)  # integers
defadjoint(gather_adjoint, diff=("g",), zero=("a", "where"), tangent="linear")(gather_adjoint_transposed)
defadjoint(gathered, diff=("u",), zero=("where",), tangent="linear")(gathered_transposed)


@defadjoint(np.repeat, diff=("a",), tangent="linear")
def repeat(ans_bar, ans, a, repeats, axis=None):
    return gather_adjoint(ans_bar, a, np.repeat(positions(a), repeats, axis))


@defadjoint(np.diagonal, diff=("a",), tangent="linear")
def diagonal(ans_bar, ans, a, offset=0, axis1=0, axis2=1):
    return gather_adjoint(ans_bar, a, np.diagonal(positions(a), offset, axis1, axis2))


def _take_ndim(ndims, statics):
    """``np.take(a, indices, axis)``: the indices' rank in place of the axis (integers only:
    unlike ``a[idx]``, whose rank a boolean mask would change), the indices' own rank for
    ``axis=None``."""
    rank, index, axis = ndims.get("a"), ndims.get("indices"), statics.get("axis", _ndim.UNKNOWN)
    if not isinstance(index, int) or axis is _ndim.UNKNOWN:
        return None
    if axis is None:
        return index
    return rank - 1 + index if isinstance(rank, int) else None


@defadjoint(np.take, diff=("a",), ndim=_take_ndim, tangent="linear")
def take(ans_bar, ans, a, indices, axis=None, out=None, mode="raise"):
    """Repeated indices accumulate; ``mode='wrap'``/``'clip'`` as NumPy reads them."""
    if is_constant(mode) and mode == "raise" and is_constant(axis) and axis is not None:
        # (rows of an embedding table: the rows read get their adjoints, no table of positions)
        return getitem_adjoint(ans_bar, a, (slice(None),) * (axis % np.ndim(a)) + (indices,))
    return gather_adjoint(ans_bar, a, np.take(positions(a), indices, axis, mode=mode))


@defadjoint(np.take_along_axis, ndim=_ndim.same_as("arr"), diff=("arr",), tangent="linear")
def take_along_axis(ans_bar, ans, arr, indices, axis=-1):
    return gather_adjoint(ans_bar, arr, np.take_along_axis(positions(arr), indices, axis))


@defadjoint(np.delete, diff=("arr",), tangent="linear")
def delete(ans_bar, ans, arr, obj, axis=None):
    return gather_adjoint(ans_bar, arr, np.delete(positions(arr), obj, axis))


def _pad_refuse(statics):
    if statics.get("reflect_type", "even") != "even":
        return ("srcgrad differentiates `np.pad` with `reflect_type='even'` only ('odd' pads with "
                "`2 * edge - x`, not copies)", "pad with 'even' and compute the odd values yourself")
    if statics.get("mode", "constant") not in ("constant", "edge", "reflect", "symmetric", "wrap"):
        return ("srcgrad differentiates `np.pad` with `mode` 'constant', 'edge', 'reflect', "
                "'symmetric' or 'wrap' (a literal string)",
                "compute the padding values yourself and join them with `np.concatenate`")
    return None


@defadjoint(np.pad, diff=("array",), refuse=_pad_refuse)
def pad(ans_bar, ans, array, pad_width, mode="constant", constant_values=0, reflect_type="even"):
    """The interior back, plus (other modes) the adjoints of the copies in the pad."""
    if is_constant(mode) and mode == "constant":
        return gather_adjoint(ans_bar, array, np.pad(positions(array), pad_width, constant_values=-1))
    if is_constant(mode) and mode in ("reflect", "symmetric"):
        return gather_adjoint(ans_bar, array, np.pad(positions(array), pad_width, mode, reflect_type=reflect_type))
    return gather_adjoint(ans_bar, array, np.pad(positions(array), pad_width, mode))


@deftangent(np.pad)
def pad_tangent(ans, array, pad_width, mode="constant", constant_values=0, reflect_type="even", array_dot=None):
    """Linear in ``array``; the constant values are constants: padded with 0."""
    if is_constant(mode) and mode == "constant":
        return np.pad(array_dot, pad_width)
    if is_constant(mode) and mode in ("reflect", "symmetric"):
        return np.pad(array_dot, pad_width, mode, reflect_type=reflect_type)
    return np.pad(array_dot, pad_width, mode)


@defadjoint(np.append, diff=("arr", "values"))
def append(ans_bar, ans, arr, values, axis=None):
    """The output's first part goes to ``arr``, the rest to ``values`` (both flattened
    first when ``axis`` is None)."""
    return (gather_adjoint(ans_bar, arr, np.append(positions(arr), np.full(np.shape(values), -1), axis)),
            gather_adjoint(ans_bar, values, np.append(np.full(np.shape(arr), -1), positions(values), axis)))


@deftangent(np.append)
def append_tangent(ans, arr, values, axis=None, arr_dot=None, values_dot=None):
    if is_constant(values_dot):
        return np.append(arr_dot, np.zeros_like(values, dtype=np.result_type(arr_dot, 1.0)), axis)
    if is_constant(arr_dot):
        return np.append(np.zeros_like(arr, dtype=np.result_type(values_dot, 1.0)), values_dot, axis)
    return np.append(arr_dot, values_dot, axis)


@defadjoint(np.insert, diff=("arr", "values"))
def insert(ans_bar, ans, arr, obj, values, axis=None):
    """``values`` is broadcast into the new places (its adjoint sums them back)."""
    return (gather_adjoint(ans_bar, arr, np.insert(positions(arr), obj, np.full(np.shape(values), -1), axis)),
            gather_adjoint(ans_bar, values, np.insert(np.full(np.shape(arr), -1), obj, positions(values), axis)))


@deftangent(np.insert)
def insert_tangent(ans, arr, obj, values, axis=None, arr_dot=None, values_dot=None):
    if is_constant(values_dot):
        return np.insert(arr_dot, obj, 0, axis)
    if is_constant(arr_dot):
        return np.insert(np.zeros_like(arr, dtype=np.result_type(values_dot, 1.0)), obj, values_dot, axis)
    return np.insert(arr_dot, obj, values_dot, axis)


@defadjoint(np.split, diff=("ary",), tangent="linear")
def split(ans_bar, ans, ary, indices_or_sections, axis=0):
    """The pieces' adjoints joined again; zeros for a piece nothing read (``rt.split_adjoint``)."""
    return split_adjoint(ans_bar, ary, indices_or_sections, axis, "split")


@defadjoint(np.array_split, diff=("ary",), tangent="linear")
def array_split(ans_bar, ans, ary, indices_or_sections, axis=0):
    return split_adjoint(ans_bar, ary, indices_or_sections, axis, "array_split")


@defadjoint(np.hsplit, diff=("ary",), tangent="linear")
def hsplit(ans_bar, ans, ary, indices_or_sections):
    return split_adjoint(ans_bar, ary, indices_or_sections, None, "hsplit")


@defadjoint(np.vsplit, diff=("ary",), tangent="linear")
def vsplit(ans_bar, ans, ary, indices_or_sections):
    return split_adjoint(ans_bar, ary, indices_or_sections, None, "vsplit")


@defadjoint(np.nancumsum, diff=("a",))
def nancumsum(ans_bar, ans, a, axis=None, dtype=None, out=None):
    """``np.cumsum`` with NaNs as 0: sums from the other end, 0 at NaNs."""
    if not (is_constant(dtype) and dtype is None):
        ans_bar = dtype_adjoint(ans_bar, dtype)
    return cumsum_adjoint(ans_bar, a, axis) * ~np.isnan(a)


@deftangent(np.nancumsum)
def nancumsum_dot(ans, a, axis=None, dtype=None, out=None, a_dot=None):
    return np.cumsum(np.where(np.isnan(a), 0, a_dot), axis=axis, dtype=dtype)


@defadjoint(np.rollaxis, diff=("a",), tangent="linear")
def rollaxis(ans_bar, ans, a, axis, start=0):
    """A transposition: ``axis`` moved back from where it went (``rt.rollaxis_destination``)."""
    return np.moveaxis(ans_bar, rollaxis_destination(np.ndim(a), axis, start), axis)


@defadjoint(np.broadcast_arrays, diff=("args",), sequence=("args",), tangent="linear")
def broadcast_arrays(ans_bar, ans, *args, subok=False):
    """Each output's adjoint summed back to its input's shape (``rt.broadcast_arrays_adjoint``)."""
    return broadcast_arrays_adjoint(ans_bar, ans, args)


@defadjoint(np.meshgrid, diff=("xi",), sequence=("xi",), tangent="linear")
def meshgrid(ans_bar, ans, *xi, copy=True, sparse=False, indexing="xy"):
    """Each output repeats one input: its adjoint summed over the other axes
    (``rt.meshgrid_adjoint``); ``sparse=True`` too."""
    return meshgrid_adjoint(ans_bar, ans, xi, indexing)


def _unique_refuse(statics):
    if statics.get("axis", None) is not None:
        return ("srcgrad differentiates `np.unique` of the flattened array only (axis=None)",
                "leave out axis=")
    if statics.get("sorted", True) is not True:
        return ("srcgrad differentiates `np.unique` with sorted=True only", "leave out sorted=")
    return None


@defadjoint(np.unique, diff=("ar",), refuse=_unique_refuse)
def unique(ans_bar, ans, ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
           equal_nan=True, sorted=True):  # noqa: A002 - NumPy's name
    """The values: each gets the adjoint of its first occurrence (JAX's ``unique``); the
    indices, inverse and counts are integers, without derivative (``rt.unique_adjoint``)."""
    return unique_adjoint(ans_bar, ans, ar, equal_nan)


@deftangent(np.unique)
def unique_dot(ans, ar, return_index=False, return_inverse=False, return_counts=False, axis=None, *,
               equal_nan=True, sorted=True, ar_dot=None):  # noqa: A002
    return unique_tangent(ar_dot, ans, ar, equal_nan)
