"""Pass 6 (reverse), primitives: a primitive's adjoint, instantiated from its rule.

``h = np.tanh(a)``'s adjoint is its rule's (``rules/``) template with ``ans_bar`` bound to
``h_bar`` and its parameters to the call's atoms, only the adjoints wanted (those of the
active arguments) built.  An elementwise rule's adjoint is summed back to its argument's
shape (``rt.unbroadcast``) where the argument may have been broadcast; a list or tuple
NumPy reads as an array gets its adjoint item by item (``rt.rows_adjoint``); each item of
a list display (``np.stack([a, b])``) gets its part.

Requires: what :class:`~.reverse._Reverse` holds (its ``__init__`` sets the state these
methods read); an ``op`` statement's ``rule`` and ``bound`` annotations.
Guarantees: the rule's statements appended to the backward sweep, each active
argument's adjoint accumulated; a rule that refuses its static arguments
(``Rule.refuse``) is refused at the user's line.
"""
from __future__ import annotations

import functools

import gast

from .. import anno, errors, nodes, templates
from ..analysis.nondifferentiable import _builtin_rule
from ..analysis.ranks import rank_of
from ..rules.registry import diff_params
from ..tree import TreeRank


class _RuleAdjoints:
    """The adjoints of primitives from their rules, a part of :class:`~.reverse._Reverse`."""

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


def _unbroadcasts(expr, name) -> bool:
    """Whether ``expr`` is ``rt.unbroadcast(..., name)`` (a built-in rule's own)."""
    func = getattr(expr, "func", None)
    return isinstance(expr, gast.Call) and isinstance(func, gast.Attribute) and func.attr == "unbroadcast" \
        and isinstance(func.value, gast.Name) and func.value.id == "rt" \
        and len(expr.args) == 2 and isinstance(expr.args[1], gast.Name) and expr.args[1].id == name
