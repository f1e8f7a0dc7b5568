"""Pass 2b — inline: a call whose target is known when compiling becomes the callee's body.

Requires: a resolved ``FunctionDef`` (``resolve``), the function, and the values
of its parameters that are objects (a model): their methods and the layers they
hold are known from them.
Guarantees: each call to a module-level function, to a method of an object
parameter, or to an object an object parameter holds (``self.conv(x)``, a layer
whose class defines ``forward``) is replaced by the callee's body, parsed from its
own source (each statement keeps its origin, so the generated code's comments say
``# layers.py:47``), with

* its locals renamed apart from the caller's names (a name keeps its own
  spelling where it is free, else takes the call's prefix: ``conv_x``);
* its parameters bound by assignment (``conv_x = x``), or replaced by the
  caller's name where the callee never assigns them; defaults and keywords too;
* its ``return`` (one, at the end: ``exits`` ran on it first) an assignment of
  the call's value, or the name it returns;
* its free names read from its own module (renamed where the caller's differ),
  and the callee's own resolved calls inlined in turn.

A loop over a list of objects that a known object holds (``for layer in
self.layers: x = layer(x)``) is unrolled: one copy of the body per item.

Calls in a statement are taken out of it in the order Python evaluates them, so
the inlined bodies run where the calls did.  Returns an :class:`Inlined`: what
the compiled code is specialised on (the class at each object path, the
function behind each method it inlined), for ``pipeline.Compiled`` to check on
every call, and the callees' free names for ``resolve.FreeNames``.

A closure (``p = lambda r: np.sum(x) / r`` made in another function) is inlined as
a function is: resolve reads the data its cells hold live (``runtime.Cells``) and guards
the functions they hold, as for the compiled function's own closure (a name of the
callee's that the caller's free names hold for another value is renamed).  Not into a
nested ``def`` of generated code (compiled on its own while its frame runs), whose
free names are that code's.

Not inlined (today's run-time call, ``dispatch.vjp_call``, stays): recursion, functions
without source, ``super()`` (its meaning is a separate frame),
``*args``/``**kwargs``, generators, decorated wrappers, callees that change an
argument or a global in place or store attributes, unresolved or run-time
targets, a default that is not a literal, and calls inside ``and``/``or``,
conditional expressions and ``while`` tests (evaluated conditionally).  Object
paths are used only while nothing else can change the object: the function
stores no attribute, and no call that is not inlined is given (part of) it.

Before/after, with ``Net.forward(self, x)`` being ``return x @ self.w``::

    def loss(model, x):                     def loss(model, x):
        return np.sum(model(x))                 model_out = x @ model.w  # its line's comment
                                                return np.sum(model_out)
"""
from __future__ import annotations

import builtins
import dataclasses
import inspect
import types

import gast
import numpy as np

from .. import anno, errors, nodes, runtime
from ..rules import registry
from . import desugar, exits, parse, resolve, validate

_MISSING = object()
_RESERVED = ("np", "rt", "cp")
# Expressions evaluated conditionally, or whose calls must stay where they are.
_OPAQUE = (gast.BoolOp, gast.IfExp, gast.Lambda, gast.Dict, gast.ListComp, gast.SetComp, gast.DictComp,
           gast.GeneratorExp)
_NOT_INLINED = (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef, gast.Lambda, gast.Global,
                gast.Nonlocal, gast.Yield, gast.YieldFrom, gast.Await, gast.ListComp, gast.SetComp,
                gast.DictComp, gast.GeneratorExp, gast.Try, gast.With, gast.Delete)
_TRANSFORMS = ("srcgrad.api", "srcgrad.higher", "srcgrad.checking", "srcgrad.dispatch", "srcgrad.pipeline")
_DEPTH = 16  # nesting of inlined calls (a chain of helpers)
_UNROLL = 64  # the most layers a loop over a model's list of layers is unrolled for


