"""Pass 7a — resugar: the optimized sweeps read as a person would write them.

Requires: the sweeps as ``optimize`` leaves them (normalized: one primitive per
statement, compiler temporaries ``_t<n>``, each statement's ``group``), and the
names read outside them (returned values, adjoints, what ``emit`` reads).
Guarantees: the same values computed, in the same order of side effects, with

1. a temporary bound once, without a call, and read once, later in its own block
   by a statement from the same source line, written into that read (``_fold``):
   nothing between them writes a name it reads, runs a call or writes in place,
   and no call in the reading statement runs before it.  Arithmetic and
   comparisons may move past other computations; a read of an attribute or an
   item only into the statement right after it, before anything there but
   names (then it moves past nothing at all);
2. ``anf``'s length check before ``a, b = t`` (``_check_length``) and the items
   then read one by one, back into ``a, b = t`` (``_unpacks``): Python checks the
   length itself (with its own message), and for the values srcgrad unpacks
   (tuples, lists, arrays) iterating is indexing.  An item nothing reads is ``_``;
3. the ``if`` that ``a or b`` / ``a and b`` lower to (``anf``'s ``BoolOp``, then
   ``coalesce``) back into ``t = a or b`` (``_boolops``), where ``b`` is one
   computation without calls: ``t = a; if t: pass else: t = b``.

A temporary the backward sweep (or a stack push, a loop header, a nested
function, the returned values) reads is left as it is; so are adjoints,
stacks and whatever ``optimize=False`` asked to see.  A statement another is
folded into keeps its own annotations (``group``: its ``# file:line``); the
unpacking takes its first item's.

Before (``wrt=x``)::

    def f(x, size, pad):
        kh, kw = size
        n = (x.shape[0] + 2 * pad - kh) // kw + 1
        return np.sum(x[:n] ** 2)

After ``optimize``::

    _t1 = len(size)
    _t2 = _t1 != 2
    if _t2:
        _t3 = ValueError('wrong number of values to unpack (expected 2) (at model.py:2)')
        raise _t3
    kh = size[0]
    kw = size[1]
    _t4 = x.shape
    _t5 = _t4[0]
    _t6 = 2 * pad
    _t7 = _t5 + _t6
    _t8 = _t7 - kh
    _t9 = _t8 // kw
    n = _t9 + 1
    _t10 = x[:n]

After::

    kh, kw = size
    n = (x.shape[0] + 2 * pad - kh) // kw + 1
    _t10 = x[:n]
"""
from __future__ import annotations

import builtins
import collections
import copy
import re

import gast

from .. import anno, nodes

_TEMPORARY = re.compile(r"_t\d+\Z")  # anf.Core.fresh's names
_DERIVED = re.compile(r"(_t\d+)_")  # `_t5_bar`, `_t5_dot`, `_t5_shape`
# Kinds of statement that may run the user's code or write in place (`y = obj.method(x)`, an
# object's `__mul__` dispatched when it runs, `a[i] = v`): nothing moves past them.
_EFFECTS = {"call", "unknown", "setattr", "setitem", "setentry", "append", "pop", "def"}
# What a computation is made of: `pure` (arithmetic, comparisons, choices of names and
# constants) and `reads` (attributes and items too); a call is neither.
_PURE = (gast.Name, gast.Constant, gast.BinOp, gast.UnaryOp, gast.Compare, gast.BoolOp, gast.IfExp, gast.Tuple,
         gast.operator, gast.unaryop, gast.cmpop, gast.boolop, gast.expr_context)
_READS = _PURE + (gast.Attribute, gast.Subscript, gast.Slice)
_CALL = object()  # (an event: a call, or anything that may run code, completes here)


def transform(forward, backward, kept) -> tuple[list, list]:
    """The sweeps resugared (new statements; the old are not changed).

    ``kept``: the names read outside the two sweeps (the returned values, the
    adjoints, the parameters): never folded away."""
    sugar = _Resugar(forward + backward, kept)
    return sugar.block(forward), sugar.block(backward)


