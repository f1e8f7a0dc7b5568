"""Pass 4 — normalize: one primitive per statement (A-normal form), single assignment.

Requires: a validated, resolved ``FunctionDef``.
Guarantees: a :class:`Core` program — a flat list of statements, each
``target = <one primitive applied to atoms>`` (atoms: names and constants),
with ``rule``/``bound``/``kind``/``group`` annotations (a statement of kind ``op`` is
always an assignment: a primitive alone on a line is bound to an ``unused`` name,
which dead-code removal drops); ``z += y`` written as
``z = z + y``; method and attribute spellings (``x.sum()``, ``x.dot(w)``)
turned into their NumPy functions; NumPy called under the generated module's
own name (``from numpy import exp`` → ``np.exp``); each name assigned once
(a reassigned ``x`` becomes ``x_2``), so no value is overwritten before the
backward sweep reads it.  Nested expressions get temporaries ``_t1, _t2, ...``
in source order, so output is byte-identical run to run.

Control flow stays structured.  Inside a branch or a loop body each name is
still assigned once per execution; at the end of an ``if`` the two versions
of a name meet in a merge copy (``y_3 = y_2`` / ``y_3 = y``); a loop's
*carried* names (assigned in the body and read by a later iteration or after
the loop) keep one name, updated by a copy at the end of the body
(``h = h_2``, annotated ``carry``; the loop lists them all in ``carried``, also
those that only a nested loop updates, which need no copy at this level).  Loops over sequences, ``enumerate``,
``zip`` and ``reversed`` become index loops over ``range`` (``reversed(xs)`` under
``enumerate`` or ``zip``: ``xs[::-1]``).

Before::

    s = 0.0
    for v in x:
        s = s + v * 2
    return np.sum((x - y) ** 2) + s

After (``s`` is carried: the body's ``s_2`` copied back to it at the end of each iteration)::

    s = 0.0
    _t1 = len(x)
    for _i in range(_t1):
        v_2 = x[_i]
        _t2 = v_2 * 2
        s_2 = s + _t2
        s = s_2
        v = v_2
    _t3 = x - y
    _t4 = _t3 ** 2
    _t5 = np.sum(_t4)
    result = _t5 + s
    return result

The walk is one class, :class:`_Lowering`, whose state (``__init__``: what it knows of
each name) every job reads; each job is a mixin in a module of its own, beside this one:

- ``lower_statements``: each statement (assignments, ``+=``, ``return``, ``del``, ``with``,
  a nested ``def``); ``lower_expressions``: each expression, to atoms;
- ``lower_calls``: which call is what (a NumPy function, a builtin container, an array
  method, a list's or dict's, one of the user's); ``lower_apply``: arguments, spreads,
  a primitive applied through its rule, a call to the user's code;
- ``lower_aggregates``: tuples, lists and dicts known item by item, and unpacking;
  ``lower_lists``, ``lower_dicts``: lists and dicts changed in place, dict views and
  methods; ``lower_writes``: writes into items (``y[i] = v``); ``lower_objects``: records,
  named tuples, fields, ``super()``; ``lower_loops``: loop headers and carried names;
- ``lower_kinds``: what the walk knows of the kind of each value it binds
  (array, number, list, dict, tuple), and ``numpy_spellings`` NumPy's names for methods.

This module keeps the walk's state, its blocks, emitting (``_emit``: one statement, one
fresh or stored name), copies and branches.
"""
from __future__ import annotations

import builtins
import collections

import gast

from ..ir import Core  # noqa: F401 - the form this pass makes (read as ir.Core too)
from .. import anno, nodes
from ..templates import UNKNOWN
from ..tree import TreeRank
from .lower_aggregates import _Aggregates
from .lower_apply import _Applications
from .lower_calls import _Calls
from .lower_dicts import _Dicts
from .lower_expressions import _Expressions
from .lower_kinds import _Kinds
from .lower_lists import _Lists
from .lower_loops import _LoopHeaders, _Loops
from .lower_objects import _Objects
from .lower_statements import _Statements, parameters
from .lower_writes import _ItemWrites
from .numpy_spellings import METHODS as _METHODS, array_method  # noqa: F401 (read from here: dispatch, tests)


