"""Pass 1b — desugar: Python's conveniences as the plain statements later passes know.

Requires: the parsed ``FunctionDef`` (before resolve: the names it makes are then
the function's own like any other).
Guarantees: in the function's own code (not in a nested ``def``), no list, set
or dict comprehension, no generator expression, no walrus (``:=``) and no chained
assignment; each becomes statements before the one it was in, at its line:

- ``[e for x in xs if c]`` becomes a loop that appends to a new list (``{e for ...}``
  the same, then ``set(...)``; ``{k: v for ...}`` a loop that writes ``d[k] = v`` into a new dict);
  a generator passed to ``sum`` becomes a running total (``sum`` is
  ``start + e0 + e1 + ...``, in that order); one passed to ``max``, ``min``,
  ``list``, ``tuple``, ``sorted``, ``any`` or ``all`` becomes a list.  A generator
  anywhere else is refused (``np.stack`` and ``np.array`` do not take one either);
- a comprehension's variables are its own (Python 3): one whose name the function
  uses elsewhere is renamed, so it neither leaks nor overwrites the function's;
- a generator function returns the list of what it yields (``yield e`` is an append to
  it; see ``_collect_generator``);
- ``f = lambda v: e`` becomes ``def f(v): return e`` (a nested function), and a lambda
  elsewhere in an expression (``(lambda t: t * w)(x)``, ``fs.append(lambda v, k=k: v * k)``)
  such a function made by a statement of its own first, ``_lambda``;
- ``assert c, m`` becomes ``if not c: raise AssertionError(m)`` (``raise`` is kept:
  both run in the forward sweep, with no adjoint);
- ``[a, *xs, b]`` becomes ``[a] + list(xs) + [b]`` and ``(*a, *b)`` ``tuple(a) + tuple(b)``;
- ``zip(...)``/``enumerate(...)`` read whole by such a consumer (``dict(zip(keys, values))``) the
  list of their tuples, and ``dict(pairs, k=v)`` ``{**dict(pairs), "k": v}``;
- ``a = b = e`` becomes ``a = e; b = a``; ``(n := e)`` becomes ``n = e`` and ``n``;
  ``a, b = e1, e2`` (no item reading a target) becomes ``a = e1; b = e2``;
- ``first, *rest = xs`` becomes ``first, = xs[:1]`` and ``rest = [e for e in xs[1:]]`` (a
  target after the star unpacks the slice at the end: lengths checked by Python);
- a tuple inside a target becomes a name unpacked after it: ``a, (b, c) = e`` is
  ``a, _b_c = e; b, c = _b_c``; an item or attribute in it a name assigned after it
  (``hs[i], cs[i] = h, c`` is ``_hs_i, _cs_i = h, c; hs[i] = _hs_i; cs[i] = _cs_i``),
  ``for i, (w, b) in enumerate(layers):`` unpacks
  ``_w_b`` first in the body, ``for a, *b in rows:`` is ``for _item in rows: a, *b = _item``
  (normalize unpacks a loop's flat tuple of targets, ``for w, b in layers``, itself);
- ``a if c else [...]`` (a branch holding what this pass lowers) becomes an ``if``
  statement assigning either branch's value to a name;
- a nested function that is only called takes what it reads of this function's
  names as its first parameters, passed at each call (lambda lifting, ``_lift_closures``).

What the statement evaluated before such an expression (a call, ``f(x) + [...]``)
is computed first into a name, so Python's order of calls holds.  One evaluated
only on some paths other than a conditional expression's branch (``x and [...]``)
or again at each iteration (a ``while`` test) is refused at its line.

Before/after::

    h = [layer(x) for layer in self.layers]     h = []
                                                 for layer in self.layers:
                                                     h.append(layer(x))
    s = sum(np.sum(w ** 2) for w in ws)          s = 0
                                                 for w in ws:
                                                     s = s + np.sum(w ** 2)
"""
from __future__ import annotations

import functools
import inspect
import sys

import gast

from .. import anno, errors, nodes
from . import iterators

_COMPREHENSIONS = (gast.ListComp, gast.SetComp, gast.DictComp, gast.GeneratorExp)
_LOWERED = _COMPREHENSIONS + (gast.NamedExpr,)
# Builtins that iterate over what they are given, once and whole: a generator may be a list there.
_CONSUMERS = ("max", "min", "list", "tuple", "sorted", "any", "all", "set", "dict")
# Calls this pass may rewrite (a function with none of these, and nothing else it lowers, is left as it is).
_DESUGARED_CALLS = ("map", "filter", "reduce", "partial", "iter", "zip", "enumerate", "dict", "extend")


def transform(fdef: gast.FunctionDef, fn=None, param_ranks=None) -> None:
    """Desugar ``fdef``'s body in place; ``fn``, the function, tells whether ``sum`` is the builtin;
    ``param_ranks`` (the specialisation's, where known) which parameters hold arrays or sequences."""
    stepped = _generators_read_by_next(fdef, fn)
    _check_generators_read_once(fdef, fn, stepped)
    sequences = {p for p, r in zip(_parameter_names(fdef.args), param_ranks or ())
                 if isinstance(r, int) and r >= 1 or getattr(r, "kind", None) == "sequence"}
    iterators.transform(fdef, fn, sequences)  # (`it = iter(xs)`, `next(it)`, `for x in it`: before loops lower)
    for d in [n for n in nodes.walk(fdef) if isinstance(n, gast.FunctionDef)]:
        try:
            _collect_generator(d)
        except errors.UserCodeError:
            if d is fdef:
                raise  # (a nested one stays a generator: refused only if it is differentiated)
    if not any(isinstance(n, _LOWERED + (gast.Assert, gast.With, gast.IfExp, gast.FunctionDef, gast.Lambda))
               or isinstance(n, gast.Call) and isinstance(n.func, (gast.Name, gast.Attribute))
               and _last_name(n.func) in _DESUGARED_CALLS
               or isinstance(n, gast.Assign) and (len(n.targets) > 1 or _starred_target(n.targets[0])
                                                  or _nested_target(n.targets[0]) or isinstance(n.value, gast.Lambda)
                                                  or _parallel(n))
               or isinstance(n, gast.For) and isinstance(n.target, (gast.Tuple, gast.List))
               or isinstance(n, (gast.Tuple, gast.List)) and isinstance(n.ctx, gast.Load)
               and any(isinstance(e, gast.Starred) for e in n.elts)
               for n in nodes.own_nodes(fdef)):
        return
    desugar = _Desugar(fdef, fn)
    fdef.body = desugar.block(fdef.body)
    _call_partials(fdef, desugar)
    _lift_closures(fdef, desugar)


def _list_names(fdef) -> set:
    """The names ``fdef`` binds to lists it makes only (``out = []``, a list comprehension,
    ``list(...)``), never to anything else."""
    made, other = set(), set()
    for n in nodes.walk(fdef):
        if isinstance(n, gast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], gast.Name):
            value = n.value
            is_list = isinstance(value, (gast.List, gast.ListComp)) or isinstance(value, gast.Call) \
                and isinstance(value.func, gast.Name) and value.func.id == "list"
            (made if is_list else other).add(n.targets[0].id)
        elif isinstance(n, gast.Assign):  # (a name in a tuple of targets: anything)
            other.update(t.id for target in n.targets for t in nodes.walk(target) if isinstance(t, gast.Name))
    stored_elsewhere = {n.id for s in nodes.walk(fdef) if isinstance(s, (gast.For, gast.AugAssign, gast.With))
                        for n in nodes.walk(s.target if isinstance(s, (gast.For, gast.AugAssign)) else s)
                        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)}
    params = set(_parameter_names(fdef.args))
    return made - other - stored_elsewhere - params


def _extended_by_items(stmt, lists):
    """The list name of ``xs.extend(items)`` (a statement) on a list made here, given items
    that are not a display; else None."""
    call = stmt.value if isinstance(stmt, gast.Expr) else None
    if isinstance(call, gast.Call) and isinstance(call.func, gast.Attribute) and call.func.attr == "extend" \
            and isinstance(call.func.value, gast.Name) and call.func.value.id in lists \
            and len(call.args) == 1 and not call.keywords \
            and not isinstance(call.args[0], (gast.List, gast.Tuple, gast.Starred)):
        return call.func.value.id
    return None


