"""Writes in place the backward sweep cannot follow.

The reverse pass reads, in the backward sweep, arrays that the forward sweep computed
with; a statement that changes one of them in place after an active statement read it
(``np.copyto(y, v)``, ``y.sort()``, a helper that writes into its argument or into a
global) would give that adjoint the changed value.  These checks refuse such a statement
at the user's line, or, where what a call writes is known only when the code runs (a
method), have the generated code check it there (``dispatch.unchanging``).

Requires: a :class:`~srcgrad.ir.Core` program, its activity and ranks, and
the free names' values at compile time; the statements as the reverse pass visits them
(last first).
Guarantees: a statement is refused (``errors.UnsupportedSyntaxError``) or left as it is,
except a call known only when it runs, which is wrapped in ``dispatch.unchanging``.
What an active statement reads (``_ActiveReads``) and which arrays names may share
(``analysis/sharing.py``) are found once, at the first question.
"""
from __future__ import annotations

import operator
import re
import types

import gast

from ..anno import Kind
from .. import anno, errors, nodes, runtime
from ..rules.registry import is_numpy as registry_is_numpy
from ..rules.registry import lookup as registry_lookup
from ..transforms.anf import parameters
from . import outside, sharing
from .mutation import (_CONTAINER_MUTATORS, _MUTATING_METHODS, _WRITING_RULES, _changed_in_place,
                       _changes_arguments, _target_name, _writes_into_first, _written_arguments)

# Calls for their effect that read their arguments only: print, and the check after a call
# that what the code was specialised on is unchanged (in gradient code that forward mode reads).
_READS_ONLY = {"builtins.print", "srcgrad.specialise.Guards.check",
               "srcgrad.nn.functional._check_exact_gelu", "srcgrad.nn.functional._check_reduction"}


