"""Sharing analysis: may a write into an array be seen through another name?

``y[i] = v`` stays an in-place write (``transforms/anf.py``): its adjoint gives
``v`` the adjoint of the written elements and the backward sweep puts the old
elements back.  That is the write's whole effect only if no other name that
shares ``y``'s memory is *read after the write*: such a read sees the new
elements, but its adjoint flows back to ``y`` as it was when that name was
made.  Names share memory through

    a = y              a copy of the reference (an alias, both ways)
    v = y[1:], y.T     a view (``getitem``, ``reshape``, ``transpose``, ...)
    t = (y, 1.0)       a container holding ``y`` (and ``t[0]``, ``a, b = t``)
    h = f(y)           a call, which may return its argument

and through chains of these.  This analysis finds the arrays each name may refer
to (points-to sets, flow-insensitively, over the whole function) and refuses, at
the user's line, each write into ``y`` after which another name that may refer
to the same array is live (read before it is bound again; in a loop, also by a
later iteration; a parameter is live to the end: the caller holds it).  An
integer index of a vector (``s = y[0]``) is a number, not a view.

``transforms/aliases.py`` runs first: a name copied from an array, and a view of
known arguments, are read by then as the array's present name or made again after
the write, so what is left here is what the compiler cannot follow by name.

Requires: a :class:`~srcgrad.ir.Core` body and its ranks.
Guarantees: nothing is changed; raises :class:`~srcgrad.errors.UnsupportedSyntaxError`.

Example (refused at the write; ``np.copy(c)`` instead of ``c`` makes it right)::

    c = x * 1.0
    a = (c, 1.0)[0]
    c[1] = c[1] - a[2]
    return np.sum(a)       # `a` is read after the write
"""
from __future__ import annotations

import operator
import re

import gast
import numpy as np

from ..anno import Kind
from .. import anno, errors, nodes
from ..rules import registry

# NumPy functions whose result may be a view of their first argument.
_VIEW_FUNCTIONS = (operator.getitem, getattr, np.reshape, np.ravel, np.transpose, np.expand_dims,
                   np.squeeze, np.broadcast_to, np.asarray, np.asanyarray, np.ascontiguousarray,
                   np.flip, np.fliplr, np.flipud, np.rot90, np.swapaxes, np.moveaxis, np.diagonal,
                   np.real, np.imag, np.atleast_1d, np.atleast_2d, np.atleast_3d, np.split,
                   np.array_split, np.hsplit, np.vsplit, np.dsplit, np.squeeze,
                   np.lib.stride_tricks.sliding_window_view, np.lib.stride_tricks.as_strided,
                   np.diag, np.float64, np.float32, np.float16, np.require, np.asfortranarray,
                   np.asarray_chkfinite)
# ... and those that may return their argument itself (NumPy 2: ``copy=False`` never
# copies, ``copy=None`` copies only when it must), unless given ``copy=True``.
_COPY_ARGUMENT = (np.array, np.astype)
# Functions of srcgrad's runtime that return their argument.
_RUNTIME_VIEWS = ("iterated", "to_host", "to_device")


def _runtime_views():
    from .. import runtime
    return {fn for fn in (getattr(runtime, n, None) for n in _RUNTIME_VIEWS) if fn is not None}


def _view_rules():
    rules = set()
    for fn in (*_VIEW_FUNCTIONS, *_runtime_views()):
        rule = registry.lookup(fn)
        if rule is not None:
            rules.add(rule)
    return rules


