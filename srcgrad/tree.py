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
import types

import numpy as np
import optree

NAMESPACE = "srcgrad"
_REGISTERED: set = set()
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


def _is_part(value) -> bool:
    if isinstance(value, bool) or isinstance(value, _SKIP) or callable(value) and not hasattr(value, "__dict__"):
        return False
    if isinstance(value, (np.ndarray, float, np.floating, list, tuple, dict)):
        return True
    return hasattr(value, "__dict__") and not isinstance(value, type) and not callable(getattr(value, "__array__", None))


def _flatten_object(obj):
    keys = tuple(k for k, v in vars(obj).items() if _is_part(v))
    return [vars(obj)[k] for k in keys], _Original(obj, keys), keys


def _unflatten_object(meta, children):
    new = copy.copy(meta.obj)
    for key, child in zip(meta.keys, children):
        object.__setattr__(new, key, child)
    return new


def _register(value) -> None:
    """Register the classes of all objects inside ``value`` with optree."""
    if isinstance(value, (list, tuple)):
        for v in value:
            _register(v)
    elif isinstance(value, dict):
        for v in value.values():
            _register(v)
    elif _is_part(value) and not isinstance(value, (np.ndarray, float, np.floating)):
        cls = type(value)
        if cls not in _REGISTERED:
            optree.register_pytree_node(cls, _flatten_object, _unflatten_object, namespace=NAMESPACE)
            _REGISTERED.add(cls)
        for k, v in vars(value).items():
            if _is_part(v):
                _register(v)


def flatten(tree):
    """``(paths, leaves, treespec)`` of a structure; each path is a tuple of entries."""
    _register(tree)
    return optree.tree_flatten_with_path(tree, namespace=NAMESPACE)


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
    """The leaf at ``path`` in a sparse adjoint, or None."""
    node = sparse
    for entry in path:
        if not isinstance(node, dict) or entry not in node:
            return None
        node = node[entry]
    return node


def materialize(sparse, like):
    """A value shaped like ``like`` from a sparse adjoint (zeros where nothing reached)."""
    paths, leaves, spec = flatten(like)
    values = []
    for path, leaf in zip(paths, leaves):
        g = lookup(sparse, path)
        if g is None:
            g = np.zeros_like(leaf)
        if isinstance(leaf, np.ndarray):
            g = np.array(np.broadcast_to(g, leaf.shape), dtype=leaf.dtype)
        elif isinstance(leaf, float):
            g = float(g)
        values.append(g)
    return unflatten(spec, values)


def is_structure(value) -> bool:
    """A value srcgrad treats as a structure of parameters rather than one array."""
    return _is_part(value) and not isinstance(value, (np.ndarray, float, np.floating))
