"""Pass 1b (part of desugar) — an iterator held in a name, as what reads it.

Requires: the parsed ``FunctionDef`` (run by ``desugar.transform``, before its own lowering).
Guarantees: a name bound to ``iter(xs)``, ``zip(...)``, ``enumerate(...)``,
``reversed(xs)``, ``map(f, ...)``, ``filter(f, xs)`` (the builtins) or a generator
expression, only by statements of one block (each binding owns the reads up to the
next), and read there by ``next(it)`` calls in statements of their own and then by at
most one read of the rest (a ``for``, a generator, ``list(it)``), none of them repeated
by a loop, is gone:

- with no ``next``, the call is written where the name is read (Python's laziness:
  ``map``'s function runs as the loop asks; arguments other than names not rebound in
  between are computed where the call was, ``_it_arg``); ``iter(xs)`` read whole is ``xs``;
- with ``next`` calls, each sequence it reads is a list (``it = list(xs)``: an array's
  rows carry their adjoints) or, for ``iter(xs)`` of an array or list passed in, ``xs``
  itself; the ``k``-th ``next(it)`` is item ``k`` (``it[k]``, ``(a[k], b[k])``) and the
  rest a slice (``it[n:]``).  ``map``, ``filter`` and generator expressions are refused
  there (their items would be computed before their time), and so is a change to what
  the iterator reads before the rest is read.

A name holding such an iterator that a loop iterates but that does not fit is refused
at that read (normalize indexes what a loop iterates over; an iterator has no length).

Before::

    it = iter(np.tanh(x))
    s = next(it)
    for v in it:
        s = s + v
    return s

After (``iter(x)`` of the parameter itself would be ``x``: ``s = x[0]``)::

    it = list(np.tanh(x))
    s = it[0]
    for v in it[1:]:
        s = s + v
"""
from __future__ import annotations

import bisect

import gast

from .. import anno, errors, nodes

_ITERATORS = ("iter", "zip", "enumerate", "reversed", "map", "filter")
# What a loop or a consumer reads whole: an iterator and its items are the same there.
_ITERATING = ("list", "tuple", "sum", "sorted", "max", "min", "any", "all", "set", "dict", "zip", "enumerate")
# Methods that change a list, dict or array in place (an iterator over it would see the change).
_CHANGING = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse", "update", "setdefault",
             "popitem", "add", "discard", "fill", "resize", "put", "itemset"}


def transform(fdef: gast.FunctionDef, fn=None, sequences=()) -> None:
    """Rewrite, in place, the iterators ``fdef`` holds in names (see the module docstring);
    ``sequences``: parameters known to hold arrays, lists or tuples (indexed in place)."""
    builtin = _builtins(fdef, fn)
    if not any(isinstance(n, gast.Call) and isinstance(n.func, gast.Name) and n.func.id in _ITERATORS
               and n.func.id in builtin or isinstance(n, gast.GeneratorExp) for n in nodes.own_nodes(fdef)):
        return
    _Held(fdef, builtin, sequences).run()


def _builtins(fdef, fn) -> set:
    """Which of the builtins this pass reads are Python's own here (not rebound)."""
    local = {n.id for n in nodes.walk(fdef) if isinstance(n, gast.Name) and not isinstance(n.ctx, gast.Load)}
    return {name for name in _ITERATORS + _ITERATING + ("next",) if name not in local and (
        fn is None or name not in fn.__globals__ and name not in fn.__code__.co_freevars)}


class _Read:
    """Where a name is read: the statements around it (``(block, index)`` from the
    function's body in), whether a loop repeats it below each of them, its parent."""

    def __init__(self, node, path, parent, field, index, repeated, conditional):
        self.node, self.path, self.parent, self.field, self.index = node, path, parent, field, index
        self.repeated, self.conditional = repeated, conditional
        block, i, _ = path[-1]
        self.statement = block[i]  # (the innermost statement: indices move as statements are rewritten)