def check(body, ranks, params=()) -> dict:
    """Refuse each write ``y[i] = v`` in ``body`` after which a name sharing ``y``'s
    memory is read.

    Returns:
        For each array written into, the other names that may share its memory (the
        optimizer keeps a write, and a backward sweep's restore, while one is read).

    Raises:
        UnsupportedSyntaxError: at the write, naming the other name and where it was made.
    """
    writes = [s for s in nodes.statements(body) if anno.get(s, "kind") == Kind.SETITEM]
    augmented = [s for s in nodes.statements(body) if anno.has(s, "augments")]  # `y += v` (in place)
    if not writes and not augmented:
        return {}
    memory = Memory(body, ranks, params)
    # A write into a list or dict (`hs[t] = h`) replaces an item: it changes no array, and
    # only names that are that list itself (copies, what a call returns) see it, or that hold
    # it (`M = [hs, x]`, `d["a"] = hs`: the same list in them, changed), not its items.
    written_lists = {anno.get(s, "array") for s in writes if anno.get(s, "container")}
    lists = Memory(body, ranks, params, holding=written_lists) if written_lists else None
    holders = Memory(body, ranks, params, holding=written_lists, holds=lists) if written_lists else None
    after = {id(s): None for s in writes + augmented}
    _Liveness(after).block(body, set(params))  # (the caller still holds the arguments when we return)
    fresh = _into_new_arrays(body, ranks, _view_rules(), set(params))
    for stmt in writes + augmented:
        array = anno.get(stmt, "array") if stmt in writes else anno.get(stmt, "augments")
        own = {array, *nodes.assigned_names(stmt)}  # (`y += v` binds the new value: not an alias)
        if anno.get(stmt, "container"):
            written = lists.points.get(array) or {array}  # (what `array` is: not what it holds)
            seen = sorted(n for n in after.get(id(stmt), ()) if n not in own
                          and written & holders.points.get(n, set()))
            if seen and id(stmt) in fresh:  # `row` made above the write (in this iteration, in a loop):
                # only what was given it since holds it (`M[i] = row` after the write holds the
                # rows of earlier iterations, not this one)
                given = _holders(array, fresh[id(stmt)], ranks, containers=True)
                seen = [n for n in seen if n in given]
            holding = [n for n in seen if not written & lists.points.get(n, set())]
            if holding:
                _refuse_held(stmt, array, holding, holders.made)
        elif id(stmt) in fresh:  # `y` holds the array made above it, whatever else it holds elsewhere:
            # only what was made to share it since (`hs.append(h)` after the write, in a loop,
            # holds the arrays of earlier iterations)
            seen = sorted(n for n in after.get(id(stmt), ()) if n not in own and array in memory.points.get(n, ()))
            if seen:  # (only then: the statements in between are read once per such write)
                holders = _holders(array, fresh[id(stmt)], ranks)
                seen = [n for n in seen if n in holders]
        else:
            seen = sorted(n for n in after.get(id(stmt), ()) if n not in own and memory.overlap(n, array))
        if seen:
            _refuse(stmt, array, seen, memory.made, params)
    return {a: memory.sharing(a) - {a} for a in {anno.get(s, "array") for s in writes}}


def _into_new_arrays(body, ranks, views, params) -> dict:
    """The writes ``y[i] = v`` whose ``y`` was last bound, earlier in the same statement
    list, to a new array (``y = np.zeros_like(x)``): there ``y`` is that array only,
    though the points-to sets, flow-insensitive, also give ``y`` what another branch
    binds to it (``else: y = x``, as gradient code's adjoints are).  Each maps to the
    statements between the one that made the array and the write: the only ones that
    can have given another name that array (in a loop, each iteration makes a new one).
    A write into a list or dict made so in an enclosing statement list, in a loop or branch
    that does not bind it again (``row = [0.0] * n``, then ``for j ...: row[j] = v``), maps
    to those between and the whole loop or branch (its later statements run before the
    write in a later iteration)."""
    found = {}

    def walk(stmts, enclosing):
        new = {}  # name bound to a new array above, in this list -> where
        for at, stmt in enumerate(stmts):
            if isinstance(stmt, (gast.If, gast.For, gast.While)):
                rebound = {n for s in stmt.body + stmt.orelse for n in _bound_within(s)} \
                    | (set(nodes.assigned_names(stmt)) if isinstance(stmt, gast.For) else set())
                inside = {n: between + stmts[:at] + [stmt] for n, between in enclosing.items()
                          if n not in rebound}
                inside.update({n: stmts[i + 1:at] + [stmt] for n, i in new.items() if n not in rebound})
                walk(stmt.body, inside)
                walk(stmt.orelse, inside)
                for n in rebound:
                    new.pop(n, None)
                    enclosing.pop(n, None)
                continue
            if anno.get(stmt, "kind") == Kind.SETITEM:
                array = anno.get(stmt, "array")
                if array in new:
                    found[id(stmt)] = stmts[new[array] + 1:at]
                elif array in enclosing and anno.get(stmt, "container"):
                    found[id(stmt)] = enclosing[array] + stmts[:at]
                continue
            bound = set(nodes.assigned_names(stmt))
            shared = {t for t, _ in _sharing(stmt, ranks, views)}
            kind = anno.get(stmt, "kind")
            made = bound - shared if kind not in (Kind.CALL, Kind.UNKNOWN) and isinstance(stmt, gast.Assign) \
                and not anno.has(stmt, "augments") else set()  # (`y += v`: the same array)
            for n in bound:
                new.pop(n, None)
                enclosing.pop(n, None)
            new.update({n: at for n in made - params})
    walk(body, {})
    return found


