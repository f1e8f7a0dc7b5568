"""Pass 6 — reverse: the forward sweep and the backward sweep.

Requires: a :class:`~.anf.Core` program, its activity and ranks.
Guarantees: ``forward`` is the core body without its ``return``; ``backward``
holds, in reverse order, each active statement's adjoint instantiated from
its rule.  The adjoint of ``v`` is ``v_bar``; its first contribution assigns,
later ones accumulate (``v_bar = v_bar + ...``), so shared uses sum up.  Every
``wrt`` parameter ends with an adjoint (zeros where the output does not
depend on it).  Every generated statement keeps its user ``group``.

Before/after (active ``h``)::

    h_relu = np.maximum(h, 0)   →   h_bar = h_relu_bar * (h > 0)
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import operator
import re
import textwrap
import types

import gast
import numpy as np

from .. import anno, errors, nodes, runtime, templates
from ..analysis import outside, sharing
from ..analysis.mutation import (_ARGUMENT_WRITERS, _CONTAINER_MUTATORS, _MUTATING_METHODS, _VIEW_FUNCTIONS,
                                 _WRITING_RULES, _changed_defaults, _changed_in_place, _changes_arguments,
                                 _is_srcgrad_grad, _may_return_argument, _mutated_parameters, _target_name,
                                 _writes_into_first, _written_arguments)
from ..analysis.activity import derivative_inputs as activity_inputs
from ..rules.registry import diff_params
from ..rules.registry import label as registry_label
from ..rules.registry import lookup as registry_lookup
from ..rules.registry import is_numpy as registry_is_numpy
from ..analysis.ranks import rank_of
from ..tree import TreeRank
from .anf import parameters


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
    rev = _Reverse(core, activity, ranks, backend)
    rev.free = free or {}
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


_OPERATOR_NAMES = {"Add": "add", "Sub": "sub", "Mult": "mul", "Div": "truediv", "MatMult": "matmul",
                   "Pow": "pow"}


@functools.cache
def _returned_locals(adjoint) -> dict:
    """Template locals a rule returns as-is, by parameter (they take the adjoint's name)."""
    fdef = templates._parse(adjoint)
    found = {}
    for node in nodes.walk(fdef):
        if isinstance(node, gast.Return) and node.value is not None:
            elts = node.value.elts if len(diff_params(adjoint)) > 1 and isinstance(node.value, gast.Tuple) \
                else [node.value]
            for param, elt in zip(diff_params(adjoint), elts):
                if isinstance(elt, gast.Name):
                    found[elt.id] = param
    return found


class _Reverse:
    def __init__(self, core, activity, ranks, backend):
        self.core, self.activity, self.ranks, self.backend = core, activity, ranks, backend
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
        self.memory = None      # which arrays names may refer to (analysis/sharing.py), when needed
        self.taken = {}         # test of an `if` in a loop -> its plain name (`if2_taken`)
        self.stacks = {}        # the stacks created so far (in self.saves): `loop1_stack` -> its name
        self.unpacked_sources = None  # names `a, b = name` unpacks (_unpacked_source), when needed
        self.bound_within = None      # id(compound statement) -> names bound inside it, when needed
        self.stores = None            # which attribute stores something reads back (_kept_apart), when needed
        self.indexed = None           # names read by index or iterated (_indexed_names), when needed
        self.definitions = None       # name -> the statement that assigns it last (_bookkeeping), when needed
        self.local_defs = None        # name -> the first nested `def` of that name (_check_local_def)
        self.active_reads = None      # where active statements read each name (_read_by_backward)
        self.mutated = {}             # id(function called) -> the parameters it changes in place
        self.free = {}                # free name -> its value at compile time (see transform)
        self.writes = outside.Writes()  # what a callee writes into outside its parameters
        self.reaching = None          # id(object) -> names whose value is, or is read through, it
        self.call_results = {s.targets[0].id for s in nodes.statements(core.body)
                             if anno.get(s, "kind") == "call" and isinstance(s, gast.Assign)
                             and isinstance(s.targets[0], gast.Name)}
        changes = {s: anno.get(s, "kind") for s in nodes.statements(core.body)
                   if anno.get(s, "kind") in ("append", "pop", "item")}
        # Lists changed in place: their adjoint is a list of adjoints, one per item.
        self.lists = {anno.get(s, "list") for s in changes}
        # Lists and dicts whose items are written (`hs[t] = h`, known when the code runs):
        # an item unpacked from one (`a, b = hs`) gives its adjoint at once, where the
        # writes' adjoints, before the definition in the backward sweep, read it.
        self.entries_written = {anno.get(s, "array") for s in nodes.statements(core.body)
                                if anno.get(s, "kind") == "setitem" and anno.get(s, "generic")}
        # Lists that pop changes, or whose items are read (`xs[i]`): the backward sweep
        # puts them back as they were at each point, so an adjoint that starts there
        # (`rt.zeros_each`) has their length then, and `xs_bar[i]` is `xs[i]`'s.
        self.popped = {anno.get(s, "list") for s, kind in changes.items() if kind in ("pop", "item")}

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
        if any(anno.get(s, "kind") in ("setattr", "setentry", "call") for s in nodes.statements(forward)):
            # (read before the sweep rewrites a statement: an operator dispatched when it runs
            # becomes a call then, which must not change what the stores before it see)
            self.stores = _StoresReadBack(self.core.body)
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
                                     if anno.get(s, "kind") == "copy" and isinstance(s.value, gast.Name)
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

    # ---- blocks -----------------------------------------------------------
    def _reverse_block(self, stmts):
        for stmt in reversed(list(stmts)):
            self.group = anno.get(stmt, "group")
            if self.unpacked and isinstance(stmt, (gast.If, gast.For, gast.While)):
                # `a, b = t` after a block that binds `t` (on each branch, in a loop): the
                # parts go in now, so every path that defines `t` gets them.
                inside = self._bound_within(stmt)
                for source in sorted(s for s in self.unpacked if s in inside):
                    self._gather_unpacked(source)
            if isinstance(stmt, gast.If):
                self._if(stmt)
            elif isinstance(stmt, (gast.For, gast.While)):
                self._loop(stmt, stmts)
            else:
                self._adjoint(stmt)

    def _bound_within(self, block) -> set:
        """The names the statements inside compound statement ``block`` bind (a table of
        every block, made at the first question: one walk of the function)."""
        if self.bound_within is None:
            self.bound_within = {}

            def visit(stmts, enclosing):
                for stmt in stmts:
                    for name in nodes.assigned_names(stmt):
                        for outer in enclosing:
                            outer.add(name)
                    if isinstance(stmt, (gast.If, gast.For, gast.While)):
                        own = self.bound_within[id(stmt)] = set()
                        visit(stmt.body, enclosing + [own])
                        visit(stmt.orelse, enclosing + [own])
            visit(self.core.body, [])
        return self.bound_within.get(id(block), set())

    def _in_new_block(self, stmts):
        saved, self.out = self.out, []
        pending, self.unpacked = self.unpacked, {}
        self._reverse_block(stmts)
        # Parts unpacked in this block (a branch, a loop body) exist on its path only: they
        # go in here; those from after the block wait for the source's definition.
        for source in sorted(self.unpacked):
            self._gather_unpacked(source)
        self.unpacked = pending
        block, self.out = self.out, saved
        return block

    def _if(self, stmt):
        """Reverse of ``if c: A else: B`` is ``if c: reverse(A) else: reverse(B)``; an
        adjoint that only one branch starts is started as zeros in the other."""
        group, before = self.group, set(self.defined)
        if self.loop_depth and isinstance(stmt.test, gast.Name) and stmt.test.id.startswith("_t") \
                and not self.activity.active(stmt.test.id):  # (`a or b`'s test may be its value too)
            # Each iteration's decision is saved for the backward sweep: give it a plain name.
            taken = self.core.fresh(f"if{self.if_numbers[id(stmt)]}_taken")
            self.taken[stmt.test.id] = taken  # renamed at the end, in one walk of the code
            self.notes.append((taken, self._where(stmt)))
        body = self._in_new_block(stmt.body)
        after_body, self.defined = self.defined, set(before)
        orelse = self._in_new_block(stmt.orelse)
        after_else = self.defined
        self.group = group
        for var in sorted(after_body - after_else):
            orelse.append(self._branch_zeros(var))
        for var in sorted(after_else - after_body):
            body.append(self._branch_zeros(var))
        self.defined = after_body | after_else
        if self.loop_depth:
            # A branch's own values exist only when it ran: it saves them itself.
            stack = f"if{self.if_numbers[id(stmt)]}_stack"
            for forward_branch, backward_branch in ((stmt.body, body), (stmt.orelse, orelse)):
                candidates = _definite(forward_branch)
                self._save(stack, stmt, forward_branch, len(forward_branch), backward_branch, candidates)
        if body or orelse:
            node = gast.If(test=nodes.copy(stmt.test), body=body or [gast.Pass()], orelse=orelse)
            self._append(node, group)

    def _loop(self, stmt, parent):
        """Reverse of a loop: the same number of iterations, last first.

        Adjoints of names from outside the body accumulate across iterations (so
        they start as zeros before the loop).  Each forward iteration pushes the
        values its adjoint reads onto a stack; each backward iteration pops them.
        """
        group, k = self.group, self.loop_numbers[id(stmt)]
        # Also a name only a nested loop updates: its adjoint, too, lives across iterations.
        carried = set(anno.get(stmt, "carried"))
        local = {n for s in nodes.statements(stmt.body) for n in nodes.assigned_names(s)} - carried
        reads = set(carried)
        for s in nodes.statements(stmt.body):
            if isinstance(s, gast.Assign) and s.targets[0].__class__ is gast.Name \
                    and self.activity.active(s.targets[0].id):
                reads.update(activity_inputs(s))
            elif anno.get(s, "kind") in ("setitem", "append") \
                    and self.activity.active(anno.get(s, "array") or anno.get(s, "list")):
                # `y[i] = v`, `xs.append(v)`: each iteration's write adds to v's adjoint.
                reads.update(activity_inputs(s))
        for var in sorted(reads - local):
            if self.activity.active(var) and var not in self.defined:
                self.out.append(self._zeros(var))
                self.defined.add(var)
        # A name the body binds that is not carried is read after the loop by no one: an
        # adjoint it has here is a later binding's (`for b in bs:` after the loop, which
        # zeroed it), not this loop's last iteration's.  Each iteration's starts afresh.
        self.defined -= local
        first_defined = set(anno.get(stmt, "first_defined", ()))
        # A name first bound by the loop has no entry value on the first iteration (and
        # the value it has on entry to the others may have another shape each time).
        enclosing, self.first_bound = self.first_bound, self.first_bound | first_defined
        self.loop_depth += 1
        body = self._in_new_block(stmt.body)
        self.loop_depth -= 1
        self.first_bound = enclosing
        self.group = group
        # A name an enclosing loop binds first may be unbound when this loop starts (in
        # the enclosing loop's first iteration): bound to None first, saved like the rest.
        maybe_unbound = (carried - first_defined) & self.core.maybe_unbound
        self.prebound |= maybe_unbound
        for var in sorted(carried):
            if self.activity.active(var) and var not in self.defined:
                body.append(self._branch_zeros(var) if var in maybe_unbound | first_defined else
                            self._zeros(var))
                self.defined.add(var)
        self.defined -= local
        if isinstance(stmt, gast.While):
            trips = self.core.fresh(f"loop{k}_trips")
            self.notes.append((trips, self._where(stmt)))
            init = nodes.assign(trips, nodes.const(0))
            anno.set(init, "group", group)
            parent.insert(_index(parent, stmt), init)
            count = nodes.assign(trips, nodes.binop(nodes.name(trips), "+", nodes.const(1)))
            anno.set(count, "group", group)
            stmt.body.insert(_carry_position(stmt.body), count)
            header = nodes.call("range", [nodes.name(trips)])
            target = nodes.name(self.core.fresh("_"), "store")
        else:
            header = _reversed_iteration(stmt.iter)
            target = nodes.copy(stmt.target)
        carried_before = carried - first_defined  # restored: after the backward loop they
        # must hold their values from before the forward loop
        index = {stmt.target.id} if isinstance(stmt, gast.For) else set()
        candidates = (_definite(stmt.body) | carried_before) - index
        # Each iteration pushes the values its backward iteration reads as they were on
        # entry; a name the loop binds first has none on the first: bound to None first.
        self.prebound |= {n for s in body for n in nodes.loaded_names(s)} & candidates & first_defined
        self._save(f"loop{k}_stack", stmt, stmt.body, _carry_position(stmt.body), body, candidates,
                   always=carried_before)
        if body:
            node = gast.For(target=target, iter=header, body=body, orelse=[], type_comment=None)
            self._append(node, group)

    def _save(self, stack, owner, forward_block, position, backward_block, candidates, always=()):
        """Push, at ``position`` in a forward block, the ``candidates`` that the matching
        backward block reads; pop them at the top of the backward block.
        ``optimize.prune_saves`` later drops what the optimized code does not read."""
        loaded = {n for s in backward_block for n in nodes.loaded_names(s)}
        needed = sorted((loaded & candidates) | set(always), key=lambda n: self.taken.get(n, n))
        if not needed:
            return
        self.save_ids += 1
        if stack not in self.stacks:  # (a fresh name: a user's own `loop1_stack` keeps its name)
            self.stacks[stack] = name = self.core.fresh(stack)
            create = nodes.assign(name, gast.List(elts=[], ctx=gast.Load()))
            anno.set(create, "impure", True)
            anno.set(create, "stack", name)
            self.saves.append(create)
            self.notes.append((name, self._where(owner)))
        stack = self.stacks[stack]
        values = nodes.tuple_([nodes.name(n) for n in needed]) if len(needed) > 1 else nodes.name(needed[0])
        push = gast.Expr(value=nodes.call(gast.Attribute(value=nodes.name(stack), attr="append",
                                                         ctx=gast.Load()), [values]))
        targets = nodes.tuple_([nodes.name(n, "store") for n in needed], "store") if len(needed) > 1 \
            else nodes.name(needed[0], "store")
        pop = nodes.assign(targets, nodes.call(gast.Attribute(value=nodes.name(stack), attr="pop",
                                                              ctx=gast.Load())))
        for stmt in (push, pop):
            anno.set(stmt, "group", anno.get(owner, "group"))
            anno.set(stmt, "stack", stack)
            anno.set(stmt, "save_id", self.save_ids)
        anno.set(pop, "impure", True)
        forward_block.insert(position, push)
        backward_block.insert(0, pop)

    @staticmethod
    def _where(stmt):
        group = anno.get(stmt, "group")
        return group.where if group is not None else "?"

    def _adjoint(self, stmt):
        """The adjoint of one statement of the forward sweep, appended to the backward sweep, after
        the checks that refuse what cannot be followed; the statement's kind picks the method
        (``_STATEMENT_ADJOINTS``; an assignment of a value, ``_value_adjoint``)."""
        self._check_writer(stmt)
        self._check_mutating_method(stmt)
        if anno.get(stmt, "kind") == "op" and anno.get(stmt, "rule") is registry_lookup(getattr) \
                and isinstance(stmt.value, gast.Attribute) and isinstance(stmt.value.value, gast.Name):
            if self.stores is None:
                self.stores = _StoresReadBack(self.core.body)
            target = stmt.targets[0].id if isinstance(stmt.targets[0], gast.Name) else None
            if self.stores.after_call(stmt) or templates.static_value(anno.get(stmt, "bound")["name"]) \
                    in self.stores.kept_names and target in self.activity.useful:
                # A call before it (or an earlier call of this function: state it keeps, read in
                # the next call) may have stored the field as bookkeeping (no adjoint).
                origin = anno.get(stmt, "origin")
                keys = self.stores.keys_read(target, self.activity.useful)
                stmt.value = nodes.call("rt.field", [stmt.value.value, nodes.const(stmt.value.attr),
                                                     nodes.const(origin.where if origin else "?")]
                                        + ([nodes.const(tuple(sorted(keys, key=repr)))] if keys is not None else []))
        kind = anno.get(stmt, "kind")
        if anno.get(stmt, "manager"):
            return self._check_manager(stmt)
        if isinstance(stmt, gast.Expr) and kind in ("unknown", "nondiff"):
            return self._check_discarded_call(stmt)
        if anno.has(stmt, "constructs"):
            return self._check_construction(stmt)
        self._check_container_builtin(stmt)
        if kind == "call":
            self._check_local_def(stmt)
            if isinstance(stmt.value, gast.Call) and self._checked_call(stmt) or isinstance(stmt, gast.Expr):
                return
        adjoint = _STATEMENT_ADJOINTS.get(kind)
        if adjoint is not None:
            return adjoint(self, stmt)
        if isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name):
            self._value_adjoint(stmt)

    def _check_manager(self, stmt):
        """A ``with`` block's manager runs in the forward sweep only: refused where it is given, or gives,
        a value being differentiated."""
        varied = [n for n in nodes.loaded_names(stmt) if n in self.activity.varied]
        if varied:
            raise errors.at(stmt.value, "this `with` block's context manager is given, or gives, a "
                            "value being differentiated: srcgrad runs the manager in the forward "
                            "sweep only and does not differentiate through it",
                            "give the manager constants only and compute with the differentiated "
                            "values in the block's body", kind=errors.UnsupportedSyntaxError)

    def _check_discarded_call(self, stmt):
        """A call whose result is not used, given a value being differentiated: refused where it may change
        it in place."""
        rule = anno.get(stmt, "rule")
        # Varied, not active: what the call does to its argument is invisible to activity.
        active = [n for n in nodes.loaded_names(stmt.value) if n in self.activity.varied]
        fn = anno.get(stmt, "callee") or (anno.get(stmt.value.func, "resolved")
                                          if isinstance(stmt.value, gast.Call) else None)
        if _writes_into_first(fn) or rule is not None and rule.name in _WRITING_RULES:
            # Also an array the backward sweep reads (`v = y.T` used before `np.copyto(y, 0)`).
            active += self._read_by_backward(nodes.loaded_names(stmt.value.args[0])
                                             if stmt.value.args else [], stmt)
        if active and not (rule is not None and rule.name in _READS_ONLY):
            raise errors.at(stmt.value, f"a call whose result is not used, given `{active[0]}`, "
                            "which is being differentiated (or read by the backward sweep): if it "
                            "changes its argument in place, "
                            "srcgrad cannot follow the change",
                            "write the update as an assignment (`y[idx] = v`, `y = y + v`; `np.add.at(y, "
                            "idx, x)` of a name is followed), or assign the call's result",
                            kind=errors.UnsupportedSyntaxError)
        if anno.get(stmt, "kind") == "unknown" and fn is not None and not registry_is_numpy(fn):
            # A callable without a rule (a functools.partial, a callable object): what it
            # writes into outside its arguments is checked as a function's is.
            self._check_outside_writes(stmt, fn)

    def _check_construction(self, stmt):
        """``Cls(...)`` given a value being differentiated: refused (a value stored in a new object is not
        followed)."""
        varied = [n for n in nodes.loaded_names(stmt.value) if n in self.activity.varied]
        if varied:
            cls = anno.get(stmt, "constructs").__name__
            raise errors.at(stmt.value, f"`{cls}(...)` is given `{varied[0]}`, which is being "
                            "differentiated: srcgrad does not follow values stored in a new object",
                            f"create the object outside the function and pass it in (and "
                            f"differentiate with respect to it), or pass `{varied[0]}` to its methods")

    def _check_container_builtin(self, stmt):
        """``map(...)``, ``zip(...)``, ``list(...)`` run as they are: refused where given a value being
        differentiated."""
        rule = anno.get(stmt, "rule")
        if anno.get(stmt, "kind") == "nondiff" and rule is not None and rule.name in _CONTAINERS:
            varied = [n for n in nodes.loaded_names(stmt.value) if n in self.activity.varied]
            if varied:
                kind = rule.name.split(".")[1]
                given = "a value" if varied[0].startswith("_") else f"`{varied[0]}`"
                iterator = kind in ("map", "filter", "zip", "enumerate", "reversed")
                raise errors.at(stmt.value, f"`{kind}(...)` is given {given}, which is being "
                                f"differentiated: srcgrad does not follow values through `{kind}(...)`"
                                + (" kept as an iterator (read lazily, once)" if iterator else ""),
                                f"read it whole where it is made (`list({kind}(...))`, `sum({kind}(...))`), "
                                "or write a list comprehension (`[f(v) for v in xs]`)" if iterator else
                                "use the value itself, index it, or build the new one with a display of "
                                "its items (`[xs[0], xs[1]]`, `{'a': d['a']}`)",
                                kind=errors.UnsupportedSyntaxError)

    def _checked_call(self, stmt):
        """The checks of a call the forward sweep makes, its result used or not (``h = f(y)`` as much as
        ``f(y)``): a change it makes to ``y`` is invisible to the caller's adjoints.  True where the
        call is bookkeeping, done with."""
        # Whether or not its result is used (`h = f(y)` as much as `f(y)`): the change
        # it makes to `y` is invisible to the caller's adjoints.
        fn = anno.get(stmt.value.func, "resolved")
        # (also when the argument it changes is not differentiated: it may store one that is)
        given = [n for a in stmt.value.args + [k.value for k in stmt.value.keywords]
                 for n in nodes.loaded_names(a)]
        varied = [n for n in given if n in self.activity.varied]
        method = stmt.value.func.attr if isinstance(stmt.value.func, gast.Attribute) else None
        if method in _CONTAINER_MUTATORS and self._user_object(anno.get(stmt, "receiver")):
            method = None  # (`opt.update(w, g)` on an optimizer of the user's: a method like any other)
        if varied and fn is None and method in _CONTAINER_MUTATORS and self._grown_apart(stmt):
            return True  # (bookkeeping: a cache on the object grows by the value, with no adjoint)
        if varied and fn is None and self.stores is not None and self.stores.grows(stmt) is not None:
            attr = self.stores.grows(stmt)[1]
            raise errors.at(stmt.value, f"`.{method}(...)` grows the `.{attr}` an object holds by a value "
                            f"being differentiated, and `.{attr}` (or a call that may read it) is read "
                            "after it: srcgrad keeps what a call adds to an object's state as "
                            "bookkeeping, with no adjoint, so a gradient through that read would be lost",
                            self.stores.advice(stmt, attr), kind=errors.UnsupportedSyntaxError)
        if varied and fn is None and method in _CONTAINER_MUTATORS:
            # `obj.items.append(h)`, `ys[i].append(h)`: a list or dict that normalize does
            # not track (not made here, or reached through a key known only at run time).
            given = "a value" if varied[0].startswith("_") else f"`{varied[0]}`"
            raise errors.at(stmt.value, f"`.{method}(...)` is given {given}, which is being "
                            "differentiated, on a list or dict that srcgrad does not follow "
                            "(only one made in this function and named, or held in a tuple, list or "
                            "dict made here under a literal key)",
                            "build the list in a local name (`hs = []`, `hs.append(h)`) and use it "
                            "from there, or return it (with has_aux=True)",
                            kind=errors.UnsupportedSyntaxError)
        varied += self._read_by_backward([n for n in given if n not in varied], stmt)
        if varied and fn is not None and not runtime.is_gradient_function(fn) \
                and self._mutated_parameters(fn):  # (a gradient function is refused as such below)
            given = "a value" if varied[0].startswith("_") else f"`{varied[0]}`"
            callee = nodes.to_source(stmt.value.func)
            defaults = _changed_defaults(fn, stmt.value)
            if defaults:
                raise errors.at(stmt.value, f"`{callee}` changes its parameter `{defaults[0]}` in place, "
                                f"and this call leaves it its default (a {defaults[1]}): one value that every "
                                "call shares and keeps, which srcgrad cannot follow (this call is given "
                                f"{given}, which is being differentiated)",
                                f"in `{callee}`, default `{defaults[0]}` to None and make the value inside "
                                f"(`if {defaults[0]} is None: {defaults[0]} = []`), or pass it in and "
                                "return the new value", kind=errors.UnsupportedSyntaxError)
            raise errors.at(stmt.value, f"`{callee}` changes its arguments in "
                            f"place, and is given {given}, which is being differentiated (or read "
                            "by the backward sweep): srcgrad cannot follow a change made inside "
                            "another function",
                            f"in `{callee}`, write into a copy (`y = np.copy(y)`) and return the "
                            f"new value, and assign it here (`y = {callee}(...)`)",
                            kind=errors.UnsupportedSyntaxError)
        receiver, call = anno.get(stmt, "receiver"), stmt.value
        target = _target_name(stmt)
        given_varied = [n for n in given if n in self.activity.varied]
        if given_varied and fn is not None and not runtime.is_gradient_function(fn) \
                and (target is None or not self.activity.active(target)):
            kept = outside.stores(fn)  # (a differentiated result: its own compilation refuses it)
            if kept:
                raise errors.at(stmt.value, *outside.stores_refusal(self._shown(nodes.to_source(stmt.value.func)),
                                                            given_varied[0], kept),
                                kind=errors.UnsupportedSyntaxError)
        called = isinstance(call.func, gast.Name) and call.func.id in self.activity.varied
        if isinstance(stmt, gast.Expr) and (called or isinstance(receiver, gast.Name)
                                            and receiver.id in self.activity.varied
                                            and isinstance(call.func, gast.Attribute)):
            # `model.reset()`, `model(x)`: run as written, but a float field it replaces or
            # adds is refused (a later read would carry no adjoint, or send it to the
            # parameter it replaced).
            origin = anno.get(stmt, "origin")
            obj, name = (call.func, "__call__") if called else (call.func.value, call.func.attr)
            stmt.value = nodes.call("rt.keeping_fields", [
                nodes.copy(obj), nodes.const(name),
                nodes.const(origin.where if origin else "?")] + call.args,
                [(k.arg, k.value) for k in call.keywords])
        elif varied and fn is None and (target is None or not self.activity.active(target)):
            # Known only at run time (a method): check it there, at the user's line (its
            # pullback, if its result were differentiated, would refuse such writes itself).
            origin = anno.get(stmt, "origin")
            if origin is not None:
                stmt.value.func = nodes.call("dispatch.unchanging", [stmt.value.func] + [
                    nodes.const(v) for v in (origin.filename, origin.line, origin.col, origin.text)])
        self._check_outside_writes(stmt, fn)
        return False

    def _attribute_store(self, stmt):
        """``obj.name = v``: bookkeeping nothing reads back (``rt.kept``); refused where a value being
        differentiated is read back; checked (``rt.stored``) on an object being differentiated."""
        value = anno.get(stmt, "value")
        if self._kept_apart(stmt):
            # `self.cache = x`, `self.running_mean = ...`: bookkeeping nothing in this call
            # reads back (normalize gave reads after it in its block the value itself): run
            # as written, the value stored as it is, with no adjoint (as under no_grad).
            # `rt.kept` records it, so that a later call reading it back is refused.
            target, origin = stmt.targets[0], anno.get(stmt, "origin")
            if isinstance(value, gast.Name) and value.id in self.activity.varied:
                stmt.value = nodes.call("rt.kept", [nodes.copy(target.value), nodes.const(target.attr),
                                                    stmt.value, nodes.const(origin.where if origin else "?")])
            return
        if isinstance(value, gast.Name) and value.id in self.activity.varied \
                and not self._bookkeeping(value.id):
            raise errors.at(stmt, f"storing a value that is being differentiated in the attribute "
                            f"`{nodes.to_source(stmt.targets[0])}` is not supported: srcgrad cannot "
                            "follow it from there",
                            "return it (with has_aux=True), or keep it in a local name")
        target = stmt.targets[0]
        if isinstance(target.value, gast.Name) and target.value.id in self.activity.varied:
            # An object being differentiated: a float stored in it now would be read
            # later with its adjoint going to the parameter it replaced. Counters pass.
            origin = anno.get(stmt, "origin")
            stmt.value = nodes.call("rt.stored", [stmt.value, nodes.const(target.attr),
                                                  nodes.const(origin.where if origin else "?"),
                                                  nodes.copy(target.value)])

    def _nested_def_adjoint(self, stmt):
        """A nested ``def`` or lambda: refused where it reads a value being differentiated and is used
        other than by calling it."""
        active = [n for n in anno.get(stmt, "captures") if self.activity.active(n)]
        if active and self.activity.active(stmt.name):
            lam = anno.get(stmt, "lambda", False)
            read = anno.get(stmt, "captured_as", {}).get(active[0], active[0])
            kind = "lambda" if lam else "nested function"
            raise errors.at(stmt, f"{'this lambda' if lam else f'the nested function `{stmt.name}`'} "
                            f"reads `{read}`, which depends on the inputs being differentiated, and is "
                            "used other than by calling it (returned, stored, passed on) or calls itself: "
                            f"srcgrad passes what a {kind} reads as arguments only where it is just called",
                            f"pass `{read}` to the lambda where it is called (a parameter without a "
                            "default)" if lam else f"pass `{read}` to `{stmt.name}` as an argument")

    def _value_adjoint(self, stmt):
        """``target = value``: the adjoint of the value, by its kind (a copy, a call, an item, an
        aggregate, an unpacking, a rule's)."""
        if not isinstance(stmt, gast.Assign) or not isinstance(stmt.targets[0], gast.Name):
            return
        target = stmt.targets[0].id
        if target in self.activity.useful:
            self._check_underived(stmt)
        if not self.activity.active(target):
            return
        kind = anno.get(stmt, "kind")
        if kind == "unknown":
            raise self._no_rule(stmt)
        if kind == "unpack":
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
        if kind == "copy":
            if self._active_name(stmt.value):
                self._accumulate(stmt.value.id, g)
            return
        if kind == "call":
            self._call_adjoint(stmt, target, g)
            return
        if kind == "item":
            self._item_adjoint(stmt, g)
            return
        if kind == "aggregate":
            for key, atom in anno.get(stmt, "elements").items():
                if self._active_name(atom):  # (the adjoint may be sparse: only the items read)
                    self._accumulate(atom.id, nodes.call("rt.entry", [nodes.copy(g), nodes.const(key),
                                                                      nodes.name(atom.id)]))
            return
        if kind != "op":
            return
        if anno.get(stmt, "rule") is registry_lookup(getattr) and not self._plain_field(stmt):
            self._field_adjoint(stmt, target, g)
            return
        if self._object_operator(stmt):
            self._operator_adjoint(stmt, target, g)
            return
        if anno.get(stmt, "rule") is registry_lookup(operator.getitem):
            self._check_object_getitem(stmt)
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

    def _check_object_getitem(self, stmt):
        """``obj[i]`` of an object being differentiated runs its class's ``__getitem__``, which
        srcgrad does not follow (an adjoint keyed by ``i`` would match no field): refused."""
        base = anno.get(stmt, "bound")["a"]
        rank = rank_of(base, self.ranks)
        key = templates.static_value(anno.get(stmt, "bound")["index"])
        # (Entries all integers: a list or tuple held in an object, flattened by position.)
        if isinstance(rank, TreeRank) and rank.kind == "object" \
                and not all(isinstance(entry, int) for entry, _ in rank) \
                and not any(entry == key for entry, _ in rank):
            # `obj[i]` runs the class's own __getitem__, which srcgrad does not follow:
            # an adjoint keyed by `i` would match no field and be dropped.
            shown = self._user_spelling(base)
            if key is templates.UNKNOWN:
                index = nodes.to_source(anno.get(stmt, "bound")["index"])
                raise errors.at(stmt.value, f"indexing `{shown}`, which holds values being differentiated, "
                                f"with a key known only when the code runs (`{index}`): srcgrad must "
                                "know which entry is read when it compiles (and does not differentiate "
                                "a class's own `__getitem__`)", f"index it with a literal key "
                                f"(`{shown}['a']`), keep each entry in an attribute of its own "
                                "(`self.a(x)`), or call a method that does the same (`obj.item(i)`)",
                                kind=errors.UnsupportedSyntaxError)
            raise errors.at(stmt.value, f"indexing `{shown}`, an object being "
                            "differentiated, runs its class's `__getitem__`, which srcgrad does not "
                            "differentiate", "index the list or array it holds (`obj.layers[i]`, `obj.c[i]`; "
                            "for a slice of an `nn.Sequential`, call its layers in a loop: `for layer in "
                            "obj.layers[:-1]: x = layer(x)`), or call a method that does the same (`obj.item(i)`)",
                            kind=errors.UnsupportedSyntaxError)

    def _indexed_names(self) -> set:
        """The names read by index (``r[0]``) or iterated (``for v in r``), once per function."""
        if self.indexed is None:
            getitem = registry_lookup(operator.getitem)
            self.indexed = {a.id for s in nodes.statements(self.core.body)
                            if anno.get(s, "rule") is getitem or anno.get(s, "rule") is registry_lookup(runtime.iterated)
                            for a in list((anno.get(s, "bound") or {}).values())[:1] if isinstance(a, gast.Name)}
        return self.indexed

    def _user_spelling(self, atom) -> str:
        """How the user wrote ``atom``: a temporary (``_t1``) is shown as the value it holds
        (``self.d``).  (Error messages only: it searches the function.)"""
        if not (isinstance(atom, gast.Name) and atom.id.startswith("_")):
            return nodes.to_source(atom)
        for stmt in nodes.statements(self.core.body):
            if isinstance(stmt, gast.Assign) and nodes.assigned_names(stmt) == [atom.id]:
                bound = anno.get(stmt, "bound") or {}
                if anno.get(stmt, "rule") is registry_lookup(getattr) and "name" in bound:
                    name = templates.static_value(bound["name"])
                    if isinstance(name, str):
                        return f"{self._user_spelling(bound.get('obj', stmt.value))}.{name}"
                return nodes.to_source(stmt.value)
        return "this value"

    def _unpacked_source(self, name) -> bool:
        """Whether ``a, b = name`` unpacks ``name`` somewhere in the function."""
        if self.unpacked_sources is None:  # (found once: reverse adds no unpacking)
            self.unpacked_sources = {anno.get(s, "source") for s in nodes.statements(self.core.body)
                                     if anno.has(s, "source")}
        return name in self.unpacked_sources

    def _object_operator(self, stmt) -> bool:
        """``a * b`` where an operand being differentiated may be an object of a class
        of the user's (its rank unknown, or an object's): its ``__mul__`` decides."""
        value = stmt.value
        unknown = anno.get(stmt, "maybe_object", ())
        if not unknown:
            return False
        if not (isinstance(value, gast.BinOp) and type(value.op).__name__ in _OPERATOR_NAMES
                or isinstance(value, gast.UnaryOp) and type(value.op).__name__ in ("USub", "UAdd")):
            return False
        operands = [value.left, value.right] if isinstance(value, gast.BinOp) else [value.operand]
        for atom in operands:
            rank = rank_of(atom, self.ranks)
            if isinstance(atom, gast.Name) and atom.id in unknown and not isinstance(rank, int) and not (
                    isinstance(rank, TreeRank) and rank.kind != "object"):
                return True
        return False

    def _operator_adjoint(self, stmt, target, g):
        """The operator dispatched when it runs (``dispatch.vjp_operator``), as a method call."""
        value = stmt.value
        operands = [value.left, value.right] if isinstance(value, gast.BinOp) else [value.operand]
        name = _OPERATOR_NAMES[type(value.op).__name__] if isinstance(value, gast.BinOp) else \
            {"USub": "neg", "UAdd": "pos"}[type(value.op).__name__]
        for key, item in (("kind", "call"), ("receiver", None), ("args", operands), ("kwargs", {}),
                          ("operator", name), ("impure", True)):
            anno.set(stmt, key, item)
        self._call_adjoint(stmt, target, g)

    def _plain_field(self, stmt) -> bool:
        """``obj.name`` reads a parameter stored in ``obj`` (known from the structure
        ``obj`` was specialised on), not a property computed from them."""
        bound = anno.get(stmt, "bound")
        rank, name = rank_of(bound["obj"], self.ranks), templates.static_value(bound["name"])
        return isinstance(rank, TreeRank) and any(key == name for key, _ in rank)

    def _field_adjoint(self, stmt, target, g):
        """``y = obj.name`` where ``name`` may be a property: ``dispatch.vjp_field`` runs the
        getter's own reverse mode (or reads a plain field), as for a method call."""
        bound = anno.get(stmt, "bound")
        for key, value in (("kind", "call"), ("receiver", bound["obj"]), ("args", []), ("kwargs", {}),
                           ("field", (bound["obj"], bound["name"])), ("impure", True)):
            anno.set(stmt, key, value)
        self._call_adjoint(stmt, target, g)


    def _check_mutating_method(self, stmt):
        """``y.sort()``, ``y.fill(0)``, ``G.A.__setitem__(0, v)`` on an array whose kind was
        unknown when compiling (a global read where the source reads it): refused where the
        backward sweep reads that array, as ``np.copyto(y, v)`` is (``_check_writer``)."""
        value = getattr(stmt, "value", None)
        if not isinstance(stmt, (gast.Assign, gast.Expr)) or not isinstance(value, gast.Call) \
                or not isinstance(value.func, gast.Attribute) \
                or value.func.attr not in _MUTATING_METHODS - _CONTAINER_MUTATORS:
            return
        names = nodes.loaded_names(value.func.value)
        read = [n for n in names if n in self.activity.varied] + self._read_by_backward(names, stmt)
        if read:
            raise errors.at(value, f"`.{value.func.attr}(...)` changes an array in place that is being "
                            "differentiated or read by the backward sweep: srcgrad cannot follow the change",
                            "make the new array with an assignment (`y = np.sort(y)`, `y = np.full_like(y, v)`), "
                            "or work on a copy (`y = np.copy(y)` first)", kind=errors.UnsupportedSyntaxError)

    def _check_writer(self, stmt):
        """Refuse a call that writes into an array given to it (``np.fill_diagonal(y, 0)``,
        ``np.add.at(y, i, v)``, ``rng.shuffle(y)``, ``np.exp(v, out=y)``) where that array is
        being differentiated or read by the backward sweep, wherever the call is: its result
        assigned (``_ = np.copyto(y, v)``), printed or tested as much as discarded."""
        value = getattr(stmt, "value", None)
        if not isinstance(stmt, (gast.Assign, gast.Expr)) or not isinstance(value, gast.Call):
            return
        written = _written_arguments(value, anno.get(stmt, "callee") or anno.get(value.func, "resolved"),
                                     anno.get(stmt, "rule"))
        names = [n for a in written for n in nodes.loaded_names(a)]
        varied = [n for n in names if n in self.activity.varied]
        varied += self._read_by_backward([n for n in names if n not in varied], stmt)
        # A differentiated value written into another array (`np.copyto(c, x * 2)`): its
        # adjoint would be lost.
        given_in = [n for a in value.args + [k.value for k in value.keywords] for n in nodes.loaded_names(a)
                    if n in self.activity.varied] if written else []
        if not given_in and not varied:
            return
        callee = nodes.to_source(value.func)
        if isinstance(value.func, gast.Attribute) and nodes.to_source(value.func.value).startswith("_"):
            callee = f".{value.func.attr}"  # (`np.random.default_rng(0).shuffle`: a temporary)
        if given_in and not varied:
            given = "a value" if given_in[0].startswith("_") else f"`{given_in[0]}`"
            raise errors.at(value, f"`{callee}(...)` writes {given}, which is being differentiated, into "
                            "an array in place: srcgrad cannot follow the change",
                            "make the new array with an assignment (`c = x * 2`, `c[idx] = v`; "
                            "`np.add.at(y, idx, x)` of a name is followed)",
                            kind=errors.UnsupportedSyntaxError)
        if varied:
            shown = self._shown(varied[0])  # (`G`, where the code reads `model.G` into `_t1`)
            given = "a value" if shown.startswith("_") else f"`{shown}`"
            raise errors.at(value, f"`{callee}(...)` changes {given} in place, which is being "
                            "differentiated (or read by the backward sweep): srcgrad cannot follow "
                            "the change", "write the update as an assignment (`y[idx] = v`, `y = y + v`; "
                            "`np.add.at(y, idx, x)` of a name is followed), or work on a copy "
                            "(`y = np.copy(y)` first)", kind=errors.UnsupportedSyntaxError)

    def _check_outside_writes(self, stmt, fn):
        """A call that writes, in place, into an array it is not given (a global, a class
        attribute, what a global dict holds, its receiver's), which the backward sweep
        may read after it: refused at the call.  Known when compiling: through
        ``analysis/outside.py``; a method known only at run time (``buf.bump()``) whose
        receiver, or a value read through a free name, the backward sweep reads: checked
        there (``dispatch.unchanging(..., outside=True)``)."""
        call = stmt.value
        if not isinstance(call, gast.Call):
            return
        if fn is None:
            func = call.func
            target = _target_name(stmt)
            if not isinstance(func, (gast.Attribute, gast.Name)) or nodes.to_source(func).startswith("rt.") \
                    or target is not None and self.activity.active(target):
                # (`rt.keeping_fields` checks the fields of an object being differentiated; a
                # result differentiated: `dispatch.vjp_call` compiles the method on its own;
                # a name: a function given as an argument, known only when it runs)
                return
            watched = nodes.loaded_names(func) + sorted(
                {n for names in self._reaching_names().values() for n in names})
            if not self._read_by_backward(watched, stmt):
                return
            origin = anno.get(stmt, "origin")
            if origin is None:
                return
            checked = isinstance(func, gast.Call) and nodes.to_source(func.func) == "dispatch.unchanging"
            if not checked:
                call.func = func = nodes.call("dispatch.unchanging", [func] + [
                    nodes.const(v) for v in (origin.filename, origin.line, origin.col, origin.text)])
            func.keywords.append(gast.keyword(arg="outside", value=nodes.const(True if checked else "only")))
            return
        if runtime.is_gradient_function(fn):
            return
        reaching = self._reaching_names()
        for what, obj in self.writes(fn):
            read = self._read_by_backward(sorted(reaching.get(id(obj), ())), stmt)
            if not read:
                continue
            callee = self._shown(nodes.to_source(call.func))
            if isinstance(fn, types.MethodType) and fn.__func__.__code__.co_argcount \
                    and isinstance(call.func, gast.Attribute):
                own = fn.__func__.__code__.co_varnames[0]
                if what.split(".")[0].split("[")[0] == own:
                    what = self._shown(nodes.to_source(call.func.value)) + what[len(own):]
            short = re.findall(r"\w+", what)[-1]
            raise errors.at(call, f"`{callee}(...)` writes into `{what}` in place, which the backward sweep "
                            f"reads (as `{self._shown(read[0])}`, read before this call): srcgrad cannot "
                            "follow a change made inside another function",
                            f"read a copy made before the call (`{short}_before = np.copy({what})`), or pass "
                            f"the array to `{callee}` and return the new one (`{short} = {callee}({short})`, "
                            "writing into a copy there)", kind=errors.UnsupportedSyntaxError)

    def _reaching_names(self) -> dict:
        """``id(object) -> names``: the names whose compile-time value is that object or is
        read through it (``_t1 = model.CFG``, ``_t2 = _t1['w']``: both reach ``CFG``),
        from the free names through fields and constant keys.  Found once."""
        if self.reaching is not None:
            return self.reaching
        chains = {n: [v] for n, v in self.free.items()}
        field, item = registry_lookup(getattr), registry_lookup(operator.getitem)
        for stmt in nodes.statements(self.core.body):
            if not (isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name)):
                continue
            rule, bound = anno.get(stmt, "rule"), anno.get(stmt, "bound") or {}
            parts = list(bound.values())
            if anno.get(stmt, "kind") == "copy" and isinstance(stmt.value, gast.Name):
                parts, step = [stmt.value], None
            elif rule in (field, item) and len(parts) >= 2 and isinstance(parts[1], gast.Constant):
                step = ("attr" if rule is field else "item", parts[1].value)
            else:
                continue
            base = chains.get(parts[0].id) if isinstance(parts[0], gast.Name) else None
            if base is None:
                continue
            value = base[-1] if step is None else outside._step(base[-1], step)
            chains[stmt.targets[0].id] = base + ([] if step is None or value is outside._STOP else [value])
        self.reaching = {}
        for name, chain in chains.items():
            for obj in chain:
                if not isinstance(obj, (types.ModuleType, type(None), bool, int, float, str)):
                    self.reaching.setdefault(id(obj), set()).add(name)
        return self.reaching

    def _shown(self, spelled) -> str:
        """The user's spelling of a name or expression, a temporary shown as the value it
        holds, without the module a global is read through (``G``, not ``model.G``)."""
        if spelled.startswith("_") and spelled.isidentifier():
            held = self._user_spelling(nodes.name(spelled))
            spelled = spelled if held == "this value" else held
        head = spelled.split(".")[0]
        while "." in spelled and isinstance(self.free.get(head), types.ModuleType) \
                and not spelled.startswith(("np.", "numpy.")):
            spelled = spelled.split(".", 1)[1]
            head = spelled.split(".")[0]
        return spelled

    def _mutated_parameters(self, fn):
        """``_mutated_parameters(fn)``, read from ``fn``'s source once per compilation."""
        if id(fn) not in self.mutated:
            self.mutated[id(fn)] = _changes_arguments(fn)
        return self.mutated[id(fn)]

    def _check_local_def(self, stmt):
        """A call of a function defined in this one (``def add(v): xs.append(v)``) that
        changes in place what it captures or what it is given: srcgrad compiles the
        nested function on its own and cannot follow the change, so it is refused when
        a value being differentiated takes part."""
        call = stmt.value
        if not isinstance(call.func, gast.Name):
            return
        if self.local_defs is None:  # (found once: the first `def` of each name)
            self.local_defs = {}
            for s in nodes.statements(self.core.body):
                if isinstance(s, gast.FunctionDef) and anno.get(s, "kind") == "def":
                    self.local_defs.setdefault(s.name, s)
        local = self.local_defs.get(call.func.id)
        if local is None:
            return
        captured = set(anno.get(local, "captures"))
        touched = captured | set(parameters(local.args))
        given = [n for a in call.args + [k.value for k in call.keywords] for n in nodes.loaded_names(a)]
        varied = [n for n in given + sorted(captured) if n in self.activity.varied]
        if varied and _changed_in_place(local.body, touched):
            name = "a value" if varied[0].startswith("_") else f"`{varied[0]}`"
            raise errors.at(call, f"`{call.func.id}` (defined in this function) changes a value in place "
                            f"(a list it appends to, an array it writes into), and {name}, which is being "
                            "differentiated, takes part: srcgrad cannot follow a change made inside "
                            "another function", f"return the new value from `{call.func.id}` and assign "
                            "it, or do the change here", kind=errors.UnsupportedSyntaxError)

    def _check_underived(self, stmt):
        """Refuse a value being differentiated that reaches an argument srcgrad has no
        derivative for, where the result matters to the output: an argument of a
        function it has no rule for (a random draw other than those of
        ``rules/random.py``, a class), or a parameter a rule gives no adjoint
        (``np.linalg.norm(x, ord=p)``'s ``ord``).  A function declared with
        ``nondifferentiable`` has zero derivative in every argument: nothing to refuse."""
        kind, rule = anno.get(stmt, "kind"), anno.get(stmt, "rule")
        if kind == "nondiff" and rule is not None and not rule.zero_derivative \
                and rule.name not in _CONTAINERS:
            varied = [n for n in nodes.loaded_names(stmt.value) if n in self.activity.varied]
            if varied:
                given = "a value" if varied[0].startswith("_") else f"`{varied[0]}`"
                random = " (a random draw: srcgrad differentiates `normal`, `uniform` and " \
                    "`exponential` by reparameterisation, see docs/rules.md)" if rule.impure else ""
                called = nodes.to_source(stmt.value.func) if isinstance(stmt.value, gast.Call) else rule.name
                raise errors.at(stmt.value, f"`{called}` is given {given}, which is being differentiated, "
                                "and srcgrad has no "
                                f"derivative rule for it{random}",
                                "compute the value from NumPy functions srcgrad differentiates, or "
                                "register a rule with srcgrad.defadjoint",
                                kind=errors.NoDerivativeRuleError)
        if kind != "op":
            return
        bound = anno.get(stmt, "bound")
        for param, atom in bound.items():
            if param in rule.diff_params and param not in rule.sequence_params \
                    and isinstance(atom, (gast.List, gast.Tuple)):
                # np.sum([a, b]): the rule's adjoint is the array's; the items would get none.
                varied = [n for n in nodes.loaded_names(atom) if n in self.activity.varied]
                if varied:
                    raise errors.at(stmt.value, f"`{param}` of `{rule.name}` is given a list or tuple "
                                    "holding a value being differentiated, and srcgrad gives adjoints to "
                                    "arrays there, not to the items of a list",
                                    "make it an array first: `np.array([...])` (or np.stack)",
                                    kind=errors.NoDerivativeRuleError)
            if param in rule.diff_params or param in rule.discrete_params or param in rule.zero_params:
                continue
            varied = [n for n in nodes.loaded_names(atom) if n in self.activity.varied]
            if varied:
                given = "a value" if varied[0].startswith("_") else f"`{varied[0]}`"
                raise errors.at(stmt.value, f"`{param}` of `{rule.name}` is given {given}, which is being "
                                f"differentiated, but srcgrad's rule has no derivative with respect "
                                f"to `{param}`",
                                f"pass a constant as `{param}` (one that does not depend on the inputs "
                                "being differentiated), or compute it another way" + (
                                    "" if _builtin_rule(rule) else f"; or have the adjoint return `{param}`'s "
                                    "adjoint too (a parameter without a default value gets one, or name it "
                                    "in `defadjoint(..., diff=(...))`)"),
                                kind=errors.NoDerivativeRuleError)

    def _read_by_backward(self, names, call) -> list:
        """Those of ``names`` that may refer to an array read by an active statement that
        runs before ``call`` (earlier, or in a loop around it): that statement's adjoint
        may read the array in the backward sweep, after ``call`` changed it in place."""
        if not names:
            return []
        if self.memory is None:
            self.memory = sharing.Memory(self.core.body, self.ranks, self.core.params)
        if self.active_reads is None:
            self.active_reads = _ActiveReads(self.core.body, self.activity)
        return [n for n in names if any(self.active_reads.before(r, call) for r in self.memory.sharing(n))]

    def _kept_apart(self, store) -> bool:
        """Whether nothing in this function reads back what ``obj.name = v`` stores: no
        later read of a ``.name`` (any object's: which object an alias reaches is not
        known), and no call of code that is not inlined (it may read it), after it in
        program order or anywhere in a loop enclosing it (a later iteration)."""
        if self.stores is None:
            self.stores = _StoresReadBack(self.core.body)
        return not self.stores.read_back(store)

    def _grown_apart(self, stmt) -> bool:
        """``self.inputs.append(x)``, ``self.derived["Z"].append(z)``: a list or dict an
        object holds grown by a value being differentiated that nothing in this function
        reads back (as ``_kept_apart``; reads that only reach such a call do not count).  It
        runs as written on the primal value, with no adjoint, as a store kept apart does, and
        ``rt.growing`` records the field, so that a later call reading it back is refused."""
        if self.stores is None:
            self.stores = _StoresReadBack(self.core.body)
        grown = self.stores.grows(stmt)
        if grown is None or self.stores.read_back(stmt):
            return False
        obj, attr, root = grown
        receiver, origin = stmt.value.func, anno.get(stmt, "origin")
        receiver.value = nodes.call("rt.growing", [receiver.value, nodes.copy(obj), nodes.const(attr),
                                                   nodes.name(root), nodes.const(origin.where if origin else "?")])
        return True

    def _entry_store(self, stmt):
        """``self.parameters["running_mean"] = v``, ``self.dv["n"] += 1``: an entry of a dict or
        list an object holds replaced.  Bookkeeping as ``self.n = v`` is (``setattr``): run as
        written, the value stored with no adjoint, where nothing in this function reads the
        field back after it (``_StoresReadBack``); ``rt.kept_entry`` records it, so that a later
        call reading the entry back with an adjoint is refused.  A differentiated value that
        is read back is refused here."""
        if self.stores is None:
            self.stores = _StoresReadBack(self.core.body)
        value, holder = anno.get(stmt, "value"), stmt.targets[0].value
        varied = isinstance(value, gast.Name) and value.id in self.activity.varied \
            and not self._bookkeeping(value.id)
        stored = self.stores.entry_store(stmt)
        if not varied:
            return
        origin = anno.get(stmt, "origin")
        if stored is None or self.stores.read_back(stmt):
            field = f"`.{stored[1]}`" if stored is not None else "the container"
            raise errors.at(stmt, f"storing a value that is being differentiated in "
                            f"`{_stored_target(origin)}`, "
                            f"and {field} (or a call that may read it) is read after it in this function: "
                            "srcgrad keeps what is stored in an object's state as bookkeeping, with no "
                            "adjoint, so a gradient through that read would be lost",
                            self.stores.advice(stmt, stored[1]) if stored is not None else
                            "keep the value in a local name and use that name where it is read, or return "
                            "it (with has_aux=True)")
        obj, attr, root = stored
        stmt.targets[0].value = nodes.call("rt.kept_entry", [
            holder, nodes.copy(obj), nodes.const(attr), nodes.copy(anno.get(stmt, "index")),
            nodes.name(value.id), nodes.const(origin.where if origin else "?")])

    def _user_object(self, atom) -> bool:
        """Whether ``atom`` holds an object of the user's class (not a list, dict or set), so
        that its ``.update(...)``, ``.append(...)`` is its class's method, not a container's:
        an object argument (its rank says so) or one made here (``opt = SGD(0.1)``)."""
        if not isinstance(atom, gast.Name):
            return False
        rank = rank_of(atom, self.ranks)
        if isinstance(rank, TreeRank) and atom.id in self.core.params:  # (in an object, a dict's kind is "object" too)
            return rank.kind == "object"
        if self.definitions is None:
            self.definitions = {t: s for s in nodes.statements(self.core.body)
                                for t in nodes.assigned_names(s)}
        made = self.definitions.get(atom.id)
        cls = anno.get(made, "constructs") if made is not None else None
        return isinstance(cls, type) and not issubclass(cls, (list, dict, set))

    def _bookkeeping(self, name) -> bool:
        """``self.calls + 1``: an update of a field by constants (a counter), not a
        differentiated value, though the object it belongs to is differentiated."""
        if self.definitions is None:  # (found once: what reverse adds defines no name asked about)
            self.definitions = {t: s for s in nodes.statements(self.core.body)
                                for t in nodes.assigned_names(s)}
        defs = self.definitions
        stmt = defs.get(name)
        if stmt is None or anno.get(stmt, "kind") != "op":
            return False
        field, item = registry_lookup(getattr), registry_lookup(operator.getitem)

        def read_from_object(atom, depth=0):  # `self.calls`, `self.dv["n"]`
            source = defs.get(atom.id) if isinstance(atom, gast.Name) else None
            if source is None or anno.get(source, "kind") != "op" or depth > 8:
                return False
            rule = anno.get(source, "rule")
            return rule is field or rule is item and read_from_object(anno.get(source, "bound").get("a"), depth + 1)
        return all(isinstance(atom, gast.Constant) or read_from_object(atom)
                   for atom in anno.get(stmt, "bound").values())

    def _check_holders(self, stmt, xs):
        """``ys = [xs]`` then ``xs.append(h)``: ``ys`` holds the list itself, so what
        ``ys`` holds grew too, which its adjoint (split at ``ys = [xs]``, before the
        append) does not see.  Refused where ``ys`` is differentiated as a whole (an
        item read through it, ``ys[0][1]``, reads ``xs`` itself and is fine)."""
        flat = list(nodes.statements(self.core.body))
        position = {id(s): i for i, s in enumerate(flat)}
        # Loops in which one iteration's append reaches the holder made in an earlier one:
        # those the list lives across (not a list each iteration makes anew, `row = []`).
        loops = [{id(s) for s in nodes.statements(loop.body)} for loop in flat
                 if isinstance(loop, (gast.For, gast.While)) and (
                     xs in anno.get(loop, "carried") or not any(
                         xs in nodes.assigned_names(s) for s in nodes.statements(loop.body)))]
        for holder in flat:
            kind = anno.get(holder, "kind")
            if kind == "aggregate":
                outer, items = holder.targets[0].id, anno.get(holder, "elements").values()
            elif kind == "append":  # `out.append(row)`, then `row.append(h)`
                outer, items = anno.get(holder, "list"), [anno.get(holder, "value")]
            else:
                continue
            if not self.activity.active(outer) or not any(isinstance(a, gast.Name) and a.id == xs
                                                          for a in items):
                continue
            if position[id(holder)] < position[id(stmt)] \
                    or any(id(holder) in body and id(stmt) in body for body in loops):
                origin = anno.get(holder, "origin")
                where = f" at {origin.where} (`{origin.text.strip()}`)" if origin else ""
                raise errors.at(stmt, f"this changes a list that `{outer}` holds{where}, and "
                                f"`{outer}` is used as a whole later: srcgrad follows a list's "
                                "items by the list's own name only",
                                "finish the list before putting it into another list, tuple or dict",
                                kind=errors.UnsupportedSyntaxError)

    def _append_adjoint(self, stmt):
        """Reverse of ``xs.append(h)``: the last adjoint on ``xs_bar`` is ``h``'s."""
        xs, value = anno.get(stmt, "list"), anno.get(stmt, "value")
        if not self.activity.active(xs):
            return
        self._check_holders(stmt, xs)
        if xs in self.defined:
            pop = nodes.call(gast.Attribute(value=nodes.name(self.bar[xs]), attr="pop", ctx=gast.Load()))
            if self._active_name(value):
                temp = self.core.fresh()
                stmt_pop = nodes.assign(temp, pop)
                anno.set(stmt_pop, "impure", True)
                self._append(stmt_pop, self.group)
                self._accumulate(value.id, nodes.name(temp))
            else:
                self._append(gast.Expr(value=pop), self.group)
        if xs in self.popped:
            undo = nodes.call(gast.Attribute(value=nodes.name(xs), attr="pop", ctx=gast.Load()))
            self._append(anno.set(gast.Expr(value=undo), "restores", xs), self.group)

    def _pop_adjoint(self, stmt):
        """Reverse of ``a = xs.pop(i)``: ``a``'s adjoint goes back into ``xs_bar`` at ``i``
        (a list no later code read starts as zeros), then ``a`` goes back into ``xs``."""
        xs, index, value = anno.get(stmt, "list"), anno.get(stmt, "index"), stmt.targets[0].id
        if not self.activity.active(xs):
            return
        self._check_holders(stmt, xs)
        if self.activity.active(value) and value in self.defined:
            g = nodes.name(self.bar[value])
        elif xs in self.defined:
            g = nodes.call("rt.zeros_like", [nodes.name(value)])
        else:
            g = None
        self.defined.discard(value)
        if g is not None:
            if xs not in self.defined:
                self.out.append(self._zeros(xs))
                self.defined.add(xs)
            back = nodes.call("rt.unpop", [nodes.name(self.bar[xs]), nodes.copy(index), g])
            self._append(gast.Expr(value=back), self.group)
        undo = nodes.call("rt.unpop", [nodes.name(xs), nodes.copy(index), nodes.name(value)])
        self._append(anno.set(gast.Expr(value=undo), "restores", xs), self.group)

    def _item_adjoint(self, stmt, g):
        """Reverse of ``h = xs[i]`` on a list grown with append: ``h``'s adjoint is added
        to item ``i`` of ``xs_bar`` (a list of adjoints, as long as ``xs`` was then)."""
        xs, index = anno.get(stmt, "list"), anno.get(stmt, "index")
        if not self.activity.active(xs):
            return
        if xs not in self.defined:
            self.out.append(self._zeros(xs))
            self.defined.add(xs)
        self._append(nodes.assign(self.bar[xs], nodes.call("rt.add_item", [
            nodes.name(self.bar[xs]), self._index_argument(index), g])), self.group)

    def _setitem_adjoint(self, stmt):
        """Reverse of ``y[i] = v``: ``v`` gets ``y_bar[i]``; the overwritten elements
        had no effect (``y_bar[i] = 0``); then ``y[i]`` gets its old values back."""
        array, index, value = anno.get(stmt, "array"), anno.get(stmt, "index"), anno.get(stmt, "value")
        if anno.get(stmt, "generic"):
            self._entry_write_adjoint(stmt, array, index, value)
            return
        module = self.backend.MODULE_NAME
        if self.activity.active(array) and array in self.defined:
            g = self.bar[array]
            if self._active_name(value):
                basic = templates.static_value(index) is not templates.UNKNOWN or \
                    rank_of(index, self.ranks) == 0
                if not self._is_array(array):  # (a list or dict known when the code runs: its entry)
                    contribution = nodes.call("rt.written_entry", [
                        nodes.name(g), nodes.name(array), templates._slices_as_calls(nodes.copy(index)),
                        nodes.name(value.id)])
                elif basic:  # each element written once
                    read = gast.Subscript(value=nodes.name(g), slice=nodes.copy(index), ctx=gast.Load())
                    contribution = nodes.call("rt.unbroadcast", [read, nodes.name(value.id)])
                else:
                    contribution = nodes.call("rt.written_adjoint", [
                        nodes.name(g), templates._slices_as_calls(nodes.copy(index)), nodes.name(value.id)])
                # Written into an integer array the value is truncated: no derivative reaches it.
                contribution = nodes.call("rt.cast_adjoint", [contribution, nodes.name(array)])
                if value.id == array:  # `y[::-1] = y`: y's own contribution is added after the zeroing
                    written = self.core.fresh()
                    self._append(nodes.assign(written, contribution), self.group)
                    contribution = nodes.name(written)
                else:
                    self._accumulate(value.id, contribution)
            if self._is_array(array):
                self._append(nodes.assign(g, nodes.call(f"{module}.copy", [nodes.name(g)])), self.group)
                self._append(nodes.assign(gast.Subscript(value=nodes.name(g), slice=nodes.copy(index),
                                                         ctx=gast.Store()), nodes.const(0)), self.group)
            else:  # (a list or dict whose kind is known when the code runs: `defaultdict(float)`)
                self._append(nodes.assign(g, nodes.call("rt.overwritten_adjoint", [
                    nodes.name(g), nodes.name(array), templates._slices_as_calls(nodes.copy(index))])), self.group)
            if self._active_name(value) and value.id == array:
                self._accumulate(array, contribution)
        restore = nodes.assign(gast.Subscript(value=nodes.name(array), slice=nodes.copy(index),
                                              ctx=gast.Store()), nodes.name(anno.get(stmt, "saved")))
        anno.set(restore, "restore", array)  # (a pullback called again redoes the write: pipeline.py)
        self._append(restore, self.group)

    def _entry_write_adjoint(self, stmt, xs, index, value):
        """Reverse of ``xs[i] = v`` into a list, a dict or a value of a kind known when it
        runs: the same three steps through the runtime, which does each for that kind."""
        if self.activity.active(xs) and xs in self.defined:
            g = self.bar[xs]
            contribution = None
            if self._active_name(value):
                contribution = nodes.call("rt.cast_adjoint", [nodes.call("rt.written_entry", [
                    nodes.name(g), nodes.name(xs), self._index_argument(index), nodes.name(value.id)]), nodes.name(xs)])
                if value.id == xs:  # (`xs[0] = xs`: its own part is added after the zeroing)
                    written = self.core.fresh()
                    self._append(nodes.assign(written, contribution), self.group)
                    contribution = nodes.name(written)
                else:
                    self._accumulate(value.id, contribution)
            self._append(nodes.assign(g, nodes.call("rt.overwritten_adjoint", [nodes.name(g), nodes.name(xs),
                                                                               self._index_argument(index)])),
                         self.group)
            if contribution is not None and value.id == xs:
                self._accumulate(xs, contribution)
        restore = gast.Expr(value=nodes.call("rt.restore_entry", [nodes.name(xs), self._index_argument(index),
                                                                  nodes.name(anno.get(stmt, "saved"))]))
        anno.set(restore, "restore", xs)  # (a pullback called again redoes the write: pipeline.py)
        self._append(restore, self.group)

    @staticmethod
    def _index_argument(index):
        return templates._slices_as_calls(nodes.copy(index))  # (`::-1` as an argument: `slice(None, None, -1)`)

    def _call_adjoint(self, stmt, target, g):
        """``y = f(a, b)`` → forward ``y, y_pullback = dispatch.vjp_call(f, (0, 1), a, b)``,
        backward ``a_bar, b_bar = y_pullback(y_bar)``: the callee's own reverse mode,
        compiled when first called (so recursion and run-time targets work)."""
        args, kwargs = anno.get(stmt, "args"), anno.get(stmt, "kwargs")
        receiver = anno.get(stmt, "receiver")
        self._check_spread(stmt, args, kwargs)
        wrt = [("self", receiver)] if self._active_name(receiver) else []
        wrt += [(i, a) for i, a in enumerate(args) if self._active_name(a)]
        wrt += [(k, a) for k, a in kwargs.items() if self._active_name(a)]
        if "self" in kwargs and self._active_name(kwargs["self"]):
            raise _self_keyword(stmt)
        if not wrt:
            return
        call = stmt.value
        if not (anno.get(stmt, "field") or anno.get(stmt, "operator")) \
                and (self._adjoint_called(stmt, target, g, call, [w for w, _ in wrt])
                     or self._gradient_pulled_back(call, g, wrt)):
            return
        pullback = self.core.fresh(f"{target}_pullback")
        stmt.targets = [nodes.tuple_([nodes.name(target, "store"), nodes.name(pullback, "store")], "store")]
        spec = nodes.tuple_([nodes.const(w) for w, _ in wrt])
        field = anno.get(stmt, "field")
        direct = None if field or anno.get(stmt, "operator") else self._direct_callee(call, [w for w, _ in wrt])
        if anno.get(stmt, "operator"):
            origin = anno.get(stmt, "origin")
            stmt.value = nodes.call("dispatch.vjp_operator", [nodes.const(anno.get(stmt, "operator")), spec]
                                    + [nodes.copy(a) for a in anno.get(stmt, "args")],
                                    [("where", nodes.const(origin.where if origin else "?"))])
        elif field:  # obj.name or getattr(obj, name): a field or a property
            origin = anno.get(stmt, "origin")
            stmt.value = nodes.call("dispatch.vjp_field", [nodes.copy(field[0]), nodes.copy(field[1]),
                                                     nodes.const(origin.where if origin else "?")])
        elif direct is not None:
            stmt.value = nodes.call(direct, call.args)
        else:
            if isinstance(call.func, gast.Attribute):  # obj.name(...): a method or a stored layer
                head = ["dispatch.vjp_method",
                        [nodes.copy(call.func.value), nodes.const(call.func.attr), spec]]
            else:
                head = ["dispatch.vjp_call", [call.func, spec]]
            stmt.value = nodes.call(head[0], head[1] + call.args, [(k.arg, k.value) for k in call.keywords])
        outputs, later, claimed = [], [], set()
        for _, atom in wrt:
            var = atom.id
            # (a list grown by appends: its adjoint is one per item, which the appends pop,
            # whatever form the pullback gives it in: `_accumulate` lays it out)
            if var not in self.defined and var not in claimed and var not in self.lists:
                claimed.add(var)
                outputs.append(self._bar_name(var))
            else:
                temp = self.core.fresh()
                outputs.append(temp)
                later.append((var, temp))
        targets = nodes.tuple_([nodes.name(o, "store") for o in outputs], "store") if len(outputs) > 1 \
            else nodes.name(outputs[0], "store")
        self._append(nodes.assign(targets, nodes.call(nodes.name(pullback), [g])), self.group)
        self.defined |= claimed
        for var, temp in later:
            self._accumulate(var, nodes.name(temp))

    def _adjoint_called(self, stmt, target, g, call, wrt) -> bool:
        """``y = f(a, b)`` of a primitive whose rule is not inlined (its adjoint calls helpers
        of its own module) but whose adjoint has a rule of its own, a derivative of the
        derivative (``fixed_point``'s): the forward sweep calls ``f`` as it is, the backward
        sweep its adjoint (bound in the loaded module as ``self.bound``), so forward mode over
        the gradient code differentiates that call by the adjoint's rule (``grad(grad(f))``)
        where a pullback closure (``dispatch.vjp_call``) would stop it.  False (nothing done)
        for any other call."""
        fn = anno.get(call.func, "resolved", None) if isinstance(call.func, (gast.Name, gast.Attribute)) else None
        rule = registry_lookup(fn) if isinstance(fn, types.FunctionType) else None
        if rule is None or rule.adjoint is None or registry_lookup(rule.adjoint) is None or rule.elementwise \
                or call.keywords or any(isinstance(a, gast.Starred) for a in call.args) \
                or not all(isinstance(w, int) for w in wrt):
            return False
        params = list(rule.signature.parameters)
        if len(call.args) > len(params) or any(params[w] not in rule.diff_params for w in wrt):
            return False  # (dispatch.vjp_call refuses a parameter the rule has no derivative for)
        adjoint = self.bound_name(rule.adjoint)
        adjoints = self.core.fresh(f"{target}_adjoints")
        self._append(nodes.assign(adjoints, nodes.call(adjoint, [g, nodes.name(target)]
                                                       + [nodes.copy(a) for a in call.args])), self.group)
        for w in wrt:
            param = params[w]
            part = nodes.name(adjoints) if len(rule.diff_params) == 1 else gast.Subscript(
                value=nodes.name(adjoints), slice=nodes.const(rule.diff_params.index(param)), ctx=gast.Load())
            self._accumulate(call.args[w].id, part)
        return True

    def _gradient_pulled_back(self, call, g, wrt) -> bool:
        """``y = grad_f(a, b)`` of ``grad_f = srcgrad.grad(f)`` (a free name, or made in the
        function): the forward sweep calls it as it is, the backward sweep computes the
        adjoints by name (``dispatch.gradient_pullback``: ``H y_bar``, forward mode over
        ``f``'s gradient code, as ``dispatch.vjp_call``'s pullback does), which forward mode
        over this code differentiates by its rule (a third derivative).  False for any
        other call."""
        if not isinstance(call.func, gast.Name) or call.keywords \
                or any(isinstance(a, gast.Starred) for a in call.args) \
                or not all(isinstance(w, int) for w, _ in wrt) or not self._makes_gradient(call.func):
            return False
        adjoints = self.core.fresh("_adjoints")
        self._append(nodes.assign(adjoints, nodes.call("dispatch.gradient_pullback", [
            nodes.copy(call.func), nodes.tuple_([nodes.const(w) for w, _ in wrt]), g,
            nodes.tuple_([nodes.copy(a) for a in call.args])])), self.group)
        for k, (_, atom) in enumerate(wrt):
            part = nodes.name(adjoints) if len(wrt) == 1 else gast.Subscript(
                value=nodes.name(adjoints), slice=nodes.const(k), ctx=gast.Load())
            self._accumulate(atom.id, part)
        return True

    def _makes_gradient(self, func) -> bool:
        """``func`` (a name) holds ``srcgrad.grad(f)`` (its plain ``grad`` mode): a free name
        bound to one, or a name the function binds to a call of ``srcgrad.grad``."""
        if anno.has(func, "resolved"):
            value = anno.get(func, "resolved")
            return runtime.is_gradient_function(value) and getattr(getattr(value, "options", None), "mode",
                                                                     None) == "grad"
        if self.grad_made is None:
            self.grad_made = {s.targets[0].id for s in nodes.statements(self.core.body)
                              if isinstance(s, gast.Assign) and len(s.targets) == 1
                              and isinstance(s.targets[0], gast.Name) and isinstance(s.value, gast.Call)
                              and _is_srcgrad_grad(anno.get(s.value.func, "resolved", None))}
        return func.id in self.grad_made

    def bound_name(self, fn) -> str:
        """The name under which the loaded code reads ``fn`` (``Sweeps.bound``)."""
        for name, value in self.bound.items():
            if value is fn:
                return name
        name = self.core.fresh(f"_{fn.__name__}")
        self.bound[name] = fn
        return name

    def _direct_callee(self, call, wrt):
        """The name under which the loaded code calls ``call``'s callee's compiled
        vjp directly, skipping ``dispatch.vjp_call``'s dispatch per call (what a layer
        applied in a loop pays), or None.  Only for a function known at compile
        time, called with all its parameters positionally, argument ranks known."""
        fn = anno.get(call.func, "resolved") if isinstance(call.func, gast.Name) else None
        if not isinstance(fn, types.FunctionType) or registry_lookup(fn) is not None or call.keywords \
                or self.backend.MODULE_NAME != "np":
            return None
        code = fn.__code__
        ranks = tuple(rank_of(a, self.ranks) for a in call.args)
        if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) or code.co_kwonlyargcount \
                or code.co_argcount != len(call.args) or not all(isinstance(r, int) for r in ranks):
            return None
        key = (call.func.id, fn, tuple(wrt), ranks)
        if key not in self.callees:
            params = code.co_varnames[:code.co_argcount]
            which = "" if len(wrt) == len(params) else "_" + "_".join(params[i] for i in wrt)
            self.callees[key] = self.core.fresh(f"{call.func.id}_vjp{which}")
        return self.callees[key]

    def _check_spread(self, stmt, args, kwargs):
        """``g(*xs)`` whose length is known only at run time (normalize passes the
        entries one by one when it is known): which position gets which adjoint is
        unknown when compiling, so a differentiated value must not be in or after it."""
        starred = next((i for i, a in enumerate(args) if isinstance(a, gast.Starred)), len(args))
        spread = [a.value for a in args[starred:] if isinstance(a, gast.Starred)] + \
            [v for k, v in kwargs.items() if isinstance(k, tuple)]
        after = [a for a in args[starred:] if not isinstance(a, gast.Starred)]
        active = [a for a in spread + after if self._active_name(a)]
        if not active:
            return
        call = nodes.to_source(stmt.value)
        if active[0] in spread and active[0].id in self.core.params:  # compiled without ranks
            raise errors.at(stmt.value, f"srcgrad cannot differentiate through `{call}` without "
                            f"knowing how many values `{active[0].id}` holds",
                            "pass example arguments (srcgrad.source(f, *args) or srcgrad.show(f, *args)); "
                            "their lengths are part of the specialisation")
        raise errors.at(stmt.value, f"srcgrad cannot differentiate through `{call}`: it cannot tell, "
                        "when it compiles the call, how many values the `*`/`**` argument holds, so "
                        f"where the adjoint of `{active[0].id}` goes",
                        "unpack it into names first (`a, b = pair`) and pass them, or spread a "
                        "tuple or dict built in this function or passed in as an argument")

    def _rule_adjoint(self, stmt, target, g):
        rule, bound = anno.get(stmt, "rule"), anno.get(stmt, "bound")
        refused = rule.refuse and rule.refuse({p: templates.static_value(a) for p, a in bound.items()})
        if refused:
            raise errors.at(stmt.value, *refused, kind=errors.NoDerivativeRuleError)
        wanted, hints, claimed = set(), {}, set()
        returned = _returned_locals(rule.adjoint)
        for param in rule.diff_params:
            atom = bound.get(param)
            if param in rule.sequence_params and isinstance(atom, (gast.List, gast.Tuple)):
                if any(self._active_name(e) for e in nodes.walk(atom)):
                    wanted.add(param)
            elif param in rule.sequence_params and self._active_name(atom):
                wanted.add(param)
            elif self._active_name(atom):
                wanted.add(param)
                var = atom.id
                if var not in self.defined and var not in claimed:
                    for local, p in returned.items():
                        if p == param:
                            hints[local] = self._bar_name(var)
                    claimed.add(var)
        bindings = {"ans_bar": g, "ans": nodes.name(target)}
        bindings.update({p: a for p, a in bound.items()})
        read_as_array = set()
        if rule.name.split(".")[0] == "numpy":
            for param in sorted(wanted - rule.sequence_params):
                atom = bound.get(param)
                rank = rank_of(atom, self.ranks)
                if isinstance(atom, gast.Name) and (isinstance(rank, TreeRank) or rank is None
                                                    and atom.id in self.call_results):
                    # A list or tuple (a structure's field, or what a function of yours
                    # returned), which NumPy reads as an array, and the rule's arithmetic
                    # must too; its adjoint goes back item by item (rt.rows_adjoint).
                    read_as_array.add(param)
                    temp = self.core.fresh()
                    self._append(nodes.assign(temp, nodes.call(f"{self.backend.MODULE_NAME}.asarray",
                                                               [nodes.name(atom.id)])), self.group)
                    bindings[param] = nodes.name(temp)
        site = templates.Site(
            bindings=bindings,
            ndim=lambda atom: r if isinstance(r := rank_of(atom, self.ranks), int) else None,
            structure=lambda atom: (True if isinstance(r := rank_of(atom, self.ranks), TreeRank)
                                    else False if isinstance(r, int) else None),
            same_shape=self._same_shape(rule, bound),
            wanted=wanted,
            hints=hints,
            fresh=self.core.fresh,
            module_name=self.backend.MODULE_NAME,
        )
        statements, adjoints = templates.instantiate(rule, site)
        for s in statements:
            self._append(s, self.group)
        for param in rule.diff_params:
            if param not in adjoints:
                continue
            atom, expr = bound[param], adjoints[param]
            if param in read_as_array:
                expr = nodes.call("rt.rows_adjoint", [expr, nodes.name(atom.id)])
            elif rule.elementwise and param not in site.same_shape and param not in rule.sequence_params \
                    and isinstance(atom, gast.Name) and not _unbroadcasts(expr, atom.id):
                # An elementwise rule's adjoint has the output's (broadcast) shape: summed back
                # to the input's, whether or not the rule (a user's) wrote it.
                expr = nodes.call("rt.unbroadcast", [expr, nodes.name(atom.id)])
            elif not rule.elementwise and param not in rule.sequence_params and isinstance(atom, gast.Name) \
                    and not _builtin_rule(rule) and len(rule.diff_params) > 1:
                # A user's rule of several arguments that is not declared elementwise: an adjoint
                # of another shape than its argument (np.hypot's, broadcast), or not an array (a
                # list), is refused where it comes out.
                origin = anno.get(stmt.value, "origin")
                expr = nodes.call("rt.checked_adjoint", [expr, nodes.name(atom.id), nodes.const(rule.name),
                                                         nodes.const(param),
                                                         nodes.const(origin.where if origin else "")])
            if param in rule.sequence_params and isinstance(atom, gast.Name) \
                    and isinstance(rank_of(atom, self.ranks), int):
                self._accumulate(atom.id, expr)  # an array (its rows are the items)
            elif param in rule.sequence_params and isinstance(atom, gast.Name) \
                    and isinstance(rank_of(atom, self.ranks), TreeRank) and atom.id not in self.lists:
                # A list or tuple of a structure (a field `self.ws`, an argument): item by item.
                self._accumulate(atom.id, nodes.call("rt.rows_adjoint", [expr, nodes.name(atom.id)]))
            elif param in rule.sequence_params and isinstance(atom, gast.Name):
                # A list grown with append: its adjoint is a list, popped by the appends.  A
                # name of a kind unknown when compiling (`a[tuple(ix)]`, maybe a scalar): as
                # its value turns out to be (rt.items_adjoint / rt.add_items).
                name = self._bar_name(atom.id)
                unknown = rank_of(atom, self.ranks) is None and atom.id not in self.lists
                if atom.id in self.defined:
                    expr = nodes.call("rt.add_items", [nodes.name(name), expr, nodes.name(atom.id)]) \
                        if unknown else nodes.call("rt.add_each", [nodes.name(name), expr])
                else:
                    expr = nodes.call("rt.items_adjoint", [expr, nodes.name(atom.id)]) if unknown \
                        else nodes.call("rt.as_items", [expr, nodes.name(atom.id)])
                    self.defined.add(atom.id)
                self._append(nodes.assign(name, expr), self.group)
            elif param in rule.sequence_params:
                self._scatter(atom, expr)
            else:
                self._accumulate(atom.id, expr)

    def _scatter(self, display, expr):
        """Each item of a list display (``[a, b]``, nested ``[[a, b], [c, d]]``) gets
        its part of ``expr``, the adjoint of the whole: ``expr[i]``."""
        if isinstance(expr, (gast.Tuple, gast.List)) and len(expr.elts) == len(display.elts):
            # The rule wrote one adjoint per item (einsum's operands): only the active are built.
            for elt, part in zip(display.elts, expr.elts):
                if isinstance(elt, (gast.List, gast.Tuple)) \
                        and any(self._active_name(e) for e in nodes.walk(elt)):
                    self._scatter(elt, part)
                elif self._active_name(elt):
                    self._accumulate(elt.id, part)
            return
        parts = self.core.fresh()
        self._append(nodes.assign(parts, expr), self.group)
        for i, elt in enumerate(display.elts):
            part = gast.Subscript(value=nodes.name(parts), slice=nodes.const(i), ctx=gast.Load())
            if isinstance(elt, (gast.List, gast.Tuple)) \
                    and any(self._active_name(e) for e in nodes.walk(elt)):
                self._scatter(elt, part)
            elif self._active_name(elt):
                self._accumulate(elt.id, part)

    def _same_shape(self, rule, bound):
        """Parameters of an elementwise rule that provably have the output's shape."""
        if not rule.elementwise:
            return set()
        if any(isinstance(a, (gast.Tuple, gast.List)) for a in bound.values()):
            return set()  # np.maximum(s, (0.0, 1.0)): a literal sequence broadcasts too
        arrays = {p: a for p, a in bound.items()
                  if isinstance(a, gast.Name) or (isinstance(a, gast.Constant)
                                                  and isinstance(a.value, (int, float)))}
        same = set()
        for p, a in arrays.items():
            others = [b for q, b in arrays.items() if q != p]
            if all(rank_of(b, self.ranks) == 0 or (isinstance(b, gast.Name) and isinstance(a, gast.Name)
                                                   and b.id == a.id) for b in others):
                same.add(p)
        return same

    def _no_rule(self, stmt):
        if anno.has(stmt, "why"):
            problem, advice = anno.get(stmt, "why")
            return errors.at(stmt.value, problem, advice, kind=errors.NoDerivativeRuleError)
        callee = anno.get(stmt, "callee")
        if callee is None:
            return errors.at(stmt.value, f"cannot differentiate `{nodes.to_source(stmt.value)}`: "
                             "srcgrad does not know what this attribute is",
                             "use array attributes (.T, .shape) or NumPy functions",
                             kind=errors.NoDerivativeRuleError)
        if isinstance(callee, functools.partial):  # named by its function, not by its repr
            name = getattr(callee.func, "__qualname__", None) or repr(callee.func)
            shown = [repr(a) if templates.is_literal(a) else "..." for a in callee.args] + ["<your arguments>"] \
                + [f"{k}={v!r}" if templates.is_literal(v) else f"{k}=..." for k, v in callee.keywords.items()]
            return errors.at(stmt.value, f"srcgrad does not differentiate a call of a functools.partial "
                             f"(of `{name}`)", f"call `{name}` itself with the bound arguments "
                             f"(`{name}({', '.join(shown)})`), or define a function that does",
                             kind=errors.NoDerivativeRuleError)
        label = getattr(callee, "__qualname__", None) or getattr(callee, "__name__", None) or repr(callee)
        module = getattr(callee, "__module__", None)
        full = f"{module}.{label}" if module else (registry_label(callee) if isinstance(callee, np.ufunc)
                                                   else label)  # (a ufunc names no module)
        advice = (f"register one: @srcgrad.defadjoint({label}) on a function "
                  "`def rule(ans_bar, ans, <its parameters>): return <adjoint>`")
        return errors.at(stmt.value, f"no derivative rule for `{full}`", advice,
                         kind=errors.NoDerivativeRuleError)


