"""Pass 3 — validate: reject what the compiler cannot differentiate correctly.

Requires: the parsed ``FunctionDef``.
Guarantees: only the constructs listed in ``_STATEMENTS``/``_EXPRESSIONS``
remain; anything else raised as an
:class:`~srcgrad.errors.UnsupportedSyntaxError` that names the user's line and
says what to write instead.  Reporting is better than a silently wrong
gradient.
"""
from __future__ import annotations

import gast

from .. import errors

_CONTROL_FLOW = (
    "until srcgrad's reverse mode handles control flow, express data-dependent "
    "choices with np.where(cond, a, b) and fixed repetition by writing the steps out"
)

_ADVICE = {
    gast.If: _CONTROL_FLOW,
    gast.For: _CONTROL_FLOW,
    gast.While: _CONTROL_FLOW,
    gast.IfExp: _CONTROL_FLOW,
    gast.BoolOp: _CONTROL_FLOW,
    gast.With: "move the `with` block out of the differentiated function",
    gast.Try: "move error handling out of the differentiated function",
    gast.Lambda: "define the function with `def` at module level",
    gast.FunctionDef: "define the helper at module level",
    gast.ListComp: "build the list with explicit statements, or use a vectorised NumPy call",
    gast.GeneratorExp: "use a vectorised NumPy call instead",
    gast.Yield: "a differentiated function must return its value",
    gast.Global: "pass the value in as an argument",
    gast.Nonlocal: "pass the value in as an argument",
    gast.Delete: "drop the `del` statement",
}

_STATEMENTS = (gast.Assign, gast.AugAssign, gast.Return, gast.Expr, gast.Pass)
_EXPRESSIONS = (
    gast.Name, gast.Constant, gast.BinOp, gast.UnaryOp, gast.Call, gast.Attribute,
    gast.Subscript, gast.Slice, gast.Tuple, gast.List, gast.Compare, gast.keyword,
    gast.Starred,
)
_CONTEXTS = (gast.Load, gast.Store, gast.Param, gast.Del)
_OPERATORS = (gast.operator, gast.unaryop, gast.cmpop)


def _describe(node) -> str:
    return {gast.IfExp: "conditional expressions (`a if c else b`)",
            gast.BoolOp: "`and`/`or`", gast.FunctionDef: "nested `def`"}.get(
        type(node), f"`{type(node).__name__.lower()}` statements"
        if isinstance(node, gast.stmt) else f"`{type(node).__name__}` expressions")


def transform(fdef: gast.FunctionDef) -> None:
    args = fdef.args
    if args.vararg is not None or args.kwarg is not None:
        raise errors.at(fdef, "cannot differentiate a function with *args or **kwargs yet",
                        "list the parameters explicitly")
    for stmt in fdef.body:
        _check_statement(stmt)
    last = fdef.body[-1]
    if not isinstance(last, gast.Return) or last.value is None:
        raise errors.at(last, "the differentiated function must end with `return <value>`",
                        "return the value whose gradient you want")
    for stmt in fdef.body[:-1]:
        if isinstance(stmt, gast.Return):
            raise errors.at(stmt, "an early `return` is not supported yet",
                            "make the `return` the last statement")


def _check_statement(stmt):
    if not isinstance(stmt, _STATEMENTS):
        raise errors.at(stmt, f"srcgrad cannot differentiate {_describe(stmt)} yet",
                        _ADVICE.get(type(stmt), "rewrite it with assignments and NumPy calls"))
    if isinstance(stmt, gast.Assign):
        if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], gast.Name):
            raise errors.at(stmt, "only assignments to a single plain name are supported yet",
                            "assign to one name per statement (`a = ...`), not to a tuple, "
                            "a subscript (`y[i] = ...`) or an attribute")
    if isinstance(stmt, gast.AugAssign) and not isinstance(stmt.target, gast.Name):
        raise errors.at(stmt, "augmented assignment to a subscript or attribute is not supported yet",
                        "write `y = y + ...` on a plain name, or build the array with np.where")
    for node in gast.walk(stmt):
        if node is stmt or isinstance(node, _CONTEXTS + _OPERATORS):
            continue
        if not isinstance(node, _EXPRESSIONS):
            raise errors.at(node, f"srcgrad cannot differentiate {_describe(node)} yet",
                            _ADVICE.get(type(node), "rewrite it with assignments and NumPy calls"))
        if isinstance(node, gast.Starred):
            raise errors.at(node, "`*` unpacking in calls is not supported yet",
                            "pass the arguments one by one")
