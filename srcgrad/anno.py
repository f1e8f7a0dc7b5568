"""Annotations: the one place where srcgrad attaches facts to AST nodes.

gast drops unknown ``_fields`` when it converts trees, so annotations live in a
single hidden dict per node (``node._srcgrad``), read and written only here.

Documented keys:

``origin``
    :class:`Origin` of the user's code a node came from (file, line, column,
    source line).  Set by ``transforms.parse`` on every user node; inherited by
    the nodes that later passes build from them.
``resolved``
    The Python object a ``Name``/``Attribute`` denotes at compile time (set by
    ``transforms.resolve``).
``rule``
    The :class:`srcgrad.rules.registry.Rule` of a core statement's primitive
    (set by ``transforms.anf``).
``bound``
    ``{parameter: atom}`` — the primitive's arguments bound to its rule's
    parameter names (set by ``transforms.anf``).
``group``
    The user statement (its origin) that a core statement was lowered from;
    generated code gets one ``# file:line`` comment per group.
``captures``, ``captured_as``
    On a nested ``FunctionDef`` (set by ``transforms.anf``): the outer function's
    names it reads, under their current versions (``x_2``), and each version's
    name in the user's code (``{"x_2": "x"}``, for messages).
``lambda``
    True on a nested ``FunctionDef`` that ``transforms.desugar`` made from a
    lambda (so a refusal says "this lambda", not its generated name).
"""
from __future__ import annotations

import dataclasses
import linecache

KEY = _KEY = "_srcgrad"


@dataclasses.dataclass(frozen=True)
class Origin:
    """Where a node came from in the user's source."""

    filename: str
    line: int
    col: int
    text: str  # the full source line, without its newline

    @property
    def where(self) -> str:
        """``file.py:12`` — the file's base name, for comments in generated code."""
        return f"{self.filename.rsplit('/', 1)[-1]}:{self.line}"


def origin_of(fn) -> Origin | None:
    """Where ``fn``'s ``def`` is (its first line), or None for a function without Python code."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    line = linecache.getline(code.co_filename, code.co_firstlineno).rstrip("\n")
    return Origin(code.co_filename, code.co_firstlineno, len(line) - len(line.lstrip()), line)


_NONE: dict = {}  # (read only: what a node without annotations has)


def get(node, key, default=None):
    return getattr(node, _KEY, _NONE).get(key, default)


def set(node, key, value):  # noqa: A001 - mirrors get()
    table = node.__dict__.setdefault(_KEY, {})
    table[key] = value
    return node


def has(node, key) -> bool:
    return key in getattr(node, _KEY, _NONE)


def inherit(target, source):
    """Give ``target`` the origin and group of ``source`` unless it has its own."""
    for key in ("origin", "group"):
        if has(source, key) and not has(target, key):
            set(target, key, get(source, key))
    return target
