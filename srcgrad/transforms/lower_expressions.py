"""Normalize (``anf``): each expression, to an atom (a name or a constant).

``_lower`` dispatches on the expression's kind, each operand lowered first, in source
order, to its own statement (``_t1 = y_pred - y``): operators are their ``operator``
functions' rules (``a @ b`` is ``operator.matmul``), a comparison or an f-string a value
of no derivative, ``a and b`` a conditional expression (``anf._ifexp``), an index an item
known here (``t[0]`` of a tuple made here is its atom) or ``operator.getitem``; calls,
fields and displays are ``lower_calls``', ``lower_objects``' and ``lower_aggregates``'.

Relies on the walk (``_emit``, ``_ifexp``), on ``_apply`` (``lower_apply``), on what the walk
knows of kinds and items (``lower_kinds``, ``lower_aggregates``, ``lower_lists``), on
``_constant_entry``, ``_entry_key`` and ``_field_rank`` (``lower_objects``: items of a structure
passed in, entries written back) and on its state (``current``, ``stored_entries``,
``field_of``, ``ranks``, ``integers``).
"""
from __future__ import annotations

import operator

import gast
import numpy as np

from .. import anno, errors, nodes, runtime
from ..rules import registry
from ..templates import is_literal, literal
from .numpy_spellings import spell

_BINOPS = {gast.Add: operator.add, gast.Sub: operator.sub, gast.Mult: operator.mul,
           gast.Div: operator.truediv, gast.Pow: operator.pow, gast.MatMult: operator.matmul,
           gast.FloorDiv: operator.floordiv, gast.Mod: operator.mod,
           # No rules: integer and boolean results, refused when given a value being differentiated.
           gast.BitAnd: operator.and_, gast.BitOr: operator.or_, gast.BitXor: operator.xor,
           gast.LShift: operator.lshift, gast.RShift: operator.rshift}
_BITWISE = {gast.BitAnd: "&", gast.BitOr: "|", gast.BitXor: "^", gast.LShift: "<<", gast.RShift: ">>"}
_UNARY = {gast.USub: operator.neg, gast.UAdd: operator.pos, gast.Not: operator.not_,
          gast.Invert: operator.invert}

# operator.floordiv / not / invert have no derivative: integer-valued or boolean.
registry.nondifferentiable(operator.floordiv, operator.not_, operator.invert)


