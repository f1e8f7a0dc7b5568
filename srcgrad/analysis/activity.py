"""Activity analysis: which values need an adjoint.

A value is *varied* if it depends differentiably on a ``wrt`` parameter and
*useful* if the output depends differentiably on it; it is *active* if both
(Hascoët & Pascual, "The Tapenade automatic differentiation tool", TOMS 2013,
§3.1).  Only active values get adjoints: no ``x_bar`` for data ``x``.

Requires: a :class:`~srcgrad.transforms.anf.Core` program (single assignment).
"""
from __future__ import annotations

import dataclasses

import gast

from .. import anno, nodes


@dataclasses.dataclass(frozen=True)
class Activity:
    varied: frozenset
    useful: frozenset

    def active(self, name: str) -> bool:
        return name in self.varied and name in self.useful


def _target(stmt):
    if isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name):
        return stmt.targets[0].id
    if isinstance(stmt, gast.FunctionDef):
        return stmt.name
    if anno.get(stmt, "kind") == "setitem":
        return anno.get(stmt, "array")  # an in-place write changes the array
    if anno.get(stmt, "kind") == "append":
        return anno.get(stmt, "list")
    return None


def derivative_inputs(stmt) -> list[str]:
    """Names whose adjoints a statement's adjoint feeds."""
    kind = anno.get(stmt, "kind")
    if kind == "copy":
        return nodes.loaded_names(stmt.value)
    if kind == "op":
        rule, bound = anno.get(stmt, "rule"), anno.get(stmt, "bound")
        names = []
        for param in rule.diff_params:
            names += nodes.loaded_names(bound[param]) if param in bound else []
        return names
    if kind == "unknown":
        return nodes.loaded_names(stmt.value)
    if kind == "def":
        return list(anno.get(stmt, "captures"))
    if kind == "append":
        return nodes.loaded_names(anno.get(stmt, "value")) + [anno.get(stmt, "list")]
    if kind in ("pop", "item"):
        return [anno.get(stmt, "list")]
    if kind == "setitem":
        return nodes.loaded_names(anno.get(stmt, "value")) + [anno.get(stmt, "array")]
    if kind == "aggregate":
        return [n for a in anno.get(stmt, "elements").values() for n in nodes.loaded_names(a)]
    if kind == "unpack":
        return [anno.get(stmt, "source")]
    if kind == "call":
        receiver = anno.get(stmt, "receiver")
        names = nodes.loaded_names(receiver) if receiver is not None else []
        names += [n for a in anno.get(stmt, "args") for n in nodes.loaded_names(a)]
        return names + [n for a in anno.get(stmt, "kwargs").values() for n in nodes.loaded_names(a)]
    return []


def analyze(body, wrt) -> Activity:
    """Varied and useful names, iterated to a fixed point over loops and branches."""
    flat = list(nodes.statements(body))
    varied, changed = set(wrt), True
    while changed:
        changed = False
        for stmt in flat:
            target = _target(stmt)
            if target and target not in varied and any(n in varied for n in derivative_inputs(stmt)):
                varied.add(target)
                changed = True
    useful, changed = set(), True
    while changed:
        changed = False
        for stmt in reversed(flat):
            if isinstance(stmt, gast.Return):
                found = set(nodes.loaded_names(stmt.value))
            elif _target(stmt) in useful:
                found = set(derivative_inputs(stmt))
            else:
                continue
            if not found <= useful:
                useful |= found
                changed = True
    return Activity(frozenset(varied), frozenset(useful))