def _self_keyword(stmt):
    """A differentiated value passed as ``self=``: the name generated code uses for the
    callable's own adjoint (``dispatch.vjp_call(f, ("self", 0), ...)``), so refused."""
    return errors.at(stmt.value, "a value being differentiated is passed as the keyword argument "
                     "`self=`, which srcgrad's calls keep for the called object itself",
                     "pass it by position, or give the parameter another name",
                     kind=errors.UnsupportedSyntaxError)


def _builtin_rule(rule) -> bool:
    """A rule of srcgrad's own (its rules read a missing part of a tuple's adjoint as None)."""
    return getattr(rule.adjoint, "__module__", "").startswith("srcgrad.")


def _unbroadcasts(expr, name) -> bool:
    """Whether ``expr`` is ``rt.unbroadcast(..., name)`` (a built-in rule's own)."""
    func = getattr(expr, "func", None)
    return isinstance(expr, gast.Call) and isinstance(func, gast.Attribute) and func.attr == "unbroadcast" \
        and isinstance(func.value, gast.Name) and func.value.id == "rt" \
        and len(expr.args) == 2 and isinstance(expr.args[1], gast.Name) and expr.args[1].id == name


# The statements whose adjoint (or check) is a method of their own, by kind.
_STATEMENT_ADJOINTS = {
    "setentry": _Reverse._entry_store,
    "setattr": _Reverse._attribute_store,
    "def": _Reverse._nested_def_adjoint,
    "setitem": _Reverse._setitem_adjoint,
    "append": _Reverse._append_adjoint,
    "pop": _Reverse._pop_adjoint,
}


