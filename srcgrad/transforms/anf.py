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

Before/after::

    return np.sum((y_pred - y) ** 2)   →   _t1 = y_pred - y
                                           _t2 = _t1 ** 2
                                           result = np.sum(_t2)
                                           return result
"""
from __future__ import annotations

import builtins
import collections
import dataclasses
import inspect
import operator

import gast
import numpy as np

from .. import anno, errors, nodes, runtime, templates
from ..backends import numpy as numpy_backend
from ..rules import registry
from ..templates import UNKNOWN, is_literal, literal, static_value
from ..tree import TreeRank

_BINOPS = {gast.Add: operator.add, gast.Sub: operator.sub, gast.Mult: operator.mul,
           gast.Div: operator.truediv, gast.Pow: operator.pow, gast.MatMult: operator.matmul,
           gast.FloorDiv: operator.floordiv, gast.Mod: operator.mod,
           # No rules: integer and boolean results, refused when given a value being differentiated.
           gast.BitAnd: operator.and_, gast.BitOr: operator.or_, gast.BitXor: operator.xor,
           gast.LShift: operator.lshift, gast.RShift: operator.rshift}
_BITWISE = {gast.BitAnd: "&", gast.BitOr: "|", gast.BitXor: "^", gast.LShift: "<<", gast.RShift: ">>"}
_UNARY = {gast.USub: operator.neg, gast.UAdd: operator.pos, gast.Not: operator.not_,
          gast.Invert: operator.invert}
_METHODS = {
    "sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod,
    "var": np.var, "std": np.std, "dot": np.dot, "reshape": np.reshape,
    "transpose": np.transpose, "ravel": np.ravel, "flatten": np.ravel, "squeeze": np.squeeze,
    "clip": np.clip, "copy": np.copy, "argmax": np.argmax, "argmin": np.argmin,
    "any": np.any, "all": np.all, "round": np.round, "item": runtime.item,
    "cumsum": np.cumsum, "swapaxes": np.swapaxes, "trace": np.trace, "cumprod": np.cumprod,
    "take": np.take, "repeat": np.repeat, "diagonal": np.diagonal, "argsort": np.argsort,
    "nonzero": np.nonzero, "tolist": runtime.tolist, "searchsorted": np.searchsorted,
}  # (not `sort`, `partition`, `resize`, `put`: the method changes the array, the function copies)
if hasattr(np, "astype"):  # NumPy >= 2.1
    _METHODS["astype"] = np.astype
# x.reshape(2, 3) means np.reshape(x, (2, 3)); x.transpose(1, 0) means np.transpose(x, (1, 0)).
_VARARG_METHODS = {"reshape", "transpose"}
_ARRAY_ATTRIBUTES = {"shape", "ndim", "size", "dtype", "itemsize", "nbytes"}
_SHAPE_ATTRIBUTES = {"shape", "ndim", "size", "dtype"}  # never differentiated, whatever holds them

# operator.floordiv / not / invert have no derivative: integer-valued or boolean.
registry.nondifferentiable(operator.floordiv, operator.not_, operator.invert)


@dataclasses.dataclass
class Core:
    """A function in core form.

    Attributes:
        name: the user's function name.
        params: parameter names, in order.
        body: core statements (the last is ``return <atom>``).
        result: the returned atom.
        names: every identifier in use, so later passes can make fresh ones.
    """

    name: str
    params: list
    body: list
    result: gast.expr
    names: set
    counter: list = dataclasses.field(default_factory=lambda: [0])
    final_names: dict = dataclasses.field(default_factory=dict)  # user name -> its last SSA name
    maybe_unbound: set = dataclasses.field(default_factory=set)  # bound on some paths only
    renamed: dict = dataclasses.field(default_factory=dict)  # user name -> its name here (`_rename_reserved`)

    def fresh(self, base: str | None = None) -> str:
        """A new name: ``_t<n>`` for temporaries, else ``base``, ``base_2``, ..."""
        if base is None:
            while True:
                self.counter[0] += 1
                candidate = f"_t{self.counter[0]}"
                if candidate not in self.names:
                    break
        else:
            # (from the last one given: ``names`` only grows, so base ... base_k are still
            # taken, and a name reused on every line does not try them all each time)
            k = self._given.get(base, 1)
            candidate = base if k == 1 else f"{base}_{k}"
            while candidate in self.names:
                k += 1
                candidate = f"{base}_{k}"
            self._given[base] = k
        self.names.add(candidate)
        return candidate

    def __post_init__(self):
        self._given = {}  # base -> k of the last name fresh(base) gave (a copy starts afresh)


def _added_at(call):
    """``(a, index, values)`` of a call ``np.add.at(a, index, values)`` of a name, else None."""
    if isinstance(call, gast.Call) and len(call.args) == 3 and not call.keywords \
            and not any(isinstance(a, gast.Starred) for a in call.args) and isinstance(call.args[0], gast.Name) \
            and anno.get(call.func, "resolved", None) == np.add.at:
        return tuple(call.args)
    return None


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


class _Lowering:
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

    # ---- statements -------------------------------------------------------
    def _statement(self, stmt):
        if isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], (gast.Tuple, gast.List)):
            self._unpack(stmt.targets[0].elts, stmt.value, stmt)
        elif isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Subscript):
            self._setitem(stmt.targets[0], stmt.value, stmt)
        elif isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Attribute):
            self._setattr(stmt.targets[0], stmt.value, stmt)
        elif isinstance(stmt, gast.AugAssign) and isinstance(stmt.target, gast.Attribute):
            # `self.acc += v` changes an array the field holds in place (`s = self.acc` sees it), which
            # srcgrad computes as a new array: refused when it runs where the field holds an array.
            obj, origin = self._lower(stmt.target.value), anno.get(stmt, "origin")
            check = nodes.call("rt.not_in_place", [nodes.copy(obj), nodes.const(stmt.target.attr),
                                                   nodes.const(nodes.to_source(stmt.target).strip()),
                                                   nodes.const(_op_symbol(stmt.op)),
                                                   nodes.const(origin.where if origin else "?"), nodes.const(True)])
            self._emit(check, stmt, None, "_checked", False, kind="nondiff", rule=None, impure=True)
            read = nodes.copy(stmt.target)
            read.ctx = gast.Load()
            value = gast.BinOp(left=read, op=stmt.op, right=stmt.value)
            anno.inherit(value, stmt)
            self._setattr(stmt.target, value, stmt)
        elif isinstance(stmt, gast.AugAssign) and isinstance(stmt.target, gast.Subscript):
            self._check_augmented_entry(stmt)
            read = nodes.copy(stmt.target)
            read.ctx = gast.Load()
            value = gast.BinOp(left=read, op=stmt.op, right=stmt.value)
            anno.inherit(value, stmt)
            self._setitem(stmt.target, value, stmt)
        elif isinstance(stmt, gast.Assign):
            self._lower(stmt.value, target=stmt.targets[0].id)
        elif isinstance(stmt, gast.AugAssign) and isinstance(stmt.op, gast.Add) \
                and self.current.get(stmt.target.id, stmt.target.id) in self.own_lists:
            # `outs += [h]` on a list made here grows it in place, as `outs.extend([h])` does.
            grow = gast.Expr(value=nodes.call(gast.Attribute(value=nodes.name(stmt.target.id), attr="extend",
                                                             ctx=gast.Load()), [stmt.value]))
            anno.inherit(grow, stmt)
            anno.inherit(grow.value, stmt)
            self._statement(grow)
        elif isinstance(stmt, gast.AugAssign):
            self._check_augmented(stmt)
            value = gast.BinOp(left=nodes.copy(stmt.target), op=stmt.op, right=stmt.value)
            anno.inherit(value, stmt)
            value.left.ctx = gast.Load()
            before = self.current.get(stmt.target.id, stmt.target.id)
            after = self._lower(value, target=stmt.target.id)
            if self.block and before not in self.scalars and before not in self.tuples \
                    and isinstance(after, gast.Name):
                # NumPy changes the array in place: analysis/sharing.py refuses it where a
                # view or alias of it is read afterwards (they would see the change).
                anno.set(self.block[-1], "augments", before)
                # The same array as before (`_check_augmented`: one no other name holds), or
                # a new number: `m &= a; m |= b` writes into it again.
                self.made_by[after.id] = (True, self.made_by.get(before, (True, None))[1])
        elif isinstance(stmt, gast.Return):
            if isinstance(stmt.value, gast.Tuple):  # several outputs (or a loss and its aux)
                atom = nodes.tuple_([self._lower(e, target_hint="result" if not isinstance(e, gast.Name)
                                                 else None) for e in stmt.value.elts])
            else:
                hint = "result" if not isinstance(stmt.value, gast.Name) else None
                atom = self._lower(stmt.value, target_hint=hint)
            self.core.result = atom
            self._emit_stmt(nodes.ret(nodes.copy(atom)), stmt, kind="return")
        elif isinstance(stmt, gast.Delete):  # `del d[k]` is `d.pop(k)` on a dict or list made here
            target = stmt.targets[0]
            held = self._held(target.value)
            if held is None or held not in self.dicts | self.own_lists | self.containers:
                raise errors.at(stmt, f"srcgrad cannot `del` an entry of `{nodes.to_source(target.value).strip()}`: "
                                "only of a dict or list made in this function",
                                "build a new one without the entry (`d = {k: v for k, v in d.items() if k != key}`)")
            pop = anno.inherit(nodes.call(gast.Attribute(value=nodes.copy(target.value), attr="pop",
                                                         ctx=gast.Load()), [nodes.copy(target.slice)]), stmt)
            self._lower(pop, effect=True)
        elif isinstance(stmt, gast.Expr):
            if isinstance(stmt.value, gast.Constant):
                return  # docstring
            added = _added_at(stmt.value)
            if added is not None:
                # `np.add.at(a, idx, v)`: `a[...] = rt.added_at(a, idx, v)`, a write into `a` in
                # place (what the sharing analysis follows and refuses as any write), of `a` with
                # the values added, repeated indices each adding
                target = anno.inherit(gast.Subscript(value=nodes.copy(added[0]), slice=gast.Constant(
                    value=Ellipsis, kind=None), ctx=gast.Store()), stmt)
                value = anno.inherit(nodes.call("rt.added_at", [nodes.copy(a) for a in added]), stmt)
                anno.set(value.func, "resolved", runtime.added_at)
                self._setitem(target, value, stmt)
                return
            self._lower(stmt.value, effect=True)
        elif isinstance(stmt, gast.If):
            self._if(stmt)
        elif isinstance(stmt, gast.For):
            self._for(stmt)
        elif isinstance(stmt, gast.While):
            self._while(stmt)
        elif isinstance(stmt, gast.FunctionDef):
            self._nested_def(stmt)
        elif isinstance(stmt, gast.With):
            self._with(stmt)
        elif isinstance(stmt, gast.Raise):  # runs in the forward sweep; nothing to differentiate
            exc, cause = (None if e is None else self._lower(e) for e in (stmt.exc, stmt.cause))
            self._emit_stmt(gast.Raise(exc=exc, cause=cause), stmt, kind="unknown")
        # gast.Pass: nothing

    def _with(self, stmt):
        """``with m as v: body``: ``v = rt.enter(m)``, the body as if inline, then
        ``rt.leave(m)``, in the forward sweep (``reverse`` refuses a manager given, or
        giving, a value being differentiated)."""
        group, managers = self.group, []
        for item in stmt.items:
            manager = self._lower(item.context_expr)
            enter = nodes.call("rt.enter", [nodes.copy(manager)])
            target = item.optional_vars.id if item.optional_vars is not None else None
            self._emit(enter, item.context_expr, target, None, target is None, kind="unknown", manager=True)
            managers.append(manager)
        self._block(stmt.body)
        self.group = group
        for manager in reversed(managers):
            leave = nodes.call("rt.leave", [nodes.copy(manager)])
            self._emit(leave, stmt, None, None, True, kind="unknown", manager=True)

    def _nested_def(self, stmt):
        """``def g(...)`` inside: kept as it is (compiled on its own when called),
        with the outer names it reads renamed to their current versions."""
        inner = nodes.copy(stmt)
        own = set(parameters(inner.args)) | {
            n.id for n in nodes.walk(inner) if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)}
        captured, seen, shown = set(), {}, {}
        # Defaults (`def layer(h, w=w)`) are read here, in this function, when the `def`
        # runs: captures like any other, whatever the parameter they fill is named.
        outer = [d for d in inner.args.defaults + inner.args.kw_defaults if d is not None]
        outer_ids = {id(n) for d in outer for n in nodes.walk(d)}
        for node in nodes.walk(inner):
            if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Load) and node.id in self.current \
                    and (node.id not in own or id(node) in outer_ids):
                if id(node) not in outer_ids:  # (a default is read once, at the `def`: not when called)
                    seen[node.id] = self.current[node.id]
                shown[self.current[node.id]] = node.id
                node.id = self.current[node.id]
                captured.add(node.id)
        inner.name = self._store(stmt.name)
        self.closures[inner.name] = (stmt.name, seen, anno.get(stmt, "lambda", False))
        anno.set(inner, "group", self.group)
        anno.set(inner, "origin", anno.get(stmt, "origin"))
        anno.set(inner, "kind", "def")
        anno.set(inner, "captures", sorted(captured))
        anno.set(inner, "captured_as", shown)
        self.block.append(inner)
    # ---- tuples, lists and dicts -----------------------------------------
    def _aggregate(self, node, **emit):
        """``t = (a, b)``: kept as a value, and remembered element by element, so
        that ``t[0]`` is just ``a`` (scalar replacement of aggregates)."""
        if isinstance(node, gast.Dict) and any(k is None for k in node.keys):
            return self._merged_dict(node, **emit)
        if isinstance(node, gast.Dict):
            if not all(isinstance(k, gast.Constant) for k in node.keys):
                raise errors.at(node, "dict keys must be literals in differentiated code",
                                "write {'w': w, 'b': b}")
            keys = [k.value for k in node.keys]
            atoms = [self._lower(v) for v in node.values]
            value = gast.Dict(keys=[nodes.const(k) for k in keys], values=atoms)
        else:
            atoms = [self._lower(e) for e in node.elts]
            keys = list(range(len(atoms)))
            value = (gast.Tuple if isinstance(node, gast.Tuple) else gast.List)(
                elts=[nodes.copy(a) for a in atoms], ctx=gast.Load())
        return self._emit_aggregate(value, keys, atoms, node, **emit)

    def _merged_dict(self, node, **emit):
        """``{**p, 'k': v}``: where the keys of each ``**`` are known when compiling, one
        display of all the entries (a later key's value in the earlier one's place, as
        Python's); else ``rt.merged(a, b)`` dict by dict, whose rule gives each entry's
        adjoint to the dict whose value the merge kept."""
        parts, literal = [], {}
        for key, value in zip(node.keys, node.values):
            if key is None:
                if literal:
                    parts.append(literal)
                    literal = {}
                parts.append(self._spread(value, "mapping", len(parts)))
            elif isinstance(key, gast.Constant):
                literal[key.value] = self._lower(value)
            else:
                raise errors.at(node, "dict keys must be literals in differentiated code",
                                "write {'w': w, 'b': b}")
        if literal:
            parts.append(literal)
        if not any(isinstance(k, tuple) for part in parts for k in part):
            merged = {}
            for part in parts:
                merged.update(part)
            display = gast.Dict(keys=[nodes.const(k) for k in merged], values=list(merged.values()))
            made = self._emit_aggregate(display, list(merged), list(merged.values()), node, **emit)
            return made
        atoms = []
        for part in parts:
            if any(isinstance(k, tuple) for k in part):  # a `**d` whose keys are known when it runs only
                atoms.append(next(iter(part.values())))
            else:
                display = gast.Dict(keys=[nodes.const(k) for k in part], values=list(part.values()))
                atoms.append(self._emit_aggregate(display, list(part), list(part.values()), node,
                                                  target=None, effect=False))
        made = atoms[0] if len(atoms) == 1 else None
        if made is None or isinstance(made, gast.Name) and made.id in self.aggregates:
            made = self._apply(runtime.mapping_of, None, [atoms[0]], {}, node, func_node=nodes.dotted("dict"),
                               target=None, target_hint=None, origin_node=node, effect=False)
            for atom in atoms[1:]:
                made = self._apply(runtime.merged, None, [made, atom], {}, node, func_node=nodes.dotted("rt.merged"),
                                   target=None, target_hint=None, origin_node=node, effect=False)
        else:
            made = self._apply(runtime.mapping_of, None, [made], {}, node, func_node=nodes.dotted("dict"),
                               target=None, target_hint=None, origin_node=node, effect=False)
        for known in (self.containers, self.dicts):
            known.add(made.id)
        self.made_by[made.id] = (True, anno.get(node, "origin"))
        target = emit.get("target")
        if target is None and not emit.get("effect"):
            return made
        copied = self._emit(made, node, target, emit.get("target_hint"), emit.get("effect"), kind="copy")
        if copied is not None:
            self._same_kind(copied.id, made.id)
        return copied

    def _emit_aggregate(self, value, keys, atoms, node, **emit):
        emit.setdefault("target_hint", None)
        emit.setdefault("origin_node", node)
        result = self._emit(value, kind="aggregate", elements=dict(zip(keys, atoms)), **emit)
        self._escape(atoms, node)
        self.held_in.update(a.id for a in atoms if isinstance(a, gast.Name))
        if result is not None:
            self.aggregates[result.id] = dict(zip(keys, atoms))
            if isinstance(value, gast.Tuple):
                self.tuples.add(result.id)
            if isinstance(value, gast.List):
                self.own_lists.add(result.id)
                self.list_depth[result.id] = len(self.loop_writes)  # (how many loops it was made in)
            if isinstance(value, gast.Dict):
                self.dicts.add(result.id)
                self.entries[result.id] = {k: a.id for k, a in zip(keys, atoms) if isinstance(a, gast.Name)}
                self.list_depth[result.id] = len(self.loop_writes)
        return result

    def _super_call(self, node, **emit):
        """``super().name(args)`` → ``rt.super_method(C, self, 'name')(self, args)``: the
        base class's function, found at run time along ``type(self)``'s MRO after ``C``
        and called as a function of ``self``, so ``self``'s adjoint flows back through it."""
        sup = node.func.value
        if sup.args:
            if len(sup.args) != 2 or sup.keywords:
                raise errors.at(sup, "`super(...)` takes a class and an object here",
                                "write `super().name(...)` or `super(Class, self).name(...)`")
            cls, obj = self._lower(sup.args[0]), self._lower(sup.args[1])
        else:
            params = self.params
            if "__class__" not in self.free_names or not params:
                raise errors.at(sup, "`super()` without arguments outside a method",
                                "write `super(Class, self).name(...)`")
            cls, obj = nodes.name("__class__"), nodes.name(self.current.get(params[0], params[0]))
        find = nodes.call("rt.super_method", [cls, nodes.copy(obj), nodes.const(node.func.attr)])
        method = self._emit(find, node, None, "method", False, kind="nondiff", rule=None)
        args, kwargs = self._call_arguments(node)
        return self._user_call(method, [obj] + args, kwargs, node, **emit)

    def _constructor_arguments(self, cls, node, advice) -> dict:
        """The atoms ``cls(...)`` is given, by parameter name."""
        args, kwargs = self._call_arguments(node)
        self._check_spread(args, kwargs, node)
        try:
            return inspect.signature(cls).bind_partial(*args, **kwargs).arguments
        except TypeError as exc:
            raise errors.at(node, f"`{cls.__name__}(...)` does not accept these arguments ({exc})",
                            advice) from None

    def _record(self, cls, stored, node, **emit):
        """``p = P(a, b)`` for a class whose ``__init__`` only stores its parameters
        (``self.w = w``; a dataclass): made as written, and known attribute by
        attribute, so ``p.w`` is just ``a`` and ``p``'s adjoint (``{'w': w_bar}``, from
        its fields, properties and methods) flows back into ``a`` and ``b``."""
        given = self._constructor_arguments(cls, node, f"pass {cls.__name__}'s parameters")
        elements = {attr: given[param] for attr, param in stored.items() if param in given}
        value = nodes.call(nodes.copy(node.func), [], [(k, nodes.copy(v)) for k, v in given.items()])
        emit.setdefault("target_hint", None)
        result = self._emit(value, kind="aggregate", elements=elements, **emit)
        self._escape(list(given.values()), node)
        if result is not None:
            self.aggregates[result.id] = dict(elements)
            self.records.add(result.id)
            self.containers.discard(result.id)  # an object: its methods are the user's
        return result

    def _named_tuple(self, cls, node, **emit):
        """``t = Point(a, b)`` (a ``collections.namedtuple`` or ``typing.NamedTuple``):
        a tuple whose items are known by position and by field name, so ``t.x`` and
        ``t[0]`` are just ``a``; each item's adjoint is read by either key."""
        given = self._constructor_arguments(cls, node, f"pass its fields: {', '.join(cls._fields)}")
        elements = {}
        for i, field in enumerate(cls._fields):
            if field in given:
                elements[i] = elements[field] = given[field]
        value = nodes.call(nodes.copy(node.func), [], [(k, nodes.copy(v)) for k, v in given.items()])
        emit.setdefault("target_hint", None)
        result = self._emit(value, kind="aggregate", elements=elements, **emit)
        self._escape(list(given.values()), node)
        if result is not None and len(given) == len(cls._fields):  # (defaults: read when it runs)
            self.aggregates[result.id] = {i: given[f] for i, f in enumerate(cls._fields)}
            self.named_fields[result.id] = cls._fields
        return result

    def _display_value(self, display, node):
        """A list or tuple display already lowered in an argument position
        (``f([a, b])``, see :meth:`_argument`) as a value of its own, so that its
        adjoint reaches its items as an aggregate's does (nested displays too)."""
        atoms = [self._display_value(e, node) if isinstance(e, (gast.List, gast.Tuple)) else e
                 for e in display.elts]
        value = type(display)(elts=[nodes.copy(a) for a in atoms], ctx=gast.Load())
        return self._emit_aggregate(value, list(range(len(atoms))), atoms, node,
                                    target=None, effect=False)

    def _holds_sequence(self, name) -> bool:
        """Whether ``name`` is known to be a list or tuple: made here (a display, a list
        grown with append) or passed in (its items are part of the specialisation)."""
        return (name in self.containers and name not in self.dicts) or name in self.lists \
            or name in self.sequences

    def _array_arguments(self, prim, rule, args, kwargs, node):
        """Lists and tuples given where a rule takes an array, made values of their own.

        NumPy reads a list or tuple given for an array (``np.sum([a, 2 * b])``,
        ``np.max(xs)``) as ``np.array(it)``: so does srcgrad, with ``np.array``'s
        rule carrying each item's adjoint back.  A rule of yours (not NumPy's) is
        given the list or tuple itself, built as an aggregate, and its adjoint for
        that parameter is split among the items.  (Parameters that take a list of
        arrays, such as ``np.stack``'s, read displays item by item already.)
        Returns the new ``(args, kwargs)``.
        """
        try:
            bound = rule.signature.bind(*args, **kwargs)
        except TypeError:
            return args, kwargs  # reported by _apply
        numpy = registry.is_numpy(prim) or (getattr(prim, "__module__", None) or "").split(".")[0] == "scipy"
        replaced = {}
        for param in rule.diff_params:
            atom = bound.arguments.get(param)
            if param in rule.sequence_params or atom is None:
                continue
            if isinstance(atom, (gast.List, gast.Tuple)) \
                    and any(isinstance(n, gast.Name) for n in nodes.walk(atom)):
                replaced[id(atom)] = self._as_array(atom, node) if numpy else self._display_value(atom, node)
            elif numpy and isinstance(atom, gast.Name) and self._holds_sequence(atom.id):
                replaced[id(atom)] = self._as_array(atom, node)
        if not replaced:
            return args, kwargs
        return ([replaced.get(id(a), a) for a in args],
                {k: replaced.get(id(v), v) for k, v in kwargs.items()})

    def _as_array(self, atom, node):
        """``np.array(atom)`` as a statement of its own; its atom."""
        func = nodes.dotted(self._spell(np.array, node) or "np.array")
        return self._apply(np.array, None, [atom], {}, node, func_node=func, origin_node=node,
                           target=None, target_hint=None, effect=False)

    def _aggregate_element(self, base, index):
        if not isinstance(base, gast.Name) or base.id not in self.aggregates:
            return None
        key = static_value(index)
        elements = self.aggregates[base.id]
        if isinstance(key, int) and key < 0 and base.id not in self.dicts:
            key += len(elements)  # ys[-1] of a tuple or list of known length
        if key is UNKNOWN or not isinstance(key, (int, str)) or key not in elements:
            return None
        return nodes.copy(elements[key])

    def _unpack(self, targets, value, stmt, source=None):
        """``a, b = value``: all of the right side first, then each name (``source``:
        the right side's atom, where it is lowered already)."""
        if not all(isinstance(t, gast.Name) for t in targets):
            raise errors.at(stmt, "unpack into plain names", "write `a, b = f(x)`")
        if isinstance(value, (gast.Tuple, gast.List)) and len(value.elts) == len(targets):
            atoms = [self._lower(e) for e in value.elts]
            for t, atom in zip(targets, atoms):
                self._emit(nodes.copy(atom), stmt, t.id, None, False, kind="copy")
            return
        source = self._lower(value) if source is None else source
        if isinstance(source, gast.Name) and (source.id in self.dicts or self._dict_keys(source.id) is not None):
            # `a, b = d` unpacks a dict's keys (its values carry no adjoint this way)
            keys = self._dict_keys(source.id)
            if keys is not None and len(keys) == len(targets):
                for t, key in zip(targets, keys):
                    self._emit(nodes.const(key), stmt, t.id, None, False, kind="copy")
                return
            source = self._apply(runtime.iterated, None, [source], {}, stmt, func_node=nodes.dotted("rt.iterated"),
                                 origin_node=stmt, target=None, target_hint=None, effect=False)
        if isinstance(source, gast.Name) and self._known_length(source.id) != len(targets):
            self._check_length(source, len(targets), stmt)
        for i, t in enumerate(targets):
            element = self._aggregate_element(source, nodes.const(i))
            if element is not None:
                self._emit(element, stmt, t.id, None, False, kind="copy")
                continue
            item = gast.Subscript(value=nodes.copy(source), slice=nodes.const(i), ctx=gast.Load())
            if self._constant_entry(source, i):  # `w, n = p` with an integer `n`: a constant
                self._emit(item, stmt, t.id, None, False, kind="nondiff", rule=None)
                continue
            atom = self._emit(item, stmt, t.id, None, False, kind="unpack", source=source.id, index=i)
            self._field_rank(atom, source, i)  # (a tuple passed in: its entries' ranks are known)

    def _known_length(self, name):
        """The length of a tuple or list made here, or passed in (its ranks record each
        entry), else None."""
        if name in self.aggregates and name not in self.dicts:
            return len(self.aggregates[name])
        rank = self.structures.get(name, self.field_structures.get(name))
        return len(rank) if isinstance(rank, TreeRank) and rank.kind == "sequence" else None

    def _check_length(self, source, count, stmt):
        """``if len(xs) != 2: raise ValueError(...)`` before ``a, b = xs`` where the length
        of ``xs`` is not known here: Python's own check, else a longer ``xs`` would
        silently lose its tail (and its adjoint)."""
        def builtin(name, args):
            func = anno.set(nodes.name(name), "resolved", getattr(builtins, name))
            return nodes.call(func, args)
        where = anno.get(stmt, "origin")
        message = f"wrong number of values to unpack (expected {count})" + (f" (at {where.where})" if where else "")
        check = gast.If(test=gast.Compare(left=builtin("len", [nodes.copy(source)]), ops=[gast.NotEq()],
                                          comparators=[nodes.const(count)]),
                        body=[gast.Raise(exc=builtin("ValueError", [nodes.const(message)]), cause=None)],
                        orelse=[])
        for node in nodes.walk(check):
            anno.inherit(node, stmt)
        self._if(check)

    # ---- control flow -----------------------------------------------------
    def _copy(self, target: str, source: str, origin_node, **annotations):
        stmt = nodes.assign(target, nodes.name(source))
        anno.set(stmt, "kind", "copy")
        anno.set(stmt, "group", self.group)
        anno.set(stmt, "origin", anno.get(origin_node, "origin"))
        for key, value in annotations.items():
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

    def _copy_atom(self, target, atom, origin_node):
        stmt = nodes.assign(target, atom)
        for key, value in (("kind", "copy"), ("group", self.group),
                           ("origin", anno.get(origin_node, "origin"))):
            anno.set(stmt, key, value)
        return stmt

    def _carried(self, loop) -> list:
        """Names a loop body assigns that a later iteration or later code may read."""
        targets = loop.target.elts if isinstance(getattr(loop, "target", None), gast.Tuple) else \
            [loop.target] if isinstance(loop, gast.For) else []
        # The loop's own index is rebound by the loop statement; an item (`for v in x`,
        # bound by `v = x[_i]` in the body) is an ordinary name, carried if read after.
        callee = anno.get(loop.iter.func, "resolved", None) \
            if isinstance(loop, gast.For) and isinstance(loop.iter, gast.Call) else None
        if callee is range or callee is reversed and isinstance(loop.iter.args[0], gast.Call) \
                and anno.get(loop.iter.args[0].func, "resolved", None) is range:
            indices = targets
        else:
            indices = targets[:1] if callee is enumerate else []
        target_names = {t.id for t in indices if isinstance(t, gast.Name)}
        stored = {n.id for n in nodes.walk(loop) if isinstance(n, gast.Name)
                  and isinstance(n.ctx, gast.Store)} - target_names
        # `xs.reverse()`, `xs.insert(i, v)`, `xs.sort()` on a list made here bind a new version (`_reordered`).
        stored |= {n.func.value.id for n in nodes.walk(loop) if isinstance(n, gast.Call)
                   and isinstance(n.func, gast.Attribute) and n.func.attr in ("reverse", "insert", "sort")
                   and isinstance(n.func.value, gast.Name) and n.func.value.id in self.current}
        # `d.pop(k)` / `del d[k]` on a dict made here too (`_dict_pop`).
        stored |= {n.func.value.id for n in nodes.walk(loop) if isinstance(n, gast.Call)
                   and isinstance(n.func, gast.Attribute) and n.func.attr == "pop"
                   and isinstance(n.func.value, gast.Name) and self.current.get(n.func.value.id) in self.dicts}
        stored |= {t.value.id for n in nodes.walk(loop) if isinstance(n, gast.Delete) for t in n.targets
                   if isinstance(t, gast.Subscript) and isinstance(t.value, gast.Name)
                   and self.current.get(t.value.id) in self.dicts}
        # `d[k] = v` on a dict made here binds a new version of `d` (`_dict_setitem`; not one
        # another container holds, written in place).
        stored |= {n.value.id for n in nodes.walk(loop) if isinstance(n, gast.Subscript)
                   and isinstance(n.ctx, gast.Store) and isinstance(n.value, gast.Name)
                   and self.current.get(n.value.id) in self.dicts
                   and not self._held_elsewhere(self.current.get(n.value.id))}
        # ... and so does `d.update(...)`, `d.setdefault(k, v)` (`_dict_method`).
        stored |= {n.func.value.id for n in nodes.walk(loop) if isinstance(n, gast.Call)
                   and isinstance(n.func, gast.Attribute) and n.func.attr in _CHANGES
                   and isinstance(n.func.value, gast.Name) and self.current.get(n.func.value.id) in self.dicts}
        # Read outside the loop: read more often in the function than in the loop (the
        # function's reads are counted once, not walked again for every loop).
        if self.reads is None:
            self.reads = collections.Counter(nodes.loaded_names(self.fdef))
        inside = collections.Counter(nodes.loaded_names(loop))
        outside = {n for n in stored if self.reads[n] > inside[n]}
        # Read in the body before an unconditional assignment: the previous iteration's value.
        early, assigned = set(), set()
        for stmt in loop.body:
            early |= {n.id for n in nodes.walk(stmt) if isinstance(n, gast.Name)
                      and isinstance(n.ctx, gast.Load)} - assigned
            if isinstance(stmt, (gast.Assign, gast.AugAssign)):
                assigned |= {n.id for n in nodes.walk(stmt) if isinstance(n, gast.Name)
                             and isinstance(n.ctx, gast.Store)}
        if isinstance(loop, gast.While):
            early |= {n.id for n in nodes.walk(loop.test) if isinstance(n, gast.Name)}
        # A nested loop binds its own index before reading it.
        early -= {n.id for inner in nodes.walk(loop) if isinstance(inner, gast.For) and inner is not loop
                  for n in nodes.walk(inner.target) if isinstance(n, gast.Name)}
        return sorted(stored & (set(self.current) | outside | early))

    def _enter_loop(self, loop, iterated=()) -> dict:
        """The loop's carried names, each bound to the name it keeps in the loop.

        A carried name is updated in place by the copy at the end of the body, so a
        value that still refers to the name it had before the loop (an item of a
        tuple, list or dict, ``t = (y, 1.0)``; the sequence the loop iterates over,
        ``for e in c: c = x * e``) would see the new values: such a name is carried
        under a new name (``c_2 = c`` before the loop), and the old one keeps its value.
        ``iterated``: the atoms of the sequences the loop iterates over.
        """
        entry, first_defined = {}, []
        held = {n for elements in self.aggregates.values() for atom in elements.values()
                for n in nodes.loaded_names(atom)}
        held.update(n for atom in iterated for n in nodes.loaded_names(atom))
        for user in self._carried(loop):
            if user not in self.current:
                self.current[user] = user
                self.core.names.add(user)
                self.unbound.add(user)
                first_defined.append(user)
            elif self.current[user] in held:
                old, new = self.current[user], self.core.fresh(user)
                self.block.append(self._copy(new, old, loop))
                self._same_kind(new, old)
                self.current[user] = new
            entry[user] = self.current[user]
            self.ranks.pop(entry[user], None)  # (the body may give it a value of another rank)
            # Later iterations give the name new contents: its elements are no longer
            # the ones it was built from (`pair = (pair[1], pair[0])` in the body), nor a
            # dict's keys those it had (`d["s"] = d.get("s", 0.0) + w` adds one).
            self.aggregates.pop(self.current[user], None)
            self.known_keys.pop(self.current[user], None)
            self.entries.pop(self.current[user], None)
        changed = self._changed_in(loop)
        for atom in iterated:
            if isinstance(atom, gast.Name) and atom.id in changed:
                raise errors.at(changed[atom.id], "this changes the list the loop iterates over; srcgrad "
                                "runs the loop as many times as the list was long when the loop began",
                                "iterate over a copy (`for v in list(xs):`), or over `range(n)`")
        anno.set(loop, "first_defined", first_defined)
        self.loop_writes.append(len(self.writes))
        return entry

    def _same_kind(self, new, old):
        """``new = old``: what normalize knows of ``old``'s kind holds for ``new``."""
        for known in (self.arrays, self.scalars, self.containers, self.lists, self.own_lists, self.dicts,
                      self.tuples, self.runtime_lists, self.runtime_sequences, self.runtime_mappings):
            if old in known:
                known.add(new)
        if old in self.made_by:
            self.made_by[new] = self.made_by[old]
        if old in self.escaped:
            self.escaped[new] = self.escaped[old]
        if self._held_elsewhere(old):  # (the same list or dict: what holds it holds it under either name)
            self.held_in[new] += self.held_in[old]

    def _leave_loop(self, loop, body, entry):
        written = {name: stmt for name, stmt in self.writes[self.loop_writes.pop():]}
        for user, name in entry.items():
            end = self.current[user]
            if end != name and end in self.runtime_lists and name in self.lists | self.own_lists:
                self.runtime_lists.add(name)  # a list made here either way (`xs.reverse()` in the body)
                self.runtime_sequences.add(name)
            for known in (self.containers, self.lists, self.own_lists, self.dicts, self.tuples):
                if end != name and end not in known:
                    known.discard(name)  # a list before the loop, perhaps an array after it
            if end != name:
                body.append(self._copy(name, end, loop, carry=True))
                # The next iteration, and the code after the loop, see the body's last value.
                fresh, origin = self.made_by.get(end, (False, None))
                fresh = fresh and end not in self.escaped
                if not fresh and name in written:
                    where = f" (made at {origin.where}: `{origin.text.strip()}`)" if origin else ""
                    raise errors.at(written[name], f"cannot write into `{user}`: in the next iteration it "
                                    f"holds the value the loop body gives it{where}, which may share memory "
                                    "with another array", f"give `{user}` a new array at the end of the body "
                                    f"(`{user} = np.copy(...)`)")
                first = user in anno.get(loop, "first_defined")
                entry_fresh, entry_origin = self.made_by.get(name, (first, None))
                # (a refusal names where the value that is not a new array was made)
                self.made_by[name] = (fresh and entry_fresh,
                                      (origin or entry_origin) if not fresh else (entry_origin or origin))
                if end in self.escaped:
                    self.escaped.setdefault(name, self.escaped[end])
            self.current[user] = name

    def _for(self, stmt):
        group = self.group
        header, prelude = self._loop_header(stmt)
        entry = self._enter_loop(stmt, header.pop("iterated", ()))
        index = header.pop("index")
        body = self._in_block(stmt.body, prelude=prelude)
        self.group = group
        self._leave_loop(stmt, body, entry)
        node = gast.For(target=nodes.name(index, "store"), iter=header.pop("iter"), body=body,
                        orelse=[], type_comment=None)
        self._emit_stmt(node, stmt, kind="for", first_defined=anno.get(stmt, "first_defined"),
                        carried=sorted(entry.values()))

    def _loop_header(self, stmt):
        """The ``range`` a loop iterates over, its index name, and a body prelude
        that binds the user's targets (``x = xs[_i]``)."""
        it, target = stmt.iter, stmt.target
        callee = anno.get(it.func, "resolved") if isinstance(it, gast.Call) else None
        targets = target.elts if isinstance(target, gast.Tuple) else [target]
        if callee is range:
            args = [self._lower(a) for a in it.args]
            index = self._store(target.id) if isinstance(target, gast.Name) else None
            if index is None:
                raise errors.at(target, "a `range` loop has one target", "write `for i in range(n):`")
            self.integers.add(index)
            return {"iter": nodes.call("range", args), "index": index}, None
        if callee is reversed and isinstance(it.args[0], gast.Call) \
                and anno.get(it.args[0].func, "resolved") is range:
            args = [self._lower(a) for a in it.args[0].args]
            index = self._store(target.id)
            self.integers.add(index)
            return {"iter": nodes.call("reversed", [nodes.call("range", args)]), "index": index}, None
        start, read_entry = None, None
        if callee is enumerate:
            given = it.args[1:] + [k.value for k in it.keywords if k.arg == "start"]
            if len(targets) != 2 or not isinstance(targets[0], gast.Name) or not 1 <= len(it.args) <= 2 \
                    or any(k.arg != "start" for k in it.keywords) or len(given) > 1:
                raise errors.at(stmt, "srcgrad reads `enumerate` loops with two targets",
                                "write `for i, x in enumerate(xs):` or `for i, x in enumerate(xs, start):`")
            seqs, index_user, item_targets = [self._lower(_reversed_as_slice(it.args[0]))], targets[0].id, \
                [targets[1]]
            if given:  # `enumerate(xs, start=1)`: the index counts from 0, `i = _i + start` in the body
                start, index_user = self._lower(given[0]), None
        elif callee is zip:
            seqs, index_user = self._zipped(it), None
            whole = None if isinstance(target, gast.Tuple) else target  # (`for col in zip(*rows)`)
            if whole is None and len(targets) != len(seqs):
                raise errors.at(stmt, "unpack one target per zipped sequence",
                                "write `for a, b in zip(xs, ys):`, or `for item in zip(xs, ys):`")
            item_targets = [None] * len(seqs) if whole is not None else targets
        elif callee is reversed:  # (a tuple of targets unpacks each item, as below)
            seqs, index_user, item_targets = [self._lower(it.args[0])], None, [target]
        elif len(targets) == 2 and self._dict_method_call(it) == "items":
            # `for k, v in d.items()` on a dict whose keys are known: `zip(keys, values)`.
            held = self._held(it.func.value)
            seqs = [self._dict_method(held, "keys", it), self._dict_method(held, "values", it)]
            index_user, item_targets = None, targets
        elif self._view_of_mapping(it, len(targets)) is not None:
            # `for k, v in d.items()` (`d.values()`, `d.keys()`) on a dict made here whose keys
            # are known when it runs only: a loop over its keys, each value read `v = d[k]` in
            # the body from the dict as it is then (Python's view sees the body's writes too).
            method = it.func.attr
            seqs, index_user = [self._indexable(self._lower(it.func.value), stmt)], None
            item_targets = [targets[0] if method in ("items", "keys") else None]
            if method != "keys":
                read_entry = (it.func.value, targets[-1])
        else:  # (a tuple of targets unpacks each item: `for w, b in layers`)
            seqs, index_user, item_targets = [self._lower(it)], None, [target]
        # Iterating over a dict is iterating over its keys; over a value whose kind is
        # known only at run time, over what `rt.iterated` makes of it (a dict: its keys).
        seqs = [self._dict_method(q.id, "keys", stmt) if isinstance(q, gast.Name)
                and self._dict_keys(q.id) is not None else self._indexable(q, stmt) for q in seqs]
        length = self._emit(nodes.call("len", [nodes.copy(seqs[0])]) if len(seqs) == 1 else
                            nodes.call("rt.zip_length", [nodes.copy(q) for q in seqs]),
                            stmt, None, None, False, kind="nondiff", rule=None)
        index = self._store(index_user) if index_user else self.core.fresh("_i")
        if callee is reversed:
            last = self._emit(nodes.binop(nodes.copy(length), "-", nodes.const(1)), stmt, None, None,
                              False, kind="nondiff", rule=None)
            iter_ = nodes.call("range", [last, nodes.const(-1), nodes.const(-1)])
        else:
            iter_ = nodes.call("range", [length])

        def prelude():
            atoms = []
            if start is not None:
                counted = anno.inherit(gast.BinOp(left=nodes.name(index), op=gast.Add(), right=nodes.copy(start)), stmt)
                self._lower(counted, target=targets[0].id)
            for seq, item in zip(seqs, item_targets):
                value = gast.Subscript(value=nodes.copy(seq), slice=nodes.name(index), ctx=gast.Load())
                whole = self._apply(operator.getitem, value, [nodes.copy(seq), nodes.name(index)], {}, stmt,
                                    origin_node=stmt, target=getattr(item, "id", None), target_hint=None,
                                    effect=False)
                atoms.append(whole)
                if isinstance(item, gast.Tuple):
                    self._unpack(item.elts, None, stmt, source=whole)
            if read_entry is not None:  # `v = d[k]`, of the dict the loop iterates over the keys of
                mapping = self._lower(read_entry[0])
                value = gast.Subscript(value=nodes.copy(mapping), slice=nodes.copy(atoms[0]), ctx=gast.Load())
                self._apply(operator.getitem, value, [nodes.copy(mapping), nodes.copy(atoms[0])], {}, stmt,
                            origin_node=stmt, target=read_entry[1].id, target_hint=None, effect=False)
            if callee is zip and not isinstance(target, gast.Tuple):  # the zipped items as one tuple
                self._emit_aggregate(gast.Tuple(elts=[nodes.copy(a) for a in atoms], ctx=gast.Load()),
                                     list(range(len(atoms))), atoms, stmt, target=target.id, effect=False)
        return {"iter": iter_, "index": index, "iterated": seqs}, prelude

    def _zipped(self, call):
        """The sequences ``zip(...)`` is given, each lowered: ``zip(*xs)`` over a tuple or
        list whose length is known (made here, or passed in) zips its items."""
        seqs = []
        for a in call.args:
            if not isinstance(a, gast.Starred):
                seqs.append(self._lower(_reversed_as_slice(a)))
                continue
            items = self._items(self._lower(a.value))
            if items is None:
                raise errors.at(a, "`zip(*xs)` is read where the length of `xs` is known when compiling",
                                "build `xs` in this function (or pass it in), or zip its items by name: "
                                "`zip(xs[0], xs[1])`")
            seqs += items
        return seqs

    def _while(self, stmt):
        group = self.group
        entry = self._enter_loop(stmt)
        test = self._lower(stmt.test)
        if not isinstance(test, gast.Name):
            raise errors.at(stmt.test, "a `while` loop needs a condition that can become false",
                            "loop `while <condition>:` on a value the body changes")
        condition = test.id
        if condition not in entry.values():
            condition = self.core.fresh("_cond")
            self.block.append(self._copy_atom(condition, test, stmt))

        def retest():
            self.group = group
            again = self._lower(stmt.test)
            self.block.append(self._copy_atom(condition, again, stmt))

        body = self._in_block(stmt.body)
        if condition not in entry.values():
            saved, self.block = self.block, body
            retest()
            self.block = saved
        self.group = group
        self._leave_loop(stmt, body, entry)
        node = gast.While(test=nodes.name(condition), body=body, orelse=[])
        self._emit_stmt(node, stmt, kind="while", first_defined=anno.get(stmt, "first_defined"),
                        carried=sorted(entry.values()))

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
        self.made_by[new] = (_makes_new_array(annotations, value), anno.get(origin_node, "origin"))
        viewed = next(iter((annotations.get("bound") or {}).values()), None)
        if annotations.get("kind") == "op" and annotations.get("rule") in {registry.lookup(v) for v in _VIEWS} \
                and isinstance(viewed, gast.Name) and self.made_by.get(viewed.id, (False,))[0] \
                and viewed.id in self.arrays and viewed.id not in self.containers \
                and viewed.id not in self.escaped and not self._holds_field(viewed):
            # A view of a new array made here (`np.reshape(flat, shape)`) is memory of this
            # function's too: a write into it is the sharing analysis's to check.
            self.made_by[new] = self.made_by[viewed.id]
        kind = annotations.get("kind")
        if kind == "aggregate":
            self.containers.add(new)
        elif kind == "copy" and isinstance(value, gast.Name):
            self.aliased.add(value.id)  # two names for one value now
            if self.made_by.get(value.id, (False,))[0] and not any(
                    value.id in known for known in (self.containers, self.own_lists, self.lists, self.dicts)):
                # (the same new array: a write through either name is the sharing analysis's to
                # check; a list or dict is followed by one name only)
                self.made_by[new] = self.made_by[value.id]
            if value.id in self.containers:
                self.containers.add(new)
                self.copied_from[new] = value.id
            if value.id in self.dicts or value.id in self.runtime_mappings:
                self.runtime_mappings.add(new)  # (a dict under another name: written as it is, in place)
            if value.id in self.lists:  # (the same list: its items known when it runs only)
                self.lists.add(new)
            if value.id in self.tuples:  # (immutable: what it holds is known under either name)
                self.tuples.add(new)
                if value.id in self.aggregates:
                    self.aggregates[new] = self.aggregates[value.id]
        elif kind == "copy" and isinstance(value, gast.Constant):
            self.scalars.add(new)
        if self._holds_array(annotations, value):
            self.arrays.add(new)
        elif kind == "op" and annotations.get("rule") in _LIST_ADJOINTS:
            self._own_list(new)  # (a list adjoint in gradient code, popped by the appends)
        elif annotations.get("rule") is not None and annotations["rule"].name in _CONTAINER_MAKERS:
            self.runtime_lists.add(new)
            if annotations["rule"].name in _SEQUENCE_MAKERS:
                self.runtime_sequences.add(new)
            elif annotations["rule"].name in _MAPPING_MAKERS:
                self.runtime_mappings.add(new)
        elif kind == "copy" and isinstance(value, gast.Name) and value.id in self.runtime_lists:
            self.runtime_lists.add(new)
            for known in (self.runtime_sequences, self.runtime_mappings):
                if value.id in known:
                    known.add(new)
            self.copied_from[new] = value.id  # (`ys = hs`: one list, two names)
        elif kind == "op" and annotations.get("rule") is registry.lookup(operator.getitem) \
                and isinstance(value, gast.Subscript) and isinstance(value.slice, gast.Slice) \
                and isinstance(value.value, gast.Name) and value.value.id in self.runtime_lists:
            self.runtime_lists.add(new)  # (`hs[1:]` of such a list: a new list of its items)
            if value.value.id in self.runtime_sequences:
                self.runtime_sequences.add(new)
            self.made_by[new] = (True, anno.get(origin_node, "origin"))
        return nodes.name(new)

    def _own_list(self, name):
        """``name`` holds a new list of this function's own, its items known when it runs
        only: it may grow and shrink (append, pop), as a list made by ``[]`` does."""
        self.arrays.discard(name)
        self.runtime_lists.discard(name)  # (followed as a list of its own: pops and appends mirrored)
        self.lists.add(name)
        self.own_lists.add(name)
        self.list_depth[name] = len(self.loop_writes)

    def _stored(self, atom):
        """``atom`` was stored in a container or a field (``d[k] = xs``, ``self.h = xs``): a list or
        dict it names is held there too, so a write into it is no new version of it but a
        change of the one object (``_held_elsewhere``)."""
        if isinstance(atom, gast.Name):
            self.held_in[atom.id] += 1

    def _held_elsewhere(self, name) -> bool:
        """Whether the list or dict ``name`` was stored in a container or a field (a display, an
        append, an entry, an attribute): a write into it changes what that holds as well, so it
        is written in place, never as a new version under its own name only."""
        return self.held_in[name] > 0

    def _escape(self, atoms, node):
        """Arrays stored in a list or passed to a function: another name may see them
        from now on, so writing into them in place is refused (as for a view)."""
        for atom in atoms:
            for name in nodes.loaded_names(atom):
                if name in self.arrays and name not in self.escaped:
                    self.escaped[name] = anno.get(node, "origin")

    def _container_kind(self, name):
        """What ``name`` holds, as far as the compiler knows: ``"array"``, ``"list"``, ``"dict"``
        (a parameter's is part of the specialisation), or None."""
        rank = self.structures.get(name)
        if name in self.dicts or isinstance(rank, TreeRank) and rank.kind == "mapping":
            return "dict"
        if name in self.sequences or name in self.own_lists or isinstance(rank, TreeRank) and rank.kind == "sequence":
            return "list"
        return "array" if name in self.arrays else None

    def _shared_at(self, name) -> str:
        origin = self.escaped.get(name)
        return f" (stored or passed on at {origin.where}: `{origin.text.strip()}`)" if origin else ""

    def _held(self, node):
        """The name of the value ``node`` (a method's receiver) denotes, when known at
        compile time: a local name, or an item with a literal key of a tuple, list or
        dict made here (``ys[0]``, ``d['a']``, ``ys[0][1]``); else None."""
        if isinstance(node, gast.Name) and not anno.has(node, "resolved"):
            return self.current.get(node.id, node.id)
        if isinstance(node, gast.Subscript) and _literal_key(node.slice) is not None:
            base = self._held(node.value)
            if base is not None:
                element = self._aggregate_element(nodes.name(base), nodes.const(_literal_key(node.slice)))
                if isinstance(element, gast.Name):
                    return element.id
        return None

    def _extend(self, user, node, name, **emit):
        """``xs.extend(items)`` with items known when compiling (``[a, b]``, a tuple made
        here): ``xs.append(a)``, ``xs.append(b)``."""
        items = self._lower(node.args[0]) if len(node.args) == 1 and not node.keywords else None
        if not isinstance(items, gast.Name) or items.id not in self.aggregates or items.id in self.dicts:
            raise errors.at(node, f"`{user}.extend(...)` is supported with items known when compiling",
                            f"extend with a list or tuple display (`{user}.extend([a, b])`), or append "
                            "items one by one")
        for value in list(self.aggregates[items.id].values()):
            self._append(user, node, name=name, value=value, effect=True)
        return None if emit.get("effect") else nodes.const(None)

    def _append(self, user, node, name=None, value=None, **emit):
        """``xs.append(h)`` on a list made here: the list grows in place; the backward
        sweep pops ``h``'s adjoint off the list's adjoint.  ``name``: the list's
        current name, when ``user`` is an item of a container (``ys[0].append(h)``);
        ``value``: the atom appended, if lowered already (by ``extend``)."""
        name = name or self.current.get(user, user)
        fresh, origin = self.made_by.get(name, (False, None))
        if not fresh or len(node.args) != 1 or node.keywords:
            raise errors.at(node, f"cannot append to `{user}` here",
                            f"append one value to a list made in this function (`{user} = []`)")
        if name in self.aliased or name in self.passed:
            where = self.passed.get(name)
            seen = f"it was passed to a function at {where.where} (`{where.text.strip()}`), which may " \
                "keep it" if where is not None else "another name refers to the same list (`ys = xs`)"
            raise errors.at(node, f"cannot append to `{user}` here: {seen}, and srcgrad follows the "
                            "items of a list by its own name only",
                            "append all items before the list is shared, and use one name for it")
        value = self._lower(node.args[0]) if value is None else value
        self._escape([value], node)
        if isinstance(value, gast.Name):
            self.held_in[value.id] += 1
        self.aggregates.pop(name, None)  # its length is known only at run time now
        self.lists.add(name)
        call = nodes.call(gast.Attribute(value=nodes.name(name), attr="append", ctx=gast.Load()),
                          [nodes.copy(value)])
        self._emit_stmt(gast.Expr(value=call), node, kind="append", list=name, value=value)
        return None if emit.get("effect") else nodes.const(None)

    def _pop(self, user, node, name=None, **emit):
        """``a = xs.pop(i)`` on a list made here: the list shrinks in place; the backward
        sweep puts ``a`` back (``rt.unpop``) and its adjoint into the list's adjoint."""
        name = name or self.current.get(user, user)
        if name not in self.own_lists or name in self.aliased or len(node.args) > 1 or node.keywords:
            raise errors.at(node, f"cannot pop from `{user}` here",
                            f"pop from a list made in this function (`{user} = [...]`, grown with "
                            "append), that no other name refers to, with at most an index (`.pop(i)`)")
        index = self._lower(node.args[0]) if node.args else nodes.const(-1)
        elements = self.aggregates.get(name)
        key = static_value(index)
        if elements is not None and self.block is self.core.body and isinstance(key, int) \
                and -len(elements) <= key < len(elements):
            # Outside loops and branches the items stay known: `xs[0]` is still an atom.
            items = list(elements.values())
            del items[key]
            self.aggregates[name] = dict(enumerate(items))
        else:
            self.aggregates.pop(name, None)
            self.lists.add(name)
        call = nodes.call(gast.Attribute(value=nodes.name(name), attr="pop", ctx=gast.Load()),
                          [nodes.copy(index)] if node.args else [])
        emit["effect"], effect = False, emit["effect"]  # the value is put back in the backward sweep
        result = self._emit(call, kind="pop", list=name, index=index, impure=True, **emit)
        return None if effect else result

    def _reordered(self, user, name, node, **emit):
        """``xs.reverse()``, ``xs.insert(i, v)`` and ``xs.sort(key=..., reverse=...)`` on a list
        made here that no other name holds: a new version of ``xs``, as for any rebinding (in
        a loop, a carried name), whose rule sends each item's adjoint back to where it came
        from: the items rebuilt where they are known (``reverse``, ``insert`` at a literal
        index), else ``xs = rt.reversed_list(xs)``, ``rt.inserted(xs, i, v)``, ``sorted(xs, ...)``."""
        method = node.func.attr
        fresh = self.made_by.get(name, (False, None))[0] or name in self.own_lists
        if not fresh or name in self.params or name in self.aliased or name in self.copied_from \
                or name in self.passed or name in self.held_in or not emit.get("effect"):
            where = self.passed.get(name)
            seen = f"it was passed to a function at {where.where} (`{where.text.strip()}`), which may keep " \
                "it" if where is not None else "its value (None) is used" if not emit.get("effect") \
                else "another name may refer to the same list (`ys = xs`, `[xs]`)" \
                if fresh and name not in self.params else "the list was not made in this function"
            raise errors.at(node, f"cannot {method} `{user}` in place here: {seen}, and srcgrad follows the "
                            "items of a list by its own name only",
                            f"make a new list and use that one name: `{user} = list({user})` first, or "
                            + {"reverse": f"`{user} = {user}[::-1]`", "sort": f"`{user} = sorted({user})`",
                               "insert": f"`{user} = {user}[:i] + [v] + {user}[i:]`"}[method])
        args, kwargs = self._call_arguments(node)
        if method == "sort":
            if args:
                raise errors.at(node, "`list.sort` takes its arguments by keyword", "write `xs.sort(key=f)`")
            func = anno.set(nodes.name("sorted"), "resolved", sorted)
            value = self._apply(sorted, None, [nodes.name(name)], kwargs, node, func_node=func, target=user,
                                target_hint=None, origin_node=node, effect=False)
            self.runtime_lists.add(value.id)
            self.runtime_sequences.add(value.id)
            return None
        if kwargs or len(args) != (2 if method == "insert" else 0) or any(isinstance(a, gast.Starred) for a in args):
            raise errors.at(node, f"`{user}.{method}(...)` is given arguments it does not take",
                            "write `xs.reverse()` or `xs.insert(i, v)`")
        items = self.aggregates.get(name)
        at = static_value(args[0]) if args else None
        if items is not None and (method == "reverse" or type(at) is int):
            items = list(items.values())
            if method == "reverse":
                items.reverse()
            else:
                items.insert(at, args[1])
            display = gast.List(elts=[nodes.copy(a) for a in items], ctx=gast.Load())
            self._emit_aggregate(display, list(range(len(items))), items, node, target=user, effect=False)
            return None
        helper = runtime.reversed_list if method == "reverse" else runtime.inserted
        value = self._apply(helper, None, [nodes.name(name)] + args, {}, node,
                            func_node=nodes.dotted(f"rt.{helper.__name__}"), target=user, target_hint=None,
                            origin_node=node, effect=False)
        return None

    def _item(self, base, index, node, **emit):
        """``h = xs[i]`` on a list whose items are known at run time only (grown with
        append, changed by pop in a loop or branch): one integer index, the item as it
        is; the backward sweep adds ``h``'s adjoint to the list's adjoint at ``i``."""
        key = static_value(index)
        if isinstance(index, (gast.Tuple, gast.List)) \
                or key is not UNKNOWN and not isinstance(key, (int, slice)):
            raise errors.at(node, "reading a list whose items are known when the code runs only (grown "
                            "with append or by a comprehension, changed by pop in a loop or branch) by "
                            "anything but one integer index or a slice is not supported",
                            f"stack it first (`np.stack({base.id})[...]`), or read items one by one")
        value = gast.Subscript(value=nodes.copy(base), slice=nodes.copy(index), ctx=gast.Load())
        result = self._emit(value, kind="item", list=base.id, index=index, **emit)
        if isinstance(index, gast.Slice) and isinstance(result, gast.Name):
            self.runtime_lists.add(result.id)  # (`xs[1:]`: a new list of the same items)
            self.runtime_sequences.add(result.id)
            self.made_by[result.id] = (True, anno.get(node, "origin"))
        return result

    def _changed_in(self, loop):
        """Lists and dicts made here that ``loop``'s body changes in place (append, pop,
        through another's item too: ``ys[0].append(h)``): from the loop on, what they
        hold is known at run time only, also to reads in the body before the change."""
        changed = {}
        for node in nodes.walk(loop):
            if isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute) \
                    and node.func.attr in _CHANGES:
                held = self._held(node.func.value)
                if held is not None:
                    changed.setdefault(held, node)
                if held is not None and held in self.aggregates:
                    del self.aggregates[held]
                    self.lists.add(held)
            elif isinstance(node, (gast.Assign, gast.AugAssign)):
                # `hs[t] = v` into a list made before the loop: its items are known when it runs
                # only, from the loop on (the body's reads, earlier in it, see later iterations'
                # writes): an element write done as written (`_setitem`).
                for target in node.targets if isinstance(node, gast.Assign) else [node.target]:
                    if isinstance(target, gast.Subscript):
                        held = self._held(target.value)
                        if held is not None:  # (not a change of its length: `for h in hs` reads each)
                            self._written_as_runtime_list(held)
                        if held is not None and (isinstance(target.value, gast.Subscript)
                                                 or self._held_elsewhere(held)):
                            # (`d["a"]["b"] = v`, or into a dict another holds: in place, from here on)
                            self._written_as_runtime_mapping(held)
        return changed

    def _written_as_runtime_list(self, name) -> bool:
        """Whether an element write into the list ``name`` (made here: its items known,
        ``[None] * 3``, ``[0.0, 0.0]``) can be done as written, its items then known only
        when the code runs: its items are forgotten, and those of the lists it is a copy of
        (`b = a`), so that each read is one the sharing analysis sees, which refuses the write
        where another name for the list is read after it.  Not where a call may keep the list."""
        if name not in self.containers or name in self.dicts or name in self.tuples \
                or name in self.passed or name in self.escaped:
            return False
        source = self.copied_from.get(name)
        while source is not None:  # `b = a` of `a = [w, w]`: `a[0]` is read when it runs too,
            self.aggregates.pop(source, None)  # so that the sharing analysis sees it read after
            self.runtime_lists.add(source)
            if source not in self.dicts and source not in self.runtime_mappings:
                self.runtime_sequences.add(source)
            source = self.copied_from.get(source)
        self.aggregates.pop(name, None)
        self.containers.discard(name)
        self.own_lists.discard(name)
        self.runtime_lists.add(name)
        if name not in self.runtime_mappings:  # (`e = d` of a dict: written in place as a dict)
            self.runtime_sequences.add(name)
        return True

    def _written_as_runtime_mapping(self, name) -> bool:
        """Whether an entry write into the dict ``name`` (made here, followed entry by entry as
        new versions, ``rt.with_item``) can be done as written, in place, its entries then known
        only when the code runs (as ``_written_as_runtime_list`` for a list): where another
        container or a field holds it, which sees the write.  Not where a call may keep it."""
        if name not in self.dicts or name in self.passed or name in self.escaped:
            return False
        for known in (self.aggregates, self.known_keys, self.entries):
            known.pop(name, None)
        self.dicts.discard(name)
        self.containers.discard(name)
        self.runtime_lists.add(name)
        self.runtime_mappings.add(name)
        return True

    def _copied_container(self, kind, atom, node, **emit):
        """``list(t)`` / ``tuple(t)`` of a tuple or list whose items are known (or of a dict
        whose keys are): a new list or tuple of the same items, item by item; else None."""
        if isinstance(atom, (gast.List, gast.Tuple)):  # list((a, b)): a display
            atom = self._display_value(atom, node)
        if not isinstance(atom, gast.Name):
            return None
        if self._dict_keys(atom.id) is not None:
            atom = self._dict_method(atom.id, "keys", node)
        if atom.id in self.dicts:
            return None
        items = self._items(atom)
        if items is None:
            return None
        display = (gast.List if kind is list else gast.Tuple)(elts=[nodes.copy(a) for a in items],
                                                               ctx=gast.Load())
        return self._emit_aggregate(display, list(range(len(items))), items, node, **emit)

    def _has_items(self, atom) -> bool:
        """Whether ``atom`` is a tuple or list (not a dict) whose length is known here: made
        here item by item, or passed in (``*args``, ``params``: the specialisation holds it)."""
        return isinstance(atom, gast.Name) and atom.id not in self.dicts \
            and self._known_length(atom.id) is not None

    def _items(self, atom):
        """The items of such a tuple or list (one passed in is read item by item), or None."""
        if not self._has_items(atom):
            return None
        if atom.id in self.aggregates:
            return list(self.aggregates[atom.id].values())
        return [self._lower(gast.Subscript(value=nodes.copy(atom), slice=nodes.const(i), ctx=gast.Load()))
                for i in range(self._known_length(atom.id))]

    @staticmethod
    def _constant_slice(index):
        """``slice(...)`` for an index ``a:b:c`` of literals (or omitted), else None."""
        if not isinstance(index, gast.Slice):
            return None
        parts = [index.lower, index.upper, index.step]
        if not all(p is None or isinstance(p, gast.Constant) and type(p.value) is int
                   or isinstance(p, gast.UnaryOp) and isinstance(p.op, gast.USub)
                   and isinstance(p.operand, gast.Constant) and type(p.operand.value) is int for p in parts):
            return None
        values = [None if p is None else p.value if isinstance(p, gast.Constant) else -p.operand.value
                  for p in parts]
        return slice(*values) if values[2] != 0 else None

    def _holds_array_rank(self, atom) -> bool:
        return isinstance(atom, gast.Name) and (atom.id in self.arrays or atom.id in self.field_arrays)

    def _known_pairs(self, atom):
        """``{key: atom}`` for a tuple or list of ``(key, value)`` pairs whose items and literal
        keys are known here (a display, or made so), in Python's ``dict(pairs)`` order; else None."""
        known = isinstance(atom, gast.Name) and atom.id in self.aggregates and atom.id not in self.dicts
        items = atom.elts if _display(atom) else list(self.aggregates[atom.id].values()) if known else None
        if items is None:
            return None
        entries = {}
        for item in items:
            known = isinstance(item, gast.Name) and item.id in self.tuples and item.id in self.aggregates
            pair = item.elts if _display(item) else list(self.aggregates[item.id].values()) if known else None
            if pair is None or len(pair) != 2 or not isinstance(pair[0], gast.Constant):
                return None
            entries[pair[0].value] = pair[1]
        return entries

    def _zip_display(self, args, node, **emit):
        """``zip(ws, bs)`` (``zip(*params)``) of tuples or lists whose items are known: the
        list of their rows, each a tuple display, so each item's adjoint reaches its source (a
        list, not an iterator: the same to whatever reads it once)."""
        columns = [self._items(a) for a in args]
        rows = []
        for i in range(min(map(len, columns))):
            items = [c[i] for c in columns]
            rows.append(self._emit_aggregate(gast.Tuple(elts=[nodes.copy(a) for a in items], ctx=gast.Load()),
                                             list(range(len(items))), items, node, target=None,
                                             target_hint=None, effect=False))
        return self._emit_aggregate(gast.List(elts=[nodes.copy(r) for r in rows], ctx=gast.Load()),
                                    list(range(len(rows))), rows, node, **emit)

    def _joined(self, op, left, right, node, emit):
        """``t + (x,)``, ``xs + ys``, ``[h] * 3`` on tuples or lists whose items are known: a new
        display of the joined (repeated) items, so each item's adjoint reaches its source."""
        if isinstance(op, gast.Add):
            if not (self._has_items(left) and self._has_items(right)):
                return None
            items, kind = self._items(left) + self._items(right), left
        elif isinstance(op, gast.Mult):
            kind, count = (left, right) if self._has_items(left) else (right, left)
            if not self._has_items(kind) or not (isinstance(count, gast.Constant) and type(count.value) is int):
                return None
            items = self._items(kind) * max(count.value, 0)
        else:
            return None
        display = (gast.List if kind.id in self.own_lists else gast.Tuple)(
            elts=[nodes.copy(a) for a in items], ctx=gast.Load())
        return self._emit_aggregate(display, list(range(len(items))), items, node, **emit)

    def _view_of_mapping(self, call, targets):
        """The name of ``d`` in ``d.items()`` (for two loop targets), ``d.values()`` or
        ``d.keys()`` (for one) where ``d`` is a dict made here whose keys are known when it
        runs only, else None."""
        if not (isinstance(call, gast.Call) and isinstance(call.func, gast.Attribute) and not call.args
                and not call.keywords and isinstance(call.func.value, gast.Name)
                and not anno.has(call.func.value, "resolved")
                and targets == {"items": 2, "values": 1, "keys": 1}.get(call.func.attr)):
            return None
        name = self.current.get(call.func.value.id, call.func.value.id)
        known = name in self.dicts or name in self.runtime_mappings
        return name if known and self._dict_keys(name) is None else None

    def _indexable(self, atom, node):
        """``atom``, or ``rt.iterated(atom)`` where it may be a dict (or a set, or a view of a
        dict), which a loop cannot index: a value whose kind normalize does not know."""
        if isinstance(atom, gast.Name) and (atom.id in self.dicts or atom.id in self.runtime_mappings) \
                and self._dict_keys(atom.id) is None:
            # A dict's keys, copied (`list(d)`): a new list, which a write into the dict in the
            # loop does not change (Python refuses a change of its size while it iterates).
            func = anno.set(nodes.name("list"), "resolved", list)
            made = self._apply(runtime.sequence_of, None, [atom], {}, node, func_node=func, origin_node=node,
                               target=None, target_hint="keys", effect=False)
            return made
        if not isinstance(atom, gast.Name) or atom.id in self.arrays or atom.id in self.scalars \
                or self._holds_sequence(atom.id) or atom.id in self.aggregates \
                or atom.id in self.structures or atom.id in self.runtime_sequences:
            # (a list whose items are known when it runs only, by its own name: a write into it
            # in the loop is then one the reads after it see, as Python's loop over it does)
            return atom  # (a dict made here whose keys are known only at run time: rt.iterated, its keys)
        return self._apply(runtime.iterated, None, [atom], {}, node, func_node=nodes.dotted("rt.iterated"),
                           origin_node=node, target=None, target_hint=None, effect=False)

    def _dict_keys(self, name):
        """The keys of the dict ``name`` when known at compile time (a dict made here
        with literal keys, or one passed in: its keys are part of the specialisation)."""
        if name in self.dicts and name in self.aggregates:
            return list(self.aggregates[name])
        if name in self.known_keys:
            return list(self.known_keys[name])
        if name in self.structures and self.structures[name].kind == "mapping":
            return [key for key, _ in self.structures[name]]
        return None

    def _dict_method_call(self, node):
        """``"keys"``/``"values"``/``"items"``/``"get"`` for such a call on a dict whose keys
        are known at compile time, else None."""
        if isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute) \
                and node.func.attr in ("keys", "values", "items", "get"):
            held = self._held(node.func.value)
            if held is not None and self._dict_keys(held) is not None:
                return node.func.attr
        return None

    def _dict_written(self, receiver, node):
        """``d.update(k=v)`` (or ``d.update({"k": v})``) as ``d["k"] = v``, and ``d.setdefault("k",
        v)`` as ``d["k"] = v`` where ``d`` has no ``"k"`` yet, for a dict made here: the assignments
        lowered; for ``setdefault`` the atom of ``d["k"]``.  Where it is not known when compiling
        whether ``d`` has the key (its keys known when it runs only, after a loop that adds them;
        a key computed), ``setdefault`` is ``if k not in d: d[k] = v``, then ``d[k]`` (the default
        evaluated either way, as Python's argument is).  None for other forms (refused as before)."""
        def write(key, value):
            target = gast.Subscript(value=nodes.copy(receiver), slice=nodes.const(key), ctx=gast.Store())
            self._statement(anno.inherit(gast.Assign(targets=[target], value=value, type_comment=None), node))
        if node.func.attr == "update":
            pairs = [(k.arg, k.value) for k in node.keywords]
            if len(node.args) == 1 and isinstance(node.args[0], gast.Dict) \
                    and all(isinstance(k, gast.Constant) for k in node.args[0].keys):
                pairs = [(k.value, v) for k, v in zip(node.args[0].keys, node.args[0].values)] + pairs
            elif node.args or any(k is None for k, _ in pairs):
                return None
            # (Python evaluates every value before it writes any: `d.update(a=2 * d["a"], b=d["a"])`)
            values = [self._lower(value) for _, value in pairs]
            for (key, _), value in zip(pairs, values):
                write(key, value)
            return anno.inherit(nodes.const(None), node)
        if node.keywords or not 1 <= len(node.args) <= 2:
            return None
        default = node.args[1] if len(node.args) == 2 else nodes.const(None)
        held = self._held(receiver)
        keys = self._dict_keys(held) if held in self.dicts else None
        if keys is None or not isinstance(node.args[0], gast.Constant):
            key, value = self._lower(node.args[0]), self._lower(default)
            test = gast.Compare(left=nodes.copy(key), ops=[gast.NotIn()], comparators=[nodes.copy(receiver)])
            entry = gast.Subscript(value=nodes.copy(receiver), slice=nodes.copy(key), ctx=gast.Store())
            added = gast.Assign(targets=[entry], value=nodes.copy(value), type_comment=None)
            branch = gast.If(test=test, body=[added], orelse=[])
            for n in nodes.walk(branch):
                anno.inherit(n, node)
            self._statement(branch)
            read = gast.Subscript(value=nodes.copy(receiver), slice=nodes.copy(key), ctx=gast.Load())
            return anno.inherit(read, node)
        key = node.args[0].value
        if key in keys:
            self._lower(default, effect=not isinstance(default, (gast.Constant, gast.Name)))  # (Python evaluates it)
        else:
            write(key, default)
        return anno.inherit(gast.Subscript(value=nodes.copy(receiver), slice=nodes.const(key), ctx=gast.Load()), node)

    def _dict_method(self, name, method, node, **emit):
        """``d.keys()``, ``d.values()``, ``d.items()`` as tuples of what they hold (a
        view of a dict is iterated, measured and tested as such a tuple is), item by
        item, so each value's adjoint reaches ``d``'s; ``d.get(k, default)`` with a
        literal key is ``d[k]`` or the default."""
        emit.setdefault("origin_node", node)
        emit.setdefault("target", None)
        emit.setdefault("effect", False)
        keys = self._dict_keys(name)
        called = isinstance(node, gast.Call) and getattr(node.func, "attr", None) == method  # (not `list(d)`)
        args = node.args if called else []
        keywords = node.keywords if called else []
        if keywords or (method != "get" and args) or (method == "get" and not 1 <= len(args) <= 2):
            raise errors.at(node, f"srcgrad reads `.{method}()` of a dict with "
                            f"{'a key and perhaps a default' if method == 'get' else 'no arguments'}",
                            f"write `d.{method}({'key, default' if method == 'get' else ''})`")

        def value(key):
            element = self._aggregate_element(nodes.name(name), nodes.const(key))
            if element is not None:
                return element
            item = gast.Subscript(value=nodes.name(name), slice=nodes.const(key), ctx=gast.Load())
            return self._apply(operator.getitem, item, [nodes.name(name), nodes.const(key)], {}, node,
                               origin_node=node, target=None, target_hint=None, effect=False)

        def as_tuple(atoms, **where):
            display = gast.Tuple(elts=[nodes.copy(a) for a in atoms], ctx=gast.Load())
            return self._emit_aggregate(display, list(range(len(atoms))), atoms, node, **where)

        if method == "get":
            key_atom = self._lower(args[0])
            key = static_value(key_atom)
            if key is UNKNOWN:  # a key known at run time only: `dispatch.vjp_method` reads it then
                rest = [self._lower(a) for a in args[1:]]
                call = gast.Attribute(value=nodes.name(name), attr="get", ctx=gast.Load())
                return self._user_call(call, [key_atom] + rest, {}, node, receiver=nodes.name(name), **emit)
            atom = value(key) if key in keys else self._lower(args[1]) if len(args) > 1 else nodes.const(None)
            if emit["target"] is None and not emit["effect"]:
                return atom
            return self._emit(atom, kind="copy", **emit)
        if method == "keys":
            return as_tuple([nodes.const(k) for k in keys], **emit)
        if method == "values":
            return as_tuple([value(k) for k in keys], **emit)
        pairs = [as_tuple([nodes.const(k), value(k)], target=None, effect=False) for k in keys]
        return as_tuple(pairs, **emit)

    def _is_array(self, node) -> bool:
        """Whether ``node`` (a method call's receiver) is known to be an array.  If not,
        ``obj.sum()`` is called as it is and resolved when it runs (``dispatch.vjp_method``)."""
        if isinstance(node, gast.Name) and not anno.has(node, "resolved"):
            name = self.current.get(node.id, node.id)
            return name in self.arrays or name in self.field_arrays  # (self.w.reshape(...))
        if isinstance(node, gast.Call) and (_is_user_class(anno.get(node.func, "resolved", None))
                                            or isinstance(anno.get(node.func, "resolved", None), type)):
            return False  # P(x).w: an object made here; np.finfo(float).eps: a class's instance
        if isinstance(node, gast.Subscript):
            return self._is_array(node.value)  # (x[0].T: an array's row; m.layers[0].W: a layer)
        return not isinstance(node, (gast.Name, gast.Attribute))  # (a + b).sum(): an expression

    def _surely_array(self, node) -> bool:
        """Whether the expression ``node`` (a method's receiver) makes an array for
        sure: arithmetic (``(x * 1.5).cumsum()``), an index of an array name
        (``x[None]``), a NumPy function's or an array method's result."""
        if isinstance(node, gast.Name):
            return self._is_array(node)
        if isinstance(node, (gast.BinOp, gast.UnaryOp)):
            return True
        if isinstance(node, gast.Subscript):
            return isinstance(node.value, gast.Name) and self._is_array(node.value) \
                or self._surely_array(node.value)
        if isinstance(node, gast.Call):
            callee = anno.get(node.func, "resolved", None)
            if callee is not None:
                return registry.is_numpy(callee) and not isinstance(callee, type)
            return isinstance(node.func, gast.Attribute) and node.func.attr in _METHODS \
                and self._surely_array(node.func.value)
        return False

    def _check_augmented(self, stmt):
        """``s += v`` on an array changes it in place (NumPy); srcgrad computes
        ``s = s + v``, which is the same only if no other name sees ``s``."""
        if not isinstance(stmt.target, gast.Name):
            return
        user = stmt.target.id
        name = self.current.get(user, user)
        if name in self.tuples:
            return  # (immutable: `t += (h,)` binds a new tuple, as `t = t + (h,)` does)
        if name in self.containers:
            raise errors.at(stmt, f"`{user} {_op_symbol(stmt.op)}= ...` on a list, tuple or dict is not "
                            "supported", f"append items one by one (`{user}.append(v)`)")
        if name in self.scalars:
            return
        fresh, origin = self.made_by.get(name, (False, None))
        # (another name for a new array made here, read after the write, is refused by the
        # sharing analysis: `augments`, below)
        if (not fresh or name in self.escaped) and name not in self.runtime_lists:
            where = self._shared_at(name) or (f" (made at {origin.where}: `{origin.text.strip()}`)" if origin
                                               else " (it is an argument: the caller's array)"
                                               if name in self.params else "")
            op = _op_symbol(stmt.op)
            advice = f"write `{user} = {user} {op} ...` (a new array)"
            viewed = errors.without_comment(origin.text).split("=", 1)[1].strip() if origin and "=" in origin.text else ""
            index = viewed[viewed.find("[") + 1:]
            if "[" in viewed and not viewed.startswith(("[", "(")) and any(c in index for c in (":", "None", "...")):
                # `v = a[1:]`, a view: maybe meant to change `a` (not `a[[0, 2]]`, a copy)
                advice += f", or, to change the array it views too, write into that by index (`{viewed} {op}= ...`)"
            raise errors.at(stmt, f"`{user} {op}= ...` changes `{user}` in place if it "
                            f"is an array, and `{user}` may share memory with another name{where}", advice)

    def _known_number(self, atom) -> bool:
        """Whether ``atom`` is known to hold an array or a number (a literal, a NumPy
        result), so that an operator on it is NumPy's, not a method of a user's class."""
        return isinstance(atom, gast.Constant) or isinstance(atom, gast.Name) and (
            atom.id in self.arrays or atom.id in self.scalars or atom.id in self.field_arrays)

    def _array_field(self, atom) -> bool:
        """Whether ``atom`` holds an array read from a structure passed in whose ranks
        are part of the specialisation (``self.W`` with ``self`` a model): known."""
        return isinstance(atom, gast.Name) and atom.id in self.field_arrays

    def _holds_array(self, annotations, value) -> bool:
        kind, rule = annotations.get("kind"), annotations.get("rule")
        if kind == "copy":  # (a number is an array's kind; a string, None or bytes is not)
            return isinstance(value, gast.Constant) and isinstance(value.value, (bool, int, float, complex)) \
                or isinstance(value, gast.Name) and value.id in self.arrays
        if kind == "op":
            if rule in (registry.lookup(getattr), registry.lookup(runtime.iterated)) \
                    or rule is not None and rule.name in _CONTAINER_MAKERS:
                return False  # a field of an object (a parameter array or a sub-layer), a sequence
            if rule is registry.lookup(operator.getitem):
                base = annotations["bound"]["a"]
                return isinstance(base, gast.Name) and base.id in self.arrays
            return rule not in _LIST_ADJOINTS
        if kind == "unpack":  # `a, b = m`: the rows of an array
            return annotations["source"] in self.arrays or annotations["source"] in self.field_arrays
        return kind == "nondiff" and not isinstance(value, gast.Attribute) and "constructs" not in annotations \
            and not (rule is not None and rule.name in _GENERATOR_MAKERS | _CONTAINER_MAKERS)  # `rng.normal(...)`

    def _setattr(self, target, value_node, stmt):
        """``self.n = v``: bookkeeping on an object (a counter, a cache), run as it
        is; a differentiated value stored this way is refused in the reverse pass."""
        obj = self._lower(target.value)
        value = self._lower(value_node)
        self._stored(value)
        if isinstance(obj, gast.Name):
            self.aggregates.pop(obj.id, None)  # its fields may differ from those it was made with
        write = nodes.assign(gast.Attribute(value=nodes.copy(obj), attr=target.attr, ctx=gast.Store()),
                             nodes.copy(value))
        self._emit_stmt(write, stmt, kind="setattr", value=value, impure=True)
        # Reads of `obj.name` after it in this block are the value itself (differentiated
        # through, where the object's field would carry none); any other object's `.name`
        # may be an alias of this one: forgotten.
        self.stored_fields = {k: v for k, v in self.stored_fields.items() if k[1] != target.attr}
        self.stored_entries = {k: v for k, v in self.stored_entries.items() if k[0][1] != target.attr}
        if isinstance(obj, gast.Name) and isinstance(value, gast.Name):
            self.stored_fields[(obj.id, target.attr)] = value

    def _check_augmented_entry(self, stmt):
        """``d[k] += v`` changes the array ``d[k]`` holds in place (NumPy), which srcgrad
        computes as ``d[k] = d[k] + v``: the same only if no other name holds that array.
        Known not to: a number, or an array the function made for this entry alone (a
        value of an expression, not a name of the user's)."""
        base = stmt.target.value
        name = self.current.get(base.id, base.id) if isinstance(base, gast.Name) else \
            self._held(base) if isinstance(base, gast.Subscript) else None  # (`M[0][1] += v`: `M[0]`'s)
        user = base.id if isinstance(base, gast.Name) else nodes.to_source(base).strip()
        if name in self.dicts:
            key = static_value(stmt.target.slice)
            entry = self.entries.get(name, {}).get(key) if key is not UNKNOWN else \
                self.entries.get(name, {}).get(("name", self.current.get(stmt.target.slice.id, stmt.target.slice.id))) \
                if isinstance(stmt.target.slice, gast.Name) else None
            if name in self.read_dicts:
                entry = None  # (read since: `y = d[k]` may hold the entry's array)
            if key is not UNKNOWN and isinstance(self.aggregates.get(name, {}).get(key), gast.Constant):
                return  # `stats = {'loss': 0.0}`: a number is rebound by `+=`
        elif name in self.own_lists or name in self.containers:  # `xs[i] += v`: the same for a list's item
            key = static_value(stmt.target.slice)
            items = self.aggregates.get(name, {}) if name not in self.dicts else {}
            atom = items.get(key % len(items)) if type(key) is int and items and -len(items) <= key < len(items) \
                else None
            entry = atom.id if isinstance(atom, gast.Name) and name not in self.read_dicts else None
            if isinstance(atom, gast.Constant):
                return
        elif name in self.runtime_lists:  # (`parts = np.split(x, 3)`: its items may be views of `x`)
            entry = None
        else:
            return
        held = entry is not None and self.held_in[entry] > 1  # (an item of another list too: `ys = list(xs)`)
        if entry is not None and (entry in self.scalars or entry.startswith("_") and entry not in self.aliased
                                  and not held and self.made_by.get(entry, (False, None))[0]):
            return
        op = _op_symbol(stmt.op)
        if entry is None and all(isinstance(n, (gast.Name, gast.Constant, gast.BinOp, gast.UnaryOp, gast.operator,
                                                 gast.unaryop, gast.expr_context))
                                 for n in nodes.walk(stmt.target.slice)):  # (read twice: arithmetic only)
            # What the entry holds is known only when the code runs (a dict carried by a loop, whose
            # `'loss'` began as 0.0): a number is rebound, an array is refused then.
            origin = anno.get(stmt, "origin")
            check = nodes.call("rt.not_in_place", [self._lower(base), self._lower(stmt.target.slice),
                                                   nodes.const(user), nodes.const(op),
                                                   nodes.const(origin.where if origin else "?")])
            self._emit(check, stmt, None, "_checked", False, kind="nondiff", rule=None, impure=True)
            return
        raise errors.at(stmt, f"`{user}[...] {op}= ...` changes the array in that entry in place, and "
                        "another name may hold the same array (the name it was stored from, another "
                        "entry, the caller)", f"write `{user}[...] = {user}[...] {op} ...` (a new array)")

    def _dict_setitem(self, user, name, target, value_node, stmt):
        """``d[k] = v`` on a dict made here that no other name holds: ``d = rt.with_item(d, k, v)``,
        a new version of ``d`` as for any rebinding (in a loop, a carried name), whose
        adjoint gives ``v`` its entry at ``k``."""
        fresh, _ = self.made_by.get(name, (False, None))
        if not fresh or name in self.aliased or name in self.passed or name in self.escaped:
            where = self.passed.get(name)
            seen = f"it was passed to a function at {where.where} (`{where.text.strip()}`), which may " \
                "keep it" if where is not None else "another name may refer to the same dict"
            raise errors.at(stmt, f"cannot write into the dict `{user}` here: {seen}, and srcgrad follows "
                            "the entries of a dict by its own name only",
                            "write all entries before the dict is shared, and use one name for it")
        index = self._index(target.slice)
        value = self._lower(value_node)
        self._escape([value], stmt)
        self._stored(value)
        new = self._apply(runtime.with_item, None, [nodes.name(name), index, value], {}, stmt,
                          func_node=nodes.dotted("rt.with_item"), origin_node=stmt, target=user,
                          target_hint=None, effect=False)
        self.containers.add(new.id)
        self.dicts.add(new.id)
        self.arrays.discard(new.id)
        self.made_by[new.id] = (True, anno.get(stmt, "origin"))
        key = static_value(index)
        if key is not UNKNOWN and isinstance(value, gast.Name) and name in self.entries:
            kept = {k: v for k, v in self.entries[name].items() if not isinstance(k, tuple)}  # (`k` may be 'a')
            self.entries[new.id] = {**kept, key: value.id}
        elif key is UNKNOWN and isinstance(index, gast.Name) and isinstance(value, gast.Name):
            self.entries[new.id] = {("name", index.id): value.id}  # (any other key may be the same one)
        keys = self._dict_keys(name)
        if key is not UNKNOWN and keys is not None:  # (the new version's keys, in insertion order)
            self.known_keys[new.id] = keys + [key] if key not in keys else keys

    def _dict_pop(self, user, name, node, **emit):
        """``v = d.pop(k)`` (``del d[k]``) on a dict made here that no other name holds: ``v``
        is ``d[k]`` (``d.get(k, default)`` with a default), then ``d = rt.without_key(d, k)``,
        a new version of ``d`` as ``d[k] = v`` makes (``_dict_setitem``)."""
        fresh, _ = self.made_by.get(name, (False, None))
        if not fresh or name in self.aliased or name in self.passed or name in self.escaped \
                or name in self.held_in or node.keywords or not 1 <= len(node.args) <= 2:
            where = self.passed.get(name)
            seen = f"it was passed to a function at {where.where} (`{where.text.strip()}`), which may " \
                "keep it" if where is not None else "another name may refer to the same dict"
            raise errors.at(node, f"cannot pop from the dict `{user}` here: {seen}, and srcgrad follows "
                            "the entries of a dict by its own name only",
                            f"read the entry and build a new dict without it: `v = {user}[k]`, "
                            f"`{user} = {{key: e for key, e in {user}.items() if key != k}}`")
        base = nodes.name(user)
        anno.inherit(base, node)
        read = gast.Call(func=gast.Attribute(value=base, attr="get", ctx=gast.Load()), args=list(node.args),
                         keywords=[]) if len(node.args) == 2 else \
            gast.Subscript(value=base, slice=node.args[0], ctx=gast.Load())
        anno.inherit(read, node)
        value = None if emit.get("effect") else self._lower(read, **{k: v for k, v in emit.items()
                                                                     if k != "origin_node"})
        key = self._lower(node.args[0])
        new = self._apply(runtime.without_key, None, [nodes.name(name), key, nodes.const(len(node.args) == 2)], {},
                          node, func_node=nodes.dotted("rt.without_key"), origin_node=node, target=user,
                          target_hint=None, effect=False)
        self.containers.add(new.id)
        self.dicts.add(new.id)
        self.arrays.discard(new.id)
        self.made_by[new.id] = (True, anno.get(node, "origin"))
        removed = static_value(key)
        if removed is not UNKNOWN and name in self.entries:
            self.entries[new.id] = {k: v for k, v in self.entries[name].items() if k != removed}
        keys = self._dict_keys(name)
        if removed is not UNKNOWN and keys is not None:
            self.known_keys[new.id] = [k for k in keys if k != removed]
        return value

    def _list_setitem(self, user, name, target, value_node, stmt) -> bool:
        """``xs[i] = v`` with a literal ``i`` on a list made here whose items are known and
        that no other name holds: a new version of ``xs`` with ``v`` at ``i`` (as ``d[k] = v``
        on a dict); False where that is not so (a list made outside the loop the write is
        in: each iteration would see the version from before the loop)."""
        fresh, _ = self.made_by.get(name, (False, None))
        key = static_value(target.slice)
        if isinstance(target.slice, gast.UnaryOp) and isinstance(target.slice.op, gast.USub) \
                and type(static_value(target.slice.operand)) is int:  # xs[-1]
            key = -static_value(target.slice.operand)
        items = list(self.aggregates[name].values()) if name in self.aggregates and name not in self.dicts \
            else None
        if not fresh or name in self.aliased or name in self.passed or name in self.escaped \
                or self._held_elsewhere(name) or self.list_depth.get(name) != len(self.loop_writes) \
                or items is None or type(key) is not int or not -len(items) <= key < len(items):
            return False
        items[key] = self._lower(value_node)
        display = gast.List(elts=[nodes.copy(a) for a in items], ctx=gast.Load())
        new = self._emit_aggregate(display, list(range(len(items))), items, stmt, target=user, effect=False)
        self.made_by[new.id] = (True, anno.get(stmt, "origin"))
        self._same_kind(new.id, name)
        return True

    def _nested_setitem(self, target, value_node, stmt):
        """``M[0][1] = v``, ``d["a"]["b"] = v``: Python writes into the list or dict ``M[0]``
        holds, which ``M`` goes on holding.  Where normalize knows which one that is (``M``
        made here item by item, a literal index: ``_held``), the write is one into it by that
        name (held by ``M``, it is written in place: ``_held_elsewhere``); then, where ``M`` is
        a list or dict made here that nothing else holds, ``M`` is made again of the same
        items (``M_2 = [_t1, _t2]``), so that reading it whole afterwards is reading a value
        made after the write (``M`` made before it, and read after, is refused by the sharing
        analysis).  Other forms are refused at the write."""
        outer = target.value
        source = nodes.to_source(outer).strip()
        value = self._lower(value_node)  # (Python evaluates the value first, then `M[0]`)
        inner = self._held(outer)
        root = outer.value
        if inner is None:
            raise errors.at(stmt, f"srcgrad writes into an item of `{source}` where that is a list or dict "
                            "this function made, read with a literal index or key (`M[0][1] = v`, "
                            "`d[\"a\"][\"b\"] = v`)", f"make it anew and put it back: `row = list({source})`, "
                            f"`row[...] = v`, `{source} = row` (or `{nodes.to_source(root).strip()}[i, j] = v` "
                            "for an array)")
        array = inner in self.arrays or inner in self.field_arrays  # (refused by the write into it, below)
        if not array and inner not in self.runtime_lists and not (
                self._written_as_runtime_list(inner) or self._written_as_runtime_mapping(inner)):
            where = self.passed.get(inner) or self.escaped.get(inner)
            raise errors.at(stmt, f"cannot write into `{source}` here: " + (
                f"it was passed on or stored at {where.where} (`{where.text.strip()}`), where it may be kept"
                if where else "it is not a list or dict this function made") + ", and srcgrad follows "
                "the items of a list or dict by the names that hold it only",
                f"make `{source}` anew and put it back, before it is shared: `row = list({source})`, "
                f"`row[...] = v`, `{source} = row`")
        # (the names the write is lowered under: the source's spelling, for its messages)
        self.current[source] = inner
        written = f"{source}=" if isinstance(value, gast.Name) else None
        if written is not None:
            self.current[written] = value.id
        item = gast.Subscript(value=nodes.name(source), slice=target.slice, ctx=gast.Store())
        self._setitem(anno.inherit(item, target),
                      anno.inherit(nodes.name(written) if written else nodes.copy(value), value_node), stmt)
        new_inner = self.current.pop(source)
        self.current.pop(written, None)
        holder = self._held(root)
        if not isinstance(root, gast.Name) or holder is None:
            return
        self._made_again(root.id, holder, _literal_key(outer.slice), inner, new_inner, stmt)

    def _made_again(self, user, name, key, old, new, stmt):
        """``user`` (holding ``name``, a list or dict made here) made again of the same items,
        ``new`` in the place of ``old`` at ``key``: a new version, for what reads it after a
        write into one of its items (``_nested_setitem``).  Nothing where ``name`` is not such a
        display, or where another name, container or call may hold it."""
        items = self.aggregates.get(name)
        fresh = self.made_by.get(name, (False, None))[0]
        if items is not None and type(key) is int and key < 0 and name not in self.dicts:
            key += len(items)  # (`M[-1][0] = v`)
        if items is None or name in self.tuples or name in self.records or not fresh or name in self.aliased \
                or name in self.passed or name in self.escaped or self._held_elsewhere(name) \
                or self.list_depth.get(name) != len(self.loop_writes) or key not in items \
                or not isinstance(items[key], gast.Name) or items[key].id != old:
            return
        atoms = [nodes.name(new) if k == key else a for k, a in items.items()]
        if name in self.dicts:
            display = gast.Dict(keys=[nodes.const(k) for k in items], values=[nodes.copy(a) for a in atoms])
        else:
            display = gast.List(elts=[nodes.copy(a) for a in atoms], ctx=gast.Load())
        made = self._emit_aggregate(display, list(items), atoms, stmt, target=user, effect=False)
        self.made_by[made.id] = (True, anno.get(stmt, "origin"))
        self._same_kind(made.id, name)

    def _object_entry(self, target, value_node, stmt) -> bool:
        """``self.parameters["running_mean"] = v``, ``P["k"] = v`` on ``P = self.parameters``,
        ``self.cache[key] = v``: an entry of a dict or list an object holds (the field's kind
        known from the specialisation) replaced, as ``self.n = v`` replaces a field.  It runs
        as written (kind ``setentry``); the reverse pass keeps the value as bookkeeping, with
        no adjoint, or refuses it where the entry may be read back.  False where ``target``
        is not such an entry."""
        base = target.value
        if isinstance(base, gast.Attribute):
            if not isinstance(base.value, gast.Name) or anno.has(base.value, "resolved") \
                    or not self._holds_field(self._lower(base.value)):
                return False
        elif not isinstance(base, gast.Name) or anno.has(base, "resolved") \
                or self._object_container(self.current.get(base.id, base.id)) is False:
            return False
        value = self._lower(value_node)
        holder = self._lower(base)
        known = self._object_container(holder.id if isinstance(holder, gast.Name) else None)
        where = nodes.to_source(base)
        if known is False:
            raise errors.at(stmt, f"writing into `{where}[...]` is supported where `{where}` holds a dict "
                            "or a list (an object's cache, counters, running statistics), not an array: "
                            "srcgrad cannot follow a write into an array an object holds",
                            f"replace the field instead (`{where} = ...`), with a new array made from "
                            "the old one")
        index = self._index(target.slice)
        if isinstance(stmt, gast.AugAssign):
            # `self.stats["sum"] += v` changes an array in that entry in place, which srcgrad computes
            # as a new array (`... = self.stats["sum"] + v`): refused when it runs where the entry
            # holds an array (a number, a counter, is rebound as srcgrad does).
            origin = anno.get(stmt, "origin")
            check = nodes.call("rt.not_in_place", [nodes.copy(holder), nodes.copy(index), nodes.const(where),
                                                   nodes.const(_op_symbol(stmt.op)),
                                                   nodes.const(origin.where if origin else "?")])
            self._emit(check, stmt, None, "_checked", False, kind="nondiff", rule=None, impure=True,
                       checks=holder.id)
        self._escape([value], stmt)
        self._stored(value)
        self.aggregates.pop(holder.id, None)
        container = nodes.copy(holder)
        if known is None:  # (a dict in an object, of counters or of arrays: its kind is checked when it runs)
            origin = anno.get(stmt, "origin")
            container = nodes.call("rt.entries", [container, nodes.const(where),
                                                  nodes.const(origin.where if origin else "?")])
        write = nodes.assign(gast.Subscript(value=container, slice=nodes.copy(index), ctx=gast.Store()),
                             nodes.copy(value))
        self._emit_stmt(write, stmt, kind="setentry", holder=holder.id, index=index, value=value, impure=True)
        # Reads of this entry after it in this block are the value itself (differentiated through,
        # as for `self.h = v`); the field's other entries another key may name are forgotten.
        field, key = self.field_of.get(holder.id), self._entry_key(index)
        self.stored_entries = {k: v for k, v in self.stored_entries.items() if field is None or k[0][1] != field[1]
                               or isinstance(k[1], tuple) is False and isinstance(key, tuple) is False
                               and k[1] != key}
        if field is not None and key is not None and isinstance(value, gast.Name):
            self.stored_entries[(field, key)] = value
        return True

    def _entry_key(self, index):
        """What names an entry within one block: a literal key, or ``("name", n)`` for a key
        held in the name ``n`` (one value: single assignment); None for another expression."""
        key = static_value(index)
        if type(key) in (str, int, bool):
            return key
        return ("name", index.id) if isinstance(index, gast.Name) else None

    def _object_container(self, name):
        """Whether ``name``, a field read from an object passed in, holds a dict or list: True,
        False (an array, or not a field read), or None where the specialisation does not say
        (a container of no float: counters, labels, an empty cache)."""
        if name not in self.field_reads or self.made_by.get(name, (False,))[0] or name in self.containers:
            return False
        rank = self.field_structures.get(name)
        if isinstance(rank, TreeRank) and rank.kind in ("mapping", "sequence"):
            return True
        # (In an object, a dict's ranks are an object's: which kind of structure, checked when it runs.)
        return False if name in self.field_arrays else None

    # ---- writes into arrays -------------------------------------------------
    def _setitem(self, target, value_node, stmt):
        """``y[i] = v`` stays an in-place write.  The overwritten elements are saved
        first (``y_overwritten``) so the backward sweep can put them back, and the
        write is refused where ``y`` may share memory with another name."""
        if self._object_entry(target, value_node, stmt):
            return
        if isinstance(target.value, gast.Subscript):
            self._nested_setitem(target, value_node, stmt)
            return
        if not isinstance(target.value, gast.Name) or anno.has(target.value, "resolved"):
            held = nodes.to_source(target.value)
            what = f"the global `{held}`" if isinstance(target.value, gast.Name) else f"`{held}`"
            raise errors.at(stmt, f"writing into {what}, which this function did not make, is not "
                            "supported: srcgrad follows writes only into arrays, lists and dicts held in "
                            "the function's own names (`y[i] = v`)",
                            "write into a local copy (`y = np.copy(...)`, `d = dict(...)`) and return it "
                            "(with has_aux=True where only the loss is differentiated)")
        user = target.value.id
        name = self.current.get(user, user)
        fresh, origin = self.made_by.get(name, (False, None))
        if name in self.dicts and not (self._held_elsewhere(name) and self._written_as_runtime_mapping(name)):
            self._dict_setitem(user, name, target, value_node, stmt)
            return
        if name in self.own_lists and self._list_setitem(user, name, target, value_node, stmt):
            return
        if name in self.containers and not self._written_as_runtime_list(name):
            raise errors.at(stmt, f"writing into an element of the list, tuple or dict `{user}` is not "
                            "supported yet", f"build a new one (`{user} = [x * 3, {user}[1]]`), "
                            "append to a list, or keep the values in an array")
        # Other names that share `name`'s memory (aliases, views) and are read after the
        # write are found by analysis/sharing.py, once the whole function is lowered.
        if (not fresh or name in self.escaped) and name not in self.runtime_lists:
            kind = self._container_kind(name)
            where = self._shared_at(name) or (f" (made at {origin.where}: `{origin.text.strip()}`)" if origin
                                               else f" (it is an argument: the caller's {kind or 'value'})"
                                               if name in self.params else "")
            held = {"dict": "another name may hold the same dict", "list": "another name may hold the same "
                    "list"}.get(kind, "it may share memory with another array, list or dict" if kind is None
                                else "it may share memory with another array")
            raise errors.at(stmt, f"cannot write into `{user}`: {held}{where}, and the write would change "
                            "that one too", "write into a copy before the write: " + _copy_advice(user, kind))
        self.writes.append((name, stmt))
        index = self._index(target.slice)
        value = self._lower(value_node)
        self._stored(value)
        if name in self.runtime_lists:
            self._escape([value], stmt)  # (a list or dict holds the array now: a write into it is seen there)
        saved = self.core.fresh(f"{name}_overwritten")
        # Into a name known to hold an array, NumPy's own code; into a preallocated list
        # (`hs = [None] * n`), a dict or a value known only when it runs, the runtime's,
        # which does the same for each kind (`rt.overwritten`).
        generic = name not in self.arrays
        container = name in self.runtime_lists  # (an item replaced: no array changed, for the sharing analysis)
        if generic:
            old = nodes.call("rt.overwritten", [nodes.name(name), templates._slices_as_calls(nodes.copy(index))])
        else:
            old = nodes.call(f"{self.backend.MODULE_NAME}.copy", [
                gast.Subscript(value=nodes.name(name), slice=nodes.copy(index), ctx=gast.Load())])
        self._emit_stmt(nodes.assign(saved, old), stmt, kind="nondiff", rule=None)
        write = nodes.assign(gast.Subscript(value=nodes.name(name), slice=nodes.copy(index),
                                            ctx=gast.Store()), nodes.copy(value))
        self._emit_stmt(write, stmt, kind="setitem", array=name, index=index, value=value,
                        saved=saved, generic=generic, container=container, shown=user)

    # ---- expressions ------------------------------------------------------
    def _lower(self, node, target=None, target_hint=None, effect=False):
        """Lower ``node``; return an atom for its value (assigned to ``target`` if given)."""
        atom = self._atom_or_none(node)
        if atom is not None:
            if target is None and not effect:
                return atom
            return self._emit(atom, node, target, target_hint, effect, kind="copy")
        emit = dict(origin_node=node, target=target, target_hint=target_hint, effect=effect)
        if isinstance(node, gast.BinOp):
            left, right = self._lower(node.left), self._lower(node.right)
            prim = _BINOPS.get(type(node.op))
            if prim is None:
                raise errors.at(node, f"the operator `{type(node.op).__name__}` is not supported",
                                "use the matching NumPy function")
            value = gast.BinOp(left=left, op=type(node.op)(), right=right)
            if type(node.op) in _BITWISE:
                emit["why"] = (f"`{_BITWISE[type(node.op)]}` is given a value being differentiated: it "
                               "works on integers and booleans, which have no derivative",
                               "apply it to masks (`(x > 0) & (y > 0)`) and use the mask with np.where "
                               "or indexing")
            joined = self._joined(node.op, left, right, node, emit)
            if joined is not None:
                return joined
            sequences = [isinstance(a, gast.Name) and (a.id in self.containers or a.id in self.tuples
                                                       or a.id in self.runtime_lists or a.id in self.lists)
                         and a.id not in self.dicts for a in (left, right)]
            if isinstance(node.op, gast.Add) and all(sequences):
                # A join of tuples or lists whose items are known when it runs only (a tuple
                # grown in a loop, `t = t + (h,)`): written as it is, differentiated item by item.
                atom = self._apply(runtime.concatenated, value, [left, right], {}, node, **emit)
                if isinstance(atom, gast.Name) and left.id in self.tuples and right.id in self.tuples:
                    self.tuples.add(atom.id)
                return atom
            if isinstance(node.op, gast.Mult) and any(sequences) and not all(sequences):
                items, count = (left, right) if sequences[0] else (right, left)
                return self._apply(runtime.repeated, value, [items, count], {}, node, **emit)
            if any(isinstance(a, gast.Name) and a.id in self.containers for a in (left, right)):
                # Shapes and index lists (`x.shape + (1,)`) run as written; the reverse pass
                # refuses the join if it is given a value being differentiated.
                why = ("`+`/`*` on tuples or lists (joining, repeating) is not supported on values "
                       "being differentiated", "write the whole tuple or list at once (`(a, b, c)`), "
                       "or append items one by one")
                return self._emit(value, kind="unknown", callee=None, why=why, **emit)
            unknown = [a.id for a in (left, right) if isinstance(a, gast.Name) and not self._known_number(a)]
            if unknown:
                emit["maybe_object"] = unknown  # may be objects whose class's __mul__ decides (reverse.py)
            return self._apply(prim, value, [left, right], {}, node, **emit)
        if isinstance(node, gast.UnaryOp):
            operand = self._lower(node.operand)
            value = gast.UnaryOp(op=type(node.op)(), operand=operand)
            if isinstance(operand, gast.Name) and not self._known_number(operand):
                emit["maybe_object"] = [operand.id]
            return self._apply(_UNARY[type(node.op)], value, [operand], {}, node, **emit)
        if isinstance(node, gast.Compare):
            left = self._lower(node.left)
            rights = [self._lower(c) for c in node.comparators]
            value = gast.Compare(left=left, ops=[type(o)() for o in node.ops], comparators=rights)
            return self._emit(value, kind="nondiff", rule=None, **emit)
        if isinstance(node, gast.Call):
            return self._call(node, **emit)
        if isinstance(node, gast.Attribute):
            return self._attribute(node, **emit)
        if isinstance(node, gast.Subscript) and anno.has(node.value, "resolved") \
                and any(anno.get(node.value, "resolved") is c for c in (np.r_, np.c_)):
            return self._index_concat(node, **emit)
        if isinstance(node, gast.Subscript):
            base = self._lower(node.value)
            index = self._index(node.slice)
            stored = self.stored_entries.get((self.field_of.get(base.id), self._entry_key(index))) \
                if isinstance(base, gast.Name) and base.id in self.field_of else None
            if stored is not None:  # `self.cache[k] = v` then `self.cache[k]` in the same block: `v` (checked)
                args = [nodes.copy(base), nodes.copy(index), nodes.copy(stored)]
                return self._apply(runtime.entry_read_back, nodes.call("rt.entry_read_back", args),
                                   [nodes.copy(a) for a in args], {}, node, **emit)
            if isinstance(base, gast.Name) and base.id in self.lists:
                return self._item(base, index, node, **emit)
            if isinstance(base, gast.Name) and base.id in self.records and base.id not in self.named_fields:
                # An object made here: indexing runs its class's own __getitem__ (refused
                # by the reverse pass if what it gives is being differentiated).
                value = gast.Subscript(value=base, slice=index, ctx=gast.Load())
                why = (f"indexing `{node.value.id if isinstance(node.value, gast.Name) else 'an object'}`, "
                       "an object holding values being differentiated, runs its class's `__getitem__`, "
                       "which srcgrad does not differentiate", "call a method that does the same "
                       "(`obj.item(i)`), or index the array field itself (`obj.c[i]`)")
                return self._emit(value, kind="unknown", callee=None, why=why, **emit)
            part = self._constant_slice(node.slice)
            if part is not None and self._has_items(base) and not self._holds_array_rank(base):
                # `bs[::-1]`, `t[1:]` of a tuple or list whose items are known: a new display of them.
                items = self._items(base)[part]
                display = (gast.List if base.id in self.own_lists else gast.Tuple)(
                    elts=[nodes.copy(a) for a in items], ctx=gast.Load())
                return self._emit_aggregate(display, list(range(len(items))), items, node, **emit)
            element = self._aggregate_element(base, index)
            if element is not None:
                if target is None and not effect:
                    return element
                return self._emit(element, kind="copy", **emit)
            value = gast.Subscript(value=base, slice=index, ctx=gast.Load())
            if isinstance(index, gast.Constant) and self._constant_entry(base, index.value):
                return self._emit(value, kind="nondiff", rule=None, **emit)  # `p["n"]` holding an int
            atom = self._apply(operator.getitem, value, [nodes.copy(base), nodes.copy(index)], {},
                               node, **emit)
            if isinstance(base, gast.Name) and isinstance(index, gast.Constant) and isinstance(atom, gast.Name):
                # An item of a structure passed in (a model's list of layers): its ranks are known.
                self._field_rank(atom, base, index.value)
            if isinstance(atom, gast.Name) and isinstance(base, gast.Name) and base.id in self.tuples \
                    and isinstance(node.slice, gast.Slice):
                self.tuples.add(atom.id)  # (`x.shape[:2]`)
            integers = self._integers(node.slice)
            if isinstance(atom, gast.Name) and isinstance(base, gast.Name) and integers is not None \
                    and integers == self.ranks.get(base.id):
                # One integer per axis: a NumPy scalar (a new value), not a view of `base`.
                self.scalars.add(atom.id)
            return atom
        if isinstance(node, gast.IfExp):
            return self._ifexp(node, target, target_hint)
        if isinstance(node, gast.JoinedStr):  # an f-string: text, no derivative
            parts = [gast.FormattedValue(value=self._lower(p.value), conversion=p.conversion,
                                         format_spec=nodes.copy(p.format_spec))
                     if isinstance(p, gast.FormattedValue) else nodes.copy(p) for p in node.values]
            return self._emit(gast.JoinedStr(values=parts), kind="nondiff", rule=None, **emit)
        if isinstance(node, gast.BoolOp) and anno.get(node, "flags"):  # exits' flags: plain booleans
            values = [self._lower(v) for v in node.values]
            value = gast.BoolOp(op=type(node.op)(), values=values)
            return self._emit(value, kind="nondiff", rule=None, **emit)
        if isinstance(node, gast.BoolOp) and all(
                isinstance(v, gast.Compare) and all(isinstance(a, (gast.Name, gast.Constant))
                                                    for a in [v.left, *v.comparators]) for v in node.values):
            # (`ph > 0 or pw > 0`: comparisons of names, nothing to run late, a truth value of
            # no derivative: as written)
            value = gast.BoolOp(op=type(node.op)(), values=[
                gast.Compare(left=self._lower(v.left), ops=[type(o)() for o in v.ops],
                             comparators=[self._lower(c) for c in v.comparators]) for v in node.values])
            return self._emit(value, kind="nondiff", rule=None, **emit)
        if isinstance(node, gast.BoolOp):
            # `a and b` is `b if a else a`, `a or b` is `a if a else b`: later operands run
            # only when needed, and the value (an array, perhaps) is one of the operands.
            first = self._lower(node.values[0])
            rest = node.values[1] if len(node.values) == 2 else \
                anno.inherit(gast.BoolOp(op=type(node.op)(), values=node.values[1:]), node)
            body, orelse = (rest, first) if isinstance(node.op, gast.And) else (first, rest)
            choice = anno.inherit(gast.IfExp(test=nodes.copy(first), body=nodes.copy(body),
                                             orelse=nodes.copy(orelse)), node)
            return self._ifexp(choice, target, target_hint)
        if isinstance(node, (gast.Tuple, gast.List, gast.Dict)):
            return self._aggregate(node, **emit)
        raise errors.at(node, f"cannot differentiate `{nodes.to_source(node)}`")

    def _index_concat(self, node, **emit):
        """``np.r_[x, 1.0, 0:3]`` / ``np.c_[x, y]`` → ``rt.index_concat(np.r_, [x, 1.0, _t1])``
        (a slice item made by ``slice(...)``), whose rule splits the adjoint among the
        items.  With a directive string (``np.r_['0,2', x]``) the call runs as written,
        and the reverse pass refuses it if it is given a value being differentiated."""
        concat = self._lower(node.value)
        parts = node.slice.elts if isinstance(node.slice, gast.Tuple) else [node.slice]
        if any(isinstance(p, gast.Constant) and isinstance(p.value, str) for p in parts):
            value = gast.Subscript(value=concat, slice=self._index(node.slice), ctx=gast.Load())
            name = nodes.to_source(node.value)
            return self._emit(value, kind="unknown", callee=anno.get(node.value, "resolved"),
                              why=(f"srcgrad differentiates `{name}[...]` of items and slices, not with a "
                                   "directive string",
                                   f"join the items with np.concatenate, np.stack or np.column_stack, or "
                                   f"write `{name}[a, b]`"), **emit)
        items = []
        for part in parts:
            if isinstance(part, gast.Slice):
                bounds = [nodes.const(None) if p is None else self._lower(p)
                          for p in (part.lower, part.upper, part.step)]
                items.append(self._apply(slice, None, bounds, {}, node, func_node=nodes.name("slice"),
                                         origin_node=node, target=None, target_hint=None, effect=False))
            else:
                items.append(self._argument(part))
        return self._apply(runtime.index_concat, None, [concat, gast.List(elts=items, ctx=gast.Load())], {},
                           node, func_node=nodes.dotted("rt.index_concat"), **emit)

    def _atom_or_none(self, node):
        """The atom for ``node`` if it needs no statement of its own."""
        if isinstance(node, gast.Constant):
            return nodes.const(node.value)
        if isinstance(node, gast.Name) and not anno.has(node, "resolved"):
            return nodes.name(self.current.get(node.id, node.id))
        if isinstance(node, gast.UnaryOp) and isinstance(node.operand, gast.Constant) \
                and isinstance(node.op, gast.USub) and type(node.operand.value) in (int, float):
            return nodes.const(-node.operand.value)
        if anno.has(node, "resolved"):
            return self._resolved_atom(node)
        return None

    def _resolved_atom(self, node):
        value = anno.get(node, "resolved")
        if isinstance(node, gast.Name):
            # A global or closure variable is read afresh on every call (it may be
            # rebound between calls), so its compile-time value is not a constant.
            return nodes.name(node.id)
        if is_literal(value):
            return literal(value)  # a module's constant: np.pi, np.newaxis
        spelled = self._spell(value, node)
        atom = nodes.dotted(spelled) if spelled else nodes.copy(node)
        anno.set(atom, "resolved", value)
        return atom

    def _spell(self, obj, node):
        """The generated code's name for a NumPy object under this backend (``cp.exp``);
        ``rt.stop_gradient`` for srcgrad's own (the printed code then needs no name of the
        user's module to run)."""
        if obj is runtime.stop_gradient:
            return "rt.stop_gradient"
        if not registry.is_numpy(obj):
            return None
        spelled = self.backend.spelling(obj)
        numpy_name = numpy_backend.spelling(obj)
        if spelled is None and numpy_name is not None and self.backend is not numpy_backend:
            raise errors.at(node, f"`{numpy_name}` has no counterpart in the "
                            f"{self.backend.__name__.rsplit('.', 1)[-1]} backend",
                            "compute it another way (or on the host with srcgrad.to_host, and "
                            "back with srcgrad.to_device), or use backend='numpy'")
        return spelled

    def _argument(self, node):
        if isinstance(node, (gast.Tuple, gast.List)):
            elts = [self._argument(e) for e in node.elts]
            return (gast.Tuple if isinstance(node, gast.Tuple) else gast.List)(elts=elts, ctx=gast.Load())
        return self._lower(node)

    def _integers(self, index):
        """How many integers the user's ``index`` is (``0``, ``-1``, ``i`` of a ``range``
        loop, or a tuple of them); None for anything else."""
        elts = index.elts if isinstance(index, gast.Tuple) else [index]
        for e in elts:
            if isinstance(e, gast.UnaryOp) and isinstance(e.op, gast.USub):
                e = e.operand
            if not (isinstance(e, gast.Constant) and type(e.value) is int
                    or isinstance(e, gast.Name) and self.current.get(e.id) in self.integers):
                return None
        return len(elts)

    def _index(self, node):
        if isinstance(node, gast.Slice):
            parts = [None if p is None else self._lower(p) for p in (node.lower, node.upper, node.step)]
            return gast.Slice(lower=parts[0], upper=parts[1], step=parts[2])
        if isinstance(node, gast.Tuple):
            return nodes.tuple_([self._index(e) for e in node.elts])
        if isinstance(node, gast.List):
            return self._argument(node)  # x[[0, 0, 1]]: an integer-array index
        return self._lower(node)

    def _attribute(self, node, **emit):
        base = self._lower(node.value)
        stored = self.stored_fields.get((base.id, node.attr)) if isinstance(base, gast.Name) else None
        if stored is not None:  # `self.h = h` then `self.h` in the same block: `h` (checked)
            call = nodes.call("rt.read_back", [nodes.copy(base), nodes.const(node.attr), nodes.copy(stored)])
            return self._apply(runtime.read_back, call, [nodes.copy(base), nodes.const(node.attr),
                                                         nodes.copy(stored)], {}, node, **emit)
        fields = self.named_fields.get(base.id, ()) if isinstance(base, gast.Name) else ()
        key = fields.index(node.attr) if node.attr in fields else node.attr \
            if isinstance(base, gast.Name) and base.id in self.records else None
        if key is not None:  # a field of a named tuple or of an object made here: the item itself
            element = self._aggregate_element(base, nodes.const(key))
            if element is not None:
                if emit.get("target") is None and not emit.get("effect"):
                    return element
                return self._emit(element, kind="copy", **emit)
        value = gast.Attribute(value=base, attr=node.attr, ctx=gast.Load())
        # `.T`, `.shape`, ... are NumPy's only on an array: a model's `m.T` (a temperature)
        # or a named tuple's `shape` field is a field like any other, and a receiver not
        # known to be an array goes the field's way (dispatch.vjp_field decides when it runs).
        known = self._is_array(node.value) or self._array_field(base)
        if node.attr == "T" and known:
            return self._apply(np.transpose, value, [nodes.copy(base)], {}, node, **emit)
        if node.attr in ("real", "imag") and known:
            call = nodes.call(f"np.{node.attr}", [nodes.copy(base)])
            return self._apply(getattr(np, node.attr), call, [nodes.copy(base)], {}, node, **emit)
        if node.attr in _ARRAY_ATTRIBUTES and known:
            atom = self._emit(value, kind="nondiff", rule=None, **emit)
            if node.attr == "shape" and isinstance(atom, gast.Name):
                self.tuples.add(atom.id)
            return atom
        if self._is_array(node.value):
            raise errors.at(node, f"srcgrad has no derivative rule for the array attribute `.{node.attr}`",
                            "compute it with NumPy functions, or register a rule with srcgrad.defadjoint")
        if node.attr in _SHAPE_ATTRIBUTES and not self._holds_field(base):
            # A value whose kind is known only when the code runs: an array's have no derivative
            # (a float held under such a name by another object is refused when it runs).
            where = anno.get(node, "origin").where if anno.get(node, "origin") else "?"
            call = nodes.call("rt.array_attribute", [nodes.copy(base), nodes.const(node.attr), nodes.const(where)])
            return self._emit(call, kind="nondiff", rule=None, **emit)
        if self._constant_entry(base, node.attr):  # an integer field (`self.power = 2`): a constant
            return self._emit(value, kind="nondiff", rule=None, **emit)
        # A field of a structure (a model's parameter, a sub-layer).
        atom = self._apply(getattr, value, [nodes.copy(base), nodes.const(node.attr)], {}, node, **emit)
        if isinstance(base, gast.Name) and isinstance(atom, gast.Name):
            self._field_rank(atom, base, node.attr)
            self.field_reads.add(atom.id)
            self.field_of[atom.id] = (base.id, node.attr)
        return atom

    def _constant_entry(self, base, key) -> bool:
        """Whether ``base`` is a structure passed in (or read from one) whose entry ``key``
        held an integer when the code was specialised (``TreeRank.constants``)."""
        parent = self.structures.get(base.id, self.field_structures.get(base.id)) \
            if isinstance(base, gast.Name) else None
        return isinstance(parent, TreeRank) and key in parent.constants

    def _holds_field(self, base) -> bool:
        """Whether ``base`` is a structure passed in (or read from one): its attributes are its
        fields, whatever their names (a model's ``size``, a named tuple's ``shape``)."""
        return isinstance(base, gast.Name) and (base.id in self.structures or base.id in self.field_structures)

    def _field_rank(self, atom, base, key):
        """``atom`` holds the field or item ``key`` of the structure ``base``: an array
        or a structure whose ranks the specialisation knows."""
        parent = self.structures.get(base.id, self.field_structures.get(base.id))
        rank = parent.get(key) if isinstance(parent, TreeRank) else None
        if isinstance(rank, int):
            self.field_arrays.add(atom.id)
        elif isinstance(rank, TreeRank):
            self.field_structures[atom.id] = rank

    def _call(self, node, **emit):
        func = node.func
        if isinstance(func, gast.Attribute) and isinstance(func.value, gast.Call) \
                and anno.get(func.value.func, "resolved", None) is super:
            return self._super_call(node, **emit)
        if anno.get(func, "resolved", None) is super:
            raise errors.at(node, "`super()` is supported only to call a method (`super().forward(x)`)",
                            "call the method through it, or name the base class's method "
                            "(`Base.forward(self, x)`)")
        if anno.has(func, "resolved") and _is_named_tuple_class(anno.get(func, "resolved")):
            return self._named_tuple(anno.get(func, "resolved"), node, **emit)
        if anno.has(func, "resolved") and _is_user_class(anno.get(func, "resolved")):
            stored = _stored_parameters(anno.get(func, "resolved"))
            if stored is not None:
                return self._record(anno.get(func, "resolved"), stored, node, **emit)
        if anno.has(func, "resolved"):
            callee = anno.get(func, "resolved")
            args, kwargs = self._call_arguments(node)
            rule = registry.lookup(callee)
            if rule is None and _is_user_code(callee) or (
                    rule is not None and rule.differentiable and not templates.self_contained(rule.adjoint)):
                return self._user_call(nodes.copy(func), args, kwargs, node, **emit)
            if rule is None or rule.differentiable or any(isinstance(k, tuple) for k in kwargs):
                self._check_spread(args, kwargs, node)  # (a draw's or a constructor's `*shape` runs as written)
            if callee is zip and args and not kwargs and all(self._has_items(a) or _display(a) for a in args):
                args = [self._display_value(a, node) if _display(a) else a for a in args]
                return self._zip_display(args, node, **emit)
            entries = self._known_pairs(args[0]) if callee is dict and len(args) == 1 and not kwargs else None
            if entries is not None:
                # `dict(zip(["w", "b"], [w, b]))`, `dict([("w", w)])`: the display of its entries
                # (a later pair's value in an earlier one's place, as Python's)
                display = gast.Dict(keys=[nodes.const(k) for k in entries], values=list(entries.values()))
                return self._emit_aggregate(display, list(entries), list(entries.values()), node, **emit)
            if callee is dict and not args and kwargs:  # `dict(w=w, b=b)` is `{"w": w, "b": b}`
                display = gast.Dict(keys=[nodes.const(k) for k in kwargs], values=list(kwargs.values()))
                anno.inherit(display, node)
                return self._lower(display, **{k: v for k, v in emit.items() if k != "origin_node"})
            if callee in (list, tuple) and len(args) == 1 and not kwargs:
                copied = self._copied_container(callee, args[0], node, **emit)
                if copied is not None:
                    return copied
                at_run_time = isinstance(args[0], gast.Name) and args[0].id not in self.dicts \
                    and args[0].id not in self.runtime_mappings and (
                    args[0].id in self.lists or args[0].id in self.runtime_lists or args[0].id in self.containers)
                if callee is tuple and at_run_time:
                    # (`tuple(p[1] for p in params)`: a list made by appends, as a tuple)
                    made = self._apply(runtime.as_tuple, None, args, {}, node, func_node=nodes.dotted("rt.as_tuple"),
                                       **emit)
                    if isinstance(made, gast.Name):
                        self.containers.add(made.id)
                        self.tuples.add(made.id)
                    return made
                if callee is list and at_run_time and args[0].id in self.lists:
                    # A list whose items are known when it runs only (grown by append): a new
                    # list of the same items is `xs + []`, a join, item by item.
                    joined = anno.inherit(gast.BinOp(left=args[0], op=gast.Add(),
                                                     right=gast.List(elts=[], ctx=gast.Load())), node)
                    made = self._lower(joined, **{k: v for k, v in emit.items() if k != "origin_node"})
                    if isinstance(made, gast.Name):
                        self._own_list(made.id)
                    return made
                if callee is list and (at_run_time or args[0].id in self.arrays):
                    # (of a tuple too, `rest + list(axes)`; of an array, its rows: `rt.sequence_of`'s
                    # rule gives each item's adjoint to the row or item it came from)
                    made = self._apply(runtime.sequence_of, None, args, {}, node, func_node=nodes.copy(func), **emit)
                    if isinstance(made, gast.Name):
                        self.runtime_lists.add(made.id)
                        self.made_by[made.id] = (True, anno.get(node, "origin"))
                    return made
            if getattr(callee, "__self__", None) is dict and getattr(callee, "__name__", None) == "fromkeys" \
                    and 1 <= len(args) <= 2 and not kwargs:  # `dict.fromkeys(KEYS)`: a new dict made here
                made = self._apply(runtime.fromkeys, None, args, {}, node, func_node=nodes.dotted("rt.fromkeys"),
                                   **emit)
                if isinstance(made, gast.Name):
                    self.containers.add(made.id)
                    self.dicts.add(made.id)
                    self.arrays.discard(made.id)
                    self.made_by[made.id] = (True, anno.get(node, "origin"))
                return made
            if callee in (list, tuple, dict) and len(args) == 1 and not kwargs \
                    and not isinstance(args[0], gast.Starred):
                # `list(xs)`, `tuple(xs)`, `dict(d)` of a value whose items are known only when it
                # runs (`np.split`'s list, a dict passed in): the user's call, with the rule of
                # `rt.sequence_of` / `rt.mapping_of`, whose adjoint gives each item its own.
                made = self._apply(runtime.mapping_of if callee is dict else runtime.sequence_of, None, args, {},
                                   node, func_node=nodes.copy(func), **emit)
                if isinstance(made, gast.Name) and callee is tuple:
                    self.containers.add(made.id)
                    self.tuples.add(made.id)
                if isinstance(made, gast.Name) and callee is dict:  # (a new dict: its keys known when it runs)
                    self.containers.add(made.id)
                    self.dicts.add(made.id)
                return made
            if callee is np.einsum:
                args = _einsum_sublists(args)
            if callee in (max, min) and len(args) > 1:  # Python's max(a, b) is max((a, b)): one rule
                args = [nodes.tuple_(args)]
            if callee is sorted and len(args) == 1 and not kwargs and isinstance(args[0], gast.Name) \
                    and self._dict_keys(args[0].id) is not None:  # `for k in sorted(params)`
                keys = sorted(self._dict_keys(args[0].id))
                display = gast.List(elts=[nodes.const(k) for k in keys], ctx=gast.Load())
                return self._emit_aggregate(display, list(range(len(keys))), [nodes.const(k) for k in keys],
                                            node, **emit)
            spelled = self._spell(callee, node)
            func_node = nodes.dotted(spelled) if spelled else nodes.copy(func)
            if callee is np.where and len(args) == 1 and not kwargs:  # np.where(c) is np.nonzero(c): indices
                callee = np.nonzero
            return self._apply(callee, None, args, kwargs, node, func_node=func_node, **emit)
        if isinstance(func, gast.Attribute) and func.attr not in _METHODS and self._is_array(func.value) \
                and (isinstance(func.value, gast.Name) or self._surely_array(func.value)
                     and hasattr(np.ndarray, func.attr)):
            if hasattr(list, func.attr) and isinstance(func.value, gast.Name):
                # (`vals = list(x)`: NumPy reads the list as the array, and so does srcgrad)
                raise errors.at(node, f"srcgrad cannot differentiate `.{func.attr}()` of `{func.value.id}`, "
                                "which holds an array's values (an array, or a list made from one): srcgrad "
                                "follows neither the list method nor an array method of that name",
                                "reverse or sort with NumPy before making the list (`x[::-1]`, `np.sort(x)`), "
                                "or index the items in the order you need (`[x[2], x[1], x[0]]`)")
            instead = f"call the NumPy function instead (`np.{func.attr}(x, ...)`)" if hasattr(np, func.attr) \
                else "write it as an assignment or with NumPy functions"
            raise errors.at(node, f"srcgrad has no derivative rule for the array method `.{func.attr}()`",
                            f"{instead}, or register a rule with srcgrad.defadjoint")
        if isinstance(func, gast.Attribute) and func.attr in _METHODS and self._is_array(func.value):
            receiver = self._lower(func.value)
            args, kwargs = self._call_arguments(node)
            if func.attr in _VARARG_METHODS and len(args) == 1 and isinstance(args[0], gast.Starred):
                args = [args[0].value]  # (`x.reshape(*shape)` is `x.reshape(shape)`)
            self._check_spread(args, kwargs, node)
            if func.attr in _VARARG_METHODS and len(args) > 1:
                args = [nodes.tuple_(args)]
            prim = _METHODS[func.attr]
            func_node = nodes.dotted(self.backend.spelling(prim) or (
                f"rt.{prim.__name__}" if prim.__module__ == runtime.__name__ else prim.__name__))
            return self._apply(prim, None, [receiver] + args, kwargs, node, func_node=func_node, **emit)
        if isinstance(func, gast.Attribute) and func.attr in ("append", "pop") \
                and isinstance(func.value, gast.Name) and func.value.id in self.sequences \
                and self.current.get(func.value.id) == func.value.id:
            user = func.value.id
            raise errors.at(node, f"`{user}.{func.attr}(...)` would change the caller's list `{user}`, "
                            "which srcgrad does not follow",
                            f"build a list of your own from its items (`items = [{user}[0], {user}[1]]`) "
                            "and change that")
        if isinstance(func, gast.Attribute) and func.attr == "copy" and not node.args and not node.keywords \
                and isinstance(func.value, gast.Name) and not anno.has(func.value, "resolved") \
                and self._container_kind(self.current.get(func.value.id, func.value.id)) in ("list", "dict"):
            # `ps.copy()` of a list or dict (passed in, or made here): `list(ps)` / `dict(ps)`
            kind = list if self._container_kind(self.current.get(func.value.id, func.value.id)) == "list" else dict
            maker = anno.set(nodes.name(kind.__name__), "resolved", kind)
            copied = anno.inherit(gast.Call(func=maker, args=[func.value], keywords=[]), node)
            return self._lower(copied, **{k: v for k, v in emit.items() if k != "origin_node"})
        if isinstance(func, gast.Attribute) and func.attr in _CHANGES - {"reverse", "insert", "sort"} \
                and isinstance(func.value, gast.Name) \
                and self.current.get(func.value.id, func.value.id) in self.runtime_lists - self.dicts \
                and not (func.attr in ("update", "setdefault")
                         and self.current.get(func.value.id, func.value.id) in self.runtime_mappings):
            # (`vals = list(x)`, `hs = [None] * n`: its items are known when it runs only, and
            # their adjoints are followed by position: a change of order or length is not)
            user = func.value.id
            raise errors.at(node, f"srcgrad does not follow `.{func.attr}()` of `{user}`, a list whose "
                            "items it knows only when the code runs (their adjoints go by position)",
                            f"make a new list instead (`{user} = {user}[::-1]`, `{user} = {user}[:-1]`, "
                            f"`{user} = {user} + [v]`), or build `{user}` with appends in this function")
        # A list or dict made here, by its name or as an item of another (`ys[0].append(h)`).
        held = self._held(func.value) if isinstance(func, gast.Attribute) else None
        user = nodes.to_source(func.value) if held is not None else None
        if held is not None and func.attr == "append" and held in self.made_by:
            return self._append(user, node, name=held, **emit)
        if held is not None and func.attr == "extend" and held in self.made_by:
            return self._extend(user, node, held, **emit)
        if held is not None and func.attr in ("reverse", "insert", "sort") and isinstance(func.value, gast.Name) \
                and held in self.own_lists | self.lists | self.runtime_lists and held not in self.dicts \
                and held not in self.tuples:
            return self._reordered(user, held, node, **emit)
        if held is not None and func.attr == "pop" and held in self.dicts and isinstance(func.value, gast.Name):
            return self._dict_pop(user, held, node, **emit)
        if held is not None and func.attr == "pop" and held in self.own_lists | self.containers:
            return self._pop(user, node, name=held, **emit)
        if self._dict_method_call(node) is not None:
            return self._dict_method(held, func.attr, node, **emit)
        if held is not None and (held in self.dicts or held in self.runtime_mappings) \
                and func.attr in ("update", "setdefault") and isinstance(func.value, gast.Name):
            written = self._dict_written(func.value, node)
            if written is not None:  # (the call's value: `d["k"]`, or None)
                return self._lower(written, **{k: v for k, v in emit.items() if k != "origin_node"})
        if held is not None and held in self.containers and not (
                held in self.dicts and func.attr in ("keys", "values", "items", "get")):
            # (a dict made here whose keys are known only at run time: as a dict passed in, below)
            raise errors.at(node, f"the method `.{func.attr}()` of a list, tuple or dict is not supported "
                            "in differentiated code (only `append`, `extend` and `pop`, a dict's `keys`, "
                            "`values`, `items` and `get`, `setdefault`, and `update` with a dict display or "
                            "keywords)",
                            f"index it instead (`{user}[key]`)")
        # Known only at run time: a function passed in, a method of an object.
        receiver = None
        if isinstance(func, gast.Attribute):
            receiver = self._lower(func.value)
            callee = gast.Attribute(value=nodes.copy(receiver), attr=func.attr, ctx=gast.Load())
        else:
            callee = self._lower(func)
        args, kwargs = self._call_arguments(node)
        return self._user_call(callee, args, kwargs, node, receiver=receiver, **emit)

    def _call_arguments(self, node):
        """A call's arguments, lowered: ``(args, kwargs)``.

        ``*xs`` and ``**d`` whose entries are known when compiling (a tuple or dict
        built here, or a parameter: what it holds is part of the specialisation)
        pass each entry on its own, ``g(*xs)`` → ``g(xs[0], xs[1])``, so each
        entry's adjoint flows back into ``xs`` as a subscript's does.  Others stay
        spread, a ``Starred`` in ``args`` or a ``("**", n)`` key in ``kwargs``:
        the call runs as written, and the reverse pass refuses to differentiate
        through them.
        """
        args, kwargs = [], {}
        for a in node.args:
            if isinstance(a, gast.Starred):
                args += self._spread(a.value, "sequence", len(args))
            else:
                args.append(self._argument(a))
        for k in node.keywords:
            entries = self._spread(k.value, "mapping", len(kwargs)) if k.arg is None \
                else {k.arg: self._argument(k.value)}
            repeated = sorted(set(entries) & set(kwargs), key=str)
            if repeated:
                raise errors.at(node, f"the keyword argument `{repeated[0]}` is passed twice",
                                "pass each keyword once")
            kwargs.update(entries)
        return args, kwargs

    def _spread(self, node, kind, position):
        base = self._lower(node)
        keys = self._entries(base, kind)
        if keys is None:
            if kind == "sequence":
                return [gast.Starred(value=base, ctx=gast.Load())]
            return {("**", position): base}
        elements = []
        for key in keys:
            element = self._aggregate_element(base, nodes.const(key))
            if element is None:
                item = gast.Subscript(value=nodes.copy(base), slice=nodes.const(key), ctx=gast.Load())
                element = self._apply(operator.getitem, item, [nodes.copy(base), nodes.const(key)], {},
                                      node, origin_node=node, target=None, target_hint=None, effect=False)
                if isinstance(element, gast.Name):
                    self._field_rank(element, base, key)
            elements.append(element)
        return elements if kind == "sequence" else dict(zip(keys, elements))

    def _entries(self, base, kind):
        """The keys of a tuple or list (``kind="sequence"``) or of a dict (``"mapping"``)
        that are known when compiling, else None."""
        if not isinstance(base, gast.Name):
            return None
        if base.id in self.aggregates and (base.id in self.dicts) == (kind == "mapping"):
            keys = list(self.aggregates[base.id])
        elif base.id in self.structures and self.structures[base.id].kind == kind:
            keys = [key for key, _ in self.structures[base.id]]
        else:
            return None
        return keys if kind == "sequence" or all(isinstance(k, str) for k in keys) else None

    def _check_spread(self, args, kwargs, node):
        """A NumPy function's rule binds each argument to a parameter when compiling."""
        spread = [a.value for a in args if isinstance(a, gast.Starred)] + \
            [v for k, v in kwargs.items() if isinstance(k, tuple)]
        if spread:
            raise errors.at(node, f"srcgrad cannot tell how many values `{nodes.to_source(spread[0])}` "
                            "holds when it compiles this call, so it cannot bind them to the "
                            "function's parameters",
                            "unpack it into names first (`a, b = pair`) and pass them, or spread a "
                            "tuple or dict built in this function or passed in as an argument")

    def _user_call(self, callee, args, kwargs, node, receiver=None, **emit):
        """A call to the user's own code: differentiated through its own vjp at run time.

        ``receiver``: for ``obj.name(...)``, the object, whose parameters may be
        differentiated too (a model calling its layers).  A list or tuple display
        among the arguments (``g([a, b])``) is built as a value first, so its
        adjoint (the callee's for that parameter) reaches the items."""
        if isinstance(callee, gast.Name) and callee.id in self.closures:
            # Python's closure reads the name when it is called; the nested def was given
            # the value the name had at the `def` (single assignment): the same only if
            # the name was not assigned again since.
            user, seen, lam = self.closures[callee.id]
            for read, name in sorted(seen.items()):
                if self.current.get(read, read) != name:
                    made, which = ("the lambda was made", "the lambda") if lam \
                        else (f"`def {user}`", f"`{user}`")
                    raise errors.at(node, f"{'the lambda called here' if lam else which} reads `{read}`, which "
                                    f"was assigned again after {made}: Python's {which.removeprefix('the ')} "
                                    "sees the new value, and srcgrad does not follow it",
                                    f"pass `{read}` to {which} as an argument")

        def value_of(atom):
            if isinstance(atom, (gast.List, gast.Tuple)) and any(isinstance(n, gast.Name)
                                                                  for n in nodes.walk(atom)):
                return self._display_value(atom, node)
            return atom
        args = [value_of(a) for a in args]
        kwargs = {k: value_of(v) for k, v in kwargs.items()}
        for atom in list(args) + list(kwargs.values()) + ([receiver] if receiver is not None else []):
            for name in nodes.loaded_names(atom):
                if name in self.containers or name in self.lists:
                    self.passed.setdefault(name, anno.get(node, "origin"))
        value = nodes.call(callee, [nodes.copy(a) for a in args],
                           [(None if isinstance(k, tuple) else k, nodes.copy(v)) for k, v in kwargs.items()])
        if receiver is None and isinstance(callee, gast.Name) and not anno.has(callee, "resolved"):
            receiver = callee  # a callable object passed in: its own parameters count
        self._escape(list(args) + list(kwargs.values()), node)  # the callee may keep or return a view
        for atom in list(args) + list(kwargs.values()) + ([receiver] if receiver is not None else []):
            for name in nodes.loaded_names(atom):  # ... or change a list, dict or object it is given
                self.aggregates.pop(name, None)
        return self._emit(value, kind="call", args=args, kwargs=kwargs, receiver=receiver,
                          impure=True, **emit)

    def _apply(self, prim, value, args, kwargs, node, func_node=None, **emit):
        """Emit a primitive application, binding its arguments to the rule's parameters."""
        rule = registry.lookup(prim)
        if prim is np.clip and value is None:
            args, kwargs = _clip_arguments(args, kwargs)
        if value is None and rule is not None and rule.differentiable:
            args, kwargs = self._array_arguments(prim, rule, args, kwargs, node)
        if value is None:
            value = nodes.call(func_node, [nodes.copy(a) for a in args],
                               [(k, nodes.copy(v)) for k, v in kwargs.items()])
        if rule is None:
            return self._emit(value, kind="unknown", callee=prim, **emit)
        if not rule.differentiable:
            # A random draw must happen exactly as often as in the user's function.
            # A constructor's shape argument gives the result's rank (np.zeros((n, m))).
            shape = args[0] if args else kwargs.get("shape")
            extra = {"bound": {"shape": nodes.copy(shape)}} if rule.ndim is not None and shape is not None \
                and not any(isinstance(a, gast.Starred) for a in args) else {}
            if _is_user_class(prim):  # `c = Counter()`: an object, whose methods are the user's
                extra["constructs"] = prim
            return self._emit(value, kind="nondiff", rule=rule,
                              impure=rule.impure or registry.is_random(prim), **extra, **emit)
        try:
            bound = rule.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise errors.at(node, f"srcgrad's rule for `{rule.name}` does not accept these "
                            f"arguments ({exc})", "pass only the arguments the rule lists: "
                            f"{rule.name}{rule.signature}") from None
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        for unsupported in ("out",):
            if unsupported in arguments and static_value(_as_node(arguments[unsupported])) is not None:
                raise errors.at(node, f"`{unsupported}=` is not supported in differentiated code",
                                "assign the result to a name instead")
        arguments = {k: _as_node(v) for k, v in arguments.items()}
        if rule.impure:  # a random draw with a rule: it must still happen exactly as often
            emit["impure"] = True
        return self._emit(value, kind="op", rule=rule, bound=arguments, **emit)


