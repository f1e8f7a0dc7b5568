"""Structures of parameters — pytrees — by optree.

A model is an ordinary Python value: a dict, list or tuple of arrays, an
object whose attributes hold arrays (any class, ``nn.Module`` included), or a
nesting of these.  Objects are registered with optree on first sight
(namespace ``"srcgrad"``): their array, float and container attributes are
children; everything else (ints, strings, functions) is carried along.

Inside generated code the adjoint of a structure is *sparse*: a nested dict
keyed like the structure's path entries (attribute names, dict keys, list
indices) holding only what was reached.  :func:`materialize` turns it into a
value of the original structure, with zeros for the leaves not reached.
"""
from __future__ import annotations

import copy
import functools
import itertools
import operator
import types
import weakref

import numpy as np
import optree

NAMESPACE = "srcgrad"
# Tangents and Jacobians see an object's float attributes as leaves too: ``grad`` gives
# them gradients (``materialize``), so forward mode gives them tangents and a Jacobian
# a block; an optimizer, which flattens in NAMESPACE, leaves them alone.
TANGENTS = "srcgrad.tangents"
_REGISTERED: dict = {NAMESPACE: set(), TANGENTS: set()}
# An object's attributes naming its buffers (``nn.Module.register_buffer``) and its frozen
# parameters (``requires_grad_(False)``), each a tuple of attribute names.  A buffer's array is
# state, not a parameter: it is not flattened (no gradient, None; optimizers never see it).  A
# frozen parameter is flattened (it is a parameter) but its gradient is None and optimizers
# skip it.  Compiled code reads both as any field (a forward may store a new value in a buffer
# as bookkeeping, which the reverse pass allows for a field it differentiates; a frozen layer's
# forward must compile as the unfrozen one does): their adjoints are computed, then dropped.
BUFFERS = "_buffer_names"
FROZEN = "_frozen_names"
frozen_in_use = False  # (set once anything is frozen: until then optimizers need not look)
_SKIP = (str, bytes, int, bool, type(None), type, types.ModuleType, types.FunctionType,
         types.BuiltinFunctionType, types.MethodType)


class _Original:
    """Treespec metadata of an object: the object itself, compared by identity."""

    __slots__ = ("obj", "keys")

    def __init__(self, obj, keys):
        self.obj, self.keys = obj, keys

    def __hash__(self):
        return hash((type(self.obj), self.keys))

    def __eq__(self, other):
        return isinstance(other, _Original) and type(other.obj) is type(self.obj) and other.keys == self.keys


def _is_float_array(value) -> bool:
    return isinstance(value, np.ndarray) and value.dtype.kind in "fc"


def _is_object(value) -> bool:
    # (an OrderedDict or defaultdict has a __dict__ too: it is a dict, its items its parts)
    # (a function srcgrad made, `srcgrad.grad(f)`, is a function, not a structure of parameters)
    return (hasattr(value, "__dict__") and not isinstance(value, _SKIP) and not isinstance(value, (type, dict))
            and not callable(getattr(value, "__array__", None))
            and getattr(type(value), "__srcgrad_gradient__", False) is not True)


def _has_params(value) -> bool:
    """Whether a container or object holds, somewhere inside, a float array or float."""
    if _is_float_array(value) or isinstance(value, (float, np.floating)) and not isinstance(value, bool):
        return True
    if isinstance(value, (list, tuple)):
        return any(_has_params(v) for v in value)
    if isinstance(value, dict):
        return any(_has_params(v) for v in value.values())
    # An object counts whatever it holds (one without parameters flattens to
    # nothing): looking inside would walk the whole model on every call.
    return _is_object(value)


def _is_attribute_part(value) -> bool:
    """An object's attribute that is (or holds) parameters: a float array, a
    container or an object holding some.  Python numbers, strings, integer
    arrays (buffers) and functions are carried along, not differentiated."""
    if _is_float_array(value):
        return True
    if isinstance(value, (list, tuple, dict)) or _is_object(value):
        return _has_params(value)
    return False


def _is_part(value) -> bool:
    """A value made of parameters: a container or an object (not a single array)."""
    return isinstance(value, (list, tuple, dict)) or _is_object(value)