class _Desugar:
    def __init__(self, fdef, fn):
        self.fn = fn
        self.list_names = _list_names(fdef)
        self.taken = nodes.names_in(fdef) | {fdef.name}
        local = {n.id for n in nodes.walk(fdef) if isinstance(n, gast.Name) and not isinstance(n.ctx, gast.Load)}
        self.builtin = {name for name in ("sum", "map", "filter", "zip", "iter", "enumerate") + _CONSUMERS if name not in local and (
            fn is None or name not in fn.__globals__ and name not in fn.__code__.co_freevars)}
        self.local = local
        # A comprehension variable keeps its name where the function uses it nowhere else.
        self.elsewhere = _names_outside_comprehensions(fdef)

    # ---- statements -------------------------------------------------------
    def block(self, stmts) -> list:
        out = []
        for stmt in stmts:
            self.statement(stmt, out)
        return out

    def statement(self, stmt, out):
        if isinstance(stmt, gast.FunctionDef):
            out.append(stmt)
            return
        extended = _extended_by_items(stmt, self.list_names)
        if extended is not None:
            # `out.extend(flatten(child))` on a list made here: the items known when it runs only,
            # appended one by one (what `extend` does)
            item = self.fresh("_item")
            append = gast.Expr(value=nodes.call(gast.Attribute(value=nodes.name(extended), attr="append",
                                                               ctx=gast.Load()), [nodes.name(item)]))
            loop = gast.For(target=nodes.name(item, "store"), iter=stmt.value.args[0],
                            body=[_at(append, stmt)], orelse=[], type_comment=None)
            self.statement(_at(loop, stmt), out)
            return
        if isinstance(stmt, gast.With):
            # (exits would turn these into flags that skip the rest of the body: and `__exit__`.)
            leaving = next((n for n in _leaving(stmt.body, loop=False)), None)
            if leaving is not None:
                raise errors.at(leaving, f"srcgrad cannot leave a `with` block early (`{type(leaving).__name__.lower()}`"
                                ") yet", "set a flag in the block and act on it after the block")
        if isinstance(stmt, gast.Assert):
            if not sys.flags.optimize:  # (`python -O` drops asserts: so does the gradient)
                failed = gast.Raise(exc=nodes.call("AssertionError", [stmt.msg] if stmt.msg else []), cause=None)
                test = gast.UnaryOp(op=gast.Not(), operand=stmt.test)
                self.statement(_at(gast.If(test=test, body=[failed], orelse=[]), stmt), out)
            return
        if isinstance(stmt, gast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], gast.Name) \
                and isinstance(stmt.value, gast.Lambda):
            lam = stmt.value  # `act = lambda v: ...` is `def act(v): return ...`, which srcgrad supports
            made = gast.FunctionDef(name=stmt.targets[0].id, args=lam.args, body=[gast.Return(value=lam.body)],
                                    decorator_list=[], returns=None, type_comment=None, type_params=[])
            out.append(anno.set(_at(made, stmt), "lambda", True))
            return
        if isinstance(stmt, gast.Assign) and len(stmt.targets) > 1:
            self.chained(stmt, out)
            return
        if isinstance(stmt, gast.Assign) and _parallel(stmt):
            # `hs, cs = [], []` is `hs = []; cs = []`: each name then holds its own display
            # (a list normalize follows through appends) rather than an item of a tuple.
            for target, value in zip(stmt.targets[0].elts, stmt.value.elts):
                self.statement(_at(gast.Assign(targets=[target], value=value, type_comment=None), stmt), out)
            return
        if isinstance(stmt, gast.Assign) and _starred_target(stmt.targets[0]):
            self.starred(stmt, out)
            return
        if isinstance(stmt, gast.Assign) and _nested_target(stmt.targets[0]):
            # `a, (b, c) = e` is `a, _b_c = e; b, c = _b_c`, `hs[i], cs[i] = h, c` is
            # `_hs_i, _cs_i = h, c; hs[i] = _hs_i; cs[i] = _cs_i` (Python binds left to right).
            flat, inner = self.flattened(stmt.targets[0], stmt)
            self.statement(_at(gast.Assign(targets=[flat], value=stmt.value, type_comment=None), stmt), out)
            for unpack in inner:
                self.statement(unpack, out)
            return
        if isinstance(stmt, gast.For):
            self.lazy_loop(stmt, out)
        if isinstance(stmt, gast.For) and isinstance(stmt.target, (gast.Tuple, gast.List)) \
                and (_nested_target(stmt.target) or _starred_target(stmt.target)):
            # `for i, (w, b) in enumerate(layers)` is `for i, _w_b in ...: w, b = _w_b`, and
            # `for a, *b in xs` is `for _item in xs: a, *b = _item`: unpacking the body does.
            if _starred_target(stmt.target):
                item = self.fresh("_item")
                inner = [_at(gast.Assign(targets=[stmt.target], value=nodes.name(item), type_comment=None), stmt)]
                stmt.target = _at(nodes.name(item, "store"), stmt)
            else:
                stmt.target, inner = self.flattened(stmt.target, stmt)
            stmt.body = inner + stmt.body
        if isinstance(stmt, gast.While):
            if any(isinstance(n, _LOWERED) for n in nodes.walk(stmt.test)):
                found = next(n for n in nodes.walk(stmt.test) if isinstance(n, _LOWERED))
                raise errors.at(found, "a `while` test evaluates this again at each iteration, which "
                                "srcgrad cannot lower yet", "compute it into a name before the loop and "
                                "again at the end of the loop's body, and test the name")
        elif isinstance(stmt, (gast.If, gast.For)):
            field = "test" if isinstance(stmt, gast.If) else "iter"
            setattr(stmt, field, self.expression(getattr(stmt, field), out))
        elif isinstance(stmt, (gast.Assign, gast.AugAssign, gast.Return, gast.Expr, gast.AnnAssign)) \
                and stmt.value is not None:
            target = stmt.targets[0] if isinstance(stmt, gast.Assign) else None
            whole = target.id if isinstance(target, gast.Name) else None
            if isinstance(stmt.value, gast.Lambda) and isinstance(stmt, (gast.Assign, gast.Expr)):
                # (`d[k] = lambda v, k=k: ...`: Python makes the lambda before it reads the target's parts)
                stmt.value = self.lambda_made(stmt.value, out)
            stmt.value = self.expression(stmt.value, out, whole)
            if whole is not None and isinstance(stmt.value, gast.Name) and stmt.value.id == whole \
                    or isinstance(stmt, gast.Expr) and isinstance(stmt.value, gast.Name):
                return  # the loop built the value in the target itself (or nothing uses it)
        for field in ("body", "orelse"):
            if getattr(stmt, field, None):
                setattr(stmt, field, self.block(getattr(stmt, field)))
        if any(isinstance(n, _LOWERED) for n in _shallow(stmt)):
            found = next(n for n in _shallow(stmt) if isinstance(n, _LOWERED))
            raise errors.at(found, f"srcgrad cannot lower a {_kind(found)} here yet",
                            "compute it into a name in a statement of its own first")
        out.append(stmt)

    def lazy_loop(self, stmt, out):
        """``for t in iter(xs)`` is ``for t in xs``; ``for t in map(f, xs, ys)`` is ``for _item,
        _item2 in zip(xs, ys): t = f(_item, _item2)`` and ``for t in filter(f, xs)`` is ``for _item
        in xs: if f(_item): t = _item ...``: ``f`` runs once per item, before the body that
        item runs, as Python's lazy iterators call it (``f`` as for ``functional``)."""
        while isinstance(stmt.iter, gast.Call) and isinstance(stmt.iter.func, gast.Name) \
                and stmt.iter.func.id == "iter" and "iter" in self.builtin and len(stmt.iter.args) == 1 \
                and not stmt.iter.keywords and not isinstance(stmt.iter.args[0], gast.Starred):
            stmt.iter = stmt.iter.args[0]
        node = stmt.iter
        if isinstance(node, gast.GeneratorExp) and len(node.generators) == 1 and not node.generators[0].is_async:
            # `for v in (e for x in xs if c):` is `for x in xs: if c: v = e ...` (e when the loop asks)
            gen = node.generators[0]
            if any(isinstance(n, gast.Name) and n.id in self.elsewhere for n in nodes.walk(gen.target)):
                mapping = {n.id: self.fresh(f"_{n.id.lstrip('_')}") for n in nodes.walk(gen.target)
                           if isinstance(n, gast.Name)}
                _rename_inside(node, mapping)
            body = [_at(gast.Assign(targets=[stmt.target], value=node.elt, type_comment=None), node)] + stmt.body
            for test in reversed(gen.ifs):
                body = [_at(gast.If(test=test, body=body, orelse=[]), test)]
            stmt.target, stmt.iter, stmt.body = gen.target, gen.iter, body
            return
        if isinstance(node, gast.Call) and isinstance(node.func, gast.Name) and node.func.id in ("zip", "enumerate") \
                and node.func.id not in self.local and (self.fn is None or node.func.id not in self.fn.__globals__):
            self.lazy_zip(stmt, out)
            return
        which = self.functional_name(node.func) if isinstance(node, gast.Call) else None
        if which not in ("map", "filter") or node.keywords or any(isinstance(a, gast.Starred) for a in node.args):
            return
        fn, iterables = node.args[0], node.args[1:]
        if not iterables or which == "filter" and len(iterables) != 1 or len(iterables) > 1 and "zip" not in self.builtin:
            return
        names = [self.fresh("_item") for _ in iterables]
        bound, element = self.applied(fn, names)
        if element is None:
            return
        for name, value in bound:  # (a partial's arguments: computed once, before the loop, as Python does)
            self.statement(_at(nodes.assign(name, value), node), out)
        bind = _at(gast.Assign(targets=[stmt.target], value=element if which == "map" else nodes.name(names[0]),
                               type_comment=None), node)
        stmt.iter = iterables[0] if len(iterables) == 1 else _at(nodes.call("zip", list(iterables)), node)
        stmt.target = _at(gast.Tuple(elts=[nodes.name(n, "store") for n in names], ctx=gast.Store())
                          if len(names) > 1 else nodes.name(names[0], "store"), node)
        stmt.body = [bind] + stmt.body if which == "map" else \
            [_at(gast.If(test=element, body=[bind] + stmt.body, orelse=[]), node)]

    def lazy_zip(self, stmt, out):
        """``for a, b in zip(map(f, xs), ys)`` is ``for _item, b in zip(xs, ys): a = f(_item)``
        (``enumerate(map(f, xs))`` the same; ``iter(xs)`` there is ``xs``); a ``filter`` or a
        ``map`` of more than one sequence there is refused (the loop is run by index)."""
        node, offset = stmt.iter, int(stmt.iter.func.id == "enumerate")
        elts = stmt.target.elts if isinstance(stmt.target, (gast.Tuple, gast.List)) else None
        binds = []
        for k, arg in enumerate(node.args[:1] if offset else node.args):
            while isinstance(arg, gast.Call) and isinstance(arg.func, gast.Name) and arg.func.id == "iter" \
                    and "iter" in self.builtin and len(arg.args) == 1 and not arg.keywords:
                arg = node.args[k] = arg.args[0]
            if isinstance(arg, gast.Call) and isinstance(arg.func, gast.Name) and arg.func.id in ("zip", "enumerate") \
                    and arg.func.id in self.builtin:
                # `enumerate(zip(fcs, norms))`, `zip(enumerate(xs), ys)`: the inner one's list of tuples
                # (what the outer reads, one by one, before the body could change the sequences)
                node.args[k] = self.mapped(arg)
                continue
            which = self.functional_name(arg.func) if isinstance(arg, gast.Call) else None
            if which not in ("map", "filter"):
                continue
            element = None
            if which == "map" and len(arg.args) == 2 and not arg.keywords and elts is not None \
                    and len(elts) == offset + len(node.args) and not isinstance(arg.args[1], gast.Starred):
                item = self.fresh("_item")
                bound, element = self.applied(arg.args[0], [item])
            if element is None:
                raise errors.at(arg, f"srcgrad runs a loop over `{node.func.id}(...)` by index, and cannot "
                                f"index this `{which}(...)` (Python's reads it lazily)",
                                "make it a list first (`kept = [f(v) for v in xs]` or `[v for v in xs if f(v)]`)"
                                f", then loop over `{node.func.id}(kept, ...)` with one target per sequence")
            for name, value in bound:
                self.statement(_at(nodes.assign(name, value), arg), out)
            binds.append(_at(gast.Assign(targets=[elts[offset + k]], value=element, type_comment=None), arg))
            elts[offset + k] = _at(nodes.name(item, "store"), arg)
            node.args[k] = arg.args[1]
        stmt.body = binds + stmt.body

    def chained(self, stmt, out):
        """``a = b = e``: Python evaluates ``e`` once and assigns it to each target, left to right."""
        first = stmt.targets[0]
        if isinstance(first, gast.Name):
            value = first.id
            self.statement(_at(gast.Assign(targets=[first], value=stmt.value, type_comment=None), stmt), out)
        else:
            value = self.fresh("_value")
            self.statement(_at(nodes.assign(value, stmt.value), stmt), out)
            self.statement(_at(gast.Assign(targets=[first], value=nodes.name(value), type_comment=None), stmt), out)
        for target in stmt.targets[1:]:
            self.statement(_at(gast.Assign(targets=[target], value=nodes.name(value), type_comment=None), stmt), out)

    def flattened(self, target, stmt):
        """``target`` (a tuple with tuples, items or attributes in it) as a tuple of names, and
        the assignments that bind each of those targets from the name standing for it, in
        order: from the first target that is not a name on, every one (Python binds them left
        to right, and an item's index may read a name bound before it: ``a[i], i = ...``)."""
        elts, inner, plain = [], [], True
        for elt in target.elts:
            plain = plain and isinstance(elt, gast.Name)
            if plain:
                elts.append(elt)
                continue
            spelled = "_".join(n.id for n in nodes.walk(elt) if isinstance(n, gast.Name)) or "item"
            name = self.fresh("_" + spelled)
            elts.append(_at(nodes.name(name, "store"), elt))
            inner.append(_at(gast.Assign(targets=[elt], value=nodes.name(name), type_comment=None), stmt))
        return _at(gast.Tuple(elts=elts, ctx=gast.Store()), target), inner

    def starred(self, stmt, out):
        """``a, *b, c = xs``: the ``k`` targets before the star and the ``m`` after it unpack
        slices (whose lengths Python's own unpacking checks), the starred one is a list of
        what lies between: ``a, = xs[:k]``, ``b = [e for e in xs[k:max(len(xs) - m, k)]]``,
        ``c, = xs[max(len(xs) - m, k):]``."""
        elts = stmt.targets[0].elts
        star = next(i for i, e in enumerate(elts) if isinstance(e, gast.Starred))
        before, middle, after = elts[:star], elts[star].value, elts[star + 1:]
        shadowed = [b for b in ("len", "max") if b not in self.builtin and b != "len"
                    or b == "len" and self.fn is not None and "len" in self.fn.__globals__]
        if shadowed:
            raise errors.at(stmt, f"srcgrad lowers starred unpacking with the builtin `{shadowed[0]}`, "
                            "which this function rebinds", "index the sequence instead (`a, b = xs[0], xs[1:]`)")
        if isinstance(stmt.value, gast.Name):
            items = stmt.value.id
        else:
            items = self.fresh("_items")
            self.statement(_at(nodes.assign(items, stmt.value), stmt), out)
        item = self.fresh("_item")
        end = f"max(len({items}) - {len(after)}, {len(before)})" if after else ""
        parts = [(before, f"{items}[:{len(before)}]"), (None, f"[{item} for {item} in {items}[{len(before)}:{end}]]"),
                 (after, f"{items}[{end}:]")]
        for targets, source in parts:
            if targets == []:
                continue
            target = nodes.copy(middle) if targets is None else \
                gast.Tuple(elts=[nodes.copy(t) for t in targets], ctx=gast.Store())
            self.statement(_at(gast.Assign(targets=[target], value=nodes.expr(source), type_comment=None),
                               stmt), out)

    # ---- expressions ------------------------------------------------------
    def expression(self, node, out, whole=None, conditional=None):
        """``node`` with each comprehension and walrus in it replaced by a name
        that statements appended to ``out`` bind (``whole``: the name the value
        is assigned to, which may be built in place).  ``conditional``: the node
        that makes ``node`` evaluated on some paths only."""
        node = self.functional(node, out, conditional)
        node = self.spread(node)
        node = self.merged(node)
        consumed = self.consumed(node)
        if consumed is not None and not _dict_of_zipped_displays(node):
            # (an iterator read once, whole, at once: a list is the same)
            node.args[consumed] = self.mapped(node.args[consumed])
        if isinstance(node, _LOWERED):
            if conditional is not None:
                raise errors.at(node, f"this {_kind(node)} is evaluated on some paths only (inside "
                                f"`{nodes.to_source(conditional)[:40]}`), which srcgrad cannot lower yet",
                                "compute it into a name in a statement of its own before the condition")
            if isinstance(node, gast.NamedExpr):
                value = self.expression(node.value, out)
                out.append(_at(gast.Assign(targets=[node.target], value=value, type_comment=None), node))
                return nodes.name(node.target.id)
            if isinstance(node, gast.GeneratorExp):
                raise errors.at(node, "a generator expression is supported as the argument of "
                                "`sum`, `max`, `min`, `list`, `tuple`, `sorted`, `any` or `all` only",
                                "pass a list comprehension instead (`np.stack([f(x) for x in xs])`)")
            return self.comprehension(node, out, whole)
        if isinstance(node, gast.Call) and isinstance(node.func, gast.Name) and node.func.id in self.builtin \
                and len(node.args) >= 1 and isinstance(node.args[0], _COMPREHENSIONS) and conditional is None:
            if node.func.id == "sum" and len(node.args) == 1 and [k.arg for k in node.keywords] == ["start"]:
                node.args.append(node.keywords.pop().value)  # `sum(gen, start=s)` is `sum(gen, s)`
            if node.func.id == "sum" and not node.keywords and len(node.args) <= 2 \
                    and isinstance(node.args[0], (gast.ListComp, gast.GeneratorExp)):  # (a set's order is not the source's)
                start = self.expression(node.args[1], out) if len(node.args) == 2 else nodes.const(0)
                return self.comprehension(node.args[0], out, whole, total=start)
            if node.func.id != "sum" and isinstance(node.args[0], gast.GeneratorExp):
                gen = node.args[0]
                node.args[0] = _at(gast.ListComp(elt=gen.elt, generators=gen.generators), gen)
        if isinstance(node, gast.Call) and len(node.args) == 1 and not node.keywords \
                and isinstance(node.args[0], gast.GeneratorExp) and isinstance(node.func, gast.Call) \
                and isinstance(node.func.func, gast.Name) and node.func.func.id == "type" and "type" not in self.local:
            # `type(t)(f(v) for v in t)`: a pytree helper rebuilding a list or tuple, which reads
            # the generator whole at once (a list of the items is the same)
            gen = node.args[0]
            node.args[0] = _at(gast.ListComp(elt=gen.elt, generators=gen.generators), gen)
        if isinstance(node, (gast.Lambda, gast.FunctionDef)):
            return node
        if isinstance(node, gast.IfExp) and conditional is None and any(
                isinstance(n, _LOWERED) for branch in (node.body, node.orelse) for n in _own_expression(branch)):
            # `a if c else [...]`: an `if` statement that assigns either branch's value.
            test = self.expression(node.test, out)
            name = whole if whole is not None else self.fresh("_value")
            branches = [[_at(gast.Assign(targets=[nodes.name(name, "store")], value=branch, type_comment=None),
                             branch)] for branch in (node.body, node.orelse)]
            self.statement(_at(gast.If(test=test, body=branches[0], orelse=branches[1]), node), out)
            return _at(nodes.name(name), node)
        # A lambda in an expression (`layer(x, act=lambda z: z)`, `(lambda t: t * w)(x)`,
        # `fs.append(lambda v, k=k: v * k)`, `[lambda v: v, ...]`) is made by a statement of its
        # own first: a nested function, as `act = lambda z: z` is.  Making one without computed
        # defaults runs nothing, so it may go first, even from a branch; one with computed
        # defaults goes where Python makes it (what is evaluated before it is computed first,
        # below), and is left where it is on some paths only.  `map`, `filter` and `reduce`
        # read their lambda's body (`functional`, `transforms/iterators.py`).
        made_here = not (isinstance(node, gast.Call) and isinstance(node.func, (gast.Name, gast.Attribute))
                         and _last_name(node.func) in ("map", "filter", "reduce"))
        if made_here:
            for field, index, child in _children_in_order(node):
                if isinstance(child, gast.Lambda) and not _has_defaults(child):
                    _put(node, field, index, self.lambda_made(child, out))
        children = _children_in_order(node)
        for k, (field, index, child) in enumerate(children):
            cond = conditional
            if cond is None and (isinstance(node, gast.IfExp) and field != "test"
                                 or isinstance(node, gast.BoolOp) and index > 0):
                cond = node
            mark = len(out)
            if isinstance(child, gast.Lambda) and made_here and cond is None:
                new = self.lambda_made(child, out)
            else:
                new = self.expression(child, out, None, cond)
            if len(out) > mark:
                # Statements now run first: what Python evaluates before them, and may
                # call, is computed before them too.
                spilled = []
                for f, i, _ in children[:k]:
                    earlier = getattr(node, f)[i] if i is not None else getattr(node, f)
                    holder, part = (earlier, "value") if isinstance(earlier, (gast.keyword, gast.Starred)) \
                        else (node, None)
                    value = earlier.value if part else earlier
                    if any(isinstance(n, gast.Call) for n in nodes.walk(value)):
                        name = self.fresh("_arg")
                        spilled.append(_at(nodes.assign(name, value), value))
                        if part:
                            earlier.value = nodes.name(name)
                        else:
                            _put(node, f, i, nodes.name(name))
                out[mark:mark] = spilled
            _put(node, field, index, new)
        return node

    def spread(self, node):
        """A list or tuple display with ``*`` items as the displays and copies it joins:
        ``[a, *xs, b]`` is ``[a] + list(xs) + [b]``, ``(*a, *b)`` is ``tuple(a) + tuple(b)``,
        ``[*x]`` is ``list(x)`` (of an array: its rows).  Python evaluates and iterates each
        part left to right, as ``+`` does its operands; ``list`` and ``tuple`` are the builtins
        (where the function rebinds one, the display is left as it is, and refused)."""
        if not isinstance(node, (gast.List, gast.Tuple)) or not isinstance(node.ctx, gast.Load) \
                or not any(isinstance(e, gast.Starred) for e in node.elts):
            return node
        copy = "list" if isinstance(node, gast.List) else "tuple"
        if copy not in self.builtin:
            return node
        parts, run = [], []
        for elt in node.elts + [None]:
            if (elt is None or isinstance(elt, gast.Starred)) and run:
                parts.append(type(node)(elts=run, ctx=gast.Load()))
                run = []
            if isinstance(elt, gast.Starred):
                parts.append(_at(nodes.call(copy, [elt.value]), elt))
            elif elt is not None:
                run.append(elt)
        joined = parts[0]
        for part in parts[1:]:
            joined = nodes.binop(joined, "+", part)
        return _at(joined, node)

    def merged(self, node):
        """``dict(pairs, k=v, **m)`` as ``{**dict(pairs), "k": v, **m}``: the entries of both,
        a keyword's winning (each form then lowers on its own)."""
        if not (isinstance(node, gast.Call) and isinstance(node.func, gast.Name) and node.func.id == "dict"
                and "dict" in self.builtin and len(node.args) == 1 and node.keywords
                and not isinstance(node.args[0], gast.Starred)):
            return node
        whole = _at(nodes.call("dict", [node.args[0]]), node)
        keys = [None] + [None if k.arg is None else nodes.const(k.arg) for k in node.keywords]
        return _at(gast.Dict(keys=keys, values=[whole] + [k.value for k in node.keywords]), node)

    def lambda_made(self, lam, out):
        """A name for ``lam``, made by a statement of its own appended to ``out``."""
        name = self.fresh("_lambda")
        made = gast.Assign(targets=[nodes.name(name, "store")], value=lam, type_comment=None)
        self.statement(_at(made, lam), out)
        return _at(nodes.name(name), lam)

    # ---- map, filter, functools.reduce and partial --------------------------------
    def consumed(self, node):
        """The position of the argument a call reads whole and at once (``sum(...)``, ``list(...)``,
        ``functools.reduce(f, ...)``), where an iterator and a list of its items are the same."""
        if not isinstance(node, gast.Call) or not node.args or isinstance(node.args[0], gast.Starred):
            return None
        if isinstance(node.func, gast.Name) and node.func.id in self.builtin and node.func.id in ("sum",) + _CONSUMERS:
            return 0
        return 1 if self.functional_name(node.func) == "reduce" and len(node.args) >= 2 else None

    def mapped(self, node):
        """``map(f, xs, ys)`` as ``[f(x, y) for x, y in zip(xs, ys)]`` and ``filter(f, xs)`` as
        ``[x for x in xs if f(x)]`` (``f`` as for ``functional``), where a consumer reads the
        iterator whole at once (``consumed``): elsewhere (a name holding it, a ``for`` loop whose
        body may change what it reads) Python's laziness and single use would differ."""
        if not isinstance(node, gast.Call) or any(isinstance(a, gast.Starred) for a in node.args):
            return node
        if isinstance(node.func, gast.Name) and node.func.id in self.builtin and node.args and (
                node.func.id == "zip" and not node.keywords or node.func.id == "enumerate"
                and len(node.args) + len(node.keywords) <= 2 and all(k.arg == "start" for k in node.keywords)):
            # `sorted(zip(xs, ys))`, `dict(enumerate(xs, 1))`: the list of its tuples, which a
            # `for` over `zip`/`enumerate` reads
            names = [self.fresh("_item") for _ in (node.args if node.func.id == "zip" else (0, 1))]
            target = gast.Tuple(elts=[nodes.name(n, "store") for n in names], ctx=gast.Store())
            elt = gast.Tuple(elts=[nodes.name(n) for n in names], ctx=gast.Load())
            generators = [gast.comprehension(target=target, iter=node, ifs=[], is_async=0)]
            return _at(gast.ListComp(elt=elt, generators=generators), node)
        if node.keywords:
            return node
        return self.functional(node, None, None, lists=True)

    def functional(self, node, out, conditional, lists=False):
        """``reduce(f, xs, start)`` (with ``out`` to put statements in) as a loop ``acc = f(acc,
        x)``, and with ``lists`` ``map``/``filter`` as comprehensions (``mapped``); ``f`` a lambda
        (its body, its parameters the loop's variables), a ``functools.partial`` (its function
        given the partial's arguments first) or any other callable.  The comprehensions then
        lower like any other."""
        if not isinstance(node, gast.Call) or node.keywords or any(isinstance(a, gast.Starred) for a in node.args):
            return node
        which = self.functional_name(node.func)
        if which in ("map", "filter") and not lists:
            return node
        if which == "map" and len(node.args) >= 2 or which == "filter" and len(node.args) == 2:
            fn, iterables = node.args[0], node.args[1:]
            if len(iterables) > 1 and "zip" not in self.builtin:
                return node
            names = [self.fresh("_item") for _ in iterables]
            bound, element = self.applied(fn, names)
            if element is None:
                return node
            target = gast.Tuple(elts=[nodes.name(n, "store") for n in names], ctx=gast.Store()) \
                if len(names) > 1 else nodes.name(names[0], "store")
            source = iterables[0] if len(iterables) == 1 else nodes.call("zip", list(iterables))
            generators = [gast.comprehension(target=nodes.name(n, "store"), iter=gast.List(elts=[v], ctx=gast.Load()),
                                             ifs=[], is_async=0) for n, v in bound]
            generators.append(gast.comprehension(target=target, iter=source, is_async=0,
                                                 ifs=[element] if which == "filter" else []))
            elt = nodes.name(names[0]) if which == "filter" else element
            return _at(gast.ListComp(elt=elt, generators=generators), node)
        if which == "reduce" and 2 <= len(node.args) <= 3 and out is not None and conditional is None:
            acc, item = self.fresh("_total"), self.fresh("_item")
            bound, element = self.applied(node.args[0], [acc, item])
            if element is None or bound:
                return node
            items, body = self.mapped(node.args[1]), [_at(nodes.assign(acc, element), node)]
            if len(node.args) == 3:
                start, loop = node.args[2], gast.For(target=nodes.name(item, "store"), iter=items, body=body,
                                                     orelse=[], type_comment=None)
            else:  # (no start: the first item, then each other one by its index)
                if not isinstance(items, gast.Name):
                    held = self.fresh("_items")
                    self.statement(_at(nodes.assign(held, items), node), out)
                    items = nodes.name(held)
                start = gast.Subscript(value=nodes.copy(items), slice=nodes.const(0), ctx=gast.Load())
                index = self.fresh("_i")
                read = gast.Subscript(value=nodes.copy(items), slice=nodes.name(index), ctx=gast.Load())
                loop = gast.For(target=nodes.name(index, "store"), orelse=[], type_comment=None,
                                iter=nodes.call("range", [nodes.const(1), nodes.call("len", [nodes.copy(items)])]),
                                body=[_at(gast.Assign(targets=[nodes.name(item, "store")], value=read,
                                                      type_comment=None), node)] + body)
            self.statement(_at(nodes.assign(acc, start), node), out)
            self.statement(_at(loop, node), out)
            return _at(nodes.name(acc), node)
        return node

    def functional_name(self, func):
        """``"map"``/``"filter"`` for the builtins, ``"reduce"``/``"partial"`` for functools'."""
        if isinstance(func, gast.Name) and func.id in ("map", "filter"):
            return func.id if func.id in self.builtin else None
        if self.fn is None:
            return None
        if isinstance(func, gast.Name) and func.id not in self.local:
            found = self.fn.__globals__.get(func.id)
        elif isinstance(func, gast.Attribute) and isinstance(func.value, gast.Name) and func.value.id not in self.local:
            found = getattr(self.fn.__globals__.get(func.value.id), func.attr, None)
        else:
            return None
        return "reduce" if found is functools.reduce else "partial" if found is functools.partial else None

    def applied(self, fn, names):
        """``fn`` applied to the names ``names``: ``(bound, element)``, ``bound`` the ``(name,
        value)`` pairs a partial's computed arguments (or a computed callable) are bound to
        first, as Python evaluates them once; ``element`` None where ``fn`` takes another
        number of arguments than given, or keywords only."""
        args = [nodes.name(n) for n in names]
        if _is_none(fn):  # (filter(None, xs))
            return [], nodes.call("bool", args)
        if isinstance(fn, gast.Lambda):
            a = fn.args
            if a.vararg or a.kwarg or a.kwonlyargs or a.defaults or len(a.posonlyargs + a.args) != len(names):
                return [], None
            body = nodes.copy(fn.body)
            _rename_scoped(body, dict(zip([p.id for p in a.posonlyargs + a.args], names)))
            return [], body
        bound = []
        if isinstance(fn, gast.Call) and self.functional_name(fn.func) == "partial" and fn.args \
                and not any(isinstance(a, gast.Starred) for a in fn.args) \
                and all(k.arg is not None for k in fn.keywords):
            given = []
            for value in fn.args[1:] + [k.value for k in fn.keywords]:
                if not isinstance(value, (gast.Name, gast.Constant)):
                    bound.append((self.fresh("_arg"), value))
                    value = nodes.name(bound[-1][0])
                given.append(value)
            positional = given[:len(fn.args) - 1]
            keywords = [(k.arg, v) for k, v in zip(fn.keywords, given[len(fn.args) - 1:])]
            lam = fn.args[0]
            if isinstance(lam, gast.Lambda):  # `partial(lambda s, x, k: ..., k=2.0)`: its body, renamed
                a = lam.args
                params = [p.id for p in a.posonlyargs + a.args]
                if a.vararg or a.kwarg or a.kwonlyargs or a.defaults \
                        or len(positional) + len(args) + len(keywords) != len(params):
                    return [], None
                values = positional + args
                order = params[:len(values)]
                mapping = dict(zip(order, values))
                for key, value in keywords:
                    if key not in params or key in mapping:
                        return [], None
                    mapping[key] = value
                constants = {k: v for k, v in mapping.items() if isinstance(v, gast.Constant)}
                for key, value in list(mapping.items()):
                    if not isinstance(value, (gast.Name, gast.Constant)):
                        bound.append((self.fresh("_arg"), value))
                        mapping[key] = nodes.name(bound[-1][0])
                    elif key in constants:  # (a literal: put where the body reads the parameter)
                        mapping[key] = nodes.name(self.fresh(f"_{key}"))
                body = nodes.copy(lam.body)
                _rename_scoped(body, {k: v.id for k, v in mapping.items()})
                literal = {mapping[k].id: v for k, v in constants.items()}

                class Put(nodes.Transformer):
                    def visit_Name(self, node):
                        return nodes.copy(literal[node.id]) if node.id in literal else node
                return bound, Put().visit(body)
            return bound, nodes.call(nodes.copy(fn.args[0]), positional + args, keywords)
        if not isinstance(fn, (gast.Name, gast.Attribute)):
            bound.append((self.fresh("_function"), fn))
            fn = nodes.name(bound[-1][0])
        return bound, nodes.call(nodes.copy(fn), args)

    def comprehension(self, comp, out, whole=None, total=None):
        """The statements that build ``comp``'s value (a running total when
        ``total`` is given, the start); the name holding it."""
        mapping = {}
        for gen in comp.generators:
            if gen.is_async:
                raise errors.at(comp, "an async comprehension is not differentiable", "use a plain one")
            for target in nodes.walk(gen.target):
                if isinstance(target, gast.Name) and target.id in self.elsewhere and target.id not in mapping:
                    mapping[target.id] = self.fresh(f"_{target.id.lstrip('_')}")
        if mapping:
            _rename_inside(comp, mapping)
        reads = nodes.names_in(comp)
        result = whole if whole is not None and whole not in reads else \
            self.fresh("_total" if total is not None else "_items")
        item = None if isinstance(comp, gast.DictComp) else comp.elt
        if isinstance(comp, gast.DictComp):  # (`d[k] = v`: a dict made here, followed entry by entry)
            entry = gast.Subscript(value=nodes.name(result), slice=comp.key, ctx=gast.Store())
            innermost = [_at(gast.Assign(targets=[entry], value=comp.value, type_comment=None), comp)]
        elif total is not None:
            innermost = [_at(nodes.assign(result, nodes.binop(nodes.name(result), "+", item)), comp)]
        else:
            innermost = [_at(gast.Expr(value=nodes.call(f"{result}.append", [item])), comp)]
        body = innermost
        for gen in reversed(comp.generators):
            for test in reversed(gen.ifs):
                body = [_at(gast.If(test=test, body=body, orelse=[]), test)]
            body = [_at(gast.For(target=gen.target, iter=gen.iter, body=body, orelse=[], type_comment=None), comp)]
        loop = body[0]
        loop.iter = self.expression(loop.iter, out)  # the first iterable: in the enclosing scope, now
        start = total if total is not None else gast.Dict(keys=[], values=[]) \
            if isinstance(comp, gast.DictComp) else gast.List(elts=[], ctx=gast.Load())
        out.append(_at(nodes.assign(result, start), comp))
        self.statement(loop, out)
        if isinstance(comp, gast.SetComp):
            out.append(_at(nodes.assign(result, nodes.call("set", [nodes.name(result)])), comp))
        return _at(nodes.name(result), comp)

    def fresh(self, base: str) -> str:
        return nodes.fresh_name(base, self.taken)