@dataclasses.dataclass
class Inlined:
    """What code with inlined calls depends on, checked before each call.

    Attributes:
        classes: ``(parameter index, path, class, length)``: the object at that
            path of that argument (attribute names, and list indices) had that
            class, and that length where it is not None (a list of layers unrolled).
        methods: ``(class, name, function)``: ``getattr(class, name)`` was that function.
        free: the callees' own free names, ``(FreeNames, {their name: the name in the code})``.
        count: how many calls were inlined.
        leaked: a call that is not inlined is given an object whose methods were:
            it may change what the object holds, so compile again without objects.
    """

    classes: dict = dataclasses.field(default_factory=dict)  # (entries as keys: each once, in order)
    methods: dict = dataclasses.field(default_factory=dict)
    free: list = dataclasses.field(default_factory=list)
    count: int = 0
    leaked: bool = False
    _names: dict = dataclasses.field(default_factory=dict, repr=False)  # class -> its names in methods

    def holds(self, args) -> bool:
        """Whether ``args`` (the compiled function's arguments) still fit the code."""
        for index, path, cls, length in self.classes:
            value = args[index]
            for attr in path:
                if type(attr) is int:
                    value = value[attr] if type(value) in (list, tuple) and attr < len(value) else _MISSING
                else:
                    value = getattr(value, attr, _MISSING)
            if type(value) is not cls or length is not None and len(value) != length:
                return False
            if length is None and self._shadowed(value, cls):
                return False  # the instance now holds a method of its own (`m.forward = ...`)
        for cls, attr, fn in self.methods:
            if getattr(cls, attr, _MISSING) is not fn:
                return False
        return True


    def _shadowed(self, obj, cls) -> bool:
        """Whether ``obj`` holds, in its own ``__dict__``, a name the code took from
        ``cls`` (its ``forward``, a method): Python then calls the instance's own."""
        names = self._names.get(cls)
        if names is None:
            names = self._names[cls] = tuple(attr for c, attr, _ in self.methods if c is cls)
        own = getattr(obj, "__dict__", None)
        return bool(own) and any(name in own for name in names)


def transform(fdef: gast.FunctionDef, fn, free: resolve.FreeNames, objects: dict, kinds=None) -> Inlined:
    """Inline in place; ``objects``: ``{parameter: value}`` for the parameters that are objects;
    ``kinds``: ``{parameter: rank}`` of those the function never assigns (``kinds_of``), which
    decide a callee's ``isinstance`` of the parameter they are given for."""
    inliner = _Inliner(fdef, fn, free, objects)
    inliner.kinds = kinds or {}
    fdef.body = inliner.block(fdef.body, [fn])
    inliner.inlined.leaked = bool(inliner.inlined.classes) and _leaks(fdef.body, inliner.seen)
    return inliner.inlined


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