def _holders(array, between, ranks, containers=False) -> set:
    """The names ``between`` (statements, in order) gives ``array``'s memory, through
    copies, views, containers and calls, and chains of them (``containers``: also entries
    written, ``hs[t] = row``, and new lists or dicts of another's items)."""
    holders, views = {array}, _view_rules()
    pairs = [pair for stmt in nodes.statements(between)
             for pair in (_holding_pairs(stmt, ranks, views) if containers and _holds(stmt)
                          else _sharing(stmt, ranks, views))]
    grown = True
    while grown:  # (a loop in between may give a name it before the name it copies has it)
        grown = False
        for target, source in pairs:
            if source in holders and target not in holders:
                holders.add(target)
                grown = True
    return holders


def _bound_within(stmt):
    for inner in nodes.statements([stmt]):
        yield from nodes.assigned_names(inner)


class Memory:
    """Which arrays each name may refer to (points-to sets, flow-insensitive).

    Each statement that makes a new array (``x * 2``, ``np.zeros``) and each
    parameter is one array; a copy, a view, a container and a call's result may
    refer to any array their sources refer to (a call may return its argument, or
    a part of it), and a call's result may be a new array too.
    """

    def __init__(self, body, ranks, params=(), holding=True, holds=None):
        self.points = {p: {p} for p in params}
        self.made = {}  # name -> the statement that made it share memory
        views = _view_rules()
        edges, contents = [], set()  # (contents: `ys = list(xs)` holds what `xs` holds, not `xs`)
        for stmt in nodes.statements(body):
            if holding is not True and _takes(stmt, holding):
                continue  # (`holding`, lists: an item is not the list it was taken from)
            container = holding is not True and _holds(stmt)
            # (nor is a list what it holds; but what holds it sees a change of it: `holds`, the
            # memory of what each name is, follows containers to the lists they hold)
            pairs = [] if container and holds is None else \
                _holding_pairs(stmt, ranks, views) if container else _sharing(stmt, ranks, views)
            if container and holds is not None and anno.get(stmt, "kind") == Kind.OP:
                contents.update(_copied_items(stmt))
            for target, source in pairs:
                edges.append((target, source))
                self.made.setdefault(target, stmt)
            shared = {t for t, _ in pairs}
            for target in nodes.assigned_names(stmt):
                if target not in shared or container or anno.get(stmt, "kind") in (Kind.CALL, Kind.UNKNOWN):
                    self.points.setdefault(target, set()).add(target)  # (a new container is one of its own)
        # A name the function never binds (a module a global is read through, `G.A`; a
        # closure variable) is one object from outside: two reads of `G.A` may be one array.
        bound = set(self.points)
        for target, source in edges:
            if source not in bound:
                self.points.setdefault(source, {source})
        # What a source may refer to, its targets may too: a worklist along the edges.
        targets = {}
        for target, source in edges:
            targets.setdefault(source, []).append(target)
            self.points.setdefault(target, set())
        todo = list(self.points)
        while todo:
            source = todo.pop()
            for target in targets.get(source, ()):
                new = self.points.get(source, set()) - self.points[target]
                if (target, source) in contents:
                    new -= holds.points.get(source) or {source}
                if new:
                    self.points[target] |= new
                    todo.append(target)
        self.names_at = {}  # array -> the names that may refer to it
        for name, arrays in self.points.items():
            for array in arrays:
                self.names_at.setdefault(array, set()).add(name)

    def overlap(self, a, b) -> bool:
        """Whether ``a`` and ``b`` may refer to the same array (or parts of one)."""
        return bool(self.points.get(a, set()) & self.points.get(b, set()))

    def sharing(self, name) -> set:
        """The names that may refer to an array ``name`` may refer to."""
        return set().union(*(self.names_at[p] for p in self.points.get(name, ())))


def _holds(stmt) -> bool:
    """Whether ``stmt`` puts values into a container: a display, an append, a field, an entry
    (``hs[t] = h``, ``self.cache[k] = h``), a new list or dict of another's items."""
    kind = anno.get(stmt, "kind")
    return kind in (Kind.AGGREGATE, Kind.APPEND, Kind.SETATTR, Kind.SETITEM, Kind.SETENTRY) \
        or kind == Kind.OP and getattr(anno.get(stmt, "rule"), "name", None) in _CONTAINER_COPIES


