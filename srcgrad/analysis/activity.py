"""Activity analysis: which values need an adjoint.

A value is *varied* if it depends differentiably on a ``wrt`` parameter and
*useful* if the output depends differentiably on it; it is *active* if both
(Hascoët & Pascual, "The Tapenade automatic differentiation tool", TOMS 2013,
§3.1).  Only active values get adjoints: no ``x_bar`` for data ``x``.

Requires: a :class:`~srcgrad.ir.Core` program (single assignment).
"""
from __future__ import annotations

import dataclasses

import gast

from ..anno import Kind
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
    if anno.get(stmt, "kind") == Kind.SETITEM:
        return anno.get(stmt, "array")  # an in-place write changes the array
    if anno.get(stmt, "kind") == Kind.APPEND:
        return anno.get(stmt, "list")
    return None


def derivative_inputs(stmt) -> list[str]:
    """Names whose adjoints a statement's adjoint feeds."""
    kind = anno.get(stmt, "kind")
    if kind == Kind.COPY:
        return nodes.loaded_names(stmt.value)
    if kind == Kind.OP:
        rule, bound = anno.get(stmt, "rule"), anno.get(stmt, "bound")
        names = []
        for param in rule.diff_params:
            names += nodes.loaded_names(bound[param]) if param in bound else []
        return names
    if kind == Kind.UNKNOWN:
        return nodes.loaded_names(stmt.value)
    if kind == Kind.DEF:
        return list(anno.get(stmt, "captures"))
    if kind == Kind.APPEND:
        return nodes.loaded_names(anno.get(stmt, "value")) + [anno.get(stmt, "list")]
    if kind in (Kind.POP, Kind.ITEM):
        return [anno.get(stmt, "list")]
    if kind == Kind.SETITEM:
        return nodes.loaded_names(anno.get(stmt, "value")) + [anno.get(stmt, "array")]
    if kind == Kind.AGGREGATE:
        return [n for a in anno.get(stmt, "elements").values() for n in nodes.loaded_names(a)]
    if kind == Kind.UNPACK:
        return [anno.get(stmt, "source")]
    if kind == Kind.CALL:
        receiver = anno.get(stmt, "receiver")
        names = nodes.loaded_names(receiver) if receiver is not None else []
        names += [n for a in anno.get(stmt, "args") for n in nodes.loaded_names(a)]
        return names + [n for a in anno.get(stmt, "kwargs").values() for n in nodes.loaded_names(a)]
    return []


def analyze(body, wrt) -> Activity:
    """Varied and useful names: one worklist over the def-use of names each way.

    Flow-insensitive, so a loop-carried dependency (a name a later iteration
    reads) is one more use of that name: no rounds over loops and branches.
    Varied spreads forward from ``wrt`` along ``derivative_inputs``; useful
    spreads backward from the returned names."""
    users, definers = {}, {}  # name -> statements whose adjoint feeds its adjoint / that assign it
    inputs = {}  # id(statement) -> its derivative_inputs
    returned = []
    for stmt in nodes.statements(body):
        if isinstance(stmt, gast.Return):
            returned += nodes.loaded_names(stmt.value)
            continue
        target = _target(stmt)
        if not target:
            continue
        inputs[id(stmt)] = derivative_inputs(stmt)
        definers.setdefault(target, []).append(stmt)
        for n in inputs[id(stmt)]:
            users.setdefault(n, []).append(target)
    varied = _closure(wrt, users)
    useful = _closure(returned, {t: [n for stmt in stmts for n in inputs[id(stmt)]]
                                 for t, stmts in definers.items()})
    return Activity(frozenset(varied), frozenset(useful))


def _closure(start, edges) -> set:
    """``start`` and every name reachable from it along ``edges`` (name -> names)."""
    found, todo = set(start), list(start)
    while todo:
        for n in edges.get(todo.pop(), ()):
            if n not in found:
                found.add(n)
                todo.append(n)
    return found