def _dict_of_zipped_displays(call) -> bool:
    """``dict(zip(["w", "b"], [w, b]))``: normalize zips displays item by item and makes the dict
    of such pairs a display of its entries, its keys known when compiling."""
    arg = call.args[0] if len(call.args) == 1 and not call.keywords else None
    return isinstance(call.func, gast.Name) and call.func.id == "dict" and isinstance(arg, gast.Call) \
        and isinstance(arg.func, gast.Name) and arg.func.id == "zip" and not arg.keywords and len(arg.args) > 0 \
        and all(isinstance(a, (gast.List, gast.Tuple)) and not any(isinstance(e, gast.Starred) for e in a.elts)
                for a in arg.args)


def _has_defaults(lam) -> bool:
    """Whether ``lam`` has a default that is computed (a literal one computes nothing)."""
    return any(d is not None and not isinstance(d, gast.Constant) for d in lam.args.defaults + lam.args.kw_defaults)


def _leaving(stmts, loop):
    """The ``return``s in ``stmts`` and, outside a loop of theirs, the ``break``s and ``continue``s."""
    for stmt in stmts:
        if isinstance(stmt, gast.Return) or not loop and isinstance(stmt, (gast.Break, gast.Continue)):
            yield stmt
        if not isinstance(stmt, gast.FunctionDef):
            inner = loop or isinstance(stmt, (gast.For, gast.While))
            for field in ("body", "orelse"):
                yield from _leaving(getattr(stmt, field, None) or [], inner)


