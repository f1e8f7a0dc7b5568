"""What generated code calls (imported there as ``rt``), and the rules too.

Kept small and fast: generated code spends its time in NumPy, not here.  The
helpers marked :func:`static` are also evaluated by the compiler when all
their arguments are known at compile time (``einsum`` subscripts, axes).

A leaf: it imports only ``errors``, ``tree`` and ``backends``.  What compiles a
callee when generated code runs (``vjp_call`` and its like) is in
``srcgrad/dispatch.py``, above the API.
"""
from __future__ import annotations

import functools
import inspect
import itertools
import math
import operator
import types

import numpy as np
import optree

from . import errors, tree
from .tree import add  # noqa: F401 - generated code accumulates adjoints with rt.add

_add_reduce = np.add.reduce


_HOST_TYPES = frozenset({np.ndarray, float, int, bool, np.float64, np.float32})  # answered without a look


def array_module(*values):
    """NumPy, or CuPy when any value is a CuPy array: helpers run on either.

    (NumPy functions called on CuPy arrays dispatch to CuPy through
    ``__array_function__``; only creation functions and ``asarray`` need this.)
    """
    for value in values:
        if type(value) not in _HOST_TYPES and type(value).__module__.split(".")[0] == "cupy":
            import cupy

            return cupy
    return np


def _as_array(value):
    return value if hasattr(value, "ndim") else np.asarray(value)


def static(fn):
    """Mark a pure helper the compiler may evaluate on compile-time constants."""
    fn.__srcgrad_static__ = True
    return fn


def is_constant(value) -> bool:
    """True for a Python number, None or a tuple of them.

    In a rule template this is decided at compile time: ``x2`` is constant
    when the user wrote a literal there (``x ** 2``).
    """
    return value is None or isinstance(value, (int, float, str, tuple))


def to_device(x):
    """Copy an array to the GPU (a CuPy array).  Its adjoint is the copy back.

    Raises:
        srcgrad.errors.BackendError: CuPy is not installed or no GPU is present.
    """
    from .backends import cupy as cupy_backend

    cupy_backend.check_device()
    return cupy_backend.module().asarray(x)


def to_host(x):
    """Copy an array to host memory (a NumPy array); NumPy arrays pass through.
    Its adjoint is the copy to the device."""
    if type(x).__module__.split(".")[0] == "cupy":
        return x.get()
    return x


def enter(manager):
    """``with manager as value:`` in normalized code: its ``__enter__``, looked up on the
    class as Python does; ``leave(manager)`` closes it.  The emitter turns each pair
    back into ``with rt.managed(manager) as value:`` around what lies between
    (``emit.with_blocks``), so an exception reaches ``__exit__`` too."""
    return type(manager).__enter__(manager)


def leave(manager) -> None:
    type(manager).__exit__(manager, None, None, None)


class managed:
    """``manager`` as a ``with`` statement of generated code runs it: ``__enter__`` and
    ``__exit__`` (with the exception, if one was raised) looked up on the class as
    Python does; but an exception is never swallowed.

    Raises:
        UnsupportedSyntaxError: ``__exit__`` asked to suppress an exception
            (``contextlib.suppress``): the code after the block would run on values the
            block never computed, and the backward sweep on a record of half a block.
    """

    __slots__ = ("manager", "where")

    def __init__(self, manager, where: str = ""):
        self.manager, self.where = manager, where

    def __enter__(self):
        return type(self.manager).__enter__(self.manager)

    def __exit__(self, kind, value, traceback):
        if type(self.manager).__exit__(self.manager, kind, value, traceback) and kind is not None:
            raise errors.UnsupportedSyntaxError(
                f"the context manager of the `with` block at {self.where} suppressed "
                f"{kind.__name__}, which srcgrad does not differentiate through (the rest of the "
                "block would be skipped)", None,
                "catch the exception outside the differentiated function, or avoid raising it")
        return False


def added_at(a, index, values):
    """``np.add.at(a, index, values)`` as a new array: ``a`` with ``values`` added at ``index``,
    repeated indices each adding (what ``np.add.at`` writes into ``a`` in place; the compiler
    writes this result back into ``a``)."""
    out = array_module(a).array(a, copy=True)
    array_module(a).add.at(out, index, values)
    return out


def added_at_tangent(a, index, values, a_dot=None, values_dot=None):
    """The tangent of :func:`added_at`: ``a_dot`` with ``values_dot`` added at ``index``
    (zeros for a constant)."""
    out = zeros_tangent(a) if a_dot is None else array_module(a_dot).array(a_dot, copy=True)
    if values_dot is not None:
        array_module(out).add.at(out, index, values_dot)
    return out


def with_item(d, key, value) -> dict:
    """``d[key] = value`` on a dict made in the differentiated function, as normalized
    code writes it: a new dict, ``d`` with ``value`` at ``key`` (no other name holds
    ``d``: normalize refuses the write otherwise, so nothing can tell the two apart)."""
    out = dict(d)
    out[key] = value
    return out


def without_item(g, key):
    """The adjoint of ``d`` in :func:`with_item` from the new dict's adjoint ``g``: the
    value at ``key`` was overwritten, so its part of ``g`` does not reach ``d``."""
    if isinstance(g, dict) and key in g:
        g = dict(g)
        del g[key]
    return g


def overwritten_adjoint(g, y, index):
    """``y``'s adjoint before ``y[index] = v`` from its adjoint after: what was overwritten
    had no effect.  An array's: a copy with those elements zeroed; a list's or dict's
    (sparse, ``{key: adjoint}``): a copy without those entries (a ``defaultdict``, an
    ``OrderedDict``, ``[0.0] * n``: containers whose kind is known when the code runs)."""
    if isinstance(g, list) and isinstance(y, list) and len(g) == len(y):
        # (a list grown by append: its adjoint is a list, popped by the appends' adjoints)
        keys = range(len(y))[index] if isinstance(index, slice) else [index % len(y)]
        return [(None if v is None else zeros_like(v)) if k in keys else v for k, v in enumerate(g)]
    if isinstance(g, (dict, list, tuple)):  # (a list's adjoint, dense: as sparse, one key per item)
        parts = g if isinstance(g, dict) else {k: v for k, v in enumerate(g) if v is not None}
        if isinstance(y, (list, tuple)):
            keys = range(len(y))[index] if isinstance(index, slice) else [index % len(y)]
            return {k: v for k, v in parts.items() if k not in keys}
        return without_item(parts, index)
    if not hasattr(g, "shape"):  # (a zero: nothing reached `y`)
        return g
    g = array_module(g).copy(g)
    g[index] = 0
    return g


def stop_gradient(x):
    """``x`` itself, through which no adjoint flows (its derivative is taken as 0).

    Use it to treat a value as a constant: a target computed from the model,
    a baseline, a detached statistic.  Works on arrays and numbers.
    """
    return x


def is_array(value) -> bool:
    """True for an array or a number; False for a structure of parameters.

    In a rule template this is decided at compile time when the rank is known.
    """
    return not isinstance(value, (list, tuple, dict)) and not hasattr(value, "__dict__")


def is_structure(value) -> bool:
    """The opposite of :func:`is_array` (decided at compile time when known)."""
    return not is_array(value)


def unbroadcast(g, x):
    """Sum ``g`` down to ``np.shape(x)``: the adjoint of NumPy broadcasting.

    Args:
        g: an adjoint of the broadcast result, any shape that ``x`` broadcasts to.
        x: the primal input (only its shape is read).

    Returns:
        ``g`` summed over the broadcast axes, with ``x``'s shape.

    Source: NumPy's broadcasting rules (numpy.org/doc/stable/user/basics.broadcasting.html).
    """
    if type(g) is np.ndarray and type(x) is np.ndarray:  # the common cases first, without NumPy calls
        have, shape = g.shape, x.shape
        if have == shape:
            return g
        if len(have) == 2 and len(shape) == 1 and have[1] == shape[0] and have[0] < 32 and g.dtype.kind == "f":
            return _add_reduce(g, 0)  # a bias of a few rows (see _summed_to)
        return _summed_to(g, have, shape)
    shape = getattr(x, "shape", None)
    if shape is None:
        shape = np.shape(x)
    have = getattr(g, "shape", ())
    if have == shape:
        return g
    return _summed_to(g, have, shape)


def unbroadcast_to(g, shape):
    """:func:`unbroadcast` given the primal's shape rather than the primal
    (what a loop saves when the backward sweep needs only the shape)."""
    have = getattr(g, "shape", ())
    if have == shape:
        return g
    return _summed_to(g, have, shape)


def _summed_to(g, have, shape):
    if len(have) == len(shape) + 1 and 1 not in shape:
        # A bias, the one shape worth a shortcut (a tuple axis costs 2x): the rows summed,
        # as a product with ones when there are many rows, one BLAS call; NumPy's sum over
        # axis 0 walks the rows (a (2048, 16) float32 adjoint: 85 us against 3 us), but
        # wins on a few rows (an RNN's (8, 32): 1.0 us against 1.8 us; measured), called
        # as the ufunc's reduce where it is NumPy's (ndarray.sum's wrapper is 15% of that).
        kind = g.dtype.kind
        if len(have) < 2 or have[0] < 32 or kind not in "fc":
            return _add_reduce(g, 0) if kind == "f" and type(g) is np.ndarray else g.sum(axis=0)
        total = array_module(g).ones(have[0], g.dtype) @ (g if len(have) == 2 else g.reshape(have[0], -1))
        return total if len(have) == 2 else total.reshape(shape)
    g = _as_array(g)
    lead = g.ndim - len(shape)
    if lead:
        g = g.sum(axis=tuple(range(lead)))
    keep = tuple(i for i, n in enumerate(shape) if n == 1 and g.shape[i] != 1)
    if keep:
        g = g.sum(axis=keep, keepdims=True)
    return g.reshape(shape)


@static
def counts_from_the_end(index) -> bool:
    """A constant index into a list or tuple that is not already one of its keys:
    negative (``xs[-1]``) or a slice."""
    return isinstance(index, slice) or isinstance(index, int) and index < 0


@static
def log_of_base(base) -> float:
    """``log(base)`` of a constant base of ``base ** x``, as a Python float (so it keeps
    float32 float32); 0.0 at ``base == 0`` (the power rule's convention there), NaN below."""
    if base == 0:
        return 0.0
    return math.log(base) if base > 0 else math.nan


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


def iterates_keys(items) -> bool:
    """Whether iterating ``items`` gives keys, which carry no derivative: a dict (an
    ``OrderedDict``, a ``defaultdict``), a view of its keys, a set.  (Its values do: a
    rule that iterates such a value gives it no adjoint, its result no tangent.)"""
    return isinstance(items, (dict, set, frozenset, type({}.keys())))


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


def dense_items(parts, items):
    """A list of the adjoints ``parts`` of ``items``: zeros of an item's kind where a part
    is None (nothing reached that item)."""
    return [(0.0 if isinstance(item, (int, float)) else zeros_like(item)) if part is None else part
            for part, item in zip(parts, items)]


def reversed_list(items):
    """``xs.reverse()`` on a list made here, written ``xs = rt.reversed_list(xs)``: the
    same items, last first, as a new list."""
    return list(items)[::-1]


def reversed_list_adjoint(ans_bar, items):
    """Adjoint of :func:`reversed_list`: item ``i``'s is the new list's item ``n - 1 - i``'s."""
    n = len(items)
    return dense_items([item_of(ans_bar, n - 1 - i) for i in range(n)], items)


def inserted(items, index, value):
    """``xs.insert(index, value)`` on a list made here, written ``xs = rt.inserted(xs, index,
    value)``: a new list, with Python's ``insert``'s reading of ``index``."""
    out = list(items)
    out.insert(index, value)
    return out


def _inserted_at(n, index):
    """Where ``list.insert(index, v)`` puts ``v`` in a list of ``n`` items."""
    index = operator.index(index)
    return min(max(index + n if index < 0 else index, 0), n)


def inserted_adjoints(ans_bar, items, index, value):
    """Adjoints of ``items`` and ``value`` in :func:`inserted`: the new list's items before
    and after the inserted one go back to ``items``, the inserted one's to ``value``."""
    n = len(items)
    at = _inserted_at(n, index)
    items_bar = dense_items([item_of(ans_bar, i if i < at else i + 1) for i in range(n)], items)
    value_bar = item_of(ans_bar, at)
    return items_bar, (zeros_like(value) if value_bar is None else value_bar)


def inserted_tangent(items, index, value, items_dot=None, value_dot=None):
    """Tangent of :func:`inserted`: the tangents inserted alike (zeros where none)."""
    items_dot = dense_items([None] * len(items), items) if items_dot is None else items_dot
    return inserted(items_dot, index, zeros_like(value) if value_dot is None else value_dot)


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


def items_prod_adjoint(ans_bar, items, start=1):
    """Adjoint of ``math.prod(items, start=start)``: each item gets ``ans_bar`` times the
    product of the others and ``start`` (exact at zeros, no division); ``start`` gets
    ``ans_bar`` times the items' product."""
    out = []
    for i in range(len(items)):
        others = start
        for j in range(len(items)):
            if j != i:
                others = others * items[j]
        out.append(ans_bar * others)
    return out, ans_bar * math.prod(items)


def items_prod_tangent(ans, items, start=1, items_dot=None, start_dot=None):
    """Tangent of ``math.prod(items, start=start)``: the product rule, item by item."""
    others, whole = items_prod_adjoint(1.0, items, start)
    total = sum(d * o for d, o in zip(items_dot, others)) if items_dot is not None else 0.0
    return total + (start_dot * whole if start_dot is not None else 0.0)


def items_dist_adjoint(ans_bar, ans, p, q):
    """Adjoint of ``math.dist(p, q)``: ``(p_i - q_i) / ans`` for ``p``, its negative for
    ``q``; 0 where the points coincide (as ``math.hypot``'s)."""
    scale = ans_bar / ans if ans != 0 else 0.0 * ans_bar
    dp = [scale * (p[i] - q[i]) for i in range(len(p))]
    return dp, [-d for d in dp]


def items_dist_tangent(ans, p, q, p_dot=None, q_dot=None):
    """Tangent of ``math.dist(p, q)``: ``sum((p_i - q_i)(dp_i - dq_i)) / ans``; 0 where the
    points coincide."""
    total = 0.0 * ans
    for i in range(len(p)):
        d = (p_dot[i] if p_dot is not None else 0.0) - (q_dot[i] if q_dot is not None else 0.0)
        total = total + (p[i] - q[i]) * d
    return total / ans if ans != 0 else total


