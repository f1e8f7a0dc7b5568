"""Pass 6 (forward mode) — each statement followed by its tangent.

Requires: a :class:`~.anf.Core` program, its activity and ranks (as ``reverse``).
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
:class:`NotBatchable`: the caller loops over the columns instead.

Tangent rules come from the registry (``Rule.tangent``): a tangent rule
function inlined by ``templates.instantiate_tangent``, or one of the
derivations of :data:`~srcgrad.rules.registry.TANGENTS` applied here.

Before/after (``wrt=x``)::

    _t1 = x @ w1               →   _t1 = x @ w1
    h = np.tanh(_t1)               _t1_dot = x_dot @ w1
                                   h = np.tanh(_t1)
                                   h_dot = _t1_dot * (1 - h ** 2)
"""
from __future__ import annotations

import collections
import dataclasses

import gast

from .. import anno, errors, nodes, templates
from ..analysis import outside
from ..analysis.ranks import rank_of
from ..rules.registry import lookup as registry_lookup
from ..tree import TreeRank


@dataclasses.dataclass
class Tangents:
    body: list      # the statements, primal and tangent interleaved
    tangents: dict  # wrt parameter -> the name of its tangent (a parameter of the generated function)
    result: gast.expr  # the tangent of the returned value (an atom, or a tuple of them)
    names: dict     # variable -> the name of its tangent
    extras: dict = dataclasses.field(default_factory=dict)  # name -> object the loaded module binds


def transform(core, activity, ranks, wrt, backend, batched=False) -> Tangents:
    return _Forward(core, activity, ranks, backend, batched).run(wrt)


class NotBatchable(Exception):
    """The program has a step whose batched tangent srcgrad does not write: take the
    columns one at a time.  (Never shown to the user: ``higher`` loops instead.)"""


# Forward mode's runtime helpers and their batched forms (renamed in batched code,
# outside the per-column lambdas of ``rt.batch_each``).
_BATCHED_HELPERS = {"zeros_tangent": "batch_zeros", "broadcast_tangent": "batch_broadcast",
                    "cast_tangent": "batch_cast", "reduction_tangent": "batch_reduction_tangent"}
# Linear primitives whose batched tangent is a reshape of the column axis's rows.
_RESHAPES = {"numpy.reshape", "numpy.ravel", "numpy.squeeze", "numpy.expand_dims"}
_MATMULS = {"_operator.matmul", "numpy.matmul"}


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