class _StoresReadBack:
    """For each ``obj.name = v`` of a function: whether a read of a ``.name`` field, or a
    call of the user's code that is not inlined (``""``), may run after it — later in the
    function, not in the other branch of an ``if`` around it, or anywhere in a loop around
    it (a later iteration).  One backward walk; the sets hold field names."""

    def __init__(self, body):
        self.read_after = {}  # id(store) -> whether a read may follow it
        self.by_call_only = {}  # id(store) -> whether only a call of code not inlined may read it
        self._containers(body)
        self._walk(body, frozenset())
        self.body, self.reads_after_calls = body, None
        # The fields this function stores or grows: an earlier call of it (a layer called
        # twice, a cell in a loop) may have kept them, which a read here must not take in.
        self.kept_names = {s.targets[0].attr for s in nodes.statements(body) if anno.get(s, "kind") == "setattr"} \
            | {self.grows(s)[1] for s in nodes.statements(body) if self.grows(s) is not None} \
            | {self.entry_store(s)[1] for s in nodes.statements(body)
               if anno.get(s, "kind") == "setentry" and self.entry_store(s) is not None}

    def _containers(self, body):
        """``self.held``: name -> (object, field, the name holding the field) for ``_t = obj.f``
        and ``_u = _t["k"]`` (a container an object holds, or an entry of one); ``self.receivers``:
        those whose every use is to grow them (``_t.append(v)``) or to reach one that is."""
        self.held, uses, reached, self.item_reads = {}, {}, {}, {}
        field, item = registry_lookup(getattr), registry_lookup(operator.getitem)
        flat = list(nodes.statements(body))
        for stmt in flat:
            if isinstance(stmt, (gast.For, gast.While, gast.If)):
                loads = nodes.loaded_names(stmt.iter if isinstance(stmt, gast.For) else stmt.test)
            else:
                loads = nodes.loaded_names(stmt)
            for n in loads:
                uses[n] = uses.get(n, 0) + 1
            rule = anno.get(stmt, "rule") if anno.get(stmt, "kind") == "op" else None
            if rule is field and isinstance(stmt.targets[0], gast.Name):
                name = templates.static_value(anno.get(stmt, "bound")["name"])
                if isinstance(name, str):
                    self.held[stmt.targets[0].id] = (anno.get(stmt, "bound")["obj"], name, stmt.targets[0].id)
            elif rule is item and isinstance(stmt.targets[0], gast.Name):
                base = anno.get(stmt, "bound").get("a")
                key = templates.static_value(anno.get(stmt, "bound").get("index"))
                if isinstance(base, gast.Name) and type(key) in (str, int, bool):  # (not a slice)
                    self.item_reads.setdefault(base.id, []).append((key, stmt.targets[0].id))
                if isinstance(base, gast.Name) and base.id in self.held:
                    self.held[stmt.targets[0].id] = self.held[base.id]
                    reached.setdefault(base.id, []).append(stmt.targets[0].id)
        growing = {}
        read_back = registry_lookup(runtime.entry_read_back)
        for stmt in flat:
            receiver = self._receiver(stmt)
            if receiver is not None:
                growing[receiver] = growing.get(receiver, 0) + 1
            elif anno.get(stmt, "checks") is not None:  # (`rt.not_in_place(_t, k, ...)` before `_t[k] += v`)
                growing[anno.get(stmt, "checks")] = growing.get(anno.get(stmt, "checks"), 0) + 1
            elif anno.get(stmt, "kind") == "op" and anno.get(stmt, "rule") is read_back:
                # (an entry read right after it was stored: the stored value, not a read of the field)
                container = anno.get(stmt, "bound").get("container")
                if isinstance(container, gast.Name):
                    growing[container.id] = growing.get(container.id, 0) + 1
        self.receivers = {n for n in self.held if uses.get(n, 0) == growing.get(n, 0) + len(reached.get(n, ()))}
        self.uses, self.growing = uses, growing
        changed = True
        while changed:  # (a name that reaches another is one only if that one is)
            kept = {n for n in self.receivers if all(r in self.receivers for r in reached.get(n, ()))}
            changed, self.receivers = kept != self.receivers, kept

    def _receiver(self, stmt):
        """The name ``stmt`` grows (``_t.append(v)``, ``_t.update(d)``, or run for its effect on
        an object being differentiated, ``rt.keeping_fields(_t, "append", where, v)``), or None."""
        value = getattr(stmt, "value", None)
        if anno.get(stmt, "kind") == "setentry":
            return anno.get(stmt, "holder")
        if not (isinstance(stmt, gast.Expr) and anno.get(stmt, "kind") == "call" and isinstance(value, gast.Call)
                and isinstance(value.func, gast.Attribute)):
            return None
        if nodes.to_source(value.func).strip() == "rt.keeping_fields" and len(value.args) >= 2 \
                and isinstance(value.args[0], gast.Name) and isinstance(value.args[1], gast.Constant) \
                and value.args[1].value in _CONTAINER_MUTATORS and value.args[1].value not in ("pop", "popitem"):
            return value.args[0].id
        if value.func.attr in _CONTAINER_MUTATORS and value.func.attr not in ("pop", "popitem") \
                and isinstance(value.func.value, gast.Name):
            return value.func.value.id
        return None

    def keys_read(self, name, useful):
        """The literal keys of the entries of ``name`` (a field read: a dict or list) read into
        names in ``useful``, where every use of ``name`` is such a read or a store into it;
        else None (the code may read any entry)."""
        reads = self.item_reads.get(name, [])
        if name is None or self.uses.get(name, 0) != len(reads) + self.growing.get(name, 0):
            return None
        return {key for key, target in reads if useful is None or target in useful}

    def entry_store(self, stmt):
        """``(object, field, name holding it)`` where ``stmt`` (kind ``setentry``) replaces an
        entry of a container that field holds, or None where that is not known."""
        return self.held.get(anno.get(stmt, "holder"))

    def grows(self, stmt):
        """``(object, field, name holding it)`` where ``stmt`` grows a container that field holds."""
        receiver = self._receiver(stmt)
        return self.held.get(receiver) if receiver in self.receivers else None

    def _read(self, stmt, keyed=True):
        """The field ``stmt`` reads (``"parameters"``), the entry of one (``"parameters['k']"``:
        ``P["k"]`` on ``P = self.parameters``, where ``keyed`` and every use of ``P`` is such a
        read), ``""`` for a call of code that is not inlined, or None."""
        kind = anno.get(stmt, "kind")
        target = stmt.targets[0].id if isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name) \
            else None
        if kind == "op" and anno.get(stmt, "rule") is registry_lookup(getattr):
            if target in self.receivers:
                return None  # (only reaches a container to grow it)
            if keyed and target in self.held and self.keys_read(target, None) is not None:
                return None  # (its entries' reads say which it reads)
            return templates.static_value(anno.get(stmt, "bound")["name"])
        if kind == "op" and anno.get(stmt, "rule") is registry_lookup(operator.getitem) \
                and isinstance(anno.get(stmt, "bound").get("a"), gast.Name) \
                and anno.get(stmt, "bound")["a"].id in self.held:
            # `P["k"]` on `P = self.parameters`: a read of the field (`P["k"] = v` may have replaced it)
            if target in self.receivers:
                return None
            base = anno.get(stmt, "bound")["a"].id
            key = templates.static_value(anno.get(stmt, "bound").get("index"))
            field = self.held[base][1]
            if keyed and type(key) in (str, int, bool) and self.keys_read(base, None) is not None:
                return _entry_name(field, key)
            return field
        if self.grows(stmt) is not None or kind == "setentry":
            return None
        calls = kind == "call" or kind == "unknown" and isinstance(getattr(stmt, "value", None), gast.Call)
        return "" if calls else None  # (a `raise` is "unknown" too: it ends the path)

    def _reads_in(self, stmts) -> set:
        out = set()
        for stmt in stmts:
            for s in nodes.statements([stmt]):
                read = self._read(s)
                if read is not None:
                    out.add(read)
        return out

    def _walk(self, stmts, later) -> frozenset:
        """Walk ``stmts`` backwards given what is read after them; what is read from their start."""
        for stmt in reversed(stmts):
            if isinstance(stmt, (gast.For, gast.While)):
                around = later | self._reads_in(stmt.body)  # (the next iteration reads these)
                self._walk(stmt.body, frozenset(around))
                later = frozenset(around)
            elif isinstance(stmt, gast.If):
                later = self._walk(stmt.body, later) | self._walk(stmt.orelse, later)
            elif anno.get(stmt, "kind") == "setattr":
                self.read_after[id(stmt)] = stmt.targets[0].attr in later or "" in later
            elif anno.get(stmt, "kind") == "setentry" and self.entry_store(stmt) is not None:
                key = templates.static_value(anno.get(stmt, "index"))
                key = key if type(key) in (str, int, bool) else templates.UNKNOWN
                self.read_after[id(stmt)] = _touches(later, self.entry_store(stmt)[1], key)
                self.by_call_only[id(stmt)] = _touches(later - {""}, self.entry_store(stmt)[1], key) is False
            elif self.grows(stmt) is not None:
                self.read_after[id(stmt)] = _touches(later, self.grows(stmt)[1], templates.UNKNOWN)
                self.by_call_only[id(stmt)] = _touches(later - {""}, self.grows(stmt)[1], templates.UNKNOWN) is False
            else:
                read = self._read(stmt)
                if read is not None:
                    later = later | {read}
        return later

    def advice(self, store, attr) -> str:
        """What to write instead of a store or grow that something reads back."""
        if self.by_call_only.get(id(store)):
            origin = anno.get(store, "origin")
            text = origin.text.strip() if origin is not None else ""
            later = "a call after it (of code srcgrad does not inline: a layer that keeps state of its own) " \
                f"may read `.{attr}`: "
            if anno.get(store, "kind") == "setentry" and "[" in text:
                held = text[:text.index("[")]
                return later + (f"collect the values in a local dict and store them after the loop or the call "
                                f"(`values[key] = v` in the loop, `{held}.update(values)` after it)")
            head = text.split("(")[0]  # (`self.derived["Z"].append`)
            held = head[:head.rindex(".")] if "." in head else f"self.{attr}"
            return later + (f"collect the values in a local list and store them after the loop or the call "
                            f"(`values.append(v)` in the loop, `{held}.extend(values)` after it)")
        return (f"use the value itself where it is read, rather than reading it back from `.{attr}`, "
                "or build the list in a local name and return it (with has_aux=True)")

    def read_back(self, store) -> bool:
        return self.read_after.get(id(store), True)

    def after_call(self, read) -> bool:
        """Whether a call of the user's code that is not inlined may run before ``read`` (a
        field read): it may have stored the field with no adjoint (``rt.field`` checks)."""
        if self.reads_after_calls is None:
            self.reads_after_calls = set()
            self._forward(self.body, False)
        return id(read) in self.reads_after_calls

    def _forward(self, stmts, called) -> bool:
        for stmt in stmts:
            if isinstance(stmt, (gast.For, gast.While)):
                called = self._forward(stmt.body, called or "" in self._reads_in(stmt.body))
            elif isinstance(stmt, gast.If):
                called = self._forward(stmt.body, called) | self._forward(stmt.orelse, called)
            else:
                read = self._read(stmt, keyed=False)
                if read == "":
                    called = True
                elif read is not None and called:
                    self.reads_after_calls.add(id(stmt))
        return called


