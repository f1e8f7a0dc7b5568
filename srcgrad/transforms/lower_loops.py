"""Normalize (``anf``): loops.

A loop's *carried* names (assigned in the body and read by a later iteration or after the
loop, ``_carried``) keep one name, updated by a copy at the end of the body (``h = h_2``,
annotated ``carry``: ``_enter_loop``, ``_leave_loop``).  Loops over sequences,
``enumerate``, ``zip``, ``reversed`` and a dict's views become index loops over ``range``,
the user's targets bound at the top of the body (``x = xs[_i]``: ``_loop_header``).

Relies on the walk (``_lower``, ``_emit``, ``_emit_stmt``, ``_in_block``, ``_store``,
``_copy``), on ``_apply`` (``lower_apply``), on ``_unpack``, ``_items`` and ``_emit_aggregate``
(``lower_aggregates``), on the dict views of ``lower_dicts``, on ``_held`` and ``_changed_in``
(``lower_lists``), on ``_same_kind`` and ``_held_elsewhere`` (``lower_kinds``) and on the walk's
state (``current``, ``aggregates``, ``made_by``, ``escaped``, ``writes``, ``loop_writes``,
``integers``, ``reads``).
"""
from __future__ import annotations

import collections
import operator

import gast

from .. import anno, errors, nodes
from .lower_lists import CHANGES