def _parallel(stmt) -> bool:
    """``a, b = e1, e2``: names bound from a display of as many items, none of which
    reads a target (so binding them one by one is Python's evaluate-all-then-bind)."""
    target, value = stmt.targets[0], stmt.value
    if not (isinstance(target, (gast.Tuple, gast.List)) and isinstance(value, (gast.Tuple, gast.List))
            and len(target.elts) == len(value.elts) > 1
            and all(isinstance(t, gast.Name) for t in target.elts)
            and not any(isinstance(v, gast.Starred) for v in value.elts)):
        return False
    bound = {t.id for t in target.elts}
    return len(bound) == len(target.elts) and not bound & nodes.names_in(value)


def _nested_target(target) -> bool:
    """A tuple of targets one of which is not a name: a tuple, an item (``hs[i]``), an attribute."""
    return isinstance(target, (gast.Tuple, gast.List)) and any(
        isinstance(e, (gast.Tuple, gast.List, gast.Subscript, gast.Attribute)) for e in target.elts)


def _own_expression(node):
    """The nodes of an expression, not those of a lambda in it."""
    stack = [node]
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, gast.Lambda):
            stack.extend(gast.iter_child_nodes(node))


def _starred_target(target) -> bool:
    return isinstance(target, (gast.Tuple, gast.List)) and any(isinstance(e, gast.Starred) for e in target.elts)