def buffer_names(obj, field=BUFFERS) -> tuple:
    """The names of ``obj``'s buffers (arrays of state that are not parameters), or ();
    with ``field=FROZEN``, of its frozen parameters."""
    names = vars(obj).get(field, ()) if hasattr(obj, "__dict__") else ()
    return names if type(names) is tuple else ()


def constant_fields(obj) -> tuple:
    """The attributes of ``obj`` that compiled code reads as constants: the hyper-parameters
    its class names in ``_constant_fields`` (a layer's ``eps`` or dropout ``p``: floats, which
    would otherwise be differentiated inputs; a kernel size, a tuple of ints)."""
    return getattr(type(obj), "_constant_fields", ())


def _flatten_object(obj, floats=False):
    cls = type(obj)
    buffers, constants = buffer_names(obj), constant_fields(obj)
    # (A functools.cached_property's stored value is derived from the parameters, not one;
    # a hyper-parameter the class reads as a constant, a layer's `eps`, has no tangent.)
    keys = tuple(k for k, v in vars(obj).items() if (_is_attribute_part(v) or floats and _is_float(v))
                 and k not in buffers and k not in constants
                 and not isinstance(getattr(cls, k, None), functools.cached_property))
    return [vars(obj)[k] for k in keys], _Original(obj, keys), keys


def _unflatten_object(meta, children):
    cls = type(meta.obj)
    try:  # a shallow copy without the copy protocol (a delegating __getattr__ can loop in it)
        if any("__slots__" in vars(k) for k in cls.__mro__):
            raise TypeError  # slots hold values outside __dict__: copy.copy knows them
        new = object.__new__(cls)
        new.__dict__.update(vars(meta.obj))
    except TypeError:
        new = copy.copy(meta.obj)
    for key, child in zip(meta.keys, children):
        object.__setattr__(new, key, child)
    return new


def _register(value, namespace) -> None:
    """Register the classes of all objects inside ``value`` with optree."""
    if isinstance(value, (list, tuple)):
        for v in value:
            _register(v, namespace)
    elif isinstance(value, dict):
        for v in value.values():
            _register(v, namespace)
    elif _is_object(value):
        cls = type(value)
        if cls not in _REGISTERED[namespace]:
            flatten_object = functools.partial(_flatten_object, floats=namespace == TANGENTS)
            optree.register_pytree_node(cls, flatten_object, _unflatten_object, namespace=namespace)
            _REGISTERED[namespace].add(cls)
        for v in vars(value).values():
            if _is_attribute_part(v):
                _register(v, namespace)


def flatten(tree, namespace=NAMESPACE):
    """``(paths, leaves, treespec)`` of a structure; each path is a tuple of entries.
    ``namespace``: ``NAMESPACE`` (an object's parameters) or ``TANGENTS`` (its float
    attributes too: what has a tangent)."""
    for _ in range(64):  # each round registers at least one new class
        paths, leaves, spec = optree.tree_flatten_with_path(tree, namespace=namespace)
        # An object optree saw as a leaf is of a class not registered yet.
        unseen = [leaf for leaf in leaves if _is_object(leaf) and type(leaf) not in _REGISTERED[namespace]]
        if not unseen:
            break
        for leaf in unseen:
            _register(leaf, namespace)
    return paths, leaves, spec


def unflatten(spec, leaves):
    return optree.tree_unflatten(spec, leaves)


def path_name(path) -> str:
    """``linear1.weight``, ``['w']``, ``layers[2].bias``: a path as a person writes it."""
    out = ""
    for entry in path:
        if isinstance(entry, int):
            out += f"[{entry}]"
        elif isinstance(entry, str) and entry.isidentifier():
            out += f".{entry}" if out else entry
        else:
            out += f"[{entry!r}]"
    return out or "<root>"


def lookup(sparse, path):
    """The leaf at ``path`` in a sparse adjoint, or None.  A part may be dense: the
    tuple or list an unpacking gave back whole (``w, b = layers[0]``: ``{0: (w_bar, b_bar)}``),
    or an array, where NumPy took a list of numbers (or of arrays) for one."""
    node = sparse
    for entry in path:
        if isinstance(node, dict):
            if entry not in node:
                return None
            node = node[entry]
        elif isinstance(node, (list, tuple)) and type(entry) is int and 0 <= entry < len(node):
            node = node[entry]
        elif isinstance(node, np.ndarray) and type(entry) is int and node.ndim and 0 <= entry < len(node):
            node = node[entry]  # a list of numbers NumPy took for an array (`x @ w`): its rows
        else:
            return None
    return node


