"""Pass 6 — reverse: the forward sweep and the backward sweep.

Requires: a :class:`~srcgrad.ir.Core` program, its activity and ranks.
Guarantees: ``forward`` is the core body without its ``return``; ``backward``
holds, in reverse order, each active statement's adjoint instantiated from
its rule.  The adjoint of ``v`` is ``v_bar``; its first contribution assigns,
later ones accumulate (``v_bar = v_bar + ...``), so shared uses sum up.  Every
``wrt`` parameter ends with an adjoint (zeros where the output does not
depend on it).  Every generated statement keeps its user ``group``.

The adjoints are built in parts, one job each: control flow and the stacks of saved
values (``reverse_control``), calls of the user's code (``reverse_calls``), primitives
from their rules (``reverse_rules``), lists and writes into arrays
(``reverse_containers``); what is refused is ``analysis/refusals.py``'s, asked of each
statement before its adjoint.

Before (``wrt=h``)::

    h_relu = np.maximum(h, 0)
    return np.sum(h_relu)

After (the backward sweep)::

    h_relu_bar = rt.fill_like(h_relu, result_bar)
    h_bar = h_relu_bar * (h > 0)
"""
from __future__ import annotations

import dataclasses
import operator
import re

import gast

from ..anno import Kind
from .. import anno, nodes, runtime
from ..analysis import refusals
from ..analysis.nondifferentiable import _builtin_rule
from ..analysis.ranks import rank_of
from ..rules.registry import lookup as registry_lookup
from ..tree import TreeRank
from .reverse_calls import _CallAdjoints
from .reverse_containers import _ContainerAdjoints
from .reverse_control import _ControlFlow
from .reverse_rules import _RuleAdjoints


@dataclasses.dataclass
class Sweeps:
    forward: list
    backward: list
    adjoints: dict  # wrt parameter -> name of its adjoint variable
    seed: str       # name of the output's adjoint (the pullback's input)
    primal_of: dict  # adjoint variable -> its primal (an adjoint has its primal's shape)
    notes: list      # (stack or trip-count name, loop's file:line), for the header
    intermediates: dict = dataclasses.field(default_factory=dict)  # name -> its adjoint variable
    callees: dict = dataclasses.field(default_factory=dict)  # (name, fn, wrt, ranks) -> its vjp's name
    bound: dict = dataclasses.field(default_factory=dict)  # name -> a function the code calls by it


def transform(core, activity, ranks, wrt, backend, output=None, hooks=None, intermediates=(),
              free=None) -> Sweeps:
    """``output``: the atom (or tuple of atoms) whose adjoint is the seed; default
    the returned value (``grad(..., has_aux=True)`` passes its first element).
    ``hooks``: name -> variable of a function applied to that name's adjoint once
    it is complete; ``intermediates``: names whose adjoints are kept; ``free``: the
    free names' values at compile time (``resolve.FreeNames.names``), to tell which
    arrays a callee writes into the code reads too."""
    rev = _Reverse(core, activity, ranks, backend, free)
    rev.hooks = hooks or {}
    sweeps = rev.run(wrt, core.result if output is None else output)
    for name in intermediates:
        if name not in rev.bar:
            rev.group = None
            rev.out.append(rev._zeros(name))
        sweeps.intermediates[name] = rev.bar[name]
        top = {n for stmt in sweeps.backward if isinstance(stmt, gast.Assign) for n in nodes.assigned_names(stmt)}
        if rev.bar[name] not in top:  # assigned only in a branch, which may not run: zero if not
            sweeps.backward.insert(0, nodes.assign(rev.bar[name], nodes.const(0.0)))
    return sweeps


