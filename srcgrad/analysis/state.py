"""Values kept in an object's state: bookkeeping, or refused.

A function of the user's may store into the objects it is given (``self.cache = h``,
``self.stats["n"] += 1``, ``self.inputs.append(x)``).  The reverse pass runs such a store
as written, with no adjoint (as under ``no_grad``), where nothing in the function reads it
back (``analysis/read_back.py``), and the generated code records it (``rt.kept``,
``rt.kept_entry``, ``rt.growing``), so that a later call reading it back is refused then; a
value being differentiated that is read back, or a list changed after another list, tuple
or dict took it in, is refused here.

Requires: a :class:`~srcgrad.ir.Core` program, its activity and ranks; the
statements as the reverse pass visits them.
Guarantees: a store is refused, left as it is, or its value (or the object it reaches)
wrapped in the runtime's record of it; a field read after such a store is read through
``rt.field``, which refuses a value kept with no adjoint.
"""
from __future__ import annotations

import operator
import re

import gast

from ..anno import Kind
from .. import anno, errors, nodes, templates
from ..rules.registry import lookup as registry_lookup
from ..tree import TreeRank
from .ranks import rank_of
from .read_back import StoresReadBack


class _ObjectState:
    """The checks of stores into objects' state, a part of :class:`~.refusals.Refusals`
    (whose ``__init__`` sets the state they read)."""

    def _field_read(self, stmt):
        """``y = obj.name`` where a call before it (or an earlier call of this function: state
        it keeps, read in the next call) may have stored the field as bookkeeping, with no
        adjoint: read through ``rt.field``, which refuses such a value when the code runs."""
        if not (anno.get(stmt, "kind") == Kind.OP and anno.get(stmt, "rule") is registry_lookup(getattr)
                and isinstance(stmt.value, gast.Attribute) and isinstance(stmt.value.value, gast.Name)):
            return
        if self.stores is None:
            self.stores = StoresReadBack(self.core.body)
        target = stmt.targets[0].id if isinstance(stmt.targets[0], gast.Name) else None
        if self.stores.after_call(stmt) or templates.static_value(anno.get(stmt, "bound")["name"]) \
                in self.stores.kept_names and target in self.activity.useful:
            # A call before it (or an earlier call of this function: state it keeps, read in
            # the next call) may have stored the field as bookkeeping (no adjoint).
            origin = anno.get(stmt, "origin")
            keys = self.stores.keys_read(target, self.activity.useful)
            stmt.value = nodes.call("rt.field", [stmt.value.value, nodes.const(stmt.value.attr),
                                                 nodes.const(origin.where if origin else "?")]
                                    + ([nodes.const(tuple(sorted(keys, key=repr)))] if keys is not None else []))

    def _attribute_store(self, stmt):
        """``obj.name = v``: bookkeeping nothing reads back (``rt.kept``); refused where a value being
        differentiated is read back; checked (``rt.stored``) on an object being differentiated."""
        value = anno.get(stmt, "value")
        if self._kept_apart(stmt):
            # `self.cache = x`, `self.running_mean = ...`: bookkeeping nothing in this call
            # reads back (normalize gave reads after it in its block the value itself): run
            # as written, the value stored as it is, with no adjoint (as under no_grad).
            # `rt.kept` records it, so that a later call reading it back is refused.
            target, origin = stmt.targets[0], anno.get(stmt, "origin")
            if isinstance(value, gast.Name) and value.id in self.activity.varied:
                stmt.value = nodes.call("rt.kept", [nodes.copy(target.value), nodes.const(target.attr),
                                                    stmt.value, nodes.const(origin.where if origin else "?")])
            return
        if isinstance(value, gast.Name) and value.id in self.activity.varied \
                and not self._bookkeeping(value.id):
            raise errors.at(stmt, f"storing a value that is being differentiated in the attribute "
                            f"`{nodes.to_source(stmt.targets[0])}` is not supported: srcgrad cannot "
                            "follow it from there",
                            "return it (with has_aux=True), or keep it in a local name")
        target = stmt.targets[0]
        if isinstance(target.value, gast.Name) and target.value.id in self.activity.varied:
            # An object being differentiated: a float stored in it now would be read
            # later with its adjoint going to the parameter it replaced. Counters pass.
            origin = anno.get(stmt, "origin")
            stmt.value = nodes.call("rt.stored", [stmt.value, nodes.const(target.attr),
                                                  nodes.const(origin.where if origin else "?"),
                                                  nodes.copy(target.value)])

    def _kept_apart(self, store) -> bool:
        """Whether nothing in this function reads back what ``obj.name = v`` stores: no
        later read of a ``.name`` (any object's: which object an alias reaches is not
        known), and no call of code that is not inlined (it may read it), after it in
        program order or anywhere in a loop enclosing it (a later iteration)."""
        if self.stores is None:
            self.stores = StoresReadBack(self.core.body)
        return not self.stores.read_back(store)

    def _grown_apart(self, stmt) -> bool:
        """``self.inputs.append(x)``, ``self.derived["Z"].append(z)``: a list or dict an
        object holds grown by a value being differentiated that nothing in this function
        reads back (as ``_kept_apart``; reads that only reach such a call do not count).  It
        runs as written on the primal value, with no adjoint, as a store kept apart does, and
        ``rt.growing`` records the field, so that a later call reading it back is refused."""
        if self.stores is None:
            self.stores = StoresReadBack(self.core.body)
        grown = self.stores.grows(stmt)
        if grown is None or self.stores.read_back(stmt):
            return False
        obj, attr, root = grown
        receiver, origin = stmt.value.func, anno.get(stmt, "origin")
        receiver.value = nodes.call("rt.growing", [receiver.value, nodes.copy(obj), nodes.const(attr),
                                                   nodes.name(root), nodes.const(origin.where if origin else "?")])
        return True

    def _entry_store(self, stmt):
        """``self.parameters["running_mean"] = v``, ``self.dv["n"] += 1``: an entry of a dict or
        list an object holds replaced.  Bookkeeping as ``self.n = v`` is (``setattr``): run as
        written, the value stored with no adjoint, where nothing in this function reads the
        field back after it (``StoresReadBack``); ``rt.kept_entry`` records it, so that a later
        call reading the entry back with an adjoint is refused.  A differentiated value that
        is read back is refused here."""
        if self.stores is None:
            self.stores = StoresReadBack(self.core.body)
        value, holder = anno.get(stmt, "value"), stmt.targets[0].value
        varied = isinstance(value, gast.Name) and value.id in self.activity.varied \
            and not self._bookkeeping(value.id)
        stored = self.stores.entry_store(stmt)
        if not varied:
            return
        origin = anno.get(stmt, "origin")
        if stored is None or self.stores.read_back(stmt):
            field = f"`.{stored[1]}`" if stored is not None else "the container"
            raise errors.at(stmt, f"storing a value that is being differentiated in "
                            f"`{_stored_target(origin)}`, "
                            f"and {field} (or a call that may read it) is read after it in this function: "
                            "srcgrad keeps what is stored in an object's state as bookkeeping, with no "
                            "adjoint, so a gradient through that read would be lost",
                            self.stores.advice(stmt, stored[1]) if stored is not None else
                            "keep the value in a local name and use that name where it is read, or return "
                            "it (with has_aux=True)")
        obj, attr, root = stored
        stmt.targets[0].value = nodes.call("rt.kept_entry", [
            holder, nodes.copy(obj), nodes.const(attr), nodes.copy(anno.get(stmt, "index")),
            nodes.name(value.id), nodes.const(origin.where if origin else "?")])

    def _bookkeeping(self, name) -> bool:
        """``self.calls + 1``: an update of a field by constants (a counter), not a
        differentiated value, though the object it belongs to is differentiated."""
        if self.definitions is None:  # (found once: what reverse adds defines no name asked about)
            self.definitions = {t: s for s in nodes.statements(self.core.body)
                                for t in nodes.assigned_names(s)}
        defs = self.definitions
        stmt = defs.get(name)
        if stmt is None or anno.get(stmt, "kind") != Kind.OP:
            return False
        field, item = registry_lookup(getattr), registry_lookup(operator.getitem)

        def read_from_object(atom, depth=0):  # `self.calls`, `self.dv["n"]`
            source = defs.get(atom.id) if isinstance(atom, gast.Name) else None
            if source is None or anno.get(source, "kind") != Kind.OP or depth > 8:
                return False
            rule = anno.get(source, "rule")
            return rule is field or rule is item and read_from_object(anno.get(source, "bound").get("a"), depth + 1)
        return all(isinstance(atom, gast.Constant) or read_from_object(atom)
                   for atom in anno.get(stmt, "bound").values())

    def check_holders(self, stmt, xs):
        """``ys = [xs]`` then ``xs.append(h)``: ``ys`` holds the list itself, so what
        ``ys`` holds grew too, which its adjoint (split at ``ys = [xs]``, before the
        append) does not see.  Refused where ``ys`` is differentiated as a whole (an
        item read through it, ``ys[0][1]``, reads ``xs`` itself and is fine)."""
        flat = list(nodes.statements(self.core.body))
        position = {id(s): i for i, s in enumerate(flat)}
        # Loops in which one iteration's append reaches the holder made in an earlier one:
        # those the list lives across (not a list each iteration makes anew, `row = []`).
        loops = [{id(s) for s in nodes.statements(loop.body)} for loop in flat
                 if isinstance(loop, (gast.For, gast.While)) and (
                     xs in anno.get(loop, "carried") or not any(
                         xs in nodes.assigned_names(s) for s in nodes.statements(loop.body)))]
        for holder in flat:
            kind = anno.get(holder, "kind")
            if kind == Kind.AGGREGATE:
                outer, items = holder.targets[0].id, anno.get(holder, "elements").values()
            elif kind == Kind.APPEND:  # `out.append(row)`, then `row.append(h)`
                outer, items = anno.get(holder, "list"), [anno.get(holder, "value")]
            else:
                continue
            if not self.activity.active(outer) or not any(isinstance(a, gast.Name) and a.id == xs
                                                          for a in items):
                continue
            if position[id(holder)] < position[id(stmt)] \
                    or any(id(holder) in body and id(stmt) in body for body in loops):
                origin = anno.get(holder, "origin")
                where = f" at {origin.where} (`{origin.text.strip()}`)" if origin else ""
                raise errors.at(stmt, f"this changes a list that `{outer}` holds{where}, and "
                                f"`{outer}` is used as a whole later: srcgrad follows a list's "
                                "items by the list's own name only",
                                "finish the list before putting it into another list, tuple or dict",
                                kind=errors.UnsupportedSyntaxError)

    def _user_object(self, atom) -> bool:
        """Whether ``atom`` holds an object of the user's class (not a list, dict or set), so
        that its ``.update(...)``, ``.append(...)`` is its class's method, not a container's:
        an object argument (its rank says so) or one made here (``opt = SGD(0.1)``)."""
        if not isinstance(atom, gast.Name):
            return False
        rank = rank_of(atom, self.ranks)
        if isinstance(rank, TreeRank) and atom.id in self.core.params:  # (in an object, a dict's kind is "object" too)
            return rank.kind == "object"
        if self.definitions is None:
            self.definitions = {t: s for s in nodes.statements(self.core.body)
                                for t in nodes.assigned_names(s)}
        made = self.definitions.get(atom.id)
        cls = anno.get(made, "constructs") if made is not None else None
        return isinstance(cls, type) and not issubclass(cls, (list, dict, set))


def _stored_target(origin) -> str:
    """``self.stats["sum"]`` of the line ``self.stats["sum"] += v``."""
    return re.split(r"\s*[-+*/@%&|^]*=", origin.text.strip())[0] if origin is not None else "an entry"
