"""Pass 6 (forward mode), batched: tangents with a leading axis of columns.

For ``jacfwd`` and ``hessian``, every tangent carries a leading axis of columns
(``runtime.batch_*`` say how), so one run gives many directional derivatives.
Pointwise rules get their operands' tangents aligned to the output's rank; matmul,
getitem, sum/mean, reshapes, reductions and the adjoints' accumulation have batched
forms; any other linear map runs column by column (``rt.batch_each``).  What it cannot
batch soundly (calls compiled apart, properties, operands of unknown kind) raises
:class:`NotBatchable`: the caller loops over the columns instead.

Requires: what :class:`~.forward._Forward` holds (its ``__init__`` sets the state these
methods read), with ``batched`` set.
Guarantees: the batched tangent expression of a primitive's value; ``_batch_helpers``
renames forward mode's runtime helpers in generated code to their batched forms.
"""
from __future__ import annotations

import gast

from .. import nodes, templates
from ..analysis.ranks import rank_of


class _BatchedTangents:
    """The batched tangents of primitives, a part of :class:`~.forward._Forward`."""

    def _unbatchable(self):
        if self.batched:
            raise NotBatchable

    def _batched_tangent(self, stmt, rule, bound, varying, target, out):
        """The batched tangent expression of ``target = <primitive>(atoms)``."""
        how, name = rule.tangent, rule.name
        if how == "pointwise" and rule.elementwise and name.split(".")[0] in ("numpy", "_operator") \
                and name not in ("numpy.float64", "numpy.float32"):
            site = self._site(stmt, rule, bound, target, out)
            for param in varying:  # each tangent lifted to the output's rank, so columns stay first
                atom = bound[param]
                if rank_of(atom, self.ranks) != rank_of(nodes.name(target), self.ranks) \
                        or rank_of(atom, self.ranks) is None:
                    lifted = self.core.fresh(f"{atom.id}_dot" if isinstance(atom, gast.Name) else None)
                    self._emit(out, lifted, nodes.call("rt.batch_aligned", [site.bindings[param + "_dot"],
                                                                            nodes.name(target)]))
                    site.bindings[param + "_dot"] = nodes.name(lifted)
                    self.lifted.add(lifted)
            return self._pointwise(rule, bound, site, varying, target, out)
        if how == "linear":
            (a, *_), atom = varying, bound.get(varying[0])
            if name == "_operator.getitem" and isinstance(stmt.value, gast.Subscript):
                return nodes.call("rt.batch_getitem", [self._tangent_of(stmt.value.value),
                                                       templates._slices_as_calls(nodes.copy(stmt.value.slice))])
            if isinstance(stmt.value, gast.Attribute) and "obj" in bound and self._plain_field(bound):
                return self._applied(stmt, rule, {p: None for p in varying})  # a structure's field
            plain_array = varying == ["a"] and isinstance(atom, gast.Name) and isinstance(
                rank_of(atom, self.ranks), int)
            if plain_array and name in _RESHAPES and "order" not in bound:
                return nodes.call("rt.batch_reshape", [self._tangent_of(atom), nodes.name(target)])
            if plain_array and name in ("numpy.sum", "numpy.mean") and set(bound) <= {"a", "axis", "keepdims"}:
                return nodes.call(f"{self.module}.{name.split('.')[1]}", [self._tangent_of(atom)], [
                    ("axis", nodes.call("rt.batch_axis", [nodes.copy(bound.get("axis", nodes.const(None))),
                                                          nodes.copy(atom)])),
                    ("keepdims", nodes.copy(bound.get("keepdims", nodes.const(False))))])
            return self._cast(rule, bound, target, self._each(
                self._applied(stmt, rule, {p: None for p in varying}), target))
        if how == "bilinear":
            terms = []
            for p in varying:
                for index in self._slots(bound[p], rule, p):
                    if name in _MATMULS and all(isinstance(bound.get(q), gast.Name) for q in ("x1", "x2")):
                        operands = [self._tangent_of(bound[q]) if q == p else nodes.copy(bound[q])
                                    for q in ("x1", "x2")]
                        terms.append(nodes.call("rt.batch_matmul", operands + [nodes.const(1 if p == "x1" else 2)]))
                    else:
                        terms.append(self._each(self._applied(stmt, rule, {p: index}), target))
            total = terms[0]
            for term in terms[1:]:
                total = nodes.binop(total, "+", term)
            return total
        if how == "reduction":
            return self._reduction(stmt, rule, bound, varying, target, out)
        if how in (None,) or isinstance(how, str):
            raise NotBatchable
        site = self._site(stmt, rule, bound, target, out)
        if name == "srcgrad.tree.add":  # the adjoints' accumulation: vectorised
            return nodes.call("rt.batch_add", [site.bindings["a_dot"], site.bindings["b_dot"], nodes.name(target)])
        helper = self.core.fresh(getattr(how, "__name__", "tangent"))
        self.extras[helper] = how
        keywords = [(p, nodes.copy(a)) for p, a in bound.items()] + [
            (p + "_dot", site.bindings[p + "_dot"]) for p in rule.diff_params]
        return self._each(nodes.call(helper, [nodes.name(target)], keywords), target)

    def _each(self, expression, target):
        """``rt.batch_each(lambda x_dot: <expression>, x_dot)``: ``expression``, linear
        in the batched tangents it reads, applied to one column of them at a time."""
        batched = list(dict.fromkeys(n for n in nodes.loaded_names(expression) if n in self._batched_names()))
        if not batched:
            return nodes.call("rt.zeros_tangent", [nodes.name(target)])
        text = f"rt.batch_each(lambda {', '.join(batched)}: {nodes.to_source(expression).strip()}, " \
               f"{', '.join(batched)})"
        return nodes.expr(text)

    def _batched_names(self) -> set:
        return set(self.dot.values()) | self.lifted


class NotBatchable(Exception):
    """The program has a step whose batched tangent srcgrad does not write: take the
    columns one at a time.  (Never shown to the user: ``higher`` loops instead.)"""


# Forward mode's runtime helpers and their batched forms (renamed in batched code,
# outside the per-column lambdas of ``rt.batch_each``).
_BATCHED_HELPERS = {"zeros_tangent": "batch_zeros", "broadcast_tangent": "batch_broadcast",
                    "cast_tangent": "batch_cast", "reduction_tangent": "batch_reduction_tangent"}
# Linear primitives whose batched tangent is a reshape of the column axis's rows.
_RESHAPES = {"numpy.reshape", "numpy.ravel", "numpy.squeeze", "numpy.expand_dims"}
_MATMULS = {"_operator.matmul", "numpy.matmul"}


def _batch_helpers(node):
    """Forward mode's runtime helpers in ``node`` renamed to their batched forms, except
    inside the per-column lambdas of ``rt.batch_each`` (which see unbatched tangents)."""
    if isinstance(node, gast.Lambda):
        return
    if isinstance(node, gast.Attribute) and isinstance(node.value, gast.Name) and node.value.id == "rt" \
            and node.attr in _BATCHED_HELPERS:
        node.attr = _BATCHED_HELPERS[node.attr]
    for child in gast.iter_child_nodes(node):
        _batch_helpers(child)