def digamma(x):
    """The digamma function ``psi(x) = Gamma'(x) / Gamma(x)`` of a float (``math`` has none):
    the recurrence ``psi(x) = psi(x + 1) - 1 / x`` up to ``x >= 10``, then the asymptotic
    series (Abramowitz & Stegun 6.3.5, 6.3.18; error below 1e-13); for ``x < 0`` the
    reflection ``psi(1 - x) - pi / tan(pi x)`` (A&S 6.3.7).

    Raises:
        ZeroDivisionError: at 0 and the negative integers (the poles).
    """
    x = float(x)
    if x < 0:
        return digamma(1 - x) - math.pi / math.tan(math.pi * x)
    shift = 0.0
    while x < 10:
        shift -= 1 / x
        x += 1
    inv2 = 1 / (x * x)
    return shift + math.log(x) - 0.5 / x - inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (
        1 / 240 - inv2 / 132))))


def polygamma_scale(n):
    """``(-1)^n (n+1)!``, the factor in ``psi^(n+1)(x) = (-1)^n (n+1)! zeta(n+2, x)`` (DLMF
    5.15.2), for SciPy's orders: an int or integer-valued float (a Python number, so that
    float32 stays float32 under NumPy's promotion), or an array of them (float64); NaN for
    any other order, as ``special.polygamma`` itself gives."""
    if isinstance(n, (int, float)):
        return (-1) ** int(n) * math.factorial(int(n) + 1) if float(n).is_integer() and n >= 0 else math.nan
    from scipy import special  # (only polygamma's own rule calls this)

    n = np.asarray(n)
    return np.where((n == np.floor(n)) & (n >= 0), np.where(n % 2 == 1, -1.0, 1.0) * special.factorial(n + 1),
                    np.nan)


def _gaussian_cdf_points(x, mean, cov):
    """``(r, sigma)`` of ``multivariate_normal.cdf(x, mean, cov)``: the points less the mean,
    ``(n, d)``, and the covariance as the symmetric matrix of the triangle SciPy reads (a
    vector: its diagonal; a number: times the identity)."""
    sigma = _covariance_matrix(cov, np.size(mean))
    r = np.reshape(x, (-1, np.shape(sigma)[0]))
    return (r if mean is None else r - mean), sigma


def _covariance_matrix(cov, d):
    if np.ndim(cov) < 2:
        return np.diag(np.broadcast_to(cov, (d,)))
    sigma = np.reshape(cov, (np.shape(cov)[0], -1)) * 1.0
    return np.tril(sigma) + np.transpose(np.tril(sigma, -1))


def gaussian_cdf_adjoints(ans_bar, ans, x, mean, cov, maxpts, abseps, releps, rng, log=False, wanted_cov=True):
    """``(x_bar, mean_bar, cov_bar)`` of ``multivariate_normal.cdf`` (``log``: ``logcdf``, whose
    value ``ans`` is), by :func:`gaussian_cdf_partials`: ``x`` gets the gradient, ``mean`` its
    negative (None for a mean of None), ``cov`` half the second partials (Plackett 1954),
    collected by the triangle SciPy reads (a vector's diagonal; a number's sum); None where
    ``wanted_cov`` is false.  Float64 (SciPy's precision)."""
    r, sigma = _gaussian_cdf_points(x, mean, cov)
    log_cdf = np.reshape(ans, (-1,)) if log else None
    g = np.reshape(ans_bar, (-1, 1))
    cov_bar = None
    if not wanted_cov:
        x_bar = g * gaussian_cdf_partials(r, sigma, maxpts, abseps, releps, rng, False, log_cdf)[0]
    else:
        gradient, second = gaussian_cdf_partials(r, sigma, maxpts, abseps, releps, rng, True, log_cdf)
        x_bar = g * gradient
        spread = 0.5 * np.tensordot(np.reshape(ans_bar, (-1,)), second, 1)
        if np.ndim(cov) < 2:
            cov_bar = unbroadcast(np.diagonal(spread), cov)
        else:
            cov_bar = np.tril(spread) + np.tril(np.transpose(spread), -1)
    mean_bar = None if mean is None else unbroadcast(-np.sum(x_bar, axis=0), mean)
    return np.reshape(x_bar, np.shape(x)), mean_bar, cov_bar


def gaussian_cdf_tangent(ans, x, mean, cov, maxpts, abseps, releps, rng, x_dot, mean_dot, cov_dot, log=False):
    """The tangent of ``multivariate_normal.cdf`` (``log``: ``logcdf``) per point: the gradient
    times ``x_dot - mean_dot``, plus half the second partials times ``cov_dot`` (each tangent
    None for a constant)."""
    r, sigma = _gaussian_cdf_points(x, mean, cov)
    log_cdf = np.reshape(ans, (-1,)) if log else None
    t = np.zeros(np.shape(r)[:1])
    if cov_dot is None:
        gradient = gaussian_cdf_partials(r, sigma, maxpts, abseps, releps, rng, False, log_cdf)[0]
    else:
        gradient, second = gaussian_cdf_partials(r, sigma, maxpts, abseps, releps, rng, True, log_cdf)
        sigma_dot = _covariance_matrix(cov_dot, np.shape(sigma)[0])
        t = t + 0.5 * np.sum(second * sigma_dot, axis=(1, 2))
    if x_dot is not None:
        t = t + np.sum(gradient * np.reshape(x_dot, np.shape(r)), axis=1)
    if mean_dot is not None:
        t = t - np.sum(gradient * mean_dot, axis=1)
    return np.reshape(t, np.shape(ans))


def gaussian_cdf_partials(r, sigma, maxpts=None, abseps=1e-5, releps=1e-5, rng=None, second=True,
                          log_cdf=None):
    """First and second partials of ``Phi_d(r; 0, sigma)`` in its upper limits, at n points.

    ``Phi_d`` is the normal probability of the box below ``r``.  Its gradient is a density
    times a conditional probability (Genz & Bretz, *Computation of Multivariate Normal and t
    Probabilities*, Springer 2009, §2.1; Plackett, Biometrika 41, 1954, for the mixed
    partials)::

        dPhi/dr_i         = phi_1(r_i; s_ii) Phi_{d-1}(r_-i - S_-i,i r_i / s_ii; S_-i,-i - S_-i,i S_i,-i / s_ii)
        d2Phi/dr_i dr_j   = phi_2(r_ij; S_ij,ij) Phi_{d-2}(conditional on both), i != j
        d2Phi/dr_i^2      = -(r_i / s_ii) dPhi/dr_i - sum_{j != i} (s_ij / s_ii) d2Phi/dr_i dr_j

    (the last from ``S grad phi = -r phi`` integrated over the other coordinates).  Plackett's
    identity makes the covariance's derivative ``dPhi/ds_ij = d2Phi/dr_i dr_j`` (i != j, one
    parameter per pair) and ``dPhi/ds_ii = d2Phi/dr_i^2 / 2``.  ``Phi_1`` is ``ndtr``,
    ``Phi_0`` is 1, and the others SciPy's ``multivariate_normal.cdf`` given ``maxpts``,
    ``abseps``, ``releps`` and ``rng`` (for d >= 4 they are random to ``abseps``).

    Args:
        r: ``(n, d)`` float64, the points less the mean.
        sigma: ``(d, d)`` float64, symmetric positive definite.
        maxpts, abseps, releps, rng: passed on to SciPy's ``multivariate_normal.cdf``.
        second: whether to compute the second partials.
        log_cdf: ``(n,)``, ``log Phi_d`` at the points, or None.  Given, each partial is
            divided by ``Phi_d``, through logs (``exp(log phi + log Phi_k - log_cdf)``), so
            that a tiny probability gives a ratio, not ``0 / 0``.

    Returns:
        ``(gradient, hessian)``: ``(n, d)`` and ``(n, d, d)`` float64 (None unless ``second``).
    """
    from scipy import special, stats  # (only multivariate_normal.cdf's rules call this)

    n, d = np.shape(r)
    log = log_cdf is not None

    def scaled(log_density, points, cov):
        """``exp(log_density) Phi_k(points; 0, cov)``, over ``Phi_d`` where ``log``."""
        k = np.shape(cov)[0]
        if k == 0:
            inner = np.zeros(n) if log else np.ones(n)
        elif k == 1:
            z = points[:, 0] / math.sqrt(cov[0, 0])
            inner = special.log_ndtr(z) if log else special.ndtr(z)
        else:
            method = stats.multivariate_normal.logcdf if log else stats.multivariate_normal.cdf
            inner = np.reshape(method(points, cov=cov, maxpts=maxpts, abseps=abseps, releps=releps, rng=rng),
                               (n,))
        return np.exp(log_density + inner - log_cdf) if log else np.exp(log_density) * inner

    gradient = np.empty((n, d))
    for i in range(d):
        rest = [j for j in range(d) if j != i]
        slope = sigma[rest, i] / sigma[i, i]
        log_density = -0.5 * (r[:, i] ** 2 / sigma[i, i] + math.log(2 * math.pi * sigma[i, i]))
        gradient[:, i] = scaled(log_density, r[:, rest] - np.outer(r[:, i], slope),
                                sigma[np.ix_(rest, rest)] - np.outer(slope, sigma[i, rest]))
    if not second:
        return gradient, None
    hessian = np.zeros((n, d, d))
    for i in range(d):
        for j in range(i):
            pair, rest = [i, j], [k for k in range(d) if k not in (i, j)]
            block = sigma[np.ix_(pair, pair)]
            whitened = np.linalg.solve(block, np.transpose(r[:, pair]))
            log_density = -0.5 * (np.sum(r[:, pair] * np.transpose(whitened), axis=1)
                                  + math.log(4 * math.pi ** 2 * np.linalg.det(block)))
            slopes = np.linalg.solve(block, sigma[np.ix_(pair, rest)])  # (2, d - 2)
            hessian[:, i, j] = hessian[:, j, i] = scaled(
                log_density, r[:, rest] - r[:, pair] @ slopes,
                sigma[np.ix_(rest, rest)] - sigma[np.ix_(rest, pair)] @ slopes)
    for i in range(d):
        hessian[:, i, i] = -(r[:, i] * gradient[:, i] + hessian[:, i] @ sigma[i]) / sigma[i, i]
    return gradient, hessian


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


def norm_adjoint(ans_bar, ans, x, ord=None, axis=None, keepdims=False):
    """Adjoint of ``np.linalg.norm`` for every order NumPy accepts.

    Vectors (one axis): ``2`` → ``x / ans``; ``1`` → ``sign(x)``; ``inf``/``-inf``
    → ``sign(x)`` on the entries of largest/smallest magnitude (ties share);
    ``0`` (a count) → 0; any other ``p`` → ``sign(x) |x|^(p-1) ans^(1-p)``.
    Matrices (two axes, stacked over the others): ``'fro'`` → ``x / ans``;
    ``2``/``-2`` → ``u v^T`` of the largest/smallest singular value; ``'nuc'`` →
    ``U V^T`` (Giles 2008, "Collected matrix derivative results", §3.3: the
    adjoint of ``s = svd(A)`` is ``U diag(s_bar) V^T``); ``1``/``-1`` and
    ``inf``/``-inf`` → ``sign(x)`` on the column/row of largest/smallest absolute
    sum (ties share).  Where the norm is 0 (or a singular value repeats) this is
    one subgradient.  (NumPy's functions serve CuPy arrays too, through
    ``__array_function__``; forward mode follows this source for second derivatives.)
    """
    x = _as_array(x)
    ndim = np.ndim(x)
    axes = _axes_as_given(axis, ndim)  # (rows, columns) as given
    g = broadcast_reduced(ans_bar, x, axes, keepdims)
    full = broadcast_reduced(ans, x, axes, keepdims)
    safe = np.where(full == 0, 1, full)
    if ord is None or ord == "fro" or (ord == 2 and len(axes) == 1):
        return g * x / safe
    if len(axes) == 1:
        a = axes[0]
        if ord == 1:
            return g * np.sign(x)
        if ord == 0:
            return np.zeros_like(g * x)
        if ord in (np.inf, -np.inf):
            mask = np.abs(x) == full
            return g * np.sign(x) * mask / np.sum(mask, axis=a, keepdims=True, dtype=x.dtype)
        p = ord
        return np.where(full == 0, 0, g * np.sign(x) * np.abs(x) ** (p - 1) * safe ** (1 - p))
    rows, cols = axes
    if ord in ("nuc", 2, -2):
        xm = np.moveaxis(x, (rows, cols), (-2, -1))
        gm = np.moveaxis(g, (rows, cols), (-2, -1))[..., :1, :1]
        u, _, vt = np.linalg.svd(xm, full_matrices=False)
        if ord == "nuc":
            bar = u @ vt
        else:
            i = slice(0, 1) if ord == 2 else slice(-1, None)  # singular values are sorted
            bar = u[..., :, i] @ vt[..., i, :]
        return np.moveaxis(gm * bar, (-2, -1), (rows, cols))
    if ord in (1, -1):
        summed, across = rows, cols  # column sums, the largest (smallest) column
    elif ord in (np.inf, -np.inf):
        summed, across = cols, rows
    else:
        raise ValueError(f"Invalid norm order {ord!r} for matrices")
    sums = np.sum(np.abs(x), axis=summed, keepdims=True)
    mask = sums == full
    return g * np.sign(x) * mask / np.sum(mask, axis=across, keepdims=True, dtype=x.dtype)


def matmul_lhs(ans_bar, x1, x2):
    """Adjoint of ``x1 @ x2`` with respect to ``x1``, for any ranks (NumPy matmul semantics)."""
    if np.ndim(x2) == 1:
        g = np.multiply.outer(ans_bar, x2) if np.ndim(x1) > 1 else ans_bar * x2
    elif np.ndim(x1) == 1:
        g = (x2 @ ans_bar[..., None])[..., 0]
    else:
        g = ans_bar @ np.swapaxes(x2, -1, -2)
    return unbroadcast(g, x1)


def matmul_rhs(ans_bar, x1, x2):
    """Adjoint of ``x1 @ x2`` with respect to ``x2``, for any ranks (NumPy matmul semantics)."""
    if np.ndim(x1) == 1:
        g = x1[:, None] * ans_bar[..., None, :] if np.ndim(x2) > 1 else ans_bar * x1
    elif np.ndim(x2) == 1:
        g = (np.swapaxes(x1, -1, -2) @ ans_bar[..., None])[..., 0]
    elif np.ndim(x2) == 2 and np.ndim(x1) > 2:
        # (a stack of inputs times one matrix, `x @ W` for x (T, B, k): the sum over the stack of
        # x_t^T g_t is one product of the stacked rows, not a stack of products summed after)
        k, n = np.shape(x1)[-1], np.shape(ans_bar)[-1]
        return np.reshape(x1, (-1, k)).T @ np.reshape(ans_bar, (-1, n))
    else:
        g = np.swapaxes(x1, -1, -2) @ ans_bar
    return unbroadcast(g, x2)