class _Inliner:
    def __init__(self, fdef, fn, free, objects):
        self.fn, self.free = fn, free
        self.inlined = Inlined()
        self.taken = nodes.names_in(fdef) | set(free.names) | set(_RESERVED)
        self.own = resolve.local_names(fdef)
        params = [a.id for a in fdef.args.posonlyargs + fdef.args.args + [fdef.args.vararg]
                  + fdef.args.kwonlyargs + [fdef.args.kwarg] if a is not None]
        stored = {n.id for n in nodes.walk(fdef) if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)}
        # name -> (object, (parameter index, attributes)): objects known when compiling.
        self.known = {} if _changes_objects(fdef, objects.values()) else {
            p: (v, (params.index(p), ())) for p, v in objects.items() if p not in stored and is_object(v)}
        self.seen = dict(self.known)  # every name that held a known object
        # Fields the function itself sets (`self.h = ...`): their tests are not decided now.
        self.stored_fields = {n.attr for n in nodes.walk(fdef) if isinstance(n, gast.Attribute)
                              and isinstance(n.ctx, (gast.Store, gast.Del))}
        if any(isinstance(n, gast.Call) and anno.get(n.func, "resolved", None) in (setattr, delattr)
               for n in nodes.walk(fdef)):
            self.stored_fields = None
        self.parsed = {}  # function -> its checked tree, or None when it is not inlined

    # ---- statements -------------------------------------------------------
    def block(self, stmts, stack) -> list:
        out = []
        for stmt in stmts:
            unrolled = self._unroll(stmt, stack) if isinstance(stmt, gast.For) else None
            if unrolled is not None:
                out += unrolled
            elif isinstance(stmt, gast.If) and self._decided_by_field(stmt.test) is not None:
                # (`if self.bias is not None:` of a known layer: the branch its field decides)
                out += self.block(stmt.body if self._decided_by_field(stmt.test) else stmt.orelse, stack)
            elif isinstance(stmt, (gast.If, gast.For, gast.While)):
                before = self._hoist_from(stmt, stack) if not isinstance(stmt, gast.While) else []
                stmt.body = self.block(stmt.body, stack)
                stmt.orelse = self.block(stmt.orelse, stack)
                out += before + [stmt]
            elif isinstance(stmt, (gast.Assign, gast.AugAssign, gast.Expr, gast.Return)):
                out += self._hoist_from(stmt, stack)
                if not anno.get(stmt, "consumed"):
                    out.append(stmt)
            else:
                out.append(stmt)
        return out

    def _hoist_from(self, stmt, stack) -> list:
        """The statements that run a statement's inlined calls, in Python's order;
        the calls in ``stmt`` become the names holding their values."""
        root = stmt.test if isinstance(stmt, gast.If) else stmt.iter if isinstance(stmt, gast.For) \
            else stmt.value
        if root is None or len(stack) > _DEPTH:
            return []
        self._listed_items(root)
        if isinstance(stmt, gast.AugAssign) and any(isinstance(n, gast.Call) for n in nodes.walk(stmt.target)):
            return []
        items, parents = _calls_in_order(root, stmt)
        targets = [self._target(c) if isinstance(c, gast.Call) else None for c in items]
        targets = [t if t is not None and t.fn not in stack
                   and self._parsed(t.fn, _literal_arguments(t, c), _display_kinds(t, c, self.kinds)) is not None
                   else None
                   for t, c in zip(targets, items)]
        last = max((i for i, t in enumerate(targets) if t is not None), default=None)
        if last is None:
            return []
        if any(not isinstance(c, gast.Call) for c in items[:last]):
            return []  # a call evaluated conditionally comes first: keep the order as it is
        out = []
        for call, target in zip(items[:last + 1], targets[:last + 1]):
            if target is not None:
                whole = parents[id(call)][0] is stmt and isinstance(stmt, (gast.Assign, gast.Return)) \
                    and (isinstance(stmt, gast.Return) or len(stmt.targets) == 1
                         and isinstance(stmt.targets[0], gast.Name))
                lines, value = self._inline(call, target, stack, stmt if whole else None)
                if lines is None:  # its body cannot be inlined after all: keep the call
                    value = self._keep(call, out)
                else:
                    out += lines
            else:
                value = self._keep(call, out)
            if value is not None:
                _replace(parents, call, value)
        return out

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

    def _keep(self, call, out):
        """A call that is not inlined but runs before one that is: its value into a name."""
        name = self._fresh("_call")
        out.append(_located(nodes.assign(name, call), call))
        return nodes.name(name)

    def _unroll(self, loop, stack):
        """``for layer in self.layers: x = layer(x)`` over a list of objects that a
        known object holds: one copy of the body per item, each item read into a
        name of its own (known, so its calls are inlined); None where not."""
        it, name = loop.iter, getattr(loop.target, "id", None)
        if loop.orelse or name is None or not isinstance(it, gast.Attribute) \
                or not isinstance(it.value, gast.Name) or it.value.id not in self.known:
            return None
        obj, (index, attrs) = self.known[it.value.id]
        items = vars(obj).get(it.attr, _MISSING)
        if _descriptor(type(obj), it.attr):
            return None
        listed = getattr(type(items), "_items", None)  # `for layer in self.seq`: a Sequential's own list
        if isinstance(listed, str) and is_object(items) and not _descriptor(type(items), listed):
            self.inlined.classes[(index, attrs + (it.attr,), type(items), None)] = None
            attrs, it = attrs + (it.attr,), gast.Attribute(value=nodes.copy(it), attr=listed, ctx=gast.Load())
            items = vars(items).get(listed, _MISSING)
        if type(items) not in (list, tuple) or not 0 < len(items) <= _UNROLL \
                or not all(is_object(v) for v in items):
            return None
        inside = [n for s in loop.body for n in nodes.walk(s)]
        if any(isinstance(n, (gast.Break, gast.Continue, gast.Return, gast.FunctionDef, gast.Lambda))
               or isinstance(n, gast.Name) and n.id == name and not isinstance(n.ctx, gast.Load)
               for n in inside) or not any(isinstance(n, gast.Call) and _root(n.func) == name for n in inside):
            return None
        path = attrs + (it.attr,)
        self.inlined.classes[(index, path, type(items), len(items))] = None
        held = self._fresh(it.attr)
        out = [_located(nodes.assign(held, nodes.copy(it)), loop)]
        for k, item in enumerate(items):
            each = self._fresh(name)
            body = nodes.copy(loop.body)
            nodes.rename(body, {name: each})
            read = gast.Subscript(value=nodes.name(held), slice=nodes.const(k), ctx=gast.Load())
            out.append(_located(nodes.assign(each, read), loop))
            self.known[each] = self.seen[each] = (item, (index, path + (k,)))
            out += self.block(body, stack)
        out.append(_located(nodes.assign(name, nodes.name(each)), loop))  # what the loop leaves bound
        return out

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

    # ---- one call ---------------------------------------------------------
    def _inline(self, call, target, stack, site):
        """``(statements, value)`` that replace ``call``, or ``(None, None)``."""
        checked = self._parsed(target.fn, _literal_arguments(target, call), _display_kinds(target, call, self.kinds))
        if checked is None or any(isinstance(a, (gast.List, gast.Tuple, gast.Dict, gast.Set)) and any(
                isinstance(n, (gast.List, gast.Tuple, gast.Dict, gast.Set)) for e in gast.iter_child_nodes(a)
                for n in nodes.walk(e)) for a in call.args + [k.value for k in call.keywords]):
            # (a display in a display: the callee, compiled on its own, takes it as a
            # structure of arguments, which normalize does not follow in one function)
            return None, None
        fdef, callee_free = checked
        fdef = nodes.copy(fdef)
        args = ([target.receiver] if target.receiver is not None else []) + list(call.args)
        try:
            bound = inspect.signature(target.fn).bind(*args, **{k.arg: k.value for k in call.keywords})
        except TypeError:
            return None, None  # Python's own error comes from the call kept as it is
        defaults = {}
        for p in inspect.signature(target.fn).parameters.values():
            if p.name not in bound.arguments:
                if not _literal(p.default):
                    return None, None
                defaults[p.name] = nodes.const(p.default)
        self.inlined.count += 1
        self.inlined.classes.update(dict.fromkeys(target.classes))
        self.inlined.methods.update(dict.fromkeys(target.methods))
        stored = {n.id for n in nodes.walk(fdef) if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)}
        mapping, lines, known = {}, [], {}
        # Parameters, in order: the caller's name itself where the callee never assigns
        # it, else a local of the callee's bound to the argument.
        for p in inspect.signature(target.fn).parameters:
            if p in bound.arguments:
                arg = bound.arguments[p]
            else:
                arg = defaults[p]
            if arg is target.receiver and isinstance(arg, gast.Attribute):
                # `self.conv(x)`: the layer read once, into a name of its own.
                name = self._fresh(arg.attr)
                lines.append(_located(nodes.assign(name, nodes.copy(arg)), call))
                known[name] = (target.receiver_value, target.receiver_path)
                if p in stored:
                    mapping[p] = self._fresh(f"{target.prefix}_{p}")
                    lines.append(_located(nodes.assign(mapping[p], nodes.name(name)), call))
                else:
                    mapping[p] = name
            elif isinstance(arg, gast.Name) and p not in stored:
                mapping[p] = arg.id
            else:
                mapping[p] = self._local(p, target.prefix)
                lines.append(_located(nodes.assign(mapping[p], nodes.copy(arg)), call))
        for name in sorted(resolve.local_names(fdef) - set(mapping)):
            mapping[name] = self._local(name, target.prefix)
        renamed_free = {}
        for name, value in callee_free.names.items():
            if name in self.free.names and self.free.names[name] is value and (
                    isinstance(value, types.ModuleType) or _same_binding(self.fn, target.fn, name)):
                renamed_free[name] = name
            elif name not in self.taken and name not in self.free.names:  # (the caller's, another value)
                self.taken.add(name)
                renamed_free[name] = name
            else:
                renamed_free[name] = self._fresh(f"{name}")
            mapping[name] = renamed_free[name]
            self.free.names[renamed_free[name]] = value
        if callee_free.names or callee_free.guards:
            self.inlined.free.append((callee_free, renamed_free))
        nodes.rename(fdef.body, mapping)
        self.known.update(known)
        self.seen.update(known)
        body = fdef.body
        returned = body[-1].value if body and isinstance(body[-1], gast.Return) else nodes.const(None)
        if body and isinstance(body[-1], gast.Return):
            last, body = body[-1], body[:-1]
        else:
            last = None
        lines += self.block(body, stack + [target.fn])
        # The return: the caller's statement takes its value where the call was all of it.
        if returned is None:
            returned = nodes.const(None)
        if last is not None and not isinstance(returned, gast.Name):
            ret = gast.Return(value=returned)
            anno.inherit(ret, last)
            more = self.block([ret], stack + [target.fn])
            lines += more[:-1]
            last = more[-1]  # (its line: the innermost return whose value it now is)
            returned = last.value
        if isinstance(returned, (gast.Name, gast.Constant)) or site is None:
            if isinstance(returned, (gast.Name, gast.Constant)):
                return lines, nodes.copy(returned)
            name = self._fresh(f"{target.prefix}_out")
            lines.append(_located(anno.inherit(nodes.assign(name, returned), last), call))
            return lines, nodes.name(name)
        if isinstance(site, gast.Return):
            site.value = returned
            anno.set(site, "origin", anno.get(last, "origin"))
            return lines, None
        final = nodes.assign(nodes.copy(site.targets[0]), returned)
        anno.inherit(final, last)
        anno.set(site, "consumed", True)
        return lines + [final], None

    def _builtin_there(self, name) -> bool:
        """Whether ``name``, read by a callee, is a builtin in the caller's code too."""
        caller = self.fn
        return anno.get(name, "resolved", _MISSING) is getattr(builtins, name.id, _MISSING) \
            and name.id not in caller.__globals__ and name.id not in caller.__code__.co_freevars \
            and name.id not in self.free.names and name.id not in self.own

    def _parsed(self, fn, literals=None, kinds=None):
        """``fn``'s checked tree and free names, or None where it is not inlined; ``literals``
        (``{parameter: literal node}``, the call's) are put in and the branches they decide
        folded first, so that a branch the call never takes neither stops the inlining nor
        is differentiated (``plot(ax)`` under ``if ax:`` given ``ax=None``); ``kinds``
        (``{parameter: TreeRank}`` of the displays the call gives) decide ``isinstance``."""
        key = (fn, tuple(sorted((p, type(c.value).__name__, c.value) for p, c in (literals or {}).items())),
               tuple(sorted((p, repr(k)) for p, k in (kinds or {}).items())))
        if key in self.parsed:
            return self.parsed[key]
        self.parsed[key] = None
        code = fn.__code__
        if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS
                            | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE) \
                or code.co_freevars and self.fn.__globals__.get("__name__") == "srcgrad.generated" \
                or registry.lookup(fn) is not None or hasattr(fn, "defadjoint") \
                or runtime.is_gradient_function(fn) \
                or fn.__module__ and fn.__module__.split(".")[0] in ("numpy", "scipy", "cupy") \
                or fn.__module__ in _TRANSFORMS:  # (`grad(f)` made inside the function: called as it is)
            return None
        try:
            fdef = parse.transform(fn)
            desugar.transform(fdef, fn)
            callee_free = resolve.transform(fdef, fn)
            if literals:
                stored = {n.id for n in nodes.walk(fdef) if isinstance(n, gast.Name)
                          and isinstance(n.ctx, (gast.Store, gast.Del))}
                _put_literals(fdef.body, {p: c for p, c in literals.items() if p not in stored})
                fdef.body = _folded(fdef.body)
            if kinds:
                fold_decided_kinds(fdef, kinds)
            if not fdef.body or not isinstance(fdef.body[-1], (gast.Return, gast.Raise)):
                fdef.body.append(_located(gast.Return(value=nodes.const(None)), fdef))  # (Python's own)
            exits.transform(fdef)
            validate.transform(fdef)
        except errors.SrcgradError:
            return None  # compiled on its own at run time, as before, where the error shows
        inside = [n for s in fdef.body for n in nodes.walk(s)]
        local = resolve.local_names(fdef)
        if any(isinstance(n, _NOT_INLINED) for n in inside) \
                or (fn.__module__ or "").startswith("srcgrad") and any(isinstance(n, gast.Raise) for n in inside) \
                or any(isinstance(n, gast.Return) for s in fdef.body[:-1] for n in nodes.walk(s)) \
                or any(isinstance(n, (gast.Attribute, gast.Subscript)) and isinstance(n.ctx, gast.Store)
                       and _root(n) not in local for n in inside) \
                or any(isinstance(n, gast.Attribute) and isinstance(n.ctx, gast.Store) for n in inside) \
                or _stores_object_entries(inside) \
                or "__class__" in callee_free.names:
            return None
        # Every name it reads is its own or resolved in its module (else the caller's
        # namespace would answer for it).
        # A builtin (`range`) is the same one there unless the caller binds that name.
        if any(isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load) and n.id not in local
               and n.id not in callee_free.names and not self._builtin_there(n) for n in nodes.walk(fdef)):
            return None
        from ..analysis.mutation import _changed_in_place  # (the reading of a callee's writes)
        # A callee that changes its arguments in place (`buf.append(h)`, `y[0] = v`) is inlined:
        # the change is then the caller's own, which normalize and the sharing analysis follow
        # (or refuse) as if written there.  One that changes a global is not.
        if _changed_in_place(fdef.body, set(callee_free.names), fn):
            return None
        if self._writes_outside(fn, literals):
            return None  # (a run-time call: `dispatch.unchanging` and the reverse pass judge it there)
        self.parsed[key] = (fdef, callee_free)
        return self.parsed[key]

    @staticmethod
    def _writes_outside(fn, literals) -> bool:
        """Whether calling ``fn`` (given ``literals``) may write, in place, into what its caller
        can reach other than its arguments (a global array, through ``exec`` or ``setattr``):
        such a call stays a run-time one, which is checked there."""
        # (its raw source: resolve rewrites a global read live, `G`, as its scope's `module.G`,
        # which the analysis does not read as a global)
        from ..analysis import outside  # (read from the source, with the branches the literals decide folded)
        try:
            tree = parse.transform(fn)
        except errors.SrcgradError:
            return True
        namespace = fn.__globals__
        resolved = {id(n): namespace.get(n.func.id) for n in nodes.walk(tree)
                    if isinstance(n, gast.Call) and isinstance(n.func, gast.Name)}
        for call in nodes.walk(tree):
            if isinstance(call, gast.Call) and id(call) in resolved:
                anno.set(call.func, "resolved", resolved[id(call)])
        if literals:
            _put_literals(tree.body, literals)
            tree.body = _folded(tree.body) or [gast.Pass()]
        # (its own statements only: a function it calls is judged where it is inlined, with the
        # literals it is given, or checked when it runs)
        return bool(outside.Writes().of_tree(fn, tree, own=True))

    # ---- names ------------------------------------------------------------
    def _fresh(self, base: str) -> str:
        # `conv2`, not `conv_2`: normalize spells the versions of `conv` that way.
        return nodes.fresh_name(base, self.taken)

    def _local(self, name: str, prefix: str) -> str:
        """A callee's local: its own name where free, else prefixed with the call's (``conv_x``)."""
        if name not in self.taken:
            self.taken.add(name)
            return name
        under = "_" if name.startswith("_") else ""
        return self._fresh(f"{under}{prefix}_{name.lstrip('_')}")


