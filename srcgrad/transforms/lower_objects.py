"""Normalize (``anf``): objects — records, named tuples, fields read and written.

``p = P(a, b)`` of a class whose ``__init__`` only stores its parameters (a dataclass) is a
record known field by field, so ``p.w`` is just ``a`` (``_record``); a named tuple is known
by position and by field name (``_named_tuple``); ``super().name(...)`` is the base class's
function called on ``self`` (``_super_call``).  A field read (``_attribute``) is NumPy's
where the receiver is an array (``x.T``, ``x.shape``), the item itself where the object was
made here, else ``getattr``, whose ranks the specialisation knows for an object passed in
(``_field_rank``); a field written (``self.n = v``, ``_setattr``) or an entry of a dict or
list a field holds (``self.cache[k] = v``, ``_object_entry``) runs as written, read back in
the same block as the value stored (``stored_fields``, ``stored_entries``).

Relies on the walk (``_lower``, ``_index``, ``_emit``, ``_emit_stmt``), on ``_call_arguments``,
``_check_spread``, ``_apply`` and ``_user_call`` (``lower_apply``), on what it knows of kinds
(``lower_kinds``) and items (``_aggregate_element``: ``lower_aggregates``) and on the walk's
state (``aggregates``, ``records``, ``named_fields``, ``structures``, ``field_structures``,
``field_arrays``, ``field_reads``, ``field_of``).
"""
from __future__ import annotations

import dataclasses
import inspect

import gast
import numpy as np

from .. import anno, errors, nodes, runtime
from ..rules import registry
from ..templates import static_value
from ..tree import TreeRank
from .lower_expressions import op_symbol
from .numpy_spellings import ARRAY_ATTRIBUTES, SHAPE_ATTRIBUTES