class _Loops:
    """``for`` and ``while``: carried names, the loop emitted."""

    def _carried(self, loop) -> list:
        """Names a loop body assigns that a later iteration or later code may read."""
        targets = loop.target.elts if isinstance(getattr(loop, "target", None), gast.Tuple) else \
            [loop.target] if isinstance(loop, gast.For) else []
        # The loop's own index is rebound by the loop statement; an item (`for v in x`,
        # bound by `v = x[_i]` in the body) is an ordinary name, carried if read after.
        callee = anno.get(loop.iter.func, "resolved", None) \
            if isinstance(loop, gast.For) and isinstance(loop.iter, gast.Call) else None
        if callee is range or callee is reversed and isinstance(loop.iter.args[0], gast.Call) \
                and anno.get(loop.iter.args[0].func, "resolved", None) is range:
            indices = targets
        else:
            indices = targets[:1] if callee is enumerate else []
        target_names = {t.id for t in indices if isinstance(t, gast.Name)}
        stored = {n.id for n in nodes.walk(loop) if isinstance(n, gast.Name)
                  and isinstance(n.ctx, gast.Store)} - target_names
        # `xs.reverse()`, `xs.insert(i, v)`, `xs.sort()` on a list made here bind a new version (`_reordered`).
        stored |= {n.func.value.id for n in nodes.walk(loop) if isinstance(n, gast.Call)
                   and isinstance(n.func, gast.Attribute) and n.func.attr in ("reverse", "insert", "sort")
                   and isinstance(n.func.value, gast.Name) and n.func.value.id in self.current}
        # `d.pop(k)` / `del d[k]` on a dict made here too (`_dict_pop`).
        stored |= {n.func.value.id for n in nodes.walk(loop) if isinstance(n, gast.Call)
                   and isinstance(n.func, gast.Attribute) and n.func.attr == "pop"
                   and isinstance(n.func.value, gast.Name) and self.current.get(n.func.value.id) in self.dicts}
        stored |= {t.value.id for n in nodes.walk(loop) if isinstance(n, gast.Delete) for t in n.targets
                   if isinstance(t, gast.Subscript) and isinstance(t.value, gast.Name)
                   and self.current.get(t.value.id) in self.dicts}
        # `d[k] = v` on a dict made here binds a new version of `d` (`_dict_setitem`; not one
        # another container holds, written in place).
        stored |= {n.value.id for n in nodes.walk(loop) if isinstance(n, gast.Subscript)
                   and isinstance(n.ctx, gast.Store) and isinstance(n.value, gast.Name)
                   and self.current.get(n.value.id) in self.dicts
                   and not self._held_elsewhere(self.current.get(n.value.id))}
        # ... and so does `d.update(...)`, `d.setdefault(k, v)` (`_dict_method`).
        stored |= {n.func.value.id for n in nodes.walk(loop) if isinstance(n, gast.Call)
                   and isinstance(n.func, gast.Attribute) and n.func.attr in CHANGES
                   and isinstance(n.func.value, gast.Name) and self.current.get(n.func.value.id) in self.dicts}
        # Read outside the loop: read more often in the function than in the loop (the
        # function's reads are counted once, not walked again for every loop).
        if self.reads is None:
            self.reads = collections.Counter(nodes.loaded_names(self.fdef))
        inside = collections.Counter(nodes.loaded_names(loop))
        outside = {n for n in stored if self.reads[n] > inside[n]}
        # Read in the body before an unconditional assignment: the previous iteration's value.
        early, assigned = set(), set()
        for stmt in loop.body:
            early |= {n.id for n in nodes.walk(stmt) if isinstance(n, gast.Name)
                      and isinstance(n.ctx, gast.Load)} - assigned
            if isinstance(stmt, (gast.Assign, gast.AugAssign)):
                assigned |= {n.id for n in nodes.walk(stmt) if isinstance(n, gast.Name)
                             and isinstance(n.ctx, gast.Store)}
        if isinstance(loop, gast.While):
            early |= {n.id for n in nodes.walk(loop.test) if isinstance(n, gast.Name)}
        # A nested loop binds its own index before reading it.
        early -= {n.id for inner in nodes.walk(loop) if isinstance(inner, gast.For) and inner is not loop
                  for n in nodes.walk(inner.target) if isinstance(n, gast.Name)}
        return sorted(stored & (set(self.current) | outside | early))

    def _enter_loop(self, loop, iterated=()) -> dict:
        """The loop's carried names, each bound to the name it keeps in the loop.

        A carried name is updated in place by the copy at the end of the body, so a
        value that still refers to the name it had before the loop (an item of a
        tuple, list or dict, ``t = (y, 1.0)``; the sequence the loop iterates over,
        ``for e in c: c = x * e``) would see the new values: such a name is carried
        under a new name (``c_2 = c`` before the loop), and the old one keeps its value.
        ``iterated``: the atoms of the sequences the loop iterates over.
        """
        entry, first_defined = {}, []
        held = {n for elements in self.aggregates.values() for atom in elements.values()
                for n in nodes.loaded_names(atom)}
        held.update(n for atom in iterated for n in nodes.loaded_names(atom))
        for user in self._carried(loop):
            if user not in self.current:
                self.current[user] = user
                self.core.names.add(user)
                self.unbound.add(user)
                first_defined.append(user)
            elif self.current[user] in held:
                old, new = self.current[user], self.core.fresh(user)
                self.block.append(self._copy(new, old, loop))
                self._same_kind(new, old)
                self.current[user] = new
            entry[user] = self.current[user]
            self.ranks.pop(entry[user], None)  # (the body may give it a value of another rank)
            # Later iterations give the name new contents: its elements are no longer
            # the ones it was built from (`pair = (pair[1], pair[0])` in the body), nor a
            # dict's keys those it had (`d["s"] = d.get("s", 0.0) + w` adds one).
            self.aggregates.pop(self.current[user], None)
            self.known_keys.pop(self.current[user], None)
            self.entries.pop(self.current[user], None)
        changed = self._changed_in(loop)
        for atom in iterated:
            if isinstance(atom, gast.Name) and atom.id in changed:
                raise errors.at(changed[atom.id], "this changes the list the loop iterates over; srcgrad "
                                "runs the loop as many times as the list was long when the loop began",
                                "iterate over a copy (`for v in list(xs):`), or over `range(n)`")
        anno.set(loop, "first_defined", first_defined)
        self.loop_writes.append(len(self.writes))
        return entry

    def _leave_loop(self, loop, body, entry):
        written = {name: stmt for name, stmt in self.writes[self.loop_writes.pop():]}
        for user, name in entry.items():
            end = self.current[user]
            if end != name and end in self.runtime_lists and name in self.lists | self.own_lists:
                self.runtime_lists.add(name)  # a list made here either way (`xs.reverse()` in the body)
                self.runtime_sequences.add(name)
            for known in (self.containers, self.lists, self.own_lists, self.dicts, self.tuples):
                if end != name and end not in known:
                    known.discard(name)  # a list before the loop, perhaps an array after it
            if end != name:
                body.append(self._copy(name, end, loop, carry=True))
                # The next iteration, and the code after the loop, see the body's last value.
                fresh, origin = self.made_by.get(end, (False, None))
                fresh = fresh and end not in self.escaped
                if not fresh and name in written:
                    where = f" (made at {origin.where}: `{origin.text.strip()}`)" if origin else ""
                    raise errors.at(written[name], f"cannot write into `{user}`: in the next iteration it "
                                    f"holds the value the loop body gives it{where}, which may share memory "
                                    "with another array", f"give `{user}` a new array at the end of the body "
                                    f"(`{user} = np.copy(...)`)")
                first = user in anno.get(loop, "first_defined")
                entry_fresh, entry_origin = self.made_by.get(name, (first, None))
                # (a refusal names where the value that is not a new array was made)
                self.made_by[name] = (fresh and entry_fresh,
                                      (origin or entry_origin) if not fresh else (entry_origin or origin))
                if end in self.escaped:
                    self.escaped.setdefault(name, self.escaped[end])
            self.current[user] = name

    def _for(self, stmt):
        group = self.group
        header, prelude = self._loop_header(stmt)
        entry = self._enter_loop(stmt, header.pop("iterated", ()))
        index = header.pop("index")
        body = self._in_block(stmt.body, prelude=prelude)
        self.group = group
        self._leave_loop(stmt, body, entry)
        node = gast.For(target=nodes.name(index, "store"), iter=header.pop("iter"), body=body,
                        orelse=[], type_comment=None)
        self._emit_stmt(node, stmt, kind="for", first_defined=anno.get(stmt, "first_defined"),
                        carried=sorted(entry.values()))

    def _while(self, stmt):
        group = self.group
        entry = self._enter_loop(stmt)
        test = self._lower(stmt.test)
        if not isinstance(test, gast.Name):
            raise errors.at(stmt.test, "a `while` loop needs a condition that can become false",
                            "loop `while <condition>:` on a value the body changes")
        condition = test.id
        if condition not in entry.values():
            condition = self.core.fresh("_cond")
            self.block.append(self._copy_atom(condition, test, stmt))

        def retest():
            self.group = group
            again = self._lower(stmt.test)
            self.block.append(self._copy_atom(condition, again, stmt))

        body = self._in_block(stmt.body)
        if condition not in entry.values():
            saved, self.block = self.block, body
            retest()
            self.block = saved
        self.group = group
        self._leave_loop(stmt, body, entry)
        node = gast.While(test=nodes.name(condition), body=body, orelse=[])
        self._emit_stmt(node, stmt, kind="while", first_defined=anno.get(stmt, "first_defined"),
                        carried=sorted(entry.values()))