class _Resugar:
    def __init__(self, stmts, kept):
        self.kept = set(kept)
        self.reads = collections.Counter(n for s in stmts for n in nodes.loaded_names(s))
        self.stores = collections.Counter(n.id for s in stmts for n in nodes.walk(s)
                                          if isinstance(n, gast.Name) and not isinstance(n.ctx, gast.Load))
        self.placeholder = "_" not in self.reads and "_" not in self.stores and "_" not in self.kept
        # A temporary whose adjoint (or tangent, or saved shape) the code names stays, so that
        # `_t5_bar` has its `_t5` to read beside it: what is folded is what nothing differentiates.
        self.kept |= {match.group(1) for name in {*self.reads, *self.stores}
                      for match in [_DERIVED.match(name)] if match}

    def block(self, stmts) -> list:
        """``stmts`` resugared, the blocks inside them first (a branch's folded computation
        is what ``_boolops`` sees)."""
        out = []
        for stmt in stmts:
            if isinstance(stmt, (gast.If, gast.For, gast.While)):
                stmt = copy.copy(stmt)
                stmt.body, stmt.orelse = self.block(stmt.body), self.block(stmt.orelse)
            out.append(stmt)
        return self._fold(self._unpacks(self._boolops(out)))

    def _once(self, name) -> bool:
        """``name`` is bound once and read once, by these sweeps alone."""
        return self.reads[name] == 1 and self.stores[name] == 1 and name not in self.kept

    # ---- 3. `t = a or b` ------------------------------------------------------------
    def _boolops(self, stmts) -> list:
        """``t = a; if t: pass else: t = b`` (``a or b`` once ``coalesce`` joined its names;
        ``and``: ``if t: t = b``) → ``t = a or b``; ``if c: y = c else: y = b`` → ``y = c or b``."""
        out = []
        for stmt in stmts:
            first = out[-1] if out else None
            joined = self._second_operand(stmt, first) if first is not None else None
            if joined is not None:
                out[-1] = _with(first, value=joined)
                self.reads[stmt.test.id] -= 1
                self.stores[stmt.test.id] -= 1
                continue
            copied = self._second_operand(stmt)
            if copied is not None:
                second = (stmt.orelse if _copies(stmt.body, stmt.test.id) else stmt.body)[0]
                out.append(_with(second, value=copied))
                self.reads[stmt.test.id] -= 1
                self.stores[second.targets[0].id] -= 1
                continue
            out.append(stmt)
        return out

    def _second_operand(self, stmt, first=None):
        """``a or b`` / ``a and b`` that ``first; stmt`` computes (``stmt`` alone, without
        ``first``: ``c or b`` / ``c and b`` of a name), else None."""
        if not (isinstance(stmt, gast.If) and isinstance(stmt.test, gast.Name)):
            return None
        test = stmt.test.id
        if first is not None:
            if not (_simple_assign(first) and first.targets[0].id == test and _group(first) == _group(stmt)
                    and not _effect(first)):
                return None
            kept, a = (lambda block: _empty(block)), first.value
        else:
            kept, a = (lambda block: _copies(block, test)), stmt.test
        op = gast.Or if kept(stmt.body) else gast.And if kept(stmt.orelse) else None
        branch = stmt.orelse if op is gast.Or else stmt.body
        if op is None or len(branch) != 1:
            return None
        second = branch[0]
        target = test if first is not None else (stmt.body if op is gast.Or else stmt.orelse)[0].targets[0].id
        if not (_simple_assign(second) and second.targets[0].id == target and not _effect(second)
                and _group(second) == _group(stmt) and _made_of(second.value, _READS)
                and not {test, target} & nodes.names_in(second.value)):  # (`b` reads `t` before `a` is in it)
            return None
        values = [v for part in (a, second.value)
                  for v in (part.values if isinstance(part, gast.BoolOp) and isinstance(part.op, op) else [part])]
        return gast.BoolOp(op=op(), values=[nodes.copy(v) for v in values])

    # ---- 2. `a, b = t` --------------------------------------------------------------
    def _unpacks(self, stmts) -> list:
        """``n = len(t); c = n != 2; if c: raise ValueError(...)`` and then ``a = t[0]; b = t[1]``
        → ``a, b = t``."""
        out, i = [], 0
        while i < len(stmts):
            found = self._unpack(stmts, i)
            if found is None:
                out.append(stmts[i])
                i += 1
                continue
            end, source, items, count = found
            first = stmts[i + 3]
            targets = [nodes.name(items[k], "store") if k in items else nodes.name("_", "store")
                       for k in range(count)]
            unpack = nodes.assign(gast.Tuple(elts=targets, ctx=gast.Store()), nodes.name(source))
            unpack.__dict__[anno.KEY] = dict(first.__dict__.get(anno.KEY, {}))
            self.reads[source] -= len(items)  # (read once now, for `len` and each item before)
            out.append(unpack)
            i = end
        return out

    def _unpack(self, stmts, i):
        """``(end, t, {index: name}, count)`` of the unpacking whose length check starts at ``i``."""
        if i + 3 >= len(stmts):
            return None
        length, compare, check = stmts[i:i + 3]
        if not (_simple_assign(length) and _simple_assign(compare) and isinstance(check, gast.If)
                and not check.orelse and isinstance(check.test, gast.Name)
                and _group(length) == _group(compare) == _group(check)):
            return None
        call, test = length.value, compare.value
        if not (isinstance(call, gast.Call) and _resolved(call.func, builtins.len) and len(call.args) == 1
                and not call.keywords and isinstance(call.args[0], gast.Name)
                and isinstance(test, gast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], gast.NotEq)
                and isinstance(test.left, gast.Name) and test.left.id == length.targets[0].id
                and isinstance(test.comparators[0], gast.Constant) and type(test.comparators[0].value) is int
                and check.test.id == compare.targets[0].id and self._raises(check.body)
                and self._once(length.targets[0].id) and self._once(compare.targets[0].id)):
            return None
        source, count = call.args[0].id, test.comparators[0].value
        items, end = {}, i + 3
        for stmt in stmts[i + 3:]:
            index = stmt.value.slice if _simple_assign(stmt) and isinstance(stmt.value, gast.Subscript) else None
            if not (isinstance(index, gast.Constant) and type(index.value) is int
                    and isinstance(stmt.value.value, gast.Name) and stmt.value.value.id == source
                    and max(items, default=-1) < index.value < count and _group(stmt) == _group(check)
                    and not _effect(stmt) and stmt.targets[0].id != source):
                break
            items[index.value] = stmt.targets[0].id
            end += 1
        if not items or len(items) < count and not self.placeholder:
            return None
        return end, source, items, count

    def _raises(self, body) -> bool:
        """``body`` is ``e = ValueError('...'); raise e`` (or ``raise ValueError('...')``)."""
        *made, last = body
        if not (isinstance(last, gast.Raise) and last.cause is None) or len(made) > 1:
            return False
        error = last.exc
        if made:
            if not (_simple_assign(made[0]) and isinstance(error, gast.Name) and error.id == made[0].targets[0].id
                    and self._once(error.id)):
                return False
            error = made[0].value
        return isinstance(error, gast.Call) and _resolved(error.func, ValueError) \
            and all(isinstance(a, gast.Constant) for a in error.args)

    # ---- 1. temporaries read once ---------------------------------------------------
    def _fold(self, stmts) -> list:
        out = []  # the statements so far (None: folded into a later one)
        defined = {}  # temporary -> where its statement is in out
        written = {}  # name -> where in out it was last bound
        barrier = -1  # where in out the last statement is that nothing moves past
        for stmt in stmts:
            stmt = self._folded_into(stmt, out, defined, written, barrier)
            at = len(out)
            out.append(stmt)
            if _simple_assign(stmt) and _TEMPORARY.match(stmt.targets[0].id):
                defined[stmt.targets[0].id] = at
            for node in nodes.walk(stmt):
                if isinstance(node, gast.Name) and not isinstance(node.ctx, gast.Load):
                    written[node.id] = at
            if not _passable(stmt):
                barrier = at
        return [s for s in out if s is not None]

    def _folded_into(self, stmt, out, defined, written, barrier):
        """``stmt`` with the temporaries it reads folded in (a new statement where any is)."""
        if not (isinstance(stmt, gast.If) or _simple_assign(stmt, tuples=True)) \
                or any(anno.has(stmt, key) for key in ("stack", "restore", "restores", "prebound")):
            return stmt
        new = None
        while True:
            for name in _positions(new or stmt):
                at = defined.get(name.id)
                if at is None or out[at] is None or not self._once(name.id) or _group(out[at]) != _group(stmt):
                    continue
                definition = out[at]
                if _effect(definition):
                    continue
                if _made_of(definition.value, _PURE):  # moves past computations, not past a call or a write
                    movable = barrier < at and all(written.get(n, -1) < at for n in nodes.names_in(definition.value))
                elif _made_of(definition.value, _READS):  # moves past nothing
                    movable = all(s is None for s in out[at + 1:])
                else:
                    movable = False
                if not movable:
                    continue
                if new is None:  # (the first fold: a statement of our own to fold into)
                    new = _with(stmt, **{f: nodes.copy(getattr(stmt, f)) for f in ("targets", "value", "test")
                                         if hasattr(stmt, f)})
                    break  # (its names are new nodes: look again)
                _replace(new, name, definition.value)
                out[at] = None
                self.reads[name.id] -= 1
                self.stores[name.id] -= 1
                break
            else:
                return new or stmt


