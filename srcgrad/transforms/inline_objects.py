"""What the inliner knows of the objects (models) a function is given, when compiling.

Requires: a resolved ``FunctionDef`` and ``{parameter: value}`` of its object parameters
(``known``: ``{name: (object, (parameter index, path))}``), as ``inline._Inliner`` holds them.
Guarantees: a call's target where it is known (a function, a method of a known object, a layer it
holds: ``KnownObjects._target``), ``obj.field is None`` tests its fields decide, and the chain of
fields and constant indices each rests on, recorded in ``Inlined.classes`` to be checked at every
call; ``_changes_objects``: whether the function may change which objects they hold, ``_leaks``:
whether a call that is not inlined is given one (then none is taken as known).
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import types

import gast
import numpy as np

from .. import anno, errors, nodes
from ..rules import registry
from . import parse

_MISSING = object()


def is_object(value) -> bool:
    """An instance of a class of the user's (a model), whose methods can be inlined."""
    cls = type(value)
    return hasattr(value, "__dict__") and not isinstance(value, (type, types.FunctionType, types.ModuleType,
                                                                 types.MethodType)) \
        and cls.__module__ not in ("builtins",) and not registry.is_numpy(cls)


@dataclasses.dataclass
class _Target:
    fn: types.FunctionType
    prefix: str
    receiver: gast.expr | None = None   # bound to the first parameter (a method's self)
    receiver_path: tuple | None = None  # (parameter index, attributes) of the receiver object
    receiver_value: object = None
    classes: list = dataclasses.field(default_factory=list)  # what the code is specialised on
    methods: list = dataclasses.field(default_factory=list)  # (see Inlined), once it is inlined