class _Objects:
    def _super_call(self, node, **emit):
        """``super().name(args)`` → ``rt.super_method(C, self, 'name')(self, args)``: the
        base class's function, found at run time along ``type(self)``'s MRO after ``C``
        and called as a function of ``self``, so ``self``'s adjoint flows back through it."""
        sup = node.func.value
        if sup.args:
            if len(sup.args) != 2 or sup.keywords:
                raise errors.at(sup, "`super(...)` takes a class and an object here",
                                "write `super().name(...)` or `super(Class, self).name(...)`")
            cls, obj = self._lower(sup.args[0]), self._lower(sup.args[1])
        else:
            params = self.params
            if "__class__" not in self.free_names or not params:
                raise errors.at(sup, "`super()` without arguments outside a method",
                                "write `super(Class, self).name(...)`")
            cls, obj = nodes.name("__class__"), nodes.name(self.current.get(params[0], params[0]))
        find = nodes.call("rt.super_method", [cls, nodes.copy(obj), nodes.const(node.func.attr)])
        method = self._emit(find, node, None, "method", False, kind="nondiff", rule=None)
        args, kwargs = self._call_arguments(node)
        return self._user_call(method, [obj] + args, kwargs, node, **emit)

    def _constructor_arguments(self, cls, node, advice) -> dict:
        """The atoms ``cls(...)`` is given, by parameter name."""
        args, kwargs = self._call_arguments(node)
        self._check_spread(args, kwargs, node)
        try:
            return inspect.signature(cls).bind_partial(*args, **kwargs).arguments
        except TypeError as exc:
            raise errors.at(node, f"`{cls.__name__}(...)` does not accept these arguments ({exc})",
                            advice) from None

    def _record(self, cls, stored, node, **emit):
        """``p = P(a, b)`` for a class whose ``__init__`` only stores its parameters
        (``self.w = w``; a dataclass): made as written, and known attribute by
        attribute, so ``p.w`` is just ``a`` and ``p``'s adjoint (``{'w': w_bar}``, from
        its fields, properties and methods) flows back into ``a`` and ``b``."""
        given = self._constructor_arguments(cls, node, f"pass {cls.__name__}'s parameters")
        elements = {attr: given[param] for attr, param in stored.items() if param in given}
        value = nodes.call(nodes.copy(node.func), [], [(k, nodes.copy(v)) for k, v in given.items()])
        emit.setdefault("target_hint", None)
        result = self._emit(value, kind="aggregate", elements=elements, **emit)
        self._escape(list(given.values()), node)
        if result is not None:
            self.aggregates[result.id] = dict(elements)
            self.records.add(result.id)
            self.containers.discard(result.id)  # an object: its methods are the user's
        return result

    def _named_tuple(self, cls, node, **emit):
        """``t = Point(a, b)`` (a ``collections.namedtuple`` or ``typing.NamedTuple``):
        a tuple whose items are known by position and by field name, so ``t.x`` and
        ``t[0]`` are just ``a``; each item's adjoint is read by either key."""
        given = self._constructor_arguments(cls, node, f"pass its fields: {', '.join(cls._fields)}")
        elements = {}
        for i, field in enumerate(cls._fields):
            if field in given:
                elements[i] = elements[field] = given[field]
        value = nodes.call(nodes.copy(node.func), [], [(k, nodes.copy(v)) for k, v in given.items()])
        emit.setdefault("target_hint", None)
        result = self._emit(value, kind="aggregate", elements=elements, **emit)
        self._escape(list(given.values()), node)
        if result is not None and len(given) == len(cls._fields):  # (defaults: read when it runs)
            self.aggregates[result.id] = {i: given[f] for i, f in enumerate(cls._fields)}
            self.named_fields[result.id] = cls._fields
        return result

    def _attribute(self, node, **emit):
        base = self._lower(node.value)
        stored = self.stored_fields.get((base.id, node.attr)) if isinstance(base, gast.Name) else None
        if stored is not None:  # `self.h = h` then `self.h` in the same block: `h` (checked)
            call = nodes.call("rt.read_back", [nodes.copy(base), nodes.const(node.attr), nodes.copy(stored)])
            return self._apply(runtime.read_back, call, [nodes.copy(base), nodes.const(node.attr),
                                                         nodes.copy(stored)], {}, node, **emit)
        fields = self.named_fields.get(base.id, ()) if isinstance(base, gast.Name) else ()
        key = fields.index(node.attr) if node.attr in fields else node.attr \
            if isinstance(base, gast.Name) and base.id in self.records else None
        if key is not None:  # a field of a named tuple or of an object made here: the item itself
            element = self._aggregate_element(base, nodes.const(key))
            if element is not None:
                if emit.get("target") is None and not emit.get("effect"):
                    return element
                return self._emit(element, kind="copy", **emit)
        value = gast.Attribute(value=base, attr=node.attr, ctx=gast.Load())
        # `.T`, `.shape`, ... are NumPy's only on an array: a model's `m.T` (a temperature)
        # or a named tuple's `shape` field is a field like any other, and a receiver not
        # known to be an array goes the field's way (dispatch.vjp_field decides when it runs).
        known = self._is_array(node.value) or self._array_field(base)
        if node.attr == "T" and known:
            return self._apply(np.transpose, value, [nodes.copy(base)], {}, node, **emit)
        if node.attr in ("real", "imag") and known:
            call = nodes.call(f"np.{node.attr}", [nodes.copy(base)])
            return self._apply(getattr(np, node.attr), call, [nodes.copy(base)], {}, node, **emit)
        if node.attr in ARRAY_ATTRIBUTES and known:
            atom = self._emit(value, kind="nondiff", rule=None, **emit)
            if node.attr == "shape" and isinstance(atom, gast.Name):
                self.tuples.add(atom.id)
            return atom
        if self._is_array(node.value):
            raise errors.at(node, f"srcgrad has no derivative rule for the array attribute `.{node.attr}`",
                            "compute it with NumPy functions, or register a rule with srcgrad.defadjoint")
        if node.attr in SHAPE_ATTRIBUTES and not self._holds_field(base):
            # A value whose kind is known only when the code runs: an array's have no derivative
            # (a float held under such a name by another object is refused when it runs).
            where = anno.get(node, "origin").where if anno.get(node, "origin") else "?"
            call = nodes.call("rt.array_attribute", [nodes.copy(base), nodes.const(node.attr), nodes.const(where)])
            return self._emit(call, kind="nondiff", rule=None, **emit)
        if self._constant_entry(base, node.attr):  # an integer field (`self.power = 2`): a constant
            return self._emit(value, kind="nondiff", rule=None, **emit)
        # A field of a structure (a model's parameter, a sub-layer).
        atom = self._apply(getattr, value, [nodes.copy(base), nodes.const(node.attr)], {}, node, **emit)
        if isinstance(base, gast.Name) and isinstance(atom, gast.Name):
            self._field_rank(atom, base, node.attr)
            self.field_reads.add(atom.id)
            self.field_of[atom.id] = (base.id, node.attr)
        return atom

    def _constant_entry(self, base, key) -> bool:
        """Whether ``base`` is a structure passed in (or read from one) whose entry ``key``
        held an integer when the code was specialised (``TreeRank.constants``)."""
        parent = self.structures.get(base.id, self.field_structures.get(base.id)) \
            if isinstance(base, gast.Name) else None
        return isinstance(parent, TreeRank) and key in parent.constants

    def _holds_field(self, base) -> bool:
        """Whether ``base`` is a structure passed in (or read from one): its attributes are its
        fields, whatever their names (a model's ``size``, a named tuple's ``shape``)."""
        return isinstance(base, gast.Name) and (base.id in self.structures or base.id in self.field_structures)

    def _field_rank(self, atom, base, key):
        """``atom`` holds the field or item ``key`` of the structure ``base``: an array
        or a structure whose ranks the specialisation knows."""
        parent = self.structures.get(base.id, self.field_structures.get(base.id))
        rank = parent.get(key) if isinstance(parent, TreeRank) else None
        if isinstance(rank, int):
            self.field_arrays.add(atom.id)
        elif isinstance(rank, TreeRank):
            self.field_structures[atom.id] = rank

    def _setattr(self, target, value_node, stmt):
        """``self.n = v``: bookkeeping on an object (a counter, a cache), run as it
        is; a differentiated value stored this way is refused in the reverse pass."""
        obj = self._lower(target.value)
        value = self._lower(value_node)
        self._stored(value)
        if isinstance(obj, gast.Name):
            self.aggregates.pop(obj.id, None)  # its fields may differ from those it was made with
        write = nodes.assign(gast.Attribute(value=nodes.copy(obj), attr=target.attr, ctx=gast.Store()),
                             nodes.copy(value))
        self._emit_stmt(write, stmt, kind="setattr", value=value, impure=True)
        # Reads of `obj.name` after it in this block are the value itself (differentiated
        # through, where the object's field would carry none); any other object's `.name`
        # may be an alias of this one: forgotten.
        self.stored_fields = {k: v for k, v in self.stored_fields.items() if k[1] != target.attr}
        self.stored_entries = {k: v for k, v in self.stored_entries.items() if k[0][1] != target.attr}
        if isinstance(obj, gast.Name) and isinstance(value, gast.Name):
            self.stored_fields[(obj.id, target.attr)] = value

    def _object_entry(self, target, value_node, stmt) -> bool:
        """``self.parameters["running_mean"] = v``, ``P["k"] = v`` on ``P = self.parameters``,
        ``self.cache[key] = v``: an entry of a dict or list an object holds (the field's kind
        known from the specialisation) replaced, as ``self.n = v`` replaces a field.  It runs
        as written (kind ``setentry``); the reverse pass keeps the value as bookkeeping, with
        no adjoint, or refuses it where the entry may be read back.  False where ``target``
        is not such an entry."""
        base = target.value
        if isinstance(base, gast.Attribute):
            if not isinstance(base.value, gast.Name) or anno.has(base.value, "resolved") \
                    or not self._holds_field(self._lower(base.value)):
                return False
        elif not isinstance(base, gast.Name) or anno.has(base, "resolved") \
                or self._object_container(self.current.get(base.id, base.id)) is False:
            return False
        value = self._lower(value_node)
        holder = self._lower(base)
        known = self._object_container(holder.id if isinstance(holder, gast.Name) else None)
        where = nodes.to_source(base)
        if known is False:
            raise errors.at(stmt, f"writing into `{where}[...]` is supported where `{where}` holds a dict "
                            "or a list (an object's cache, counters, running statistics), not an array: "
                            "srcgrad cannot follow a write into an array an object holds",
                            f"replace the field instead (`{where} = ...`), with a new array made from "
                            "the old one")
        index = self._index(target.slice)
        if isinstance(stmt, gast.AugAssign):
            # `self.stats["sum"] += v` changes an array in that entry in place, which srcgrad computes
            # as a new array (`... = self.stats["sum"] + v`): refused when it runs where the entry
            # holds an array (a number, a counter, is rebound as srcgrad does).
            origin = anno.get(stmt, "origin")
            check = nodes.call("rt.not_in_place", [nodes.copy(holder), nodes.copy(index), nodes.const(where),
                                                   nodes.const(op_symbol(stmt.op)),
                                                   nodes.const(origin.where if origin else "?")])
            self._emit(check, stmt, None, "_checked", False, kind="nondiff", rule=None, impure=True,
                       checks=holder.id)
        self._escape([value], stmt)
        self._stored(value)
        self.aggregates.pop(holder.id, None)
        container = nodes.copy(holder)
        if known is None:  # (a dict in an object, of counters or of arrays: its kind is checked when it runs)
            origin = anno.get(stmt, "origin")
            container = nodes.call("rt.entries", [container, nodes.const(where),
                                                  nodes.const(origin.where if origin else "?")])
        write = nodes.assign(gast.Subscript(value=container, slice=nodes.copy(index), ctx=gast.Store()),
                             nodes.copy(value))
        self._emit_stmt(write, stmt, kind="setentry", holder=holder.id, index=index, value=value, impure=True)
        # Reads of this entry after it in this block are the value itself (differentiated through,
        # as for `self.h = v`); the field's other entries another key may name are forgotten.
        field, key = self.field_of.get(holder.id), self._entry_key(index)
        self.stored_entries = {k: v for k, v in self.stored_entries.items() if field is None or k[0][1] != field[1]
                               or isinstance(k[1], tuple) is False and isinstance(key, tuple) is False
                               and k[1] != key}
        if field is not None and key is not None and isinstance(value, gast.Name):
            self.stored_entries[(field, key)] = value
        return True

    def _entry_key(self, index):
        """What names an entry within one block: a literal key, or ``("name", n)`` for a key
        held in the name ``n`` (one value: single assignment); None for another expression."""
        key = static_value(index)
        if type(key) in (str, int, bool):
            return key
        return ("name", index.id) if isinstance(index, gast.Name) else None

    def _object_container(self, name):
        """Whether ``name``, a field read from an object passed in, holds a dict or list: True,
        False (an array, or not a field read), or None where the specialisation does not say
        (a container of no float: counters, labels, an empty cache)."""
        if name not in self.field_reads or self.made_by.get(name, (False,))[0] or name in self.containers:
            return False
        rank = self.field_structures.get(name)
        if isinstance(rank, TreeRank) and rank.kind in ("mapping", "sequence"):
            return True
        # (In an object, a dict's ranks are an object's: which kind of structure, checked when it runs.)
        return False if name in self.field_arrays else None


