"""Pass 2 — resolve: what each free name denotes at compile time.

Requires: the parsed ``FunctionDef`` and the function object.
Guarantees: every ``Name`` read that is not a local, and every ``Attribute``
chain rooted at one (``np.linalg.norm``), carries ``resolved`` = the object.
Returns the :class:`FreeNames` the generated code must see: the user's free
names, read afresh on each call (``FreeNames.refresh``) so that rebinding a
global array between calls is seen, as it would be by the original function.

Before/after: ``return np.exp(x)`` → the ``np.exp`` Attribute node is
annotated ``resolved=numpy.exp``; ``x`` (a parameter) is left alone.
"""
from __future__ import annotations

import builtins
import dataclasses
import types

import gast

from .. import anno

_MISSING = object()


@dataclasses.dataclass
class FreeNames:
    """The user's free names a function reads: globals, closure cells, builtins."""

    fn: types.FunctionType
    names: dict  # name -> value at compile time

    def __post_init__(self):
        cells = _closure(self.fn)
        self._cells = [(k, cells[k]) for k in self.names if k in cells]
        self._globals = [k for k in self.names if k not in cells]
        self.pinned = []

    def refresh(self, namespace: dict) -> None:
        """Copy the current values of the free names into ``namespace`` (every call:
        cheap, and rebinding a global between calls is seen)."""
        for key, cell in self._cells:
            namespace[key] = cell.cell_contents
        glob = self.fn.__globals__
        for key in self._globals:
            if key in glob:
                namespace[key] = glob[key]
        for key, value, stale in self.pinned:
            if namespace.get(key) is not value:
                stale(namespace)

    def pin(self, key, value, stale) -> None:
        """The code was specialised on ``key`` being ``value`` (a callee's compiled
        vjp is called directly); ``stale(namespace)`` runs if it is rebound."""
        self.pinned.append((key, value, stale))


def _closure(fn) -> dict:
    return dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))


def local_names(fdef: gast.FunctionDef) -> set[str]:
    args = fdef.args
    params = [a.id for a in args.args + args.posonlyargs + args.kwonlyargs]
    params += [a.id for a in (args.vararg, args.kwarg) if a is not None]
    stored = {n.id for n in gast.walk(fdef) if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)}
    nested = {n.name for n in gast.walk(fdef) if isinstance(n, gast.FunctionDef) and n is not fdef}
    return set(params) | stored | nested


def lookup(fn, key):
    cells = _closure(fn)
    if key in cells:
        try:
            return cells[key].cell_contents
        except ValueError:  # an empty cell: assigned later in the enclosing scope
            return _MISSING
    if key in fn.__globals__:
        return fn.__globals__[key]
    return getattr(builtins, key, _MISSING)


def transform(fdef: gast.FunctionDef, fn) -> FreeNames:
    locals_ = local_names(fdef)
    free = {}
    for node in gast.walk(fdef):
        if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Load) and node.id not in locals_:
            value = lookup(fn, node.id)
            if value is not _MISSING:
                anno.set(node, "resolved", value)
                if not hasattr(builtins, node.id) or node.id in fn.__globals__:
                    free[node.id] = value
    # Attribute chains after names, so that each base is resolved first; walk
    # is breadth-first, so collect and sort by depth (innermost first).
    attrs = [n for n in gast.walk(fdef) if isinstance(n, gast.Attribute)]
    for node in sorted(attrs, key=_depth):
        if anno.has(node.value, "resolved"):
            value = getattr(anno.get(node.value, "resolved"), node.attr, _MISSING)
            if value is not _MISSING:
                anno.set(node, "resolved", value)
    return FreeNames(fn, free)


def _depth(node) -> int:
    depth = 0
    while isinstance(node, gast.Attribute):
        node, depth = node.value, depth + 1
    return depth