class KnownObjects:
    """A mixin of ``inline._Inliner``: the objects it knows, and the call targets they decide."""

    def _located(self, node):
        """``(object, (parameter index, path))`` of ``m.a.b[0]``, a chain of fields and constant
        list indices from a known object, or None."""
        if isinstance(node, gast.Name):
            return self.known.get(node.id)
        if isinstance(node, gast.Attribute):
            base = self._located(node.value)
            if base is None or not hasattr(base[0], "__dict__") or _descriptor(type(base[0]), node.attr):
                return None
            value = vars(base[0]).get(node.attr, _MISSING)
            return None if value is _MISSING else (value, (base[1][0], base[1][1] + (node.attr,)))
        k = _int_index(node.slice) if isinstance(node, gast.Subscript) else None
        if k is not None:
            base = self._located(node.value)
            if base is None or type(base[0]) not in (list, tuple) or not -len(base[0]) <= k < len(base[0]):
                return None
            k %= len(base[0])
            node.slice = nodes.const(k)  # (`[-1]` as the index it is: the ranks read constant indices)
            self.inlined.classes[(base[1][0], base[1][1], type(base[0]), len(base[0]))] = None
            return base[0][k], (base[1][0], base[1][1] + (k,))
        return None

    def _decided_by_field(self, test):
        """True or False for ``obj.field is None`` / ``is not None`` (``not`` of one) where the
        field of a known object holds None or an array, a number, a layer: decided when
        compiling, the field's type guarded (a bias set to None later compiles the code
        again); None for any other test."""
        if isinstance(test, gast.UnaryOp) and isinstance(test.op, gast.Not):
            inner = self._decided_by_field(test.operand)
            return None if inner is None else not inner
        if not (isinstance(test, gast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (gast.Is, gast.IsNot))
                and isinstance(test.comparators[0], gast.Constant) and test.comparators[0].value is None
                and isinstance(test.left, gast.Attribute)) \
                or self.stored_fields is None or test.left.attr in self.stored_fields:
            return None
        located = self._located(test.left)
        if located is None:
            return None
        value, (index, path) = located
        if value is not None and not isinstance(value, (np.ndarray, int, float, str)) and not is_object(value):
            return None
        self.inlined.classes[(index, path, type(value), None)] = None
        return (value is None) == isinstance(test.ops[0], gast.Is)

    def _listed_items(self, root):
        """``self.seq[0]`` of a known object whose class lists its items in a field of its own
        (a ``Sequential``'s ``layers``: ``_items``) reads ``self.seq.layers[0]``, that list's
        item, its class guarded (Python would run the class's ``__getitem__``, which does so)."""
        for node in list(nodes.walk(root)):
            if not (isinstance(node, gast.Subscript) and isinstance(node.ctx, gast.Load)) \
                    or isinstance(node.slice, gast.Slice):  # (a slice of a Sequential is a Sequential)
                continue
            located = self._located(node.value)
            if located is None:
                continue
            obj, (index, path) = located
            listed = getattr(type(obj), "_items", None)
            if isinstance(listed, str) and is_object(obj) and not _descriptor(type(obj), listed) \
                    and type(vars(obj).get(listed)) in (list, tuple):
                self.inlined.classes[(index, path, type(obj), None)] = None
                node.value = gast.Attribute(value=node.value, attr=listed, ctx=gast.Load())

    # ---- targets ----------------------------------------------------------
    def _target(self, call) -> _Target | None:
        if any(isinstance(a, gast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
            return None
        func = call.func
        value = anno.get(func, "resolved", _MISSING)
        if value is not _MISSING:
            if isinstance(value, types.FunctionType) and isinstance(func, (gast.Name, gast.Attribute)):
                return _Target(value, _prefix(value.__name__))
            return None
        if isinstance(func, gast.Name) and func.id in self.known:
            obj, path = self.known[func.id]
            return self._object_call(obj, path, func, _prefix(func.id))
        if isinstance(func, gast.Subscript):  # `self.layers[0](x)`
            located = self._located(func)
            if located is not None and is_object(located[0]):
                return self._object_call(located[0], located[1], func, _prefix(type(located[0]).__name__.lower()))
        if isinstance(func, gast.Attribute) and isinstance(func.value, gast.Name) and func.value.id in self.known:
            obj, (index, attrs) = self.known[func.value.id]
            own = vars(obj)
            if func.attr in own:
                if _descriptor(type(obj), func.attr) or not is_object(own[func.attr]):
                    return None
                return self._object_call(own[func.attr], (index, attrs + (func.attr,)), func, _prefix(func.attr))
            method = inspect.getattr_static(type(obj), func.attr, None)
            if isinstance(method, types.FunctionType) and _plain_reads(type(obj)):
                return _Target(method, _prefix(func.attr), func.value, (index, attrs), obj,
                               [(index, attrs, type(obj), None)], [(type(obj), func.attr, method)])
        return None

    def _object_call(self, obj, path, receiver, prefix) -> _Target | None:
        """Calling an object: its class's ``__call__``, or ``forward`` for an ``nn.Module``."""
        cls = type(obj)
        call = inspect.getattr_static(cls, "__call__", None)
        if not isinstance(call, types.FunctionType) or "forward" in vars(obj) or "__call__" in vars(obj) \
                or not _plain_reads(cls):
            return None
        target, chain = call, [("__call__", call)]
        if getattr(call, "__srcgrad_calls_forward__", False):
            target = inspect.getattr_static(cls, "forward", None)
            if not isinstance(target, types.FunctionType) or getattr(target, "__srcgrad_abstract__", False):
                return None
            chain.append(("forward", target))
        return _Target(target, prefix, receiver, path, obj, [(path[0], path[1], cls, None)],
                       [(cls, name, f) for name, f in chain])


def _prefix(name: str) -> str:
    """What a call's renamed locals start with: the function's or layer's name
    (``<lambda>``: ``lambda``)."""
    name = "".join(c for c in name if c.isalnum() or c == "_").strip("_")
    return name if name and not name[0].isdigit() else "f"


def _descriptor(cls, attr) -> bool:
    """Whether reading ``attr`` from an instance of ``cls`` may run code of the class's
    (a property or another descriptor, ``__getattribute__``): not the value stored."""
    static = inspect.getattr_static(cls, attr, None)
    return static is not None and hasattr(type(static), "__get__") or not _plain_reads(cls)


def _plain_reads(cls) -> bool:
    return inspect.getattr_static(cls, "__getattribute__") is object.__getattribute__


def _root(node):
    while isinstance(node, (gast.Attribute, gast.Subscript)):
        node = node.value
    return node.id if isinstance(node, gast.Name) else None


def _leaks(body, known) -> bool:
    """Whether a call that is not inlined (and is not NumPy's, or another function
    with a rule) is given a known object or an object it holds: it could change
    which layers the object holds while the code runs."""
    values = {name: value for name, (value, _) in known.items()}

    def holds_object(node):
        # A whole chain is one value: `model.w` is an array, though `model` is an object.
        if isinstance(node, (gast.Name, gast.Attribute, gast.Subscript, gast.Starred)):
            value = _chain_value(node, values)
            if value is not None:
                return _may_hold_object(value)
        return any(holds_object(child) for child in gast.iter_child_nodes(node))
    def may_be_object(node):
        # (what a layer whose call keeps its layers returns, BatchNorm's `y`, is no object either)
        if isinstance(node, gast.Call) and (_layer_call(node, values, holds_object) or _numpys(node)):
            return False
        if isinstance(node, (gast.BinOp, gast.UnaryOp)):
            return any(map(may_be_object, [getattr(node, f) for f in ("left", "right", "operand") if hasattr(node, f)]))
        return holds_object(node)

    def bind(stmt):
        if isinstance(stmt, gast.Assign):
            found = _chain_value(stmt.value, values)
            if found is None and may_be_object(stmt.value):  # `pair = (model.conv, x)`
                found = _MISSING
            if found is not None:  # (else: what the name held before stays, the safe side)
                # (`kh, kw = conv.kernel_size`: numbers, not objects; parts of anything else may be)
                parts = None if isinstance(found, tuple) and not _may_hold_object(found) else _MISSING
                for n in (n for t in stmt.targets for n in nodes.walk(t)):
                    if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store):
                        values[n.id] = found if isinstance(stmt.targets[0], gast.Name) else parts
        elif isinstance(stmt, gast.For) and holds_object(stmt.iter):
            for n in nodes.walk(stmt.target):
                if isinstance(n, gast.Name):
                    values[n.id] = _MISSING

    def leaks_at(stmt) -> bool:
        own = [getattr(stmt, "iter", None) or stmt.test] if isinstance(stmt, (gast.For, gast.While, gast.If)) \
            else [stmt]
        return any(_call_leaks(call, values, holds_object) for part in own for n in [part]
                   for call in nodes.walk(n) if isinstance(call, gast.Call))
    # What each call is given is read where it is made (`out = model.bn(out)` then binds `out` to
    # what may be an object, after the call); then again, in a loop, with what a later statement
    # of the loop (or of the function) bound: its next iteration may see that.
    looped = {id(s) for loop in nodes.statements(body) if isinstance(loop, (gast.For, gast.While))
              for s in nodes.statements(loop.body + loop.orelse)}
    for stmt in nodes.statements(body):
        if leaks_at(stmt):
            return True
        bind(stmt)
    for stmt in nodes.statements(body):
        bind(stmt)
    return any(leaks_at(stmt) for stmt in nodes.statements(body) if id(stmt) in looped)


def _call_leaks(call, values, holds_object) -> bool:
    """Whether ``call`` (not inlined, not a function with a rule) is given a known object or one it
    holds, or is one's method, given ``values`` (what each name holds here)."""
    if registry.lookup(anno.get(call.func, "resolved", None)) is not None:
        return False
    arguments = call.args + [k.value for k in call.keywords]
    if isinstance(call.func, gast.Attribute) and any(map(holds_object, arguments)) is False:
        # (`self.history.append(h.mean())`: a list of the object's that holds no layer, given
        # none, stays one: the object's layers are the same)
        held = _chain_value(call.func.value, values)
        if type(held) in (list, dict) and not any(map(_may_hold_object, held.values() if type(held) is dict
                                                      else held)):
            return False
    if any(holds_object(part) for part in arguments + [call.func]):
        return not _layer_call(call, values, holds_object)
    return False


def _numpys(call) -> bool:
    """Whether ``call`` is NumPy's (``np.tanh(...)``): it returns an array or a number."""
    resolved = anno.get(call.func, "resolved", None)
    return isinstance(resolved, np.ufunc) or (getattr(resolved, "__module__", None) or "").split(".")[0] == "numpy"


def _layer_call(call, values, holds_object) -> bool:
    """Whether ``call`` calls a known layer whose call keeps the layers it holds and returns
    none of them (BatchNorm keeping its running statistics), given no object: it is called
    when the code runs, and the guards after the call check what the code was compiled for."""
    held = _chain_value(call.func, values)
    arguments = call.args + [k.value for k in call.keywords]
    return is_object(held) and not any(map(holds_object, arguments)) and _changes_no_layer(held)


@functools.lru_cache(maxsize=256)
def _parsed_method(method):
    """``method``'s source as a tree (read, not changed), once per method; None without source."""
    try:
        return parse.transform(method)
    except errors.SrcgradError:
        return None


def _changes_no_layer(layer) -> bool:
    """Whether calling ``layer`` (its ``__call__``, or the ``forward`` that a Module's
    ``__call__`` runs) stores nothing under a field that holds an object (its stores are
    bookkeeping: a cache, running statistics) and returns no object it holds."""
    cls = type(layer)
    call = getattr(cls, "__call__", None)
    method = getattr(cls, "forward", None) if getattr(call, "__srcgrad_calls_forward__", False) else call
    if not isinstance(method, types.FunctionType):
        return False
    fdef = _parsed_method(method)
    if fdef is None:
        return False
    holding = _fields_holding_objects([layer])
    def an_object(node):  # (`return self`, `return self.conv`, `return x, self.cache`)
        return isinstance(node, gast.Name) and node.id in ("self", fdef.args.args[0].id if fdef.args.args else "self") \
            or isinstance(node, gast.Attribute) and node.attr in holding \
            or isinstance(node, (gast.Tuple, gast.List)) and any(map(an_object, node.elts))
    returns = [n.value for n in nodes.walk(fdef) if isinstance(n, gast.Return) and n.value is not None]
    return not _changes_objects(fdef, [layer]) and not any(map(an_object, returns))


_NONE = object()  # (a field holding None: a value, not an object; see _chain_value)


def _may_hold_object(value) -> bool:
    if type(value) is tuple:  # (a layer's kernel size or axes: numbers; a list could be given a layer)
        return any(_may_hold_object(item) for item in value)
    return value is _MISSING or is_object(value) or isinstance(value, (list, tuple, dict))


def _chain_value(node, values):
    """The value of ``name.attr[...]...`` rooted at a known object, ``_MISSING`` where
    it cannot be read now, None for any other expression."""
    if isinstance(node, gast.Starred):
        node = node.value
    if isinstance(node, gast.Name):
        return values.get(node.id)
    if isinstance(node, gast.Attribute):
        base = _chain_value(node.value, values)
        if base is None or base is _MISSING:
            return base
        if hasattr(base, "__dict__") and not isinstance(base, np.ndarray):
            value = vars(base).get(node.attr, _MISSING)
            return _NONE if value is None else value  # (None: "not a chain" below)
        return None  # an array's (or a number's) attribute or method: no object of the user's
    if isinstance(node, gast.Subscript):
        base = _chain_value(node.value, values)
        if base is None or base is _MISSING:
            return base
        if isinstance(base, np.ndarray) and base.dtype != object:
            return None  # (an array's entries or rows: no object of the user's)
        index = node.slice.value if isinstance(node.slice, gast.Constant) else None
        return base[index] if type(base) in (list, tuple) and type(index) is int and -len(base) <= index < len(base) \
            else _MISSING
    return None


def _int_index(node):
    """The integer a constant index spells (``0``, ``-1``), or None."""
    if isinstance(node, gast.UnaryOp) and isinstance(node.op, gast.USub):
        k = _int_index(node.operand)
        return None if k is None else -k
    return node.value if isinstance(node, gast.Constant) and type(node.value) is int else None


def _changes_objects(fdef, objects=()) -> bool:
    """Whether the function may change which objects its objects hold (``m.conv = c``,
    ``del m.conv``, ``setattr``): then none of their methods is taken as known.  A store
    into a field under which none of ``objects`` (nor what they hold) keeps an object
    (``self.cache = h``, ``self.calls += 1``) changes no layer: a field it makes holds no
    object the code was compiled for (a call through it is dispatched when it runs)."""
    holding = None
    for node in nodes.walk(fdef):
        if isinstance(node, gast.Attribute) and isinstance(node.ctx, gast.Store):
            if holding is None:
                holding = _fields_holding_objects(objects)
            if node.attr in holding:
                return True
        elif isinstance(node, gast.Attribute) and isinstance(node.ctx, gast.Del):
            return True
        if isinstance(node, gast.Call) and anno.get(node.func, "resolved", None) in (setattr, delattr):
            return True
    return False


def _fields_holding_objects(objects) -> set:
    """The attribute names under which ``objects``, or objects they hold (in fields, lists,
    tuples and dicts), hold an object of the user's or a container: one walk of the models."""
    names, seen, stack = set(), set(), list(objects)
    while stack:
        value = stack.pop()
        if id(value) in seen:
            continue
        seen.add(id(value))
        if isinstance(value, (list, tuple)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
        elif is_object(value):
            for key, field in vars(value).items():
                if is_object(field) or isinstance(field, (list, tuple, dict)):
                    names.add(key)
                    stack.append(field)
    return names
