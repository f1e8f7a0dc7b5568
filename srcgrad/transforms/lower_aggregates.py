"""Normalize (``anf``): tuples, lists and dicts known item by item, and unpacking.

A display (``t = (a, b)``, ``{'w': w}``) is kept as a value and remembered item by item
(``aggregates``: scalar replacement of aggregates), so ``t[0]`` is just ``a`` and each
item's adjoint reaches its source; so are the values made of such items: ``{**p, 'k': v}``
(``_merged_dict``), ``list(t)``, ``zip(ws, bs)``, ``dict(pairs)``, ``t + (x,)``, ``[h] * 3``,
``t[1:]``.  ``a, b = value`` unpacks item by item, checking the length where it is known
when the code runs only (``_check_length``, dropped later where the ranks decide it:
``anf.drop_decided_checks``).

Relies on the walk (``_lower``, ``_emit``, ``_if``), on ``_apply`` and ``_spread``
(``lower_apply``), on ``_dict_keys`` and ``_dict_method`` (``lower_dicts``), on
``_constant_entry`` and ``_field_rank`` (``lower_objects``: an item of a structure passed in),
on what it knows of kinds (``lower_kinds``) and on the walk's state (``aggregates``,
``structures``, ``field_structures``, the sets of kinds: ``lower_kinds``).
"""
from __future__ import annotations

import builtins

import gast

from .. import anno, errors, nodes, runtime
from ..templates import UNKNOWN, static_value
from ..tree import TreeRank


