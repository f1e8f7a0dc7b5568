"""Desugar's expressions: comprehensions, walrus, lambdas, starred displays as statements before.

Requires: ``desugar._Desugar``'s state and statements (``statement``, ``fresh``, ``builtin``,
``local``, ``elsewhere``), of which ``Expressions`` is a mixin.
Guarantees: ``expression`` gives the expression with each comprehension, ``:=``, lambda (but
one ``map``/``filter``/``reduce`` reads) and conditional expression holding one replaced by a name
that statements appended before it bind, in Python's order of evaluation: what is evaluated
before such statements, and may call, is computed into a name first.  One evaluated on some
paths only is refused at its line.
"""
from __future__ import annotations

import gast

from .. import errors, nodes
from .desugar_nodes import _COMPREHENSIONS, _LOWERED, _at, _kind, _last_name, _rename_inside


class Expressions:
    """A mixin of ``desugar._Desugar``: its expressions lowered to statements before them."""

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


def _own_expression(node):
    """The nodes of an expression, not those of a lambda in it."""
    stack = [node]
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, gast.Lambda):
            stack.extend(gast.iter_child_nodes(node))


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