def _calls_in_order(root, stmt):
    """The calls in ``root`` in the order Python evaluates them (arguments before
    the call), with an opaque expression (``a and f(x)``) that holds calls as one
    item; and each node's parent: ``{id(node): (parent, field, index)}``."""
    items, parents = [], {id(root): (stmt, _field_of(stmt, root), None)}

    def visit(node):
        for field, value in gast.iter_fields(node):
            children = value if isinstance(value, list) else [value]
            for i, child in enumerate(children):
                if isinstance(child, gast.AST):
                    parents[id(child)] = (node, field, i if isinstance(value, list) else None)
                    if isinstance(child, (gast.expr, gast.keyword)):
                        walk(child, node, field)

    def walk(node, parent=None, field=None):
        if isinstance(node, _OPAQUE) or isinstance(parent, gast.Call) and field == "func" \
                and isinstance(node, gast.Call) or _is_super(node):
            if any(isinstance(n, gast.Call) for n in nodes.walk(node)):
                items.append(node)
            return
        visit(node)
        if isinstance(node, gast.Call):
            items.append(node)
    walk(root)
    return items, parents


def _is_super(node) -> bool:
    return isinstance(node, gast.Call) and anno.get(node.func, "resolved", None) is super or \
        isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute) and _is_super(node.func.value)


