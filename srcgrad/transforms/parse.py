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
        raise errors.UnsupportedSyntaxError(
            "cannot differentiate a lambda yet",
            anno.Origin(filename, first_line, 0, lines[0].rstrip("\n")),
            "write it as a `def` function",
        )
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


def _attach_origins(tree, lines, filename, line_offset, indent):
    for node in gast.walk(tree):
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            continue
        text = lines[lineno - 1].rstrip("\n") if lineno - 1 < len(lines) else ""
        anno.set(node, "origin", anno.Origin(filename, lineno + line_offset,
                                             node.col_offset + indent, text))
