"""Python lists, tuples and dicts in generated code: the helpers that build them
(``list(xs)``, ``{**a, **b}``, ``xs.insert(i, v)``: ``rules/shape.py`` has their rules),
their adjoints, the adjoints of lists grown by ``append`` (one per item) and of writes
``xs[i] = v`` into a list or dict, and what the backward sweep puts back."""
from __future__ import annotations

import operator

import numpy as np

from .. import errors, tree
from ..tree import add
from .core import (add_tangent, array_module, entry, is_basic_index, is_constant, item_of, unbroadcast, zeros_like,
                   zeros_tangent)
from .shape import getitem_adjoint, written_adjoint


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


def overwritten_adjoint_rule(ans_bar, ans, g, y, index):
    """The entries ``y[index] = v`` overwrote, dropped: a projection, its own transpose."""
    return overwritten_adjoint(ans_bar, y, index)


def iterates_keys(items) -> bool:
    """Whether iterating ``items`` gives keys, which carry no derivative: a dict (an
    ``OrderedDict``, a ``defaultdict``), a view of its keys, a set.  (Its values do: a
    rule that iterates such a value gives it no adjoint, its result no tangent.)"""
    return isinstance(items, (dict, set, frozenset, type({}.keys())))


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


def iterated(items):
    """What ``for v in items`` visits, as something the generated loop can index
    (``items[i]``): the keys of a dict, the items of a set or of a dict's view, or what
    an iterator has left (``it = iter(X); next(it); for x in it``: read once, as Python
    does), as a tuple; a list, tuple or array as it is."""
    if isinstance(items, (dict, set, frozenset, type({}.keys()), type({}.values()), type({}.items()))) \
            or not (hasattr(items, "__getitem__") and hasattr(items, "__len__")) and hasattr(items, "__next__"):
        return tuple(items)
    return items


def as_tuple(items):
    """``tuple(xs)`` of a list whose items are known when it runs only (grown by append)."""
    return tuple(items)


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


def written_entry_rule(ans_bar, ans, g, y, index, value):
    """``y[index] = value``'s adjoint of ``value`` (``y`` a list or dict known when the code runs):
    a selection, whose transpose puts ``ans_bar`` back at the entry."""
    return written_entry_transposed(ans_bar, g, y, index, value)


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


def add_each_transposed(u, ans, adjoints, more):
    """Accumulation item by item: each addend gets ``u``, in its own form."""
    return in_form_of(u, adjoints), in_form_of(u, more)


def add_each_tangent(ans, adjoints, more, adjoints_dot=None, more_dot=None):
    """Linear in the two together (a zero tangent adds nothing)."""
    return add_each(no_items_dot(adjoints_dot, adjoints), no_items_dot(more_dot, more))


def items_adjoint(g, items):
    """The adjoint of ``items``, a sequence rule's argument (``np.asarray(v)``) whose
    kind was unknown when compiling: a list of the rows of ``g`` for a list or tuple,
    else ``g`` itself (an array or a scalar)."""
    return list(g) if isinstance(items, (list, tuple)) else g


def items_adjoint_transposed(u, ans, g, items):
    return in_form_of(u, g) if isinstance(items, (list, tuple)) else u


def add_items(adjoints, more, items):
    """Accumulate adjoints of ``items`` (see :func:`items_adjoint`)."""
    if isinstance(items, (list, tuple)):
        return add_each(adjoints, more if isinstance(adjoints, dict) else list(more))
    return add(adjoints, more)


def add_items_transposed(u, ans, adjoints, more, items):
    if isinstance(items, (list, tuple)):
        return in_form_of(u, adjoints), in_form_of(u, more)
    return unbroadcast(u, adjoints), unbroadcast(u, more)


def add_items_tangent(ans, adjoints, more, items, adjoints_dot=None, more_dot=None):
    if not isinstance(items, (list, tuple)):
        return add_tangent(ans, adjoints, more, adjoints_dot, more_dot)
    return add_each(no_items_dot(adjoints_dot, adjoints), no_items_dot(more_dot, more))


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


def as_items_transposed(u, ans, g, items):
    """A list's adjoint as one adjoint per item, transposed: ``u`` in ``g``'s own form."""
    return in_form_of(u, g)


def unpop(items, index, value):
    """Undo ``value = items.pop(index)``: put ``value`` back where it was (a negative
    ``index`` counted from the end of the list before the pop)."""
    items.insert(index if index >= 0 else len(items) + 1 + index, value)


def zeros_each(items):
    """A zero adjoint for each item of a list: the adjoint of a list no later code reads."""
    return [zeros_like(v) for v in items]


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


def item_of_transposed(u, g, key):
    """Transpose of :func:`item_of` in ``g``: ``u`` at ``key`` of a sparse adjoint
    (``{key: u}``), or of an array ``g``'s shape."""
    if isinstance(g, np.ndarray):
        return getitem_adjoint(u, g, key)
    return {key: u}


def item_of_transposed_rule(u, item, g, key):
    """An item of a tuple's (list's, dict's) adjoint, read: transposed, put back at ``key``."""
    return item_of_transposed(u, g, key)