def _takes(stmt, lists) -> bool:
    """Whether ``stmt`` takes an item out of one of ``lists`` (``h = hs[i]``), or splits an
    array into a new list of views (not the array)."""
    if getattr(anno.get(stmt, "rule"), "name", None) in _SPLITS:
        return True
    bound = anno.get(stmt, "bound") or {}
    base = bound.get("a")
    return anno.get(stmt, "rule") is registry.lookup(operator.getitem) \
        and isinstance(base, gast.Name) and base.id in lists


def _holding_pairs(stmt, ranks, views):
    """``(holder, held)`` pairs of a statement that puts values into a container: the
    container and each value (or, for a new list or dict of another's items, that one)."""
    kind = anno.get(stmt, "kind")
    if kind in (Kind.AGGREGATE, Kind.APPEND, Kind.SETATTR) or kind == Kind.OP:
        return _sharing(stmt, ranks, views) if kind != Kind.OP else \
            [(t, s) for t in nodes.assigned_names(stmt) for s in nodes.loaded_names(stmt.value)]
    holder = anno.get(stmt, "array") if kind == Kind.SETITEM else anno.get(stmt, "holder")
    return [(holder, v) for v in nodes.loaded_names(anno.get(stmt, "value"))] if holder else []


def _copied_items(stmt):
    """The ``(new, old)`` pairs of a statement making a new list or dict of ``old``'s items
    (``ys = list(xs)``, ``d_2 = rt.with_item(d, k, v)``): the new one holds what ``old``
    holds, not ``old`` (a value written into it, ``v``, it holds itself)."""
    bound = anno.get(stmt, "bound") or {}
    items = [a for p, a in bound.items() if p not in ("value", "key", "index")] if bound else \
        (stmt.value.args[:1] if isinstance(stmt.value, gast.Call) else [])
    return {(t, s) for t in nodes.assigned_names(stmt) for a in items for s in nodes.loaded_names(a)}


_SPLITS = ("numpy.split", "numpy.array_split", "numpy.hsplit", "numpy.vsplit")
# Runtime helpers (and builtins) that make a new list or dict holding the items of those given.
_CONTAINER_COPIES = ("srcgrad.runtime.with_item", "srcgrad.runtime.without_key", "srcgrad.runtime.mapping_of",
                     "srcgrad.runtime.sequence_of", "srcgrad.runtime.merged", "srcgrad.runtime.concatenated",
                     "srcgrad.runtime.repeated", "srcgrad.runtime.as_tuple", "srcgrad.runtime.inserted",
                     "srcgrad.runtime.reversed_list", "srcgrad.runtime.fromkeys", "builtins.sorted",
                     "builtins.list", "builtins.tuple", "builtins.dict")


def _refuse(stmt, array, seen, made, params=()):
    argument = next((n for n in seen if n in params), None)
    if argument is not None:
        user = anno.get(stmt, "shown") or _user(array)
        raise errors.at(stmt, f"cannot write into `{user}`: it may be the argument `{argument}` (the "
                        "caller's array), which the write would change", f"write into a copy: "
                        f"`{user} = np.copy({user})` before the write")
    other = next((n for n in seen if not n.startswith("_") and _user(n) != _user(array)),
                 next((n for n in seen if not n.startswith("_")), seen[0]))
    maker = made.get(other)
    origin = anno.get(maker, "origin") if maker is not None else None
    where = f" (made at {origin.where}: `{origin.text.strip()}`)" if origin else ""
    user, name = anno.get(stmt, "shown") or _user(array), _user(other)
    rule = anno.get(maker, "rule") if maker is not None else None
    if rule is not None and rule in _view_rules() and rule is not registry.lookup(getattr):
        how = f"`{name}` is a view of it{where}" if not other.startswith("_") else \
            f"a view of it{where} is read after the write"
    else:
        how = f"`{user}` and `{name}` share memory{where}" if not other.startswith("_") else \
            f"a value that shares memory with it{where} is read after the write"
    if anno.has(stmt, "augments"):
        sym = _symbol(stmt)
        advice = f"write `{user} = {user} {sym} ...` (a new array)"
        own = anno.get(made.get(array), "origin") if made.get(array) is not None else None
        viewed = errors.without_comment(own.text).split("=", 1)[1].strip() if own and "=" in own.text else ""
        if "[" in viewed and not viewed.startswith(("[", "(")) and any(c in viewed[viewed.find("["):]
                                                                         for c in (":", "None", "...")):
            # `v = a[1:]`: maybe meant to change `a` (not `a[[0, 2]]`, a copy)
            advice += f", or, to change the array it views too, write into that by index (`{viewed} {sym}= ...`)"
        raise errors.at(stmt, f"`{user} {sym}= ...` changes the array `{user}` in place, and {how}, so it "
                        "changes that too, which srcgrad does not follow",
                        f"{advice}, or make `{name}` a copy (`np.copy(...)`)")
    raise errors.at(stmt, f"cannot write into `{user}`: {how}, so the write changes that too, "
                    "which srcgrad does not follow",
                    f"make `{name}` a copy (`np.copy(...)`), write into a copy of `{user}` "
                    f"(`{user} = np.copy({user})` first), or write before `{name}` is made")


