"""Pass 3 — validate: reject what the compiler cannot differentiate correctly.

Requires: the parsed ``FunctionDef``.
Guarantees: only the constructs listed in ``_STATEMENTS``/``_EXPRESSIONS``
remain (``exits`` has already removed ``break``, ``continue``, inner ``return``
and loop ``else:`` blocks);
anything else is raised as an :class:`~srcgrad.errors.UnsupportedSyntaxError`
that names the user's line and says what to write instead.  Reporting is
better than a silently wrong gradient.
"""
from __future__ import annotations

import gast

from .. import errors, nodes

_EARLY_EXIT = ("srcgrad does not differentiate early exits from loops yet: compute a flag "
               "and guard the loop body with `if`, or bound the loop so it ends by itself")

_ADVICE = {
    gast.Break: _EARLY_EXIT,
    gast.Continue: _EARLY_EXIT,
    gast.With: "move the `with` block out of the differentiated function",
    gast.Try: "move error handling out of the differentiated function",
    gast.Lambda: "assign it to a name in a statement of its own (`act = lambda v: ...`), or write a nested `def`",
    gast.FunctionDef: "define the helper at module level",
    gast.ListComp: "build the list with explicit statements, or use a vectorised NumPy call",
    gast.GeneratorExp: "use a vectorised NumPy call instead",
    gast.Yield: "a differentiated function must return its value",
    gast.Global: "pass the value in as an argument",
    gast.Nonlocal: "pass the value in as an argument",
    gast.Delete: "drop the `del` statement",
    gast.Import: "import at the top of the module",
    gast.ImportFrom: "import at the top of the module",
}

_STATEMENTS = (gast.FunctionDef, gast.Assign, gast.AugAssign, gast.Return, gast.Expr, gast.Pass, gast.If,
               gast.For, gast.While, gast.Raise, gast.With)
_EXPRESSIONS = (
    gast.Name, gast.Constant, gast.BinOp, gast.UnaryOp, gast.Call, gast.Attribute,
    gast.Subscript, gast.Slice, gast.Tuple, gast.List, gast.Compare, gast.keyword,
    gast.Starred, gast.IfExp, gast.BoolOp, gast.Dict, gast.JoinedStr, gast.FormattedValue,
)
_CONTEXTS = (gast.Load, gast.Store, gast.Param, gast.Del)
_OPERATORS = (gast.operator, gast.unaryop, gast.cmpop, gast.boolop)


_DESCRIBED = {gast.Import: "an import inside the function", gast.ImportFrom: "an import inside the function",
              gast.AsyncFunctionDef: "a nested `async def`", gast.ClassDef: "a class defined inside the function",
              gast.Try: "`try` statements", gast.AnnAssign: "an annotated assignment (`x: float = ...`)"}


def _describe(node) -> str:
    if isinstance(node, gast.FunctionDef):
        return "a nested `def`"
    if type(node) in _DESCRIBED:
        return _DESCRIBED[type(node)]
    if isinstance(node, gast.stmt):
        return f"`{type(node).__name__.lower()}` statements"
    return f"`{type(node).__name__}` expressions"


def transform(fdef: gast.FunctionDef) -> None:
    _check_block(fdef.body, top=True)
    last = fdef.body[-1]
    if not isinstance(last, gast.Return) or last.value is None:
        raise errors.at(last, "the differentiated function must end with `return <value>`",
                        "return the value whose gradient you want")


def _check_block(body, top=False):
    for i, stmt in enumerate(body):
        if isinstance(stmt, gast.Return) and not (top and i == len(body) - 1):
            raise errors.at(stmt, "a `return` before the end of the function is not supported yet",
                            "assign the value to a name and make `return` the last statement")
        _check_statement(stmt)


def _check_nested_def(fdef):
    """A function defined inside: compiled on its own when called, so only what
    would make it reach back into this one is checked here."""
    for node in nodes.walk(fdef):
        if isinstance(node, gast.Nonlocal):
            raise errors.at(node, "a nested function that assigns the outer function's names "
                            "(`nonlocal`) is not supported", "return the new value instead")
    if fdef.decorator_list:
        raise errors.at(fdef, "a decorated nested function is not supported",
                        "define it at module level")


