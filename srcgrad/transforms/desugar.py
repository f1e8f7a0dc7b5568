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

The pass's parts: statements and assignments here; expressions (comprehensions, ``:=``,
lambdas, starred displays) in ``desugar_expressions``; ``map``, ``filter``, ``zip``, ``reduce``
and ``partial`` in ``desugar_functional``; generator functions in ``desugar_generators``; lambda
lifting in ``desugar_closures``; the nodes they share in ``desugar_nodes``.

Before::

    ys = [np.sin(v) for v in x if v > 0]
    s = sum(y ** 2 for y in ys)
    return (t := s * 2.0) * t

After::

    ys = []
    for v in x:
        if v > 0:
            ys.append(np.sin(v))
    s = 0
    for y in ys:
        s = s + y ** 2
    t = s * 2.0
    return t * t
"""
from __future__ import annotations

import sys

import gast

from .. import anno, errors, nodes
from . import iterators
from .desugar_closures import _lift_closures
from .desugar_expressions import Expressions
from .desugar_functional import Functional, _call_partials
from .desugar_generators import _check_generators_read_once, _collect_generator, _generators_read_by_next
from .desugar_nodes import (_CONSUMERS, _LOWERED, _at, _kind, _last_name, _names_outside_comprehensions,
                            _parameter_names)

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


class _Desugar(Expressions, Functional):
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

    def returned_after(self, stmt, out) -> bool:
        """``with m: ...; return e`` as ``with m: ...; r = e`` then ``return r`` (Python evaluates
        ``e`` in the block, leaves it, then returns): True where it wrote that into ``out``.  Any
        other exit from the block is refused (exits would turn it into flags that skip the rest
        of the body: and ``__exit__``)."""
        if stmt.body and isinstance(stmt.body[-1], gast.Return):
            returned, ret = self.fresh("_returned"), stmt.body[-1]
            stmt.body[-1] = _at(nodes.assign(returned, ret.value or nodes.const(None)), ret)
            self.statement(stmt, out)
            self.statement(_at(gast.Return(value=nodes.name(returned)), ret), out)
            return True
        leaving = next((n for n in _leaving(stmt.body, loop=False)), None)
        if leaving is not None:
            raise errors.at(leaving, f"srcgrad cannot leave a `with` block early (`{type(leaving).__name__.lower()}`"
                            ") yet", "set a flag in the block and act on it after the block")
        return False

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
        if isinstance(stmt, gast.With) and self.returned_after(stmt, out):
            return
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

    def fresh(self, base: str) -> str:
        return nodes.fresh_name(base, self.taken)


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


def _starred_target(target) -> bool:
    return isinstance(target, (gast.Tuple, gast.List)) and any(isinstance(e, gast.Starred) for e in target.elts)


def _shallow(stmt):
    """A statement's expressions, not those of its nested blocks."""
    for field in stmt._fields:
        if field in ("body", "orelse"):
            continue
        value = getattr(stmt, field, None)
        for child in value if isinstance(value, list) else [value]:
            if isinstance(child, gast.AST):
                yield from nodes.walk(child)


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