def _kind(node) -> str:
    return {gast.ListComp: "list comprehension", gast.SetComp: "set comprehension",
            gast.DictComp: "dict comprehension", gast.GeneratorExp: "generator expression",
            gast.NamedExpr: "`:=` expression"}[type(node)]


def _at(node, source):
    """``node`` and every node under it at ``source``'s line (where they have none of their own)."""
    for n in nodes.walk(node):
        anno.inherit(n, source)
    return node


def _shallow(stmt):
    """A statement's expressions, not those of its nested blocks."""
    for field in stmt._fields:
        if field in ("body", "orelse"):
            continue
        value = getattr(stmt, field, None)
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, gast.AST):
                yield from nodes.walk(child)


def _children_in_order(node) -> list:
    """``(field, index or None, child)`` for each child expression, in the order Python evaluates them."""
    if isinstance(node, gast.Dict):
        pairs = [(f, i, getattr(node, f)[i]) for i in range(len(node.keys)) for f in ("keys", "values")]
        return [p for p in pairs if p[2] is not None]
    out = []
    for field in node._fields:
        value = getattr(node, field, None)
        if isinstance(value, list):
            out += [(field, i, v) for i, v in enumerate(value) if isinstance(v, (gast.expr, gast.keyword))]
        elif isinstance(value, (gast.expr, gast.keyword)) and not isinstance(value, gast.expr_context):
            out.append((field, None, value))
    return out


