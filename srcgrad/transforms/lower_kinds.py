"""Normalize (``anf``): what the walk knows of the kind of each value it binds.

Each statement ``_emit`` binds is noted here (``_note_kind``): whether its value is a new
array (``made_by``: may ``y[i] = v`` write into it?), an array or a number (``arrays``,
``scalars``: ``x.sum()`` is NumPy's, an operator on it NumPy's), a list, tuple or dict
made here (``containers``, ``own_lists``, ``dicts``, ``tuples``) or one whose items are
known when it runs only (``runtime_lists``, ``runtime_sequences``, ``runtime_mappings``);
and which arrays another name may see (``escaped``), which lists and dicts a container
or a field holds (``held_in``).  The other jobs ask these questions through the methods
here (``_is_array``, ``_known_number``, ``_container_kind``, ...).

Relies on the walk's state (``_Lowering.__init__``: the sets and tables above, ``ranks``,
``structures`` and ``field_arrays`` of what is passed in, ``current``), on ``_holds_field``
(``lower_objects``) and ``_own_list`` (``lower_lists``).
"""
from __future__ import annotations

import operator

import gast
import numpy as np

from ..anno import Kind
from .. import anno, nodes, runtime
from ..rules import registry
from ..tree import TreeRank
from .lower_objects import is_user_class
from .numpy_spellings import METHODS

# NumPy functions whose result may be a view of their first argument.
_VIEWS = (operator.getitem, np.reshape, np.ravel, np.transpose, np.expand_dims, np.squeeze,
          np.broadcast_to, np.asarray)
# Calls whose result is a Python container, never an array (`[None] * n`, `list(m)`).
_CONTAINER_MAKERS = {"srcgrad.runtime.repeated", "srcgrad.runtime.concatenated", "srcgrad.runtime.as_tuple",
                     "srcgrad.runtime.sequence_of", "srcgrad.runtime.mapping_of", "srcgrad.runtime.reversed_list",
                     "srcgrad.runtime.inserted", "srcgrad.runtime.merged", "srcgrad.runtime.without_key",
                     "srcgrad.runtime.fromkeys", "srcgrad.runtime.tolist", "numpy.split", "numpy.array_split",
                     "numpy.hsplit", "numpy.vsplit",
                     "builtins.list", "builtins.tuple", "builtins.dict", "builtins.sorted", "builtins.zip",
                     "builtins.enumerate", "collections.OrderedDict", "collections.defaultdict"}
# ... of them, those whose result is a list or tuple, which a loop indexes as it is.
_SEQUENCE_MAKERS = {"srcgrad.runtime.repeated", "srcgrad.runtime.concatenated", "srcgrad.runtime.as_tuple",
                    "srcgrad.runtime.sequence_of", "srcgrad.runtime.reversed_list", "srcgrad.runtime.inserted",
                    "numpy.split", "numpy.array_split", "numpy.hsplit", "numpy.vsplit", "builtins.list",
                    "builtins.tuple", "builtins.sorted"}
_MAPPING_MAKERS = {"builtins.dict", "collections.OrderedDict", "collections.defaultdict",
                   "srcgrad.runtime.mapping_of", "srcgrad.runtime.merged", "srcgrad.runtime.without_key",
                   "srcgrad.runtime.fromkeys"}
# The runtime helpers of gradient code that make a list of adjoints, one per item of a list
# grown by append: the backward sweep pops it (forward mode over it mirrors the pops).
_LIST_ADJOINTS = {registry.lookup(runtime.as_items), registry.lookup(runtime.add_each)}
# NumPy's random generators (``rng = np.random.default_rng(0)``): objects, not arrays.
_GENERATOR_MAKERS = {"numpy.random.default_rng", "numpy.random.mtrand.RandomState",
                     "numpy.random._generator.Generator"}


