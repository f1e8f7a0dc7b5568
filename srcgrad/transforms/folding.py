"""Branches that literals or the kinds of arguments decide, folded to the one taken.

Requires: a resolved ``FunctionDef`` (``isinstance`` read as ``resolved``), or the statements of a
callee about to be inlined.
Guarantees: ``fold_decided_kinds``: each ``isinstance(p, T)`` of a parameter the function never
assigns, whose kind (an array, a sequence, a mapping, an object) decides it, is its value;
``_put_literals``: where a branch tests a parameter the call gives a literal, the literal; and
``_folded``: each ``if`` (and ``a if c else b``) whose test is then decided is the branch it takes:
the other never runs, so it is neither inlined nor differentiated (nor refused).
"""
from __future__ import annotations

import types

import gast

from .. import anno, nodes


_TESTED = {gast.If: ("test",), gast.BoolOp: ("values",), gast.UnaryOp: ("operand",), gast.Call: ("args",),
           gast.IfExp: ("test",)}


def _user_function(fn) -> bool:
    return isinstance(fn, types.FunctionType) and not (fn.__module__ or "").split(".")[0] in (
        "numpy", "scipy", "cupy", "srcgrad", "builtins")


def _put_literals(stmts, literals: dict) -> None:
    """Each read of a parameter in ``literals`` (one the callee never assigns) as its literal
    where a branch tests it or a call is given it (``if ax:``, ``mode == "same"``,
    ``plot(ax, x)``); elsewhere the parameter stays, bound to it as any argument is."""
    def put(node):
        if isinstance(node, gast.Name) and node.id in literals and isinstance(node.ctx, gast.Load):
            return anno.inherit(nodes.copy(literals[node.id]), node)
        if isinstance(node, gast.Compare) and any(put(n) is not n for n in [node.left, *node.comparators]):
            # Decided by literals: its value (else left as it is: `2 is x` would be Python's warning).
            decided = _decided(gast.Compare(left=put(node.left), ops=node.ops,
                                            comparators=[put(c) for c in node.comparators]))
            return node if decided is _UNDECIDED else anno.inherit(nodes.const(decided), node)
        return node

    for parent in [n for s in stmts for n in nodes.walk(s)]:
        if isinstance(parent, gast.Call):
            if _user_function(anno.get(parent.func, "resolved", None)):  # (it may be inlined in turn)
                for k in parent.keywords:
                    k.value = put(k.value)
            else:
                continue
        for field, value in gast.iter_fields(parent):
            if field not in _TESTED.get(type(parent), ()):
                continue
            if isinstance(value, list):
                value[:] = [put(item) for item in value]
            else:
                setattr(parent, field, put(value))


def kinds_of(fdef, param_ranks: dict) -> dict:
    """``{parameter: rank}`` of the parameters ``fdef`` never assigns, whose rank is known."""
    assigned = {n.id for s in fdef.body for n in nodes.walk(s) if isinstance(n, gast.Name)
                and not isinstance(n.ctx, gast.Load)}
    return {p: r for p, r in param_ranks.items() if p not in assigned and r is not None}


def fold_decided_kinds(fdef, param_ranks: dict) -> None:
    """Each ``isinstance(p, T)`` of a parameter ``p`` the function never assigns, whose kind
    the code is specialised on and decides it, as its value, and the ``if``s it decides
    folded (``_folded``): a pytree helper's ``if isinstance(v, (list, tuple)):`` compiled
    for a list, or for an array, keeps the one branch that runs (the other, `v * v` of a
    list, would be refused).  ``param_ranks``: ``{parameter: rank}`` as the pipeline's (an
    int for an array or a number, a ``TreeRank`` for a structure)."""
    kinds = kinds_of(fdef, param_ranks)
    if not kinds:
        return
    changed = False
    for node in nodes.walk(fdef):
        for field, value in gast.iter_fields(node):
            if isinstance(value, gast.Call):
                decided = _decided_kind(value, kinds)
                if decided is not None:
                    setattr(node, field, anno.inherit(nodes.const(decided), value))
                    changed = True
    if changed:
        fdef.body = _folded(fdef.body) or [gast.Pass()]