def _put(node, field, index, value):
    if index is None:
        setattr(node, field, value)
    else:
        getattr(node, field)[index] = value


def _is_none(node) -> bool:
    return isinstance(node, gast.Constant) and node.value is None


def _last_name(func) -> str:
    return func.id if isinstance(func, gast.Name) else func.attr


def _rename_inside(comp, mapping):
    """Rename ``comp``'s own variables in its scope: everything but its first
    iterable, and in a comprehension nested in it, what that one does not bind again."""
    gens = comp.generators
    parts = [g.target for g in gens] + [g.iter for g in gens[1:]] + [t for g in gens for t in g.ifs]
    parts += [comp.key, comp.value] if isinstance(comp, gast.DictComp) else [comp.elt]
    for part in parts:
        _rename_scoped(part, mapping)


def _rename_scoped(node, mapping):
    if isinstance(node, gast.Name):
        if node.id in mapping:
            node.id = mapping[node.id]
        return
    if isinstance(node, _COMPREHENSIONS):
        _rename_scoped(node.generators[0].iter, mapping)
        bound = {n.id for g in node.generators for n in nodes.walk(g.target) if isinstance(n, gast.Name)}
        inner = {k: v for k, v in mapping.items() if k not in bound}
        if inner:
            _rename_inside(node, inner)
        return
    for child in gast.iter_child_nodes(node):
        _rename_scoped(child, mapping)


def _names_outside_comprehensions(fdef) -> set:
    """The names the function uses other than as a comprehension's own variable,
    and those a comprehension binds again inside another that binds them."""
    outside = set()

    def visit(node, bound):
        if isinstance(node, gast.Name):
            if node.id not in bound:
                outside.add(node.id)
            return
        if isinstance(node, _COMPREHENSIONS):
            visit(node.generators[0].iter, bound)
            own = {n.id for g in node.generators for n in nodes.walk(g.target) if isinstance(n, gast.Name)}
            outside.update(own & bound)
            inner = bound | own
            for g in node.generators:
                visit(g.target, inner)
                for t in g.ifs:
                    visit(t, inner)
            for g in node.generators[1:]:
                visit(g.iter, inner)
            for part in ([node.key, node.value] if isinstance(node, gast.DictComp) else [node.elt]):
                visit(part, inner)
            return
        for child in gast.iter_child_nodes(node):
            visit(child, bound)
    visit(fdef, frozenset())
    return outside


def _lift_closures(fdef, desugar):
    """Lambda lifting: a nested function that is only ever called (``g(x)``, never
    returned, stored or passed on) takes the outer function's values it reads as
    its first parameters, and each call passes them (``g(w, x)``).  A Python
    closure reads a captured name when it is called, and so does the call: a name
    rebound between two calls (or in each iteration of a loop) is seen at each, and the
    values are differentiated as arguments.  Functions escaping as values keep their
    closures (and ``reverse`` refuses them where they capture a value being
    differentiated); so do those that call themselves or hide a name in their body.

    Before/after::

        def g(v):                        def g(x, /, v):
            return np.sin(v) * x             return np.sin(v) * x
        y = g(x) + g(2 * x)              y = g(x, x) + g(x, 2 * x)
    """
    defs = [n for n in nodes.own_nodes(fdef) if isinstance(n, gast.FunctionDef)]
    if not defs:
        return
    outer = set(_parameter_names(fdef.args)) | {d.name for d in defs} | {
        n.id for n in nodes.own_nodes(fdef) if isinstance(n, gast.Name) and not isinstance(n.ctx, gast.Load)}
    counts = {}
    for d in defs:
        counts[d.name] = counts.get(d.name, 0) + 1
    called = {id(n.func) for n in nodes.walk(fdef) if isinstance(n, gast.Call)}
    uses = {}  # a nested function's name -> whether every use of it is a call's
    for n in nodes.walk(fdef):
        if isinstance(n, gast.Name) and n.id in counts:
            uses[n.id] = uses.get(n.id, True) and isinstance(n.ctx, gast.Load) and id(n) in called
    lifted = {}
    for d in defs:
        if counts[d.name] != 1 or not uses.get(d.name, True):
            continue
        inside = list(nodes.walk(gast.Module(body=d.body, type_ignores=[])))
        own = set(_parameter_names(d.args)) | {n.id for n in inside if isinstance(n, gast.Name)
                                               and not isinstance(n.ctx, gast.Load)}
        own |= {name for n in inside if isinstance(n, (gast.Global, gast.Nonlocal)) for name in n.names}
        own |= {n.name for n in inside if isinstance(n, gast.FunctionDef)}
        if d.name in own or any(isinstance(n, gast.Name) and n.id == d.name for n in inside) \
                or any(isinstance(n, (gast.Yield, gast.YieldFrom, gast.Await)) for n in inside):
            continue  # (recursive, a generator left as one, or binds its own name)
        captured = sorted({n.id for n in inside if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load)
                           and n.id in outer and n.id not in own and n.id not in counts})
        lifted[d.name] = (d, captured, own)
    # A call inside another nested function passes that one's names: only where it holds
    # none of them itself (then it reads the outer's, and captures them in turn).
    for d in defs:
        local = set(_parameter_names(d.args)) | {n.id for n in nodes.walk(d) if isinstance(n, gast.Name)
                                                 and not isinstance(n.ctx, gast.Load)}
        for n in nodes.walk(gast.Module(body=d.body, type_ignores=[])):
            if isinstance(n, gast.Call) and isinstance(n.func, gast.Name) and n.func.id in lifted \
                    and local & set(lifted[n.func.id][1]):
                del lifted[n.func.id]
    calls = {g: {n.func.id for n in nodes.walk(gast.Module(body=d.body, type_ignores=[]))
                 if isinstance(n, gast.Call) and isinstance(n.func, gast.Name) and n.func.id in lifted}
             for g, (d, _, _) in lifted.items()}
    order, state = [], {}

    def visit(g):  # callees first (depth first); a cycle (mutual recursion): no lifting
        state[g] = "open"
        for h in sorted(calls[g]):
            if state.get(h) == "open" or state.get(h) is None and not visit(h):
                return False
        state[g] = "done"
        order.append(g)
        return True
    if not all(state.get(g) == "done" or visit(g) for g in sorted(lifted)):
        return
    for g in order:
        d, captured, own = lifted[g]
        more = {c for h in calls[g] for c in lifted[h][1]}
        if more & own:
            return  # (a callee's callee reads a name this one holds itself)
        lifted[g] = (d, sorted(set(captured) | more), own)
    lifted = {g: entry for g, entry in lifted.items() if entry[1]}
    for g, (d, captured, _) in sorted(lifted.items()):
        # First, positional only: neither defaults, `*args` nor a keyword (`self`, or
        # `fn` of the call that runs it) can clash with them.
        d.args.posonlyargs[:0] = [_at(nodes.name(c, "param"), d) for c in captured]
    for n in nodes.walk(fdef):
        if isinstance(n, gast.Call) and isinstance(n.func, gast.Name) and n.func.id in lifted:
            n.args[:0] = [_at(nodes.name(c), n) for c in lifted[n.func.id][1]]