def _field_of(stmt, root):
    return next(f for f in ("test", "iter", "value") if getattr(stmt, f, None) is root)


def _replace(parents, node, value):
    parent, field, index = parents[id(node)]
    if index is None:
        setattr(parent, field, value)
    else:
        getattr(parent, field)[index] = value
    parents[id(value)] = (parent, field, index)


def _located(stmt, call):
    """A statement the inliner writes (a binding): at the call's line."""
    for node in nodes.walk(stmt):
        anno.inherit(node, call)
    return stmt


def _prefix(name: str) -> str:
    """What a call's renamed locals start with: the function's or layer's name
    (``<lambda>``: ``lambda``)."""
    name = "".join(c for c in name if c.isalnum() or c == "_").strip("_")
    return name if name and not name[0].isdigit() else "f"


def _literal_arguments(target, call) -> dict:
    """``{parameter: literal}`` for the parameters ``call`` gives a literal (or leaves a
    literal default): None, a bool, a number or a string."""
    args = ([target.receiver] if target.receiver is not None else []) + list(call.args)
    try:
        signature = inspect.signature(target.fn)
        bound = signature.bind(*args, **{k.arg: k.value for k in call.keywords if k.arg is not None})
    except (TypeError, ValueError):
        return {}
    out = {}
    for p in signature.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        value = bound.arguments.get(p.name, _MISSING)
        if value is _MISSING and (p.default is None or type(p.default) in (bool, int, float, str)):
            value = nodes.const(p.default)
        if isinstance(value, gast.Constant) and (value.value is None or type(value.value) in (bool, int, float, str)):
            out[p.name] = value
    return out