def materialize(sparse, like):
    """A value shaped like ``like`` from a sparse adjoint (zeros where nothing reached).

    A named tuple's fields may be keyed by name (``t.a``) or position (``t[0]``) in
    ``sparse``: both count.  An object's float attributes (``g.scale``), which are
    not parameters (an optimizer does not update them), get their gradients too.
    Integer, boolean and string leaves (and an object's integer attributes) are
    None: they have no gradient.
    """
    if _is_object(like) and not isinstance(like, tuple):
        plan = layout(like)
        if plan is not None:  # a model of objects and arrays (the common case, each training step)
            return plan.gradient(sparse, like)
    sparse = by_position(sparse, like)
    paths, leaves, spec = flatten(like)
    values = []
    for path, leaf in zip(paths, leaves):
        g = lookup(sparse, path)
        if not (_is_float_array(leaf) or isinstance(leaf, (float, np.floating))):
            # Not a parameter (an int, a bool, a string): no gradient, None (as PyTorch's
            # .grad of a tensor that does not require one), never its value, which a
            # sum over the gradient's leaves would take for a derivative.
            values.append(None)
            continue
        if g is None or isinstance(g, dict):
            g = np.zeros_like(leaf)
        if isinstance(leaf, np.ndarray):
            g = np.array(np.broadcast_to(g, leaf.shape), dtype=leaf.dtype)
        elif isinstance(leaf, float):
            g = float(g)
        values.append(g)
    out = unflatten(spec, values)
    _float_fields(out, like, sparse)
    return out


class _Unusual(Exception):
    """Raised while walking an object for what only flattening handles."""


_SLOTS: dict = {}  # class -> whether it or a base declares __slots__ (then it is not laid out)
_ATOMS = (int, str, bytes, bool, type(None))  # what a tuple carried along holds, unchangeable
_LAYOUTS: dict = {}  # id(object) -> (weak reference to it, its Layout)
_STATE = operator.attrgetter("ndim", "dtype")


class _Node:
    """What to do with one object's attributes to build its gradient: ``arrays``
    (parameters: the adjoint, or zeros), ``floats`` ((key, type): the adjoint as that
    type, 0.0 where none reached it), ``nones`` (counts, flags, integer arrays: no
    gradient), ``children`` ((key, _Node): objects inside), ``sequences`` ((key, list or
    tuple, [_Node, ...]): a list or tuple of objects, ``nn.Sequential``'s layers); the
    other attributes are carried along.  ``ranks``: ``((key, ndim or child ranks), ...)``
    in attribute order (a sequence's: ``((index, its ranks), ...)``), the parameters
    whose ranks compiled code is specialised on."""

    __slots__ = ("cls", "arrays", "floats", "nones", "children", "sequences", "ranks", "keys", "frozen",
                 "_parameters")

    def __init__(self, cls):
        self.cls, self.arrays, self.floats, self.nones, self.children, self.sequences, self.ranks = \
            cls, [], [], [], [], [], []
        self.keys = frozenset()  # the attributes laid out
        self.frozen = ()  # parameters frozen (``FROZEN``): their gradients are None
        self._parameters = None

    @property
    def parameters(self) -> frozenset:
        """The attributes that get a gradient (or None, for ``nones``); the others are carried along."""
        if self._parameters is None:
            self._parameters = frozenset(self.arrays) | {k for k, _ in self.floats} | set(self.nones) \
                | {k for k, _ in self.children} | {k for k, _, _ in self.sequences}
        return self._parameters