class _Forward:
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
        self.writes = any(anno.get(s, "kind") == "setitem" and activity.active(anno.get(s, "array"))
                          for s in flat)
        self.call_results = {s.targets[0].id for s in flat if anno.get(s, "kind") == "call"
                             and isinstance(s, gast.Assign) and isinstance(s.targets[0], gast.Name)}
        # Values whose tangent is zero by their rule (`x * 0.0`, whose tangent must not meet
        # the inf of `0.0 ** 0.5`'s derivative): constants from there on, as reverse mode's
        # adjoint stops there.  Only names bound once, and not changed in place.
        self.zero = set()
        bound = collections.Counter(n for s in flat for n in nodes.assigned_names(s))
        self.once = {n for n, count in bound.items() if count == 1} - {
            anno.get(s, "array") or anno.get(s, "list") for s in flat
            if anno.get(s, "kind") in ("setitem", "append", "pop", "item")}

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
        if kind == "setattr":
            value = anno.get(stmt, "value")
            if isinstance(value, gast.Name) and value.id in varied:
                raise errors.at(stmt, "storing a value that is being differentiated in the attribute "
                                f"`{nodes.to_source(stmt.targets[0])}` is not supported: srcgrad cannot "
                                "follow it from there", "return it (with has_aux=True), or keep it in a local name",
                                kind=errors.UnsupportedSyntaxError)
            return
        if kind != "call" or not isinstance(getattr(stmt, "value", None), gast.Call):
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
        if kind == "setitem":
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
        if kind in ("append", "pop", "item"):
            return out + self._list_tangent(stmt, kind)
        if not (isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name)):
            return out
        target = stmt.targets[0].id
        if not self.activity.active(target):
            return out
        if kind == "call" and self._varies_call(stmt):
            return self._call_tangent(stmt, target)
        value = None
        if kind == "copy":
            value = self._tangent_of(stmt.value) if self._active(stmt.value) else None
        elif kind == "unpack" and self.activity.active(anno.get(stmt, "source")) and self.batched \
                and isinstance(stmt.value, gast.Subscript):  # (the source may be an array)
            value = nodes.call("rt.batch_getitem", [nodes.name(self._dot_name(stmt.value.value.id)),
                                                    templates._slices_as_calls(nodes.copy(stmt.value.slice))])
        elif kind == "unpack" and self.activity.active(anno.get(stmt, "source")):
            value = _replaced(stmt.value, {id(stmt.value.value): nodes.name(self._dot_name(stmt.value.value.id))})
        elif kind == "aggregate":
            value = self._display_tangent(stmt.value)
        elif kind == "op":
            value = self._op_tangent(stmt, target, out)
        if value is _DONE:  # (the statement computes its tangent itself)
            return out
        if value is None and kind == "op" and target in self.once:
            self.zero.add(target)
            return out
        if value is None:
            value = nodes.call("rt.zeros_tangent", [nodes.name(target)])
        elif self.writes and kind == "op" and _passed_through(value):
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
        if kind == "append":
            call = nodes.call(gast.Attribute(value=listed, attr="append", ctx=gast.Load()),
                              [self._tangent_of(anno.get(stmt, "value"))])
            self._emit(out, gast.Expr(value=call), None)
            return out
        if kind == "pop":
            value = nodes.call(gast.Attribute(value=listed, attr="pop", ctx=gast.Load()),
                               [nodes.copy(anno.get(stmt, "index"))])
        else:
            value = gast.Subscript(value=listed, slice=nodes.copy(anno.get(stmt, "index")), ctx=gast.Load())
        target = stmt.targets[0].id if isinstance(stmt, gast.Assign) else None
        if target is not None and self.activity.active(target):
            self._emit(out, self._dot_name(target), value)
        elif kind == "pop":
            self._emit(out, gast.Expr(value=value), None)  # keeps the two lists in step
        return out

    # ---- primitives -------------------------------------------------------
    def _op_tangent(self, stmt, target, out):
        """The tangent expression of ``target = <primitive>(atoms)`` (None: zero)."""
        rule, bound = anno.get(stmt, "rule"), anno.get(stmt, "bound")
        varying = [p for p in rule.diff_params if self._varies(bound.get(p))]
        if not varying:
            return None
        if rule is registry_lookup(getattr) and not self._plain_field(bound):
            # Maybe a property: dispatch.jvp_field runs its getter's own forward mode.
            self._unbatchable()
            origin = anno.get(stmt, "origin")
            stmt.targets = [nodes.tuple_([nodes.name(target, "store"),
                                          nodes.name(self._dot_name(target), "store")], "store")]
            stmt.value = nodes.call("dispatch.jvp_field", [
                nodes.copy(bound["obj"]), nodes.copy(bound["name"]), self._tangent_of(bound["obj"]),
                nodes.const(origin.where if origin else "?")])
            return _DONE
        for operand in self._unknown_operands(stmt):
            # Its kind is known when the code runs: an array's tangent rule, or refused there
            # (batched, its rank too: the batched forms read it from the arrays).
            origin = anno.get(stmt, "origin")
            check = gast.Expr(value=nodes.call("rt.array_operand", [
                nodes.name(operand), nodes.const(origin.where if origin else "?")]))
            self._emit(out, anno.set(check, "impure", True), None)
        how = rule.tangent
        if how is None:
            raise errors.at(stmt.value, f"forward mode has no tangent rule for `{rule.name}`, which is "
                            f"given `{nodes.loaded_names(bound[varying[0]])[0]}`, whose tangent it would need",
                            "register one with srcgrad.deftangent (`@f.defjvp` for a srcgrad.custom_adjoint), "
                            "or use reverse mode (srcgrad.vjp)", kind=errors.NoDerivativeRuleError)
        if self.batched:
            return self._batched_tangent(stmt, rule, bound, varying, target, out)
        if how == "linear":
            return self._cast(rule, bound, target, self._applied(stmt, rule, {p: None for p in varying}))
        if how == "bilinear":
            terms = [self._applied(stmt, rule, {p: index}) for p in varying
                     for index in self._slots(bound[p], rule, p)]
            total = terms[0]
            for term in terms[1:]:
                total = nodes.binop(total, "+", term)
            return total
        if how == "reduction":
            return self._reduction(stmt, rule, bound, varying, target, out)
        site = self._site(stmt, rule, bound, target, out)
        if how == "pointwise":
            return self._pointwise(rule, bound, site, varying, target, out)
        # A tangent rule function.
        if not templates.self_contained(how):  # a rule of yours calling your own helpers: run as it is
            name = self.core.fresh(f"{getattr(how, '__name__', 'tangent')}")
            self.extras[name] = how
            keywords = [(p, nodes.copy(a)) for p, a in bound.items()] + [
                (p + "_dot", site.bindings[p + "_dot"]) for p in rule.diff_params]
            return nodes.call(name, [nodes.name(target)], keywords)
        statements, value = templates.instantiate_tangent(rule, site)
        self._emit_all(out, statements)
        return value

    def _reduction(self, stmt, rule, bound, varying, target, out):
        """``sum(adjoint(ones) * a_dot, axis)``: see ``registry.TANGENTS``."""
        site = self._site(stmt, rule, bound, target, out)
        (param,) = varying
        ones = self.core.fresh()
        self._emit(out, ones, nodes.call(f"{self.module}.ones_like", [nodes.name(target)]))
        site.bindings["ans_bar"] = nodes.name(ones)
        site.wanted = {param}
        statements, adjoints = templates.instantiate(rule, site)
        self._emit_all(out, statements)
        return nodes.call("rt.reduction_tangent", [
            adjoints[param], site.bindings[param + "_dot"],
            nodes.copy(bound.get("axis", nodes.const(None))),
            nodes.copy(bound.get("keepdims", nodes.const(False)))])

    def _pointwise(self, rule, bound, site, varying, target, out):
        """The adjoint formula applied to each input's tangent: see ``registry.TANGENTS``."""
        total, full, terms = None, False, set()
        same = self._same_shape(rule, bound)
        for param in varying:
            site.bindings["ans_bar"] = site.bindings[param + "_dot"]
            site.wanted = {param}
            site.same_shape = set(bound)  # no unbroadcast: the tangent has the output's shape
            statements, adjoints = templates.instantiate(rule, site)
            self._emit_all(out, statements)
            if param not in adjoints:
                continue
            full = full or param in same
            terms.add(param)
            total = adjoints[param] if total is None else nodes.binop(total, "+", adjoints[param])
        if total is None:
            return None
        # An elementwise output has the broadcast shape of its array arguments: when
        # each of them has a term, so has the sum of the terms.
        full = full or rule.elementwise and all(
            p in terms or rank_of(a, self.ranks) == 0 for p, a in bound.items()
            if isinstance(a, gast.Name) or isinstance(a, (gast.List, gast.Tuple)))
        return total if full else nodes.call("rt.broadcast_tangent", [total, nodes.name(target)])

    # ---- batched tangents ---------------------------------------------------
    def _unbatchable(self):
        if self.batched:
            raise NotBatchable

    def _batched_tangent(self, stmt, rule, bound, varying, target, out):
        """The batched tangent expression of ``target = <primitive>(atoms)``."""
        how, name = rule.tangent, rule.name
        if how == "pointwise" and rule.elementwise and name.split(".")[0] in ("numpy", "_operator") \
                and name not in ("numpy.float64", "numpy.float32"):
            site = self._site(stmt, rule, bound, target, out)
            for param in varying:  # each tangent lifted to the output's rank, so columns stay first
                atom = bound[param]
                if rank_of(atom, self.ranks) != rank_of(nodes.name(target), self.ranks) \
                        or rank_of(atom, self.ranks) is None:
                    lifted = self.core.fresh(f"{atom.id}_dot" if isinstance(atom, gast.Name) else None)
                    self._emit(out, lifted, nodes.call("rt.batch_aligned", [site.bindings[param + "_dot"],
                                                                            nodes.name(target)]))
                    site.bindings[param + "_dot"] = nodes.name(lifted)
                    self.lifted.add(lifted)
            return self._pointwise(rule, bound, site, varying, target, out)
        if how == "linear":
            (a, *_), atom = varying, bound.get(varying[0])
            if name == "_operator.getitem" and isinstance(stmt.value, gast.Subscript):
                return nodes.call("rt.batch_getitem", [self._tangent_of(stmt.value.value),
                                                       templates._slices_as_calls(nodes.copy(stmt.value.slice))])
            if isinstance(stmt.value, gast.Attribute) and "obj" in bound and self._plain_field(bound):
                return self._applied(stmt, rule, {p: None for p in varying})  # a structure's field
            plain_array = varying == ["a"] and isinstance(atom, gast.Name) and isinstance(
                rank_of(atom, self.ranks), int)
            if plain_array and name in _RESHAPES and "order" not in bound:
                return nodes.call("rt.batch_reshape", [self._tangent_of(atom), nodes.name(target)])
            if plain_array and name in ("numpy.sum", "numpy.mean") and set(bound) <= {"a", "axis", "keepdims"}:
                return nodes.call(f"{self.module}.{name.split('.')[1]}", [self._tangent_of(atom)], [
                    ("axis", nodes.call("rt.batch_axis", [nodes.copy(bound.get("axis", nodes.const(None))),
                                                          nodes.copy(atom)])),
                    ("keepdims", nodes.copy(bound.get("keepdims", nodes.const(False))))])
            return self._cast(rule, bound, target, self._each(
                self._applied(stmt, rule, {p: None for p in varying}), target))
        if how == "bilinear":
            terms = []
            for p in varying:
                for index in self._slots(bound[p], rule, p):
                    if name in _MATMULS and all(isinstance(bound.get(q), gast.Name) for q in ("x1", "x2")):
                        operands = [self._tangent_of(bound[q]) if q == p else nodes.copy(bound[q])
                                    for q in ("x1", "x2")]
                        terms.append(nodes.call("rt.batch_matmul", operands + [nodes.const(1 if p == "x1" else 2)]))
                    else:
                        terms.append(self._each(self._applied(stmt, rule, {p: index}), target))
            total = terms[0]
            for term in terms[1:]:
                total = nodes.binop(total, "+", term)
            return total
        if how == "reduction":
            return self._reduction(stmt, rule, bound, varying, target, out)
        if how in (None,) or isinstance(how, str):
            raise NotBatchable
        site = self._site(stmt, rule, bound, target, out)
        if name == "srcgrad.tree.add":  # the adjoints' accumulation: vectorised
            return nodes.call("rt.batch_add", [site.bindings["a_dot"], site.bindings["b_dot"], nodes.name(target)])
        helper = self.core.fresh(getattr(how, "__name__", "tangent"))
        self.extras[helper] = how
        keywords = [(p, nodes.copy(a)) for p, a in bound.items()] + [
            (p + "_dot", site.bindings[p + "_dot"]) for p in rule.diff_params]
        return self._each(nodes.call(helper, [nodes.name(target)], keywords), target)

    def _each(self, expression, target):
        """``rt.batch_each(lambda x_dot: <expression>, x_dot)``: ``expression``, linear
        in the batched tangents it reads, applied to one column of them at a time."""
        batched = list(dict.fromkeys(n for n in nodes.loaded_names(expression) if n in self._batched_names()))
        if not batched:
            return nodes.call("rt.zeros_tangent", [nodes.name(target)])
        text = f"rt.batch_each(lambda {', '.join(batched)}: {nodes.to_source(expression).strip()}, " \
               f"{', '.join(batched)})"
        return nodes.expr(text)

    def _batched_names(self) -> set:
        return set(self.dot.values()) | self.lifted

    def _emit_all(self, out, statements):
        for s in statements:
            self._emit(out, s, None)

    def _site(self, stmt, rule, bound, target, out):
        bindings = {"ans": nodes.name(target), **bound}
        for param in rule.diff_params:
            atom = bound.get(param)
            if not self._varies(atom):
                bindings[param + "_dot"] = nodes.const(None)
                continue
            tangent = self._tangent_of(atom)
            rank = rank_of(atom, self.ranks)
            if rule.name.split(".")[0] == "numpy" and (isinstance(atom, gast.Name) and (
                    isinstance(rank, TreeRank) or rank is None and atom.id in self.call_results)
                    or self.batched and isinstance(atom, (gast.List, gast.Tuple))):
                # A list or tuple NumPy reads as an array: its tangent too (not `+` of tuples).
                temp = self.core.fresh()
                self._emit(out, temp, nodes.call("rt.batch_asarray" if self.batched else f"{self.module}.asarray",
                                                 [tangent]))
                tangent = nodes.name(temp)
                self.lifted.add(temp)
            bindings[param + "_dot"] = tangent
        return templates.Site(
            bindings=bindings,
            ndim=lambda atom: r if isinstance(r := rank_of(atom, self.ranks), int) else None,
            structure=lambda atom: (True if isinstance(r := rank_of(atom, self.ranks), TreeRank)
                                    else False if isinstance(r, int) else None),
            same_shape=set(), wanted=set(), hints={}, fresh=self.core.fresh, module_name=self.module)

    def _cast(self, rule, bound, target, value):
        """A primitive with a ``dtype`` (or reading another array's) may round its output
        to integers: the tangent is then zero (``rt.cast_tangent``)."""
        dtype = bound.get("dtype")
        casts = rule.zero_params or dtype is not None and not (
            isinstance(dtype, gast.Constant) and dtype.value is None)
        return nodes.call("rt.cast_tangent", [value, nodes.name(target)]) if casts else value

    def _slots(self, atom, rule, param):
        """The places a bilinear primitive's tangent puts one tangent at a time: the
        parameter itself, or each varying item of a sequence parameter (``einsum``'s)."""
        if param in rule.sequence_params and isinstance(atom, (gast.List, gast.Tuple)):
            return [i for i, e in enumerate(atom.elts) if self._varies(e)]
        return [None]

    def _applied(self, stmt, rule, replace):
        """The primitive's own expression with the arguments of ``replace``'s parameters
        replaced by their tangents (index ``i``: only that item of a sequence; the
        other items of a sequence of which some vary: zeros)."""
        places = _argument_nodes(stmt.value, rule)
        if places is None:
            raise errors.at(stmt.value, f"forward mode cannot tell which argument of "
                            f"`{nodes.to_source(stmt.value)}` is `{next(iter(replace))}`",
                            "pass the arguments by position", kind=errors.NoDerivativeRuleError)
        mapping = {}
        for param, index in replace.items():
            node = places.get(param)
            if isinstance(node, tuple):  # *operands: the call's own arguments
                items = [node[index]] if index is not None else [n for n in node if self._varies(n)]
                for item in items:
                    mapping[id(item)] = self._tangent_of(item)
            elif isinstance(node, (gast.List, gast.Tuple)) and param in rule.sequence_params:
                mapping[id(node)] = type(node)(
                    elts=[self._tangent_of(e) if index is None or i == index else nodes.copy(e)
                          for i, e in enumerate(node.elts)], ctx=gast.Load())
            elif node is not None:
                mapping[id(node)] = self._tangent_of(node)
        return _replaced(stmt.value, mapping)

    def _same_shape(self, rule, bound):
        """Parameters of an elementwise rule that provably have the output's shape."""
        if not rule.elementwise or any(isinstance(a, (gast.Tuple, gast.List)) for a in bound.values()):
            return set()
        arrays = {p: a for p, a in bound.items() if isinstance(a, gast.Name)
                  or isinstance(a, gast.Constant) and isinstance(a.value, (int, float))}
        return {p for p, a in arrays.items() if all(
            rank_of(b, self.ranks) == 0 or isinstance(b, gast.Name) and isinstance(a, gast.Name) and b.id == a.id
            for q, b in arrays.items() if q != p)}

    def _plain_field(self, bound) -> bool:
        rank, name = rank_of(bound["obj"], self.ranks), templates.static_value(bound["name"])
        return isinstance(rank, TreeRank) and any(key == name for key, _ in rank)

    def _unknown_operands(self, stmt) -> list:
        """The varying operands of ``a * b`` that may be objects of a class of the user's
        (their rank unknown when compiling: what a function returned)."""
        value = stmt.value
        operands = [value.left, value.right] if isinstance(value, gast.BinOp) else \
            [value.operand] if isinstance(value, gast.UnaryOp) else []
        unknown = anno.get(stmt, "maybe_object", ())
        return [atom.id for atom in operands if isinstance(atom, gast.Name) and atom.id in unknown
                and self._active(atom) and not isinstance(rank := rank_of(atom, self.ranks), int)
                and not (isinstance(rank, TreeRank) and rank.kind != "object")]

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


