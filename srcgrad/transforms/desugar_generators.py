"""Desugar's generators: a generator function as one returning the list of what it yields.

Requires: the parsed ``FunctionDef`` and its function (the namespace tells a generator function).
Guarantees: ``_collect_generator``: ``yield e`` appends to a list the function returns;
``_generators_read_by_next``: a generator a name holds, read only by ``next``, a list read at a
counter; ``_check_generators_read_once``: any other generator a name holds is read once, whole
(else refused at the second reading).
"""
from __future__ import annotations

import inspect

import gast

from .. import anno, errors, nodes
from .desugar_nodes import _at


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