class Layout:
    """An object model's parameters and structure, found by one walk over its attributes
    and kept (per object) for as long as each object in it holds the same values in
    the same attributes and each array keeps its rank and dtype: an optimizer updates
    parameters in place, so a training loop walks its model once, and each call only
    compares what the attributes hold now with what they held (C loops over identities).

    A list or tuple of objects (``nn.Sequential``'s layers) is laid out too, its
    elements compared by identity at each call.

    Not laid out (``layout`` returns None; flattening handles them): objects with
    ``__slots__``, dicts holding parameters, lists or tuples holding parameters other
    than as objects, complex values, array subclasses, an object stored by a
    ``functools.cached_property``, an object inside itself.
    """

    def __init__(self, obj):
        self.objects, self.arrays, self.mutable, self.sequences = [], [], [], []
        self._inside = set()  # (ids of the objects being walked: an object inside itself is not laid out)
        self.root = self._walk(obj)
        del self._inside
        self.contents = tuple(itertools.chain.from_iterable(self.sequences))
        self.sizes = list(map(len, self.sequences))
        self.classes = list(map(type, self.objects))
        dicts = list(map(vars, self.objects))
        self.lengths = list(map(len, dicts))
        self.keys = tuple(itertools.chain.from_iterable(dicts))
        self.values = tuple(itertools.chain.from_iterable(map(dict.values, dicts)))
        self.states = list(map(_STATE, self.arrays))
        del self.objects[0]  # (only a weak reference to the object itself: the cache must not keep it)
        self.rank = None  # filled in by pipeline.rank_of_argument

    def _walk(self, obj):
        cls = type(obj)
        slots = _SLOTS.get(cls)
        if slots is None:
            slots = _SLOTS[cls] = any("__slots__" in vars(k) for k in cls.__mro__)
        if slots:
            raise _Unusual
        try:
            object.__new__(cls)
        except TypeError:  # (a class of C's, types.SimpleNamespace: copied by the general path)
            raise _Unusual from None
        if id(obj) in self._inside:
            raise _Unusual
        self._inside.add(id(obj))
        self.objects.append(obj)
        node = _Node(cls)
        node.keys = frozenset(vars(obj))
        node.frozen = buffer_names(obj, FROZEN)
        constants, buffers = constant_fields(obj), buffer_names(obj)
        for key, value in vars(obj).items():
            cached = isinstance(getattr(cls, key, None), functools.cached_property)
            if type(value) is np.ndarray:
                self.arrays.append(value)
                kind = value.dtype.kind
                if key in buffers:
                    continue  # (state: carried along, its gradient None, `_build`)
                if kind in "iub" or key in constants:
                    node.nones.append(key)  # a count, a flag, indices: no gradient
                elif kind != "f":
                    raise _Unusual
                elif not cached:  # (a cached_property's value is derived from the parameters: carried)
                    node.arrays.append(key)
                    node.ranks.append((key, value.ndim))
            elif type(value) in (list, tuple) and value and all(
                    _is_object(v) and not isinstance(v, tuple) for v in value):
                if cached:
                    raise _Unusual
                self.sequences.append(value)  # (its elements compared by identity at each call)
                children = [self._walk(v) for v in value]
                node.sequences.append((key, type(value), children))
                entries = [(i, child.ranks) for i, child in enumerate(children) if child.ranks]
                if entries:
                    node.ranks.append((key, entries))
            elif isinstance(value, (list, tuple, dict)):
                if _has_params(value):
                    raise _Unusual
                if not (type(value) is tuple and all(type(v) in _ATOMS for v in value)):
                    self.mutable.append(value)  # (may gain parameters in place: looked into each call)
                elif key in constants:
                    node.nones.append(key)  # a tuple of numbers the class names constant (a kernel size)
            elif isinstance(value, (np.ndarray, complex, np.complexfloating)):
                raise _Unusual
            elif _is_float(value) and key in constants:
                node.nones.append(key)  # a hyper-parameter: a constant
            elif _is_float(value):
                node.floats.append((key, type(value)))
            elif _is_integer(value):
                node.nones.append(key)
            elif _is_object(value):
                if cached:
                    raise _Unusual
                child = self._walk(value)
                node.children.append((key, child))
                # (an object without parameters, a Dropout: an entry of no ranks, so that the code
                # reads it as the layer it holds, with its hyper-parameters constants)
                node.ranks.append((key, child.ranks))
        self._inside.discard(id(obj))
        return node

    def holds(self, obj) -> bool:
        """Whether ``obj`` (the object laid out) is still laid out so."""
        objects = [obj, *self.objects]
        if list(map(type, objects)) != self.classes:
            return False
        dicts = list(map(vars, objects))
        return list(map(len, dicts)) == self.lengths \
            and tuple(itertools.chain.from_iterable(dicts)) == self.keys \
            and all(map(operator.is_, itertools.chain.from_iterable(map(dict.values, dicts)), self.values)) \
            and list(map(_STATE, self.arrays)) == self.states \
            and not any(map(_has_params, self.mutable)) \
            and list(map(len, self.sequences)) == self.sizes \
            and all(map(operator.is_, itertools.chain.from_iterable(self.sequences), self.contents))

    def gradient(self, sparse, like):
        """``materialize(sparse, like)`` for the object laid out."""
        return _build(self.root, sparse, like)