class _InPlaceWrites:
    """The checks of writes in place, a part of :class:`~.refusals.Refusals` (whose
    ``__init__`` sets the state they read)."""

    def _check_discarded_call(self, stmt):
        """A call whose result is not used, given a value being differentiated: refused where it may change
        it in place."""
        rule = anno.get(stmt, "rule")
        # Varied, not active: what the call does to its argument is invisible to activity.
        active = [n for n in nodes.loaded_names(stmt.value) if n in self.activity.varied]
        fn = anno.get(stmt, "callee") or (anno.get(stmt.value.func, "resolved")
                                          if isinstance(stmt.value, gast.Call) else None)
        if _writes_into_first(fn) or rule is not None and rule.name in _WRITING_RULES:
            # Also an array the backward sweep reads (`v = y.T` used before `np.copyto(y, 0)`).
            active += self._read_by_backward(nodes.loaded_names(stmt.value.args[0])
                                             if stmt.value.args else [], stmt)
        if active and not (rule is not None and rule.name in _READS_ONLY):
            raise errors.at(stmt.value, f"a call whose result is not used, given `{active[0]}`, "
                            "which is being differentiated (or read by the backward sweep): if it "
                            "changes its argument in place, "
                            "srcgrad cannot follow the change",
                            "write the update as an assignment (`y[idx] = v`, `y = y + v`; `np.add.at(y, "
                            "idx, x)` of a name is followed), or assign the call's result",
                            kind=errors.UnsupportedSyntaxError)
        if anno.get(stmt, "kind") == Kind.UNKNOWN and fn is not None and not registry_is_numpy(fn):
            # A callable without a rule (a functools.partial, a callable object): what it
            # writes into outside its arguments is checked as a function's is.
            self._check_outside_writes(stmt, fn)

    def _check_mutating_method(self, stmt):
        """``y.sort()``, ``y.fill(0)``, ``G.A.__setitem__(0, v)`` on an array whose kind was
        unknown when compiling (a global read where the source reads it): refused where the
        backward sweep reads that array, as ``np.copyto(y, v)`` is (``_check_writer``)."""
        value = getattr(stmt, "value", None)
        if not isinstance(stmt, (gast.Assign, gast.Expr)) or not isinstance(value, gast.Call) \
                or not isinstance(value.func, gast.Attribute) \
                or value.func.attr not in _MUTATING_METHODS - _CONTAINER_MUTATORS:
            return
        names = nodes.loaded_names(value.func.value)
        read = [n for n in names if n in self.activity.varied] + self._read_by_backward(names, stmt)
        if read:
            raise errors.at(value, f"`.{value.func.attr}(...)` changes an array in place that is being "
                            "differentiated or read by the backward sweep: srcgrad cannot follow the change",
                            "make the new array with an assignment (`y = np.sort(y)`, `y = np.full_like(y, v)`), "
                            "or work on a copy (`y = np.copy(y)` first)", kind=errors.UnsupportedSyntaxError)

    def _check_writer(self, stmt):
        """Refuse a call that writes into an array given to it (``np.fill_diagonal(y, 0)``,
        ``np.add.at(y, i, v)``, ``rng.shuffle(y)``, ``np.exp(v, out=y)``) where that array is
        being differentiated or read by the backward sweep, wherever the call is: its result
        assigned (``_ = np.copyto(y, v)``), printed or tested as much as discarded."""
        value = getattr(stmt, "value", None)
        if not isinstance(stmt, (gast.Assign, gast.Expr)) or not isinstance(value, gast.Call):
            return
        written = _written_arguments(value, anno.get(stmt, "callee") or anno.get(value.func, "resolved"),
                                     anno.get(stmt, "rule"))
        names = [n for a in written for n in nodes.loaded_names(a)]
        varied = [n for n in names if n in self.activity.varied]
        varied += self._read_by_backward([n for n in names if n not in varied], stmt)
        # A differentiated value written into another array (`np.copyto(c, x * 2)`): its
        # adjoint would be lost.
        given_in = [n for a in value.args + [k.value for k in value.keywords] for n in nodes.loaded_names(a)
                    if n in self.activity.varied] if written else []
        if not given_in and not varied:
            return
        callee = nodes.to_source(value.func)
        if isinstance(value.func, gast.Attribute) and nodes.to_source(value.func.value).startswith("_"):
            callee = f".{value.func.attr}"  # (`np.random.default_rng(0).shuffle`: a temporary)
        if given_in and not varied:
            given = "a value" if given_in[0].startswith("_") else f"`{given_in[0]}`"
            raise errors.at(value, f"`{callee}(...)` writes {given}, which is being differentiated, into "
                            "an array in place: srcgrad cannot follow the change",
                            "make the new array with an assignment (`c = x * 2`, `c[idx] = v`; "
                            "`np.add.at(y, idx, x)` of a name is followed)",
                            kind=errors.UnsupportedSyntaxError)
        if varied:
            shown = self._shown(varied[0])  # (`G`, where the code reads `model.G` into `_t1`)
            given = "a value" if shown.startswith("_") else f"`{shown}`"
            raise errors.at(value, f"`{callee}(...)` changes {given} in place, which is being "
                            "differentiated (or read by the backward sweep): srcgrad cannot follow "
                            "the change", "write the update as an assignment (`y[idx] = v`, `y = y + v`; "
                            "`np.add.at(y, idx, x)` of a name is followed), or work on a copy "
                            "(`y = np.copy(y)` first)", kind=errors.UnsupportedSyntaxError)

    def _check_outside_writes(self, stmt, fn):
        """A call that writes, in place, into an array it is not given (a global, a class
        attribute, what a global dict holds, its receiver's), which the backward sweep
        may read after it: refused at the call.  Known when compiling: through
        ``analysis/outside.py``; a method known only at run time (``buf.bump()``) whose
        receiver, or a value read through a free name, the backward sweep reads: checked
        there (``dispatch.unchanging(..., outside=True)``)."""
        call = stmt.value
        if not isinstance(call, gast.Call):
            return
        if fn is None:
            func = call.func
            target = _target_name(stmt)
            if not isinstance(func, (gast.Attribute, gast.Name)) or nodes.to_source(func).startswith("rt.") \
                    or target is not None and self.activity.active(target):
                # (`rt.keeping_fields` checks the fields of an object being differentiated; a
                # result differentiated: `dispatch.vjp_call` compiles the method on its own;
                # a name: a function given as an argument, known only when it runs)
                return
            watched = nodes.loaded_names(func) + sorted(
                {n for names in self._reaching_names().values() for n in names})
            if not self._read_by_backward(watched, stmt):
                return
            origin = anno.get(stmt, "origin")
            if origin is None:
                return
            checked = isinstance(func, gast.Call) and nodes.to_source(func.func) == "dispatch.unchanging"
            if not checked:
                call.func = func = nodes.call("dispatch.unchanging", [func] + [
                    nodes.const(v) for v in (origin.filename, origin.line, origin.col, origin.text)])
            func.keywords.append(gast.keyword(arg="outside", value=nodes.const(True if checked else "only")))
            return
        if runtime.is_gradient_function(fn):
            return
        reaching = self._reaching_names()
        for what, obj in self.writes(fn):
            read = self._read_by_backward(sorted(reaching.get(id(obj), ())), stmt)
            if not read:
                continue
            callee = self._shown(nodes.to_source(call.func))
            if isinstance(fn, types.MethodType) and fn.__func__.__code__.co_argcount \
                    and isinstance(call.func, gast.Attribute):
                own = fn.__func__.__code__.co_varnames[0]
                if what.split(".")[0].split("[")[0] == own:
                    what = self._shown(nodes.to_source(call.func.value)) + what[len(own):]
            short = re.findall(r"\w+", what)[-1]
            raise errors.at(call, f"`{callee}(...)` writes into `{what}` in place, which the backward sweep "
                            f"reads (as `{self._shown(read[0])}`, read before this call): srcgrad cannot "
                            "follow a change made inside another function",
                            f"read a copy made before the call (`{short}_before = np.copy({what})`), or pass "
                            f"the array to `{callee}` and return the new one (`{short} = {callee}({short})`, "
                            "writing into a copy there)", kind=errors.UnsupportedSyntaxError)

    def _reaching_names(self) -> dict:
        """``id(object) -> names``: the names whose compile-time value is that object or is
        read through it (``_t1 = model.CFG``, ``_t2 = _t1['w']``: both reach ``CFG``),
        from the free names through fields and constant keys.  Found once."""
        if self.reaching is not None:
            return self.reaching
        chains = {n: [v] for n, v in self.free.items()}
        field, item = registry_lookup(getattr), registry_lookup(operator.getitem)
        for stmt in nodes.statements(self.core.body):
            if not (isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name)):
                continue
            rule, bound = anno.get(stmt, "rule"), anno.get(stmt, "bound") or {}
            parts = list(bound.values())
            if anno.get(stmt, "kind") == Kind.COPY and isinstance(stmt.value, gast.Name):
                parts, step = [stmt.value], None
            elif rule in (field, item) and len(parts) >= 2 and isinstance(parts[1], gast.Constant):
                step = ("attr" if rule is field else "item", parts[1].value)
            else:
                continue
            base = chains.get(parts[0].id) if isinstance(parts[0], gast.Name) else None
            if base is None:
                continue
            value = base[-1] if step is None else outside._step(base[-1], step)
            chains[stmt.targets[0].id] = base + ([] if step is None or value is outside._STOP else [value])
        self.reaching = {}
        for name, chain in chains.items():
            for obj in chain:
                if not isinstance(obj, (types.ModuleType, type(None), bool, int, float, str)):
                    self.reaching.setdefault(id(obj), set()).add(name)
        return self.reaching

    def _mutated_parameters(self, fn):
        """``_mutated_parameters(fn)``, read from ``fn``'s source once per compilation."""
        if id(fn) not in self.mutated:
            self.mutated[id(fn)] = _changes_arguments(fn)
        return self.mutated[id(fn)]

    def _check_local_def(self, stmt):
        """A call of a function defined in this one (``def add(v): xs.append(v)``) that
        changes in place what it captures or what it is given: srcgrad compiles the
        nested function on its own and cannot follow the change, so it is refused when
        a value being differentiated takes part."""
        call = stmt.value
        if not isinstance(call.func, gast.Name):
            return
        if self.local_defs is None:  # (found once: the first `def` of each name)
            self.local_defs = {}
            for s in nodes.statements(self.core.body):
                if isinstance(s, gast.FunctionDef) and anno.get(s, "kind") == Kind.DEF:
                    self.local_defs.setdefault(s.name, s)
        local = self.local_defs.get(call.func.id)
        if local is None:
            return
        captured = set(anno.get(local, "captures"))
        touched = captured | set(parameters(local.args))
        given = [n for a in call.args + [k.value for k in call.keywords] for n in nodes.loaded_names(a)]
        varied = [n for n in given + sorted(captured) if n in self.activity.varied]
        if varied and _changed_in_place(local.body, touched):
            name = "a value" if varied[0].startswith("_") else f"`{varied[0]}`"
            raise errors.at(call, f"`{call.func.id}` (defined in this function) changes a value in place "
                            f"(a list it appends to, an array it writes into), and {name}, which is being "
                            "differentiated, takes part: srcgrad cannot follow a change made inside "
                            "another function", f"return the new value from `{call.func.id}` and assign "
                            "it, or do the change here", kind=errors.UnsupportedSyntaxError)

    def _read_by_backward(self, names, call) -> list:
        """Those of ``names`` that may refer to an array read by an active statement that
        runs before ``call`` (earlier, or in a loop around it): that statement's adjoint
        may read the array in the backward sweep, after ``call`` changed it in place."""
        if not names:
            return []
        if self.memory is None:
            self.memory = sharing.Memory(self.core.body, self.ranks, self.core.params)
        if self.active_reads is None:
            self.active_reads = _ActiveReads(self.core.body, self.activity)
        return [n for n in names if any(self.active_reads.before(r, call) for r in self.memory.sharing(n))]


