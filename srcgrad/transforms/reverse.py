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

import gast

from .. import anno, errors, nodes, templates
from ..rules.registry import diff_params
from ..analysis.ranks import rank_of


@dataclasses.dataclass
class Sweeps:
    forward: list
    backward: list
    adjoints: dict  # wrt parameter -> name of its adjoint variable
    seed: str       # name of the output's adjoint (the pullback's input)
    primal_of: dict  # adjoint variable -> its primal (an adjoint has its primal's shape)


def transform(core, activity, ranks, wrt, backend) -> Sweeps:
    return _Reverse(core, activity, ranks, backend).run(wrt)


@functools.cache
def _returned_locals(adjoint) -> dict:
    """Template locals a rule returns as-is, by parameter (they take the adjoint's name)."""
    fdef = templates._parse(adjoint)
    found = {}
    for node in gast.walk(fdef):
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
        self.backward = []
        self.group = None

    def run(self, wrt) -> Sweeps:
        result = self.core.result
        seed_base = f"{result.id}_bar" if isinstance(result, gast.Name) else "result_bar"
        seed = self.core.fresh(seed_base)
        if isinstance(result, gast.Name) and self.activity.active(result.id):
            self.bar[result.id] = seed
            self.defined.add(result.id)
        forward = [s for s in self.core.body if not isinstance(s, gast.Return)]
        for stmt in reversed(forward):
            self.group = anno.get(stmt, "group")
            self._adjoint(stmt)
        adjoints = {}
        for param in wrt:
            if param not in self.defined:
                zeros = nodes.call(f"{self.backend.MODULE_NAME}.zeros_like", [nodes.name(param)])
                self._append(nodes.assign(self._bar_name(param), zeros), None)
                self.defined.add(param)
            adjoints[param] = self.bar[param]
        return Sweeps(forward, self.backward, adjoints, seed, {b: v for v, b in self.bar.items()})

    def _bar_name(self, var):
        if var not in self.bar:
            self.bar[var] = self.core.fresh(f"{var}_bar")
        return self.bar[var]

    def _append(self, stmt, group):
        anno.set(stmt, "group", group)
        self.backward.append(stmt)

    def _accumulate(self, var, expr):
        name = self._bar_name(var)
        if var not in self.defined:
            self.defined.add(var)
            if isinstance(expr, gast.Name) and expr.id == name:
                return  # the rule already built it under this name
            self._append(nodes.assign(name, expr), self.group)
        else:
            self._append(nodes.assign(name, nodes.binop(nodes.name(name), "+", expr)), self.group)

    def _active_name(self, atom):
        return isinstance(atom, gast.Name) and self.activity.active(atom.id)

    def _adjoint(self, stmt):
        if not isinstance(stmt, gast.Assign):
            return
        target = stmt.targets[0].id
        if not self.activity.active(target):
            return
        kind = anno.get(stmt, "kind")
        if kind == "unknown":
            raise self._no_rule(stmt)
        if target not in self.defined:
            return  # no contribution reached it: its adjoint is zero
        g = nodes.name(self.bar[target])
        if kind == "copy":
            if self._active_name(stmt.value):
                self._accumulate(stmt.value.id, g)
            return
        if kind != "op":
            return
        self._rule_adjoint(stmt, target, g)

    def _rule_adjoint(self, stmt, target, g):
        rule, bound = anno.get(stmt, "rule"), anno.get(stmt, "bound")
        wanted, hints, claimed = set(), {}, set()
        returned = _returned_locals(rule.adjoint)
        for param in rule.diff_params:
            atom = bound.get(param)
            if param in rule.sequence_params and isinstance(atom, (gast.List, gast.Tuple)):
                if any(self._active_name(e) for e in atom.elts):
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
        site = templates.Site(
            bindings=bindings,
            ndim=lambda atom: rank_of(atom, self.ranks),
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
            if param in rule.sequence_params:
                parts = self.core.fresh()
                self._append(nodes.assign(parts, expr), self.group)
                for i, elt in enumerate(atom.elts):
                    if self._active_name(elt):
                        self._accumulate(elt.id, gast.Subscript(value=nodes.name(parts),
                                                                slice=nodes.const(i), ctx=gast.Load()))
            else:
                self._accumulate(atom.id, expr)

    def _same_shape(self, rule, bound):
        """Parameters of an elementwise rule that provably have the output's shape."""
        if not rule.elementwise:
            return set()
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
        callee = anno.get(stmt, "callee")
        if callee is None:
            return errors.at(stmt.value, f"cannot differentiate `{nodes.to_source(stmt.value)}`: "
                             "srcgrad does not know what this attribute is",
                             "use array attributes (.T, .shape) or NumPy functions",
                             kind=errors.NoDerivativeRuleError)
        label = getattr(callee, "__qualname__", None) or repr(callee)
        module = getattr(callee, "__module__", None)
        full = f"{module}.{label}" if module else label
        if inspect.isfunction(callee) and not module.startswith("numpy"):
            advice = ("srcgrad does not yet differentiate through calls to your own functions: "
                      "inline its body here, or give it a rule with "
                      f"@srcgrad.defadjoint({label})")
        else:
            advice = (f"register one: @srcgrad.defadjoint({label}) on a function "
                      "`def rule(ans_bar, ans, <its parameters>): return <adjoint>`")
        return errors.at(stmt.value, f"no derivative rule for `{full}`", advice,
                         kind=errors.NoDerivativeRuleError)