# Methods that change a list or dict in place.
_CHANGES = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem",
            "sort", "reverse"}

_VIEWS = (operator.getitem, np.reshape, np.ravel, np.transpose, np.expand_dims, np.squeeze,
          np.broadcast_to, np.asarray)


def _literal_key(index):
    """The key a literal index or key spells (``0``, ``-1``, ``"a"``), else None."""
    if isinstance(index, gast.Constant):
        return index.value
    if isinstance(index, gast.UnaryOp) and isinstance(index.op, gast.USub) \
            and isinstance(index.operand, gast.Constant) and type(index.operand.value) is int:
        return -index.operand.value
    return None


def _copy_advice(user: str, kind) -> str:
    """How to write ``user`` as a new value of its kind (all three where it is not known)."""
    ways = {"array": f"`{user} = np.copy({user})`", "list": f"`{user} = list({user})`",
            "dict": f"`{user} = dict({user})`"}
    if kind in ways:
        return ways[kind]
    return f"{ways['dict']} for a dict, {ways['list']} for a list, {ways['array']} for an array"


def _reversed_as_slice(node):
    """``reversed(xs)`` as ``xs[::-1]``: indexable, with a length, as the loop lowering needs
    (a ``list_reverseiterator`` has neither); any other node as it is."""
    if not (isinstance(node, gast.Call) and anno.get(node.func, "resolved", None) is reversed
            and len(node.args) == 1 and not node.keywords):
        return node
    step = gast.Slice(lower=None, upper=None, step=nodes.const(-1))
    return anno.inherit(gast.Subscript(value=node.args[0], slice=step, ctx=gast.Load()), node)