class _ActiveReads:
    """Where the right-hand sides of active assignments read each name, found once
    (what reverse adds to the body later, pushes and trip counts, reads none)."""

    def __init__(self, body, activity):
        self.position, self.first, self.in_loop, self.loops = {}, {}, {}, {}
        self._walk(body, activity, [])

    def _walk(self, stmts, activity, loops):
        for stmt in stmts:
            self.position[id(stmt)] = len(self.position)
            self.loops[id(stmt)] = loops
            if isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name) \
                    and activity.active(stmt.targets[0].id):
                for n in nodes.loaded_names(stmt.value):
                    self.first.setdefault(n, len(self.position))
                    for loop in loops:
                        self.in_loop.setdefault(id(loop), set()).add(n)
            inner = loops + [stmt] if isinstance(stmt, (gast.For, gast.While)) else loops
            for field in ("body", "orelse"):
                self._walk(getattr(stmt, field, None) or [], activity, inner)

    def before(self, name, stmt) -> bool:
        """Whether an active assignment reads ``name`` before ``stmt`` runs: earlier in
        the function, or anywhere in a loop around ``stmt``."""
        return self.first.get(name, len(self.position) + 1) <= self.position[id(stmt)] \
            or any(name in self.in_loop.get(id(loop), ()) for loop in self.loops[id(stmt)])
