"""Normalize (``anf``): dicts made here — their keys, views, methods and writes.

A dict whose keys are known when compiling (a display with literal keys, or one passed in:
``_dict_keys``) gives ``d.keys()``, ``d.values()``, ``d.items()`` as tuples of what it holds,
``d.get(k, default)`` as ``d[k]`` or the default (``_dict_method``); ``d.update(...)`` and
``d.setdefault(k, v)`` are entry writes (``_dict_written``).  ``d[k] = v`` on a dict made
here that no other name holds is a new version, ``d = rt.with_item(d, k, v)``
(``_dict_setitem``), and ``d.pop(k)`` / ``del d[k]`` ``d = rt.without_key(d, k)``
(``_dict_pop``).  A loop over a dict whose keys are known when it runs only iterates over a
copy of its keys (``_indexable``).

Relies on the walk (``_lower``, ``_emit``, ``_statement``), on ``_apply``, ``_user_call`` and
``_index`` (``lower_apply``, ``lower_expressions``), on ``_emit_aggregate``,
``_aggregate_element`` (``lower_aggregates``) and ``_held`` (``lower_lists``), on what it knows
of kinds (``lower_kinds``), and on the walk's state (``dicts``, ``aggregates``, ``known_keys``,
``entries``, ``structures``, ``runtime_mappings``, ``made_by``, ``aliased``, ``passed``,
``escaped``).
"""
from __future__ import annotations

import operator

import gast

from .. import anno, errors, nodes, runtime
from ..templates import UNKNOWN, static_value