def _refuse_held(stmt, array, seen, made):
    """Refuse a write into the list or dict ``array`` that a container or an object holding it
    (``seen``) is read after: it would see the change, which its adjoint does not."""
    other = next((n for n in seen if not n.startswith("_")), seen[0])
    maker = made.get(other)
    origin = anno.get(maker, "origin") if maker is not None else None
    where = f" (since {origin.where}: `{origin.text.strip()}`)" if origin else ""
    user, name = anno.get(stmt, "shown") or _user(array), _user(other)
    holder = f"`{name}` holds it{where}" if not other.startswith("_") else \
        f"a list, dict or object holds it{where}"
    raise errors.at(stmt, f"cannot write into `{user}` here: {holder} and is read after the write, which "
                    "changes what it holds too; srcgrad follows the items of a list or dict by the name "
                    "written into only", f"write into `{user}` before it is stored, or store a copy of it "
                    f"(`list({user})`, `dict({user})`)")


def _symbol(stmt) -> str:
    value = stmt.value
    symbols = {gast.Add: "+", gast.Sub: "-", gast.Mult: "*", gast.Div: "/", gast.Pow: "**",
               gast.MatMult: "@", gast.FloorDiv: "//", gast.Mod: "%", gast.BitAnd: "&", gast.BitOr: "|",
               gast.BitXor: "^", gast.LShift: "<<", gast.RShift: ">>"}
    return symbols.get(type(value.op), "?") if isinstance(value, gast.BinOp) else "?"


def _user(name) -> str:
    """The user's spelling of an SSA name (``c_2`` → ``c``)."""
    return name if name.startswith("_") else re.sub(r"_\d+$", "", name)


def _sharing(stmt, ranks, views):
    """``(target, source)`` pairs of names a statement makes share memory."""
    kind = anno.get(stmt, "kind")
    if kind == Kind.SETATTR:  # obj.w = y: obj holds y
        obj, value = stmt.targets[0].value, anno.get(stmt, "value")
        return [(n, v) for n in nodes.loaded_names(obj) for v in nodes.loaded_names(value)]
    if kind == Kind.APPEND:
        return [(anno.get(stmt, "list"), v) for v in nodes.loaded_names(anno.get(stmt, "value"))]
    if not isinstance(stmt, gast.Assign):
        return []
    targets = nodes.assigned_names(stmt)
    if not targets or not isinstance(stmt.targets[0], (gast.Name, gast.Tuple)):
        return []
    if kind == Kind.COPY:
        sources = nodes.loaded_names(stmt.value)
    elif kind == Kind.NONDIFF and _returns_argument(stmt):
        sources = [n for a in stmt.value.args + [k.value for k in stmt.value.keywords]
                   for n in nodes.loaded_names(a)]
    elif kind == Kind.OP and _user_rule(anno.get(stmt, "rule")):
        # A function with a rule of the user's (@custom_adjoint): it may return one of its
        # arguments (a straight-through estimator `def st(x): return x`).
        sources = [n for a in (anno.get(stmt, "bound") or {}).values() for n in nodes.loaded_names(a)]
    elif kind == Kind.OP:
        rule = anno.get(stmt, "rule")
        if rule not in views and not _may_not_copy(stmt, rule):
            return []
        if rule is registry.lookup(operator.getitem) and all(ranks.get(t) == 0 for t in targets) \
                and not any(isinstance(n, gast.Constant) and n.value in (Ellipsis, None)
                            for n in nodes.walk(stmt.value.slice if isinstance(stmt.value, gast.Subscript)
                                               else stmt.value)):
            return []  # an element of a vector: a number
        if rule is registry.lookup(operator.getitem) and nodes.copies_by_index(stmt.value):
            return []  # `a[[0, 2]]`: a copy
        bound = anno.get(stmt, "bound") or {}
        first = next(iter(bound.values()), None)
        sources = nodes.loaded_names(first) if first is not None else []
    elif kind in (Kind.CALL, Kind.UNKNOWN) and all(ranks.get(t) == 0 for t in targets):
        return []  # a number: no array's memory
    elif kind in (Kind.AGGREGATE, Kind.UNPACK, Kind.POP, Kind.CALL, Kind.UNKNOWN):
        value = stmt.value
        if isinstance(value, gast.Call):  # its arguments (and receiver), not the function's name
            parts = value.args + [k.value for k in value.keywords]
            if isinstance(value.func, gast.Attribute) and not anno.has(value.func, "resolved"):
                parts.append(value.func.value)
            value = gast.Tuple(elts=parts, ctx=gast.Load())
        sources = nodes.loaded_names(value)
        if kind == Kind.UNPACK:
            sources.append(anno.get(stmt, "source"))
        if kind == Kind.POP:
            sources.append(anno.get(stmt, "list"))
    else:
        return []
    return [(t, s) for t in targets for s in sources if ranks.get(s) != 0 or kind in (Kind.AGGREGATE, Kind.COPY)]