class _Reverse(_ControlFlow, _CallAdjoints, _RuleAdjoints, _ContainerAdjoints):
    """The two sweeps of one function: the adjoints' names and which have a value, and the
    backward statements being filled; the adjoint of each kind of statement is a part of
    its own (control flow, calls, rules, containers), the refusals ``analysis/refusals.py``'s."""

    def __init__(self, core, activity, ranks, backend, free=None):
        self.core, self.activity, self.ranks, self.backend = core, activity, ranks, backend
        self.refusals = refusals.Refusals(core, activity, ranks, free)  # what is refused, asked per statement
        self.bar = {}        # variable -> adjoint name
        self.defined = set()  # variables whose adjoint has a value
        self.out = []        # the backward statement list being filled
        self.unpacked = {}   # tuple name -> {index: adjoint name of the element unpacked there}
        self.group = None
        self.saves = []      # statements that create the stacks, at the top of the forward sweep
        self.notes = []      # header lines explaining stacks and trip counts
        self.loop_numbers = {id(s): k + 1 for k, s in enumerate(
            s for s in nodes.statements(core.body) if isinstance(s, (gast.For, gast.While)))}
        self.if_numbers = {id(s): k + 1 for k, s in enumerate(
            s for s in nodes.statements(core.body) if isinstance(s, gast.If))}
        self.loop_depth = 0
        self.save_ids = 0
        self.callees = {}    # (name, function, wrt, ranks) -> name of its vjp in the code
        self.bound = {}      # name -> function the code reads under it (a rule's adjoint it calls)
        self.grad_made = None  # names bound to srcgrad.grad(f) here (found at the first call of one)
        self.first_bound = set()  # names an enclosing loop binds first (unbound on its first iteration)
        self.prebound = set()   # names bound on some paths only, bound to None first (see _branch_zeros)
        self.taken = {}         # test of an `if` in a loop -> its plain name (`if2_taken`)
        self.stacks = {}        # the stacks created so far (in self.saves): `loop1_stack` -> its name
        self.unpacked_sources = None  # names `a, b = name` unpacks (_unpacked_source), when needed
        self.bound_within = None      # id(compound statement) -> names bound inside it, when needed
        self.indexed = None           # names read by index or iterated (_indexed_names), when needed
        self.call_results = {s.targets[0].id for s in nodes.statements(core.body)
                             if anno.get(s, "kind") == Kind.CALL and isinstance(s, gast.Assign)
                             and isinstance(s.targets[0], gast.Name)}
        changes = {s: anno.get(s, "kind") for s in nodes.statements(core.body)
                   if anno.get(s, "kind") in (Kind.APPEND, Kind.POP, Kind.ITEM)}
        # Lists changed in place: their adjoint is a list of adjoints, one per item.
        self.lists = {anno.get(s, "list") for s in changes}
        # Lists and dicts whose items are written (`hs[t] = h`, known when the code runs):
        # an item unpacked from one (`a, b = hs`) gives its adjoint at once, where the
        # writes' adjoints, before the definition in the backward sweep, read it.
        self.entries_written = {anno.get(s, "array") for s in nodes.statements(core.body)
                                if anno.get(s, "kind") == Kind.SETITEM and anno.get(s, "generic")}
        # Lists that pop changes, or whose items are read (`xs[i]`): the backward sweep
        # puts them back as they were at each point, so an adjoint that starts there
        # (`rt.zeros_each`) has their length then, and `xs_bar[i]` is `xs[i]`'s.
        self.popped = {anno.get(s, "list") for s, kind in changes.items() if kind in (Kind.POP, Kind.ITEM)}

    def run(self, wrt, result) -> Sweeps:
        seed_base = f"{result.id}_bar" if isinstance(result, gast.Name) else "result_bar"
        seed = self.core.fresh(seed_base)
        if isinstance(result, gast.Name) and self.activity.active(result.id) and result.id in self.lists:
            # A list built by appends: the appends' adjoints pop one adjoint per item from
            # it, whatever form the caller's came in (sparse, `{0: y_bar}`, from `ys[0]`).
            self._accumulate(result.id, nodes.name(seed))
        elif isinstance(result, gast.Name) and self.activity.active(result.id):
            self.bar[result.id] = seed
            self.defined.add(result.id)
        elif isinstance(result, gast.Tuple):  # several outputs: the seed is a tuple
            for i, atom in enumerate(result.elts):
                if self._active_name(atom):
                    self._accumulate(atom.id, gast.Subscript(value=nodes.name(seed), slice=nodes.const(i),
                                                             ctx=gast.Load()))
        forward = [s for s in self.core.body if not isinstance(s, gast.Return)]
        self.refusals.read_stores(forward)
        self._reverse_block(forward)
        self.group = None
        for source in sorted(self.unpacked):  # `a, b = param`
            self._gather_unpacked(source)
        adjoints = {}
        for param in wrt:
            if param not in self.defined:
                self.out.append(self._zeros(param))
                self.defined.add(param)
            adjoints[param] = self.bar[param]
        # A loop's first iteration may merge a name it has not bound yet (`keep` in
        # `if c: keep = ...` else keep): that copy needs a value to read.
        for stmt in nodes.statements(self.core.body):
            if isinstance(stmt, gast.If):
                self.prebound.update(s.value.id for s in stmt.body + stmt.orelse
                                     if anno.get(s, "kind") == Kind.COPY and isinstance(s.value, gast.Name)
                                     and s.value.id in self.core.maybe_unbound)
        prebind = [anno.set(nodes.assign(v, nodes.call("rt.Unbound", [nodes.const(re.sub(r"_\d+$", "", v))])),
                            "prebound", True) for v in sorted(self.prebound)]
        if self.taken:
            nodes.rename(prebind + self.saves + self.core.body + self.out, self.taken)
        return Sweeps(prebind + self.saves + forward, self.out, adjoints, seed,
                      {b: v for v, b in self.bar.items()}, self.notes, callees=self.callees, bound=self.bound)

    def _gather_unpacked(self, source):
        """The adjoints of the names ``a, b = source`` bound, put together as ``source``'s."""
        parts = self.unpacked.pop(source, None)
        if parts is None or not self.activity.active(source):
            return
        adjoint = gast.Dict(keys=[nodes.const(i) for i in parts], values=[nodes.name(b) for b in parts.values()])
        if not isinstance(rank_of(nodes.name(source), self.ranks), TreeRank):  # rows of an array?
            adjoint = nodes.call("rt.unpacked_adjoint", [adjoint, nodes.name(source)])
        self._accumulate(source, adjoint)

    def _bar_name(self, var):
        if var not in self.bar:
            self.bar[var] = self.core.fresh(f"{var}_bar")
        return self.bar[var]

    def _append(self, stmt, group):
        anno.set(stmt, "group", group)
        self.out.append(stmt)

    def _is_array(self, var) -> bool:
        return isinstance(self.ranks.get(var), int)

    def _zeros(self, var, like=None):
        maker = f"{self.backend.MODULE_NAME}.zeros_like" if self._is_array(like or var) else \
            "rt.zeros_each" if var in self.lists else "rt.zeros_like"
        zeros = nodes.call(maker, [nodes.name(like or var)])
        stmt = nodes.assign(self._bar_name(var), zeros)
        anno.set(stmt, "group", self.group)
        return stmt

    def _branch_zeros(self, var):
        """The zero adjoint a branch that does not start ``var``'s adjoint gives it.
        Where ``var`` may not exist on that path (`if c: z = ...` alone, or a name a
        loop binds first, on its first iteration), it is bound to None first thing
        (``self.prebound``) and its zero adjoint is ``0.0`` there: nothing reads that
        adjoint on a path where ``var`` was never assigned.  Elsewhere the zeros have
        the shape ``var`` has there, which may differ between iterations."""
        if var in self.first_bound or var in self.core.maybe_unbound:
            self.prebound.add(var)
            stmt = nodes.assign(self._bar_name(var), nodes.call("rt.zeros_like", [nodes.name(var)]))
            anno.set(stmt, "group", self.group)
            return stmt
        return self._zeros(var)

    def _accumulate(self, var, expr):
        name = self._bar_name(var)
        if var in self.lists and not (isinstance(expr, gast.Name) and expr.id == name):
            # A list changed in place: its adjoint is a list of adjoints, one per item, that
            # the appends pop (whatever form the contribution came in: rows of an array, sparse).
            expr = nodes.call("rt.as_items", [expr, nodes.name(var)])
            if var in self.defined:
                expr = nodes.call("rt.add_each", [nodes.name(name), expr])
            self.defined.add(var)
            self._append(nodes.assign(name, expr), self.group)
            return
        if var not in self.defined:
            self.defined.add(var)
            if isinstance(expr, gast.Name) and expr.id == name:
                return  # the rule already built it under this name
            self._append(nodes.assign(name, expr), self.group)
        elif self._is_array(var):
            self._append(nodes.assign(name, nodes.binop(nodes.name(name), "+", expr)), self.group)
        else:  # maybe a structure: its adjoint is a sparse dict
            self._append(nodes.assign(name, nodes.call("rt.add", [nodes.name(name), expr])), self.group)

    def _active_name(self, atom):
        return isinstance(atom, gast.Name) and self.activity.active(atom.id)

    def _adjoint(self, stmt):
        """The adjoint of one statement of the forward sweep, appended to the backward sweep, after
        the checks that refuse what cannot be followed (``analysis/refusals.py``); the statement's
        kind picks the method (``_STATEMENT_ADJOINTS``; an assignment of a value, ``_value_adjoint``)."""
        if self.refusals.check(stmt):
            return
        adjoint = _STATEMENT_ADJOINTS.get(anno.get(stmt, "kind"))
        if adjoint is not None:
            return adjoint(self, stmt)
        if isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name):
            self._value_adjoint(stmt)

    def _value_adjoint(self, stmt):
        """``target = value``: the adjoint of the value, by its kind (a copy, a call, an item, an
        aggregate, an unpacking, a rule's)."""
        if not isinstance(stmt, gast.Assign) or not isinstance(stmt.targets[0], gast.Name):
            return
        target = stmt.targets[0].id
        if target in self.activity.useful:
            self.refusals.check_underived(stmt)
        if not self.activity.active(target):
            return
        kind = anno.get(stmt, "kind")
        if kind == Kind.UNKNOWN:
            raise self.refusals.no_rule(stmt)
        if kind == Kind.UNPACK:
            return self._unpack_adjoint(stmt, target)
        if target in self.unpacked:
            # `a, b = h`: the parts join h's other contributions (`h[1]`, `np.sum(h)`) as the
            # rows of an array, or the items of a tuple (sparse: `{0: a_bar}`).
            self._gather_unpacked(target)
        if target not in self.defined:
            return  # no contribution reached it: its adjoint is zero
        g = nodes.name(self.bar[target])
        if target in self.hooks:  # the adjoint is complete here: let the user's hook change it
            self._append(nodes.assign(self.bar[target], nodes.call(nodes.name(self.hooks[target]), [g])),
                         self.group)
        # Before this assignment the name held another value, with its own adjoint.
        self.defined.discard(target)
        if kind == Kind.COPY:
            if self._active_name(stmt.value):
                self._accumulate(stmt.value.id, g)
            return
        if kind == Kind.CALL:
            self._call_adjoint(stmt, target, g)
            return
        if kind == Kind.ITEM:
            self._item_adjoint(stmt, g)
            return
        if kind == Kind.AGGREGATE:
            for key, atom in anno.get(stmt, "elements").items():
                if self._active_name(atom):  # (the adjoint may be sparse: only the items read)
                    self._accumulate(atom.id, nodes.call("rt.entry", [nodes.copy(g), nodes.const(key),
                                                                      nodes.name(atom.id)]))
            return
        if kind != Kind.OP:
            return
        if anno.get(stmt, "rule") is registry_lookup(getattr) and not self._plain_field(stmt):
            self._field_adjoint(stmt, target, g)
            return
        if self._object_operator(stmt):
            self._operator_adjoint(stmt, target, g)
            return
        if anno.get(stmt, "rule") is registry_lookup(operator.getitem):
            self.refusals.check_object_getitem(stmt)
        if not _builtin_rule(anno.get(stmt, "rule")) and (self._unpacked_source(target)
                                                          or target in self._indexed_names()):
            # A user's rule of several outputs (a custom adjoint) reads `ans_bar[i]` for each,
            # whether the outputs were unpacked or indexed (`r[0]`: a sparse `{0: g}`): an
            # output nothing used gets zeros of its shape (rt.outputs_adjoint), not None.
            whole = self.core.fresh()
            self._append(nodes.assign(whole, nodes.call("rt.outputs_adjoint", [g, nodes.name(target)])),
                         self.group)
            g = nodes.name(whole)
        self._rule_adjoint(stmt, target, g)

    def _unpack_adjoint(self, stmt, target):
        """``a, b = t`` (here ``target = t[index]``): ``t``'s adjoint is the tuple of the parts'
        adjoints,
        built where ``t`` is defined; in a loop, where ``t`` is another value each iteration,
        each part goes in at once."""
        if target in self.unpacked:
            self._gather_unpacked(target)  # `a, b = p; u, v = a`: a's own parts, first
        source, index = anno.get(stmt, "source"), anno.get(stmt, "index")
        if index in self.unpacked.get(source, ()):
            # `a, b = p` and `u, v = p` again: the parts gathered so far go in first, so
            # the adjoints of both reads of `p[0]` are summed.
            self._gather_unpacked(source)
        if target in self.defined and (self.loop_depth or source in self.lists or source in self.entries_written):
            # (A list the function appends to: its items' adjoints are popped by the
            # appends' adjoints, which come before its definition in the backward sweep.)
            part = gast.Dict(keys=[nodes.const(index)], values=[nodes.name(self.bar[target])])
            if not isinstance(rank_of(nodes.name(source), self.ranks), TreeRank):
                part = nodes.call("rt.unpacked_adjoint", [part, nodes.name(source)])
            self._accumulate(source, part)
            self.defined.discard(target)
        elif target in self.defined:
            self.unpacked.setdefault(source, {})[index] = self.bar[target]
            self.defined.discard(target)

    def _indexed_names(self) -> set:
        """The names read by index (``r[0]``) or iterated (``for v in r``), once per function."""
        if self.indexed is None:
            getitem = registry_lookup(operator.getitem)
            self.indexed = {a.id for s in nodes.statements(self.core.body)
                            if anno.get(s, "rule") is getitem or anno.get(s, "rule") is registry_lookup(runtime.iterated)
                            for a in list((anno.get(s, "bound") or {}).values())[:1] if isinstance(a, gast.Name)}
        return self.indexed

    def _unpacked_source(self, name) -> bool:
        """Whether ``a, b = name`` unpacks ``name`` somewhere in the function."""
        if self.unpacked_sources is None:  # (found once: reverse adds no unpacking)
            self.unpacked_sources = {anno.get(s, "source") for s in nodes.statements(self.core.body)
                                     if anno.has(s, "source")}
        return name in self.unpacked_sources

# The statements whose adjoint is a method of their own, by kind.
_STATEMENT_ADJOINTS = {
    Kind.SETITEM: _Reverse._setitem_adjoint,
    Kind.APPEND: _Reverse._append_adjoint,
    Kind.POP: _Reverse._pop_adjoint,
}
