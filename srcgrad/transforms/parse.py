"""Pass 1 — source: the user's function as a gast tree with origins.

Requires: a Python function object.
Guarantees: a ``gast.FunctionDef`` without decorators; every statement and
expression node annotated with ``origin`` (user file, line, column, line text).
Raises :class:`~srcgrad.errors.NoSourceError` when there is no source.
"""
from __future__ import annotations

import inspect
import textwrap
import types

import gast

from .. import anno, errors


def _no_source(fn, why: str) -> errors.NoSourceError:
    label = getattr(fn, "__qualname__", repr(fn))
    return errors.NoSourceError(
        f"cannot read the source of `{label}` ({why})",
        None,
        "srcgrad transforms Python source: define the function with `def` in a .py file "
        "(or a notebook cell), not with exec/eval or as a builtin; for a builtin or C "
        "function, register a derivative rule with @srcgrad.defadjoint instead.",
    )


def transform(fn) -> gast.FunctionDef:
    if not isinstance(fn, types.FunctionType):
        raise _no_source(fn, "it is not a Python function")
    try:
        lines, first_line = inspect.getsourcelines(fn)
        filename = inspect.getsourcefile(fn) or fn.__code__.co_filename
    except (OSError, TypeError) as exc:
        raise _no_source(fn, str(exc)) from None
    if fn.__name__ == "<lambda>":
        return _lambda(fn, filename, first_line)
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    indent = len(lines[0]) - len(lines[0].lstrip()) if dedented != text else 0
    tree = gast.parse(dedented)
    fdef = tree.body[0]
    if not isinstance(fdef, gast.FunctionDef):
        raise _no_source(fn, "its source is not a `def` statement")
    fdef.decorator_list = []
    _attach_origins(fdef, lines, filename, first_line - 1, indent)
    return fdef


def _lambda(fn, filename, first_line) -> gast.FunctionDef:
    """A lambda as ``def lambda_(params): return body``, found in its file by line
    and parameter names (the file is parsed whole: a lambda is often a fragment of
    a longer statement)."""
    import linecache

    lines = linecache.getlines(filename)
    params = list(fn.__code__.co_varnames[:fn.__code__.co_argcount])
    origin = anno.Origin(filename, first_line, 0, lines[first_line - 1].rstrip("\n") if lines else "")
    try:
        tree = gast.parse("".join(lines))
    except SyntaxError:
        tree = None
    found = [] if tree is None else [
        n for n in gast.walk(tree) if isinstance(n, gast.Lambda) and n.lineno == first_line
        and [a.id for a in n.args.args] == params]
    if len(found) != 1:
        raise errors.UnsupportedSyntaxError(
            "cannot tell which lambda on this line to differentiate" if found else
            "cannot find this lambda's source", origin, "write it as a `def` function")
    lam = found[0]
    fdef = gast.FunctionDef(name="lambda_", args=lam.args, body=[gast.Return(value=lam.body)],
                            decorator_list=[], returns=None, type_comment=None, type_params=[])
    gast.copy_location(fdef, lam)
    gast.copy_location(fdef.body[0], lam.body)
    _attach_origins(fdef, lines, filename, 0, 0)
    return fdef


def _attach_origins(tree, lines, filename, line_offset, indent):
    for node in gast.walk(tree):
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            continue
        text = lines[lineno - 1].rstrip("\n") if lineno - 1 < len(lines) else ""
        anno.set(node, "origin", anno.Origin(filename, lineno + line_offset,
                                             node.col_offset + indent, text))