def _call_partials(fdef, desugar) -> None:
    """``g = functools.partial(f, a, c=3.0)``, ``g`` assigned once and only ever called: the
    partial's arguments bound to names where it is made (Python evaluates them once, there),
    each call ``g(x)`` then ``f(a, x, c=c)`` (a call's keywords win), which the inliner and the
    rules see whole (a partial object holding a value being differentiated would be refused).
    A call in a nested function or lambda (``lambda v: np.tanh(g(v))``) is rewritten too: it then
    reads the names bound where the partial was made, which lambda lifting passes to it.  So
    every use of ``g``, nested ones included, must be a call of it: a nested function that binds
    ``g`` itself (a parameter, a store, a ``def g``) leaves the partial as it is."""
    own = list(nodes.own_nodes(fdef))
    everything = list(nodes.walk(gast.Module(body=fdef.body, type_ignores=[])))
    stores = {}
    for n in own:
        if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store):
            stores[n.id] = stores.get(n.id, 0) + 1
    called = {id(n.func) for n in everything if isinstance(n, gast.Call) and isinstance(n.func, gast.Name)}
    nested = {n.name for n in everything if isinstance(n, gast.FunctionDef)} | set(_parameter_names(fdef.args))
    defined = {}
    for n in own:
        if isinstance(n, gast.FunctionDef):
            defined[n.name] = defined.get(n.name, 0) + 1
    made = {}
    for stmt in nodes.statements(fdef.body):
        if isinstance(stmt, gast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], gast.Name) \
                and stores.get(stmt.targets[0].id) == 1 and isinstance(stmt.value, gast.Call) \
                and desugar.functional_name(stmt.value.func) == "partial" and stmt.value.args \
                and not any(isinstance(a, gast.Starred) for a in stmt.value.args) \
                and all(k.arg is not None for k in stmt.value.keywords):
            name = stmt.targets[0].id
            if name not in nested and all(
                    n is stmt.targets[0] or isinstance(n.ctx, gast.Load) and id(n) in called
                    for n in everything if isinstance(n, gast.Name) and n.id == name):
                made[name] = stmt
    if not made:
        return

    def kept(fn):
        """Whether the partial's function may be read again at each call: a name the function never
        binds again (one it does may hold another function there), or a module's attribute (`np.dot`:
        then a NumPy primitive, with its rule, rather than a callable known only when it runs)."""
        if isinstance(fn, gast.Name):
            return not stores.get(fn.id) and defined.get(fn.id, 0) <= 1
        root = fn
        while isinstance(root, gast.Attribute):
            root = root.value
        return isinstance(fn, gast.Attribute) and isinstance(root, gast.Name) and root.id not in desugar.local \
            and desugar.fn is not None and inspect.ismodule(desugar.fn.__globals__.get(root.id))
    bound = {}
    for name, stmt in made.items():
        call, binds = stmt.value, []

        def held(value, label):
            if isinstance(value, gast.Constant):
                return value
            fresh = desugar.fresh(f"_{name}_{label}")
            binds.append(_at(nodes.assign(fresh, value), stmt))
            return nodes.name(fresh)
        fn = call.args[0] if kept(call.args[0]) else held(call.args[0], "function")
        args = [held(a, f"arg{i}") for i, a in enumerate(call.args[1:])]
        keywords = {k.arg: held(k.value, k.arg) for k in call.keywords}
        bound[name] = (fn, args, keywords)
        stmt.targets[0].id, stmt.value = "_", nodes.const(None)  # (replaced below by the bindings)
        anno.set(stmt, "partial_binds", binds)

    def rewritten(stmts):
        out = []
        for stmt in stmts:
            if anno.has(stmt, "partial_binds"):
                out += anno.get(stmt, "partial_binds")
                continue
            for field in ("body", "orelse"):
                if isinstance(getattr(stmt, field, None), list) and not isinstance(stmt, gast.FunctionDef):
                    setattr(stmt, field, rewritten(getattr(stmt, field)))
            out.append(stmt)
        return out
    fdef.body = rewritten(fdef.body)
    for n in list(nodes.walk(fdef)):
        if isinstance(n, gast.Call) and isinstance(n.func, gast.Name) and n.func.id in bound:
            fn, args, keywords = bound[n.func.id]
            given = {k.arg for k in n.keywords}
            n.func = _at(nodes.copy(fn), n.func)
            n.args = [nodes.copy(a) for a in args] + n.args
            n.keywords = [gast.keyword(arg=k, value=nodes.copy(v)) for k, v in keywords.items() if k not in given] \
                + n.keywords


def _generators_read_by_next(fdef, fn) -> set:
    """A generator a name holds (``g = (f(x) for x in xs)``, ``g = gen(x)``) read only by
    ``next(g)`` (the value of an assignment or a statement of its own): collected as a list
    (``g = [f(x) for x in xs]``) read at a counter, ``a = g[_g_next]; _g_next = _g_next + 1``
    (an exhausted one raises IndexError, not StopIteration).  Returns the names so rewritten."""
    if fn is None:
        return set()
    import builtins
    namespace = {**vars(builtins), **fn.__globals__}
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            namespace[name] = cell.cell_contents
        except ValueError:
            pass
    if namespace.get("next") is not builtins.next:
        return set()
    stores, loads = {}, {}
    for n in nodes.walk(fdef):
        if isinstance(n, gast.Name):
            (stores if isinstance(n.ctx, gast.Store) else loads).setdefault(n.id, []).append(n)
    made = {}
    for i, stmt in enumerate(fdef.body):  # (made once, at the top level)
        if isinstance(stmt, gast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], gast.Name) \
                and len(stores.get(stmt.targets[0].id, ())) == 1 and (
                    isinstance(stmt.value, gast.GeneratorExp) or isinstance(stmt.value, gast.Call)
                    and isinstance(stmt.value.func, gast.Name)
                    and inspect.isgeneratorfunction(namespace.get(stmt.value.func.id))):
            made[stmt.targets[0].id] = stmt
    if not made:
        return set()
    def own_statements(stmts):  # (not those of a nested def: its `next(g)` is read when it is called)
        for stmt in stmts:
            yield stmt
            if not isinstance(stmt, gast.FunctionDef):
                for field in ("body", "orelse"):
                    yield from own_statements(getattr(stmt, field, None) or [])
    steps = {}  # name -> the statements `a = next(g)` / `next(g)`
    for stmt in own_statements(fdef.body):
        if isinstance(stmt, (gast.Assign, gast.Expr)) and isinstance(stmt.value, gast.Call) \
                and isinstance(stmt.value.func, gast.Name) and stmt.value.func.id == "next" \
                and len(stmt.value.args) == 1 and not stmt.value.keywords \
                and isinstance(stmt.value.args[0], gast.Name) and stmt.value.args[0].id in made \
                and (isinstance(stmt, gast.Expr) or len(stmt.targets) == 1):
            steps.setdefault(stmt.value.args[0].id, []).append(stmt)
    taken = set(stores) | set(loads)
    stepped = {}
    for name, stmts in steps.items():
        if len(stmts) != len(loads.get(name, ())):
            continue  # (read otherwise too: as before)
        counter = nodes.fresh_name(f"_{name}_next", taken)
        taken.add(counter)
        stepped[name] = counter
        for stmt in stmts:
            read = _at(gast.Subscript(value=nodes.name(name), slice=nodes.name(counter), ctx=gast.Load()), stmt.value)
            stmt.value = read
            anno.set(stmt, "next_counter", counter)
    if not stepped:
        return set()

    def rewritten(stmts):
        out = []
        for stmt in stmts:
            for field in ("body", "orelse"):
                if not isinstance(stmt, gast.FunctionDef) and isinstance(getattr(stmt, field, None), list):
                    setattr(stmt, field, rewritten(getattr(stmt, field)))
            if isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name) \
                    and made.get(stmt.targets[0].id) is stmt and stmt.targets[0].id in stepped:
                if isinstance(stmt.value, gast.GeneratorExp):
                    stmt.value = _at(gast.ListComp(elt=stmt.value.elt, generators=stmt.value.generators), stmt.value)
                out.append(stmt)
                out.append(_at(gast.Assign(targets=[nodes.name(stepped[stmt.targets[0].id], "store")],
                                           value=nodes.const(0), type_comment=None), stmt))
                continue
            counter = anno.get(stmt, "next_counter", None)
            if isinstance(stmt, gast.Expr) and counter is not None:
                stmt = _at(gast.Assign(targets=[nodes.name(f"_{counter}_item", "store")], value=stmt.value,
                                       type_comment=None), stmt)
            out.append(stmt)
            if counter is not None:
                step = gast.BinOp(left=nodes.name(counter), op=gast.Add(), right=nodes.const(1))
                out.append(_at(gast.Assign(targets=[nodes.name(counter, "store")], value=step, type_comment=None),
                               stmt))
        return out
    fdef.body = rewritten(fdef.body)
    return set(stepped)


