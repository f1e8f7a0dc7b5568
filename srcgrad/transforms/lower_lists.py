"""Normalize (``anf``): lists made here and changed in place.

``xs.append(h)``, ``xs.extend([a, b])`` and ``xs.pop(i)`` on a list made here change it in
place (the backward sweep pops ``h``'s adjoint off the list's, puts a popped item back);
``xs.reverse()``, ``xs.insert(i, v)`` and ``xs.sort()`` make a new version of ``xs``
(``_reordered``); from then on its items are known when the code runs only (``lists``), and
``xs[i]`` reads one (``_item``).  A list or dict a loop's body changes is such a list from
the loop on (``_changed_in``); one written into item by item, or held by another container,
is written as written (``_written_as_runtime_list``, ``_written_as_runtime_mapping``).

Relies on the walk (``_lower``, ``_emit``, ``_emit_stmt``), on ``_call_arguments``, ``_apply``
(``lower_apply``), ``_emit_aggregate`` and ``_aggregate_element`` (``lower_aggregates``), on
``_escape`` and ``_held_elsewhere`` (``lower_kinds``), and on the walk's state (``aggregates``,
``made_by``, ``aliased``, ``passed``, ``held_in``, ``copied_from``, the sets of kinds:
``lower_kinds``).
"""
from __future__ import annotations

import gast

from .. import anno, errors, nodes, runtime
from ..templates import UNKNOWN, static_value

# Methods that change a list or dict in place.
CHANGES = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault", "popitem",
           "sort", "reverse"}