def _display_kinds(target, call, known=None) -> dict:
    """``{parameter: rank}`` for the parameters ``call`` gives a display — a list or tuple
    (``"sequence"``) or a dict (``"mapping"``) — or a parameter of the compiled function whose
    rank ``known`` holds: the kind ``isinstance`` reads."""
    from ..tree import TreeRank

    args = ([target.receiver] if target.receiver is not None else []) + list(call.args)
    try:
        bound = inspect.signature(target.fn).bind(*args, **{k.arg: k.value for k in call.keywords
                                                            if k.arg is not None})
    except (TypeError, ValueError):
        return {}
    out = {p: TreeRank((), "sequence" if isinstance(v, (gast.List, gast.Tuple)) else "mapping")
           for p, v in bound.arguments.items() if isinstance(v, (gast.List, gast.Tuple, gast.Dict))}
    out.update({p: known[v.id] for p, v in bound.arguments.items()
                if isinstance(v, gast.Name) and v.id in (known or {})})
    return out


_TESTED = {gast.If: ("test",), gast.BoolOp: ("values",), gast.UnaryOp: ("operand",), gast.Call: ("args",),
           gast.IfExp: ("test",)}


def _user_function(fn) -> bool:
    return isinstance(fn, types.FunctionType) and not (fn.__module__ or "").split(".")[0] in (
        "numpy", "scipy", "cupy", "srcgrad", "builtins")


