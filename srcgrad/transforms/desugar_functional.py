"""Desugar's ``map``, ``filter``, ``zip``, ``enumerate``, ``functools.reduce`` and ``partial``.

Requires: ``desugar._Desugar``'s state and statements (``statement``, ``fresh``, ``builtin``,
``local``, ``fn``), of which ``Functional`` is a mixin.
Guarantees: where Python reads such an iterator whole and at once (``sum``, ``list``, ``sorted``,
``dict``, ``reduce``), a comprehension (``mapped``); a ``for`` over one, a loop over its
sequences whose body applies the function first, item by item (``lazy_loop``, ``lazy_zip``);
``reduce(f, xs, s)`` a loop ``acc = f(acc, x)``; a partial called where it is made, or a name
assigned one once and only called (``_call_partials``), a call of its function.
"""
from __future__ import annotations

import functools
import inspect

import gast

from .. import anno, errors, nodes
from .desugar_nodes import _CONSUMERS, _at, _is_none, _parameter_names, _rename_inside, _rename_scoped


class Functional:
    """A mixin of ``desugar._Desugar``: ``map``, ``filter``, ``zip``, ``reduce`` and ``partial`` lowered."""

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