def _build(node, sparse, like):
    out = object.__new__(node.cls)
    fields = out.__dict__
    values = vars(like)
    fields.update(values)
    # Attributes the call added (a cache, `self.out = h`), or that held no parameter when it
    # began (a list of inputs it grew): not parameters; their values are not gradients.
    for key in values.keys() - node.parameters:
        if _is_float_array(values[key]) or isinstance(values[key], (float, np.floating)) \
                or _has_params(values[key]):
            fields[key] = None
    get = sparse.get if type(sparse) is dict else _nothing
    for key in node.arrays:
        value, g = values[key], get(key)
        if g is None or type(g) is dict:
            fields[key] = np.zeros_like(value)
        elif type(g) is np.ndarray and g.shape == value.shape:
            fields[key] = np.array(g, dtype=value.dtype)  # its own copy: never an input, never shared
        else:
            fields[key] = np.array(np.broadcast_to(g, value.shape), dtype=value.dtype)
    for key in node.frozen:
        fields[key] = None
    for key, kind in node.floats:
        g = get(key)
        fields[key] = kind(0.0 if g is None or type(g) is dict else g)
    for key in node.nones:
        fields[key] = None
    for key, child in node.children:
        fields[key] = _build(child, get(key), values[key])
    for key, kind, children in node.sequences:
        g = get(key)
        if type(g) in (list, tuple):
            g = dict(enumerate(g))
        item = g.get if type(g) is dict else _nothing
        built = [_build(child, item(i), element) for i, (child, element) in enumerate(zip(children, values[key]))]
        fields[key] = built if kind is list else tuple(built)
    return out


def _nothing(key):
    return None


def layout(obj):
    """The :class:`Layout` of an object of parameters (from the cache while it holds),
    or None for what only flattening handles."""
    cached = _LAYOUTS.get(id(obj))
    if cached is not None and cached[0]() is obj and cached[1].holds(obj):
        return cached[1]
    try:
        plan = Layout(obj)
    except _Unusual:
        _LAYOUTS.pop(id(obj), None)
        return None
    try:
        reference = weakref.ref(obj, functools.partial(_forget, id(obj)))
    except TypeError:  # (not weakly referable: laid out at each call)
        return plan
    _LAYOUTS[id(obj)] = (reference, plan)
    return plan


def _forget(key, reference):
    if key in _LAYOUTS and _LAYOUTS[key][0] is reference:
        del _LAYOUTS[key]


def _child(like, key):
    if isinstance(like, (list, tuple)):
        return like[key] if isinstance(key, int) and -len(like) <= key < len(like) else None
    if isinstance(like, dict):
        return like.get(key)
    if _is_object(like):
        return vars(like).get(key)
    return None


def sparse_of(value):
    """A structure's adjoint laid out as an object of its class (``g.linear.weight``, what
    a gradient function returns) as the sparse nested dict generated code adds up: the
    object's fields that hold something, by name; anything else as it is."""
    if _is_object(value):
        return {key: sparse_of(field) for key, field in vars(value).items() if field is not None}
    if isinstance(value, dict):
        return {key: sparse_of(field) for key, field in value.items()}
    return value