def _makes_new_array(annotations, value) -> bool:
    """Whether a statement's value is a new array, shared with no other name."""
    kind = annotations.get("kind")
    if kind == "op" and nodes.copies_by_index(value):
        return True  # `a[[0, 2]]`: a copy
    if kind == "op":
        return annotations["rule"] not in {registry.lookup(v) for v in _VIEWS} \
            and not isinstance(value, gast.Attribute)  # x.T is a view
    return kind in ("nondiff", "aggregate") and not isinstance(value, (gast.Attribute, gast.Subscript))


def _op_symbol(op) -> str:
    return {gast.Add: "+", gast.Sub: "-", gast.Mult: "*", gast.Div: "/", gast.Pow: "**",
            gast.MatMult: "@", gast.FloorDiv: "//", gast.Mod: "%", gast.BitAnd: "&", gast.BitOr: "|",
            gast.BitXor: "^", gast.LShift: "<<", gast.RShift: ">>"}.get(type(op), "?")


def _clip_arguments(args, kwargs):
    """``np.clip``'s arguments with both bounds given, as ``a_min``/``a_max``:
    ``x.clip(lo)``, ``np.clip(x, min=0)`` and ``x.clip(max=hi)`` (NumPy 2) omit one,
    which the function form (and the rule) needs spelled ``None``."""
    kwargs = dict(kwargs)
    for short, full in (("min", "a_min"), ("max", "a_max")):
        if short in kwargs and full not in kwargs:
            kwargs[full] = kwargs.pop(short)
    for position, full in ((1, "a_min"), (2, "a_max")):
        if len(args) <= position and full not in kwargs:
            kwargs[full] = nodes.const(None)
    return args, kwargs


