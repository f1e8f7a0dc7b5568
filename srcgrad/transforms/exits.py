"""Pass 3a — exits: ``break``, ``continue`` and early ``return`` become flags.

Requires: a resolved ``FunctionDef`` (runs before ``validate``).
Guarantees: no ``break``/``continue``; one ``return``, at the end; no loop
``else:``.  After a statement that may exit, the rest of its block runs under
``if not <flag>:``; a loop that may break or return skips its remaining
iterations; a ``while`` also tests the flag.  A loop's ``else:`` block becomes
the code after the loop, under ``if not <break flag>:`` when the loop breaks
(it runs only when the loop ended by itself).  The flags are ordinary
booleans, so the reverse pass records them like any branch condition.

Before::

    s = 0.0
    for i in range(n):
        if x[i] > 3:
            break
        s = s + x[i]
    return s

After (the loop's variable is bound only in the iterations that run)::

    s = 0.0
    _break = False
    for _i in range(n):
        if not _break:
            i = _i
            if x[i] > 3:
                _break = True
            if not _break:
                s = s + x[i]
    return s
"""
from __future__ import annotations

import gast

from .. import anno, nodes


def transform(fdef: gast.FunctionDef) -> None:
    if not _needs_work(fdef):
        return
    _Exits(fdef).run()


def _needs_work(fdef) -> bool:
    last = fdef.body[-1] if fdef.body else None
    for node in nodes.own_nodes(fdef):
        if isinstance(node, (gast.Break, gast.Continue)):
            return True
        if isinstance(node, (gast.For, gast.While)) and node.orelse:
            return True
        if isinstance(node, gast.Return) and node is not last:
            return True
    return False


def _exits_in(stmts, kinds, into_loops):
    """Whether ``stmts`` contain an exit of ``kinds`` (looking into nested loops or not)."""
    for stmt in stmts:
        for node in _walk(stmt, into_loops):
            if isinstance(node, kinds):
                return True
    return False


def _walk(stmt, into_loops):
    yield stmt
    if isinstance(stmt, gast.FunctionDef):
        return
    # A loop's `else:` block belongs to the enclosing loop: its `break` leaves that one.
    loop = isinstance(stmt, (gast.For, gast.While))
    for field in ("orelse",) if loop and not into_loops else ("body", "orelse"):
        for child in getattr(stmt, field, None) or []:
            yield from _walk(child, into_loops)