class _LoopHeaders:
    """What a ``for`` loop iterates over, as an index loop over ``range``."""

    def _loop_header(self, stmt):
        """The ``range`` a loop iterates over, its index name, and a body prelude
        that binds the user's targets (``x = xs[_i]``)."""
        it, target = stmt.iter, stmt.target
        callee = anno.get(it.func, "resolved") if isinstance(it, gast.Call) else None
        targets = target.elts if isinstance(target, gast.Tuple) else [target]
        if callee is range:
            args = [self._lower(a) for a in it.args]
            index = self._store(target.id) if isinstance(target, gast.Name) else None
            if index is None:
                raise errors.at(target, "a `range` loop has one target", "write `for i in range(n):`")
            self.integers.add(index)
            return {"iter": nodes.call("range", args), "index": index}, None
        if callee is reversed and isinstance(it.args[0], gast.Call) \
                and anno.get(it.args[0].func, "resolved") is range:
            args = [self._lower(a) for a in it.args[0].args]
            index = self._store(target.id)
            self.integers.add(index)
            return {"iter": nodes.call("reversed", [nodes.call("range", args)]), "index": index}, None
        start, read_entry = None, None
        if callee is enumerate:
            given = it.args[1:] + [k.value for k in it.keywords if k.arg == "start"]
            if len(targets) != 2 or not isinstance(targets[0], gast.Name) or not 1 <= len(it.args) <= 2 \
                    or any(k.arg != "start" for k in it.keywords) or len(given) > 1:
                raise errors.at(stmt, "srcgrad reads `enumerate` loops with two targets",
                                "write `for i, x in enumerate(xs):` or `for i, x in enumerate(xs, start):`")
            seqs, index_user, item_targets = [self._lower(_reversed_as_slice(it.args[0]))], targets[0].id, \
                [targets[1]]
            if given:  # `enumerate(xs, start=1)`: the index counts from 0, `i = _i + start` in the body
                start, index_user = self._lower(given[0]), None
        elif callee is zip:
            seqs, index_user = self._zipped(it), None
            whole = None if isinstance(target, gast.Tuple) else target  # (`for col in zip(*rows)`)
            if whole is None and len(targets) != len(seqs):
                raise errors.at(stmt, "unpack one target per zipped sequence",
                                "write `for a, b in zip(xs, ys):`, or `for item in zip(xs, ys):`")
            item_targets = [None] * len(seqs) if whole is not None else targets
        elif callee is reversed:  # (a tuple of targets unpacks each item, as below)
            seqs, index_user, item_targets = [self._lower(it.args[0])], None, [target]
        elif len(targets) == 2 and self._dict_method_call(it) == "items":
            # `for k, v in d.items()` on a dict whose keys are known: `zip(keys, values)`.
            held = self._held(it.func.value)
            seqs = [self._dict_method(held, "keys", it), self._dict_method(held, "values", it)]
            index_user, item_targets = None, targets
        elif self._view_of_mapping(it, len(targets)) is not None:
            # `for k, v in d.items()` (`d.values()`, `d.keys()`) on a dict made here whose keys
            # are known when it runs only: a loop over its keys, each value read `v = d[k]` in
            # the body from the dict as it is then (Python's view sees the body's writes too).
            method = it.func.attr
            seqs, index_user = [self._indexable(self._lower(it.func.value), stmt)], None
            item_targets = [targets[0] if method in ("items", "keys") else None]
            if method != "keys":
                read_entry = (it.func.value, targets[-1])
        else:  # (a tuple of targets unpacks each item: `for w, b in layers`)
            seqs, index_user, item_targets = [self._lower(it)], None, [target]
        # Iterating over a dict is iterating over its keys; over a value whose kind is
        # known only at run time, over what `rt.iterated` makes of it (a dict: its keys).
        seqs = [self._dict_method(q.id, "keys", stmt) if isinstance(q, gast.Name)
                and self._dict_keys(q.id) is not None else self._indexable(q, stmt) for q in seqs]
        length = self._emit(nodes.call("len", [nodes.copy(seqs[0])]) if len(seqs) == 1 else
                            nodes.call("rt.zip_length", [nodes.copy(q) for q in seqs]),
                            stmt, None, None, False, kind="nondiff", rule=None)
        index = self._store(index_user) if index_user else self.core.fresh("_i")
        if callee is reversed:
            last = self._emit(nodes.binop(nodes.copy(length), "-", nodes.const(1)), stmt, None, None,
                              False, kind="nondiff", rule=None)
            iter_ = nodes.call("range", [last, nodes.const(-1), nodes.const(-1)])
        else:
            iter_ = nodes.call("range", [length])

        def prelude():
            atoms = []
            if start is not None:
                counted = anno.inherit(gast.BinOp(left=nodes.name(index), op=gast.Add(), right=nodes.copy(start)), stmt)
                self._lower(counted, target=targets[0].id)
            for seq, item in zip(seqs, item_targets):
                value = gast.Subscript(value=nodes.copy(seq), slice=nodes.name(index), ctx=gast.Load())
                whole = self._apply(operator.getitem, value, [nodes.copy(seq), nodes.name(index)], {}, stmt,
                                    origin_node=stmt, target=getattr(item, "id", None), target_hint=None,
                                    effect=False)
                atoms.append(whole)
                if isinstance(item, gast.Tuple):
                    self._unpack(item.elts, None, stmt, source=whole)
            if read_entry is not None:  # `v = d[k]`, of the dict the loop iterates over the keys of
                mapping = self._lower(read_entry[0])
                value = gast.Subscript(value=nodes.copy(mapping), slice=nodes.copy(atoms[0]), ctx=gast.Load())
                self._apply(operator.getitem, value, [nodes.copy(mapping), nodes.copy(atoms[0])], {}, stmt,
                            origin_node=stmt, target=read_entry[1].id, target_hint=None, effect=False)
            if callee is zip and not isinstance(target, gast.Tuple):  # the zipped items as one tuple
                self._emit_aggregate(gast.Tuple(elts=[nodes.copy(a) for a in atoms], ctx=gast.Load()),
                                     list(range(len(atoms))), atoms, stmt, target=target.id, effect=False)
        return {"iter": iter_, "index": index, "iterated": seqs}, prelude

    def _zipped(self, call):
        """The sequences ``zip(...)`` is given, each lowered: ``zip(*xs)`` over a tuple or
        list whose length is known (made here, or passed in) zips its items."""
        seqs = []
        for a in call.args:
            if not isinstance(a, gast.Starred):
                seqs.append(self._lower(_reversed_as_slice(a)))
                continue
            items = self._items(self._lower(a.value))
            if items is None:
                raise errors.at(a, "`zip(*xs)` is read where the length of `xs` is known when compiling",
                                "build `xs` in this function (or pass it in), or zip its items by name: "
                                "`zip(xs[0], xs[1])`")
            seqs += items
        return seqs


def _reversed_as_slice(node):
    """``reversed(xs)`` as ``xs[::-1]``: indexable, with a length, as the loop lowering needs
    (a ``list_reverseiterator`` has neither); any other node as it is."""
    if not (isinstance(node, gast.Call) and anno.get(node.func, "resolved", None) is reversed
            and len(node.args) == 1 and not node.keywords):
        return node
    step = gast.Slice(lower=None, upper=None, step=nodes.const(-1))
    return anno.inherit(gast.Subscript(value=node.args[0], slice=step, ctx=gast.Load()), node)