def _put_literals(stmts, literals: dict) -> None:
    """Each read of a parameter in ``literals`` (one the callee never assigns) as its literal
    where a branch tests it or a call is given it (``if ax:``, ``mode == "same"``,
    ``plot(ax, x)``); elsewhere the parameter stays, bound to it as any argument is."""
    def put(node):
        if isinstance(node, gast.Name) and node.id in literals and isinstance(node.ctx, gast.Load):
            return anno.inherit(nodes.copy(literals[node.id]), node)
        if isinstance(node, gast.Compare) and any(put(n) is not n for n in [node.left, *node.comparators]):
            # Decided by literals: its value (else left as it is: `2 is x` would be Python's warning).
            decided = _decided(gast.Compare(left=put(node.left), ops=node.ops,
                                            comparators=[put(c) for c in node.comparators]))
            return node if decided is _UNDECIDED else anno.inherit(nodes.const(decided), node)
        return node

    for parent in [n for s in stmts for n in nodes.walk(s)]:
        if isinstance(parent, gast.Call):
            if _user_function(anno.get(parent.func, "resolved", None)):  # (it may be inlined in turn)
                for k in parent.keywords:
                    k.value = put(k.value)
            else:
                continue
        for field, value in gast.iter_fields(parent):
            if field not in _TESTED.get(type(parent), ()):
                continue
            if isinstance(value, list):
                value[:] = [put(item) for item in value]
            else:
                setattr(parent, field, put(value))


def kinds_of(fdef, param_ranks: dict) -> dict:
    """``{parameter: rank}`` of the parameters ``fdef`` never assigns, whose rank is known."""
    assigned = {n.id for s in fdef.body for n in nodes.walk(s) if isinstance(n, gast.Name)
                and not isinstance(n.ctx, gast.Load)}
    return {p: r for p, r in param_ranks.items() if p not in assigned and r is not None}


def fold_decided_kinds(fdef, param_ranks: dict) -> None:
    """Each ``isinstance(p, T)`` of a parameter ``p`` the function never assigns, whose kind
    the code is specialised on and decides it, as its value, and the ``if``s it decides
    folded (``_folded``): a pytree helper's ``if isinstance(v, (list, tuple)):`` compiled
    for a list, or for an array, keeps the one branch that runs (the other, `v * v` of a
    list, would be refused).  ``param_ranks``: ``{parameter: rank}`` as the pipeline's (an
    int for an array or a number, a ``TreeRank`` for a structure)."""
    kinds = kinds_of(fdef, param_ranks)
    if not kinds:
        return
    changed = False
    for node in nodes.walk(fdef):
        for field, value in gast.iter_fields(node):
            if isinstance(value, gast.Call):
                decided = _decided_kind(value, kinds)
                if decided is not None:
                    setattr(node, field, anno.inherit(nodes.const(decided), value))
                    changed = True
    if changed:
        fdef.body = _folded(fdef.body) or [gast.Pass()]


def _decided_kind(call, kinds):
    if not (anno.get(call.func, "resolved") is isinstance and len(call.args) == 2 and not call.keywords
            and isinstance(call.args[0], gast.Name) and call.args[0].id in kinds):
        return None
    types = {anno.get(k, "resolved") for k in (call.args[1].elts if isinstance(call.args[1], gast.Tuple)
                                                 else [call.args[1]])}
    if not types or not types <= {list, tuple, dict}:
        return None
    rank = kinds[call.args[0].id]
    kind = getattr(rank, "kind", None)
    if isinstance(rank, int) or kind == "object":
        return False  # an array or a number; an object of the user's
    if kind == "sequence":
        return True if {list, tuple} <= types else False if not types & {list, tuple} else None
    if kind == "mapping":
        return True if dict in types else None
    return None


def _folded(stmts) -> list:
    """``stmts`` with each ``if`` whose test literals decide (``if ax:`` given ``ax=None``,
    ``if mode == "same":``) replaced by the branch it takes: the other never runs, so it
    is neither inlined nor differentiated (nor refused)."""
    out = []
    for stmt in stmts:
        for field in ("body", "orelse"):
            if isinstance(getattr(stmt, field, None), list) and not isinstance(stmt, gast.FunctionDef):
                setattr(stmt, field, _folded(getattr(stmt, field)))
        if not isinstance(stmt, gast.FunctionDef):
            _FoldedChoices().visit(stmt)
        decided = _decided(stmt.test) if isinstance(stmt, gast.If) else _UNDECIDED
        if decided is _UNDECIDED:
            out.append(stmt)
        else:
            out += stmt.body if decided else stmt.orelse
        if out and isinstance(out[-1], (gast.Return, gast.Raise)):
            break  # (what follows never runs)
    return out


class _FoldedChoices(gast.NodeTransformer):
    """``a if c else b`` whose test literals decide (``-np.inf if maximum else 0.0`` given
    ``maximum=True``): the branch it takes."""

    def visit_IfExp(self, node):
        self.generic_visit(node)
        decided = _decided(node.test)
        return node if decided is _UNDECIDED else (node.body if decided else node.orelse)

    def visit_Lambda(self, node):
        return node  # (its own scope: its parameters may shadow the literal's name)


