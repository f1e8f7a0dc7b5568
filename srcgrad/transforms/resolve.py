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

from .. import anno, nodes

_MISSING = object()
# Methods made afresh at each attribute read (`rng.normal`, `obj.method`): equal, not identical.
_BOUND = (types.MethodType, types.BuiltinMethodType, types.MethodWrapperType)


@dataclasses.dataclass
class FreeNames:
    """The user's free names a function reads: globals, closure cells, builtins.

    ``guards``: ``(name, attributes, value)`` for each free name or attribute chain
    whose compile-time value the code was specialised on (a function whose rule or
    vjp is used, a class): :meth:`refresh` reports when one of them changed, and the
    program is compiled again.  Data (numbers, arrays, objects) is read afresh at
    each call instead, so it needs no guard.
    """

    fn: types.FunctionType
    names: dict  # name -> value at compile time
    guards: list = dataclasses.field(default_factory=list)

    def __post_init__(self):
        cells = _closure(self.fn)
        self._cells = [(k, cells[k]) for k in self.names if k in cells]
        self._globals = [k for k in self.names if k not in cells]
        self.parts = []  # (FreeNames of an inlined callee, {its name: the name in the code})

    def refresh(self, namespace: dict, rename=None) -> bool:
        """Copy the current values of the free names into ``namespace`` (every call:
        cheap, and rebinding a global between calls is seen).  False when a guarded
        name or attribute no longer holds the value the code was specialised on.
        ``rename``: the names an inlined callee's free names have in the code."""
        for key, cell in self._cells:
            namespace[key if rename is None else rename[key]] = cell.cell_contents
        glob = self.fn.__globals__
        for key in self._globals:
            if key in glob:
                namespace[key if rename is None else rename[key]] = glob[key]
        for key, attrs, value in self.guards:
            current = namespace.get(key if rename is None else rename[key], _MISSING)
            for attr in attrs:
                current = getattr(current, attr, _MISSING)
            if current is not value and not (isinstance(value, _BOUND) and current == value):
                return False
        for part, names in self.parts:
            if not part.refresh(namespace, names):
                return False
        return True


def _closure(fn) -> dict:
    return dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))


def local_names(fdef: gast.FunctionDef) -> set[str]:
    args = fdef.args
    params = [a.id for a in args.args + args.posonlyargs + args.kwonlyargs]
    params += [a.id for a in (args.vararg, args.kwarg) if a is not None]
    stored = {n.id for n in nodes.walk(fdef) if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)}
    nested = {n.name for n in nodes.walk(fdef) if isinstance(n, gast.FunctionDef) and n is not fdef}
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
    cells = _closure(fn)
    free, guards = {}, []
    for node in nodes.walk(fdef):
        if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Load) and node.id not in locals_:
            value = lookup(fn, node.id)
            if value is not _MISSING:
                anno.set(node, "resolved", value)
                # A closure variable or global named like a builtin (`abs = 3.0`) is the user's.
                if not hasattr(builtins, node.id) or node.id in fn.__globals__ or node.id in cells:
                    if node.id not in free and _specialises(value):
                        guards.append((node.id, (), value))
                    free[node.id] = value
    if "__class__" in cells:  # `super()` in a method: its class, for rt.super_method
        try:
            free["__class__"] = cells["__class__"].cell_contents
        except ValueError:
            pass
    # Attribute chains after names, so that each base is resolved first; walk
    # is breadth-first, so collect and sort by depth (innermost first).
    attrs = [n for n in nodes.walk(fdef) if isinstance(n, gast.Attribute)]
    for node in sorted(attrs, key=_depth):
        if anno.has(node.value, "resolved"):
            owner = anno.get(node.value, "resolved")
            value = getattr(owner, node.attr, _MISSING)
            if value is _MISSING:
                continue
            if _fixed(owner) or isinstance(value, types.ModuleType):  # np.pi, np.linalg, mylib.np
                anno.set(node, "resolved", value)
            elif _specialises(value):  # mod.helper, Cls.method: guarded, compiled again if rebound
                anno.set(node, "resolved", value)
                root, chain = _chain(node)
                if root in free and (root, chain, value) not in guards:
                    guards.append((root, chain, value))
            # else: data (cfg.beta, Cls.rate, mod.scale) is read when the code runs, as an
            # object's field: its value then may change between calls.
    return FreeNames(fn, free, guards)


def _fixed(owner) -> bool:
    """A module whose attributes srcgrad takes as constants (NumPy's, CuPy's, math)."""
    return isinstance(owner, types.ModuleType) and owner.__name__.split(".")[0] in _FIXED_MODULES


_FIXED_MODULES = ("numpy", "cupy", "math", "scipy", "srcgrad", "builtins", "operator")


def _specialises(value) -> bool:
    """Whether compiled code depends on this free value's identity (a function whose
    rule or vjp it calls, a class), rather than reading it at run time (data)."""
    return not isinstance(value, types.ModuleType) and (callable(value) or isinstance(value, type))


def _chain(node):
    attrs = []
    while isinstance(node, gast.Attribute):
        attrs.append(node.attr)
        node = node.value
    return node.id, tuple(reversed(attrs))


def _depth(node) -> int:
    depth = 0
    while isinstance(node, gast.Attribute):
        node, depth = node.value, depth + 1
    return depth