def _returns_argument(stmt) -> bool:
    """``srcgrad.stop_gradient(y)``: ``y`` itself."""
    from .. import runtime
    rule = anno.get(stmt, "rule")
    return rule is not None and rule is registry.lookup(runtime.stop_gradient) \
        and isinstance(stmt.value, gast.Call)


def _user_rule(rule) -> bool:
    """A rule registered by the user (not one of ``srcgrad/rules``)."""
    module = getattr(getattr(rule, "adjoint", None), "__module__", None) or ""
    return rule is not None and rule.adjoint is not None and not module.startswith("srcgrad.")


def _may_not_copy(stmt, rule) -> bool:
    """``np.array(y, copy=False)``, ``y.astype(t, copy=None)``: ``y`` itself may come back."""
    if rule is None or not any(rule is registry.lookup(fn) for fn in _COPY_ARGUMENT):
        return False
    copy = (anno.get(stmt, "bound") or {}).get("copy")
    return not (copy is None or isinstance(copy, gast.Constant) and copy.value is True)


def _uses(stmt) -> set:
    if isinstance(stmt, gast.FunctionDef):
        return set(anno.get(stmt, "captures") or ())
    return set(nodes.loaded_names(stmt))


class _Liveness:
    """May-liveness in one backward walk, recording the names live right after each
    statement whose id is a key of ``after``.  A loop's body is walked once, with
    what is live at its top known beforehand: what is live after the loop, what
    its header reads, and what the body reads before binding it (``_exposed``, a
    first walk of the body that records nothing)."""

    def __init__(self, after):
        self.after, self.recording, self.exposed = after, True, {}

    def block(self, stmts, live) -> set:
        """Names live before ``stmts`` given ``live`` after them (changed in place)."""
        for stmt in reversed(stmts):
            if self.recording and id(stmt) in self.after:
                self.after[id(stmt)] = set(live)
            if isinstance(stmt, gast.If):
                body = self.block(stmt.body, set(live))
                live = self.block(stmt.orelse, live)
                live |= body
                live.update(nodes.loaded_names(stmt.test))
            elif isinstance(stmt, (gast.For, gast.While)):
                live.update(nodes.loaded_names(stmt.iter if isinstance(stmt, gast.For) else stmt.test))
                bound = set(nodes.assigned_names(stmt)) if isinstance(stmt, gast.For) else set()
                live |= self._exposed(stmt) - bound  # the body's end flows to its start
                self.block(stmt.body, set(live))
            elif isinstance(stmt, gast.FunctionDef):
                live.discard(stmt.name)
                live |= _uses(stmt)
            else:
                live.difference_update(nodes.assigned_names(stmt))
                live |= _uses(stmt)
        return live

    def _exposed(self, loop) -> set:
        """What ``loop``'s body reads before binding it (live at its top when nothing is after)."""
        if id(loop) not in self.exposed:
            recording, self.recording = self.recording, False
            self.exposed[id(loop)] = self.block(loop.body, set())
            self.recording = recording
        return self.exposed[id(loop)]