def is_user_code(obj) -> bool:
    """A Python function or method that srcgrad can read and differentiate."""
    return inspect.isfunction(obj) or inspect.ismethod(obj) or (
        callable(obj) and not isinstance(obj, type) and not registry.is_numpy(obj)
        and inspect.isfunction(getattr(type(obj), "__call__", None)))


def stored_parameters(cls):
    """``{attribute: parameter}`` when making a ``cls`` only stores its parameters
    as attributes: a dataclass's own ``__init__``, or an ``__init__`` whose body is
    ``self.w = w`` lines (and a docstring); None for any other class."""
    init = getattr(cls, "__init__", None)
    if getattr(cls, "__setattr__", object.__setattr__) is not object.__setattr__ \
            or hasattr(cls, "__slots__") \
            or type(cls) is not type or cls.__new__ is not object.__new__:
        return None
    code = getattr(init, "__code__", None)
    if code is None:
        return None
    if dataclasses.is_dataclass(cls) and code.co_filename == "<string>":  # made by @dataclass
        if hasattr(cls, "__post_init__"):
            return None
        stored = {f.name: f.name for f in dataclasses.fields(cls) if f.init}
    else:
        from . import parse
        try:
            fdef = parse.transform(init)
        except errors.SrcgradError:
            return None
        args = fdef.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or not args.args:
            return None
        me, params = args.args[0].id, {a.id for a in args.args[1:]}
        stored = {}
        for stmt in fdef.body:
            if isinstance(stmt, gast.Expr) and isinstance(stmt.value, gast.Constant):
                continue  # a docstring
            if isinstance(stmt, gast.Assign) and len(stmt.targets) == 1 \
                    and isinstance(stmt.targets[0], gast.Attribute) \
                    and isinstance(stmt.targets[0].value, gast.Name) and stmt.targets[0].value.id == me \
                    and isinstance(stmt.value, gast.Name) and stmt.value.id in params \
                    and stmt.targets[0].attr not in stored:
                stored[stmt.targets[0].attr] = stmt.value.id
                continue
            return None
    if any(hasattr(inspect.getattr_static(cls, attr, None), "__get__") for attr in stored):
        return None  # a property (or another descriptor) of that name: not the stored value
    return stored


def is_named_tuple_class(obj) -> bool:
    return isinstance(obj, type) and issubclass(obj, tuple) \
        and isinstance(getattr(obj, "_fields", None), tuple)


def is_user_class(obj) -> bool:
    """A class whose instances are objects (not NumPy's, not a builtin such as ``float``)."""
    return isinstance(obj, type) and not registry.is_numpy(obj) and obj.__module__ != "builtins"
