"""Which stores into an object's state something reads back.

For each ``obj.name = v`` (``setattr``), ``obj.d[k] = v`` (``setentry``) and each growth of a
container an object holds (``obj.items.append(v)``) in a function: whether a read of that
field, or a call of the user's code that is not inlined (which may read it), may run after
it.  The reverse pass keeps such a store as bookkeeping, with no adjoint, only where
nothing reads it back (``analysis/state.py``).

Requires: a :class:`~srcgrad.ir.Core` body, read before the reverse pass
rewrites it (an operator dispatched when it runs becomes a call then).
Guarantees: nothing is changed; one backward walk of the body (and one forward walk, at
the first question of ``after_call``).
"""
from __future__ import annotations

import operator

import gast

from ..anno import Kind
from .. import anno, nodes, runtime, templates
from ..rules.registry import lookup as registry_lookup
from .mutation import _CONTAINER_MUTATORS


class StoresReadBack:
    """For each ``obj.name = v`` of a function: whether a read of a ``.name`` field, or a
    call of the user's code that is not inlined (``""``), may run after it — later in the
    function, not in the other branch of an ``if`` around it, or anywhere in a loop around
    it (a later iteration).  One backward walk; the sets hold field names."""

    def __init__(self, body):
        self.read_after = {}  # id(store) -> whether a read may follow it
        self.by_call_only = {}  # id(store) -> whether only a call of code not inlined may read it
        self._containers(body)
        self._walk(body, frozenset())
        self.body, self.reads_after_calls = body, None
        # The fields this function stores or grows: an earlier call of it (a layer called
        # twice, a cell in a loop) may have kept them, which a read here must not take in.
        self.kept_names = {s.targets[0].attr for s in nodes.statements(body) if anno.get(s, "kind") == Kind.SETATTR} \
            | {self.grows(s)[1] for s in nodes.statements(body) if self.grows(s) is not None} \
            | {self.entry_store(s)[1] for s in nodes.statements(body)
               if anno.get(s, "kind") == Kind.SETENTRY and self.entry_store(s) is not None}

    def _containers(self, body):
        """``self.held``: name -> (object, field, the name holding the field) for ``_t = obj.f``
        and ``_u = _t["k"]`` (a container an object holds, or an entry of one); ``self.receivers``:
        those whose every use is to grow them (``_t.append(v)``) or to reach one that is."""
        self.held, uses, reached, self.item_reads = {}, {}, {}, {}
        field, item = registry_lookup(getattr), registry_lookup(operator.getitem)
        flat = list(nodes.statements(body))
        for stmt in flat:
            if isinstance(stmt, (gast.For, gast.While, gast.If)):
                loads = nodes.loaded_names(stmt.iter if isinstance(stmt, gast.For) else stmt.test)
            else:
                loads = nodes.loaded_names(stmt)
            for n in loads:
                uses[n] = uses.get(n, 0) + 1
            rule = anno.get(stmt, "rule") if anno.get(stmt, "kind") == Kind.OP else None
            if rule is field and isinstance(stmt.targets[0], gast.Name):
                name = templates.static_value(anno.get(stmt, "bound")["name"])
                if isinstance(name, str):
                    self.held[stmt.targets[0].id] = (anno.get(stmt, "bound")["obj"], name, stmt.targets[0].id)
            elif rule is item and isinstance(stmt.targets[0], gast.Name):
                base = anno.get(stmt, "bound").get("a")
                key = templates.static_value(anno.get(stmt, "bound").get("index"))
                if isinstance(base, gast.Name) and type(key) in (str, int, bool):  # (not a slice)
                    self.item_reads.setdefault(base.id, []).append((key, stmt.targets[0].id))
                if isinstance(base, gast.Name) and base.id in self.held:
                    self.held[stmt.targets[0].id] = self.held[base.id]
                    reached.setdefault(base.id, []).append(stmt.targets[0].id)
        growing = {}
        read_back = registry_lookup(runtime.entry_read_back)
        for stmt in flat:
            receiver = self._receiver(stmt)
            if receiver is not None:
                growing[receiver] = growing.get(receiver, 0) + 1
            elif anno.get(stmt, "checks") is not None:  # (`rt.not_in_place(_t, k, ...)` before `_t[k] += v`)
                growing[anno.get(stmt, "checks")] = growing.get(anno.get(stmt, "checks"), 0) + 1
            elif anno.get(stmt, "kind") == Kind.OP and anno.get(stmt, "rule") is read_back:
                # (an entry read right after it was stored: the stored value, not a read of the field)
                container = anno.get(stmt, "bound").get("container")
                if isinstance(container, gast.Name):
                    growing[container.id] = growing.get(container.id, 0) + 1
        self.receivers = {n for n in self.held if uses.get(n, 0) == growing.get(n, 0) + len(reached.get(n, ()))}
        self.uses, self.growing = uses, growing
        changed = True
        while changed:  # (a name that reaches another is one only if that one is)
            kept = {n for n in self.receivers if all(r in self.receivers for r in reached.get(n, ()))}
            changed, self.receivers = kept != self.receivers, kept

    def _receiver(self, stmt):
        """The name ``stmt`` grows (``_t.append(v)``, ``_t.update(d)``, or run for its effect on
        an object being differentiated, ``rt.keeping_fields(_t, "append", where, v)``), or None."""
        value = getattr(stmt, "value", None)
        if anno.get(stmt, "kind") == Kind.SETENTRY:
            return anno.get(stmt, "holder")
        if not (isinstance(stmt, gast.Expr) and anno.get(stmt, "kind") == Kind.CALL and isinstance(value, gast.Call)
                and isinstance(value.func, gast.Attribute)):
            return None
        if nodes.to_source(value.func).strip() == "rt.keeping_fields" and len(value.args) >= 2 \
                and isinstance(value.args[0], gast.Name) and isinstance(value.args[1], gast.Constant) \
                and value.args[1].value in _CONTAINER_MUTATORS and value.args[1].value not in ("pop", "popitem"):
            return value.args[0].id
        if value.func.attr in _CONTAINER_MUTATORS and value.func.attr not in ("pop", "popitem") \
                and isinstance(value.func.value, gast.Name):
            return value.func.value.id
        return None

    def keys_read(self, name, useful):
        """The literal keys of the entries of ``name`` (a field read: a dict or list) read into
        names in ``useful``, where every use of ``name`` is such a read or a store into it;
        else None (the code may read any entry)."""
        reads = self.item_reads.get(name, [])
        if name is None or self.uses.get(name, 0) != len(reads) + self.growing.get(name, 0):
            return None
        return {key for key, target in reads if useful is None or target in useful}

    def entry_store(self, stmt):
        """``(object, field, name holding it)`` where ``stmt`` (kind ``setentry``) replaces an
        entry of a container that field holds, or None where that is not known."""
        return self.held.get(anno.get(stmt, "holder"))

    def grows(self, stmt):
        """``(object, field, name holding it)`` where ``stmt`` grows a container that field holds."""
        receiver = self._receiver(stmt)
        return self.held.get(receiver) if receiver in self.receivers else None

    def _read(self, stmt, keyed=True):
        """The field ``stmt`` reads (``"parameters"``), the entry of one (``"parameters['k']"``:
        ``P["k"]`` on ``P = self.parameters``, where ``keyed`` and every use of ``P`` is such a
        read), ``""`` for a call of code that is not inlined, or None."""
        kind = anno.get(stmt, "kind")
        target = stmt.targets[0].id if isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name) \
            else None
        if kind == Kind.OP and anno.get(stmt, "rule") is registry_lookup(getattr):
            if target in self.receivers:
                return None  # (only reaches a container to grow it)
            if keyed and target in self.held and self.keys_read(target, None) is not None:
                return None  # (its entries' reads say which it reads)
            return templates.static_value(anno.get(stmt, "bound")["name"])
        if kind == Kind.OP and anno.get(stmt, "rule") is registry_lookup(operator.getitem) \
                and isinstance(anno.get(stmt, "bound").get("a"), gast.Name) \
                and anno.get(stmt, "bound")["a"].id in self.held:
            # `P["k"]` on `P = self.parameters`: a read of the field (`P["k"] = v` may have replaced it)
            if target in self.receivers:
                return None
            base = anno.get(stmt, "bound")["a"].id
            key = templates.static_value(anno.get(stmt, "bound").get("index"))
            field = self.held[base][1]
            if keyed and type(key) in (str, int, bool) and self.keys_read(base, None) is not None:
                return _entry_name(field, key)
            return field
        if self.grows(stmt) is not None or kind == Kind.SETENTRY:
            return None
        calls = kind == Kind.CALL or kind == Kind.UNKNOWN and isinstance(getattr(stmt, "value", None), gast.Call)
        return "" if calls else None  # (a `raise` is "unknown" too: it ends the path)

    def _reads_in(self, stmts) -> set:
        out = set()
        for stmt in stmts:
            for s in nodes.statements([stmt]):
                read = self._read(s)
                if read is not None:
                    out.add(read)
        return out

    def _walk(self, stmts, later) -> frozenset:
        """Walk ``stmts`` backwards given what is read after them; what is read from their start."""
        for stmt in reversed(stmts):
            if isinstance(stmt, (gast.For, gast.While)):
                around = later | self._reads_in(stmt.body)  # (the next iteration reads these)
                self._walk(stmt.body, frozenset(around))
                later = frozenset(around)
            elif isinstance(stmt, gast.If):
                later = self._walk(stmt.body, later) | self._walk(stmt.orelse, later)
            elif anno.get(stmt, "kind") == Kind.SETATTR:
                self.read_after[id(stmt)] = stmt.targets[0].attr in later or "" in later
            elif anno.get(stmt, "kind") == Kind.SETENTRY and self.entry_store(stmt) is not None:
                key = templates.static_value(anno.get(stmt, "index"))
                key = key if type(key) in (str, int, bool) else templates.UNKNOWN
                self.read_after[id(stmt)] = _touches(later, self.entry_store(stmt)[1], key)
                self.by_call_only[id(stmt)] = _touches(later - {""}, self.entry_store(stmt)[1], key) is False
            elif self.grows(stmt) is not None:
                self.read_after[id(stmt)] = _touches(later, self.grows(stmt)[1], templates.UNKNOWN)
                self.by_call_only[id(stmt)] = _touches(later - {""}, self.grows(stmt)[1], templates.UNKNOWN) is False
            else:
                read = self._read(stmt)
                if read is not None:
                    later = later | {read}
        return later

    def advice(self, store, attr) -> str:
        """What to write instead of a store or grow that something reads back."""
        if self.by_call_only.get(id(store)):
            origin = anno.get(store, "origin")
            text = origin.text.strip() if origin is not None else ""
            later = "a call after it (of code srcgrad does not inline: a layer that keeps state of its own) " \
                f"may read `.{attr}`: "
            if anno.get(store, "kind") == Kind.SETENTRY and "[" in text:
                held = text[:text.index("[")]
                return later + (f"collect the values in a local dict and store them after the loop or the call "
                                f"(`values[key] = v` in the loop, `{held}.update(values)` after it)")
            head = text.split("(")[0]  # (`self.derived["Z"].append`)
            held = head[:head.rindex(".")] if "." in head else f"self.{attr}"
            return later + (f"collect the values in a local list and store them after the loop or the call "
                            f"(`values.append(v)` in the loop, `{held}.extend(values)` after it)")
        return (f"use the value itself where it is read, rather than reading it back from `.{attr}`, "
                "or build the list in a local name and return it (with has_aux=True)")

    def read_back(self, store) -> bool:
        return self.read_after.get(id(store), True)

    def after_call(self, read) -> bool:
        """Whether a call of the user's code that is not inlined may run before ``read`` (a
        field read): it may have stored the field with no adjoint (``rt.field`` checks)."""
        if self.reads_after_calls is None:
            self.reads_after_calls = set()
            self._forward(self.body, False)
        return id(read) in self.reads_after_calls

    def _forward(self, stmts, called) -> bool:
        for stmt in stmts:
            if isinstance(stmt, (gast.For, gast.While)):
                called = self._forward(stmt.body, called or "" in self._reads_in(stmt.body))
            elif isinstance(stmt, gast.If):
                called = self._forward(stmt.body, called) | self._forward(stmt.orelse, called)
            else:
                read = self._read(stmt, keyed=False)
                if read == "":
                    called = True
                elif read is not None and called:
                    self.reads_after_calls.add(id(stmt))
        return called


def _entry_name(field, key) -> str:
    return f"{field}[{key!r}]"


def _touches(reads, field, key) -> bool:
    """Whether ``reads`` (what ``StoresReadBack._read`` gives) take in what a store into
    ``field`` (an entry ``key`` of it; UNKNOWN: any) replaced."""
    if "" in reads or field in reads:
        return True
    if key is templates.UNKNOWN:
        return any(r.startswith(field + "[") for r in reads)
    return _entry_name(field, key) in reads
