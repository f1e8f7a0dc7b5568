"""Pass 2 — resolve: what each free name denotes at compile time.

Requires: the parsed ``FunctionDef`` and the function object.
Guarantees: every ``Name`` read that is not a local, and every ``Attribute``
chain rooted at one (``np.linalg.norm``), carries ``resolved`` = the object.
Each read of a free name that holds data (a number, an array, a list: not a
function, class or module) becomes a read of its scope's attribute, so that the
generated code reads it where the source does, as the original function would:
a call that rebinds the global (``global G; G = 2.0``, however deep) is seen
by the reads after it.  Such a read (and a module's data, ``params.G``) whose
value is a float array or a number is specialised on its rank, as an argument
is (``FreeNames.kinds``, ``FreeNames.scope_ranks``): ``x * G`` is then NumPy's
product, not an operator dispatched when it runs.  Returns the
:class:`FreeNames` the generated code must see: the user's free names and
scopes, copied in on each call (``FreeNames.refresh``).

Before/after, in module ``model``: ``return np.exp(x) * G`` → the ``np.exp``
Attribute node is annotated ``resolved=numpy.exp``; ``G`` becomes ``model.G``
(the module itself, bound as a free name); ``x`` (a parameter) is left alone.
"""
from __future__ import annotations

import builtins
import dataclasses
import sys
import types

import gast
import numpy as np