# NumPy's random generators (``rng = np.random.default_rng(0)``): objects, not arrays.
# Calls whose result is a Python container, never an array (`[None] * n`, `list(m)`).
_CONTAINER_MAKERS = {"srcgrad.runtime.repeated", "srcgrad.runtime.concatenated", "srcgrad.runtime.as_tuple",
                     "srcgrad.runtime.sequence_of", "srcgrad.runtime.mapping_of", "srcgrad.runtime.reversed_list",
                     "srcgrad.runtime.inserted", "srcgrad.runtime.merged", "srcgrad.runtime.without_key", "srcgrad.runtime.fromkeys", "srcgrad.runtime.tolist", "numpy.split", "numpy.array_split", "numpy.hsplit", "numpy.vsplit",
                     "builtins.list", "builtins.tuple", "builtins.dict", "builtins.sorted", "builtins.zip",
                     "builtins.enumerate", "collections.OrderedDict", "collections.defaultdict"}
# The runtime helpers of gradient code that make a list of adjoints, one per item of a list
# grown by append: the backward sweep pops it (forward mode over it mirrors the pops).
# ... of them, those whose result is a list or tuple, which a loop indexes as it is.
_SEQUENCE_MAKERS = {"srcgrad.runtime.repeated", "srcgrad.runtime.concatenated", "srcgrad.runtime.as_tuple",
                    "srcgrad.runtime.sequence_of", "srcgrad.runtime.reversed_list", "srcgrad.runtime.inserted",
                    "numpy.split", "numpy.array_split", "numpy.hsplit", "numpy.vsplit", "builtins.list",
                    "builtins.tuple", "builtins.sorted"}
