"""Refusals: which programs the reverse pass refuses, and what it checks when the code runs.

A program srcgrad cannot differentiate soundly is refused at the user's line, with what
to write instead, rather than given a wrong derivative: a write in place that the
backward sweep cannot follow (``analysis/in_place.py``), a value being differentiated
kept in an object's state and read back (``analysis/state.py``), or given to what srcgrad
does not differentiate (``analysis/nondifferentiable.py``).  Where the answer is known
only when the code runs (a method found then, a field an earlier call may have kept),
the statement is rewritten to check it there (``dispatch.unchanging``, ``rt.field``,
``rt.kept``...).

The reverse pass asks, for each statement of the forward sweep as it visits it (last
first), ``check(stmt)`` before building its adjoint, and the other public methods where
an adjoint needs them (``check_underived``, ``check_spread``, ``check_holders``...).

Requires: a :class:`~srcgrad.ir.Core` program, its activity and ranks, and
the free names' values at compile time (``resolve.FreeNames.names``).
Guarantees: what is not refused is left as it is, or rewritten to be checked when it
runs; the order in which the statements are asked decides which refusal comes first.
"""
from __future__ import annotations

import types

import gast

from ..anno import Kind
from .. import anno, errors, nodes, runtime, templates
from ..rules.registry import lookup as registry_lookup
from . import outside
from .in_place import _InPlaceWrites
from .mutation import _CONTAINER_MUTATORS, _changed_defaults, _target_name
from .nondifferentiable import _Nondifferentiable
from .read_back import StoresReadBack
from .state import _ObjectState