def drop_decided_checks(body, ranks) -> None:
    """Remove the length checks of ``n, c, h, w = x.shape`` (``_check_length``) that the
    ranks decide: ``x`` of rank 4 has four sizes.  Only temporaries bound once are
    followed (``s = x.shape``, ``n = len(s)``, ``c = n != 4``, ``if c: raise``), so one
    pass over the function finds them."""
    once = {}
    for stmt in nodes.statements(body):
        for name in nodes.assigned_names(stmt):
            once[name] = stmt if name not in once else None

    def value(name):
        stmt = once.get(name)
        return stmt.value if stmt is not None else None

    def decided(test) -> bool:
        compare = value(test.id) if isinstance(test, gast.Name) else None
        if not (isinstance(compare, gast.Compare) and isinstance(compare.ops[0], gast.NotEq)
                and isinstance(compare.left, gast.Name) and isinstance(compare.comparators[0], gast.Constant)):
            return False
        length = value(compare.left.id)
        if not (isinstance(length, gast.Call) and anno.get(length.func, "resolved", None) is builtins.len
                and len(length.args) == 1 and isinstance(length.args[0], gast.Name)):
            return False
        shape = value(length.args[0].id)
        return isinstance(shape, gast.Attribute) and shape.attr == "shape" and isinstance(shape.value, gast.Name) \
            and ranks.get(shape.value.id) == compare.comparators[0].value

    def kept(block):
        out = []
        for stmt in block:
            if isinstance(stmt, gast.If) and not stmt.orelse and isinstance(stmt.body[-1], gast.Raise) \
                    and decided(stmt.test):
                continue
            for field in ("body", "orelse"):
                inner = getattr(stmt, field, None)
                if inner and not isinstance(stmt, gast.FunctionDef):
                    setattr(stmt, field, kept(inner))
            out.append(stmt)
        return out

    body[:] = kept(body)


def transform(fdef: gast.FunctionDef, free_names, backend, reserved=(), param_ranks=(), scope_ranks=None) -> Core:
    """``param_ranks``: the specialisation's ranks; a parameter with an integer
    rank is an array, so ``p.sum()`` is NumPy's ``sum`` and not a method of yours.
    ``scope_ranks``: ``{scope: TreeRank}``, the ranks of the data read from a scope
    (``model.G``, ``resolve.FreeNames.scope_ranks``), known as a model's fields are."""
    return _Lowering(fdef, free_names, backend, reserved, param_ranks, scope_ranks or {}).run()


