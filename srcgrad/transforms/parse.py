"""Pass 1 — source: the user's function as a gast tree with origins.

Requires: a Python function object.
Guarantees: a ``gast.FunctionDef`` without decorators; every statement and
expression node annotated with ``origin`` (user file, line, column, line text).
Raises :class:`~srcgrad.errors.NoSourceError` when there is no source.
"""
from __future__ import annotations

import inspect
import linecache
import os
import sys
import textwrap
import types

import gast

from .. import anno, errors, nodes


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
    # The source of the code that runs: inspect would follow `__wrapped__` (set by
    # functools.wraps) to the decorated function, whose source is not what runs.
    code = fn.__code__
    try:
        lines, first_line = inspect.getsourcelines(code)
        filename = inspect.getsourcefile(code) or code.co_filename
    except (OSError, TypeError) as exc:
        raise _no_source(fn, str(exc)) from None
    if not _runs_this_text(fn):
        raise _edited(fn, anno.Origin(filename, first_line, 0, lines[0].rstrip("\n") if lines else ""))
    if code.co_name == "<lambda>":
        return _lambda(fn, filename, first_line)
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    indent = len(lines[0]) - len(lines[0].lstrip()) if dedented != text else 0
    tree = nodes.parse(dedented)
    fdef = tree.body[0]
    if not isinstance(fdef, gast.FunctionDef):
        raise _no_source(fn, "its source is not a `def` statement")
    fdef.decorator_list = []
    _attach_origins(fdef, lines, filename, first_line - 1, indent)
    return fdef


def _edited(fn, origin) -> errors.NoSourceError:
    return errors.NoSourceError(
        f"the source file of `{fn.__qualname__}` changed after its module was imported: the function "
        "runs the code it was compiled from, and srcgrad would differentiate the new text", origin,
        "reload the module (importlib.reload) or restart Python, so that the code that runs is the "
        "text in the file")


def _runs_this_text(fn) -> bool:
    """Whether the file as it is now compiles to the code ``fn`` runs: False when it
    was edited after its module was imported (Python runs the old code; inspect
    reads the new text).  The whole file is compiled (its imports and ``__future__``
    lines decide the bytecode) and the function's code, found by name and first
    line, compared instruction by instruction, with constants, names and line
    offsets.  Checked for modules loaded from source files only: a loader that
    rewrites the source (pytest's assertions) makes other code."""
    code = fn.__code__
    module = sys.modules.get(fn.__module__)
    loader = getattr(module, "__loader__", None)
    if type(loader).__name__ != "SourceFileLoader" or not os.path.isfile(code.co_filename):
        return True
    text = "".join(linecache.getlines(code.co_filename))
    key = (code.co_filename, hash(text))
    compiled = _FILES.get(key)
    if compiled is None:
        try:
            compiled = compile(text, code.co_filename, "exec", dont_inherit=True)
        except SyntaxError:
            return False
        if len(_FILES) >= 16:
            _FILES.pop(next(iter(_FILES)))  # the oldest: a program's functions live in a few files
        _FILES[key] = compiled
    return any(c.co_name == code.co_name and c.co_firstlineno == code.co_firstlineno and _same_code(c, code)
               for c in _code_objects(compiled))


_FILES: dict = {}


def _code_objects(code):
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield const
            yield from _code_objects(const)


def _same_code(a, b) -> bool:
    if (a.co_code, a.co_names, a.co_varnames, a.co_freevars, a.co_cellvars, a.co_argcount,
            a.co_kwonlyargcount) != (b.co_code, b.co_names, b.co_varnames, b.co_freevars, b.co_cellvars,
                                     b.co_argcount, b.co_kwonlyargcount):
        return False
    if [(s, e, None if n is None else n - a.co_firstlineno) for s, e, n in a.co_lines()] != \
            [(s, e, None if n is None else n - b.co_firstlineno) for s, e, n in b.co_lines()]:
        return False
    if len(a.co_consts) != len(b.co_consts):
        return False
    for x, y in zip(a.co_consts, b.co_consts):
        if isinstance(x, types.CodeType) and isinstance(y, types.CodeType):
            if not _same_code(x, y):
                return False
        elif type(x) is not type(y) or x != y and not (x != x and y != y):
            return False
    return True


def _spans_code(body, code, line) -> bool:
    """Whether the source columns of ``code``'s instructions on ``line`` lie in ``body``'s."""
    positions = getattr(code, "co_positions", None)
    if positions is None or getattr(body, "end_col_offset", None) is None:
        return False
    spans = [(c, e) for first, last, c, e in positions()
             if first == line and last == line and c is not None and e is not None and c < e]
    start = body.col_offset if body.lineno == line else 0
    end = body.end_col_offset if body.end_lineno == line else float("inf")
    return bool(spans) and all(start <= c and e <= end for c, e in spans)


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
        n for n in nodes.walk(tree) if isinstance(n, gast.Lambda) and n.lineno == first_line
        and [a.id for a in n.args.args] == params]
    if len(found) > 1:  # several on the line (`{'relu': lambda v: ..., 'sig': lambda v: ...}`): by column
        found = [n for n in found if _spans_code(n.body, fn.__code__, first_line)] or found
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
    for node in nodes.walk(tree):
        lineno = getattr(node, "lineno", None)
        if lineno is None:
            continue
        text = lines[lineno - 1].rstrip("\n") if lineno - 1 < len(lines) else ""
        anno.set(node, "origin", anno.Origin(filename, lineno + line_offset,
                                             node.col_offset + indent, text))