def dot_lhs(ans_bar, a, b):
    """Adjoint of ``np.dot(a, b)`` with respect to ``a``."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return unbroadcast(ans_bar * b, a) if np.ndim(a) == 0 else ans_bar * b
    if np.ndim(b) <= 2:
        return matmul_lhs(ans_bar, a, b)
    # dot sums over a's last axis and b's second-to-last: ans = tensordot(a, b, ([-1], [-2])).
    return tensordot_adjoint(ans_bar, a, b, ([-1], [np.ndim(b) - 2]), 0)


def dot_rhs(ans_bar, a, b):
    """Adjoint of ``np.dot(a, b)`` with respect to ``b``."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        return unbroadcast(ans_bar * a, b) if np.ndim(b) == 0 else ans_bar * a
    if np.ndim(b) <= 2:
        return matmul_rhs(ans_bar, a, b)
    return tensordot_adjoint(ans_bar, a, b, ([-1], [np.ndim(b) - 2]), 1)


_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def _tensordot_subscripts(ndim_a, ndim_b, axes):
    if isinstance(axes, int):
        axes = (list(range(ndim_a - axes, ndim_a)), list(range(axes)))
    axes_a, axes_b = ([axes[0]] if isinstance(axes[0], int) else list(axes[0]),
                      [axes[1]] if isinstance(axes[1], int) else list(axes[1]))
    axes_a = [a % ndim_a for a in axes_a]
    axes_b = [b % ndim_b for b in axes_b]
    sub_a = list(_LETTERS[:ndim_a])
    sub_b = list(_LETTERS[ndim_a: ndim_a + ndim_b])
    for i, j in zip(axes_a, axes_b):
        sub_b[j] = sub_a[i]
    out = [c for i, c in enumerate(sub_a) if i not in axes_a] + \
          [c for j, c in enumerate(sub_b) if j not in axes_b]
    return f"{''.join(sub_a)},{''.join(sub_b)}->{''.join(out)}"


def tensordot_adjoint(ans_bar, a, b, axes, which):
    """Adjoint of ``np.tensordot(a, b, axes)`` w.r.t. operand ``which`` (0 or 1)."""
    spec = _tensordot_subscripts(np.ndim(a), np.ndim(b), axes)
    return einsum_adjoint(spec, which, ans_bar, a, b)


def _parse_einsum(subscripts: str):
    """``(inputs, output)`` of subscripts without ellipses; implicit output: the letters
    that appear once, in alphabetical order (NumPy's rule)."""
    subscripts = subscripts.replace(" ", "")
    if "->" in subscripts:
        inputs, out = subscripts.split("->")
    else:
        inputs = subscripts
        letters = inputs.replace(",", "").replace(".", "")
        out = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
        if "." in inputs:
            out = "..." + out
    return inputs.split(","), out


def _explicit_einsum(subscripts: str, ndims) -> tuple:
    """``(inputs, output)`` with each ``...`` replaced by letters of its own, one per
    broadcast axis (right-aligned, as NumPy broadcasts them)."""
    ins, out = _parse_einsum(subscripts)
    used = set(subscripts)
    spare = [c for c in _LETTERS if c not in used]
    widths = [ndim - (len(s) - 3) for s, ndim in zip(ins, ndims) if "..." in s]
    width = max(widths, default=0)
    dots = "".join(spare[:width])
    ins = [s.replace("...", dots[width - (ndim - (len(s) - 3)):]) if "..." in s else s
           for s, ndim in zip(ins, ndims)]
    return ins, out.replace("...", dots)


@static
def einsum_adjoint_subscripts(subscripts: str, which: int, count: int = 2):
    """Subscripts of the one einsum that gives operand ``which``'s adjoint, or None.

    The adjoint of operand k contracts ``ans_bar`` with the other operands: for
    ``"ij,jk->ik"`` and k = 0, ``"ik,jk->ij"`` (``ans_bar`` takes operand k's
    place).  None when one plain einsum cannot express it (an ellipsis, a letter
    repeated within operand k, or one found in operand k alone, ``count``
    operands not as written): then :func:`einsum_adjoints` does it.
    """
    if not isinstance(subscripts, str) or "." in subscripts:
        return None
    ins, out = _parse_einsum(subscripts)
    if len(ins) != count:
        return None
    mine = ins[which]
    others = ins[:which] + ins[which + 1:]
    if any(mine.count(c) > 1 for c in mine):
        return None
    if any(c not in out and all(c not in o for o in others) for c in mine):
        return None
    return ",".join(ins[:which] + [out] + ins[which + 1:]) + "->" + mine


def einsum_adjoint(subscripts, which, ans_bar, x, y):
    """Adjoint of ``np.einsum(subscripts, x, y)`` w.r.t. operand ``which`` (0 or 1)."""
    return einsum_adjoints(subscripts, ans_bar, (x, y), which=which)[which]


def einsum_adjoints(subscripts, ans_bar, operands, optimize=False, which=None):
    """Adjoints of every operand of ``np.einsum(subscripts, *operands)``, any form NumPy
    accepts (subscripts as a string; the sublist form is rewritten to one when compiling).

    Operand k's adjoint is an einsum of ``ans_bar`` with the other operands onto
    operand k's distinct letters (Giles 2008, §2.3: the adjoint of a multilinear
    map in one argument); then

    * a letter found in operand k alone was summed there: broadcast back;
    * a letter repeated within operand k (``'ii->i'``, ``'ii,i->'``) reads a
      diagonal: the adjoint is scattered onto that diagonal, zero elsewhere;
    * an axis of length 1 that NumPy broadcast (in an ellipsis) is summed back.

    Returns:
        A list, one adjoint per operand (None for the others when ``which`` names one).
    """
    xp = array_module(ans_bar, *operands)
    operands = [_as_array(o) for o in operands]
    ins, out = _explicit_einsum(subscripts, [o.ndim for o in operands])
    size = {}
    for sub, operand in zip(ins, operands):
        for c, n in zip(sub, operand.shape):
            if n != 1 or c not in size:
                size[c] = n
    g = xp.asarray(ans_bar)
    adjoints = []
    for k, (mine, operand) in enumerate(zip(ins, operands)):
        if which is not None and k != which:
            adjoints.append(None)
            continue
        others = [(s, o) for i, (s, o) in enumerate(zip(ins, operands)) if i != k]
        letters = "".join(dict.fromkeys(mine))  # distinct, in order of first appearance
        known = "".join(c for c in letters if c in out or any(c in s for s, _ in others))
        spec = ",".join([out] + [s for s, _ in others]) + "->" + known
        part = xp.einsum(spec, g, *[o for _, o in others], optimize=optimize)
        full = [size[c] for c in letters]
        part = xp.reshape(part, [size[c] if c in known else 1 for c in letters])
        part = xp.broadcast_to(part, full)
        shrink = tuple(i for i, c in enumerate(letters) if operand.shape[mine.index(c)] == 1 and full[i] != 1)
        if shrink:  # broadcast from length 1
            part = xp.sum(part, axis=shrink, keepdims=True)
        if letters == mine:
            adjoints.append(part)
            continue
        bar = xp.zeros(operand.shape, dtype=part.dtype)  # a diagonal: scatter onto it
        grids = xp.ix_(*[xp.arange(n) for n in part.shape])
        bar[tuple(grids[letters.index(c)] for c in mine)] = part
        adjoints.append(bar)
    return adjoints


def _replaced(items, index, value) -> list:
    items = list(items)
    items[index] = value
    return items


def _summed_parts(parts, count) -> list:
    """Per place, the sum of the parts' non-None entries there (None where all are)."""
    out = []
    for k in range(count):
        here = [p[k] for p in parts if p[k] is not None]
        out.append(functools.reduce(operator.add, here) if here else None)
    return out


def einsum_adjoints_tangent(subscripts, ans_bar, operands, optimize, which, ans_bar_dot, operands_dot):
    """Tangent of :func:`einsum_adjoints`: operand k's adjoint is multilinear in ``ans_bar``
    and the other operands (it reads operand k's shape only), so its tangent is the sum of
    the adjoint with one of them at a time replaced by its tangent (None: a constant)."""
    count = len(operands)
    parts = [] if ans_bar_dot is None else \
        [einsum_adjoints(subscripts, ans_bar_dot, operands, optimize, which)]
    for j, dot in enumerate(operands_dot if operands_dot is not None else [None] * count):
        if dot is not None:
            part = einsum_adjoints(subscripts, ans_bar, _replaced(operands, j, dot), optimize, which)
            parts.append(_replaced(part, j, None))
    summed = _summed_parts(parts, count)
    return [zeros_like(a) if t is None and (which is None or k == which) else t
            for k, (t, a) in enumerate(zip(summed, operands))]


def einsum_adjoints_transposed(u, subscripts, ans_bar, operands, optimize=False):
    """Transpose of :func:`einsum_adjoints` in ``ans_bar`` and in the operands, given ``u``, one
    cotangent per operand (None: zero).  Operand k's adjoint ``E_k^T g`` is the transpose of
    ``E_k``, the einsum as a linear map of operand k, so ``<u_k, E_k^T g> = <E_k u_k, g>``:
    ``ans_bar`` gets ``sum_k E_k u_k`` (the einsum with ``u_k`` in operand k's place), and
    operand j gets ``sum_(k != j)`` of operand j's adjoint of that einsum, given ``ans_bar``."""
    count = len(operands)
    g_bar, parts = None, []
    for k in range(count):
        if u[k] is None:
            continue
        moved = _replaced(operands, k, u[k])
        term = np.einsum(subscripts, *moved, optimize=optimize)
        g_bar = term if g_bar is None else g_bar + term
        parts.append(_replaced(einsum_adjoints(subscripts, ans_bar, moved, optimize), k, None))
    summed = _summed_parts(parts, count)
    return (zeros_like(ans_bar) if g_bar is None else unbroadcast(g_bar, ans_bar),
            [zeros_like(o) if t is None else t for t, o in zip(summed, operands)])


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


def is_basic_index(index) -> bool:
    """True when ``x[index]`` is NumPy basic indexing (ints, slices, None, Ellipsis)."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(isinstance(p, (int, slice, type(None), type(Ellipsis))) and not isinstance(p, bool)
               for p in parts)


def basic_index(index) -> bool:
    """Whether ``x[index]`` reads each element at most once (basic indexing).

    In a rule template this is decided at compile time from the index's syntax:
    slices (whatever their bounds), literal ints, ``None``, ``...`` and names
    of integer scalars (loop indices) are basic; lists and arrays are not.
    """
    return is_basic_index(index)


def cast_adjoint(g, like):
    """``g``, or zeros where ``like`` has an integer or boolean dtype (a creation function
    given ``dtype=int``, a cast to int) or is an integer: a value rounded to integers has
    zero derivative.  A list or dict (``xs[1] = v`` into ``[0] * n``), or an array of
    objects, keeps what is written in it as it is: ``g``."""
    dtype = getattr(like, "dtype", None)
    if dtype.kind in "fcO" if dtype is not None else not isinstance(like, (int, np.integer, np.bool_)):
        return g
    return array_module(g).zeros_like(g)


def fill_like(a, value):
    """``np.full_like(a, value)`` with a floating dtype: an adjoint's fill (``value``, the
    adjoint of a full reduction) keeps ``a``'s float dtype, and an integer or boolean
    ``a`` gets ``value``'s, so that ``1 / n`` is not truncated to 0."""
    if a.dtype.kind in "fc" if hasattr(a, "dtype") else isinstance(a, float):
        return array_module(a).full_like(a, value)
    kind = getattr(value, "dtype", value)  # (a CuPy value: its dtype, never the array)
    return array_module(a).full_like(a, value, dtype=np.result_type(kind, 1.0))


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


def dtype_adjoint(g, dtype):
    """``g``, or zeros where a reduction computes in an integer or boolean ``dtype``
    (``np.sum(x, dtype=int)`` rounds each element: derivative zero)."""
    if dtype is None or np.dtype(dtype).kind in "fc":
        return g
    return array_module(g).zeros_like(g)


def linspace_adjoint(ans_bar, start, stop, num=50, endpoint=True, axis=0, which=0):
    """Adjoint of ``start`` (``which=0``) or ``stop`` (1) in ``np.linspace``:
    ``ans = start + (stop - start) t`` with ``t = i / (num - 1)`` (``i / num``
    without the endpoint), along ``axis``."""
    xp = array_module(ans_bar)
    g = xp.asarray(ans_bar)
    dtype = g.dtype if g.dtype.kind in "fc" else np.float64
    t = xp.linspace(0.0, 1.0, num, endpoint=endpoint).astype(dtype)
    axis = axis % g.ndim
    t = xp.reshape(t, [num if d == axis else 1 for d in range(g.ndim)])
    stop_bar = xp.sum(g * t, axis=axis)
    if which == 1:
        return unbroadcast(stop_bar, stop)
    return unbroadcast(xp.sum(g, axis=axis) - stop_bar, start)


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


def keeping_fields(obj, name, where, /, *args, **kwargs):
    """``obj.name(*args, **kwargs)`` for its effects, on an object being differentiated:
    refused if it replaced a float field of ``obj`` (see :func:`stored`)."""
    if isinstance(obj, list) and name in ("reverse", "sort", "insert", "remove"):
        # (a list whose items were known when compiling only as `obj`: their adjoints go by
        # position, which a change of order would scramble, silently)
        raise errors.UnsupportedSyntaxError(
            f"`.{name}()` of a list that holds values being differentiated, where srcgrad knows the list "
            f"only when the code runs (at {where}): srcgrad does not follow a change of its order there",
            None, "make a new list instead (`xs = xs[::-1]`, `xs = sorted(xs)`, `xs = xs[:i] + [v] + xs[i:]`)")
    fields = getattr(obj, "__dict__", None)
    before = dict(fields) if fields is not None else None
    # (A float array field changed in place, `self.w[0] = 0`, is refused too, and so is a
    # list or dict a field holds grown by one, `self.hist.append(y)`.)
    arrays = {k: v.copy() for k, v in (before or {}).items()
              if isinstance(v, np.ndarray) and v.dtype.kind in "fc"}
    held = {k: _held_items(v) for k, v in (before or {}).items() if isinstance(v, (list, dict))}
    result = getattr(obj, name)(*args, **kwargs)
    if before is not None:
        for key, value in vars(obj).items():
            if before.get(key, _ABSENT) is not value:
                for old_or_new in (before.get(key), value):
                    stored(old_or_new, key, f"{where}, in `.{name}()`")
            elif key in arrays and not np.array_equal(arrays[key], value, equal_nan=True):
                stored(value, key, f"{where}, in `.{name}()`, which changed it in place")
            elif key in held:
                for item in _held_items(value) - held[key]:
                    stored(_ITEMS[item], key, f"{where}, in `.{name}()`, which added it to the container")
        _ITEMS.clear()
    return result


_ITEMS: dict = {}  # id -> item, for the items _held_items saw during one keeping_fields call


