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
import types

import gast

from .. import anno, errors, nodes, runtime, templates
from ..analysis import refusals
from ..analysis.activity import derivative_inputs as activity_inputs
from ..analysis.mutation import _is_srcgrad_grad
from ..analysis.nondifferentiable import _builtin_rule, _self_keyword
from ..analysis.ranks import rank_of
from ..rules.registry import diff_params
from ..rules.registry import lookup as registry_lookup
from ..tree import TreeRank


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
        if kind == "unknown":
            raise self.refusals.no_rule(stmt)
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

    def _append_adjoint(self, stmt):
        """Reverse of ``xs.append(h)``: the last adjoint on ``xs_bar`` is ``h``'s."""
        xs, value = anno.get(stmt, "list"), anno.get(stmt, "value")
        if not self.activity.active(xs):
            return
        self.refusals.check_holders(stmt, xs)
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
        self.refusals.check_holders(stmt, xs)
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
        self.refusals.check_spread(stmt, args, kwargs)
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

def _unbroadcasts(expr, name) -> bool:
    """Whether ``expr`` is ``rt.unbroadcast(..., name)`` (a built-in rule's own)."""
    func = getattr(expr, "func", None)
    return isinstance(expr, gast.Call) and isinstance(func, gast.Attribute) and func.attr == "unbroadcast" \
        and isinstance(func.value, gast.Name) and func.value.id == "rt" \
        and len(expr.args) == 2 and isinstance(expr.args[1], gast.Name) and expr.args[1].id == name


# The statements whose adjoint is a method of their own, by kind.
_STATEMENT_ADJOINTS = {
    "setitem": _Reverse._setitem_adjoint,
    "append": _Reverse._append_adjoint,
    "pop": _Reverse._pop_adjoint,
}


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