class _Lists:
    def _held(self, node):
        """The name of the value ``node`` (a method's receiver) denotes, when known at
        compile time: a local name, or an item with a literal key of a tuple, list or
        dict made here (``ys[0]``, ``d['a']``, ``ys[0][1]``); else None."""
        if isinstance(node, gast.Name) and not anno.has(node, "resolved"):
            return self.current.get(node.id, node.id)
        if isinstance(node, gast.Subscript) and literal_key(node.slice) is not None:
            base = self._held(node.value)
            if base is not None:
                element = self._aggregate_element(nodes.name(base), nodes.const(literal_key(node.slice)))
                if isinstance(element, gast.Name):
                    return element.id
        return None

    def _own_list(self, name):
        """``name`` holds a new list of this function's own, its items known when it runs
        only: it may grow and shrink (append, pop), as a list made by ``[]`` does."""
        self.arrays.discard(name)
        self.runtime_lists.discard(name)  # (followed as a list of its own: pops and appends mirrored)
        self.lists.add(name)
        self.own_lists.add(name)
        self.list_depth[name] = len(self.loop_writes)

    def _extend(self, user, node, name, **emit):
        """``xs.extend(items)`` with items known when compiling (``[a, b]``, a tuple made
        here): ``xs.append(a)``, ``xs.append(b)``."""
        items = self._lower(node.args[0]) if len(node.args) == 1 and not node.keywords else None
        if not isinstance(items, gast.Name) or items.id not in self.aggregates or items.id in self.dicts:
            raise errors.at(node, f"`{user}.extend(...)` is supported with items known when compiling",
                            f"extend with a list or tuple display (`{user}.extend([a, b])`), or append "
                            "items one by one")
        for value in list(self.aggregates[items.id].values()):
            self._append(user, node, name=name, value=value, effect=True)
        return None if emit.get("effect") else nodes.const(None)

    def _append(self, user, node, name=None, value=None, **emit):
        """``xs.append(h)`` on a list made here: the list grows in place; the backward
        sweep pops ``h``'s adjoint off the list's adjoint.  ``name``: the list's
        current name, when ``user`` is an item of a container (``ys[0].append(h)``);
        ``value``: the atom appended, if lowered already (by ``extend``)."""
        name = name or self.current.get(user, user)
        fresh, origin = self.made_by.get(name, (False, None))
        if not fresh or len(node.args) != 1 or node.keywords:
            raise errors.at(node, f"cannot append to `{user}` here",
                            f"append one value to a list made in this function (`{user} = []`)")
        if name in self.aliased or name in self.passed:
            where = self.passed.get(name)
            seen = f"it was passed to a function at {where.where} (`{where.text.strip()}`), which may " \
                "keep it" if where is not None else "another name refers to the same list (`ys = xs`)"
            raise errors.at(node, f"cannot append to `{user}` here: {seen}, and srcgrad follows the "
                            "items of a list by its own name only",
                            "append all items before the list is shared, and use one name for it")
        value = self._lower(node.args[0]) if value is None else value
        self._escape([value], node)
        if isinstance(value, gast.Name):
            self.held_in[value.id] += 1
        self.aggregates.pop(name, None)  # its length is known only at run time now
        self.lists.add(name)
        call = nodes.call(gast.Attribute(value=nodes.name(name), attr="append", ctx=gast.Load()),
                          [nodes.copy(value)])
        self._emit_stmt(gast.Expr(value=call), node, kind="append", list=name, value=value)
        return None if emit.get("effect") else nodes.const(None)

    def _pop(self, user, node, name=None, **emit):
        """``a = xs.pop(i)`` on a list made here: the list shrinks in place; the backward
        sweep puts ``a`` back (``rt.unpop``) and its adjoint into the list's adjoint."""
        name = name or self.current.get(user, user)
        if name not in self.own_lists or name in self.aliased or len(node.args) > 1 or node.keywords:
            raise errors.at(node, f"cannot pop from `{user}` here",
                            f"pop from a list made in this function (`{user} = [...]`, grown with "
                            "append), that no other name refers to, with at most an index (`.pop(i)`)")
        index = self._lower(node.args[0]) if node.args else nodes.const(-1)
        elements = self.aggregates.get(name)
        key = static_value(index)
        if elements is not None and self.block is self.core.body and isinstance(key, int) \
                and -len(elements) <= key < len(elements):
            # Outside loops and branches the items stay known: `xs[0]` is still an atom.
            items = list(elements.values())
            del items[key]
            self.aggregates[name] = dict(enumerate(items))
        else:
            self.aggregates.pop(name, None)
            self.lists.add(name)
        call = nodes.call(gast.Attribute(value=nodes.name(name), attr="pop", ctx=gast.Load()),
                          [nodes.copy(index)] if node.args else [])
        emit["effect"], effect = False, emit["effect"]  # the value is put back in the backward sweep
        result = self._emit(call, kind="pop", list=name, index=index, impure=True, **emit)
        return None if effect else result

    def _reordered(self, user, name, node, **emit):
        """``xs.reverse()``, ``xs.insert(i, v)`` and ``xs.sort(key=..., reverse=...)`` on a list
        made here that no other name holds: a new version of ``xs``, as for any rebinding (in
        a loop, a carried name), whose rule sends each item's adjoint back to where it came
        from: the items rebuilt where they are known (``reverse``, ``insert`` at a literal
        index), else ``xs = rt.reversed_list(xs)``, ``rt.inserted(xs, i, v)``, ``sorted(xs, ...)``."""
        method = node.func.attr
        fresh = self.made_by.get(name, (False, None))[0] or name in self.own_lists
        if not fresh or name in self.params or name in self.aliased or name in self.copied_from \
                or name in self.passed or name in self.held_in or not emit.get("effect"):
            where = self.passed.get(name)
            seen = f"it was passed to a function at {where.where} (`{where.text.strip()}`), which may keep " \
                "it" if where is not None else "its value (None) is used" if not emit.get("effect") \
                else "another name may refer to the same list (`ys = xs`, `[xs]`)" \
                if fresh and name not in self.params else "the list was not made in this function"
            raise errors.at(node, f"cannot {method} `{user}` in place here: {seen}, and srcgrad follows the "
                            "items of a list by its own name only",
                            f"make a new list and use that one name: `{user} = list({user})` first, or "
                            + {"reverse": f"`{user} = {user}[::-1]`", "sort": f"`{user} = sorted({user})`",
                               "insert": f"`{user} = {user}[:i] + [v] + {user}[i:]`"}[method])
        args, kwargs = self._call_arguments(node)
        if method == "sort":
            if args:
                raise errors.at(node, "`list.sort` takes its arguments by keyword", "write `xs.sort(key=f)`")
            func = anno.set(nodes.name("sorted"), "resolved", sorted)
            value = self._apply(sorted, None, [nodes.name(name)], kwargs, node, func_node=func, target=user,
                                target_hint=None, origin_node=node, effect=False)
            self.runtime_lists.add(value.id)
            self.runtime_sequences.add(value.id)
            return None
        if kwargs or len(args) != (2 if method == "insert" else 0) or any(isinstance(a, gast.Starred) for a in args):
            raise errors.at(node, f"`{user}.{method}(...)` is given arguments it does not take",
                            "write `xs.reverse()` or `xs.insert(i, v)`")
        items = self.aggregates.get(name)
        at = static_value(args[0]) if args else None
        if items is not None and (method == "reverse" or type(at) is int):
            items = list(items.values())
            if method == "reverse":
                items.reverse()
            else:
                items.insert(at, args[1])
            display = gast.List(elts=[nodes.copy(a) for a in items], ctx=gast.Load())
            self._emit_aggregate(display, list(range(len(items))), items, node, target=user, effect=False)
            return None
        helper = runtime.reversed_list if method == "reverse" else runtime.inserted
        value = self._apply(helper, None, [nodes.name(name)] + args, {}, node,
                            func_node=nodes.dotted(f"rt.{helper.__name__}"), target=user, target_hint=None,
                            origin_node=node, effect=False)
        return None

    def _item(self, base, index, node, **emit):
        """``h = xs[i]`` on a list whose items are known at run time only (grown with
        append, changed by pop in a loop or branch): one integer index, the item as it
        is; the backward sweep adds ``h``'s adjoint to the list's adjoint at ``i``."""
        key = static_value(index)
        if isinstance(index, (gast.Tuple, gast.List)) \
                or key is not UNKNOWN and not isinstance(key, (int, slice)):
            raise errors.at(node, "reading a list whose items are known when the code runs only (grown "
                            "with append or by a comprehension, changed by pop in a loop or branch) by "
                            "anything but one integer index or a slice is not supported",
                            f"stack it first (`np.stack({base.id})[...]`), or read items one by one")
        value = gast.Subscript(value=nodes.copy(base), slice=nodes.copy(index), ctx=gast.Load())
        result = self._emit(value, kind="item", list=base.id, index=index, **emit)
        if isinstance(index, gast.Slice) and isinstance(result, gast.Name):
            self.runtime_lists.add(result.id)  # (`xs[1:]`: a new list of the same items)
            self.runtime_sequences.add(result.id)
            self.made_by[result.id] = (True, anno.get(node, "origin"))
        return result

    def _changed_in(self, loop):
        """Lists and dicts made here that ``loop``'s body changes in place (append, pop,
        through another's item too: ``ys[0].append(h)``): from the loop on, what they
        hold is known at run time only, also to reads in the body before the change."""
        changed = {}
        for node in nodes.walk(loop):
            if isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute) \
                    and node.func.attr in CHANGES:
                held = self._held(node.func.value)
                if held is not None:
                    changed.setdefault(held, node)
                if held is not None and held in self.aggregates:
                    del self.aggregates[held]
                    self.lists.add(held)
            elif isinstance(node, (gast.Assign, gast.AugAssign)):
                # `hs[t] = v` into a list made before the loop: its items are known when it runs
                # only, from the loop on (the body's reads, earlier in it, see later iterations'
                # writes): an element write done as written (`_setitem`).
                for target in node.targets if isinstance(node, gast.Assign) else [node.target]:
                    if isinstance(target, gast.Subscript):
                        held = self._held(target.value)
                        if held is not None:  # (not a change of its length: `for h in hs` reads each)
                            self._written_as_runtime_list(held)
                        if held is not None and (isinstance(target.value, gast.Subscript)
                                                 or self._held_elsewhere(held)):
                            # (`d["a"]["b"] = v`, or into a dict another holds: in place, from here on)
                            self._written_as_runtime_mapping(held)
        return changed

    def _written_as_runtime_list(self, name) -> bool:
        """Whether an element write into the list ``name`` (made here: its items known,
        ``[None] * 3``, ``[0.0, 0.0]``) can be done as written, its items then known only
        when the code runs: its items are forgotten, and those of the lists it is a copy of
        (`b = a`), so that each read is one the sharing analysis sees, which refuses the write
        where another name for the list is read after it.  Not where a call may keep the list."""
        if name not in self.containers or name in self.dicts or name in self.tuples \
                or name in self.passed or name in self.escaped:
            return False
        source = self.copied_from.get(name)
        while source is not None:  # `b = a` of `a = [w, w]`: `a[0]` is read when it runs too,
            self.aggregates.pop(source, None)  # so that the sharing analysis sees it read after
            self.runtime_lists.add(source)
            if source not in self.dicts and source not in self.runtime_mappings:
                self.runtime_sequences.add(source)
            source = self.copied_from.get(source)
        self.aggregates.pop(name, None)
        self.containers.discard(name)
        self.own_lists.discard(name)
        self.runtime_lists.add(name)
        if name not in self.runtime_mappings:  # (`e = d` of a dict: written in place as a dict)
            self.runtime_sequences.add(name)
        return True

    def _written_as_runtime_mapping(self, name) -> bool:
        """Whether an entry write into the dict ``name`` (made here, followed entry by entry as
        new versions, ``rt.with_item``) can be done as written, in place, its entries then known
        only when the code runs (as ``_written_as_runtime_list`` for a list): where another
        container or a field holds it, which sees the write.  Not where a call may keep it."""
        if name not in self.dicts or name in self.passed or name in self.escaped:
            return False
        for known in (self.aggregates, self.known_keys, self.entries):
            known.pop(name, None)
        self.dicts.discard(name)
        self.containers.discard(name)
        self.runtime_lists.add(name)
        self.runtime_mappings.add(name)
        return True


def literal_key(index):
    """The key a literal index or key spells (``0``, ``-1``, ``"a"``), else None."""
    if isinstance(index, gast.Constant):
        return index.value
    if isinstance(index, gast.UnaryOp) and isinstance(index.op, gast.USub) \
            and isinstance(index.operand, gast.Constant) and type(index.operand.value) is int:
        return -index.operand.value
    return None
