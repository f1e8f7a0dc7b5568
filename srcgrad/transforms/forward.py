"""Pass 6 (forward mode) — each statement followed by its tangent.

Requires: a :class:`~srcgrad.ir.Core` program, its activity and ranks (as ``reverse``).
Guarantees: one statement list, the core body without its ``return``, in which
each statement that assigns an active value ``v`` is followed by the statements
computing its tangent ``v_dot`` (the directional derivative along the tangents
of the ``wrt`` inputs); loops and branches keep their shape, the tangent
running alongside (no stack).  A value that does not depend on the inputs has
no ``_dot``; an active value assigned from constants gets zeros.  Every
generated statement keeps its user ``group``.  A primitive without a tangent
rule, given a value with a tangent, is refused at the user's line.

Batched (``batched=True``, for ``jacfwd`` and ``hessian``): every tangent carries a
leading axis of columns (``runtime.batch_*`` say how), so one run gives many
directional derivatives.  Pointwise rules get their operands' tangents aligned to
the output's rank; matmul, getitem, sum/mean, reshapes, reductions and the
adjoints' accumulation have batched forms; any other linear map runs column by
column (``rt.batch_each``); a write into an array (``y[i] = v``) rebinds ``y_dot`` to
``rt.batch_written``'s result, which is ``y_dot`` itself written into where its memory
holds every column, else a copy that does (no other name sharing ``y`` is read after
the write: ``analysis/sharing.py`` refuses that).  What it cannot batch soundly (calls
compiled apart, properties, operands of unknown kind) raises
:class:`NotBatchable`: the caller loops over the columns instead (``forward_batched``).

Tangent rules come from the registry (``Rule.tangent``): a tangent rule
function inlined by ``templates.instantiate_tangent``, or one of the
derivations of :data:`~srcgrad.rules.registry.TANGENTS` applied here (``forward_rules``).

Before (``wrt=x``)::

    h = np.tanh(x @ w1)
    return np.sum(h)

After::

    _t1 = x @ w1
    _t1_dot = x_dot @ w1
    h = np.tanh(_t1)
    h_dot = _t1_dot * (1 - h ** 2)
    result = np.sum(h)
    result_dot = np.sum(h_dot)
"""
from __future__ import annotations

import collections
import dataclasses

import gast

from ..anno import Kind
from .. import anno, errors, nodes, templates
from ..analysis import outside
from ..tree import TreeRank
from .forward_batched import NotBatchable, _batch_helpers, _BatchedTangents  # (callers catch forward.NotBatchable)
from .forward_rules import _DONE, _PrimitiveTangents, _replaced


@dataclasses.dataclass
class Tangents:
    body: list      # the statements, primal and tangent interleaved
    tangents: dict  # wrt parameter -> the name of its tangent (a parameter of the generated function)
    result: gast.expr  # the tangent of the returned value (an atom, or a tuple of them)
    names: dict     # variable -> the name of its tangent
    extras: dict = dataclasses.field(default_factory=dict)  # name -> object the loaded module binds


def transform(core, activity, ranks, wrt, backend, batched=False) -> Tangents:
    return _Forward(core, activity, ranks, backend, batched).run(wrt)


def checked_copy(core):
    """A copy of ``core`` for a pass run only for the refusals it raises (it may change
    what it is given): statements and the atoms their annotations hold are new."""
    body = nodes.copy(core.body)
    for stmt in nodes.statements(body):
        table = stmt.__dict__.get(anno.KEY)
        if table:
            stmt.__dict__[anno.KEY] = {k: _copied(v) for k, v in table.items()}
    return dataclasses.replace(core, body=body, names=set(core.names), counter=list(core.counter),
                               final_names=dict(core.final_names), maybe_unbound=set(core.maybe_unbound))


def _copied(value):
    if isinstance(value, gast.AST):
        return nodes.copy(value)
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) and not isinstance(value, TreeRank):
        return type(value)(_copied(v) for v in value)
    return value


