"""Pass 6 (reverse), control flow: branches, loops and the stacks of saved values.

The reverse of ``if c: A else: B`` is ``if c: reverse(A) else: reverse(B)``; the reverse of
a loop runs as many iterations, last first (a ``while`` loop counts its trips).  Each
forward iteration (and each branch taken in a loop) pushes the values its backward
iteration reads onto a stack (``loop1_stack``), which the backward iteration pops.

Requires: what :class:`~.reverse._Reverse` holds (its ``__init__`` sets the state these
methods read); a :class:`~srcgrad.ir.Core` body whose loops carry their ``carried`` and
``first_defined`` annotations.
Guarantees: the backward block of each compound statement, appended to the backward
sweep; the pushes inserted into the forward sweep's loops and branches, the stacks'
creations into ``saves``, a line for each stack and trip count into ``notes``.
``optimize.prune_saves`` later drops what the optimized code does not read.
"""
from __future__ import annotations

import gast

from ..anno import Kind
from .. import anno, nodes
from ..analysis.activity import derivative_inputs as activity_inputs


class _ControlFlow:
    """The adjoints of blocks, branches and loops, a part of :class:`~.reverse._Reverse`."""

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
            elif anno.get(s, "kind") in (Kind.SETITEM, Kind.APPEND) \
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