class _Lowering(_Statements, _Expressions, _Calls, _Applications, _Aggregates, _Lists, _Dicts, _ItemWrites,
                _Objects, _Loops, _LoopHeaders, _Kinds):
    """One function's walk: its state, its blocks, emitting, copies and branches (the mixins:
    the module's docstring)."""

    def __init__(self, fdef, free_names, backend, reserved, param_ranks=(), scope_ranks=None):
        self.fdef, self.backend = fdef, backend
        self.free_names = free_names
        names = nodes.names_in(fdef) | set(free_names) | set(reserved)
        renamed = _rename_reserved(fdef, set(reserved), names)
        self.params = parameters(fdef.args)
        self.core = Core(fdef.name, self.params, [], None, names, renamed=renamed)
        self.current = {p: p for p in self.params}  # user name -> its current SSA name
        self.group = None
        self.block = self.core.body  # the statement list being filled
        self.aggregates = {}  # name of a tuple/list/dict value -> {key: atom}
        self.stored = set()  # the names _store gave out (each bound by one statement only)
        self.stored_fields = {}  # (object's name, attribute) -> the atom stored there in this block
        self.list_depth = {}  # list display's name -> the number of loops around where it was made
        self.unbound = set()  # names a loop carries that nothing bound before it
        self.escaped = {}     # array name -> origin of where it was stored or passed on (shared since)
        self.dicts = set()    # which of those are dicts
        self.known_keys = {}  # a version of a dict made here, written with literal keys -> its keys
        self.made_by = {}     # name -> (is a new array, origin): may `name[i] = v` write into it?
        self.lists = set()    # lists grown with append or changed by pop: items known at run time only
        self.own_lists = set()  # lists made here (`xs = [...]`), which pop may change in place
        self.containers = set()  # names of lists, tuples and dicts made here
        self.runtime_lists = set()  # names of lists and dicts whose items are known when it runs only
        self.runtime_sequences = set()  # those of them known to be lists or tuples (not dicts, not iterators)
        self.runtime_mappings = set()  # ... and those known to be dicts (`dict()`, `OrderedDict()`)
        self.copied_from = {}  # a list's name -> the name it is a copy of (`b = a`)
        self.tuples = set()  # names known to hold tuples (displays, `.shape`, joins, slices): `+=` rebinds
        self.named_fields = {}  # name of a named tuple made here -> its field names
        self.records = set()  # objects made here from their fields (`P(a, b)`): known by attribute
        self.aliased = set()     # names another name was bound to (`t = s`)
        self.held_in = collections.Counter()  # name -> how often stored as an item (`[xs]`, `ys.append(xs)`)
        self.entries = {}        # a dict made here -> {literal key: the name its entry holds}
        self.read_dicts = set()  # names in `entries` read since they were bound (an entry read out: `y = d["a"]`)
        self.passed = {}         # lists and dicts given to a function of yours -> origin of the call
        self.writes = []         # (array name, statement) of each `y[i] = v`, in order
        self.loop_writes = []    # for each loop being lowered: where its body's writes start
        self.closures = {}       # nested def's name -> (its user name, {user name it reads: its name then})
        self.scalars = {p for p, r in zip(self.params, param_ranks) if r == 0}
        # Lists (and tuples) passed in: the ranks of their items are numbered, not named.
        self.sequences = {p for p, r in zip(self.params, param_ranks)
                          if isinstance(r, tuple) and r and all(isinstance(k, int) for k, _ in r)}
        # Names known to hold arrays (or numbers): their .sum() is np.sum.
        self.arrays = {p for p, r in zip(self.params, param_ranks) if isinstance(r, int)}
        self.ranks = {p: r for p, r in zip(self.params, param_ranks) if isinstance(r, int)}
        self.integers = set()  # indices of `range` loops
        # Tuples, lists and dicts passed in: what they hold is part of the specialisation,
        # so `f(*xs)` can pass each element on its own.
        self.structures = {p: r for p, r in zip(self.params, param_ranks) if isinstance(r, TreeRank)}
        self.structures.update(scope_ranks or {})
        # Names holding a field read from one of those: an array (`self.W`), or a
        # structure whose ranks are known too (`self.layer1`).
        self.field_arrays = set()
        self.field_structures = {}
        self.field_reads = set()  # names bound to a field of an object passed in (`P = self.parameters`)
        self.field_of = {}  # such a name -> (the object's name, the field)
        self.stored_entries = {}  # ((object's name, field), key) -> the atom stored there in this block
        self.reads = None  # user name -> how many times the function reads it (for `_carried`)

    def run(self) -> Core:
        self._block(self.fdef.body)
        self.core.final_names = dict(self.current)
        self.core.maybe_unbound |= self.unbound
        return self.core

    def _block(self, stmts):
        for stmt in stmts:
            self.group = anno.get(stmt, "origin")
            self._statement(stmt)

    def _in_block(self, stmts, prelude=None) -> list:
        """Lower ``stmts`` into a new statement list (a branch or loop body)."""
        group, saved, self.block = self.group, self.block, []
        fields, entries = dict(self.stored_fields), dict(self.stored_entries)
        if prelude is not None:
            prelude()
        self._block(stmts)
        out, self.block, self.group = self.block, saved, group
        # A field stored in the block holds that value on some paths only (or from the
        # previous iteration, at a loop's top): reads after it read the object.
        self.stored_fields = {k: v for k, v in fields.items() if self.stored_fields.get(k) is v}
        self.stored_entries = {k: v for k, v in entries.items() if self.stored_entries.get(k) is v}
        return out

    def _store(self, user_name: str) -> str:
        if user_name in self.current or user_name in self.params or user_name in self.stored:
            # (also a name the other branch of an `if` bound first: what normalize knows of
            # each branch's value, its items, its kind, stays apart until they merge)
            new = self.core.fresh(user_name)
        else:
            new = user_name
            self.core.names.add(new)
        self.stored.add(new)
        self.current[user_name] = new
        return new

    def _emit_stmt(self, stmt, origin_node, **annotations):
        anno.set(stmt, "group", self.group)
        anno.set(stmt, "origin", anno.get(origin_node, "origin"))
        for key, value in annotations.items():
            anno.set(stmt, key, value)
        self.block.append(stmt)
        if self.entries or self.aggregates:  # (an entry read out may be the array `d[k] += v` changes in place)
            read = stmt.value if isinstance(stmt, (gast.Assign, gast.Expr)) else getattr(stmt, "iter", None) \
                or getattr(stmt, "test", None)  # (a loop's or branch's body was read statement by statement)
            if read is not None:
                self.read_dicts.update(n for n in nodes.loaded_names(read) if n in self.entries or n in self.aggregates)
        return stmt

    def _emit(self, value, origin_node, target, target_hint, effect, **annotations):
        """Emit ``target = value`` (or ``value`` for effect) and return the target atom."""
        if annotations.get("kind") in ("call", "unknown"):
            self.stored_fields.clear()  # (code not inlined may store other values in them)
            self.stored_entries.clear()
        anno.set(value, "origin", anno.get(origin_node, "origin"))
        if effect and (annotations.get("kind") == "op" or isinstance(value, gast.Compare)):
            # A primitive or a comparison alone on a line (`np.sin(x)`, `x > 0`) changes
            # nothing: bound to a name like any other value, dead-code removal drops it
            # (an impure one, a random draw or an operator of an object of unknown class,
            # is kept and runs).
            effect, target_hint = False, target_hint or "unused"
            operands = [value.left, *value.comparators] if isinstance(value, gast.Compare) else []
            if annotations.get("maybe_object") or any(isinstance(a, gast.Name) and not self._known_number(a)
                                                      for a in operands):
                annotations["impure"] = True  # a user's class's `__mul__`/`__gt__` may do something: it runs
        if effect:
            self._emit_stmt(gast.Expr(value=value), origin_node, **annotations)
            return None
        if target is not None:
            new = self._store(target)
        else:
            new = self.core.fresh(target_hint) if target_hint else self.core.fresh()
        self._emit_stmt(nodes.assign(new, value), origin_node, **annotations)
        self._note_kind(new, value, origin_node, annotations)
        return nodes.name(new)

    def _copy(self, target: str, source: str, origin_node, **annotations):
        stmt = nodes.assign(target, nodes.name(source))
        anno.set(stmt, "kind", "copy")
        anno.set(stmt, "group", self.group)
        anno.set(stmt, "origin", anno.get(origin_node, "origin"))
        for key, value in annotations.items():
            anno.set(stmt, key, value)
        return stmt

    def _copy_atom(self, target, atom, origin_node):
        stmt = nodes.assign(target, atom)
        for key, value in (("kind", "copy"), ("group", self.group),
                           ("origin", anno.get(origin_node, "origin"))):
            anno.set(stmt, key, value)
        return stmt

    def _branches(self, stmt, lower_body, lower_orelse):
        """Lower two branches; merge the names they assign. Returns (body, orelse)."""
        before = dict(self.current)
        body = self._in_block([], prelude=lower_body)
        after_body, self.current = self.current, dict(before)
        orelse = self._in_block([], prelude=lower_orelse)
        after_else, self.current = self.current, dict(before)
        for user in sorted(set(after_body) | set(after_else)):
            in_body, in_else = after_body.get(user), after_else.get(user)
            if in_body == in_else or in_body is None or in_else is None:
                self.current[user] = in_body or in_else
                if (in_body is None or in_else is None) and user not in before:
                    self.core.maybe_unbound.add(in_body or in_else)  # `if c: z = ...` alone
                continue
            merged = self.core.fresh(user)
            body.append(self._copy(merged, in_body, stmt))
            orelse.append(self._copy(merged, in_else, stmt))
            self.current[user] = merged
            # A new array if both branches made one (others sharing it: analysis/sharing.py).
            fresh = all(self.made_by.get(n, (False, None))[0] and n not in self.escaped
                        for n in (in_body, in_else))
            self.made_by[merged] = (fresh, anno.get(stmt, "origin"))
            if in_body in self.arrays and in_else in self.arrays:
                self.arrays.add(merged)
            if in_body in self.dicts and in_else in self.dicts:  # (a dict written in a branch)
                self.dicts.add(merged)
                self.containers.add(merged)
            if in_body in self.scalars and in_else in self.scalars:  # (`n = 3; if c: n = 2`: a number)
                self.scalars.add(merged)
        return body, orelse

    def _if(self, stmt):
        test = self._lower(stmt.test)
        body, orelse = self._branches(stmt, lambda: self._block(stmt.body),
                                      lambda: self._block(stmt.orelse))
        node = gast.If(test=test, body=body or [gast.Pass()], orelse=orelse)
        self._emit_stmt(node, stmt, kind="if")

    def _ifexp(self, node, target, target_hint):
        """``a if c else b`` as an ``if`` statement that assigns one name."""
        test = self._lower(node.test)
        before = self.current.get(target)
        name = self._store(target) if target is not None else self.core.fresh(target_hint)
        if target is not None:  # the branches read the value from before (`s = s * v if c else s`)
            self.current[target] = before if before is not None else target

        def branch(expr):
            def lower():
                atom = self._lower(expr)
                self.block.append(self._copy_atom(name, atom, node))
            return lower

        body = self._in_block([], prelude=branch(node.body))
        orelse = self._in_block([], prelude=branch(node.orelse))
        if target is not None:
            self.current[target] = name
        self._emit_stmt(gast.If(test=test, body=body, orelse=orelse), node, kind="if")
        return nodes.name(name)