_MAPPING_MAKERS = {"builtins.dict", "collections.OrderedDict", "collections.defaultdict",
                   "srcgrad.runtime.mapping_of", "srcgrad.runtime.merged", "srcgrad.runtime.without_key",
                   "srcgrad.runtime.fromkeys"}
_LIST_ADJOINTS = {registry.lookup(runtime.as_items), registry.lookup(runtime.add_each)}
_GENERATOR_MAKERS = {"numpy.random.default_rng", "numpy.random.mtrand.RandomState",
                     "numpy.random._generator.Generator"}


def array_method(name, receiver, args):
    """``(function, arguments)`` of NumPy's spelling of ``receiver.name(*args)``:
    ``x.reshape(2, 3)`` is ``np.reshape(x, (2, 3))``.

    Raises:
        NoDerivativeRuleError: a method srcgrad has no rule for (on a receiver known to
            be an array only when it runs: ``xs[0].cumprod()`` of a list ``xs``).
    """
    if name not in _METHODS:
        raise errors.NoDerivativeRuleError(
            f"srcgrad has no derivative rule for the array method `.{name}()`", None,
            f"call the NumPy function instead (`np.{name}(x, ...)`), or register a rule with "
            "srcgrad.defadjoint")
    if name in _VARARG_METHODS and len(args) > 1:
        args = (tuple(args),)
    return _METHODS[name], (receiver,) + tuple(args)


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


