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


def with_group_comments(stmts) -> list:
    """Insert ``# file:line  text`` before each run of statements from one user line."""
    out, last = [], object()
    for stmt in stmts:
        group = anno.get(stmt, "group")
        if group is not None and group != last:
            out.append(nodes.comment(f"{group.where}  {group.text.strip()}"))
        last = group
        if isinstance(stmt, (gast.If, gast.For, gast.While)):
            stmt.body = _inner_comments(stmt.body, group) or [gast.Pass()]
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