def _stored_target(origin) -> str:
    """``self.stats["sum"]`` of the line ``self.stats["sum"] += v``."""
    return re.split(r"\s*[-+*/@%&|^]*=", origin.text.strip())[0] if origin is not None else "an entry"


def _entry_name(field, key) -> str:
    return f"{field}[{key!r}]"


def _touches(reads, field, key) -> bool:
    """Whether ``reads`` (what ``_StoresReadBack._read`` gives) take in what a store into
    ``field`` (an entry ``key`` of it; UNKNOWN: any) replaced."""
    if "" in reads or field in reads:
        return True
    if key is templates.UNKNOWN:
        return any(r.startswith(field + "[") for r in reads)
    return _entry_name(field, key) in reads


class _ActiveReads:
    """Where the right-hand sides of active assignments read each name, found once
    (what reverse adds to the body later, pushes and trip counts, reads none)."""

    def __init__(self, body, activity):
        self.position, self.first, self.in_loop, self.loops = {}, {}, {}, {}
        self._walk(body, activity, [])

    def _walk(self, stmts, activity, loops):
        for stmt in stmts:
            self.position[id(stmt)] = len(self.position)
            self.loops[id(stmt)] = loops
            if isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name) \
                    and activity.active(stmt.targets[0].id):
                for n in nodes.loaded_names(stmt.value):
                    self.first.setdefault(n, len(self.position))
                    for loop in loops:
                        self.in_loop.setdefault(id(loop), set()).add(n)
            inner = loops + [stmt] if isinstance(stmt, (gast.For, gast.While)) else loops
            for field in ("body", "orelse"):
                self._walk(getattr(stmt, field, None) or [], activity, inner)

    def before(self, name, stmt) -> bool:
        """Whether an active assignment reads ``name`` before ``stmt`` runs: earlier in
        the function, or anywhere in a loop around ``stmt``."""
        return self.first.get(name, len(self.position) + 1) <= self.position[id(stmt)] \
            or any(name in self.in_loop.get(id(loop), ()) for loop in self.loops[id(stmt)])


