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

A helper of the module inlined (a method of an object parameter, ``model(x)`` with
``Net.forward`` returning ``x @ self.w``, becomes ``x @ model.w`` the same way); the
callee's ``y`` is renamed apart from the caller's, its return is the caller's assignment.

Before::

    def affine(x, w):
        y = x @ w
        return y + 1.0

    def loss(x, w):
        y = affine(x, w)
        return np.sum(y * y)

After::

    def loss(x, w):
        affine_y = x @ w
        y = affine_y + 1.0
        return np.sum(y * y)
"""
from __future__ import annotations

import dataclasses
import inspect
import types

import gast
import numpy as np

from .. import anno, nodes
from . import resolve
from .folding import fold_decided_kinds, kinds_of  # noqa: F401 - the pipeline's, through this module
from .inline_callees import InlinedCallees, _located
from .inline_objects import (_MISSING, KnownObjects, _changes_objects, _descriptor, _leaks, _root,
                             is_object)  # (is_object: the pipeline's too)

_RESERVED = ("np", "rt", "cp")
# Expressions evaluated conditionally, or whose calls must stay where they are.
_OPAQUE = (gast.BoolOp, gast.IfExp, gast.Lambda, gast.Dict, gast.ListComp, gast.SetComp, gast.DictComp,
           gast.GeneratorExp)
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


class _Inliner(KnownObjects, InlinedCallees):
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
        renamed_free = self._free_names_of(callee_free, target)
        mapping.update(renamed_free)
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

    def _free_names_of(self, callee_free, target) -> dict:
        """The names the callee's free names take in the caller: their own where they denote the
        same thing there, or where the caller has no such name, else fresh ones."""
        renamed_free = {}
        for name, value in callee_free.names.items():
            if name in self.free.names and self.free.names[name] is value and (
                    isinstance(value, types.ModuleType) or _same_binding(self.fn, target.fn, name)):
                renamed_free[name] = name
            elif name == "np" and value is np and name not in self.free.names and name not in self.own:
                # (NumPy under its usual name, `np` in layers.py: the generated code's own `np`, so
                # `np.inf` stays `np.inf`; a callee's local of that name is renamed, `np` being taken)
                renamed_free[name] = name
            elif name not in self.taken and name not in self.free.names:  # (the caller's, another value)
                self.taken.add(name)
                renamed_free[name] = name
            else:
                renamed_free[name] = self._fresh(f"{name}")
            self.free.names[renamed_free[name]] = value
        return renamed_free

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


def _literal(value) -> bool:
    if isinstance(value, tuple):
        return all(_literal(v) for v in value)
    return value is None or type(value) in (bool, int, float, str)


def _same_binding(caller, callee, name) -> bool:
    """Whether ``name`` is one global of one module in both functions."""
    return caller.__globals__ is callee.__globals__ and name not in caller.__code__.co_freevars \
        and name not in callee.__code__.co_freevars