def parameters(args: gast.arguments) -> list:
    """Parameter names in signature order; ``*args`` is one parameter (a tuple) and
    ``**kwargs`` one (a dict), as :meth:`inspect.Signature.bind` gives them."""
    names = args.posonlyargs + args.args + [args.vararg] + args.kwonlyargs + [args.kwarg]
    return [a.id for a in names if a is not None]


def _is_user_code(obj) -> bool:
    """A Python function or method that srcgrad can read and differentiate."""
    return inspect.isfunction(obj) or inspect.ismethod(obj) or (
        callable(obj) and not isinstance(obj, type) and not registry.is_numpy(obj)
        and inspect.isfunction(getattr(type(obj), "__call__", None)))


def _stored_parameters(cls):
    """``{attribute: parameter}`` when making a ``cls`` only stores its parameters
    as attributes: a dataclass's own ``__init__``, or an ``__init__`` whose body is
    ``self.w = w`` lines (and a docstring); None for any other class."""
    init = getattr(cls, "__init__", None)
    if getattr(cls, "__setattr__", object.__setattr__) is not object.__setattr__ \
            or hasattr(cls, "__slots__") \
            or type(cls) is not type or cls.__new__ is not object.__new__:
        return None
    code = getattr(init, "__code__", None)
    if code is None:
        return None
    if dataclasses.is_dataclass(cls) and code.co_filename == "<string>":  # made by @dataclass
        if hasattr(cls, "__post_init__"):
            return None
        stored = {f.name: f.name for f in dataclasses.fields(cls) if f.init}
    else:
        from . import parse
        try:
            fdef = parse.transform(init)
        except errors.SrcgradError:
            return None
        args = fdef.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or not args.args:
            return None
        me, params = args.args[0].id, {a.id for a in args.args[1:]}
        stored = {}
        for stmt in fdef.body:
            if isinstance(stmt, gast.Expr) and isinstance(stmt.value, gast.Constant):
                continue  # a docstring
            if isinstance(stmt, gast.Assign) and len(stmt.targets) == 1 \
                    and isinstance(stmt.targets[0], gast.Attribute) \
                    and isinstance(stmt.targets[0].value, gast.Name) and stmt.targets[0].value.id == me \
                    and isinstance(stmt.value, gast.Name) and stmt.value.id in params \
                    and stmt.targets[0].attr not in stored:
                stored[stmt.targets[0].attr] = stmt.value.id
                continue
            return None
    if any(hasattr(inspect.getattr_static(cls, attr, None), "__get__") for attr in stored):
        return None  # a property (or another descriptor) of that name: not the stored value
    return stored