class _Dicts:
    def _dict_keys(self, name):
        """The keys of the dict ``name`` when known at compile time (a dict made here
        with literal keys, or one passed in: its keys are part of the specialisation)."""
        if name in self.dicts and name in self.aggregates:
            return list(self.aggregates[name])
        if name in self.known_keys:
            return list(self.known_keys[name])
        if name in self.structures and self.structures[name].kind == "mapping":
            return [key for key, _ in self.structures[name]]
        return None

    def _dict_method_call(self, node):
        """``"keys"``/``"values"``/``"items"``/``"get"`` for such a call on a dict whose keys
        are known at compile time, else None."""
        if isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute) \
                and node.func.attr in ("keys", "values", "items", "get"):
            held = self._held(node.func.value)
            if held is not None and self._dict_keys(held) is not None:
                return node.func.attr
        return None

    def _dict_method(self, name, method, node, **emit):
        """``d.keys()``, ``d.values()``, ``d.items()`` as tuples of what they hold (a
        view of a dict is iterated, measured and tested as such a tuple is), item by
        item, so each value's adjoint reaches ``d``'s; ``d.get(k, default)`` with a
        literal key is ``d[k]`` or the default."""
        emit.setdefault("origin_node", node)
        emit.setdefault("target", None)
        emit.setdefault("effect", False)
        keys = self._dict_keys(name)
        called = isinstance(node, gast.Call) and getattr(node.func, "attr", None) == method  # (not `list(d)`)
        args = node.args if called else []
        keywords = node.keywords if called else []
        if keywords or (method != "get" and args) or (method == "get" and not 1 <= len(args) <= 2):
            raise errors.at(node, f"srcgrad reads `.{method}()` of a dict with "
                            f"{'a key and perhaps a default' if method == 'get' else 'no arguments'}",
                            f"write `d.{method}({'key, default' if method == 'get' else ''})`")

        def value(key):
            element = self._aggregate_element(nodes.name(name), nodes.const(key))
            if element is not None:
                return element
            item = gast.Subscript(value=nodes.name(name), slice=nodes.const(key), ctx=gast.Load())
            return self._apply(operator.getitem, item, [nodes.name(name), nodes.const(key)], {}, node,
                               origin_node=node, target=None, target_hint=None, effect=False)

        def as_tuple(atoms, **where):
            display = gast.Tuple(elts=[nodes.copy(a) for a in atoms], ctx=gast.Load())
            return self._emit_aggregate(display, list(range(len(atoms))), atoms, node, **where)

        if method == "get":
            key_atom = self._lower(args[0])
            key = static_value(key_atom)
            if key is UNKNOWN:  # a key known at run time only: `dispatch.vjp_method` reads it then
                rest = [self._lower(a) for a in args[1:]]
                call = gast.Attribute(value=nodes.name(name), attr="get", ctx=gast.Load())
                return self._user_call(call, [key_atom] + rest, {}, node, receiver=nodes.name(name), **emit)
            atom = value(key) if key in keys else self._lower(args[1]) if len(args) > 1 else nodes.const(None)
            if emit["target"] is None and not emit["effect"]:
                return atom
            return self._emit(atom, kind="copy", **emit)
        if method == "keys":
            return as_tuple([nodes.const(k) for k in keys], **emit)
        if method == "values":
            return as_tuple([value(k) for k in keys], **emit)
        pairs = [as_tuple([nodes.const(k), value(k)], target=None, effect=False) for k in keys]
        return as_tuple(pairs, **emit)

    def _dict_written(self, receiver, node):
        """``d.update(k=v)`` (or ``d.update({"k": v})``) as ``d["k"] = v``, and ``d.setdefault("k",
        v)`` as ``d["k"] = v`` where ``d`` has no ``"k"`` yet, for a dict made here: the assignments
        lowered; for ``setdefault`` the atom of ``d["k"]``.  Where it is not known when compiling
        whether ``d`` has the key (its keys known when it runs only, after a loop that adds them;
        a key computed), ``setdefault`` is ``if k not in d: d[k] = v``, then ``d[k]`` (the default
        evaluated either way, as Python's argument is).  None for other forms (refused as before)."""
        def write(key, value):
            target = gast.Subscript(value=nodes.copy(receiver), slice=nodes.const(key), ctx=gast.Store())
            self._statement(anno.inherit(gast.Assign(targets=[target], value=value, type_comment=None), node))
        if node.func.attr == "update":
            pairs = [(k.arg, k.value) for k in node.keywords]
            if len(node.args) == 1 and isinstance(node.args[0], gast.Dict) \
                    and all(isinstance(k, gast.Constant) for k in node.args[0].keys):
                pairs = [(k.value, v) for k, v in zip(node.args[0].keys, node.args[0].values)] + pairs
            elif node.args or any(k is None for k, _ in pairs):
                return None
            # (Python evaluates every value before it writes any: `d.update(a=2 * d["a"], b=d["a"])`)
            values = [self._lower(value) for _, value in pairs]
            for (key, _), value in zip(pairs, values):
                write(key, value)
            return anno.inherit(nodes.const(None), node)
        if node.keywords or not 1 <= len(node.args) <= 2:
            return None
        default = node.args[1] if len(node.args) == 2 else nodes.const(None)
        held = self._held(receiver)
        keys = self._dict_keys(held) if held in self.dicts else None
        if keys is None or not isinstance(node.args[0], gast.Constant):
            key, value = self._lower(node.args[0]), self._lower(default)
            test = gast.Compare(left=nodes.copy(key), ops=[gast.NotIn()], comparators=[nodes.copy(receiver)])
            entry = gast.Subscript(value=nodes.copy(receiver), slice=nodes.copy(key), ctx=gast.Store())
            added = gast.Assign(targets=[entry], value=nodes.copy(value), type_comment=None)
            branch = gast.If(test=test, body=[added], orelse=[])
            for n in nodes.walk(branch):
                anno.inherit(n, node)
            self._statement(branch)
            read = gast.Subscript(value=nodes.copy(receiver), slice=nodes.copy(key), ctx=gast.Load())
            return anno.inherit(read, node)
        key = node.args[0].value
        if key in keys:
            self._lower(default, effect=not isinstance(default, (gast.Constant, gast.Name)))  # (Python evaluates it)
        else:
            write(key, default)
        return anno.inherit(gast.Subscript(value=nodes.copy(receiver), slice=nodes.const(key), ctx=gast.Load()), node)

    def _view_of_mapping(self, call, targets):
        """The name of ``d`` in ``d.items()`` (for two loop targets), ``d.values()`` or
        ``d.keys()`` (for one) where ``d`` is a dict made here whose keys are known when it
        runs only, else None."""
        if not (isinstance(call, gast.Call) and isinstance(call.func, gast.Attribute) and not call.args
                and not call.keywords and isinstance(call.func.value, gast.Name)
                and not anno.has(call.func.value, "resolved")
                and targets == {"items": 2, "values": 1, "keys": 1}.get(call.func.attr)):
            return None
        name = self.current.get(call.func.value.id, call.func.value.id)
        known = name in self.dicts or name in self.runtime_mappings
        return name if known and self._dict_keys(name) is None else None

    def _indexable(self, atom, node):
        """``atom``, or ``rt.iterated(atom)`` where it may be a dict (or a set, or a view of a
        dict), which a loop cannot index: a value whose kind normalize does not know."""
        if isinstance(atom, gast.Name) and (atom.id in self.dicts or atom.id in self.runtime_mappings) \
                and self._dict_keys(atom.id) is None:
            # A dict's keys, copied (`list(d)`): a new list, which a write into the dict in the
            # loop does not change (Python refuses a change of its size while it iterates).
            func = anno.set(nodes.name("list"), "resolved", list)
            made = self._apply(runtime.sequence_of, None, [atom], {}, node, func_node=func, origin_node=node,
                               target=None, target_hint="keys", effect=False)
            return made
        if not isinstance(atom, gast.Name) or atom.id in self.arrays or atom.id in self.scalars \
                or self._holds_sequence(atom.id) or atom.id in self.aggregates \
                or atom.id in self.structures or atom.id in self.runtime_sequences:
            # (a list whose items are known when it runs only, by its own name: a write into it
            # in the loop is then one the reads after it see, as Python's loop over it does)
            return atom  # (a dict made here whose keys are known only at run time: rt.iterated, its keys)
        return self._apply(runtime.iterated, None, [atom], {}, node, func_node=nodes.dotted("rt.iterated"),
                           origin_node=node, target=None, target_hint=None, effect=False)

    def _dict_setitem(self, user, name, target, value_node, stmt):
        """``d[k] = v`` on a dict made here that no other name holds: ``d = rt.with_item(d, k, v)``,
        a new version of ``d`` as for any rebinding (in a loop, a carried name), whose
        adjoint gives ``v`` its entry at ``k``."""
        fresh, _ = self.made_by.get(name, (False, None))
        if not fresh or name in self.aliased or name in self.passed or name in self.escaped:
            where = self.passed.get(name)
            seen = f"it was passed to a function at {where.where} (`{where.text.strip()}`), which may " \
                "keep it" if where is not None else "another name may refer to the same dict"
            raise errors.at(stmt, f"cannot write into the dict `{user}` here: {seen}, and srcgrad follows "
                            "the entries of a dict by its own name only",
                            "write all entries before the dict is shared, and use one name for it")
        index = self._index(target.slice)
        value = self._lower(value_node)
        self._escape([value], stmt)
        self._stored(value)
        new = self._apply(runtime.with_item, None, [nodes.name(name), index, value], {}, stmt,
                          func_node=nodes.dotted("rt.with_item"), origin_node=stmt, target=user,
                          target_hint=None, effect=False)
        self.containers.add(new.id)
        self.dicts.add(new.id)
        self.arrays.discard(new.id)
        self.made_by[new.id] = (True, anno.get(stmt, "origin"))
        key = static_value(index)
        if key is not UNKNOWN and isinstance(value, gast.Name) and name in self.entries:
            kept = {k: v for k, v in self.entries[name].items() if not isinstance(k, tuple)}  # (`k` may be 'a')
            self.entries[new.id] = {**kept, key: value.id}
        elif key is UNKNOWN and isinstance(index, gast.Name) and isinstance(value, gast.Name):
            self.entries[new.id] = {("name", index.id): value.id}  # (any other key may be the same one)
        keys = self._dict_keys(name)
        if key is not UNKNOWN and keys is not None:  # (the new version's keys, in insertion order)
            self.known_keys[new.id] = keys + [key] if key not in keys else keys

    def _dict_pop(self, user, name, node, **emit):
        """``v = d.pop(k)`` (``del d[k]``) on a dict made here that no other name holds: ``v``
        is ``d[k]`` (``d.get(k, default)`` with a default), then ``d = rt.without_key(d, k)``,
        a new version of ``d`` as ``d[k] = v`` makes (``_dict_setitem``)."""
        fresh, _ = self.made_by.get(name, (False, None))
        if not fresh or name in self.aliased or name in self.passed or name in self.escaped \
                or name in self.held_in or node.keywords or not 1 <= len(node.args) <= 2:
            where = self.passed.get(name)
            seen = f"it was passed to a function at {where.where} (`{where.text.strip()}`), which may " \
                "keep it" if where is not None else "another name may refer to the same dict"
            raise errors.at(node, f"cannot pop from the dict `{user}` here: {seen}, and srcgrad follows "
                            "the entries of a dict by its own name only",
                            f"read the entry and build a new dict without it: `v = {user}[k]`, "
                            f"`{user} = {{key: e for key, e in {user}.items() if key != k}}`")
        base = nodes.name(user)
        anno.inherit(base, node)
        read = gast.Call(func=gast.Attribute(value=base, attr="get", ctx=gast.Load()), args=list(node.args),
                         keywords=[]) if len(node.args) == 2 else \
            gast.Subscript(value=base, slice=node.args[0], ctx=gast.Load())
        anno.inherit(read, node)
        value = None if emit.get("effect") else self._lower(read, **{k: v for k, v in emit.items()
                                                                     if k != "origin_node"})
        key = self._lower(node.args[0])
        new = self._apply(runtime.without_key, None, [nodes.name(name), key, nodes.const(len(node.args) == 2)], {},
                          node, func_node=nodes.dotted("rt.without_key"), origin_node=node, target=user,
                          target_hint=None, effect=False)
        self.containers.add(new.id)
        self.dicts.add(new.id)
        self.arrays.discard(new.id)
        self.made_by[new.id] = (True, anno.get(node, "origin"))
        removed = static_value(key)
        if removed is not UNKNOWN and name in self.entries:
            self.entries[new.id] = {k: v for k, v in self.entries[name].items() if k != removed}
        keys = self._dict_keys(name)
        if removed is not UNKNOWN and keys is not None:
            self.known_keys[new.id] = [k for k in keys if k != removed]
        return value
