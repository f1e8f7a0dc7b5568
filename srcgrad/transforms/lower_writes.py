"""Normalize (``anf``): writes into items, ``y[i] = v``.

Into an array, a write in place: what it overwrites is saved first (``y_overwritten``) so
the backward sweep can put it back, and the write is refused where ``y`` may share memory
with another name (``_setitem``; the names read after it: ``analysis/sharing.py``).  Into a
list made here whose items are known, a new version of the list (``_list_setitem``); into a
dict, ``lower_dicts``' ``_dict_setitem``; into an item of an item (``M[0][1] = v``), a write
into the list or dict ``M[0]`` holds, ``M`` made again after it (``_nested_setitem``,
``_made_again``); into an entry of an object's field, ``lower_objects``' ``_object_entry``.
``d[k] += v`` is checked as NumPy's ``+=`` is (``_check_augmented_entry``).

Relies on the walk (``_lower``, ``_emit``, ``_emit_stmt``, ``_index``), on what it knows of
kinds and containers (``lower_kinds``, ``lower_aggregates``, ``lower_lists``,
``lower_dicts``) and on its state (``current``, ``made_by``, ``writes``, ``loop_writes``,
``entries``, ``read_dicts``).
"""
from __future__ import annotations

import gast

from .. import anno, errors, nodes, templates
from ..templates import UNKNOWN, static_value
from .lower_expressions import op_symbol
from .lower_lists import literal_key