from .. import anno, nodes, runtime
from ..tree import TreeRank

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
    each call instead; ``kinds``: ``(name, attributes, rank)`` for each read of data
    in a scope (``model.G``): the rank the code was specialised on, or None where it
    is general code (:func:`data_kind`), which :meth:`refresh` checks as it checks
    ``guards`` (a list rebound to an array: compiled again, now specialised).
    """

    fn: types.FunctionType
    names: dict  # name -> value at compile time (a scope's name -> the scope)
    guards: list = dataclasses.field(default_factory=list)
    scopes: tuple = ()  # the names among ``names`` that stand for a scope (``model.G``)
    kinds: list = dataclasses.field(default_factory=list)
    aliases: dict = dataclasses.field(default_factory=dict)  # name in the code -> the user's (`rt_` -> `rt`)

    def __post_init__(self):
        cells = _closure(self.fn)
        user = self.aliases.get
        self._cells = [(k, cells[user(k, k)]) for k in self.names if user(k, k) in cells and k not in self.scopes]
        self._globals = [(k, user(k, k)) for k in self.names if user(k, k) not in cells and k not in self.scopes]
        self._scopes = [(k, self.names[k]) for k in self.scopes]
        # The kinds of a module's data are read from its dict (the common case, each call).
        self._kinds = [(_dict_of(self.names[key]), attrs[0], kind) if key in self.scopes and len(attrs) == 1
                       and _dict_of(self.names[key]) is not None else (None, (key, attrs), kind)
                       for key, attrs, kind in self.kinds]
        self.parts = []  # (FreeNames of an inlined callee, {its name: the name in the code})

    def refresh(self, namespace: dict, rename=None, between=True) -> bool:
        """Copy the current values of the free names into ``namespace`` (every call:
        cheap, and rebinding a global between calls is seen).  False when a guarded
        name or attribute no longer holds the value the code was specialised on, or
        data read live no longer has its kind; ``between=False`` (while the code
        runs) lets data the code does not specialise on (a list, ``None``) take any
        kind, as its general code can.  ``rename``: the names an inlined callee's
        free names have in the code."""
        for key, cell in self._cells:
            namespace[key if rename is None else rename[key]] = cell.cell_contents
        glob = self.fn.__globals__
        for key, user in self._globals:
            if user in glob:
                namespace[key if rename is None else rename[key]] = glob[user]
        for key, scope in self._scopes:
            namespace[key if rename is None else rename[key]] = scope
        for key, attrs, value in self.guards:
            current = namespace.get(key if rename is None else rename[key], _MISSING)
            for attr in attrs:
                current = getattr(current, attr, _MISSING)
            if current is not value and not _same(current, value):
                return False
        for scope, attr, kind in self._kinds:
            if scope is not None:
                current = scope.get(attr, _MISSING)
            else:
                key, attrs = attr
                current = namespace.get(key if rename is None else rename.get(key, key), _MISSING)
                if current is _MISSING:  # (a scope a nested def of generated code reads as a global)
                    current = glob.get(key, _MISSING)
                for attr in attrs:
                    current = getattr(current, attr, _MISSING)
            if type(current) is np.ndarray and current.ndim == kind:
                continue  # the common case, without a call: this runs on every call
            if data_kind(current) != kind and (between or kind is not None):
                return False
        for part, names in self.parts:
            if not part.refresh(namespace, names, between):
                return False
        return True

    def rebound(self, fn) -> FreeNames:
        """The same names read from ``fn``, another function of this one's code (a
        closure made again): its cells, its globals, its closure's and globals' scopes.
        The guards and kinds stay the values compiled for, so :meth:`refresh` reports
        where ``fn``'s differ; the inlined callees' names are theirs, shared."""
        cells, names = _closure(fn), {}
        for key, value in self.names.items():
            if key in self.scopes:
                closure = isinstance(value, runtime.Cells)
                value = runtime.Cells({k: cells[k] for k in value._cells}) if closure else _module_of(fn)
            elif key in cells or key in fn.__globals__:
                value = lookup(fn, key)
            names[key] = value
        free = FreeNames(fn, names, self.guards, self.scopes, self.kinds)
        free.parts = self.parts
        return free

    def scope_ranks(self) -> dict:
        """``{name in the code: TreeRank}``: the ranks of the data read from each scope
        (``model.G``) that the code is specialised on, as a model's fields are, with
        those of the callees inlined (their names renamed)."""
        entries: dict = {}
        for free, rename in [(self, None)] + self.parts:
            for key, attrs, kind in free.kinds:
                if len(attrs) == 1 and kind is not None:
                    entries.setdefault(key if rename is None else rename[key], {})[attrs[0]] = kind
        return {name: TreeRank(sorted(fields.items())) for name, fields in entries.items()}


def _dict_of(scope):
    """The dict a module's (or exec'd code's) globals live in; None for a closure's."""
    if isinstance(scope, types.ModuleType):
        return vars(scope)
    return scope._globals if isinstance(scope, runtime.Globals) else None


def data_kind(value):
    """What compiled code is specialised on for data it reads live: an array's rank
    for a NumPy array, 0 for a Python or NumPy number (not a bool: ``x[True]`` adds
    an axis); None for anything else (a list, an object, another array type), for
    which it is general code."""
    kind = type(value)
    if kind is np.ndarray:
        return value.ndim
    if kind is float or kind is int or isinstance(value, (np.floating, np.integer)):
        return 0
    return None


def _same(current, value) -> bool:
    """Whether code specialised on the free value ``value`` runs as well with ``current``,
    another object: a bound method of the same function and object, or a gradient function
    made again of the same function, options and fixed arguments (the code calls it
    through ``dispatch``, reading it when it runs: ``GradientFunction._alike``)."""
    if isinstance(value, _BOUND):
        return current == value
    alike = getattr(value, "_alike", None) if runtime.is_gradient_function(value) else None
    return alike is not None and type(current) is type(value) and getattr(current, "_alike", None) == alike


def closure_key(fn) -> tuple:
    """What code compiled for ``fn`` is specialised on among its closure's values, as a
    key: each cell's function or class (by identity: ``id``, which the program compiled
    for it keeps alive in its guards; a bound method by its function and object, a
    gradient function by what :func:`_same` compares), or the kind of its data
    (:func:`data_kind`), or ``"empty"``.  Two closures of one code with equal keys can share a program."""
    key = []
    for cell in fn.__closure__ or ():
        try:
            value = cell.cell_contents
        except ValueError:  # assigned later in the enclosing scope
            key.append("empty")
            continue
        if isinstance(value, types.MethodType):  # (made again at each read: `act = self.act`)
            key.append((id(value.__func__), id(value.__self__)))
        elif runtime.is_gradient_function(value) and hasattr(value, "_alike"):  # (`g = grad(f)`, made again)
            key.append(value._alike)
        else:
            key.append(id(value) if _specialises(value) else (data_kind(value),))
    return tuple(key)


def _closure(fn) -> dict:
    return dict(zip(fn.__code__.co_freevars, fn.__closure__ or ()))


def local_names(fdef: gast.FunctionDef) -> set[str]:
    args = fdef.args
    params = [a.id for a in args.args + args.posonlyargs + args.kwonlyargs]
    params += [a.id for a in (args.vararg, args.kwarg) if a is not None]
    found = set(params)
    for n in nodes.walk(fdef):
        if isinstance(n, gast.Name):
            if isinstance(n.ctx, gast.Store):
                found.add(n.id)
        elif isinstance(n, gast.FunctionDef) and n is not fdef:
            found.add(n.name)
    return found


def lambda_bound(fdef) -> set[int]:
    """The ids of the ``Name`` reads inside a ``lambda`` or a nested ``def`` that are its
    own parameters (``key=lambda v: np.sum(v)``): local to it, whatever the module's ``v``."""
    bound = set()
    for node in nodes.walk(fdef):
        if isinstance(node, (gast.Lambda, gast.FunctionDef)) and node is not fdef:
            args = node.args
            params = {a.id for a in args.args + args.posonlyargs + args.kwonlyargs
                      + [a for a in (args.vararg, args.kwarg) if a is not None] if isinstance(a, gast.Name)}
            body = [node.body] if isinstance(node, gast.Lambda) else node.body
            bound.update(id(n) for part in body for n in nodes.walk(part)
                         if isinstance(n, gast.Name) and n.id in params)
    return bound


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
    free, guards, kinds = {}, [], []
    # Attribute chains after names, so that each base is resolved first; walk
    # is breadth-first, so collect and sort by depth (innermost first).
    attrs = []
    in_lambda = lambda_bound(fdef)
    for node in nodes.walk(fdef):
        if isinstance(node, gast.Attribute):
            attrs.append(node)
        elif isinstance(node, gast.Name) and isinstance(node.ctx, gast.Load) and node.id not in locals_ \
                and id(node) not in in_lambda:
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
            # object's field: its value then may change between calls.  A module's
            # (mod.scale; generated code's `model.G`) is specialised on its rank.
            elif _is_scope(owner) and isinstance(node.value, gast.Name) and node.value.id in free:
                kinds.append((node.value.id, (node.attr,), data_kind(value)))
    scopes = _read_data_live(fdef, fn, free, guards, locals_, kinds, in_lambda)
    aliases = _renamed_modules(fdef, free, guards, kinds, locals_)
    return FreeNames(fn, free, guards, tuple(scopes), sorted(set(kinds)), aliases)