def _held_items(container, depth=2) -> frozenset:
    """The ids of the items of a list or dict (and of the lists and dicts in it, ``depth``
    deep): what a call that grows it in place adds is told apart by them."""
    items = container.values() if isinstance(container, dict) else container
    out = set()
    for item in items:
        _ITEMS[id(item)] = item
        out.add(id(item))
        if depth > 1 and isinstance(item, (list, dict)):
            out |= _held_items(item, depth - 1)
    return frozenset(out)


_ABSENT = object()


def stored(value, name: str, where: str, obj=None):
    """``value``, about to be stored as ``obj.name`` of an object being differentiated:
    a counter, flag or label is fine, and so is a first value where the field held None
    or nothing (a lazily made parameter, ``if self.w is None: self.w = ...``: no parameter
    is replaced, and the gradient has None there); a float (or float array, or
    structure) replacing one is refused, as a later read would send its adjoint to the
    parameter it replaced."""
    if isinstance(value, (bool, int, str, type(None), np.integer, np.bool_)) or isinstance(value, np.ndarray) \
            and value.dtype.kind not in "fc":
        return value  # (a counter, a flag, a label: `self.steps = self.steps + 1` of an np.int64 too)
    if obj is not None and getattr(obj, name, None) is None:
        return value
    if isinstance(value, (float, complex, np.number, np.ndarray)) or tree.is_structure(value) \
            or hasattr(value, "dtype"):
        raise errors.UnsupportedSyntaxError(
            f"storing a float value in the attribute `.{name}` of an object being differentiated is "
            f"not supported (at {where}): a later read of `.{name}` would send its adjoint to the "
            "parameter it replaced", None,
            "keep the value in a local name (or return it with has_aux=True), or make a new object")
    return value


# Attributes a differentiated call stored as bookkeeping (no adjoint: `_kept_apart` in the
# reverse pass), for as long as the outermost differentiated call runs: id(obj) -> (obj,
# {name: (value stored, where)}).  A later call of the same computation that reads one back
# with an adjoint (`vjp_call` checks its pullback) is refused: the adjoint would go to the
# field's old value.
KEPT: dict = {}
_COMPUTATIONS = [0]


class differentiated_call:
    """Context of one outermost gradient call: what ``kept`` records lasts as long."""

    def __enter__(self):
        _COMPUTATIONS[0] += 1

    def __exit__(self, *exc):
        _COMPUTATIONS[0] -= 1
        if not _COMPUTATIONS[0]:
            KEPT.clear()


def kept(obj, name: str, value, where: str):
    """``value``, about to be stored as ``obj.name`` with no adjoint (a cache, running
    statistics): recorded, so that a later call reading it back is refused."""
    if _COMPUTATIONS[0] and not isinstance(value, (bool, int, str, type(None))):
        KEPT.setdefault(id(obj), (obj, {}))[1][name] = (value, where)
    return value


def growing(receiver, obj, name: str, field, where: str):
    """``receiver`` (the list or dict ``obj.name`` holds, ``field``, or an entry of it), about to
    grow by a value with no adjoint (``self.inputs.append(x)``): ``obj.name`` is recorded as
    ``kept`` records a store, so that a later call reading it back is refused."""
    kept(obj, name, field, where)
    return receiver


def entries(container, name: str, where: str):
    """``container`` (``self.name``), about to have an entry replaced (``self.name[k] = v``)
    where its kind was not known when compiling: a dict or list is; an array is refused (a
    write into it in place, which srcgrad does not follow)."""
    if isinstance(container, (dict, list)):
        return container
    raise errors.UnsupportedSyntaxError(
        f"writing into `{name}[...]` (at {where}) is supported where `{name}` holds a dict or a "
        f"list (an object's cache, counters, running statistics), not a `{type(container).__name__}`: "
        "srcgrad cannot follow a write into it in place", None,
        f"replace the field instead (`{name} = ...`), with a new value made from the old one")


def not_in_place(container, key, name: str, op: str, where: str, field: bool = False):
    """Refuse ``name[key] op= v`` (``obj.key op= v`` where ``field``) where the entry holds an
    array, which NumPy changes in place (another name holding it sees the change): srcgrad
    computes a new array.  A number (a counter) is rebound, as srcgrad does."""
    value = getattr(container, key, None) if field else \
        container[key] if isinstance(container, (dict, list)) else None
    if hasattr(value, "__array__") and not isinstance(value, np.generic):
        shown = name if field else f"{name}[...]"
        raise errors.UnsupportedSyntaxError(
            f"`{shown} {op}= ...` (at {where}) changes the array it holds in place, and another "
            "name may hold the same array (a name it was read into, the caller)", None,
            f"write `{shown} = {shown} {op} ...` (a new array)")
    return None


def kept_entry(holder, obj, name: str, key, value, where: str):
    """``holder`` (the dict or list ``obj.name``), about to get ``value`` at ``key`` with no
    adjoint (``self.parameters["running_mean"] = ...``): recorded as ``kept`` records a
    field, by ``(name, key)``, so that a later call reading that entry back is refused."""
    if _COMPUTATIONS[0] and not isinstance(value, (bool, int, str, type(None))):
        KEPT.setdefault(id(obj), (obj, {}))[1][(name, key)] = (value, where)
    return holder


def _still_held(obj, name, value) -> bool:
    if isinstance(name, tuple):  # an entry of a container the object holds
        holder = getattr(obj, name[0], None)
        try:
            return holder[name[1]] is value
        except (KeyError, IndexError, TypeError):
            return False
    return getattr(obj, name, None) is value


def kept_fields(obj) -> dict:
    """``{name: where}`` of ``obj``'s fields (``(name, key)`` of entries of its containers)
    that still hold what ``kept`` or ``kept_entry`` recorded."""
    entry = KEPT.get(id(obj))
    if entry is None or entry[0] is not obj:
        return {}
    return {name: where for name, (value, where) in entry[1].items() if _still_held(obj, name, value)}


def kept_read(obj, name: str, keys=None):
    """The first of ``obj``'s kept fields a read of ``obj.name`` takes in, as ``(name, where)``,
    or None: the field itself, or an entry of it (among ``keys``, the entries the code reads
    with an adjoint, where those are known; any of them where ``keys`` is None)."""
    for kept_name, where in kept_fields(obj).items():
        if kept_name == name or isinstance(kept_name, tuple) and kept_name[0] == name \
                and (keys is None or kept_name[1] in keys):
            return kept_name, where
    return None


def field(obj, name: str, where: str, keys=None):
    """``obj.name``, read with an adjoint after a call that may have stored it as
    bookkeeping (``kept``): refused if it did (where ``obj.name`` holds a dict or list, and
    ``keys`` are given, if it stored one of the entries read)."""
    found = kept_read(obj, name, keys) if KEPT else None
    if found is not None:
        refuse_read_back(obj, found[0], found[1], f"the read of `.{name}` at {where}")
    return getattr(obj, name)


def _spelled(name) -> str:
    return f"{name[0]}[{name[1]!r}]" if isinstance(name, tuple) else name


def refuse_read_back(obj, name, where: str, reader: str):
    name = _spelled(name)
    raise errors.UnsupportedSyntaxError(
        f"{reader} reads back `.{name}`, which an earlier call of this differentiated computation "
        f"stored (at {where}) as bookkeeping, with no adjoint: the adjoint of that read would go "
        f"to the `.{name}` the object held before", None,
        f"return the value from the call that computes it and pass it on (or, for state "
        "that should stay constant such as running statistics, read it through srcgrad.stop_gradient)")


def check_kept_pullback(pullback, fn, wrt, objects):
    """``pullback`` refusing an adjoint for a kept field: ``objects`` is ``[(position in
    wrt, obj, {name: where})]`` for the call's objects holding kept fields."""
    reader = f"`{getattr(fn, '__qualname__', None) or type(fn).__name__}`"

    def pull(value_bar):
        adjoints = pullback(value_bar)
        for position, obj, fields in objects:
            adjoint = adjoints if len(wrt) == 1 else adjoints[position]
            for name, where in fields.items():
                g = tree.lookup(adjoint, name if isinstance(name, tuple) else (name,))
                if g is not None and any(np.any(np.asarray(leaf) != 0) for leaf in tree.flatten(g)[1]):
                    refuse_read_back(obj, name, where, reader)
        return adjoints
    return pull


def check_scalar_output(value, where: str):
    """Raise a clear error when ``grad`` is given a function with a non-scalar output,
    or one that returned None on the path taken (whose gradient would silently be 0)."""
    if value is None:
        raise errors.UserCodeError(
            f"the function returned None on the path this call took (at {where}), so it has no "
            "gradient", None, "return the value to differentiate on every path (a function that "
            "ends without `return` returns None)")
    if isinstance(value, complex) or getattr(getattr(value, "dtype", None), "kind", "") == "c":
        raise errors.UnsupportedSyntaxError(
            f"the function returned a complex value (at {where}); srcgrad does not differentiate "
            "complex numbers yet", None, "return a real value (np.abs(z) ** 2, z.real, z.imag)")
    if isinstance(value, (dict, list, tuple)):  # (np.ndim of a dict is 0)
        raise errors.NonScalarOutputError(
            f"grad needs a scalar output, but the function returned a {type(value).__name__} (at {where})",
            None, "return the loss alone, pass has_aux=True for `return loss, aux` (aux may be a dict), "
            "or use srcgrad.vjp to pull back an adjoint of the same structure")
    if np.ndim(value) != 0:
        raise errors.NonScalarOutputError(
            f"grad needs a scalar output, but the function returned shape {np.shape(value)} "
            f"(at {where})",
            None,
            "reduce it to a scalar (np.sum, np.mean), or use srcgrad.vjp(f) to pull back "
            "an adjoint of the output's shape",
        )
    return value


def scalar_seed(value, seed, where: str):
    """The seed of ``grad`` for an output ``value`` whose rank is known only when the code
    runs: ``seed`` for a scalar, ``seed`` in ``value``'s shape for an array of one element
    (shape ``(1,)``, ``(1, 1)``, as autograd takes); anything else is refused, as
    :func:`check_scalar_output` says."""
    if isinstance(value, (dict, list, tuple)) or np.ndim(value) == 0 or np.size(value) != 1:
        check_scalar_output(value, where)
        return seed
    check_scalar_output(value.reshape(()), where)  # (a complex value is refused)
    return np.full(np.shape(value), seed, dtype=np.result_type(value, 1.0))


def size_one_seed(value, seed, where: str):
    """The seed of ``grad`` for an array output ``value`` of one element (shape ``(1,)``,
    ``(1, 1)``): ``seed`` in its shape.  Any other size is refused (NonScalarOutputError)."""
    if np.size(value) != 1:
        raise errors.NonScalarOutputError(
            f"grad needs a scalar output, but the function returned shape {np.shape(value)} (at {where})",
            None, "reduce it to a scalar (np.sum, np.mean), or use srcgrad.vjp(f) to pull back an adjoint "
            "of the output's shape")
    return np.full(np.shape(value), seed, dtype=np.result_type(value, 1.0))


def zip_length(*sequences) -> int:
    """How many items ``zip(*sequences)`` yields: the shortest length."""
    return min(len(s) for s in sequences)


def restore(array, index, old, done: list) -> None:
    """``array[index] = old`` (a backward sweep puts back what a write overwrote, into an
    array, a list or a dict: :func:`restore_entry`),
    remembering the written values in ``done`` so that :func:`redo` can write them
    again: a pullback may be called more than once, and each call must find the
    arrays as the forward sweep left them."""
    done.append((array, index, overwritten(array, index)))
    restore_entry(array, index, old)


def snapshot(value):
    """``value`` with copies of the arrays in it (in tuples, lists and dicts): what a
    function returned, kept from the backward sweep's restores of overwritten
    elements (``y[0] = 10; return loss, y`` with ``has_aux=True``)."""
    if isinstance(value, tuple):
        items = [snapshot(v) for v in value]
        return type(value)(*items) if hasattr(value, "_fields") else tuple(items)
    if isinstance(value, list):
        return [snapshot(v) for v in value]
    if isinstance(value, dict):
        return {k: snapshot(v) for k, v in value.items()}
    if hasattr(value, "__array__") and hasattr(value, "copy") and not isinstance(value, (float, int)):
        return value.copy()
    return value


def redo(done: list) -> None:
    """Undo the :func:`restore` calls recorded in ``done``, last first."""
    for array, index, written in reversed(done):
        if isinstance(array, list) and isinstance(index, int) and not -len(array) <= index < len(array):
            continue  # (an item the forward sweep appended, which the backward sweep popped again)
        restore_entry(array, index, written)
    done.clear()


def is_gradient_function(obj) -> bool:
    """A function srcgrad made (``srcgrad.grad(f)``, a pullback): it carries the mark
    ``__srcgrad_gradient__``.  Read without running the class's ``__getattr__`` (a
    model that delegates any name is no gradient function)."""
    return inspect.getattr_static(obj, "__srcgrad_gradient__", False) is True


def iterated(items):
    """What ``for v in items`` visits, as something the generated loop can index
    (``items[i]``): the keys of a dict, the items of a set or of a dict's view, or what
    an iterator has left (``it = iter(X); next(it); for x in it``: read once, as Python
    does), as a tuple; a list, tuple or array as it is."""
    if isinstance(items, (dict, set, frozenset, type({}.keys()), type({}.values()), type({}.items()))) \
            or not (hasattr(items, "__getitem__") and hasattr(items, "__len__")) and hasattr(items, "__next__"):
        return tuple(items)
    return items


def read_back(obj, name: str, value):
    """``obj.name`` read right after ``obj.name = value`` (in the same block): ``value``
    itself, so its adjoint reaches what made it.  A class whose ``__setattr__`` or
    property gave back another value is refused when it runs."""
    if getattr(obj, name) is not value:
        raise errors.UnsupportedSyntaxError(
            f"`.{name}` read back right after it was stored gives another value (the class's "
            f"`__setattr__` or a property changes what is stored), which srcgrad cannot follow", None,
            f"keep the value in a local name and use it, rather than reading `.{name}` back")
    return value


def entry_read_back(container, key, value):
    """``container[key]`` read right after ``container[key] = value`` (an entry of a dict or
    list an object holds, in the same block): ``value`` itself, so its adjoint reaches what
    made it.  A container that gave back another value is refused when it runs."""
    if container[key] is not value:
        raise errors.UnsupportedSyntaxError(
            f"an entry read back right after it was stored gives another value (the container's "
            f"`__setitem__` changes what is stored), which srcgrad cannot follow", None,
            "keep the value in a local name and use it, rather than reading the entry back")
    return value


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


def unflattened_tangent(ans, vector_dot):
    """Tangent of ``unflatten(vector)``: ``vector_dot`` split into ``ans``'s leaves."""
    if vector_dot is None:
        return None
    _, leaves, spec = tree.flatten(ans)
    ends = np.cumsum([np.size(leaf) for leaf in leaves])[:-1]
    parts = np.split(np.asarray(vector_dot), ends)
    return tree.unflatten(spec, [p.reshape(np.shape(leaf)) for p, leaf in zip(parts, leaves)])