class _Expressions:
    # Each kind of expression's method (a name or a constant is an atom already: `_atom_or_none`).
    _EXPRESSIONS = {gast.BinOp: "_binop", gast.UnaryOp: "_unaryop", gast.Compare: "_compare",
                    gast.Call: "_call", gast.Attribute: "_attribute", gast.Subscript: "_subscript",
                    gast.IfExp: "_conditional", gast.JoinedStr: "_formatted", gast.BoolOp: "_boolop",
                    gast.Tuple: "_aggregate", gast.List: "_aggregate", gast.Dict: "_aggregate"}

    def _lower(self, node, target=None, target_hint=None, effect=False):
        """Lower ``node``; return an atom for its value (assigned to ``target`` if given)."""
        atom = self._atom_or_none(node)
        if atom is not None:
            if target is None and not effect:
                return atom
            return self._emit(atom, node, target, target_hint, effect, kind="copy")
        emit = dict(origin_node=node, target=target, target_hint=target_hint, effect=effect)
        lower = self._EXPRESSIONS.get(type(node))
        if lower is None:
            raise errors.at(node, f"cannot differentiate `{nodes.to_source(node)}`")
        return getattr(self, lower)(node, **emit)

    def _binop(self, node, **emit):
        """``a op b``: the operator's function (``operator.add``); on tuples and lists a join."""
        left, right = self._lower(node.left), self._lower(node.right)
        prim = _BINOPS.get(type(node.op))
        if prim is None:
            raise errors.at(node, f"the operator `{type(node.op).__name__}` is not supported",
                            "use the matching NumPy function")
        value = gast.BinOp(left=left, op=type(node.op)(), right=right)
        if type(node.op) in _BITWISE:
            emit["why"] = (f"`{_BITWISE[type(node.op)]}` is given a value being differentiated: it "
                           "works on integers and booleans, which have no derivative",
                           "apply it to masks (`(x > 0) & (y > 0)`) and use the mask with np.where "
                           "or indexing")
        joined = self._joined(node.op, left, right, node, emit)
        if joined is not None:
            return joined
        sequences = [isinstance(a, gast.Name) and (a.id in self.containers or a.id in self.tuples
                                                   or a.id in self.runtime_lists or a.id in self.lists)
                     and a.id not in self.dicts for a in (left, right)]
        if isinstance(node.op, gast.Add) and all(sequences):
            # A join of tuples or lists whose items are known when it runs only (a tuple
            # grown in a loop, `t = t + (h,)`): written as it is, differentiated item by item.
            atom = self._apply(runtime.concatenated, value, [left, right], {}, node, **emit)
            if isinstance(atom, gast.Name) and left.id in self.tuples and right.id in self.tuples:
                self.tuples.add(atom.id)
            return atom
        if isinstance(node.op, gast.Mult) and any(sequences) and not all(sequences):
            items, count = (left, right) if sequences[0] else (right, left)
            return self._apply(runtime.repeated, value, [items, count], {}, node, **emit)
        if any(isinstance(a, gast.Name) and a.id in self.containers for a in (left, right)):
            # Shapes and index lists (`x.shape + (1,)`) run as written; the reverse pass
            # refuses the join if it is given a value being differentiated.
            why = ("`+`/`*` on tuples or lists (joining, repeating) is not supported on values "
                   "being differentiated", "write the whole tuple or list at once (`(a, b, c)`), "
                   "or append items one by one")
            return self._emit(value, kind="unknown", callee=None, why=why, **emit)
        unknown = [a.id for a in (left, right) if isinstance(a, gast.Name) and not self._known_number(a)]
        if unknown:
            emit["maybe_object"] = unknown  # may be objects whose class's __mul__ decides (reverse.py)
        return self._apply(prim, value, [left, right], {}, node, **emit)

    def _unaryop(self, node, **emit):
        """``-a``, ``not a``, ``~a``: the operator's function."""
        operand = self._lower(node.operand)
        value = gast.UnaryOp(op=type(node.op)(), operand=operand)
        if isinstance(operand, gast.Name) and not self._known_number(operand):
            emit["maybe_object"] = [operand.id]
        return self._apply(_UNARY[type(node.op)], value, [operand], {}, node, **emit)

    def _compare(self, node, **emit):
        """``a < b``: a truth value, no derivative."""
        left = self._lower(node.left)
        rights = [self._lower(c) for c in node.comparators]
        value = gast.Compare(left=left, ops=[type(o)() for o in node.ops], comparators=rights)
        return self._emit(value, kind="nondiff", rule=None, **emit)

    def _subscript(self, node, **emit):
        """``x[i]``: an item known here is its atom; else ``operator.getitem`` (an item of a list
        whose items are known when it runs only: ``_item``)."""
        if anno.has(node.value, "resolved") \
                and any(anno.get(node.value, "resolved") is c for c in (np.r_, np.c_)):
            return self._index_concat(node, **emit)
        base = self._lower(node.value)
        index = self._index(node.slice)
        stored = self.stored_entries.get((self.field_of.get(base.id), self._entry_key(index))) \
            if isinstance(base, gast.Name) and base.id in self.field_of else None
        if stored is not None:  # `self.cache[k] = v` then `self.cache[k]` in the same block: `v` (checked)
            args = [nodes.copy(base), nodes.copy(index), nodes.copy(stored)]
            return self._apply(runtime.entry_read_back, nodes.call("rt.entry_read_back", args),
                               [nodes.copy(a) for a in args], {}, node, **emit)
        if isinstance(base, gast.Name) and base.id in self.lists:
            return self._item(base, index, node, **emit)
        if isinstance(base, gast.Name) and base.id in self.records and base.id not in self.named_fields:
            # An object made here: indexing runs its class's own __getitem__ (refused
            # by the reverse pass if what it gives is being differentiated).
            value = gast.Subscript(value=base, slice=index, ctx=gast.Load())
            why = (f"indexing `{node.value.id if isinstance(node.value, gast.Name) else 'an object'}`, "
                   "an object holding values being differentiated, runs its class's `__getitem__`, "
                   "which srcgrad does not differentiate", "call a method that does the same "
                   "(`obj.item(i)`), or index the array field itself (`obj.c[i]`)")
            return self._emit(value, kind="unknown", callee=None, why=why, **emit)
        part = self._constant_slice(node.slice)
        if part is not None and self._has_items(base) and not self._holds_array_rank(base):
            # `bs[::-1]`, `t[1:]` of a tuple or list whose items are known: a new display of them.
            items = self._items(base)[part]
            display = (gast.List if base.id in self.own_lists else gast.Tuple)(
                elts=[nodes.copy(a) for a in items], ctx=gast.Load())
            return self._emit_aggregate(display, list(range(len(items))), items, node, **emit)
        element = self._aggregate_element(base, index)
        if element is not None:
            if emit["target"] is None and not emit["effect"]:
                return element
            return self._emit(element, kind="copy", **emit)
        value = gast.Subscript(value=base, slice=index, ctx=gast.Load())
        if isinstance(index, gast.Constant) and self._constant_entry(base, index.value):
            return self._emit(value, kind="nondiff", rule=None, **emit)  # `p["n"]` holding an int
        atom = self._apply(operator.getitem, value, [nodes.copy(base), nodes.copy(index)], {},
                           node, **emit)
        if isinstance(base, gast.Name) and isinstance(index, gast.Constant) and isinstance(atom, gast.Name):
            # An item of a structure passed in (a model's list of layers): its ranks are known.
            self._field_rank(atom, base, index.value)
        if isinstance(atom, gast.Name) and isinstance(base, gast.Name) and base.id in self.tuples \
                and isinstance(node.slice, gast.Slice):
            self.tuples.add(atom.id)  # (`x.shape[:2]`)
        integers = self._integers(node.slice)
        if isinstance(atom, gast.Name) and isinstance(base, gast.Name) and integers is not None \
                and integers == self.ranks.get(base.id):
            # One integer per axis: a NumPy scalar (a new value), not a view of `base`.
            self.scalars.add(atom.id)
        return atom

    def _conditional(self, node, **emit):
        """``a if c else b``: ``anf._ifexp``."""
        return self._ifexp(node, emit["target"], emit["target_hint"])

    def _formatted(self, node, **emit):
        """An f-string: text, no derivative."""
        parts = [gast.FormattedValue(value=self._lower(p.value), conversion=p.conversion,
                                     format_spec=nodes.copy(p.format_spec))
                 if isinstance(p, gast.FormattedValue) else nodes.copy(p) for p in node.values]
        return self._emit(gast.JoinedStr(values=parts), kind="nondiff", rule=None, **emit)

    def _boolop(self, node, **emit):
        """``a and b``, ``a or b``."""
        if anno.get(node, "flags"):  # exits' flags: plain booleans
            values = [self._lower(v) for v in node.values]
            value = gast.BoolOp(op=type(node.op)(), values=values)
            return self._emit(value, kind="nondiff", rule=None, **emit)
        if all(isinstance(v, gast.Compare) and all(isinstance(a, (gast.Name, gast.Constant))
                                                   for a in [v.left, *v.comparators]) for v in node.values):
            # (`ph > 0 or pw > 0`: comparisons of names, nothing to run late, a truth value of
            # no derivative: as written)
            value = gast.BoolOp(op=type(node.op)(), values=[
                gast.Compare(left=self._lower(v.left), ops=[type(o)() for o in v.ops],
                             comparators=[self._lower(c) for c in v.comparators]) for v in node.values])
            return self._emit(value, kind="nondiff", rule=None, **emit)
        # `a and b` is `b if a else a`, `a or b` is `a if a else b`: later operands run
        # only when needed, and the value (an array, perhaps) is one of the operands.
        first = self._lower(node.values[0])
        rest = node.values[1] if len(node.values) == 2 else \
            anno.inherit(gast.BoolOp(op=type(node.op)(), values=node.values[1:]), node)
        body, orelse = (rest, first) if isinstance(node.op, gast.And) else (first, rest)
        choice = anno.inherit(gast.IfExp(test=nodes.copy(first), body=nodes.copy(body),
                                         orelse=nodes.copy(orelse)), node)
        return self._ifexp(choice, emit["target"], emit["target_hint"])

    def _index_concat(self, node, **emit):
        """``np.r_[x, 1.0, 0:3]`` / ``np.c_[x, y]`` → ``rt.index_concat(np.r_, [x, 1.0, _t1])``
        (a slice item made by ``slice(...)``), whose rule splits the adjoint among the
        items.  With a directive string (``np.r_['0,2', x]``) the call runs as written,
        and the reverse pass refuses it if it is given a value being differentiated."""
        concat = self._lower(node.value)
        parts = node.slice.elts if isinstance(node.slice, gast.Tuple) else [node.slice]
        if any(isinstance(p, gast.Constant) and isinstance(p.value, str) for p in parts):
            value = gast.Subscript(value=concat, slice=self._index(node.slice), ctx=gast.Load())
            name = nodes.to_source(node.value)
            return self._emit(value, kind="unknown", callee=anno.get(node.value, "resolved"),
                              why=(f"srcgrad differentiates `{name}[...]` of items and slices, not with a "
                                   "directive string",
                                   f"join the items with np.concatenate, np.stack or np.column_stack, or "
                                   f"write `{name}[a, b]`"), **emit)
        items = []
        for part in parts:
            if isinstance(part, gast.Slice):
                bounds = [nodes.const(None) if p is None else self._lower(p)
                          for p in (part.lower, part.upper, part.step)]
                items.append(self._apply(slice, None, bounds, {}, node, func_node=nodes.name("slice"),
                                         origin_node=node, target=None, target_hint=None, effect=False))
            else:
                items.append(self._argument(part))
        return self._apply(runtime.index_concat, None, [concat, gast.List(elts=items, ctx=gast.Load())], {},
                           node, func_node=nodes.dotted("rt.index_concat"), **emit)

    def _atom_or_none(self, node):
        """The atom for ``node`` if it needs no statement of its own."""
        if isinstance(node, gast.Constant):
            return nodes.const(node.value)
        if isinstance(node, gast.Name) and not anno.has(node, "resolved"):
            return nodes.name(self.current.get(node.id, node.id))
        if isinstance(node, gast.UnaryOp) and isinstance(node.operand, gast.Constant) \
                and isinstance(node.op, gast.USub) and type(node.operand.value) in (int, float):
            return nodes.const(-node.operand.value)
        if anno.has(node, "resolved"):
            return self._resolved_atom(node)
        return None

    def _resolved_atom(self, node):
        value = anno.get(node, "resolved")
        if isinstance(node, gast.Name):
            # A global or closure variable is read afresh on every call (it may be
            # rebound between calls), so its compile-time value is not a constant.
            return nodes.name(node.id)
        if is_literal(value):
            return literal(value)  # a module's constant: np.pi, np.newaxis
        spelled = spell(value, node, self.backend)
        atom = nodes.dotted(spelled) if spelled else nodes.copy(node)
        anno.set(atom, "resolved", value)
        return atom

    def _argument(self, node):
        if isinstance(node, (gast.Tuple, gast.List)):
            elts = [self._argument(e) for e in node.elts]
            return (gast.Tuple if isinstance(node, gast.Tuple) else gast.List)(elts=elts, ctx=gast.Load())
        return self._lower(node)

    def _integers(self, index):
        """How many integers the user's ``index`` is (``0``, ``-1``, ``i`` of a ``range``
        loop, or a tuple of them); None for anything else."""
        elts = index.elts if isinstance(index, gast.Tuple) else [index]
        for e in elts:
            if isinstance(e, gast.UnaryOp) and isinstance(e.op, gast.USub):
                e = e.operand
            if not (isinstance(e, gast.Constant) and type(e.value) is int
                    or isinstance(e, gast.Name) and self.current.get(e.id) in self.integers):
                return None
        return len(elts)

    def _index(self, node):
        if isinstance(node, gast.Slice):
            parts = [None if p is None else self._lower(p) for p in (node.lower, node.upper, node.step)]
            return gast.Slice(lower=parts[0], upper=parts[1], step=parts[2])
        if isinstance(node, gast.Tuple):
            return nodes.tuple_([self._index(e) for e in node.elts])
        if isinstance(node, gast.List):
            return self._argument(node)  # x[[0, 0, 1]]: an integer-array index
        return self._lower(node)


def op_symbol(op) -> str:
    return {gast.Add: "+", gast.Sub: "-", gast.Mult: "*", gast.Div: "/", gast.Pow: "**",
            gast.MatMult: "@", gast.FloorDiv: "//", gast.Mod: "%", gast.BitAnd: "&", gast.BitOr: "|",
            gast.BitXor: "^", gast.LShift: "<<", gast.RShift: ">>"}.get(type(op), "?")