def _display(node) -> bool:
    """A list or tuple display, lowered in an argument's place, without ``*`` items."""
    return isinstance(node, (gast.List, gast.Tuple)) and not any(isinstance(e, gast.Starred) for e in node.elts)


def _is_named_tuple_class(obj) -> bool:
    return isinstance(obj, type) and issubclass(obj, tuple) \
        and isinstance(getattr(obj, "_fields", None), tuple)


def _is_user_class(obj) -> bool:
    """A class whose instances are objects (not NumPy's, not a builtin such as ``float``)."""
    return isinstance(obj, type) and not registry.is_numpy(obj) and obj.__module__ != "builtins"


def _einsum_sublists(args):
    """``np.einsum(x, [0, 1], y, [1, 2], [0, 2])`` → ``np.einsum('ab,bc->ac', x, y)``: the
    sublist form as subscripts, when its lists are literal (otherwise the rule's
    ``subscripts`` parameter gets an array, refused if it is being differentiated)."""
    if not args or isinstance(args[0], gast.Constant) and isinstance(args[0].value, str):
        return args

    def letters(sub):
        if not isinstance(sub, (gast.List, gast.Tuple)):
            return None
        out = ""
        for e in sub.elts:
            if isinstance(e, gast.Constant) and e.value is Ellipsis or isinstance(e, gast.Name) \
                    and e.id == "Ellipsis":
                out += "..."
            elif isinstance(e, gast.Constant) and type(e.value) is int and 0 <= e.value < 52:
                out += "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"[e.value]
            else:
                return None
        return out
    pairs, operands = [], []
    for i in range(0, len(args) - 1, 2):
        sub = letters(args[i + 1])
        if sub is None:
            return args
        operands.append(args[i])
        pairs.append(sub)
    spec = ",".join(pairs)
    if len(args) % 2:
        out = letters(args[-1])
        if out is None:
            return args
        spec += "->" + out
    return [nodes.const(spec)] + operands


def _as_node(value):
    if isinstance(value, gast.AST):
        return nodes.copy(value)
    if isinstance(value, tuple) and value and all(isinstance(v, gast.AST) for v in value):
        return nodes.tuple_([nodes.copy(v) for v in value])  # a *operands parameter
    return literal(value) if is_literal(value) else nodes.const(None)


__all__ = ["Core", "transform", "UNKNOWN"]