def _decided_kind(call, kinds):
    if not (anno.get(call.func, "resolved") is isinstance and len(call.args) == 2 and not call.keywords
            and isinstance(call.args[0], gast.Name) and call.args[0].id in kinds):
        return None
    types = {anno.get(k, "resolved") for k in (call.args[1].elts if isinstance(call.args[1], gast.Tuple)
                                                 else [call.args[1]])}
    if not types or not types <= {list, tuple, dict}:
        return None
    rank = kinds[call.args[0].id]
    kind = getattr(rank, "kind", None)
    if isinstance(rank, int) or kind == "object":
        return False  # an array or a number; an object of the user's
    if kind == "sequence":
        return True if {list, tuple} <= types else False if not types & {list, tuple} else None
    if kind == "mapping":
        return True if dict in types else None
    return None


def _folded(stmts) -> list:
    """``stmts`` with each ``if`` whose test literals decide (``if ax:`` given ``ax=None``,
    ``if mode == "same":``) replaced by the branch it takes: the other never runs, so it
    is neither inlined nor differentiated (nor refused)."""
    out = []
    for stmt in stmts:
        for field in ("body", "orelse"):
            if isinstance(getattr(stmt, field, None), list) and not isinstance(stmt, gast.FunctionDef):
                setattr(stmt, field, _folded(getattr(stmt, field)))
        if not isinstance(stmt, gast.FunctionDef):
            _FoldedChoices().visit(stmt)
        decided = _decided(stmt.test) if isinstance(stmt, gast.If) else _UNDECIDED
        if decided is _UNDECIDED:
            out.append(stmt)
        else:
            out += stmt.body if decided else stmt.orelse
        if out and isinstance(out[-1], (gast.Return, gast.Raise)):
            break  # (what follows never runs)
    return out


class _FoldedChoices(gast.NodeTransformer):
    """``a if c else b`` whose test literals decide (``-np.inf if maximum else 0.0`` given
    ``maximum=True``): the branch it takes."""

    def visit_IfExp(self, node):
        self.generic_visit(node)
        decided = _decided(node.test)
        return node if decided is _UNDECIDED else (node.body if decided else node.orelse)

    def visit_Lambda(self, node):
        return node  # (its own scope: its parameters may shadow the literal's name)


_UNDECIDED = object()
_COMPARISONS = {gast.Eq: lambda a, b: a == b, gast.NotEq: lambda a, b: a != b,
                gast.Is: lambda a, b: a is b, gast.IsNot: lambda a, b: a is not b}


def _decided(test):
    """The truth of ``test`` where literals alone decide it, else ``_UNDECIDED``."""
    if isinstance(test, gast.Constant):
        return bool(test.value)
    if isinstance(test, gast.UnaryOp) and isinstance(test.op, gast.Not):
        inner = _decided(test.operand)
        return inner if inner is _UNDECIDED else not inner
    if isinstance(test, gast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in _COMPARISONS \
            and isinstance(test.left, gast.Constant) and isinstance(test.comparators[0], gast.Constant):
        left, right = test.left.value, test.comparators[0].value
        if isinstance(test.ops[0], (gast.Is, gast.IsNot)) and not (left is None or right is None
                                                                   or isinstance(left, bool) or isinstance(right, bool)):
            return _UNDECIDED  # (`is` between other literals: Python's interning decides)
        return bool(_COMPARISONS[type(test.ops[0])](left, right))
    if isinstance(test, gast.BoolOp):  # (left to right: a part before the deciding one may call)
        stop = not isinstance(test.op, gast.And)
        for value in test.values:
            part = _decided(value)
            if part is _UNDECIDED or part == stop:
                return part
        return not stop
    return _UNDECIDED
