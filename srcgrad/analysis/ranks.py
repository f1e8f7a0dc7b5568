"""Rank inference: the number of dimensions of each value, where it is known.

Compiled code is specialised on the ranks of the arguments (part of the cache
key), so rules can pick the readable form (``x.T @ g`` for 2-D operands)
instead of a general helper.  Unknown stays ``None`` and rules fall back to
code that is correct for every rank.
"""
from __future__ import annotations

import gast

from .. import anno
from ..rules.registry import elementwise_ndim
from ..templates import UNKNOWN, static_value


def rank_of(atom, env):
    if isinstance(atom, gast.Name):
        return env.get(atom.id)
    if isinstance(atom, gast.Constant) and isinstance(atom.value, (int, float, bool)):
        return 0
    return None


def infer(body, param_ranks: dict) -> dict:
    env = dict(param_ranks)
    for stmt in body:
        if not isinstance(stmt, gast.Assign):
            continue
        target, value, kind = stmt.targets[0].id, stmt.value, anno.get(stmt, "kind")
        rank = None
        if kind == "copy":
            rank = rank_of(value, env)
        elif kind == "op" or (kind == "nondiff" and anno.get(stmt, "rule") is not None
                              and anno.get(stmt, "rule").ndim is not None and anno.has(stmt, "bound")):
            rule, bound = anno.get(stmt, "rule"), anno.get(stmt, "bound")
            ndims = {p: rank_of(a, env) for p, a in bound.items()
                     if isinstance(a, gast.Name) or (isinstance(a, gast.Constant)
                                                     and isinstance(a.value, (int, float)))}
            statics = {p: v for p, a in bound.items() if (v := static_value(a)) is not UNKNOWN}
            if rule.ndim is not None:
                rank = rule.ndim(ndims, statics)
        elif isinstance(value, gast.Compare):
            operands = [value.left] + value.comparators
            rank = elementwise_ndim({i: rank_of(a, env) for i, a in enumerate(operands)}, {})
        env[target] = rank
    return env