def _check_generators_read_once(fdef, fn, stepped=frozenset()) -> None:
    """A generator a name holds (``gen = layers(x)``) is read once, whole: ``_collect_generator``
    makes it the list of what it yields, which a second reading (Python's: empty), a reading
    in each iteration of a loop, or ``next(gen)`` would see otherwise.  Refused at that read."""
    if fn is None:
        return
    namespace = dict(fn.__globals__)
    for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
        try:
            namespace[name] = cell.cell_contents
        except ValueError:
            pass
    made, loads = {}, {}

    def visit(stmts, loops):
        for stmt in stmts:
            if isinstance(stmt, gast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], gast.Name) \
                    and isinstance(stmt.value, gast.Call) and isinstance(stmt.value.func, gast.Name) \
                    and inspect.isgeneratorfunction(namespace.get(stmt.value.func.id)):
                made.setdefault(stmt.targets[0].id, []).append(loops)
            inner = loops + (stmt,) if isinstance(stmt, (gast.For, gast.While)) else loops
            # (a `for`'s iterable is read once, before its loop; a `while` test at each iteration)
            own = [stmt.iter] if isinstance(stmt, gast.For) else [stmt.test] if isinstance(stmt, (gast.If, gast.While)) \
                else [] if isinstance(stmt, gast.FunctionDef) else [stmt]
            for n in (n for part in own for n in nodes.walk(part)):
                if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load):
                    loads.setdefault(n.id, []).append((n, (inner if isinstance(stmt, gast.While) else loops)[-1:]))
            for field in ("body", "orelse"):
                if not isinstance(stmt, gast.FunctionDef) and isinstance(getattr(stmt, field, None), list):
                    visit(getattr(stmt, field), inner)
    visit(fdef.body, ())
    for name, where in made.items():
        if name in stepped:
            continue  # (read by `next`, at a counter: `_generators_read_by_next`)
        reads = {id(n): (n, loop) for n, loop in loads.get(name, [])}
        seen = list(reads.values())
        again = seen[len(where)] if len(seen) > len(where) else next(
            ((n, loop) for n, loop in seen if loop and loop[0] not in where[0]), None)
        if again is not None:
            raise errors.at(again[0], f"`{name}` holds a generator, which is read once: srcgrad runs a "
                            "generator whole, as the list of what it yields, so reading it again (or "
                            "in each iteration of a loop) would not see it exhausted",
                            f"read it once (`items = list({name})`, then read `items`), or call the "
                            "generator function again where you read it")


def _collect_generator(fdef: gast.FunctionDef) -> None:
    """A generator function as one that returns the list of what it yields: ``yield e``
    becomes ``yielded.append(e)``, ``yield from xs`` a loop appending each item, ``return``
    ``return yielded`` (before the end, ``return yielded + []``: a new list).  Its consumer (``for``, ``list``, ``zip``, ``sum``) reads a list as it
    reads the generator, the body running whole before the consumer's first iteration (a
    generator that reads state its consumer changes as it goes is outside this model).  Refused:
    ``yield`` used as a value, and a ``while`` whose test is a constant (maybe endless, and
    consumed lazily)."""
    own = list(nodes.own_nodes(fdef))
    yields = [n for n in own if isinstance(n, (gast.Yield, gast.YieldFrom))]
    if not yields:
        return
    statements = {id(n.value) for n in own if isinstance(n, gast.Expr)}
    for y in yields:
        if id(y) not in statements:
            raise errors.at(y, "a `yield` whose value is used (a coroutine) is not differentiated",
                            "yield values only (`yield h`), as a generator a `for` loop consumes")
    for loop in own:
        if isinstance(loop, gast.While) and isinstance(loop.test, gast.Constant) and loop.test.value:
            raise errors.at(loop, "a generator with a `while True:` loop may never end; srcgrad collects "
                            "what a generator yields before its consumer runs",
                            "give the loop a condition (or a `for` over a range), or build and return a list")
    name = nodes.fresh_name("yielded", nodes.names_in(fdef))

    def collected(stmts):
        out = []
        for stmt in stmts:
            if isinstance(stmt, gast.Expr) and isinstance(stmt.value, gast.Yield):
                value = stmt.value.value if stmt.value.value is not None else nodes.const(None)
                out.append(_at(gast.Expr(value=nodes.call(gast.Attribute(
                    value=nodes.name(name), attr="append", ctx=gast.Load()), [value])), stmt))
            elif isinstance(stmt, gast.Expr) and isinstance(stmt.value, gast.YieldFrom):
                item = nodes.fresh_name("item", nodes.names_in(fdef) | {name})
                append = gast.Expr(value=nodes.call(gast.Attribute(value=nodes.name(name), attr="append",
                                                                   ctx=gast.Load()), [nodes.name(item)]))
                out.append(_at(gast.For(target=nodes.name(item, "store"), iter=stmt.value.value,
                                        body=[append], orelse=[], type_comment=None), stmt))
            elif isinstance(stmt, gast.Return):  # (ends the iteration: a copy of what it yielded so
                # far, as the appends after it, on the paths that go on, must not change it)
                last = stmt is fdef.body[-1]
                out.append(_at(gast.Return(value=nodes.name(name) if last else gast.BinOp(
                    left=nodes.name(name), op=gast.Add(), right=gast.List(elts=[], ctx=gast.Load()))), stmt))
            else:
                for field in ("body", "orelse", "finalbody"):
                    if isinstance(getattr(stmt, field, None), list) and not isinstance(stmt, gast.FunctionDef):
                        setattr(stmt, field, collected(getattr(stmt, field)))
                if isinstance(stmt, gast.Try):
                    for handler in stmt.handlers:
                        handler.body = collected(handler.body)
                out.append(stmt)
        return out
    start = _at(nodes.assign(name, gast.List(elts=[], ctx=gast.Load())), fdef.body[0])
    fdef.body = [start] + collected(fdef.body)
    if not isinstance(fdef.body[-1], gast.Return):
        fdef.body.append(_at(gast.Return(value=nodes.name(name)), fdef.body[-1]))


def spread_variadic(fdef: gast.FunctionDef, param_ranks: tuple) -> None:
    """``g(x, *args, **kwargs)`` passing on the function's own ``*args``/``**kwargs`` as
    ``g(x, args[0], args[1], k=kwargs["k"])``: their lengths and keys are part of the
    specialisation (``param_ranks``, in parameter order), so the call is then one whose
    target the inliner and the rules see whole (a wrapper such as ``flatten_func``'s)."""
    variadic = {getattr(fdef.args.vararg, "id", None): "sequence", getattr(fdef.args.kwarg, "id", None): "mapping"}
    stored = {n.id for n in nodes.own_nodes(fdef) if isinstance(n, gast.Name) and not isinstance(n.ctx, gast.Load)}
    keys = {name: [k for k, _ in rank] for name, rank in zip(_parameter_names(fdef.args), param_ranks)
            if name in variadic and name not in stored and getattr(rank, "kind", None) == variadic[name]
            and all(isinstance(k, int) or k.isidentifier() for k, _ in rank)}
    if not keys:
        return

    def entries(node):
        held = node.id if isinstance(node, gast.Name) else None
        return [_at(gast.Subscript(value=nodes.name(held), slice=nodes.const(k), ctx=gast.Load()), node)
                for k in keys[held]] if held in keys else None
    for call in [n for n in nodes.own_nodes(fdef) if isinstance(n, gast.Call)]:
        args, keywords = [], []
        for a in call.args:
            spread = entries(a.value) if isinstance(a, gast.Starred) and variadic.get(
                getattr(a.value, "id", None)) == "sequence" else None
            args += [a] if spread is None else spread
        for k in call.keywords:
            spread = entries(k.value) if k.arg is None and variadic.get(
                getattr(k.value, "id", None)) == "mapping" else None
            keywords += [k] if spread is None else [
                _at(gast.keyword(arg=e.slice.value, value=e), k.value) for e in spread]
        call.args, call.keywords = args, keywords


def _parameter_names(args) -> list:
    return [a.id for a in args.posonlyargs + args.args + [args.vararg] + args.kwonlyargs + [args.kwarg]
            if a is not None]