class Refusals(_InPlaceWrites, _ObjectState, _Nondifferentiable):
    """The refusals of one function, asked statement by statement (small tables of the
    function, found at the first question that needs them)."""

    def __init__(self, core, activity, ranks, free=None):
        self.core, self.activity, self.ranks = core, activity, ranks
        self.free = free or {}        # free name -> its value at compile time
        self.memory = None            # which arrays names may refer to (analysis/sharing.py), when needed
        self.stores = None            # which attribute stores something reads back (_kept_apart), when needed
        self.definitions = None       # name -> the statement that assigns it last (_bookkeeping), when needed
        self.local_defs = None        # name -> the first nested `def` of that name (_check_local_def)
        self.active_reads = None      # where active statements read each name (_read_by_backward)
        self.mutated = {}             # id(function called) -> the parameters it changes in place
        self.writes = outside.Writes()  # what a callee writes into outside its parameters
        self.reaching = None          # id(object) -> names whose value is, or is read through, it

    def read_stores(self, body):
        """Read which stores ``body`` reads back now, before the reverse pass rewrites a
        statement (an operator dispatched when it runs becomes a call then, which must not
        change what the stores before it see)."""
        if any(anno.get(s, "kind") in (Kind.SETATTR, Kind.SETENTRY, Kind.CALL) for s in nodes.statements(body)):
            self.stores = StoresReadBack(self.core.body)

    def check(self, stmt) -> bool:
        """Refuse ``stmt`` where it cannot be followed, or rewrite it to be checked when it
        runs.  True where it has no adjoint (it is done with: a check only, bookkeeping, a
        call whose result is not used)."""
        self._check_writer(stmt)
        self._check_mutating_method(stmt)
        self._field_read(stmt)
        kind = anno.get(stmt, "kind")
        if anno.get(stmt, "manager"):
            self._check_manager(stmt)
            return True
        if isinstance(stmt, gast.Expr) and kind in (Kind.UNKNOWN, Kind.NONDIFF):
            self._check_discarded_call(stmt)
            return True
        if anno.has(stmt, "constructs"):
            self._check_construction(stmt)
            return True
        self._check_container_builtin(stmt)
        if kind == Kind.CALL:
            self._check_local_def(stmt)
            return isinstance(stmt.value, gast.Call) and self._checked_call(stmt) or isinstance(stmt, gast.Expr)
        checks = _STATEMENT_CHECKS.get(kind)
        if checks is not None:
            checks(self, stmt)
            return True
        return False

    def _checked_call(self, stmt):
        """The checks of a call the forward sweep makes, its result used or not (``h = f(y)`` as much as
        ``f(y)``): a change it makes to ``y`` is invisible to the caller's adjoints.  True where the
        call is bookkeeping, done with."""
        # Whether or not its result is used (`h = f(y)` as much as `f(y)`): the change
        # it makes to `y` is invisible to the caller's adjoints.
        fn = anno.get(stmt.value.func, "resolved")
        # (also when the argument it changes is not differentiated: it may store one that is)
        given = [n for a in stmt.value.args + [k.value for k in stmt.value.keywords]
                 for n in nodes.loaded_names(a)]
        varied = [n for n in given if n in self.activity.varied]
        method = stmt.value.func.attr if isinstance(stmt.value.func, gast.Attribute) else None
        if method in _CONTAINER_MUTATORS and self._user_object(anno.get(stmt, "receiver")):
            method = None  # (`opt.update(w, g)` on an optimizer of the user's: a method like any other)
        if varied and fn is None and method in _CONTAINER_MUTATORS and self._grown_apart(stmt):
            return True  # (bookkeeping: a cache on the object grows by the value, with no adjoint)
        if varied and fn is None and self.stores is not None and self.stores.grows(stmt) is not None:
            attr = self.stores.grows(stmt)[1]
            raise errors.at(stmt.value, f"`.{method}(...)` grows the `.{attr}` an object holds by a value "
                            f"being differentiated, and `.{attr}` (or a call that may read it) is read "
                            "after it: srcgrad keeps what a call adds to an object's state as "
                            "bookkeeping, with no adjoint, so a gradient through that read would be lost",
                            self.stores.advice(stmt, attr), kind=errors.UnsupportedSyntaxError)
        if varied and fn is None and method in _CONTAINER_MUTATORS:
            # `obj.items.append(h)`, `ys[i].append(h)`: a list or dict that normalize does
            # not track (not made here, or reached through a key known only at run time).
            given = "a value" if varied[0].startswith("_") else f"`{varied[0]}`"
            raise errors.at(stmt.value, f"`.{method}(...)` is given {given}, which is being "
                            "differentiated, on a list or dict that srcgrad does not follow "
                            "(only one made in this function and named, or held in a tuple, list or "
                            "dict made here under a literal key)",
                            "build the list in a local name (`hs = []`, `hs.append(h)`) and use it "
                            "from there, or return it (with has_aux=True)",
                            kind=errors.UnsupportedSyntaxError)
        varied += self._read_by_backward([n for n in given if n not in varied], stmt)
        if varied and fn is not None and not runtime.is_gradient_function(fn) \
                and self._mutated_parameters(fn):  # (a gradient function is refused as such below)
            given = "a value" if varied[0].startswith("_") else f"`{varied[0]}`"
            callee = nodes.to_source(stmt.value.func)
            defaults = _changed_defaults(fn, stmt.value)
            if defaults:
                raise errors.at(stmt.value, f"`{callee}` changes its parameter `{defaults[0]}` in place, "
                                f"and this call leaves it its default (a {defaults[1]}): one value that every "
                                "call shares and keeps, which srcgrad cannot follow (this call is given "
                                f"{given}, which is being differentiated)",
                                f"in `{callee}`, default `{defaults[0]}` to None and make the value inside "
                                f"(`if {defaults[0]} is None: {defaults[0]} = []`), or pass it in and "
                                "return the new value", kind=errors.UnsupportedSyntaxError)
            raise errors.at(stmt.value, f"`{callee}` changes its arguments in "
                            f"place, and is given {given}, which is being differentiated (or read "
                            "by the backward sweep): srcgrad cannot follow a change made inside "
                            "another function",
                            f"in `{callee}`, write into a copy (`y = np.copy(y)`) and return the "
                            f"new value, and assign it here (`y = {callee}(...)`)",
                            kind=errors.UnsupportedSyntaxError)
        receiver, call = anno.get(stmt, "receiver"), stmt.value
        target = _target_name(stmt)
        given_varied = [n for n in given if n in self.activity.varied]
        if given_varied and fn is not None and not runtime.is_gradient_function(fn) \
                and (target is None or not self.activity.active(target)):
            kept = outside.stores(fn)  # (a differentiated result: its own compilation refuses it)
            if kept:
                raise errors.at(stmt.value, *outside.stores_refusal(self._shown(nodes.to_source(stmt.value.func)),
                                                            given_varied[0], kept),
                                kind=errors.UnsupportedSyntaxError)
        called = isinstance(call.func, gast.Name) and call.func.id in self.activity.varied
        if isinstance(stmt, gast.Expr) and (called or isinstance(receiver, gast.Name)
                                            and receiver.id in self.activity.varied
                                            and isinstance(call.func, gast.Attribute)):
            # `model.reset()`, `model(x)`: run as written, but a float field it replaces or
            # adds is refused (a later read would carry no adjoint, or send it to the
            # parameter it replaced).
            origin = anno.get(stmt, "origin")
            obj, name = (call.func, "__call__") if called else (call.func.value, call.func.attr)
            stmt.value = nodes.call("rt.keeping_fields", [
                nodes.copy(obj), nodes.const(name),
                nodes.const(origin.where if origin else "?")] + call.args,
                [(k.arg, k.value) for k in call.keywords])
        elif varied and fn is None and (target is None or not self.activity.active(target)):
            # Known only at run time (a method): check it there, at the user's line (its
            # pullback, if its result were differentiated, would refuse such writes itself).
            origin = anno.get(stmt, "origin")
            if origin is not None:
                stmt.value.func = nodes.call("dispatch.unchanging", [stmt.value.func] + [
                    nodes.const(v) for v in (origin.filename, origin.line, origin.col, origin.text)])
        self._check_outside_writes(stmt, fn)
        return False

    def _user_spelling(self, atom) -> str:
        """How the user wrote ``atom``: a temporary (``_t1``) is shown as the value it holds
        (``self.d``).  (Error messages only: it searches the function.)"""
        if not (isinstance(atom, gast.Name) and atom.id.startswith("_")):
            return nodes.to_source(atom)
        for stmt in nodes.statements(self.core.body):
            if isinstance(stmt, gast.Assign) and nodes.assigned_names(stmt) == [atom.id]:
                bound = anno.get(stmt, "bound") or {}
                if anno.get(stmt, "rule") is registry_lookup(getattr) and "name" in bound:
                    name = templates.static_value(bound["name"])
                    if isinstance(name, str):
                        return f"{self._user_spelling(bound.get('obj', stmt.value))}.{name}"
                return nodes.to_source(stmt.value)
        return "this value"

    def _shown(self, spelled) -> str:
        """The user's spelling of a name or expression, a temporary shown as the value it
        holds, without the module a global is read through (``G``, not ``model.G``)."""
        if spelled.startswith("_") and spelled.isidentifier():
            held = self._user_spelling(nodes.name(spelled))
            spelled = spelled if held == "this value" else held
        head = spelled.split(".")[0]
        while "." in spelled and isinstance(self.free.get(head), types.ModuleType) \
                and not spelled.startswith(("np.", "numpy.")):
            spelled = spelled.split(".", 1)[1]
            head = spelled.split(".")[0]
        return spelled


# The statements that have no adjoint, only checks, by kind.
_STATEMENT_CHECKS = {
    "setentry": Refusals._entry_store,
    "setattr": Refusals._attribute_store,
    "def": Refusals._check_nested_def,
}