def _positions(stmt) -> list:
    """The temporaries ``stmt`` reads where one may be folded in: the reads before any call
    in it completes, not in an operand that may not run (``a or b``'s ``b``), in the order
    Python evaluates them (an assignment's value, then its targets; an ``if``'s test)."""
    events = []
    if isinstance(stmt, gast.If):
        _events(stmt.test, events)
    else:
        _events(stmt.value, events)
        for target in stmt.targets:
            _events(target, events)
    found = []
    for event in events:
        if event is _CALL:
            break
        if event is not None and _TEMPORARY.match(event.id):
            found.append(event)
    return found


def _events(node, events, maybe=False) -> None:
    """The names ``node`` reads (None where it may not run) and its calls (``_CALL``), in the
    order Python evaluates them: a call completes after its function and arguments."""
    kind = type(node)
    if kind is gast.Name:
        if isinstance(node.ctx, gast.Load):
            events.append(None if maybe else node)
    elif kind in (gast.Constant, gast.Pass) or node is None:
        pass
    elif kind is gast.Call:
        _events(node.func, events, maybe)
        for part in [*node.args, *(k.value for k in node.keywords)]:
            _events(part, events, maybe)
        events.append(_CALL)
    elif kind is gast.BoolOp:
        _events(node.values[0], events, maybe)
        for value in node.values[1:]:
            _events(value, events, True)
    elif kind is gast.IfExp:
        _events(node.test, events, maybe)
        _events(node.body, events, True)
        _events(node.orelse, events, True)
    elif kind in (gast.BinOp, gast.UnaryOp, gast.Compare, gast.Attribute, gast.Subscript, gast.Slice, gast.Tuple,
                  gast.List, gast.Starred):
        for field in node._fields:
            value = getattr(node, field, None)
            for part in value if isinstance(value, list) else [value]:
                if isinstance(part, gast.AST) and not isinstance(part, (gast.expr_context, gast.operator, gast.cmpop,
                                                                        gast.unaryop)):
                    _events(part, events, maybe)
    else:  # (a comprehension, a lambda, an f-string: anf leaves none, but they may run code)
        events.append(_CALL)