class _ItemWrites:
    def _setitem(self, target, value_node, stmt):
        """``y[i] = v`` stays an in-place write.  The overwritten elements are saved
        first (``y_overwritten``) so the backward sweep can put them back, and the
        write is refused where ``y`` may share memory with another name."""
        if self._object_entry(target, value_node, stmt):
            return
        if isinstance(target.value, gast.Subscript):
            self._nested_setitem(target, value_node, stmt)
            return
        if not isinstance(target.value, gast.Name) or anno.has(target.value, "resolved"):
            held = nodes.to_source(target.value)
            what = f"the global `{held}`" if isinstance(target.value, gast.Name) else f"`{held}`"
            raise errors.at(stmt, f"writing into {what}, which this function did not make, is not "
                            "supported: srcgrad follows writes only into arrays, lists and dicts held in "
                            "the function's own names (`y[i] = v`)",
                            "write into a local copy (`y = np.copy(...)`, `d = dict(...)`) and return it "
                            "(with has_aux=True where only the loss is differentiated)")
        user = target.value.id
        name = self.current.get(user, user)
        fresh, origin = self.made_by.get(name, (False, None))
        if name in self.dicts and not (self._held_elsewhere(name) and self._written_as_runtime_mapping(name)):
            self._dict_setitem(user, name, target, value_node, stmt)
            return
        if name in self.own_lists and self._list_setitem(user, name, target, value_node, stmt):
            return
        if name in self.containers and not self._written_as_runtime_list(name):
            raise errors.at(stmt, f"writing into an element of the list, tuple or dict `{user}` is not "
                            "supported yet", f"build a new one (`{user} = [x * 3, {user}[1]]`), "
                            "append to a list, or keep the values in an array")
        # Other names that share `name`'s memory (aliases, views) and are read after the
        # write are found by analysis/sharing.py, once the whole function is lowered.
        if (not fresh or name in self.escaped) and name not in self.runtime_lists:
            kind = self._container_kind(name)
            where = self._shared_at(name) or (f" (made at {origin.where}: `{origin.text.strip()}`)" if origin
                                               else f" (it is an argument: the caller's {kind or 'value'})"
                                               if name in self.params else "")
            held = {"dict": "another name may hold the same dict", "list": "another name may hold the same "
                    "list"}.get(kind, "it may share memory with another array, list or dict" if kind is None
                                else "it may share memory with another array")
            raise errors.at(stmt, f"cannot write into `{user}`: {held}{where}, and the write would change "
                            "that one too", "write into a copy before the write: " + _copy_advice(user, kind))
        self.writes.append((name, stmt))
        index = self._index(target.slice)
        value = self._lower(value_node)
        self._stored(value)
        if name in self.runtime_lists:
            self._escape([value], stmt)  # (a list or dict holds the array now: a write into it is seen there)
        saved = self.core.fresh(f"{name}_overwritten")
        # Into a name known to hold an array, NumPy's own code; into a preallocated list
        # (`hs = [None] * n`), a dict or a value known only when it runs, the runtime's,
        # which does the same for each kind (`rt.overwritten`).
        generic = name not in self.arrays
        container = name in self.runtime_lists  # (an item replaced: no array changed, for the sharing analysis)
        if generic:
            old = nodes.call("rt.overwritten", [nodes.name(name), templates._slices_as_calls(nodes.copy(index))])
        else:
            old = nodes.call(f"{self.backend.MODULE_NAME}.copy", [
                gast.Subscript(value=nodes.name(name), slice=nodes.copy(index), ctx=gast.Load())])
        self._emit_stmt(nodes.assign(saved, old), stmt, kind="nondiff", rule=None)
        write = nodes.assign(gast.Subscript(value=nodes.name(name), slice=nodes.copy(index),
                                            ctx=gast.Store()), nodes.copy(value))
        self._emit_stmt(write, stmt, kind="setitem", array=name, index=index, value=value,
                        saved=saved, generic=generic, container=container, shown=user)

    def _list_setitem(self, user, name, target, value_node, stmt) -> bool:
        """``xs[i] = v`` with a literal ``i`` on a list made here whose items are known and
        that no other name holds: a new version of ``xs`` with ``v`` at ``i`` (as ``d[k] = v``
        on a dict); False where that is not so (a list made outside the loop the write is
        in: each iteration would see the version from before the loop)."""
        fresh, _ = self.made_by.get(name, (False, None))
        key = static_value(target.slice)
        if isinstance(target.slice, gast.UnaryOp) and isinstance(target.slice.op, gast.USub) \
                and type(static_value(target.slice.operand)) is int:  # xs[-1]
            key = -static_value(target.slice.operand)
        items = list(self.aggregates[name].values()) if name in self.aggregates and name not in self.dicts \
            else None
        if not fresh or name in self.aliased or name in self.passed or name in self.escaped \
                or self._held_elsewhere(name) or self.list_depth.get(name) != len(self.loop_writes) \
                or items is None or type(key) is not int or not -len(items) <= key < len(items):
            return False
        items[key] = self._lower(value_node)
        display = gast.List(elts=[nodes.copy(a) for a in items], ctx=gast.Load())
        new = self._emit_aggregate(display, list(range(len(items))), items, stmt, target=user, effect=False)
        self.made_by[new.id] = (True, anno.get(stmt, "origin"))
        self._same_kind(new.id, name)
        return True

    def _nested_setitem(self, target, value_node, stmt):
        """``M[0][1] = v``, ``d["a"]["b"] = v``: Python writes into the list or dict ``M[0]``
        holds, which ``M`` goes on holding.  Where normalize knows which one that is (``M``
        made here item by item, a literal index: ``_held``), the write is one into it by that
        name (held by ``M``, it is written in place: ``_held_elsewhere``); then, where ``M`` is
        a list or dict made here that nothing else holds, ``M`` is made again of the same
        items (``M_2 = [_t1, _t2]``), so that reading it whole afterwards is reading a value
        made after the write (``M`` made before it, and read after, is refused by the sharing
        analysis).  Other forms are refused at the write."""
        outer = target.value
        source = nodes.to_source(outer).strip()
        value = self._lower(value_node)  # (Python evaluates the value first, then `M[0]`)
        inner = self._held(outer)
        root = outer.value
        if inner is None:
            raise errors.at(stmt, f"srcgrad writes into an item of `{source}` where that is a list or dict "
                            "this function made, read with a literal index or key (`M[0][1] = v`, "
                            "`d[\"a\"][\"b\"] = v`)", f"make it anew and put it back: `row = list({source})`, "
                            f"`row[...] = v`, `{source} = row` (or `{nodes.to_source(root).strip()}[i, j] = v` "
                            "for an array)")
        array = inner in self.arrays or inner in self.field_arrays  # (refused by the write into it, below)
        if not array and inner not in self.runtime_lists and not (
                self._written_as_runtime_list(inner) or self._written_as_runtime_mapping(inner)):
            where = self.passed.get(inner) or self.escaped.get(inner)
            raise errors.at(stmt, f"cannot write into `{source}` here: " + (
                f"it was passed on or stored at {where.where} (`{where.text.strip()}`), where it may be kept"
                if where else "it is not a list or dict this function made") + ", and srcgrad follows "
                "the items of a list or dict by the names that hold it only",
                f"make `{source}` anew and put it back, before it is shared: `row = list({source})`, "
                f"`row[...] = v`, `{source} = row`")
        # (the names the write is lowered under: the source's spelling, for its messages)
        self.current[source] = inner
        written = f"{source}=" if isinstance(value, gast.Name) else None
        if written is not None:
            self.current[written] = value.id
        item = gast.Subscript(value=nodes.name(source), slice=target.slice, ctx=gast.Store())
        self._setitem(anno.inherit(item, target),
                      anno.inherit(nodes.name(written) if written else nodes.copy(value), value_node), stmt)
        new_inner = self.current.pop(source)
        self.current.pop(written, None)
        holder = self._held(root)
        if not isinstance(root, gast.Name) or holder is None:
            return
        self._made_again(root.id, holder, literal_key(outer.slice), inner, new_inner, stmt)

    def _made_again(self, user, name, key, old, new, stmt):
        """``user`` (holding ``name``, a list or dict made here) made again of the same items,
        ``new`` in the place of ``old`` at ``key``: a new version, for what reads it after a
        write into one of its items (``_nested_setitem``).  Nothing where ``name`` is not such a
        display, or where another name, container or call may hold it."""
        items = self.aggregates.get(name)
        fresh = self.made_by.get(name, (False, None))[0]
        if items is not None and type(key) is int and key < 0 and name not in self.dicts:
            key += len(items)  # (`M[-1][0] = v`)
        if items is None or name in self.tuples or name in self.records or not fresh or name in self.aliased \
                or name in self.passed or name in self.escaped or self._held_elsewhere(name) \
                or self.list_depth.get(name) != len(self.loop_writes) or key not in items \
                or not isinstance(items[key], gast.Name) or items[key].id != old:
            return
        atoms = [nodes.name(new) if k == key else a for k, a in items.items()]
        if name in self.dicts:
            display = gast.Dict(keys=[nodes.const(k) for k in items], values=[nodes.copy(a) for a in atoms])
        else:
            display = gast.List(elts=[nodes.copy(a) for a in atoms], ctx=gast.Load())
        made = self._emit_aggregate(display, list(items), atoms, stmt, target=user, effect=False)
        self.made_by[made.id] = (True, anno.get(stmt, "origin"))
        self._same_kind(made.id, name)

    def _check_augmented_entry(self, stmt):
        """``d[k] += v`` changes the array ``d[k]`` holds in place (NumPy), which srcgrad
        computes as ``d[k] = d[k] + v``: the same only if no other name holds that array.
        Known not to: a number, or an array the function made for this entry alone (a
        value of an expression, not a name of the user's)."""
        base = stmt.target.value
        name = self.current.get(base.id, base.id) if isinstance(base, gast.Name) else \
            self._held(base) if isinstance(base, gast.Subscript) else None  # (`M[0][1] += v`: `M[0]`'s)
        user = base.id if isinstance(base, gast.Name) else nodes.to_source(base).strip()
        if name in self.dicts:
            key = static_value(stmt.target.slice)
            entry = self.entries.get(name, {}).get(key) if key is not UNKNOWN else \
                self.entries.get(name, {}).get(("name", self.current.get(stmt.target.slice.id, stmt.target.slice.id))) \
                if isinstance(stmt.target.slice, gast.Name) else None
            if name in self.read_dicts:
                entry = None  # (read since: `y = d[k]` may hold the entry's array)
            if key is not UNKNOWN and isinstance(self.aggregates.get(name, {}).get(key), gast.Constant):
                return  # `stats = {'loss': 0.0}`: a number is rebound by `+=`
        elif name in self.own_lists or name in self.containers:  # `xs[i] += v`: the same for a list's item
            key = static_value(stmt.target.slice)
            items = self.aggregates.get(name, {}) if name not in self.dicts else {}
            atom = items.get(key % len(items)) if type(key) is int and items and -len(items) <= key < len(items) \
                else None
            entry = atom.id if isinstance(atom, gast.Name) and name not in self.read_dicts else None
            if isinstance(atom, gast.Constant):
                return
        elif name in self.runtime_lists:  # (`parts = np.split(x, 3)`: its items may be views of `x`)
            entry = None
        else:
            return
        held = entry is not None and self.held_in[entry] > 1  # (an item of another list too: `ys = list(xs)`)
        if entry is not None and (entry in self.scalars or entry.startswith("_") and entry not in self.aliased
                                  and not held and self.made_by.get(entry, (False, None))[0]):
            return
        op = op_symbol(stmt.op)
        if entry is None and all(isinstance(n, (gast.Name, gast.Constant, gast.BinOp, gast.UnaryOp, gast.operator,
                                                 gast.unaryop, gast.expr_context))
                                 for n in nodes.walk(stmt.target.slice)):  # (read twice: arithmetic only)
            # What the entry holds is known only when the code runs (a dict carried by a loop, whose
            # `'loss'` began as 0.0): a number is rebound, an array is refused then.
            origin = anno.get(stmt, "origin")
            check = nodes.call("rt.not_in_place", [self._lower(base), self._lower(stmt.target.slice),
                                                   nodes.const(user), nodes.const(op),
                                                   nodes.const(origin.where if origin else "?")])
            self._emit(check, stmt, None, "_checked", False, kind="nondiff", rule=None, impure=True)
            return
        raise errors.at(stmt, f"`{user}[...] {op}= ...` changes the array in that entry in place, and "
                        "another name may hold the same array (the name it was stored from, another "
                        "entry, the caller)", f"write `{user}[...] = {user}[...] {op} ...` (a new array)")


def _copy_advice(user: str, kind) -> str:
    """How to write ``user`` as a new value of its kind (all three where it is not known)."""
    ways = {"array": f"`{user} = np.copy({user})`", "list": f"`{user} = list({user})`",
            "dict": f"`{user} = dict({user})`"}
    if kind in ways:
        return ways[kind]
    return f"{ways['dict']} for a dict, {ways['list']} for a list, {ways['array']} for an array"