# The modules generated code reads by these names (emit._imports): a free name of the
# user's so named that holds something else is read under another name.
_GENERATED_MODULES = {"np": "numpy", "cp": "cupy", "rt": "srcgrad.runtime", "dispatch": "srcgrad.dispatch",
                      "math": "math", "scipy": "scipy"}


def _renamed_modules(fdef, free, guards, kinds, locals_) -> dict:
    """A free name of the user's named like a module the generated code reads (a function
    ``rt``, a module ``dispatch``) renamed in ``fdef``, ``free`` and ``guards``: ``rt`` →
    ``rt_``, read from the user's ``rt`` (``FreeNames.aliases``).  Returns the aliases."""
    clash = [k for k, module in _GENERATED_MODULES.items()
             if k in free and getattr(free[k], "__name__", None) != module]
    if not clash:
        return {}
    taken = locals_ | set(free) | nodes.names_in(fdef)
    renamed = {k: nodes.fresh_name(f"{k}_", taken) for k in clash}
    for node in nodes.walk(fdef):
        if isinstance(node, gast.Name) and node.id in renamed and isinstance(node.ctx, gast.Load):
            node.id = renamed[node.id]
    for old, new in renamed.items():
        free[new] = free.pop(old)
    guards[:] = [(renamed.get(root, root), chain, value) for root, chain, value in guards]
    kinds[:] = [(renamed.get(root, root), chain, kind) for root, chain, kind in kinds]
    return {new: old for old, new in renamed.items()}