def _check_statement(stmt):
    if isinstance(stmt, gast.FunctionDef):
        _check_nested_def(stmt)
        return
    if isinstance(stmt, gast.Delete) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], gast.Subscript) \
            and isinstance(stmt.targets[0].value, gast.Name) and not isinstance(stmt.targets[0].slice, gast.Slice):
        return  # `del d[k]`: a dict's (or a list's) `pop` (normalize refuses it on any other value)
    if not isinstance(stmt, _STATEMENTS):
        raise errors.at(stmt, f"srcgrad cannot differentiate {_describe(stmt)} yet",
                        _ADVICE.get(type(stmt), "rewrite it with assignments and NumPy calls"))
    if isinstance(stmt, gast.Assign):
        target = stmt.targets[0]
        unpacking = isinstance(target, (gast.Tuple, gast.List)) and all(
            isinstance(t, gast.Name) for t in target.elts)
        writes = isinstance(target, (gast.Subscript, gast.Attribute)) and isinstance(target.value, gast.Name) \
            or _object_entry(target) or _nested_item(target)
        if len(stmt.targets) != 1 or not (isinstance(target, gast.Name) or unpacking or writes):
            raise errors.at(stmt, "this assignment target is not supported yet",
                            "assign to a name (`a = ...`), unpack into names (`a, b = ...`), "
                            "write into a local array (`y[i] = ...`) or set an attribute (`self.n = ...`)")
    if isinstance(stmt, gast.AugAssign) and not (
            isinstance(stmt.target, gast.Name) or (isinstance(stmt.target, (gast.Subscript, gast.Attribute))
                                                  and isinstance(stmt.target.value, gast.Name))
            or _object_entry(stmt.target) or _nested_item(stmt.target)):
        raise errors.at(stmt, "this augmented assignment target is not supported yet",
                        "update a name, an array element (`y[i] += v`) or an attribute (`self.n += 1`)")
    if isinstance(stmt, gast.For):
        targets = stmt.target.elts if isinstance(stmt.target, gast.Tuple) else [stmt.target]
        if not all(isinstance(t, gast.Name) for t in targets):
            raise errors.at(stmt.target, "a loop target must be a name or a tuple of names",
                            "write `for i in range(n):` or `for i, x in enumerate(xs):`")
    if isinstance(stmt, gast.With):
        for item in stmt.items:
            if item.optional_vars is not None and not isinstance(item.optional_vars, gast.Name):
                raise errors.at(item.optional_vars, "a `with` target must be a name",
                                "write `with m as v:` and unpack `v` in the block")
            _check_expression(item.context_expr)
        _check_block(stmt.body)
        return
    if isinstance(stmt, (gast.If, gast.For, gast.While)):
        header = stmt.iter if isinstance(stmt, gast.For) else stmt.test
        _check_expression(header)
        _check_block(stmt.body)
        _check_block(stmt.orelse)
        return
    for child in gast.iter_child_nodes(stmt):
        _check_expression(child)


def _object_entry(target) -> bool:
    """``self.parameters["k"]``, ``self.cache[key]``: an entry of a container an object
    holds (normalize decides, from the field's kind, whether it is one)."""
    return isinstance(target, gast.Subscript) and isinstance(target.value, gast.Attribute) \
        and isinstance(target.value.value, gast.Name)


def _nested_item(target) -> bool:
    """``M[0][1]``, ``d["a"]["b"]``: an item of an item of a name's list or dict (normalize
    decides whether it knows which list or dict that is)."""
    base = target
    while isinstance(base, gast.Subscript):
        base = base.value
    return isinstance(target, gast.Subscript) and isinstance(target.value, gast.Subscript) \
        and isinstance(base, gast.Name)


def _check_expression(root):
    # `f(*xs)` is a call's business (normalize spreads it); `[*xs]` and `(a, *b)` are not supported.
    spread = {id(a) for node in nodes.walk(root) if isinstance(node, gast.Call) for a in node.args}
    for node in nodes.walk(root):
        if isinstance(node, _CONTEXTS + _OPERATORS):
            continue
        if not isinstance(node, _EXPRESSIONS):
            raise errors.at(node, f"srcgrad cannot differentiate {_describe(node)} yet",
                            _ADVICE.get(type(node), "rewrite it with assignments and NumPy calls"))
        if isinstance(node, gast.Starred) and id(node) not in spread:
            raise errors.at(node, "`*` unpacking is supported in a call's arguments (`f(*xs)`) and in list "
                            "and tuple displays where `list` and `tuple` are the builtins (`[*xs, y]`) only",
                            "build the tuple or list element by element (`(a, xs[0], xs[1])`), or join "
                            "copies (`list(xs) + [y]`)")
