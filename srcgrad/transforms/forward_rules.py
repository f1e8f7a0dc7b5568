"""Pass 6 (forward mode), primitives: a primitive's tangent, from its rule.

A rule's ``tangent`` (``Rule.tangent``) says how: ``"linear"`` (the primitive itself
applied to the tangents), ``"bilinear"`` (one term per varying argument),
``"pointwise"`` and ``"reduction"`` (derived from the adjoint, see
``registry.TANGENTS``), or a tangent rule function, inlined by
``templates.instantiate_tangent`` (or called as it is, where it calls helpers of its own).
A property read (``obj.name``) runs its getter's own forward mode
(``dispatch.jvp_field``).

Requires: what :class:`~.forward._Forward` holds (its ``__init__`` sets the state these
methods read); an ``op`` statement's ``rule`` and ``bound`` annotations.
Guarantees: the tangent expression of the statement's value (None: zero; ``_DONE``:
the statement computes it itself), the statements it needs appended to ``out``; a
primitive without a tangent rule, given a value with a tangent, is refused at the
user's line.
"""
from __future__ import annotations

import gast

from .. import anno, errors, nodes, templates
from ..analysis.ranks import rank_of
from ..rules.registry import lookup as registry_lookup
from ..tree import TreeRank


class _PrimitiveTangents:
    """The tangents of primitives from their rules, a part of :class:`~.forward._Forward`."""

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


# What a statement that computes its tangent itself gives for its tangent expression.
_DONE = object()


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