def add(a, b):
    """Accumulate two adjoints that may be structures (sparse nested dicts, tuples or
    lists of adjoints, one per item; an object of the structure's class) or arrays."""
    if a is None:
        return b
    if b is None:
        return a
    if _is_object(a) or _is_object(b):
        a, b = sparse_of(a), sparse_of(b)
    if isinstance(a, dict) != isinstance(b, dict):
        other = b if isinstance(a, dict) else a
        if isinstance(other, (list, tuple)) or np.ndim(other) > 0:
            # One sparse, the other a sequence from a sequence rule (np.stack(xs)) or the rows
            # of an array NumPy made of the list (np.sum(xs)): both sparse.
            a, b = (v if isinstance(v, dict) else dict(enumerate(v)) for v in (a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        out = dict(a)
        for key, value in b.items():
            out[key] = add(out[key], value) if key in out else value
        return out
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        # One adjoint per item (`+` would concatenate); a tuple's stays a tuple.
        longer, shorter = (a, b) if len(a) >= len(b) else (b, a)
        items = [add(x, y) for x, y in zip(longer, shorter)] + list(longer[len(shorter):])
        return tuple(items) if isinstance(a, tuple) and isinstance(b, tuple) else items
    return a + b


def by_position(sparse, like):
    """``sparse`` with each named tuple's field names turned into positions (adding
    the two where a field was read both ways)."""
    if not isinstance(sparse, dict):
        return sparse
    fields = getattr(type(like), "_fields", None) if isinstance(like, tuple) else None
    out = {}
    for key, g in sparse.items():
        if fields is not None and isinstance(key, str) and key in fields:
            key = fields.index(key)
        g = by_position(g, _child(like, key))
        out[key] = add(out[key], g) if key in out else g
    return out


def _is_float(value) -> bool:
    return isinstance(value, (float, np.floating)) and not isinstance(value, bool)


def _is_integer(value) -> bool:
    return isinstance(value, (int, np.integer, np.bool_)) or (
        isinstance(value, np.ndarray) and value.dtype.kind in "iub")


def _float_fields(out, like, sparse):
    """Give the float attributes of the objects in ``out`` (a gradient made from
    ``like``) their gradients from ``sparse``: 0.0 where nothing reached them."""
    if out is like:
        return
    # (``lookup``: a part may be dense, the list an unpacking `first, second = ms` gave back.)
    if _is_object(like):
        constants = constant_fields(like) + buffer_names(like) + buffer_names(like, FROZEN)
        for key, value in vars(like).items():
            g = lookup(sparse, (key,))
            if key in constants:  # a buffer, a frozen parameter or a hyper-parameter: no gradient
                object.__setattr__(out, key, None)
            elif _is_float(value):
                g = 0.0 if g is None or isinstance(g, dict) else g
                object.__setattr__(out, key, type(value)(g))
            elif _is_integer(value):  # a count, a flag: no gradient (see materialize)
                object.__setattr__(out, key, None)
            elif _is_attribute_part(value) and key in vars(out):
                _float_fields(vars(out)[key], value, g)
    elif isinstance(like, (list, tuple)) and isinstance(out, (list, tuple)):
        for i, value in enumerate(like):
            if _is_part(value):
                _float_fields(out[i], value, lookup(sparse, (i,)))
    elif isinstance(like, dict) and isinstance(out, dict):
        for key, value in like.items():
            if _is_part(value) and key in out:
                _float_fields(out[key], value, lookup(sparse, (key,)))


def is_structure(value) -> bool:
    """A value srcgrad treats as a structure of parameters rather than one array."""
    return _is_part(value)


# ---- the ranks of a structure, as the compiler specialises on them ----------------

class TreeRank(tuple):
    """The ranks inside a structure argument: ``((entry, rank or TreeRank), ...)``.

    ``kind`` says what holds them: ``"sequence"`` (a tuple or list, whose entries
    ``f(*xs)`` passes), ``"mapping"`` (a dict) or ``"object"``; it is part of
    equality, as the cache key of compiled code must tell ``(a,)`` from ``{0: a}``.
    ``constants``: the entries (an object's fields, a dict's keys) holding integers,
    which the code reads as constants (no adjoint, no tangent: forward mode would
    otherwise carry ``0 * inf`` from ``x ** n``'s derivative in ``n``); part of
    equality too, so an integer that becomes a float compiles the code again.
    """

    def __new__(cls, entries=(), kind="object", constants=frozenset()):
        self = super().__new__(cls, entries)
        self.kind = kind
        self.constants = constants  # entries holding integers (a count, a flag, `power = 2`): no derivative
        return self

    def __eq__(self, other):
        return isinstance(other, tuple) and tuple.__eq__(self, other) \
            and getattr(other, "kind", None) == self.kind \
            and getattr(other, "constants", frozenset()) == self.constants

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash((self.kind, tuple(self), self.constants))

    def get(self, entry):
        for key, rank in self:
            if key == entry:
                return rank
        return None
