"""Which callees the inliner inlines: each parsed, desugared, resolved and checked once.

Requires: the function being compiled (``fn``), its free names (``free``) and own locals
(``own``), as ``inline._Inliner`` holds them.
Guarantees: ``InlinedCallees._parsed``: a callee's checked tree and free names, with the branches
the call's literals and argument kinds decide folded, and its single ``return`` at the end; None
(kept as a run-time call) for anything the inliner cannot take whole: recursion into srcgrad,
``*args``, a rule of its own, a nested scope, a stored attribute, a write into a global.
"""
from __future__ import annotations

import builtins
import inspect

import gast

from .. import anno, errors, nodes, runtime
from ..rules import registry
from . import desugar, exits, parse, resolve, validate
from .folding import _folded, _put_literals, fold_decided_kinds
from .inline_objects import _MISSING, _root

_NOT_INLINED = (gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef, gast.Lambda, gast.Global,
                gast.Nonlocal, gast.Yield, gast.YieldFrom, gast.Await, gast.ListComp, gast.SetComp,
                gast.DictComp, gast.GeneratorExp, gast.Try, gast.Delete)
_TRANSFORMS = ("srcgrad.api", "srcgrad.higher", "srcgrad.checking", "srcgrad.dispatch", "srcgrad.pipeline")