_UNDECIDED = object()
_COMPARISONS = {gast.Eq: lambda a, b: a == b, gast.NotEq: lambda a, b: a != b,
                gast.Is: lambda a, b: a is b, gast.IsNot: lambda a, b: a is not b}


def _decided(test):
    """The truth of ``test`` where literals alone decide it, else ``_UNDECIDED``."""
    if isinstance(test, gast.Constant):
        return bool(test.value)
    if isinstance(test, gast.UnaryOp) and isinstance(test.op, gast.Not):
        inner = _decided(test.operand)
        return inner if inner is _UNDECIDED else not inner
    if isinstance(test, gast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _COMPARISONS \
            and isinstance(test.left, gast.Constant) and isinstance(test.comparators[0], gast.Constant):
        left, right = test.left.value, test.comparators[0].value
        if isinstance(test.ops[0], (gast.Is, gast.IsNot)) and not (left is None or right is None
                                                                   or isinstance(left, bool) or isinstance(right, bool)):
            return _UNDECIDED  # (`is` between other literals: Python's interning decides)
        return bool(_COMPARISONS[type(test.ops[0])](left, right))
    if isinstance(test, gast.BoolOp):  # (left to right: a part before the deciding one may call)
        stop = not isinstance(test.op, gast.And)
        for value in test.values:
            part = _decided(value)
            if part is _UNDECIDED or part == stop:
                return part
        return not stop
    return _UNDECIDED


def _literal(value) -> bool:
    if isinstance(value, tuple):
        return all(_literal(v) for v in value)
    return value is None or type(value) in (bool, int, float, str)


def _descriptor(cls, attr) -> bool:
    """Whether reading ``attr`` from an instance of ``cls`` may run code of the class's
    (a property or another descriptor, ``__getattribute__``): not the value stored."""
    static = inspect.getattr_static(cls, attr, None)
    return static is not None and hasattr(type(static), "__get__") or not _plain_reads(cls)


def _plain_reads(cls) -> bool:
    return inspect.getattr_static(cls, "__getattribute__") is object.__getattribute__


def _stores_object_entries(inside) -> bool:
    """Whether a callee replaces an entry of a container an object holds (``self.cache[k] = v``,
    ``P[k] = v`` on ``P = self.parameters``): state, as a stored attribute is (not inlined)."""
    fields = {t.id for n in inside if isinstance(n, gast.Assign) and isinstance(n.value, gast.Attribute)
              for t in n.targets if isinstance(t, gast.Name)}
    return any(isinstance(n, gast.Subscript) and isinstance(n.ctx, gast.Store)
               and (isinstance(n.value, gast.Attribute) or isinstance(n.value, gast.Name) and n.value.id in fields)
               for n in inside)


def _root(node):
    while isinstance(node, (gast.Attribute, gast.Subscript)):
        node = node.value
    return node.id if isinstance(node, gast.Name) else None


def _same_binding(caller, callee, name) -> bool:
    """Whether ``name`` is one global of one module in both functions."""
    return caller.__globals__ is callee.__globals__ and name not in caller.__code__.co_freevars \
        and name not in callee.__code__.co_freevars


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
    for _ in range(2):  # twice: a loop's second iteration sees what the first bound
        for stmt in nodes.statements(body):
            if isinstance(stmt, gast.Assign):
                found = _chain_value(stmt.value, values)
                if found is None and holds_object(stmt.value):  # `pair = (model.conv, x)`
                    found = _MISSING
                if found is not None:
                    # (`kh, kw = conv.kernel_size`: numbers, not objects; parts of anything else may be)
                    parts = None if isinstance(found, tuple) and not _may_hold_object(found) else _MISSING
                    for n in (n for t in stmt.targets for n in nodes.walk(t)):
                        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store):
                            values[n.id] = found if isinstance(stmt.targets[0], gast.Name) else parts
            elif isinstance(stmt, gast.For) and holds_object(stmt.iter):
                for n in nodes.walk(stmt.target):
                    if isinstance(n, gast.Name):
                        values[n.id] = _MISSING
    for call in (n for s in body for n in nodes.walk(s) if isinstance(n, gast.Call)):
        if registry.lookup(anno.get(call.func, "resolved", None)) is not None:
            continue
        arguments = call.args + [k.value for k in call.keywords]
        if isinstance(call.func, gast.Attribute) and any(map(holds_object, arguments)) is False:
            # (`self.history.append(h.mean())`: a list of the object's that holds no layer, given
            # none, stays one: the object's layers are the same)
            held = _chain_value(call.func.value, values)
            if type(held) in (list, dict) and not any(map(_may_hold_object, held.values() if type(held) is dict
                                                          else held)):
                continue
        if any(holds_object(part) for part in arguments + [call.func]):
            return True
    return False


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