class _Aggregates:
    def _aggregate(self, node, **emit):
        """``t = (a, b)``: kept as a value, and remembered element by element, so
        that ``t[0]`` is just ``a`` (scalar replacement of aggregates)."""
        if isinstance(node, gast.Dict) and any(k is None for k in node.keys):
            return self._merged_dict(node, **emit)
        if isinstance(node, gast.Dict):
            if not all(isinstance(k, gast.Constant) for k in node.keys):
                raise errors.at(node, "dict keys must be literals in differentiated code",
                                "write {'w': w, 'b': b}")
            keys = [k.value for k in node.keys]
            atoms = [self._lower(v) for v in node.values]
            value = gast.Dict(keys=[nodes.const(k) for k in keys], values=atoms)
        else:
            atoms = [self._lower(e) for e in node.elts]
            keys = list(range(len(atoms)))
            value = (gast.Tuple if isinstance(node, gast.Tuple) else gast.List)(
                elts=[nodes.copy(a) for a in atoms], ctx=gast.Load())
        return self._emit_aggregate(value, keys, atoms, node, **emit)

    def _merged_dict(self, node, **emit):
        """``{**p, 'k': v}``: where the keys of each ``**`` are known when compiling, one
        display of all the entries (a later key's value in the earlier one's place, as
        Python's); else ``rt.merged(a, b)`` dict by dict, whose rule gives each entry's
        adjoint to the dict whose value the merge kept."""
        parts, literal = [], {}
        for key, value in zip(node.keys, node.values):
            if key is None:
                if literal:
                    parts.append(literal)
                    literal = {}
                parts.append(self._spread(value, "mapping", len(parts)))
            elif isinstance(key, gast.Constant):
                literal[key.value] = self._lower(value)
            else:
                raise errors.at(node, "dict keys must be literals in differentiated code",
                                "write {'w': w, 'b': b}")
        if literal:
            parts.append(literal)
        if not any(isinstance(k, tuple) for part in parts for k in part):
            merged = {}
            for part in parts:
                merged.update(part)
            display = gast.Dict(keys=[nodes.const(k) for k in merged], values=list(merged.values()))
            made = self._emit_aggregate(display, list(merged), list(merged.values()), node, **emit)
            return made
        atoms = []
        for part in parts:
            if any(isinstance(k, tuple) for k in part):  # a `**d` whose keys are known when it runs only
                atoms.append(next(iter(part.values())))
            else:
                display = gast.Dict(keys=[nodes.const(k) for k in part], values=list(part.values()))
                atoms.append(self._emit_aggregate(display, list(part), list(part.values()), node,
                                                  target=None, effect=False))
        made = atoms[0] if len(atoms) == 1 else None
        if made is None or isinstance(made, gast.Name) and made.id in self.aggregates:
            made = self._apply(runtime.mapping_of, None, [atoms[0]], {}, node, func_node=nodes.dotted("dict"),
                               target=None, target_hint=None, origin_node=node, effect=False)
            for atom in atoms[1:]:
                made = self._apply(runtime.merged, None, [made, atom], {}, node, func_node=nodes.dotted("rt.merged"),
                                   target=None, target_hint=None, origin_node=node, effect=False)
        else:
            made = self._apply(runtime.mapping_of, None, [made], {}, node, func_node=nodes.dotted("dict"),
                               target=None, target_hint=None, origin_node=node, effect=False)
        for known in (self.containers, self.dicts):
            known.add(made.id)
        self.made_by[made.id] = (True, anno.get(node, "origin"))
        target = emit.get("target")
        if target is None and not emit.get("effect"):
            return made
        copied = self._emit(made, node, target, emit.get("target_hint"), emit.get("effect"), kind="copy")
        if copied is not None:
            self._same_kind(copied.id, made.id)
        return copied

    def _emit_aggregate(self, value, keys, atoms, node, **emit):
        emit.setdefault("target_hint", None)
        emit.setdefault("origin_node", node)
        result = self._emit(value, kind="aggregate", elements=dict(zip(keys, atoms)), **emit)
        self._escape(atoms, node)
        self.held_in.update(a.id for a in atoms if isinstance(a, gast.Name))
        if result is not None:
            self.aggregates[result.id] = dict(zip(keys, atoms))
            if isinstance(value, gast.Tuple):
                self.tuples.add(result.id)
            if isinstance(value, gast.List):
                self.own_lists.add(result.id)
                self.list_depth[result.id] = len(self.loop_writes)  # (how many loops it was made in)
            if isinstance(value, gast.Dict):
                self.dicts.add(result.id)
                self.entries[result.id] = {k: a.id for k, a in zip(keys, atoms) if isinstance(a, gast.Name)}
                self.list_depth[result.id] = len(self.loop_writes)
        return result

    def _display_value(self, display, node):
        """A list or tuple display already lowered in an argument position
        (``f([a, b])``, see :meth:`_argument`) as a value of its own, so that its
        adjoint reaches its items as an aggregate's does (nested displays too)."""
        atoms = [self._display_value(e, node) if isinstance(e, (gast.List, gast.Tuple)) else e
                 for e in display.elts]
        value = type(display)(elts=[nodes.copy(a) for a in atoms], ctx=gast.Load())
        return self._emit_aggregate(value, list(range(len(atoms))), atoms, node,
                                    target=None, effect=False)

    def _aggregate_element(self, base, index):
        if not isinstance(base, gast.Name) or base.id not in self.aggregates:
            return None
        key = static_value(index)
        elements = self.aggregates[base.id]
        if isinstance(key, int) and key < 0 and base.id not in self.dicts:
            key += len(elements)  # ys[-1] of a tuple or list of known length
        if key is UNKNOWN or not isinstance(key, (int, str)) or key not in elements:
            return None
        return nodes.copy(elements[key])

    def _unpack(self, targets, value, stmt, source=None):
        """``a, b = value``: all of the right side first, then each name (``source``:
        the right side's atom, where it is lowered already)."""
        if not all(isinstance(t, gast.Name) for t in targets):
            raise errors.at(stmt, "unpack into plain names", "write `a, b = f(x)`")
        if isinstance(value, (gast.Tuple, gast.List)) and len(value.elts) == len(targets):
            atoms = [self._lower(e) for e in value.elts]
            for t, atom in zip(targets, atoms):
                self._emit(nodes.copy(atom), stmt, t.id, None, False, kind="copy")
            return
        source = self._lower(value) if source is None else source
        if isinstance(source, gast.Name) and (source.id in self.dicts or self._dict_keys(source.id) is not None):
            # `a, b = d` unpacks a dict's keys (its values carry no adjoint this way)
            keys = self._dict_keys(source.id)
            if keys is not None and len(keys) == len(targets):
                for t, key in zip(targets, keys):
                    self._emit(nodes.const(key), stmt, t.id, None, False, kind="copy")
                return
            source = self._apply(runtime.iterated, None, [source], {}, stmt, func_node=nodes.dotted("rt.iterated"),
                                 origin_node=stmt, target=None, target_hint=None, effect=False)
        if isinstance(source, gast.Name) and self._known_length(source.id) != len(targets):
            self._check_length(source, len(targets), stmt)
        for i, t in enumerate(targets):
            element = self._aggregate_element(source, nodes.const(i))
            if element is not None:
                self._emit(element, stmt, t.id, None, False, kind="copy")
                continue
            item = gast.Subscript(value=nodes.copy(source), slice=nodes.const(i), ctx=gast.Load())
            if self._constant_entry(source, i):  # `w, n = p` with an integer `n`: a constant
                self._emit(item, stmt, t.id, None, False, kind="nondiff", rule=None)
                continue
            atom = self._emit(item, stmt, t.id, None, False, kind="unpack", source=source.id, index=i)
            self._field_rank(atom, source, i)  # (a tuple passed in: its entries' ranks are known)

    def _known_length(self, name):
        """The length of a tuple or list made here, or passed in (its ranks record each
        entry), else None."""
        if name in self.aggregates and name not in self.dicts:
            return len(self.aggregates[name])
        rank = self.structures.get(name, self.field_structures.get(name))
        return len(rank) if isinstance(rank, TreeRank) and rank.kind == "sequence" else None

    def _check_length(self, source, count, stmt):
        """``if len(xs) != 2: raise ValueError(...)`` before ``a, b = xs`` where the length
        of ``xs`` is not known here: Python's own check, else a longer ``xs`` would
        silently lose its tail (and its adjoint)."""
        def builtin(name, args):
            func = anno.set(nodes.name(name), "resolved", getattr(builtins, name))
            return nodes.call(func, args)
        where = anno.get(stmt, "origin")
        message = f"wrong number of values to unpack (expected {count})" + (f" (at {where.where})" if where else "")
        check = gast.If(test=gast.Compare(left=builtin("len", [nodes.copy(source)]), ops=[gast.NotEq()],
                                          comparators=[nodes.const(count)]),
                        body=[gast.Raise(exc=builtin("ValueError", [nodes.const(message)]), cause=None)],
                        orelse=[])
        for node in nodes.walk(check):
            anno.inherit(node, stmt)
        self._if(check)

    def _copied_container(self, kind, atom, node, **emit):
        """``list(t)`` / ``tuple(t)`` of a tuple or list whose items are known (or of a dict
        whose keys are): a new list or tuple of the same items, item by item; else None."""
        if isinstance(atom, (gast.List, gast.Tuple)):  # list((a, b)): a display
            atom = self._display_value(atom, node)
        if not isinstance(atom, gast.Name):
            return None
        if self._dict_keys(atom.id) is not None:
            atom = self._dict_method(atom.id, "keys", node)
        if atom.id in self.dicts:
            return None
        items = self._items(atom)
        if items is None:
            return None
        display = (gast.List if kind is list else gast.Tuple)(elts=[nodes.copy(a) for a in items],
                                                               ctx=gast.Load())
        return self._emit_aggregate(display, list(range(len(items))), items, node, **emit)

    def _has_items(self, atom) -> bool:
        """Whether ``atom`` is a tuple or list (not a dict) whose length is known here: made
        here item by item, or passed in (``*args``, ``params``: the specialisation holds it)."""
        return isinstance(atom, gast.Name) and atom.id not in self.dicts \
            and self._known_length(atom.id) is not None

    def _items(self, atom):
        """The items of such a tuple or list (one passed in is read item by item), or None."""
        if not self._has_items(atom):
            return None
        if atom.id in self.aggregates:
            return list(self.aggregates[atom.id].values())
        return [self._lower(gast.Subscript(value=nodes.copy(atom), slice=nodes.const(i), ctx=gast.Load()))
                for i in range(self._known_length(atom.id))]

    @staticmethod
    def _constant_slice(index):
        """``slice(...)`` for an index ``a:b:c`` of literals (or omitted), else None."""
        if not isinstance(index, gast.Slice):
            return None
        parts = [index.lower, index.upper, index.step]
        if not all(p is None or isinstance(p, gast.Constant) and type(p.value) is int
                   or isinstance(p, gast.UnaryOp) and isinstance(p.op, gast.USub)
                   and isinstance(p.operand, gast.Constant) and type(p.operand.value) is int for p in parts):
            return None
        values = [None if p is None else p.value if isinstance(p, gast.Constant) else -p.operand.value
                  for p in parts]
        return slice(*values) if values[2] != 0 else None

    def _known_pairs(self, atom):
        """``{key: atom}`` for a tuple or list of ``(key, value)`` pairs whose items and literal
        keys are known here (a display, or made so), in Python's ``dict(pairs)`` order; else None."""
        known = isinstance(atom, gast.Name) and atom.id in self.aggregates and atom.id not in self.dicts
        items = atom.elts if is_display(atom) else list(self.aggregates[atom.id].values()) if known else None
        if items is None:
            return None
        entries = {}
        for item in items:
            known = isinstance(item, gast.Name) and item.id in self.tuples and item.id in self.aggregates
            pair = item.elts if is_display(item) else list(self.aggregates[item.id].values()) if known \
                else None
            if pair is None or len(pair) != 2 or not isinstance(pair[0], gast.Constant):
                return None
            entries[pair[0].value] = pair[1]
        return entries

    def _zip_display(self, args, node, **emit):
        """``zip(ws, bs)`` (``zip(*params)``) of tuples or lists whose items are known: the
        list of their rows, each a tuple display, so each item's adjoint reaches its source (a
        list, not an iterator: the same to whatever reads it once)."""
        columns = [self._items(a) for a in args]
        rows = []
        for i in range(min(map(len, columns))):
            items = [c[i] for c in columns]
            rows.append(self._emit_aggregate(gast.Tuple(elts=[nodes.copy(a) for a in items], ctx=gast.Load()),
                                             list(range(len(items))), items, node, target=None,
                                             target_hint=None, effect=False))
        return self._emit_aggregate(gast.List(elts=[nodes.copy(r) for r in rows], ctx=gast.Load()),
                                    list(range(len(rows))), rows, node, **emit)

    def _joined(self, op, left, right, node, emit):
        """``t + (x,)``, ``xs + ys``, ``[h] * 3`` on tuples or lists whose items are known: a new
        display of the joined (repeated) items, so each item's adjoint reaches its source."""
        if isinstance(op, gast.Add):
            if not (self._has_items(left) and self._has_items(right)):
                return None
            items, kind = self._items(left) + self._items(right), left
        elif isinstance(op, gast.Mult):
            kind, count = (left, right) if self._has_items(left) else (right, left)
            if not self._has_items(kind) or not (isinstance(count, gast.Constant) and type(count.value) is int):
                return None
            items = self._items(kind) * max(count.value, 0)
        else:
            return None
        display = (gast.List if kind.id in self.own_lists else gast.Tuple)(
            elts=[nodes.copy(a) for a in items], ctx=gast.Load())
        return self._emit_aggregate(display, list(range(len(items))), items, node, **emit)


def is_display(node) -> bool:
    """A list or tuple display, lowered in an argument's place, without ``*`` items."""
    return isinstance(node, (gast.List, gast.Tuple)) and not any(isinstance(e, gast.Starred) for e in node.elts)