def as_tuple(items):
    """``tuple(xs)`` of a list whose items are known when it runs only (grown by append)."""
    return tuple(items)


def erf(x):
    """The error function, elementwise: SciPy's (``scipy.special.erf``), imported when first
    called, so that srcgrad (and its ``nn`` library's exact GELU) imports without SciPy.

    Raises:
        ImportError: SciPy is not installed.
    """
    try:
        from scipy import special
    except ImportError as missing:
        raise ImportError("the error function (the exact GELU) needs SciPy: pip install scipy, "
                          "or use approximate='tanh'") from missing
    return special.erf(x)


def sequence_of(items):
    """``list(xs)`` / ``tuple(xs)`` of a value whose kind is known only when the code runs
    (the compiler keeps the user's ``list``/``tuple`` in the code; this names the rule)."""
    return list(items)


def sequence_of_tangent(ans, items, items_dot):
    """Tangent of ``list(items)`` / ``tuple(items)``: the items' tangents in a list or tuple
    as ``ans`` (a dict's keys: none)."""
    if iterates_keys(items) or items_dot is None:
        return zeros_tangent(ans)
    return type(ans)(items_dot)


def sequence_of_adjoint(ans_bar, items):
    """Adjoint of ``items`` in ``list(items)`` / ``tuple(items)``: a list's or tuple's is the
    new one's, item by item; an array's (its rows) an array with each row's adjoint; a
    dict's (its keys) or another iterable's none."""
    if isinstance(items, (list, tuple)):
        return ans_bar
    if not hasattr(items, "shape") or not np.ndim(items):
        return {}
    out = zeros_like(items)
    for i in range(len(items)):
        part = item_of(ans_bar, i)
        if part is not None:
            out[i] = out[i] + part
    return out


def fromkeys(keys, value=None):
    """``dict.fromkeys(keys, value)``: a new dict, each key holding ``value``."""
    return dict.fromkeys(keys, value)


def fromkeys_adjoint(ans_bar, keys, value):
    """Adjoint of ``value`` in :func:`fromkeys`: the sum of its entries' adjoints."""
    total = None
    for key in dict.fromkeys(keys):
        part = item_of(ans_bar, key)
        if part is not None:
            total = part if total is None else total + part
    return zeros_like(value) if total is None else total


def tolist(a):
    """``a.tolist()``: an array as nested lists of Python numbers (a number for a 0-d array)."""
    return a.tolist() if hasattr(a, "tolist") else a


def tolist_adjoint(ans_bar, a):
    """Adjoint of ``a`` in ``a.tolist()``: the lists' adjoints as an array of ``a``'s shape
    (zeros where nothing reached an item)."""
    if not np.ndim(a):
        return 0.0 * np.asarray(a, dtype=float) if ans_bar is None else np.asarray(ans_bar, dtype=_float_of(a))
    out = np.zeros(np.shape(a), dtype=_float_of(a))
    for i in range(len(out)):
        part = item_of(ans_bar, i)
        if part is not None:
            out[i] = tolist_adjoint(part, a[i])
    return out


def _float_of(a):
    dtype = getattr(a, "dtype", None)
    return dtype if dtype is not None and dtype.kind == "f" else np.float64


def mapping_of(items):
    """``dict(d)`` of a value whose kind is known only when the code runs (the compiler
    keeps the user's ``dict`` in the code; this names the rule)."""
    return dict(items)


def mapping_of_adjoint(ans_bar, items):
    """Adjoint of ``items`` in ``dict(items)``: a mapping's is the new dict's, entry by
    entry; a sequence of ``(key, value)`` pairs gives each key's adjoint to the value of
    its last pair (the one the dict keeps).

    Raises:
        srcgrad.errors.UnsupportedSyntaxError: ``items`` is neither (an iterator, read once).
    """
    if isinstance(items, dict) or hasattr(items, "keys") and hasattr(items, "__getitem__"):
        return ans_bar
    if not isinstance(items, (list, tuple)):
        raise errors.UnsupportedSyntaxError(
            f"`dict(...)` was given a {type(items).__name__}, whose values srcgrad does not follow back",
            None, "pass it a dict, or a list of (key, value) pairs")
    last = {pair[0]: i for i, pair in enumerate(items)}
    return {i: {1: part} for key, i in last.items() if (part := item_of(ans_bar, key)) is not None}


def without_key(d, key, missing_ok=False):
    """``d.pop(key)`` / ``del d[key]`` on a dict made here, written ``d = rt.without_key(d, key)``:
    a new dict of ``d``'s kind without ``key`` (KeyError where it is missing, as Python's,
    unless ``missing_ok``: ``d.pop(key, default)``)."""
    out = d.copy()
    if missing_ok:
        out.pop(key, None)
    else:
        del out[key]
    return out


def without_key_adjoint(ans_bar, d, key):
    """Adjoint of ``d`` in :func:`without_key`: the new dict's entries are ``d``'s (the entry
    removed gets none: what read it read ``d[key]`` before)."""
    if isinstance(ans_bar, dict):
        return {k: g for k, g in ans_bar.items() if k != key}
    return ans_bar


def merged(a, b):
    """``{**a, **b}`` of dicts whose keys are known when the code runs only: a new dict,
    ``b``'s value where both have a key (in ``a``'s place)."""
    return {**a, **b}


def merged_adjoints(ans_bar, a, b):
    """Adjoints of ``a`` and ``b`` in :func:`merged`: each entry's to the dict whose value
    the merge kept (``b``'s where both have the key)."""
    parts = ans_bar if isinstance(ans_bar, dict) else {}
    return ({k: g for k, g in parts.items() if k in a and k not in b},
            {k: g for k, g in parts.items() if k in b})


def concatenated(a, b):
    """``a + b`` on tuples or lists (how the compiler writes a join whose items it does
    not know when compiling): Python's own ``+``."""
    return a + b


def concatenated_adjoints(ans_bar, a, b):
    """Adjoints of ``a`` and ``b`` in ``a + b`` (tuples or lists): the items of
    ``ans_bar`` before ``len(a)``, and after, each sparse (``{0: u}``: only the items
    something read)."""
    n = len(a)
    a_bar = {i: g for i in range(n) if (g := item_of(ans_bar, i)) is not None}
    b_bar = {i: g for i in range(len(b)) if (g := item_of(ans_bar, n + i)) is not None}
    return a_bar, b_bar


def repeated(items, count):
    """``items * count`` on a tuple or list (``[h] * 3``): Python's own ``*``."""
    return items * count


def repeated_adjoint(ans_bar, items, count):
    """Adjoint of ``items`` in ``items * count``: the sum of each copy's item adjoints."""
    n, out = len(items), {}
    for k in range(max(count, 0) * n):
        g = item_of(ans_bar, k)
        if g is not None:
            out[k % n] = tree.add(out.get(k % n), g)
    return out


def iterated_adjoint(ans_bar, ans, items):
    """Adjoint of :func:`iterated`: the same object's passes through; a dict's keys
    carry none."""
    return ans_bar if ans is items else {}


def super_method(cls, obj, name):
    """What ``super(cls, obj).name`` finds, as a plain function of ``obj``: the first
    class after ``cls`` in ``type(obj)``'s MRO that defines ``name``.

    Raises:
        AttributeError: no class after ``cls`` defines it (as Python's ``super`` does).
        TypeError: it is not a plain method (a property, staticmethod or classmethod).
    """
    mro = type(obj).__mro__
    for klass in mro[mro.index(cls) + 1:]:
        if name in vars(klass):
            found = vars(klass)[name]
            if not isinstance(found, types.FunctionType):
                raise TypeError(f"srcgrad differentiates `super().{name}(...)` for plain methods only; "
                                f"{klass.__name__}.{name} is a {type(found).__name__}")
            return found
    raise AttributeError(f"'super' object has no attribute {name!r}")


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


# ---- `xs[i] = v` into a list, a dict, or what is known only when it runs ----------------
# The compiler writes `y[i] = v` into a name known to hold an array as NumPy code; into a
# preallocated list (`hs = [None] * n`), a dict (`d = OrderedDict()`) or a value whose kind
# it does not know, through these three, which do the same for each kind.

class _Absent:
    """What a dict's entry was before a write that added it: put back by deleting it."""

    __slots__ = ()

    def __repr__(self):
        return "rt.ABSENT"


ABSENT = _Absent()


def overwritten(xs, index):
    """What ``xs[index] = v`` overwrites, kept for the backward sweep to put back: an
    array's elements copied (the write changes them in place), a list's or dict's item
    itself (the write replaces it, unchanged), :data:`ABSENT` for a new dict key."""
    if isinstance(xs, dict):
        return xs.get(index, ABSENT)
    if isinstance(xs, list):
        return xs[index]
    return array_module(xs).copy(xs[index])


def restore_entry(xs, index, old):
    """Put back what ``xs[index] = v`` overwrote (:func:`overwritten`)."""
    if old is ABSENT:
        del xs[index]
    else:
        xs[index] = old


def written_entry(g, y, index, value):
    """Adjoint of ``value`` in ``y[index] = value`` where ``y``'s kind is known when the code
    runs only: an array's (:func:`written_adjoint`), or from a list's or dict's sparse adjoint
    ``g`` its entry (``defaultdict(float)``, ``[0.0] * n``), zeros where nothing reached it."""
    if hasattr(g, "shape"):
        return written_adjoint(g, index, value)
    if isinstance(y, (list, tuple)) and isinstance(index, slice):  # (`xs[1:3] = [a, b]`)
        parts = g if isinstance(g, dict) else dict(enumerate(g)) if isinstance(g, (list, tuple)) else {}
        return {i: parts[k] for i, k in enumerate(range(len(y))[index]) if parts.get(k) is not None}
    if isinstance(y, (list, tuple)) and isinstance(index, int):
        index %= len(y)
    return entry(g, index, value)


def written_entry_transposed(u, g, y, index, value):
    """Transpose of :func:`written_entry` in ``g``: ``u`` (of ``value``'s shape) put where the
    entry was read, in ``g``'s kind (an array's elements, the winners of a repeated index;
    a list's or dict's sparse ``{key: u}``)."""
    if hasattr(g, "shape"):
        xp = array_module(g)
        picked = g[index]
        spread = xp.broadcast_to(u, np.shape(picked))  # (the transpose of unbroadcast)
        out = xp.zeros(np.shape(g), np.result_type(g, u))
        if is_basic_index(index):
            out[index] = spread
            return out
        order = xp.arange(np.size(picked)).reshape(np.shape(picked))
        winner = xp.full(np.shape(g), -1)
        winner[index] = order
        xp.add.at(out, index, spread * (winner[index] == order))
        return out
    if isinstance(y, (list, tuple)) and isinstance(index, slice):
        parts = u if isinstance(u, dict) else dict(enumerate(u)) if isinstance(u, (list, tuple)) else {}
        return {k: parts[i] for i, k in enumerate(range(len(y))[index]) if parts.get(i) is not None}
    if isinstance(y, (list, tuple)) and isinstance(index, int):
        index %= len(y)
    return {index: u}


def add_each(adjoints, more):
    """Add two sequences of adjoints element by element (a list used twice); a
    sparse adjoint (``{0: g}``, from ``xs[0]``) takes the other's by index."""
    if isinstance(adjoints, dict):
        return add(adjoints, dict(enumerate(more)))
    return add(list(adjoints), list(more))


def checked_adjoint(g, x, rule, param, where=""):
    """``g``, the adjoint a user's rule ``rule`` returned for its argument ``param``
    (value ``x``), when its shape is ``x``'s (or either is not an array or number).

    Raises:
        NoDerivativeRuleError: another shape (a rule of a function that broadcasts, not
            registered ``elementwise=True``): the gradient would be wrong.
    """
    at = f"{where}: " if where else ""
    if isinstance(g, (list, tuple, dict)) and (hasattr(x, "shape") or isinstance(x, (int, float))):
        raise errors.NoDerivativeRuleError(
            f"{at}the rule for `{rule}` returned a {type(g).__name__} as the adjoint of `{param}`, an "
            f"{'array' if hasattr(x, 'shape') else 'number'}", None,
            f"return one array of `{param}`'s shape (a rule of several arguments returns a tuple "
            "of them, one per argument)")
    if g is None or not hasattr(g, "shape") or not (hasattr(x, "shape") or isinstance(x, (int, float))):
        return g
    shape = x.shape if hasattr(x, "shape") else ()
    if g.shape == shape:
        return g
    raise errors.NoDerivativeRuleError(
        f"{at}the rule for `{rule}` returned an adjoint of shape {g.shape} for `{param}`, of shape "
        f"{shape}", None,
        "return one adjoint of each argument's shape; for a function that broadcasts its "
        "arguments elementwise, register the rule with elementwise=True (srcgrad then sums "
        "each adjoint back to its argument's shape)")


def items_adjoint(g, items):
    """The adjoint of ``items``, a sequence rule's argument (``np.asarray(v)``) whose
    kind was unknown when compiling: a list of the rows of ``g`` for a list or tuple,
    else ``g`` itself (an array or a scalar)."""
    return list(g) if isinstance(items, (list, tuple)) else g


def add_items(adjoints, more, items):
    """Accumulate adjoints of ``items`` (see :func:`items_adjoint`)."""
    if isinstance(items, (list, tuple)):
        return add_each(adjoints, more if isinstance(adjoints, dict) else list(more))
    return add(adjoints, more)


def in_form_of(u, g):
    """``u``, an adjoint of one item each (a list, or sparse ``{i: a}``), in the form of
    ``g`` (a sparse adjoint, a list, the rows of an array, or a plain zero that reached no
    item): the transpose of reading ``g`` item by item (:func:`as_items`, :func:`add_each`)."""
    if isinstance(g, dict):
        return {k: item_of(u, k) for k in g}
    if isinstance(g, (list, tuple)):
        return [item_of(u, i) for i in range(len(g))]
    if hasattr(g, "ndim") and g.ndim > 0:
        return np.reshape(np.stack([entry(u, i, row) for i, row in enumerate(g)]), np.shape(g))
    return zeros_like(g)


def no_items_dot(dot, g):
    """The tangent ``dot`` of a sequence of adjoints ``g``, or, where it is constant (zero),
    a form :func:`add_each` adds as nothing: ``{}`` for a sparse ``g``, else one None per item."""
    if not is_constant(dot):
        return dot
    return {} if isinstance(g, dict) else [None] * len(g) if isinstance(g, (list, tuple)) else None