_DONE = object()


def _passed_through(value) -> bool:
    """Whether a tangent expression may be another name's tangent itself (a name, or a
    helper that returns its argument when it can), not a new array."""
    if isinstance(value, gast.Call) and nodes.to_source(value.func).strip() in ("rt.broadcast_tangent",
                                                                            "rt.cast_tangent"):
        return _passed_through(value.args[0])  # (a new array where they change it)
    return isinstance(value, gast.Name) or isinstance(value, gast.Call) \
        and nodes.to_source(value.func).strip().startswith("rt.")


def _argument_nodes(value, rule):
    """Parameter -> the node of ``value`` that is its argument (a tuple of nodes for
    ``*operands``), or None where the spelling does not say."""
    if isinstance(value, gast.BinOp):
        return {"x1": value.left, "x2": value.right}
    if isinstance(value, gast.UnaryOp):
        return {"x": value.operand}
    if isinstance(value, gast.Subscript):
        return {"a": value.value}
    if isinstance(value, gast.Attribute):  # x.T, obj.name
        return {"a": value.value, "obj": value.value}
    if isinstance(value, gast.Call) and rule.signature is not None:
        try:
            bound = rule.signature.bind_partial(*value.args, **{k.arg: k.value for k in value.keywords})
        except TypeError:
            return None
        return dict(bound.arguments)
    return None


def _replaced(node, mapping):
    """A copy of ``node`` in which each node whose id is in ``mapping`` is replaced."""
    if id(node) in mapping:
        return mapping[id(node)]
    if isinstance(node, list):
        return [_replaced(n, mapping) for n in node]
    if not isinstance(node, gast.AST):
        return node
    new = nodes.copy(node) if not node._fields else type(node)(
        **{f: _replaced(getattr(node, f, None), mapping) for f in node._fields})
    if anno.KEY in node.__dict__:
        new.__dict__[anno.KEY] = dict(node.__dict__[anno.KEY])
    return new



def _batch_helpers(node):
    """Forward mode's runtime helpers in ``node`` renamed to their batched forms, except
    inside the per-column lambdas of ``rt.batch_each`` (which see unbatched tangents)."""
    if isinstance(node, gast.Lambda):
        return
    if isinstance(node, gast.Attribute) and isinstance(node.value, gast.Name) and node.value.id == "rt" \
            and node.attr in _BATCHED_HELPERS:
        node.attr = _BATCHED_HELPERS[node.attr]
    for child in gast.iter_child_nodes(node):
        _batch_helpers(child)