def _replace(root, old, new) -> None:
    """The node ``old`` under ``root`` replaced by ``new``."""
    for node in nodes.walk(root):
        for field in node._fields:
            value = getattr(node, field, None)
            if value is old:
                setattr(node, field, new)
                return
            if isinstance(value, list) and any(v is old for v in value):
                value[[i for i, v in enumerate(value) if v is old][0]] = new
                return
    raise AssertionError("resugar: a read not found in its statement")


def _with(stmt, **fields):
    """A copy of ``stmt`` with ``fields`` (its annotations its own copy too)."""
    new = copy.copy(stmt)
    new.__dict__[anno.KEY] = dict(stmt.__dict__.get(anno.KEY, {}))
    for field, value in fields.items():
        setattr(new, field, value)
    return new


def _simple_assign(stmt, tuples=False) -> bool:
    """``name = value`` (with ``tuples``: ``a, b = value`` too)."""
    if not (isinstance(stmt, gast.Assign) and len(stmt.targets) == 1):
        return False
    target = stmt.targets[0]
    return isinstance(target, gast.Name) or tuples and isinstance(target, gast.Tuple) and all(
        isinstance(t, gast.Name) for t in target.elts) or tuples and isinstance(target, gast.Subscript)


def _passable(stmt) -> bool:
    """A computation moves past ``stmt``: it binds names, calls nothing, writes nothing in place."""
    return _simple_assign(stmt, tuples=True) and not isinstance(stmt.targets[0], gast.Subscript) \
        and not _effect(stmt) and not any(isinstance(n, gast.Call) for n in nodes.walk(stmt.value))


def _effect(stmt) -> bool:
    """``stmt`` may run the user's code or write in place (what its kind says)."""
    return anno.get(stmt, "kind") in _EFFECTS or bool(anno.get(stmt, "impure"))


def _made_of(node, allowed) -> bool:
    return all(isinstance(n, allowed) and not (isinstance(n, gast.Name) and not isinstance(n.ctx, gast.Load))
               for n in nodes.walk(node))


def _copies(block, name) -> bool:
    """``block`` is ``y = name``."""
    return len(block) == 1 and _simple_assign(block[0]) and isinstance(block[0].value, gast.Name) \
        and block[0].value.id == name and block[0].targets[0].id != name


def _empty(block) -> bool:
    return all(isinstance(s, gast.Pass) for s in block)


def _group(stmt):
    return anno.get(stmt, "group")


def _resolved(func, obj) -> bool:
    return anno.get(func, "resolved", None) is obj