def add_item(items, index, g):
    """A new list of adjoints: ``items`` with ``g`` added to item ``index`` (the
    adjoint of ``xs[index]`` read from a list grown with append), or, for a slice
    (``xs[1:]``), each of ``g``'s parts (a list of adjoints, or sparse: ``{0: a}``) to the
    item it came from.

    Raises:
        TypeError: ``index`` is neither an integer nor a slice.
    """
    out = list(items)
    if isinstance(index, slice):
        positions = range(len(out))[index]
        parts = g.items() if isinstance(g, dict) else enumerate(g)
        for j, part in parts:
            if part is not None:
                k = positions[j]
                out[k] = part if out[k] is None else add(out[k], part)
        return out
    index = operator.index(index)
    out[index] = g if out[index] is None else add(out[index], g)
    return out


def rows_adjoint(g, like):
    """The adjoint ``g`` (an array) of a list or tuple ``like`` that NumPy read as an
    array, as a sparse adjoint of ``like`` itself: ``{i: g[i]}``, nested lists item by
    item; ``g`` itself for anything else."""
    if isinstance(like, (list, tuple)) and g is not None and (isinstance(g, (list, tuple)) or np.ndim(g) > 0):
        return {i: rows_adjoint(g[i], item) for i, item in enumerate(like)}
    return g


def as_items(g, items):
    """The adjoint ``g`` of the list ``items`` as a list of adjoints, one per item
    (``g`` may be that already, the rows of an array, a tuple, or sparse: ``{0: a}``;
    zeros where nothing reached an item)."""
    if isinstance(g, (list, tuple)) or hasattr(g, "ndim") and g.ndim > 0:
        # (a copy: the backward sweep pops it, and a list may be the caller's own)
        return list(g)  # as long as the list was where its holder was read
    return [entry(g, i, item) for i, item in enumerate(items)]


def unpop(items, index, value):
    """Undo ``value = items.pop(index)``: put ``value`` back where it was (a negative
    ``index`` counted from the end of the list before the pop)."""
    items.insert(index if index >= 0 else len(items) + 1 + index, value)


def zeros_each(items):
    """A zero adjoint for each item of a list: the adjoint of a list no later code reads."""
    return [zeros_like(v) for v in items]


def hooked(hook):
    """``hook`` as the generated code calls it: its result replaces the adjoint it is
    given; ``None`` leaves that as it is (as PyTorch's ``register_hook`` does)."""
    import functools

    @functools.wraps(hook)
    def call(g):
        # Given read-only: the adjoint may be another name's too (`a + b`: one array for
        # both), which a change in place would change with it (PyTorch: a hook "should not
        # modify its argument").
        shown = g.view() if isinstance(g, np.ndarray) else g
        if shown is not g:
            shown.flags.writeable = False
        changed = hook(shown)
        return g if changed is None or changed is shown else changed
    return call


class Unbound:
    """What a name the path taken never assigned holds in generated code (``z = rt.Unbound('z')``
    first thing, where it is bound on some paths only): any use of it raises Python's own
    ``UnboundLocalError``, as the user's function would, rather than computing with a stand-in."""

    __slots__ = ("name",)
    __array_ufunc__ = None

    def __init__(self, name):
        object.__setattr__(self, "name", name)

    def _unbound(self, *args, **kwargs):
        raise UnboundLocalError(f"cannot access local variable '{self.name}' where it is not associated "
                                "with a value")

    __array__ = __getattr__ = __iter__ = __len__ = __bool__ = __getitem__ = __call__ = _unbound
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _unbound
    __pow__ = __rpow__ = __matmul__ = __rmatmul__ = __neg__ = __lt__ = __le__ = __gt__ = __ge__ = _unbound
    __float__ = __int__ = __index__ = _unbound


def zeros_like(x):
    """A zero adjoint for ``x``: an empty sparse structure, or an array of zeros
    (``0.0`` for ``None`` or ``Unbound``: a name the path taken never assigned)."""
    if x is None or type(x) is Unbound:
        return 0.0
    return {} if tree.is_structure(x) else np.zeros_like(x)


def outputs_adjoint(parts, outputs):
    """The adjoint of a rule's tuple of ``outputs`` (``a, b = two(x)``) from the parts
    that reached its items (``(a_bar,)``, ``(None, b_bar)``): one per output, zeros
    of that output's shape and float dtype where nothing reached it."""
    if not isinstance(outputs, (tuple, list)):
        return parts
    if isinstance(parts, dict):  # sparse: from unpacking in a loop ({0: a_bar})
        parts = [parts.get(i) for i in range(len(outputs))]
    return tuple(parts[i] if i < len(parts) and parts[i] is not None
                 else zeros_like(o) for i, o in enumerate(outputs))


def unpacked_adjoint(parts, source):
    """Adjoint of ``source`` in ``a, b = source`` from ``{0: a_bar, 1: b_bar}``: that
    (sparse) for a tuple, list or dict; for an array, its rows filled in."""
    if isinstance(source, (list, tuple, dict)) or not hasattr(source, "shape"):
        return parts
    source_bar = zeros_like(source)
    for i, g in parts.items():
        source_bar[i] += g
    return source_bar


def item_of(g, key):
    """Item ``key`` of the adjoint ``g`` of a tuple, list or dict: ``g`` is sparse
    (``{0: a_bar}``, only the items something read) or a sequence; None where
    nothing reached that item (or ``g`` is a plain zero)."""
    if isinstance(g, dict):
        return g.get(key)
    if isinstance(key, str):  # a named tuple's field by name: a sequence's items are by position
        return None
    if isinstance(g, (list, tuple)) and isinstance(key, int) and not -len(g) <= key < len(g):
        return None  # a tuple adjoint that stops before the items nothing read
    return g[key] if isinstance(g, (list, tuple, np.ndarray)) else None


def item_of_transposed(u, g, key):
    """Transpose of :func:`item_of` in ``g``: ``u`` at ``key`` of a sparse adjoint
    (``{key: u}``), or of an array ``g``'s shape."""
    if isinstance(g, np.ndarray):
        return getitem_adjoint(u, g, key)
    return {key: u}


def entry(g, key, like):
    """:func:`item_of`, with zeros shaped like ``like`` where nothing reached the item."""
    part = item_of(g, key)
    return zeros_like(like) if part is None else part


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


def trace_adjoint(ans_bar, a, offset=0, axis1=0, axis2=1):
    """Adjoint of ``np.trace``: ``ans_bar`` on the diagonal ``offset``, 0 elsewhere."""
    shape = np.shape(a)
    ndim = len(shape)
    axis1, axis2 = axis1 % ndim, axis2 % ndim
    eye = array_module(ans_bar).eye(shape[axis1], shape[axis2], k=offset, dtype=np.result_type(ans_bar, 1.0))
    if axis1 > axis2:
        eye = eye.T
    eye = np.reshape(eye, [shape[d] if d in (axis1, axis2) else 1 for d in range(ndim)])
    return np.expand_dims(ans_bar, (min(axis1, axis2), max(axis1, axis2))) * eye


def diag_adjoint(ans_bar, v, k=0):
    """Adjoint of ``np.diag(v, k)``: of a vector (a matrix built), the diagonal
    ``k`` read back; of a matrix (its diagonal read), scattered onto it."""
    if np.ndim(v) == 1:
        return np.diagonal(ans_bar, k).copy()
    bar = array_module(ans_bar).zeros(np.shape(v), dtype=np.result_type(ans_bar, 1.0))
    n = np.shape(ans_bar)[0]
    rows = np.arange(n) + max(-k, 0)
    bar[rows, rows + k] = ans_bar
    return bar


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


def gathered(u, where):
    """``u``'s elements at ``where`` (0 at ``-1``): the transpose of :func:`gather_adjoint`."""
    xp = array_module(u)
    flat = xp.ravel(u)
    return xp.where(where >= 0, flat[where], 0) if np.size(flat) else xp.zeros(np.shape(where), u.dtype)


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


def kron_adjoint(g, a, b, which):
    """Adjoint of ``np.kron(a, b)`` for ``a`` (``which=0``) or ``b``: with both shapes padded
    to one rank ``d``, ``g`` reshaped to ``(a0, b0, a1, b1, ...)`` holds ``a[i] b[j]`` at
    ``(i0, j0, i1, j1, ...)``, so each factor's adjoint sums ``g`` times the other over its axes.
    (The shapes are interleaved by ``np.stack``, which forward mode follows: second derivatives.)"""
    d = max(np.ndim(a), np.ndim(b))
    sa = np.array((1,) * (d - np.ndim(a)) + np.shape(a), dtype=int)
    sb = np.array((1,) * (d - np.ndim(b)) + np.shape(b), dtype=int)
    ones = np.ones(d, dtype=int)
    g = np.reshape(g, np.ravel(np.stack([sa, sb], axis=1)))
    if which == 0:
        other = np.reshape(b, np.ravel(np.stack([ones, sb], axis=1)))
        return np.reshape(np.sum(g * other, axis=tuple(range(1, 2 * d, 2))), np.shape(a))
    other = np.reshape(a, np.ravel(np.stack([sa, ones], axis=1)))
    return np.reshape(np.sum(g * other, axis=tuple(range(0, 2 * d, 2))), np.shape(b))


def inner_adjoint(g, a, b, which):
    """Adjoint of ``np.inner(a, b)`` (a sum over the last axes; a product when one is a
    scalar) for ``a`` (``which=0``) or ``b``."""
    if np.ndim(a) == 0 or np.ndim(b) == 0:
        other, this = (b, a) if which == 0 else (a, b)
        return unbroadcast(g * other, this)
    na, nb = np.ndim(a), np.ndim(b)
    if which == 0:  # g: a.shape[:-1] + b.shape[:-1]; sum over b's leading axes
        return np.tensordot(g, b, axes=(list(range(na - 1, na + nb - 2)), list(range(nb - 1))))
    return np.tensordot(g, a, axes=(list(range(na - 1)), list(range(na - 1))))


def split_adjoint(ans_bar, ary, indices_or_sections, axis, how):
    """Adjoint of ``np.split`` / ``array_split`` / ``hsplit`` / ``vsplit`` / ``dsplit`` (``how``):
    the pieces' adjoints joined again, zeros for a piece nothing read."""
    pieces = getattr(np, how)(positions(ary), indices_or_sections, **({} if how[0] in "hvd" else {"axis": axis}))
    parts = [item_of(ans_bar, i) for i in range(len(pieces))]
    xp = array_module(ary)
    dtype = np.result_type(*[p for p in parts if p is not None], 1.0)
    flat = [xp.zeros(np.size(w), dtype) if p is None else xp.ravel(p) for p, w in zip(parts, pieces)]
    return gather_adjoint(xp.concatenate(flat), ary, xp.concatenate([xp.ravel(w) for w in pieces]))


def item(x):
    """``x.item()``: the one element of an array of size 1 (any shape) as a Python number."""
    return x.item() if hasattr(x, "item") else x


def array_attribute(value, name: str, where: str):
    """``value.ndim``, ``.shape``, ``.size`` or ``.dtype`` of a value whose kind is known only when
    the code runs: an array's (ints, a tuple of ints, a dtype) have no derivative, and the code
    was compiled so.  Another object's attribute of that name holding a float could carry one.

    Raises:
        srcgrad.errors.UnsupportedSyntaxError: the attribute holds a float, or floats.
    """
    found = getattr(value, name)
    kind = getattr(getattr(found, "dtype", None), "kind", None) if not isinstance(found, np.dtype) else "V"
    parts = found if isinstance(found, tuple) else (found,)
    if kind in ("f", "c") or any(isinstance(p, (float, complex)) for p in parts):
        raise errors.UnsupportedSyntaxError(
            f"`.{name}` of this {type(value).__name__} holds a float (at {where}): srcgrad reads `.ndim`, "
            "`.shape`, `.size` and `.dtype` of a value whose kind it knows only when the code runs as an "
            "array's, which have no derivative", None,
            f"give the attribute another name, or read `{name}` from an object passed in as an argument")
    return found


# ---- forward mode (tangents) ------------------------------------------------
def broadcast_tangent(t, ans):
    """A tangent with its output's shape: an elementwise function whose varying inputs
    are smaller than its output (``x + b`` with only ``b`` varying) gives a tangent of
    their shape, which broadcasting spreads over the output (a new, writable array)."""
    shape = np.shape(ans)
    if np.shape(t) == shape:
        return t
    module = array_module(t)
    return module.array(module.broadcast_to(t, shape))


def reduction_tangent(g, a_dot, axis=None, keepdims=False):
    """``J a_dot`` of a reduction along ``axis`` from its gradient ``g`` (the adjoint of
    ones): each output element depends on its own slice only, so its tangent is the
    sum over that slice of gradient times tangent.  An element the reduction leaves out
    (``g`` zero there: a NaN of ``nansum``, not the maximum of ``max``) adds nothing, even
    where its tangent is not finite (``0 * nan``), as in reverse mode, whose adjoint stops there."""
    return np.sum(_skipping(g, a_dot), axis=axis, keepdims=keepdims)


def _skipping(g, a_dot):
    """``g * a_dot``, zero where ``g`` is zero."""
    return array_module(g).where(g == 0, 0.0, g * a_dot)


def cast_tangent(t, ans, lead=()):
    """``t`` in ``ans``'s floating dtype, or zeros where ``ans`` is an integer or
    boolean value (a cast to int, an integer ``dtype=``): rounded values have zero
    derivative.  ``lead``: the shape of ``t``'s leading column axes (batched, ``(1,)``)."""
    dtype = getattr(ans, "dtype", None)
    if dtype is None:
        if isinstance(ans, dict) and isinstance(t, dict):  # getitem_adjoint's sparse {index: adjoint}
            return {key: cast_tangent(t[key], value) for key, value in ans.items()}
        if isinstance(ans, (list, tuple)) and isinstance(t, (list, tuple)) and len(t) == len(ans):
            return type(ans)(cast_tangent(ti, a) for ti, a in zip(t, ans))
        return t if isinstance(ans, (float, complex)) else 0.0 * t
    if dtype.kind in "fc":
        return t if getattr(t, "dtype", None) == dtype else array_module(t).asarray(t, dtype=dtype)
    return array_module(t).zeros(lead + np.shape(ans), dtype=np.result_type(t, 1.0))


def sorted_like(t, a, axis=-1):
    """``t`` reordered as ``np.sort`` reorders ``a`` (ties in ``argsort``'s stable order,
    as ``sort_adjoint``)."""
    if axis is None:
        return np.ravel(t)[np.argsort(np.ravel(a), kind="stable")]
    return np.take_along_axis(t, np.argsort(a, axis=axis, kind="stable"), axis=axis)