class _Forward(_PrimitiveTangents, _BatchedTangents):
    """The tangent sweep of one function: each statement followed by its tangent's.  A
    primitive's tangent is a part of its own (``forward_rules``; batched,
    ``forward_batched``)."""

    def __init__(self, core, activity, ranks, backend, batched=False):
        self.core, self.activity, self.ranks, self.backend = core, activity, ranks, backend
        self.batched = batched
        self.lifted = set()  # temporaries holding batched tangents (not `_dot` names)
        self.module = backend.MODULE_NAME
        self.dot = {}     # variable -> its tangent's name
        self.extras = {}
        self.group = None
        flat = list(nodes.statements(core.body))
        # Where tangents are written in place (`y_dot[i] = v_dot`), a tangent that is another
        # name's (`z_dot = x_dot` for `z = x + c`, a new array) is copied, so that the write
        # reaches exactly the names whose primals it reaches.
        self.writes = any(anno.get(s, "kind") == Kind.SETITEM and activity.active(anno.get(s, "array"))
                          for s in flat)
        self.call_results = {s.targets[0].id for s in flat if anno.get(s, "kind") == Kind.CALL
                             and isinstance(s, gast.Assign) and isinstance(s.targets[0], gast.Name)}
        # Values whose tangent is zero by their rule (`x * 0.0`, whose tangent must not meet
        # the inf of `0.0 ** 0.5`'s derivative): constants from there on, as reverse mode's
        # adjoint stops there.  Only names bound once, and not changed in place.
        self.zero = set()
        bound = collections.Counter(n for s in flat for n in nodes.assigned_names(s))
        self.once = {n for n, count in bound.items() if count == 1} - {
            anno.get(s, "array") or anno.get(s, "list") for s in flat
            if anno.get(s, "kind") in (Kind.SETITEM, Kind.APPEND, Kind.POP, Kind.ITEM)}

    # ---- names ------------------------------------------------------------
    def _dot_name(self, var):
        if var not in self.dot:
            self.dot[var] = self.core.fresh(f"{var}_dot")
        return self.dot[var]

    def _active(self, atom) -> bool:
        return isinstance(atom, gast.Name) and self.activity.active(atom.id) and atom.id not in self.zero

    def _varies(self, atom) -> bool:
        return atom is not None and any(self.activity.active(n) and n not in self.zero
                                        for n in nodes.loaded_names(atom))

    def _tangent_of(self, atom):
        """The tangent of an atom or display: its ``_dot``, or zeros for a constant."""
        if self._active(atom):
            return nodes.name(self._dot_name(atom.id))
        if isinstance(atom, (gast.List, gast.Tuple)) and self._varies(atom):
            return type(atom)(elts=[self._tangent_of(e) for e in atom.elts], ctx=gast.Load())
        return nodes.call("rt.zeros_tangent", [nodes.copy(atom)])

    def _emit(self, out, target, value):
        stmt = nodes.assign(target, value) if isinstance(target, (str, gast.expr)) else target
        if self.batched:
            _batch_helpers(stmt)
        anno.set(stmt, "group", self.group)
        out.append(stmt)

    # ---- program ------------------------------------------------------------
    def run(self, wrt) -> Tangents:
        tangents = {p: self._dot_name(p) for p in wrt}
        out = []
        # A parameter written into (`y[i] = x`) varies from that write on: zero before.
        for param in self.core.params:
            if param not in wrt and self.activity.active(param):
                self._emit(out, self._dot_name(param), nodes.call("rt.zeros_tangent", [nodes.name(param)]))
        out += self._block([s for s in self.core.body if not isinstance(s, gast.Return)])
        result = self.core.result
        if isinstance(result, gast.Tuple):
            value = nodes.tuple_([self._tangent_of(e) for e in result.elts])
        else:
            value = self._tangent_of(result)
        if self.batched:
            _batch_helpers(value)
        return Tangents(out, tangents, value, self.dot, self.extras)

    def _block(self, stmts) -> list:
        out = []
        for stmt in stmts:
            self.group = anno.get(stmt, "group")
            if isinstance(stmt, gast.If):
                stmt.body, stmt.orelse = self._block(stmt.body), self._block(stmt.orelse)
                out.append(stmt)
            elif isinstance(stmt, (gast.For, gast.While)):
                body = self._block(stmt.body)
                if isinstance(stmt, gast.For) and self._active(stmt.target):
                    # An index (`for k in range(n)`) has no tangent; its name may have one where
                    # another statement binds it (`k = k_2`, a later loop's item, carried):
                    # activity is the name's, so the index gets its zero.
                    zero = []
                    self._emit(zero, self._dot_name(stmt.target.id),
                               nodes.call("rt.zeros_tangent", [nodes.name(stmt.target.id)]))
                    body = zero + body
                stmt.body = body
                out.append(stmt)
            else:
                self.group = anno.get(stmt, "group")
                out += self._statement(stmt)
        return out

    def _check_kept(self, stmt, kind):
        """Refuse a differentiated value kept outside the code's names, as reverse mode does:
        stored in an attribute (``self.h = v``), or by a call whose result is not the
        value's way on (``acc.add(v)`` doing ``self.total = ...``; a method known only when
        it runs is checked then, ``dispatch.unchanging``).  Its tangent would be lost."""
        varied = self.activity.varied
        if kind == Kind.SETATTR:
            value = anno.get(stmt, "value")
            if isinstance(value, gast.Name) and value.id in varied:
                raise errors.at(stmt, "storing a value that is being differentiated in the attribute "
                                f"`{nodes.to_source(stmt.targets[0])}` is not supported: srcgrad cannot "
                                "follow it from there", "return it (with has_aux=True), or keep it in a local name",
                                kind=errors.UnsupportedSyntaxError)
            return
        if kind != Kind.CALL or not isinstance(getattr(stmt, "value", None), gast.Call):
            return
        call = stmt.value
        given = [n for a in call.args + [k.value for k in call.keywords] for n in nodes.loaded_names(a)
                 if n in varied]
        target = stmt.targets[0].id if isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name) \
            else None
        if not given or target is not None and self.activity.active(target):
            return
        fn = anno.get(call.func, "resolved")
        if fn is not None:
            kept = outside.stores(fn)
            if kept:
                raise errors.at(call, *outside.stores_refusal(nodes.to_source(call.func), given[0], kept),
                                kind=errors.UnsupportedSyntaxError)
            return
        origin = anno.get(stmt, "origin")
        if origin is not None:
            call.func = nodes.call("dispatch.unchanging", [call.func] + [
                nodes.const(v) for v in (origin.filename, origin.line, origin.col, origin.text)])

    def _statement(self, stmt) -> list:
        """``stmt`` and the statements computing the tangent of what it assigns."""
        out = [stmt]
        kind = anno.get(stmt, "kind")
        self._check_kept(stmt, kind)
        if kind == Kind.SETITEM:
            array, value = anno.get(stmt, "array"), anno.get(stmt, "value")
            if self.activity.active(array):
                if self.batched:  # (rebound: a column-wide copy where the tangent's memory is not its own)
                    written = self._tangent_of(value) if self._varies(value) else nodes.const(0.0)
                    self._emit(out, self._dot_name(array), nodes.call("rt.batch_written", [
                        nodes.name(self._dot_name(array)), templates._slices_as_calls(
                            nodes.copy(stmt.targets[0].slice)), written, nodes.name(array)]))
                    return out
                target = gast.Subscript(value=nodes.name(self._dot_name(array)),
                                        slice=nodes.copy(stmt.targets[0].slice), ctx=gast.Store())
                written = nodes.call("rt.written_tangent", [self._tangent_of(value), nodes.name(array)]) \
                    if self._varies(value) else nodes.const(0.0) if not anno.get(stmt, "generic") \
                    else nodes.call("rt.zeros_tangent", [nodes.copy(value)])  # (a list's item: of its shape)
                self._emit(out, nodes.assign(target, written), None)
            return out
        if kind in (Kind.APPEND, Kind.POP, Kind.ITEM):
            return out + self._list_tangent(stmt, kind)
        if not (isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name)):
            return out
        target = stmt.targets[0].id
        if not self.activity.active(target):
            return out
        if kind == Kind.CALL and self._varies_call(stmt):
            return self._call_tangent(stmt, target)
        value = None
        if kind == Kind.COPY:
            value = self._tangent_of(stmt.value) if self._active(stmt.value) else None
        elif kind == Kind.UNPACK and self.activity.active(anno.get(stmt, "source")) and self.batched \
                and isinstance(stmt.value, gast.Subscript):  # (the source may be an array)
            value = nodes.call("rt.batch_getitem", [nodes.name(self._dot_name(stmt.value.value.id)),
                                                    templates._slices_as_calls(nodes.copy(stmt.value.slice))])
        elif kind == Kind.UNPACK and self.activity.active(anno.get(stmt, "source")):
            value = _replaced(stmt.value, {id(stmt.value.value): nodes.name(self._dot_name(stmt.value.value.id))})
        elif kind == Kind.AGGREGATE:
            value = self._display_tangent(stmt.value)
        elif kind == Kind.OP:
            value = self._op_tangent(stmt, target, out)
        if value is _DONE:  # (the statement computes its tangent itself)
            return out
        if value is None and kind == Kind.OP and target in self.once:
            self.zero.add(target)
            return out
        if value is None:
            value = nodes.call("rt.zeros_tangent", [nodes.name(target)])
        elif self.writes and kind == Kind.OP and _passed_through(value):
            value = nodes.call("rt.own_tangent", [value])  # a new array's tangent: its own memory
        self._emit(out, self._dot_name(target), value)
        return out

    def _display_tangent(self, display):
        """A tuple, list, dict, record or named tuple made here: the same of the tangents."""
        if isinstance(display, gast.Call):  # Point(x=a, y=b): its fields by keyword
            return _replaced(display, {id(k.value): self._tangent_of(k.value) for k in display.keywords})
        if isinstance(display, gast.Dict):
            return gast.Dict(keys=[nodes.copy(k) for k in display.keys],
                             values=[self._tangent_of(v) for v in display.values])
        return type(display)(elts=[self._tangent_of(e) for e in display.elts], ctx=gast.Load())

    def _list_tangent(self, stmt, kind) -> list:
        """``xs.append(h)``, ``h = xs.pop(i)``, ``h = xs[i]`` on a list grown here: the same
        on the list of tangents, so that it holds each item's tangent at its place."""
        xs = anno.get(stmt, "list")
        if not self.activity.active(xs):
            return []
        listed = nodes.name(self._dot_name(xs))
        out = []
        if kind == Kind.APPEND:
            call = nodes.call(gast.Attribute(value=listed, attr="append", ctx=gast.Load()),
                              [self._tangent_of(anno.get(stmt, "value"))])
            self._emit(out, gast.Expr(value=call), None)
            return out
        if kind == Kind.POP:
            value = nodes.call(gast.Attribute(value=listed, attr="pop", ctx=gast.Load()),
                               [nodes.copy(anno.get(stmt, "index"))])
        else:
            value = gast.Subscript(value=listed, slice=nodes.copy(anno.get(stmt, "index")), ctx=gast.Load())
        target = stmt.targets[0].id if isinstance(stmt, gast.Assign) else None
        if target is not None and self.activity.active(target):
            self._emit(out, self._dot_name(target), value)
        elif kind == Kind.POP:
            self._emit(out, gast.Expr(value=value), None)  # keeps the two lists in step
        return out

    # ---- calls of the user's functions -------------------------------------
    def _varies_call(self, stmt) -> bool:
        receiver = anno.get(stmt, "receiver")
        atoms = list(anno.get(stmt, "args")) + list(anno.get(stmt, "kwargs").values()) + [receiver]
        return any(self._varies(a) for a in atoms if a is not None)

    def _call_tangent(self, stmt, target) -> list:
        """``y = f(a, b)`` → ``y, y_dot = dispatch.jvp_call(f, (0,), (a_dot,), a, b)``: the
        callee's own forward mode, compiled when first called (its rule's, for a primitive)."""
        self._unbatchable()
        if anno.get(stmt, "operator") or anno.get(stmt, "field"):
            raise errors.at(stmt.value, "forward mode does not differentiate this call yet",
                            "use srcgrad.vjp", kind=errors.UnsupportedSyntaxError)
        call = stmt.value
        args, kwargs = anno.get(stmt, "args"), anno.get(stmt, "kwargs")
        if any(isinstance(a, gast.Starred) for a in args) or any(isinstance(k, tuple) for k in kwargs):
            raise errors.at(call, f"forward mode cannot tell, when it compiles `{nodes.to_source(call)}`, "
                            "which argument each tangent belongs to", "pass the arguments one by one",
                            kind=errors.UnsupportedSyntaxError)
        if nodes.to_source(call.func).strip() == "dispatch.jvp_call" and len(call.args) >= 3 \
                and [k.arg for k in call.keywords] == ["_where"] \
                and not any(isinstance(a, gast.Starred) for a in call.args):
            # Forward mode over forward-mode code that dispatched a call when it ran: the tangent of
            # its (value, tangent) is forward mode once more over the callee's jvp code.
            target_dot = self._dot_name(target)
            fn, spec, dots, *args = call.args
            tangent = nodes.call("dispatch.jvp_call_tangent", [
                nodes.copy(fn), nodes.copy(spec), nodes.copy(dots), nodes.tuple_([nodes.copy(a) for a in args]),
                nodes.tuple_([self._tangent_of(a) for a in args]), self._tangent_of(dots),
                nodes.copy(call.keywords[0].value)])
            return [stmt, nodes.assign(target_dot, tangent)]
        if nodes.to_source(call.func).strip() in ("dispatch.jvp_call", "dispatch.jvp_method"):
            called = nodes.to_source(call.args[0]).strip() if call.args else "a function"
            raise errors.at(call, f"srcgrad does not differentiate again the forward mode it generated for "
                            f"`{called}`, a call dispatched when the code runs (a derivative of this order "
                            "through it: a fifth by nesting srcgrad.grad, a third through a function "
                            "dispatched when it runs)",
                            "take this derivative by central differences of the one before",
                            kind=errors.UnsupportedSyntaxError)
        receiver = anno.get(stmt, "receiver")
        wrt = [("self", receiver)] if self._varies(receiver) else []
        wrt += [(i, a) for i, a in enumerate(args) if self._varies(a)]
        wrt += [(k, a) for k, a in kwargs.items() if self._varies(a)]
        spec = nodes.tuple_([nodes.const(w) for w, _ in wrt])
        dots = nodes.tuple_([self._tangent_of(a) for _, a in wrt])
        origin = anno.get(stmt, "origin")
        stmt.targets = [nodes.tuple_([nodes.name(target, "store"), nodes.name(self._dot_name(target), "store")],
                                     "store")]
        if receiver is not None and "self" in [w for w, _ in wrt] and isinstance(call.func, gast.Attribute):
            # obj.name(...): a method, or a layer stored in obj, whose tangent is obj_dot.name
            head = ["dispatch.jvp_method", [nodes.copy(call.func.value), nodes.const(call.func.attr)]]
        else:
            head = ["dispatch.jvp_call", [call.func]]
        stmt.value = nodes.call(head[0], head[1] + [spec, dots] + call.args,
                                [(k.arg, k.value) for k in call.keywords]
                                + [("_where", nodes.const(origin.where if origin else "?"))])
        return [stmt]


def _passed_through(value) -> bool:
    """Whether a tangent expression may be another name's tangent itself (a name, or a
    helper that returns its argument when it can), not a new array."""
    if isinstance(value, gast.Call) and nodes.to_source(value.func).strip() in ("rt.broadcast_tangent",
                                                                            "rt.cast_tangent"):
        return _passed_through(value.args[0])  # (a new array where they change it)
    return isinstance(value, gast.Name) or isinstance(value, gast.Call) \
        and nodes.to_source(value.func).strip().startswith("rt.")