def _rename_reserved(fdef, reserved: set, names: set) -> dict:
    """The function's own names that the generated code reads as its modules (``rt``, ``np``,
    ``dispatch``: ``reserved``) renamed, ``rt`` → ``rt_2``, in one walk: a GRU's reset gate
    ``rt`` would hide ``rt.fill_like``.  Parameters too (the code is called by position;
    ``Core.renamed`` maps ``wrt=`` names), a nested ``def``'s and its keywords at its calls.
    Returns ``{user name: new name}``."""
    found = [n for n in nodes.walk(fdef)
             if isinstance(n, (gast.Name, gast.FunctionDef, gast.Call, gast.Global, gast.Nonlocal))]
    bound = {n.name for n in found if isinstance(n, gast.FunctionDef) and n is not fdef}
    bound |= {n.id for n in found if isinstance(n, gast.Name) and not isinstance(n.ctx, gast.Load)}
    declared = {name for n in found if isinstance(n, (gast.Global, gast.Nonlocal)) for name in n.names}
    clash = sorted(bound & reserved - declared)  # (a `global rt` is the module's name: kept)
    if not clash:
        return {}
    renamed = {}
    for user in clash:
        k = 2
        while f"{user}_{k}" in names:
            k += 1
        renamed[user] = f"{user}_{k}"
        names.add(renamed[user])
    defs = {n.name for n in found if isinstance(n, gast.FunctionDef) and n is not fdef}
    for n in found:
        if isinstance(n, gast.Name) and n.id in renamed:
            n.id = renamed[n.id]
        elif isinstance(n, gast.FunctionDef) and n is not fdef and n.name in renamed:
            n.name = renamed[n.name]
        elif isinstance(n, gast.Call) and isinstance(n.func, gast.Name) and n.func.id in defs:
            for keyword in n.keywords:  # (a nested def's parameter renamed: `g(x, rt=rt)`)
                keyword.arg = renamed.get(keyword.arg, keyword.arg)
    return renamed


__all__ = ["Core", "transform", "UNKNOWN"]