class _Held:
    def __init__(self, fdef, builtin, sequences):
        self.fdef, self.builtin, self.sequences = fdef, builtin, sequences
        self.taken = nodes.names_in(fdef)
        self.reads, self.stores = {}, {}  # name -> [_Read]; name -> how many times it is bound
        self.binds = {}  # name -> [(block, index)] of the statements `name = ...`
        self.nested = set()  # names a nested function or lambda reads

    def run(self):
        self._block(self.fdef.body, ())
        rewrites = []
        for name, binds in self.binds.items():
            made = [(block, i) for block, i in binds if self._iterator(block[i].value) is not None]
            if not made:
                continue
            if self.stores.get(name) != len(binds) or name in self.nested \
                    or any(block is not binds[0][0] for block, _ in binds):
                # (bound by a loop or in another block too, read by a nested function: as it is,
                # but a loop cannot index it)
                read = next((r for r in self.reads.get(name, []) if self._iterated(r)), None)
                if read is not None:
                    raise self._refusal(name, made[0][0][made[0][1]].value, read)
                continue
            block, starts = binds[0][0], [i for _, i in binds]
            owned = {i: [] for _, i in made}
            for read in self.reads.get(name, []):
                # (a read belongs to the last binding before the statement it is in)
                j = next((j for b, j, _ in read.path if b is block), None)
                k = bisect.bisect_left(starts, j) - 1 if j is not None else -1
                owner = starts[k] if k >= 0 else None
                if owner in owned:
                    owned[owner].append(read)
                elif owner is None and self._iterated(read):
                    raise self._refusal(name, block[made[0][1]].value, read)
            rewrites += [self._rewrite(name, block, i, owned[i]) for _, i in made]
        for rewrite in rewrites:  # (after all are planned: each finds its statements by identity)
            if rewrite is not None:
                rewrite()

    # ---- one walk: who binds and who reads each name, and where ----

    def _block(self, block, path):
        for i, stmt in enumerate(block):
            here = path + ((block, i, False),)
            if isinstance(stmt, gast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], gast.Name):
                self.binds.setdefault(stmt.targets[0].id, []).append((block, i))
            if isinstance(stmt, gast.FunctionDef):
                self._nested(stmt)
                self.stores[stmt.name] = self.stores.get(stmt.name, 0) + 1
                continue
            loop = isinstance(stmt, (gast.For, gast.While))
            for field in stmt._fields:
                value = getattr(stmt, field, None)
                if field in ("body", "orelse", "finalbody", "handlers") and isinstance(value, list):
                    inner = path + ((block, i, loop and not (field == "orelse")),)
                    if field == "handlers":
                        for handler in value:
                            self._block(handler.body, inner)
                    else:
                        self._block(value, inner)
                elif isinstance(value, list):
                    for k, v in enumerate(value):
                        self._expr(v, here, stmt, field, k, isinstance(stmt, gast.While), False)
                elif isinstance(value, gast.AST):
                    self._expr(value, here, stmt, field, None, isinstance(stmt, gast.While) and field == "test",
                               False)

    def _expr(self, node, path, parent, field, index, repeated, conditional):
        if not isinstance(node, gast.AST):
            return
        if isinstance(node, gast.Name):
            if isinstance(node.ctx, gast.Load):
                self.reads.setdefault(node.id, []).append(
                    _Read(node, path, parent, field, index, repeated, conditional))
            else:
                self.stores[node.id] = self.stores.get(node.id, 0) + 1
            return
        if isinstance(node, gast.Lambda):
            self._nested(node)
            return
        comprehension = isinstance(node, (gast.ListComp, gast.SetComp, gast.DictComp, gast.GeneratorExp))
        for f in node._fields:
            value = getattr(node, f, None)
            children = list(enumerate(value)) if isinstance(value, list) else [(None, value)]
            for k, child in children:
                # (a comprehension's first iterable is read once; the rest, once per item)
                again = repeated or comprehension and not (f == "generators" and k == 0)
                if isinstance(node, gast.comprehension) and f != "iter":
                    again = True
                maybe = conditional or isinstance(node, gast.IfExp) and f != "test" \
                    or isinstance(node, gast.BoolOp) and k
                self._expr(child, path, node, f, k, again, maybe)

    def _nested(self, node):
        self.nested.update(n.id for n in nodes.walk(node) if isinstance(n, gast.Name))

    def _iterator(self, value):
        """``"iter"``, ``"zip"``... for a call of one of those builtins this pass follows;
        ``"generator"`` for a generator expression."""
        if isinstance(value, gast.GeneratorExp) and not any(g.is_async for g in value.generators):
            return "generator"
        if isinstance(value, gast.Call) and isinstance(value.func, gast.Name) and value.func.id in _ITERATORS \
                and value.func.id in self.builtin and value.args and not value.keywords \
                and not any(isinstance(a, gast.Starred) for a in value.args) \
                and (value.func.id not in ("iter", "reversed") or len(value.args) == 1):
            return value.func.id
        return None

    # ---- the rewrite ----
    def _rewrite(self, name, block, i, reads):
        """Plan the rewrite of ``name = <iterator>`` (``block[i]``) and of ``reads``, the reads
        of that value; returns it, to run once all are planned (None: nothing to do), or raises
        where the reads do not fit."""
        made = block[i]
        call, kind = made.value, self._iterator(made.value)
        if not reads:
            return None
        nexts, rest, bad = [], [], None
        for read in reads:
            level = next((d for d, (b, j, _) in enumerate(read.path) if b is block and j > i), None)
            if level is None or read.repeated or any(loop for _, _, loop in read.path[level:]):
                bad = bad or read
                continue
            if self._is_next(read) and level == len(read.path) - 1 and not read.conditional \
                    and isinstance(read.statement, (gast.Assign, gast.Expr, gast.AugAssign, gast.AnnAssign,
                                                    gast.Return)):
                nexts.append((read.path[level][1], read))
            else:
                rest.append((read.path[level][1], read))
        if bad is None and (len(rest) > 1 or rest and any(j >= rest[0][0] for j, _ in nexts)
                            or nexts and rest and not self._iterated(rest[0][1])):
            bad = rest[-1][1]
        if bad is not None:
            if any(self._iterated(r) for r in reads):
                raise self._refusal(name, call, bad)
            return None
        if nexts and kind in ("map", "filter", "generator"):
            listed = nodes.to_source(gast.ListComp(elt=call.elt, generators=call.generators)).strip() \
                if kind == "generator" else f"list({nodes.to_source(call).strip()})"
            what = "a generator expression" if kind == "generator" else f"a `{kind}` object"
            raise errors.at(nexts[0][1].node, f"`{name}` holds {what} that `next` reads item by item: "
                            "srcgrad follows `next` on a list of the items, which would compute every item "
                            "at once, before its time", f"make the list yourself (`{name} = {listed}`), "
                            f"then index it (`{name}[0]`, `for v in {name}[1:]:`)")
        if not nexts:
            spills = self._spilled(name, call, kind, block, i, rest[0][0])
            read = rest[0][1]
            value = call.args[0] if kind == "iter" and self._iterated(read) else call

            def written_where_read():
                at = next(k for k, stmt in enumerate(block) if stmt is made)
                block[at:at + 1] = spills
                _put(read.parent, read.field, read.index, value)
            return written_where_read
        self._check_unchanged(name, call, block[i + 1:max(j for j, _ in nexts + rest) + 1])
        holders = [self._parent_of(r) for _, r in nexts]
        return lambda: self._listed(name, made, call, kind, block, holders, [r for _, r in rest])

    def _listed(self, name, made, call, kind, block, holders, rest):
        """``next`` read the items one by one: each sequence the iterator reads is a list
        (``list(xs)``; an array's rows carry their adjoints) or, for ``iter(xs)`` of an array
        or list passed in that nothing rebinds, ``xs`` itself; the ``k``-th ``next`` is
        item ``k`` (``it[k]``, ``(a[k], b[k])``, ``(k, a[k])``), the rest a slice."""
        source = call.args[0]
        if kind == "iter" and isinstance(source, gast.Name) and source.id in self.sequences \
                and not self.stores.get(source.id):
            columns, spills = [source.id], []
        elif kind in ("iter", "reversed"):
            columns = [name]
            made.value = _at(nodes.call("list", [source]), made)
            if kind == "reversed":
                made.value = _at(gast.Subscript(value=made.value, ctx=gast.Load(),
                                                slice=gast.Slice(lower=None, upper=None, step=nodes.const(-1))), made)
            spills = [made]
        else:  # zip, enumerate: one list per sequence
            sequences = call.args if kind == "zip" else call.args[:1]
            columns = [nodes.fresh_name(f"_{name}_items", self.taken) for _ in sequences]
            spills = [_at(nodes.assign(c, nodes.call("list", [a])), made) for c, a in zip(columns, sequences)]
            start = call.args[1] if kind == "enumerate" and len(call.args) > 1 else nodes.const(0)
            if not isinstance(start, gast.Constant):
                held = nodes.fresh_name(f"_{name}_start", self.taken)
                spills.append(_at(nodes.assign(held, start), made))
                start = nodes.name(held)

        def at(column, k, whole=False):
            index = gast.Slice(lower=nodes.const(k), upper=None, step=None) if whole else nodes.const(k)
            return gast.Subscript(value=nodes.name(column), slice=index, ctx=gast.Load())

        def count(k):
            return nodes.copy(start) if k == 0 else nodes.binop(nodes.copy(start), "+", nodes.const(k))
        n = len(holders)
        for k, (parent, field, index, next_call) in enumerate(holders):
            value = at(columns[0], k) if kind in ("iter", "reversed") else gast.Tuple(
                elts=[count(k)] * (kind == "enumerate") + [at(c, k) for c in columns], ctx=gast.Load())
            _put(parent, field, index, _at(value, next_call))
        for read in rest:
            if kind in ("iter", "reversed"):
                value = at(columns[0], n, whole=True)
            elif kind == "zip":
                value = nodes.call("zip", [at(c, n, whole=True) for c in columns])
            else:  # (`enumerate(xs[n:], n)`: the loop reads `enumerate` without a start)
                numbers = nodes.call("range", [count(n), nodes.binop(nodes.copy(start), "+",
                                                                      nodes.call("len", [nodes.name(columns[0])]))])
                value = nodes.call("zip", [numbers, at(columns[0], n, whole=True)])
            _put(read.parent, read.field, read.index, _at(value, read.node))
        at_made = next(k for k, stmt in enumerate(block) if stmt is made)
        block[at_made:at_made + 1] = spills

    def _refusal(self, name, call, read):
        kind = self._iterator(call)
        source = nodes.to_source(call.args[0] if kind == "iter" else gast.ListComp(
            elt=call.elt, generators=call.generators) if kind == "generator" else call).strip()
        if kind == "generator":
            return errors.at(read.node, f"`{name}` is kept as a generator expression, read here again, in a "
                             "loop, or on a path of its own: srcgrad follows one held in a name through one "
                             "read, in the block that makes it", f"make it a list where it is made "
                             f"(`{name} = {source}`, which each read sees whole)")
        return errors.at(read.node, f"`{name}` is kept as an iterator (`{kind}(...)`), read here again, in a "
                         "loop, or on a path of its own (or made in more than one block): srcgrad follows an "
                         "iterator held in a name through `next` calls and then one read of the rest, in "
                         "the block that makes it",
                         f"make it a list where it is made (`{name} = list({source})`, which each read sees "
                         f"whole) and index it (`{name}[0]`, `for v in {name}[1:]:`)")

    def _is_next(self, read) -> bool:
        return isinstance(read.parent, gast.Call) and isinstance(read.parent.func, gast.Name) \
            and read.parent.func.id == "next" and "next" in self.builtin and read.field == "args" \
            and len(read.parent.args) == 1 and not read.parent.keywords

    def _iterated(self, read) -> bool:
        """Read whole, as a sequence: a loop's or a comprehension's, or given to ``list``, ``zip``..."""
        parent = read.parent
        return isinstance(parent, gast.For) and read.field == "iter" \
            or isinstance(parent, gast.comprehension) and read.field == "iter" \
            or isinstance(parent, gast.Call) and read.field == "args" and isinstance(parent.func, gast.Name) \
            and parent.func.id in _ITERATING and parent.func.id in self.builtin

    @staticmethod
    def _parent_of(read):
        """Where the ``next(name)`` call of ``read`` sits: ``(node, field, index, the call)``
        (in the statement the read is in, which holds it)."""
        for node in nodes.walk(read.statement):
            for field in node._fields:
                value = getattr(node, field, None)
                for k, v in enumerate(value) if isinstance(value, list) else [(None, value)]:
                    if v is read.parent:
                        return node, field, k, v
        raise AssertionError("a read's call is in its statement")

    def _spilled(self, name, call, kind, block, i, last) -> list:
        """The statements that compute, where the call was, the arguments that a call
        written later would read otherwise: all but constants, lambdas, and names (or a
        function's dotted name) that nothing rebinds before the read."""
        rebound = {n.id for stmt in block[i + 1:last + 1] for n in nodes.walk(stmt)
                   if isinstance(n, gast.Name) and not isinstance(n.ctx, gast.Load)}
        out = []
        if kind == "generator":  # (its first iterable is read where it is made; the rest, lazily)
            first = call.generators[0]
            if not (isinstance(first.iter, gast.Name) and first.iter.id not in rebound):
                held = nodes.fresh_name(f"_{name}_items", self.taken)
                out.append(_at(nodes.assign(held, first.iter), block[i]))
                first.iter = _at(nodes.name(held), first.iter)
            return out
        for k, arg in enumerate(call.args):
            root = arg
            while isinstance(root, gast.Attribute) and k == 0 and kind in ("map", "filter"):
                root = root.value
            if isinstance(arg, (gast.Constant, gast.Lambda)) or isinstance(root, gast.Name) and root.id not in rebound:
                continue
            held = nodes.fresh_name(f"_{name}_arg", self.taken)
            out.append(_at(nodes.assign(held, arg), block[i]))
            call.args[k] = _at(nodes.name(held), arg)
        return out

    def _check_unchanged(self, name, call, stmts):
        """``it = list(xs)`` where an iterator over ``xs`` was: nothing may change ``xs`` in
        place before the rest is read (the iterator would see the change)."""
        read = {n.id for a in (call.args[1:] if self._iterator(call) in ("map", "filter") else call.args)
                for n in nodes.walk(a) if isinstance(n, gast.Name)}
        for stmt in stmts:
            for n in nodes.walk(stmt):
                target = None
                if isinstance(n, gast.Call) and isinstance(n.func, gast.Attribute) and n.func.attr in _CHANGING:
                    target = n.func.value
                elif isinstance(n, (gast.Subscript, gast.Attribute)) and not isinstance(n.ctx, gast.Load):
                    target = n.value
                elif isinstance(n, gast.AugAssign):
                    target = n.target
                while isinstance(target, (gast.Subscript, gast.Attribute)):
                    target = target.value
                if isinstance(target, gast.Name) and target.id in read:
                    raise errors.at(n, f"this changes `{target.id}` while `{name}` iterates over it: srcgrad "
                                    f"reads `{name}`'s items when it is made, where Python's iterator would "
                                    "see the change", f"make the list of the items yourself "
                                    f"(`{name} = list({target.id})`) where you mean to read them")


def _at(node, source):
    """``node`` and every node under it at ``source``'s line (where they have none of their own)."""
    for n in nodes.walk(node):
        anno.inherit(n, source)
    return node


def _put(node, field, index, value):
    if index is None:
        setattr(node, field, value)
    else:
        getattr(node, field)[index] = value