class InlinedCallees:
    """A mixin of ``inline._Inliner``: the callees it can inline, parsed and checked once each."""

    def _builtin_there(self, name) -> bool:
        """Whether ``name``, read by a callee, is a builtin in the caller's code too."""
        caller = self.fn
        return anno.get(name, "resolved", _MISSING) is getattr(builtins, name.id, _MISSING) \
            and name.id not in caller.__globals__ and name.id not in caller.__code__.co_freevars \
            and name.id not in self.free.names and name.id not in self.own

    def _parsed(self, fn, literals=None, kinds=None):
        """``fn``'s checked tree and free names, or None where it is not inlined; ``literals``
        (``{parameter: literal node}``, the call's) are put in and the branches they decide
        folded first, so that a branch the call never takes neither stops the inlining nor
        is differentiated (``plot(ax)`` under ``if ax:`` given ``ax=None``); ``kinds``
        (``{parameter: TreeRank}`` of the displays the call gives) decide ``isinstance``."""
        key = (fn, tuple(sorted((p, type(c.value).__name__, c.value) for p, c in (literals or {}).items())),
               tuple(sorted((p, repr(k)) for p, k in (kinds or {}).items())))
        if key in self.parsed:
            return self.parsed[key]
        self.parsed[key] = None
        code = fn.__code__
        if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS
                            | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE) \
                or code.co_freevars and self.fn.__globals__.get("__name__") == "srcgrad.generated" \
                or registry.lookup(fn) is not None or hasattr(fn, "defadjoint") \
                or runtime.is_gradient_function(fn) \
                or fn.__module__ and fn.__module__.split(".")[0] in ("numpy", "scipy", "cupy") \
                or fn.__module__ in _TRANSFORMS:  # (`grad(f)` made inside the function: called as it is)
            return None
        try:
            fdef = parse.transform(fn)
            desugar.transform(fdef, fn)
            callee_free = resolve.transform(fdef, fn)
            if literals:
                stored = {n.id for n in nodes.walk(fdef) if isinstance(n, gast.Name)
                          and isinstance(n.ctx, (gast.Store, gast.Del))}
                _put_literals(fdef.body, {p: c for p, c in literals.items() if p not in stored})
                fdef.body = _folded(fdef.body)
            if kinds:
                fold_decided_kinds(fdef, kinds)
            if not fdef.body or not isinstance(fdef.body[-1], (gast.Return, gast.Raise)):
                fdef.body.append(_located(gast.Return(value=nodes.const(None)), fdef))  # (Python's own)
            exits.transform(fdef)
            validate.transform(fdef)
        except errors.SrcgradError:
            return None  # compiled on its own at run time, as before, where the error shows
        inside = [n for s in fdef.body for n in nodes.walk(s)]
        local = resolve.local_names(fdef)
        if any(isinstance(n, _NOT_INLINED) for n in inside) \
                or (fn.__module__ or "").startswith("srcgrad") and any(isinstance(n, gast.Raise) for n in inside) \
                or any(isinstance(n, gast.Return) for s in fdef.body[:-1] for n in nodes.walk(s)) \
                or any(isinstance(n, (gast.Attribute, gast.Subscript)) and isinstance(n.ctx, gast.Store)
                       and _root(n) not in local for n in inside) \
                or any(isinstance(n, gast.Attribute) and isinstance(n.ctx, gast.Store) for n in inside) \
                or _stores_object_entries(inside) \
                or "__class__" in callee_free.names:
            return None
        # Every name it reads is its own or resolved in its module (else the caller's
        # namespace would answer for it).
        # A builtin (`range`) is the same one there unless the caller binds that name.
        if any(isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load) and n.id not in local
               and n.id not in callee_free.names and not self._builtin_there(n) for n in nodes.walk(fdef)):
            return None
        from ..analysis.mutation import _changed_in_place  # (the reading of a callee's writes)
        # A callee that changes its arguments in place (`buf.append(h)`, `y[0] = v`) is inlined:
        # the change is then the caller's own, which normalize and the sharing analysis follow
        # (or refuse) as if written there.  One that changes a global is not.
        if _changed_in_place(fdef.body, set(callee_free.names), fn):
            return None
        if self._writes_outside(fn, literals):
            return None  # (a run-time call: `dispatch.unchanging` and the reverse pass judge it there)
        self.parsed[key] = (fdef, callee_free)
        return self.parsed[key]

    @staticmethod
    def _writes_outside(fn, literals) -> bool:
        """Whether calling ``fn`` (given ``literals``) may write, in place, into what its caller
        can reach other than its arguments (a global array, through ``exec`` or ``setattr``):
        such a call stays a run-time one, which is checked there."""
        # (its raw source: resolve rewrites a global read live, `G`, as its scope's `module.G`,
        # which the analysis does not read as a global)
        from ..analysis import outside  # (read from the source, with the branches the literals decide folded)
        try:
            tree = parse.transform(fn)
        except errors.SrcgradError:
            return True
        namespace = fn.__globals__
        resolved = {id(n): namespace.get(n.func.id) for n in nodes.walk(tree)
                    if isinstance(n, gast.Call) and isinstance(n.func, gast.Name)}
        for call in nodes.walk(tree):
            if isinstance(call, gast.Call) and id(call) in resolved:
                anno.set(call.func, "resolved", resolved[id(call)])
        if literals:
            _put_literals(tree.body, literals)
            tree.body = _folded(tree.body) or [gast.Pass()]
        # (its own statements only: a function it calls is judged where it is inlined, with the
        # literals it is given, or checked when it runs)
        return bool(outside.Writes().of_tree(fn, tree, own=True))


def _located(stmt, call):
    """A statement the inliner writes (a binding): at the call's line."""
    for node in nodes.walk(stmt):
        anno.inherit(node, call)
    return stmt


def _stores_object_entries(inside) -> bool:
    """Whether a callee replaces an entry of a container an object holds (``self.cache[k] = v``,
    ``P[k] = v`` on ``P = self.parameters``): state, as a stored attribute is (not inlined)."""
    fields = {t.id for n in inside if isinstance(n, gast.Assign) and isinstance(n.value, gast.Attribute)
              for t in n.targets if isinstance(t, gast.Name)}
    return any(isinstance(n, gast.Subscript) and isinstance(n.ctx, gast.Store)
               and (isinstance(n.value, gast.Attribute) or isinstance(n.value, gast.Name) and n.value.id in fields)
               for n in inside)