class _Kinds:
    def _note_kind(self, new, value, origin_node, annotations):
        """``new = value``, just emitted (``_emit``; ``annotations``: the statement's): what
        ``new`` is known to hold."""
        self.made_by[new] = (_makes_new_array(annotations, value), anno.get(origin_node, "origin"))
        viewed = next(iter((annotations.get("bound") or {}).values()), None)
        if annotations.get("kind") == "op" and annotations.get("rule") in {registry.lookup(v) for v in _VIEWS} \
                and isinstance(viewed, gast.Name) and self.made_by.get(viewed.id, (False,))[0] \
                and viewed.id in self.arrays and viewed.id not in self.containers \
                and viewed.id not in self.escaped and not self._holds_field(viewed):
            # A view of a new array made here (`np.reshape(flat, shape)`) is memory of this
            # function's too: a write into it is the sharing analysis's to check.
            self.made_by[new] = self.made_by[viewed.id]
        kind = annotations.get("kind")
        if kind == Kind.AGGREGATE:
            self.containers.add(new)
        elif kind == Kind.COPY and isinstance(value, gast.Name):
            self.aliased.add(value.id)  # two names for one value now
            if self.made_by.get(value.id, (False,))[0] and not any(
                    value.id in known for known in (self.containers, self.own_lists, self.lists, self.dicts)):
                # (the same new array: a write through either name is the sharing analysis's to
                # check; a list or dict is followed by one name only)
                self.made_by[new] = self.made_by[value.id]
            if value.id in self.containers:
                self.containers.add(new)
                self.copied_from[new] = value.id
            if value.id in self.dicts or value.id in self.runtime_mappings:
                self.runtime_mappings.add(new)  # (a dict under another name: written as it is, in place)
            if value.id in self.lists:  # (the same list: its items known when it runs only)
                self.lists.add(new)
            if value.id in self.tuples:  # (immutable: what it holds is known under either name)
                self.tuples.add(new)
                if value.id in self.aggregates:
                    self.aggregates[new] = self.aggregates[value.id]
        elif kind == Kind.COPY and isinstance(value, gast.Constant):
            self.scalars.add(new)
        if self._holds_array(annotations, value):
            self.arrays.add(new)
        elif kind == Kind.OP and annotations.get("rule") in _LIST_ADJOINTS:
            self._own_list(new)  # (a list adjoint in gradient code, popped by the appends)
        elif annotations.get("rule") is not None and annotations["rule"].name in _CONTAINER_MAKERS:
            self.runtime_lists.add(new)
            if annotations["rule"].name in _SEQUENCE_MAKERS:
                self.runtime_sequences.add(new)
            elif annotations["rule"].name in _MAPPING_MAKERS:
                self.runtime_mappings.add(new)
        elif kind == Kind.COPY and isinstance(value, gast.Name) and value.id in self.runtime_lists:
            self.runtime_lists.add(new)
            for known in (self.runtime_sequences, self.runtime_mappings):
                if value.id in known:
                    known.add(new)
            self.copied_from[new] = value.id  # (`ys = hs`: one list, two names)
        elif kind == Kind.OP and annotations.get("rule") is registry.lookup(operator.getitem) \
                and isinstance(value, gast.Subscript) and isinstance(value.slice, gast.Slice) \
                and isinstance(value.value, gast.Name) and value.value.id in self.runtime_lists:
            self.runtime_lists.add(new)  # (`hs[1:]` of such a list: a new list of its items)
            if value.value.id in self.runtime_sequences:
                self.runtime_sequences.add(new)
            self.made_by[new] = (True, anno.get(origin_node, "origin"))

    def _same_kind(self, new, old):
        """``new = old``: what normalize knows of ``old``'s kind holds for ``new``."""
        for known in (self.arrays, self.scalars, self.containers, self.lists, self.own_lists, self.dicts,
                      self.tuples, self.runtime_lists, self.runtime_sequences, self.runtime_mappings):
            if old in known:
                known.add(new)
        if old in self.made_by:
            self.made_by[new] = self.made_by[old]
        if old in self.escaped:
            self.escaped[new] = self.escaped[old]
        if self._held_elsewhere(old):  # (the same list or dict: what holds it holds it under either name)
            self.held_in[new] += self.held_in[old]

    def _stored(self, atom):
        """``atom`` was stored in a container or a field (``d[k] = xs``, ``self.h = xs``): a list or
        dict it names is held there too, so a write into it is no new version of it but a
        change of the one object (``_held_elsewhere``)."""
        if isinstance(atom, gast.Name):
            self.held_in[atom.id] += 1

    def _held_elsewhere(self, name) -> bool:
        """Whether the list or dict ``name`` was stored in a container or a field (a display, an
        append, an entry, an attribute): a write into it changes what that holds as well, so it
        is written in place, never as a new version under its own name only."""
        return self.held_in[name] > 0

    def _escape(self, atoms, node):
        """Arrays stored in a list or passed to a function: another name may see them
        from now on, so writing into them in place is refused (as for a view)."""
        for atom in atoms:
            for name in nodes.loaded_names(atom):
                if name in self.arrays and name not in self.escaped:
                    self.escaped[name] = anno.get(node, "origin")

    def _container_kind(self, name):
        """What ``name`` holds, as far as the compiler knows: ``"array"``, ``"list"``, ``"dict"``
        (a parameter's is part of the specialisation), or None."""
        rank = self.structures.get(name)
        if name in self.dicts or isinstance(rank, TreeRank) and rank.kind == "mapping":
            return "dict"
        if name in self.sequences or name in self.own_lists or isinstance(rank, TreeRank) and rank.kind == "sequence":
            return "list"
        return "array" if name in self.arrays else None

    def _shared_at(self, name) -> str:
        origin = self.escaped.get(name)
        return f" (stored or passed on at {origin.where}: `{origin.text.strip()}`)" if origin else ""

    def _is_array(self, node) -> bool:
        """Whether ``node`` (a method call's receiver) is known to be an array.  If not,
        ``obj.sum()`` is called as it is and resolved when it runs (``dispatch.vjp_method``)."""
        if isinstance(node, gast.Name) and not anno.has(node, "resolved"):
            name = self.current.get(node.id, node.id)
            return name in self.arrays or name in self.field_arrays  # (self.w.reshape(...))
        if isinstance(node, gast.Call) and (is_user_class(anno.get(node.func, "resolved", None))
                                            or isinstance(anno.get(node.func, "resolved", None), type)):
            return False  # P(x).w: an object made here; np.finfo(float).eps: a class's instance
        if isinstance(node, gast.Subscript):
            return self._is_array(node.value)  # (x[0].T: an array's row; m.layers[0].W: a layer)
        return not isinstance(node, (gast.Name, gast.Attribute))  # (a + b).sum(): an expression

    def _surely_array(self, node) -> bool:
        """Whether the expression ``node`` (a method's receiver) makes an array for
        sure: arithmetic (``(x * 1.5).cumsum()``), an index of an array name
        (``x[None]``), a NumPy function's or an array method's result."""
        if isinstance(node, gast.Name):
            return self._is_array(node)
        if isinstance(node, (gast.BinOp, gast.UnaryOp)):
            return True
        if isinstance(node, gast.Subscript):
            return isinstance(node.value, gast.Name) and self._is_array(node.value) \
                or self._surely_array(node.value)
        if isinstance(node, gast.Call):
            callee = anno.get(node.func, "resolved", None)
            if callee is not None:
                return registry.is_numpy(callee) and not isinstance(callee, type)
            return isinstance(node.func, gast.Attribute) and node.func.attr in METHODS \
                and self._surely_array(node.func.value)
        return False

    def _known_number(self, atom) -> bool:
        """Whether ``atom`` is known to hold an array or a number (a literal, a NumPy
        result), so that an operator on it is NumPy's, not a method of a user's class."""
        return isinstance(atom, gast.Constant) or isinstance(atom, gast.Name) and (
            atom.id in self.arrays or atom.id in self.scalars or atom.id in self.field_arrays)

    def _array_field(self, atom) -> bool:
        """Whether ``atom`` holds an array read from a structure passed in whose ranks
        are part of the specialisation (``self.W`` with ``self`` a model): known."""
        return isinstance(atom, gast.Name) and atom.id in self.field_arrays

    def _holds_array(self, annotations, value) -> bool:
        kind, rule = annotations.get("kind"), annotations.get("rule")
        if kind == Kind.COPY:  # (a number is an array's kind; a string, None or bytes is not)
            return isinstance(value, gast.Constant) and isinstance(value.value, (bool, int, float, complex)) \
                or isinstance(value, gast.Name) and value.id in self.arrays
        if kind == Kind.OP:
            if rule in (registry.lookup(getattr), registry.lookup(runtime.iterated)) \
                    or rule is not None and rule.name in _CONTAINER_MAKERS:
                return False  # a field of an object (a parameter array or a sub-layer), a sequence
            if rule is registry.lookup(operator.getitem):
                base = annotations["bound"]["a"]
                return isinstance(base, gast.Name) and base.id in self.arrays
            return rule not in _LIST_ADJOINTS
        if kind == Kind.UNPACK:  # `a, b = m`: the rows of an array
            return annotations["source"] in self.arrays or annotations["source"] in self.field_arrays
        return kind == Kind.NONDIFF and not isinstance(value, gast.Attribute) and "constructs" not in annotations \
            and not (rule is not None and rule.name in _GENERATOR_MAKERS | _CONTAINER_MAKERS)  # `rng.normal(...)`

    def _holds_array_rank(self, atom) -> bool:
        return isinstance(atom, gast.Name) and (atom.id in self.arrays or atom.id in self.field_arrays)

    def _holds_sequence(self, name) -> bool:
        """Whether ``name`` is known to be a list or tuple: made here (a display, a list
        grown with append) or passed in (its items are part of the specialisation)."""
        return (name in self.containers and name not in self.dicts) or name in self.lists \
            or name in self.sequences


def _makes_new_array(annotations, value) -> bool:
    """Whether a statement's value is a new array, shared with no other name."""
    kind = annotations.get("kind")
    if kind == Kind.OP and nodes.copies_by_index(value):
        return True  # `a[[0, 2]]`: a copy
    if kind == Kind.OP:
        return annotations["rule"] not in {registry.lookup(v) for v in _VIEWS} \
            and not isinstance(value, gast.Attribute)  # x.T is a view
    return kind in (Kind.NONDIFF, Kind.AGGREGATE) and not isinstance(value, (gast.Attribute, gast.Subscript))