def zeros_tangent(x):
    """The tangent of a value that does not (yet) depend on the inputs: zeros of its
    shape in a floating dtype (an integer array written with a varying value later
    still has a zero tangent there, ``cast_tangent``), a structure of them, ``0.0``
    for ``None`` (a name the path taken never assigned) and for Python numbers."""
    if x is None or isinstance(x, (int, float, bool)):
        return 0.0
    if tree.is_structure(x):
        _, leaves, spec = tree.flatten(x, tree.TANGENTS)
        return tree.unflatten(spec, [zeros_tangent(leaf) for leaf in leaves])
    dtype = getattr(x, "dtype", None)
    if dtype is None:
        return 0.0
    if dtype.kind == "O":  # an array of objects (arrays written into it): one of their tangents
        return np.array([zeros_tangent(v) for v in x.ravel()] + [None], dtype=object)[:-1].reshape(x.shape)
    module = array_module(x)
    return module.zeros(np.shape(x), dtype=dtype if dtype.kind in "fc" else np.float64)


def own_tangent(t):
    """A copy of a tangent array (scalars as they are): where the primal made a new array
    and the tangent is another name's, a later write into one must not reach the other."""
    return array_module(t).array(t) if hasattr(t, "ndim") and np.ndim(t) > 0 else t


def written_tangent(v_dot, y):
    """What ``y_dot[i] = v_dot`` stores: ``v_dot``, or zeros where ``y`` is an integer or
    boolean array (the written values are rounded: zero derivative)."""
    dtype = getattr(y, "dtype", None)
    return v_dot if dtype is None or dtype.kind in "fcO" else 0.0 * v_dot


def array_operand(value, where: str):
    """Forward mode's check, when it runs, that an operand whose kind was unknown when
    compiling (what a function of yours returned) is an array or a number: an object's
    own operator (``__mul__``) has no tangent rule there."""
    if isinstance(value, (np.ndarray, np.generic, float, int)) or hasattr(value, "__cuda_array_interface__"):
        return value
    raise errors.UnsupportedSyntaxError(
        f"forward mode met a {type(value).__name__} as an operand at {where}: an operator of a class of "
        "yours, which it does not differentiate yet", None,
        "use srcgrad.vjp, or call NumPy on the arrays the object holds")


class Cells:
    """A closure's variables as attributes, each read from its cell when the code reads
    it (``outer.G``): a call may rebind it (``nonlocal G``) while the code runs."""

    __slots__ = ("_cells",)

    def __init__(self, cells: dict):
        self._cells = cells

    def __getattr__(self, name):
        try:
            return self._cells[name].cell_contents
        except (KeyError, ValueError):
            # (AttributeError, as a module's: `getattr(scope, name, default)` expects it)
            raise AttributeError(f"free variable {name!r} referenced before assignment") from None


class Globals:
    """The globals of code made by ``exec`` (no module holds them) as attributes, read
    when the code reads them (``module.G``), as a module's are."""

    __slots__ = ("_globals",)

    def __init__(self, globals_: dict):
        self._globals = globals_

    def __getattr__(self, name):
        try:
            return self._globals[name]
        except KeyError:
            raise AttributeError(f"name {name!r} is not defined") from None


_GLOBALS_SCOPES: dict = {}  # id(globals) -> (globals, its Globals): one view per dict


def scope_of_globals(globals_: dict) -> Globals:
    """The one :class:`Globals` of this dict (code inlined from the same globals shares it)."""
    held = _GLOBALS_SCOPES.get(id(globals_))
    if held is None or held[0] is not globals_:
        held = _GLOBALS_SCOPES[id(globals_)] = (globals_, Globals(globals_))
    return held[1]


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


# ---- linear algebra: adjoints and tangents of np.linalg (stacked matrices throughout) ----
def _mT(a):
    return np.swapaxes(a, -1, -2)


def _diag_embed(d):
    return d[..., :, None] * np.eye(d.shape[-1], dtype=d.dtype)


def _or_zeros(g, like):
    return zeros_like(like) if g is None else g


def from_triangle(g, upper=False):
    """Adjoint of reading a symmetric matrix from one triangle of ``a`` (``eigh``,
    ``cholesky``): ``S = tril(a) + tril(a, -1)^T``, so ``a_bar = tril(G) + tril(G^T, -1)``
    for ``G`` the adjoint of ``S``; with ``upper``, the upper triangle."""
    if upper:
        return np.triu(g) + np.triu(_mT(g), 1)
    return np.tril(g) + np.tril(_mT(g), -1)


def to_symmetric(a_dot, upper=False):
    """The tangent of the symmetric matrix read from one triangle of ``a``."""
    if upper:
        return np.triu(a_dot) + _mT(np.triu(a_dot, 1))
    return np.tril(a_dot) + _mT(np.tril(a_dot, -1))


def inverse_gaps(w, what, refuse=True):
    """``F[..., i, j] = 1 / (w_j - w_i)`` off the diagonal, 0 on it (Giles 2008, §3.1).

    A repeated value (an exact tie) leaves the vectors of its eigenspace without a
    derivative: raised as NoDerivativeRuleError (``refuse``), else NaN there (tangents).
    """
    gaps = w[..., None, :] - w[..., :, None]
    off = ~np.eye(w.shape[-1], dtype=bool)
    tied = (gaps == 0) & off
    if refuse and np.any(tied):
        raise errors.NoDerivativeRuleError(
            f"the {what} of a matrix with a repeated value have no derivative (they are any basis "
            "of its eigenspace)", None,
            f"differentiate only functions of the values, or of the {what} of a matrix whose values are distinct")
    safe = np.where(tied | ~off, 1, gaps)
    return np.where(off, np.where(tied, np.nan, 1 / safe), 0).astype(w.dtype)


def solve_adjoint(ans_bar, ans, a, b, which):
    """``x = A^-1 b``: ``b_bar = A^-T x_bar`` (``which`` 1), ``A_bar = -b_bar x^T`` (``which`` 0)
    (Giles 2008, §2.3); a 1-D ``b`` is one vector for every stacked matrix (NumPy 2), summed back."""
    vector = np.ndim(b) == 1
    x, g = (ans[..., None], ans_bar[..., None]) if vector else (ans, ans_bar)
    b_bar = np.linalg.solve(_mT(a), g)
    if which == 0:
        return unbroadcast(-b_bar @ _mT(x), a)
    return unbroadcast(b_bar[..., 0] if vector else b_bar, b)


def solve_tangent(ans, a, b, a_dot=None, b_dot=None):
    """``dx = A^-1 (db - dA x)``."""
    vector = np.ndim(b) == 1
    x = ans[..., None] if vector else ans
    rhs = 0 if b_dot is None else (b_dot[..., None] if vector else b_dot)
    if a_dot is not None:
        rhs = rhs - a_dot @ x
    rhs = np.broadcast_to(rhs, x.shape)
    out = np.linalg.solve(a, rhs)
    return out[..., 0] if vector else out


def logdet_adjoint(g, a):
    """``d log|det A| = tr(A^-1 dA)``: ``A_bar = g A^-T`` (Giles 2008, §2.2)."""
    return g[..., None, None] * _mT(np.linalg.inv(a))


def logdet_tangent(a, a_dot):
    return np.trace(np.linalg.solve(a, a_dot), axis1=-2, axis2=-1)


def slogdet_adjoint(ans_bar, a):
    """The sign is piecewise constant: only ``logabsdet``'s adjoint reaches ``a``."""
    g = item_of(ans_bar, 1)
    return zeros_like(a) if g is None else logdet_adjoint(np.asarray(g, a.dtype), a)


def cholesky_adjoint(ans_bar, ans, a, upper=False):
    """``dL = L Phi(L^-1 dS L^-T)`` (``Phi``: the lower triangle, diagonal halved), so
    ``S_bar = L^-T Phi(L^T L_bar) L^-1`` (Murray 2016, "Differentiation of the Cholesky
    decomposition", §3), read back into the triangle NumPy reads."""
    low, g = (_mT(ans), _mT(ans_bar)) if upper else (ans, ans_bar)
    inv = np.linalg.inv(low)
    p = _mT(low) @ g
    phi = np.tril(p) - 0.5 * _diag_embed(np.diagonal(p, axis1=-2, axis2=-1))
    return from_triangle(_mT(inv) @ phi @ inv, upper)


def cholesky_tangent(ans, a, upper=False, a_dot=None):
    low = _mT(ans) if upper else ans
    inv = np.linalg.inv(low)
    p = inv @ to_symmetric(a_dot, upper) @ _mT(inv)
    dl = low @ (np.tril(p) - 0.5 * _diag_embed(np.diagonal(p, axis1=-2, axis2=-1)))
    return _mT(dl) if upper else dl


def eigh_adjoint(ans_bar, ans, a, UPLO="L"):  # noqa: N803 - NumPy's name
    """``A = V diag(w) V^T``: ``S_bar = V (diag(w_bar) + F o (V^T V_bar)) V^T``, ``F_ij =
    1 / (w_j - w_i)`` (Giles 2008, §3.1), read back into the triangle ``UPLO`` names.
    Eigenvectors' adjoints need distinct eigenvalues: a tie is refused (``inverse_gaps``)."""
    w, v = ans
    w_bar, v_bar = item_of(ans_bar, 0), item_of(ans_bar, 1)
    inner = _diag_embed(_or_zeros(w_bar, w).astype(w.dtype))
    if v_bar is not None:
        inner = inner + inverse_gaps(w, "eigenvectors") * (_mT(v) @ v_bar)
    return from_triangle(v @ inner @ _mT(v), UPLO == "U")


def eigh_tangent(ans, a, UPLO="L", a_dot=None):  # noqa: N803
    """``dw = diag(V^T dS V)``, ``dV = V (F o (V^T dS V))``; NaN for the eigenvectors of a tie."""
    w, v = ans
    m = _mT(v) @ to_symmetric(a_dot, UPLO == "U") @ v
    return np.diagonal(m, axis1=-2, axis2=-1), v @ (inverse_gaps(w, "eigenvectors", refuse=False) * m)


def _svd_reduced(ans, a, full_matrices, compute_uv):
    """(U, s, Vh) of the reduced SVD, and ``k = min(m, n)``."""
    m, n = a.shape[-2:]
    k = min(m, n)
    if not compute_uv:
        u, s, vh = np.linalg.svd(a, full_matrices=False)
        return u, s, vh, k
    u, s, vh = ans
    return u[..., :k], s, vh[..., :k, :], k


def svd_values_adjoint(s_bar, a):
    """``A_bar = U diag(s_bar) V^T`` (Giles 2008, §3.3), for ``svd(a, compute_uv=False)``: a
    helper of its own, which forward mode follows (second derivatives: through ``svd``'s
    tangent, Townsend 2016)."""
    u, _, vh = np.linalg.svd(a, full_matrices=False)
    return u @ (s_bar[..., :, None] * vh)


def svd_adjoint(ans_bar, ans, a, full_matrices=True, compute_uv=True):
    """Townsend 2016, "Differentiating the singular value decomposition", eq. 30:
    ``A_bar = U [diag(s_bar) + (F o (U^T U_bar - U_bar^T U)) S + S (F o (V^T V_bar - V_bar^T V))] V^T
    + (I - U U^T) U_bar S^-1 V^T + U S^-1 V_bar^T (I - V V^T)``, ``F_ij = 1 / (s_j^2 - s_i^2)``.
    The singular vectors' adjoints need distinct (and, beyond a square matrix's, nonzero)
    singular values; ``full_matrices=True`` columns of ``U`` (rows of ``Vh``) beyond
    ``min(m, n)`` are any basis of a complement and have none: refused when read."""
    if not compute_uv:
        return svd_values_adjoint(ans_bar, a)
    u, s, vh, k = _svd_reduced(ans, a, full_matrices, compute_uv)
    u_bar, s_bar, vh_bar = item_of(ans_bar, 0), item_of(ans_bar, 1), item_of(ans_bar, 2)
    if (u_bar is not None and np.any(u_bar[..., k:])) or (vh_bar is not None and np.any(vh_bar[..., k:, :])):
        raise errors.NoDerivativeRuleError(
            "the columns of U (rows of Vh) of `np.linalg.svd` beyond min(m, n), with full_matrices=True, "
            "have no derivative: they are any orthonormal basis of a complement", None,
            "pass full_matrices=False, or read only the first min(m, n) columns of U and rows of Vh")
    inner = _diag_embed(_or_zeros(s_bar, s).astype(s.dtype))
    if u_bar is None and vh_bar is None:
        return u @ inner @ vh
    m, n = a.shape[-2:]
    if (m != n) and np.any(s == 0):
        raise errors.NoDerivativeRuleError(
            "the singular vectors of a rank-deficient non-square matrix have no derivative", None,
            "differentiate only functions of the singular values")
    f = inverse_gaps(s * s, "singular vectors")
    out = 0
    if u_bar is not None:
        u_bar = u_bar[..., :k]
        j = _mT(u) @ u_bar
        inner = inner + f * (j - _mT(j)) * s[..., None, :]
        if m > k:
            out = ((u_bar - u @ j) / s[..., None, :]) @ vh
    if vh_bar is not None:
        vh_bar = vh_bar[..., :k, :]
        j = vh @ _mT(vh_bar)  # V^T V_bar
        inner = inner + s[..., :, None] * (f * (j - _mT(j)))
        if n > k:
            out = out + (u / s[..., None, :]) @ (vh_bar - (vh_bar @ _mT(vh)) @ vh)
    return u @ inner @ vh + out


def svd_tangent(ans, a, full_matrices=True, compute_uv=True, a_dot=None):
    """``dP = U^T dA V``: ``ds = diag(dP)``, ``dU = U (F o (dP S + S dP^T)) + (I - U U^T) dA V S^-1``,
    ``dV = V (F o (S dP + dP^T S)) + (I - V V^T) dA^T U S^-1`` (Townsend 2016); NaN where
    undefined (ties; the complement's columns with ``full_matrices=True``)."""
    u, s, vh, k = _svd_reduced(ans, a, full_matrices, compute_uv)
    v = _mT(vh)
    dp = _mT(u) @ a_dot @ v
    ds = np.diagonal(dp, axis1=-2, axis2=-1)
    if not compute_uv:
        return ds
    f = inverse_gaps(s * s, "singular vectors", refuse=False)
    du = u @ (f * (dp * s[..., None, :] + s[..., :, None] * _mT(dp)))
    dv = v @ (f * (s[..., :, None] * dp + _mT(dp) * s[..., None, :]))
    m, n = a.shape[-2:]
    if m > k:
        du = du + (a_dot @ v - u @ dp) / s[..., None, :]
    if n > k:
        dv = dv + (_mT(a_dot) @ u - v @ _mT(dp)) / s[..., None, :]
    if full_matrices and m != n:
        nan = np.full(ans[0].shape[:-1] + (ans[0].shape[-1] - k,), np.nan, du.dtype)
        du = np.concatenate([du, nan], axis=-1)
        nan = np.full(ans[2].shape[:-2] + (ans[2].shape[-2] - k, n), np.nan, du.dtype)
        dv = np.concatenate([dv, _mT(nan)], axis=-1)
    return du, ds, _mT(dv)


def _copyltu(m):
    return np.tril(m) + _mT(np.tril(m, -1))