class _Exits:
    def __init__(self, fdef):
        self.fdef = fdef
        self.names = nodes.names_in(fdef)
        self.returned = self.value = None
        self.loop_flags = []  # innermost last: (break flag, continue flag)
        self.break_flags = {}  # id of a loop with `else:` -> its break flag, named before the loop is

    def fresh(self, base):
        name, k = base, 1
        while name in self.names:
            k += 1
            name = f"{base}{k}"
        self.names.add(name)
        return name

    def _set(self, name, value, origin):
        stmt = nodes.assign(name, nodes.const(value))
        return anno.inherit(stmt, origin)

    def run(self):
        fdef = self.fdef
        prelude = []
        if any(isinstance(n, gast.Return) and n is not fdef.body[-1] for n in nodes.own_nodes(fdef)):
            self.returned = self.fresh("_returned")
            returns = [n for n in nodes.own_nodes(fdef) if isinstance(n, gast.Return)]
            # `return loss, aux` everywhere: one name per element, so the result stays a pair.
            widths = {len(r.value.elts) if isinstance(r.value, gast.Tuple) else None for r in returns}
            width = widths.pop() if len(widths) == 1 else None
            self.value = [self.fresh(f"_return_value{i}") for i in range(width)] if width \
                else self.fresh("_return_value")
            prelude = [self._set(self.returned, False, fdef)] + [
                self._set(v, None, fdef) for v in (self.value if width else [self.value])]
        body = self._block(fdef.body)
        if self.returned:
            final = nodes.ret(self._value("load"))
            anno.inherit(final, fdef.body[-1])
            body.append(final)
        fdef.body = prelude + body

    def _value(self, ctx):
        """The name (or pair of names) the returned value is kept in until the end."""
        if isinstance(self.value, list):
            return nodes.tuple_([nodes.name(v, ctx) for v in self.value], ctx)
        return nodes.name(self.value, ctx)

    def _flags(self):
        flags = [f for f in (self.loop_flags[-1] if self.loop_flags else ()) if f]
        return flags + ([self.returned] if self.returned else [])

    def _may_exit(self, stmt) -> bool:
        if self.returned and _exits_in([stmt], gast.Return, into_loops=True):
            return True
        return bool(self.loop_flags) and _exits_in([stmt], (gast.Break, gast.Continue), into_loops=False)

    def _guard(self, stmts, origin, flags=None):
        """``if not (flag or ...): stmts`` (by default the flags of every exit in reach)."""
        flags = [nodes.name(f) for f in (self._flags() if flags is None else flags)]
        test = flags[0] if len(flags) == 1 else \
            anno.set(gast.BoolOp(op=gast.Or(), values=flags), "flags", True)
        guard = nodes.if_(gast.UnaryOp(op=gast.Not(), operand=test), stmts)
        anno.inherit(guard, origin)
        anno.inherit(guard.test, origin)
        return guard

    def _lift_else(self, stmts):
        """A loop's ``else:`` block becomes the code right after it, under ``if not
        <break flag>:`` when the loop breaks; so the block's own exits (of the enclosing
        loop) and an early ``return`` inside the loop are handled as for any later code."""
        out = []
        for stmt in stmts:
            out.append(stmt)
            if isinstance(stmt, (gast.For, gast.While)) and stmt.orelse:
                orelse, stmt.orelse = stmt.orelse, []
                if _exits_in(stmt.body, gast.Break, into_loops=False):
                    flag = self.break_flags[id(stmt)] = self.fresh("_break")
                    test = anno.inherit(gast.UnaryOp(op=gast.Not(), operand=nodes.name(flag)), stmt)
                    orelse = [anno.inherit(nodes.if_(test, orelse), stmt)]
                out.extend(orelse)
        return out

    def _block(self, stmts):
        out = []
        stmts = self._lift_else(stmts)
        for i, stmt in enumerate(stmts):
            if isinstance(stmt, gast.Break):
                out.append(self._set(self.loop_flags[-1][0], True, stmt))
                return out
            if isinstance(stmt, gast.Continue):
                out.append(self._set(self.loop_flags[-1][1], True, stmt))
                return out
            if isinstance(stmt, gast.Return) and self.returned:
                value = nodes.assign(self._value("store"), stmt.value)
                anno.inherit(value, stmt)
                out += [value, self._set(self.returned, True, stmt)]
                return out
            exits = self._may_exit(stmt)  # before _statement rewrites the exits inside
            new = self._statement(stmt)
            out.extend(new if isinstance(new, _Sequence) else [new])
            rest = stmts[i + 1:]
            if rest and exits:
                guarded = self._block(rest)
                if guarded:
                    out.append(self._guard(guarded, rest[0]))
                return out
        return out

    def _statement(self, stmt):
        if isinstance(stmt, gast.If):
            stmt.body = self._block(stmt.body) or [gast.Pass()]
            stmt.orelse = self._block(stmt.orelse)
            return stmt
        if isinstance(stmt, (gast.For, gast.While)):
            return self._loop(stmt)
        return stmt

    def _loop(self, loop):
        breaks = _exits_in(loop.body, gast.Break, into_loops=False)
        continues = _exits_in(loop.body, gast.Continue, into_loops=False)
        returns = self.returned is not None and _exits_in(loop.body, gast.Return, into_loops=True)
        brk = (self.break_flags.pop(id(loop), None) or self.fresh("_break")) if breaks else None
        cont = self.fresh("_continue") if continues else None
        self.loop_flags.append((brk, cont))
        body = self._block(loop.body)
        self.loop_flags.pop()
        if cont:
            body.insert(0, self._set(cont, False, loop))
        stop = [f for f in (brk, self.returned if returns else None) if f]
        if stop and isinstance(loop, gast.While):
            tests = [loop.test] + [gast.UnaryOp(op=gast.Not(), operand=nodes.name(f)) for f in stop]
            loop.test = gast.BoolOp(op=gast.And(), values=tests)
            anno.set(loop.test, "flags", True)  # the flags are plain booleans: evaluated eagerly
            anno.inherit(loop.test, loop)
        elif stop:  # a `for` runs its remaining iterations as no-ops
            body = [self._guard(self._bind_target(loop) + body, loop, stop)]
        loop.body = body or [gast.Pass()]
        if brk:
            return _Sequence([self._set(brk, False, loop), loop])
        return loop


    def _bind_target(self, loop):
        """``for j in ...`` iterating on as no-ops must not move ``j`` past the
        iteration that broke out (code after the loop may read it): the loop binds
        fresh names, and each iteration that runs copies them to the user's."""
        copies = []
        for node in nodes.walk(loop.target):
            if isinstance(node, gast.Name):
                fresh = self.fresh(f"_{node.id}")
                copies.append(anno.inherit(nodes.assign(node.id, nodes.name(fresh)), loop))
                node.id = fresh
        return copies


class _Sequence(list):
    """Several statements standing where one was (flattened by the caller)."""