_READS_ONLY = {"builtins.print", "srcgrad.specialise.Guards.check",
               "srcgrad.nn.functional._check_exact_gelu", "srcgrad.nn.functional._check_reduction"}
_CONTAINERS = {f"builtins.{t}" for t in ("list", "tuple", "dict", "set", "frozenset", "zip", "enumerate",
                                          "reversed", "map", "filter")}


def _index(stmts, stmt) -> int:
    return next(i for i, s in enumerate(stmts) if s is stmt)


def _carry_position(body) -> int:
    """Where to add statements at the end of a loop body: before its carry copies."""
    for i, s in enumerate(body):
        if anno.get(s, "carry"):
            return i
    return len(body)


def _reversed_iteration(iter_):
    """The iteration that visits a ``range`` loop's indices last to first."""
    if isinstance(iter_.func, gast.Name) and iter_.func.id == "reversed":
        return nodes.copy(iter_.args[0])
    return nodes.call("reversed", [nodes.copy(iter_)])


def _definite(block) -> set:
    """Names certainly bound after a block runs: by its simple statements, or by both
    branches of an ``if`` in it.  (A nested loop may run zero times: its names are
    saved by the loop itself.)"""
    names = set()
    for stmt in block:
        if isinstance(stmt, gast.If):
            names |= _definite(stmt.body) & _definite(stmt.orelse)
        elif not isinstance(stmt, (gast.For, gast.While)):
            names.update(nodes.assigned_names(stmt))
    return names
