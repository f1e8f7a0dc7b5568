"""Pass 6 (reverse), containers: the adjoints of lists grown here and of writes into arrays.

A list changed in place (``xs.append(h)``, ``h = xs.pop(i)``, ``h = xs[i]``) has for adjoint
a list of adjoints, one per item, that the appends' adjoints pop; each change is undone in
the backward sweep, so the list is as it was at each point.  A write ``y[i] = v`` gives
``v`` the adjoint ``y_bar[i]``, zeroes it (the overwritten elements had no effect), and
puts the old values back (``saved`` by normalize).

Requires: what :class:`~.reverse._Reverse` holds (its ``__init__`` sets the state these
methods read); ``append``, ``pop``, ``item`` and ``setitem`` statements' annotations.
Guarantees: the adjoints appended to the backward sweep, followed by the statements
restoring the primal list or array (annotated ``restores`` / ``restore``).
"""
from __future__ import annotations

import gast

from .. import anno, nodes, templates
from ..analysis.ranks import rank_of


class _ContainerAdjoints:
    """The adjoints of lists changed in place and writes into arrays, a part of
    :class:`~.reverse._Reverse`."""

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
