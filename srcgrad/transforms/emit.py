"""Pass 8 — emit and load: Python source text, registered and executed.

Requires: the optimized sweeps.
Guarantees: source text (via the stdlib's ``ast.unparse``) with a header
naming the user's function, mode, ``wrt`` and backend; one
``# file:line  source`` comment per user statement in each sweep; registered
with ``linecache`` so tracebacks and ``pdb`` show the generated lines.
Identical input gives byte-identical text.
"""
from __future__ import annotations

import ast
import linecache
import re

import gast

from .. import anno, nodes

_COMMENT_LINE = re.compile(r"^(\s*)((?:'|\").*(?:'|\"))$")


def with_blocks(stmts) -> list:
    """``v = rt.enter(m) ... rt.leave(m)`` (normalized code keeps a ``with`` block's body
    flat between the two) back into ``with rt.managed(m, where=...) as v: ...``, in
    each block, so that an exception raised in the body reaches ``m.__exit__`` as
    Python's own ``with`` does.  A pair not found in one block stays as it is."""
    out, open_ = [], []  # open_: (the enter statement, the manager's source, the block's statements so far)
    for stmt in stmts:
        for field in ("body", "orelse"):
            if getattr(stmt, field, None):
                setattr(stmt, field, with_blocks(getattr(stmt, field)))
        call = _runtime_call(stmt, "enter")
        if call is not None:
            open_.append((stmt, nodes.to_source(call.args[0]), out))
            out = []
            continue
        call = _runtime_call(stmt, "leave")
        if call is not None and open_ and open_[-1][1] == nodes.to_source(call.args[0]):
            enter, _, outer = open_.pop()
            group = anno.get(enter, "group")
            manager = nodes.call("rt.managed", [call.args[0]])
            manager.keywords.append(gast.keyword(arg="where", value=nodes.const(group.where if group else "?")))
            target = enter.targets[0] if isinstance(enter, gast.Assign) else None
            block = gast.With(items=[gast.withitem(context_expr=manager, optional_vars=target)],
                              body=out or [gast.Pass()], type_comment=None)
            anno.set(block, "group", group)
            out = outer
            out.append(block)
            continue
        out.append(stmt)
    for enter, _, outer in reversed(open_):  # (not closed in this block: left flat)
        out = outer + [enter] + out
    return out


def _runtime_call(stmt, name):
    """``stmt``'s call of ``rt.<name>``, or None."""
    value = getattr(stmt, "value", None)
    if isinstance(stmt, (gast.Expr, gast.Assign)) and isinstance(value, gast.Call):
        func = value.func
        if isinstance(func, gast.Attribute) and func.attr == name and isinstance(func.value, gast.Name) \
                and func.value.id == "rt":
            return value
    return None


def with_group_comments(stmts) -> list:
    """Insert ``# file:line  text`` before each run of statements from one user line."""
    out, last = [], object()
    for stmt in stmts:
        group = anno.get(stmt, "group")
        if group is not None and group != last:
            out.append(nodes.comment(f"{group.where}  {group.text.strip()}"))
        last = group
        if isinstance(stmt, (gast.If, gast.For, gast.While, gast.With)):
            stmt.body = _inner_comments(stmt.body, group) or [gast.Pass()]
            if not isinstance(stmt, gast.With):
                stmt.orelse = _inner_comments(stmt.orelse, group)
        out.append(stmt)
    return out


def _inner_comments(stmts, header_group) -> list:
    """Inside a block, a statement from the header's own line needs no comment."""
    out = with_group_comments(stmts)
    # Drop a leading comment that only repeats the block header's line.
    if out and header_group is not None and _is_comment_for(out[0], header_group):
        out = out[1:]
    return out


def _is_comment_for(stmt, group) -> bool:
    value = getattr(getattr(stmt, "value", None), "value", None)
    return isinstance(value, str) and value == nodes.COMMENT_MARK + f"{group.where}  {group.text.strip()}"


def render(module) -> str:
    """Unparse a gast module, turning comment markers into real comments."""
    text = nodes.to_source(module)
    lines = []
    for line in text.splitlines():
        match = _COMMENT_LINE.match(line)
        if match:
            value = ast.literal_eval(match.group(2))
            if isinstance(value, str) and value.startswith(nodes.COMMENT_MARK):
                line = f"{match.group(1)}# {value[len(nodes.COMMENT_MARK):]}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def load(text: str, filename: str, namespace: dict) -> dict:
    """Register ``text`` under ``filename`` with linecache and execute it in ``namespace``."""
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    exec(compile(text, filename, "exec"), namespace)  # noqa: S102 - our own generated code
    return namespace