def _is_scope(owner) -> bool:
    return isinstance(owner, (types.ModuleType, runtime.Cells, runtime.Globals))


def _read_data_live(fdef, fn, free, guards, locals_, kinds, in_lambda=frozenset()) -> list:
    """Each read of a free name holding data becomes its scope's attribute, read where
    the source reads it: ``G`` → ``model.G`` (the module), a closure's ``G`` →
    ``outer.G`` (``runtime.Cells``).  A call may rebind the name (``global G``), at
    any depth: a copy taken when the code was entered would keep the old value.  The
    base of a write (``G[0] = v``) stays: the passes refuse it by its name.  Moves
    the names rewritten out of ``free`` and the guards rooted at them (``G.method``)
    under their scope; adds the scopes and, to ``kinds``, the rank of each name read
    so (:func:`data_kind`); returns the scopes' names."""
    cells = _closure(fn)
    stored = {id(_base(n)) for n in nodes.walk(fdef)
              if isinstance(n, (gast.Attribute, gast.Subscript)) and not isinstance(n.ctx, gast.Load)}
    data = {k for k, v in free.items() if k != "__class__" and not _specialises(v)
            and not isinstance(v, types.ModuleType) and (k in cells or k in fn.__globals__)}
    if not data:
        return []
    taken = locals_ | set(free) | set(nodes.names_in(fdef)) | {"np", "rt", "cp", "dispatch"}
    scopes, kept = {}, set()

    def scope_of(key):
        closure = key in cells
        if closure not in scopes:
            base = fn.__qualname__.split(".<locals>")[0].rsplit(".", 1)[-1] if closure \
                else fn.__module__.rsplit(".", 1)[-1] if fn.__module__ else ""
            name = nodes.fresh_name("".join(c for c in base if c.isalnum() or c == "_").strip("_")
                          or ("closure" if closure else "module"), taken)
            scopes[closure] = (name, runtime.Cells({k: cells[k] for k in data if k in cells}) if closure
                               else _module_of(fn))
        return scopes[closure][0]

    class Live(nodes.Transformer):
        def visit_Name(self, node):
            if id(node) in in_lambda:  # (a lambda's parameter)
                return node
            if node.id not in data or not isinstance(node.ctx, gast.Load) or id(node) in stored:
                if node.id in data:
                    kept.add(node.id)
                return node
            read = gast.Attribute(value=nodes.name(scope_of(node.id)), attr=node.id, ctx=gast.Load())
            kinds.append((read.value.id, (node.id,), data_kind(free[node.id])))
            anno.inherit(read.value, node)
            return anno.inherit(read, node)
    Live().visit(fdef)
    for i, (root, chain, value) in enumerate(guards):
        if root in data and root not in kept:
            guards[i] = (scope_of(root), (root, *chain), value)
    for key in data - kept:
        del free[key]
    for name, scope in scopes.values():
        free[name] = scope
    return [name for name, _ in scopes.values()]


def _module_of(fn):
    """The module whose dict is ``fn``'s globals, or a view of them (code made by exec)."""
    module = sys.modules.get(fn.__module__)
    if module is not None and vars(module) is fn.__globals__:
        return module
    return runtime.scope_of_globals(fn.__globals__)


def _base(node):
    while isinstance(node, (gast.Attribute, gast.Subscript)):
        node = node.value
    return node


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