def _qr_square_adjoint(q, r, q_bar, r_bar):
    """``m >= n``: ``A_bar = (Q_bar + Q copyltu(M)) R^-T``, ``M = R R_bar^T - Q_bar^T Q``
    (Walter & Lehmann 2018, "Algorithmic differentiation of linear algebra functions
    with application in optimum experimental design", §3.4; Seeger et al. 2017)."""
    m = r @ _mT(r_bar) - _mT(q_bar) @ q
    b = q_bar + q @ _copyltu(m)
    return _mT(np.linalg.solve(r, _mT(b)))


def qr_adjoint(ans_bar, ans, a, mode="reduced"):
    """``mode='reduced'`` (``Q, R``) or ``'r'`` (``R``).  A wide ``A = [X | Y]`` has
    ``R = [U | Q^T Y]`` with ``Q, U = qr(X)`` (Roberts et al. / Liao et al. 2019, §B):
    ``Y_bar = Q V_bar``, and ``X``'s adjoint is the square one with ``Q_bar + Y V_bar^T``."""
    if mode == "r":
        return qr_r_adjoint(ans_bar, a)
    q, r = ans
    return _qr_adjoint(q, r, _or_zeros(item_of(ans_bar, 0), q), _or_zeros(item_of(ans_bar, 1), r), a)


def qr_r_adjoint(r_bar, a):
    """:func:`qr_adjoint` of ``mode='r'`` (``Q`` computed again, its adjoint zero): a helper of
    its own, which forward mode follows (second derivatives)."""
    q, r = np.linalg.qr(a)
    return _qr_adjoint(q, r, zeros_like(q), r_bar, a)


def _qr_adjoint(q, r, q_bar, r_bar, a):
    m, n = a.shape[-2:]
    if m >= n:
        return _qr_square_adjoint(q, r, q_bar, r_bar)
    y, v_bar = a[..., m:], r_bar[..., m:]
    x_bar = _qr_square_adjoint(q, r[..., :m], q_bar + y @ _mT(v_bar), r_bar[..., :m])
    return np.concatenate([x_bar, q @ v_bar], axis=-1)


def _qr_square_tangent(q, r, a_dot):
    """``C = Q^T dA R^-1``, ``Omega = tril(C, -1) - tril(C, -1)^T``: ``dR = (C - Omega) R``,
    ``dQ = dA R^-1 - Q (C - Omega)`` (Walter & Lehmann 2018)."""
    ar = _mT(np.linalg.solve(_mT(r), _mT(a_dot)))
    c = _mT(q) @ ar
    low = np.tril(c, -1)
    upper = c - low + _mT(low)
    return ar - q @ upper, upper @ r


def qr_tangent(ans, a, mode="reduced", a_dot=None):
    q, r = np.linalg.qr(a) if mode == "r" else ans
    m, n = a.shape[-2:]
    if m >= n:
        dq, dr = _qr_square_tangent(q, r, a_dot)
    else:
        dq, du = _qr_square_tangent(q, r[..., :m], a_dot[..., :m])
        dr = np.concatenate([du, _mT(dq) @ a[..., m:] + _mT(q) @ a_dot[..., m:]], axis=-1)
    return dr if mode == "r" else (dq, dr)


def _full_rank(a):
    if np.any(np.linalg.matrix_rank(a) < min(a.shape[-2:])):
        raise errors.NoDerivativeRuleError(
            "`np.linalg.pinv` of a rank-deficient matrix has no derivative (it jumps where the rank changes)",
            None, "regularise: `np.linalg.solve(a.T @ a + lam * np.eye(n), a.T)`")


def pinv_adjoint(ans_bar, ans, a):
    """``dX = -X dA X + X X^T dA^T (I - A X) + (I - X A) dA^T X^T X`` for ``X = A^+`` of
    full rank (Golub & Pereyra 1973, Thm 4.3), transposed:
    ``A_bar = -X^T G X^T + (I - A X) G^T X X^T + X^T X G^T (I - X A)``."""
    _full_rank(a)
    x, g = ans, ans_bar
    out = -_mT(x) @ g @ _mT(x)
    gt = _mT(g)
    out = out + (gt - a @ (x @ gt)) @ (x @ _mT(x)) + (_mT(x) @ x) @ (gt - (gt @ x) @ a)
    return out


def pinv_tangent(ans, a, a_dot):
    _full_rank(a)
    x, dt = ans, _mT(a_dot)
    return -x @ a_dot @ x + (x @ _mT(x)) @ (dt - (dt @ a) @ x) + (dt - x @ (a @ dt)) @ (_mT(x) @ x)


def _powers(a, n):
    powers = [np.broadcast_to(np.eye(a.shape[-1], dtype=a.dtype), a.shape)]
    for _ in range(n - 1):
        powers.append(powers[-1] @ a)
    return powers


def matrix_power_adjoint(g, a, n):
    """``d(A^n) = sum_k A^k dA A^(n-1-k)``, transposed term by term; a negative ``n`` is
    the power of ``B = A^-1``, whose adjoint is ``-B^T B_bar B^T`` (Giles 2008, §2.2)."""
    if n < 0:
        b = np.linalg.inv(a)
        return -_mT(b) @ matrix_power_adjoint(g, b, -n) @ _mT(b)
    if n == 0:
        return zeros_like(a)
    p = [_mT(x) for x in _powers(a, n)]
    return sum(p[k] @ g @ p[n - 1 - k] for k in range(n))


def matrix_power_tangent(ans, a, n, a_dot=None):
    if n < 0:
        b = np.linalg.inv(a)
        return matrix_power_tangent(ans, b, -n, -b @ a_dot @ b)
    if n == 0:
        return np.zeros_like(ans)
    p = _powers(a, n)
    return sum(p[k] @ a_dot @ p[n - 1 - k] for k in range(n))


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


def quantile_tangent(a_dot, a, q, axis=None, keepdims=False):
    """Tangent of ``np.quantile`` (``method='linear'``): the same interpolation of ``a_dot``'s
    elements that sit, in ``a``, at the order statistics read."""
    weights, axes = _quantile_weights(a, q, axis)
    lead = np.ndim(q)
    return np.sum(weights * a_dot, axis=tuple(lead + ax for ax in axes), keepdims=keepdims)


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


def _cov_rows(m, rowvar):
    """The variables as rows, as ``np.cov`` reads ``m``; whether that transposed it."""
    x = np.atleast_2d(m)
    flipped = not rowvar and x.shape[0] != 1
    return (x.T if flipped else x), flipped


def _cov_count(n, bias, ddof):
    return n - (ddof if ddof is not None else 0 if bias else 1)


def cov_adjoint(ans_bar, m, rowvar=True, bias=False, ddof=None):
    """Adjoint of ``np.cov``: ``C = X_c X_c^T / (N - ddof)`` with ``X_c = X (I - 11^T / N)``, so
    ``X_bar = (G + G^T) X_c / (N - ddof)`` (the centring projection leaves ``X_c`` as it is;
    Giles 2008, §2.2's product rule)."""
    x, flipped = _cov_rows(m, rowvar)
    centred = x - np.mean(x, axis=1, keepdims=True)
    g = np.reshape(ans_bar, (x.shape[0], x.shape[0]))
    bar = (g + g.T) @ centred / _cov_count(x.shape[1], bias, ddof)
    # (np.cov computes in float64 at least: the adjoint in m's floating dtype)
    return np.reshape(bar.T if flipped else bar, np.shape(m)).astype(np.result_type(np.asarray(m), np.float32))


def cov_tangent(m_dot, m, rowvar=True, bias=False, ddof=None):
    x, _ = _cov_rows(m, rowvar)
    x_dot, _ = _cov_rows(m_dot, rowvar)
    centred = x - np.mean(x, axis=1, keepdims=True)
    centred_dot = x_dot - np.mean(x_dot, axis=1, keepdims=True)
    product = centred_dot @ centred.T
    return np.squeeze((product + product.T) / _cov_count(x.shape[1], bias, ddof))


def corrcoef_adjoint(ans_bar, ans, m, rowvar=True):
    """Adjoint of ``np.corrcoef``: ``R_ij = C_ij / (s_i s_j)``, ``s = sqrt(diag C)``, so
    ``C_bar = G / (s s^T) - diag((rowsum(G o R) + colsum(G o R)) / (2 diag C))``, then
    ``np.cov``'s adjoint (NumPy's clipping of ``R`` to [-1, 1] is not differentiated)."""
    c = np.atleast_2d(np.cov(m, rowvar=rowvar))
    d = np.diagonal(c)
    r = np.reshape(ans, np.shape(c))
    g = np.reshape(ans_bar, np.shape(c))
    s = np.sqrt(d)
    weighted = g * r
    c_bar = g / np.outer(s, s) - np.diag((np.sum(weighted, axis=0) + np.sum(weighted, axis=1)) / (2 * d))
    return cov_adjoint(c_bar, m, rowvar)


def corrcoef_tangent(m_dot, ans, m, rowvar=True):
    c = np.atleast_2d(np.cov(m, rowvar=rowvar))
    c_dot = np.reshape(cov_tangent(m_dot, m, rowvar), np.shape(c))
    d = np.diagonal(c)
    r = np.reshape(ans, np.shape(c))
    half = np.diagonal(c_dot) / (2 * d)
    return np.reshape(c_dot / np.sqrt(np.outer(d, d)) - r * (half[:, None] + half[None, :]), np.shape(ans))


def multi_dot_adjoint(ans_bar, arrays):
    """Adjoint of ``np.linalg.multi_dot``: ``A_k_bar = (A_0 ... A_{k-1})^T G (A_{k+1} ... A_n)^T``,
    the first (last) array taken as a row (column) when it is a vector (Giles 2008, §2.2)."""
    mats = [np.reshape(arrays[0], (1, -1)) if np.ndim(arrays[0]) == 1 else arrays[0]]
    mats += list(arrays[1:-1])
    mats.append(np.reshape(arrays[-1], (-1, 1)) if np.ndim(arrays[-1]) == 1 else arrays[-1])
    g = np.reshape(ans_bar, (mats[0].shape[0], mats[-1].shape[1]))
    lefts, acc = [], g  # (A_0 ... A_{k-1})^T G
    for mat in mats:
        lefts, acc = lefts + [acc], mat.T @ acc
    rights, acc = [], np.eye(mats[-1].shape[1], dtype=g.dtype)  # A_{k+1} ... A_n
    for mat in mats[::-1]:
        rights, acc = [acc] + rights, mat @ acc
    return [np.reshape(left @ right.T, np.shape(array)) for left, right, array in zip(lefts, rights, arrays)]


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


def nanvar_adjoint(ans_bar, a, axis=None, ddof=0, keepdims=False):
    """Adjoint of ``np.nanvar``: ``2 (a - nanmean) / (count - ddof)`` over the elements that are
    not NaN (as ``np.var``'s), 0 at NaNs."""
    kept = ~np.isnan(a)
    centred = np.where(kept, a - np.nanmean(a, axis=axis, keepdims=True), 0)
    scale = (2.0 / (np.sum(kept, axis=axis, keepdims=True) - ddof)).astype(centred.dtype)
    return broadcast_reduced(ans_bar, a, axis, keepdims) * centred * scale


@static
def rollaxis_destination(ndim, axis, start=0):
    """Where ``np.rollaxis(a, axis, start)`` puts ``axis`` (NumPy's own normalisation)."""
    axis = axis % ndim
    start = start + ndim if start < 0 else start
    return start - 1 if axis < start else start


def _lstsq_full_rank(a):
    if np.linalg.matrix_rank(a) < min(np.shape(a)):
        raise errors.NoDerivativeRuleError(
            "`np.linalg.lstsq` of a rank-deficient matrix has no derivative (its solution jumps where "
            "the rank changes)", None, "regularise: `np.linalg.solve(a.T @ a + lam * np.eye(n), a.T @ b)`")


def lstsq_adjoint(ans_bar, ans, a, b, which):
    """Adjoint of ``np.linalg.lstsq`` of a full-rank ``a`` (a rank-deficient one is refused here),
    in ``a`` (``which == 0``) or ``b``.  ``x = A^+ b``: through ``pinv``'s adjoint (Golub &
    Pereyra 1973) with ``A^+_bar = x_bar b^T``, and ``b_bar = A^+^T x_bar``; the residuals
    ``|b - A x|^2`` (tall ``a``, where ``A^T r = 0``): ``b_bar = 2 r``, ``A_bar = -2 r x^T``; the
    singular values: ``U diag(s_bar) V^T`` (Townsend 2016); the rank: none."""
    _lstsq_full_rank(a)
    x, residuals = ans[0], ans[1]
    x_bar, residuals_bar, s_bar = item_of(ans_bar, 0), item_of(ans_bar, 1), item_of(ans_bar, 3)
    b2 = np.reshape(b, (np.shape(b)[0], -1))
    x2 = np.reshape(x, (np.shape(x)[0], -1))
    out = np.zeros(np.shape(a) if which == 0 else np.shape(b2), dtype=np.result_type(a, b, np.float32))
    if x_bar is not None:
        pinv = np.linalg.pinv(a)
        x_bar2 = np.reshape(x_bar, np.shape(x2))
        out = out + (pinv_adjoint(x_bar2 @ b2.T, pinv, a) if which == 0 else pinv.T @ x_bar2)
    if residuals_bar is not None and np.size(residuals) > 0:
        r2 = 2 * (b2 - a @ x2) * residuals_bar
        out = out + (-(r2 @ x2.T) if which == 0 else r2)
    if s_bar is not None and which == 0:
        u, _, vh = np.linalg.svd(a, full_matrices=False)
        out = out + (u * s_bar) @ vh
    return out if which == 0 else np.reshape(out, np.shape(b))


def lstsq_tangent(ans, a, b, a_dot=None, b_dot=None):
    """Tangent of ``np.linalg.lstsq`` (full rank): ``x_dot = A^+_dot b + A^+ b_dot``, the
    residuals' ``2 sum(r (b_dot - A_dot x))``, ``s_dot = diag(U^T A_dot V)``, the rank's 0."""
    _lstsq_full_rank(a)
    x, residuals, rank, s = ans
    a_dot = np.zeros_like(a) if a_dot is None else a_dot
    b_dot = np.zeros(np.shape(b), dtype=np.result_type(a_dot, 1.0)) if b_dot is None else b_dot
    pinv = np.linalg.pinv(a)
    x_dot = pinv_tangent(pinv, a, a_dot) @ b + pinv @ b_dot
    residuals_dot = np.zeros_like(residuals)
    if np.size(residuals) > 0:
        residuals_dot = np.reshape(np.sum(2 * (b - a @ x) * (b_dot - a_dot @ x), axis=0), np.shape(residuals))
    u, _, vh = np.linalg.svd(a, full_matrices=False)
    s_dot = np.sum(u * (a_dot @ vh.T), axis=0)
    return x_dot, residuals_dot, np.zeros_like(rank), s_dot


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
