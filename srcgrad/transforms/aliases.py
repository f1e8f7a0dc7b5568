"""Aliases: a read through another name for an array becomes a read of the name
that holds its value now.

The core program computes an augmented assignment ``y += v`` as ``y_2 = y + v``
(a new array) and keeps a write ``y[i] = v`` in place.  Another name for the
same array (``a = y``, a helper's parameter bound by inlining: ``u = h``) or a
view of it (``w = y[0:2]``, ``y.T``) read after such a change would see, in the
generated code, the array as it was, or the change without its adjoint:
``analysis/sharing.py`` refuses that.  Where the compiler knows which array a
name holds, the program need not read that name at all:

* names joined by copies (``a = y``) are one array until one of them is bound
  again; after ``y_2 = y + v`` (an augmented assignment: the same array,
  changed in place) they are ``y_2``.  A read of any of them is a read of the
  name that holds the array's value now;
* a view NumPy always makes (``w = y[0:2]``, ``w = np.transpose(y)``; not
  ``y[idx]`` of an index array nor a ``reshape``, which copy where they must)
  read after a write into its base is made again there, from the base's
  present name (``w_2 = y[0:2]``), while neither its base nor its other
  arguments were bound again.

Both are the same array (or the same elements) in Python's semantics, so the
program means what it meant; ``analysis/sharing.py`` then checks the rewritten
program, and refuses what it still reads through another name (a write through
a view, an alias bound again in a loop).  What the rewrite decides is only which
of several names for one array a statement reads, so a wrong guess is a
refusal, never a wrong gradient (``_AUGMENTS`` says what that needs).

Requires: a :class:`~srcgrad.ir.Core` body and its ranks (arrays are
the names of a known rank above 0, and values of unknown rank written by index;
an augmented assignment changes only the first in place).
Guarantees: reads are renamed (statements, their ``bound``/``index``/``value``
annotations, ``array``; not ``augments``: see ``_AUGMENTS``), views are made again where read,
their ranks added to ``ranks``; one walk over the body (a loop's or branch's
body once).  Returns whether anything changed.

Before (an alias read after an augmented assignment)::

    v = x * 1.0
    a = v
    v += 2.0
    return np.sum(a * 3.0)

After ``normalize``::

    a = v
    v_2 = v + 2.0
    _t1 = a * 3.0

After::

    a = v
    v_2 = v + 2.0
    _t1 = v_2 * 3.0

Before (a view read after a write into its base)::

    v = x * 1.0
    w = v[0:2]
    v[0] = 3.0
    return np.sum(w)

After ``normalize``::

    v[0] = 3.0
    result = np.sum(w)

After::

    v[0] = 3.0
    w_2 = v[0:2]
    result = np.sum(w_2)
"""
from __future__ import annotations

import dataclasses
import itertools
import operator
import re

import gast
import numpy as np

from ..anno import Kind
from .. import anno, nodes
from ..rules import registry

# NumPy functions that return a view of an array argument whatever its layout (or the
# array itself), so that made again from the same arguments they give the same elements.
_ALWAYS_VIEWS = (operator.getitem, np.transpose, np.swapaxes, np.moveaxis, np.expand_dims, np.squeeze,
                 np.broadcast_to, np.flip, np.fliplr, np.flipud, np.rot90, np.diagonal, np.real, np.imag,
                 np.atleast_1d, np.atleast_2d, np.atleast_3d, np.asarray, np.asanyarray,
                 np.lib.stride_tricks.sliding_window_view, np.lib.stride_tricks.as_strided)
# String annotations that name an array a statement reads or writes (renamed with it).
_NAMED = ("array", "source")
# ... and one left as written: ``augments`` names the user's array that ``y += v`` changed, which
# analysis/sharing.py takes as no longer read after it (SSA: the user's later reads read ``y_2``).
# The statement may now read another name for that array (``y_2 = a + v``), one still read after
# it (in the next iteration of a loop): that name then shares the array, and is refused there.
_AUGMENTS = "augments"
# Annotations that are facts about the user's code, not names the statement reads.
_FACTS = ("origin", "group", "resolved", "rule", "kind", "callee", "constructs", "first_defined", "why",
          "saved", "impure", "maybe_object", "static", "operator", "manager", "flags", "carried",
          "shown")


def transform(core, ranks, keep=()) -> bool:
    """Rename reads of aliases and stale views in ``core.body`` (in place); see the module.
    Reads of the names in ``keep`` (those ``hooks=``/``intermediates=`` ask the adjoint of)
    are left as written."""
    if not any(anno.get(s, "kind") == Kind.SETITEM or anno.has(s, "augments")
               for s in nodes.statements(core.body)):
        return False  # (nothing changes an array in place: every name holds its value)
    walk = _Walk(core, ranks, set(keep))
    core.body[:] = walk.block(core.body)
    return walk.changed


@dataclasses.dataclass(frozen=True)
class _View:
    """How a view was made: its statement (a template), its base and the names it reads."""

    stmt: gast.stmt
    base: str
    reads: tuple
    of: int  # the class of the base


class _Walk:
    """One walk in program order.  ``state`` gives each tracked name its array (a class
    id) and whether it holds that array's present value in the generated code; a
    branch's changes are logged, so the other branch starts from the same state and
    the two are joined after."""

    def __init__(self, core, ranks, keep):
        self.core, self.ranks, self.keep = core, ranks, keep
        self.state = {}      # name -> (class, current)
        self.members = {}    # class -> names in it
        self.current = {}    # class -> those of them that hold its present value
        self.first = {}      # class -> the first bound of those (the name read), when known
        self.views = {}      # class -> _View, for a class made as a view
        self.views_of = {}   # class -> the view classes made from it
        self.fresh = {}      # class -> those of them a name may hold as it is (so each write
        #                      visits a view once, not every view made so far)
        self.readers = {}    # name -> the view classes whose statement reads it
        self.order = {}      # name -> when it was bound (of the names holding the value, the first is read)
        self.log = []        # (name, previous entry)
        self.classes = itertools.count()
        self.clock = itertools.count()
        self.view_rules = {registry.lookup(fn) for fn in _ALWAYS_VIEWS} - {None}
        self.view_rules_getitem = registry.lookup(operator.getitem)
        self.as_given = {registry.lookup(fn) for fn in (np.asarray, np.asanyarray)} - {None}
        self.written = {anno.get(s, "array") for s in nodes.statements(core.body)
                        if anno.get(s, "kind") == Kind.SETITEM}  # (arrays, whatever their rank)
        self.changed = False

    # ---- state ------------------------------------------------------------
    def _set(self, name, entry):
        old = self.state.get(name)
        if old != entry:
            self.log.append((name, old))
            self._put(name, old, entry)

    def _put(self, name, old, entry):
        if old is not None:
            self.members[old[0]].discard(name)
            self.current[old[0]].discard(name)
        if entry is None:
            self.state.pop(name, None)
        else:
            self.state[name] = entry
            self.members.setdefault(entry[0], set()).add(name)
            current = self.current.setdefault(entry[0], set())
            if entry[1]:
                current.add(name)
                if entry[0] in self.views:
                    self.fresh.setdefault(self.views[entry[0]].of, set()).add(entry[0])

    def _undo(self, mark):
        while len(self.log) > mark:
            name, old = self.log.pop()
            self._put(name, self.state.get(name), old)

    def _array(self, name) -> bool:
        rank = self.ranks.get(name)
        return type(rank) is int and rank > 0

    def _maybe_array(self, name) -> bool:
        """An array, or a value of unknown rank written into by index (an array, made by a
        call not inlined): a copy of it is the same object, whatever it is."""
        return self._array(name) or self.ranks.get(name) is None and name in self.written

    def _track(self, name):
        """The entry of ``name``, made (a class of its own) for an array not yet tracked."""
        if name not in self.state and self._maybe_array(name):
            self._set(name, (next(self.classes), True))
            self.order[name] = next(self.clock)
        return self.state.get(name)

    def _bound(self, name):
        """``name`` is bound to another value: it leaves its class, and views made from
        it (or reading it) can no longer be made again."""
        self._set(name, None)
        for view in self.readers.get(name, ()):
            self._forget(view)

    def _forget(self, cls):
        for name in list(self.members.get(cls, ())):
            self._set(name, None)
        for view in self.views_of.get(cls, ()):
            self._forget(view)

    def _changed_in_place(self, cls):
        """The array of ``cls`` changed: its views hold old elements in the generated code."""
        for view in sorted(self.fresh.pop(cls, ())):
            for name in sorted(self.current.get(view, ())):
                self._set(name, (view, False))
            self._changed_in_place(view)

    def _holder(self, cls):
        """The name that holds the present value of the array of ``cls`` (the first bound
        of those that do: the user's own name rather than a copy of it)."""
        current = self.current.get(cls)
        if not current:
            return None
        if self.first.get(cls) not in current:  # (names bound later come after it: kept till it goes)
            self.first[cls] = min(current, key=lambda n: self.order.get(n, -1))
        return self.first[cls]

    # ---- blocks -----------------------------------------------------------
    def block(self, stmts) -> list:
        out = []
        for stmt in stmts:
            if isinstance(stmt, gast.If):
                self._rename(stmt, out, tests=[stmt.test])
                mark = len(self.log)
                stmt.body = self.block(stmt.body)

                def orelse(stmt=stmt):
                    stmt.orelse = self.block(stmt.orelse)
                self._join(mark, orelse)
            elif isinstance(stmt, (gast.For, gast.While)):
                if isinstance(stmt, gast.For):
                    self._rename(stmt, out, tests=[stmt.iter])
                self._enter_loop(stmt)
                if isinstance(stmt, gast.While):
                    self._rename(stmt, out, tests=[stmt.test])
                mark = len(self.log)
                stmt.body = self.block(stmt.body)
                self._join(mark, lambda: None)
            elif isinstance(stmt, gast.FunctionDef):
                self._bound(stmt.name)  # (its body reads names when called: left as written)
            else:
                self._rename(stmt, out)
                self._effect(stmt)
            out.append(stmt)
        return out

    def _join(self, mark, other):
        """Join the state after the statements walked since ``mark`` with the state after
        ``other`` run from the same start: a name keeps what both give it."""
        first = {name for name, _ in self.log[mark:]}
        after_first = {name: self.state.get(name) for name in first}
        self._undo(mark)
        other()
        before = {}
        for name, old in self.log[mark:]:
            before.setdefault(name, old)
        for name in sorted(first | set(before)):
            a = after_first[name] if name in after_first else before[name]
            b = self.state.get(name)
            if a != b:
                self._set(name, (a[0], False) if a is not None and b is not None and a[0] == b[0] else None)

    def _enter_loop(self, loop):
        """What holds at the loop's top in every iteration: names the body binds leave
        their classes (with every name of those classes: the body may change the array
        through them), views of arrays the body writes into are old."""
        bound, written = set(nodes.assigned_names(loop)), set()
        for stmt in nodes.statements(loop.body):
            bound.update(nodes.assigned_names(stmt))
            if isinstance(stmt, gast.FunctionDef):
                bound.add(stmt.name)
            if anno.get(stmt, "kind") == Kind.SETITEM:
                written.add(anno.get(stmt, "array"))
            if anno.has(stmt, "augments"):
                written.add(anno.get(stmt, "augments"))
        for name in sorted(bound):
            entry = self.state.get(name)
            if entry is not None:
                self._forget(entry[0])
            self._bound(name)
        for name in sorted(written):
            entry = self.state.get(name)
            if entry is not None:
                self._changed_in_place(entry[0])

    # ---- statements -------------------------------------------------------
    def _effect(self, stmt):
        kind = anno.get(stmt, "kind")
        targets = nodes.assigned_names(stmt)
        if kind == Kind.COPY and len(targets) == 1 and isinstance(stmt.value, gast.Name):
            source = self._track(stmt.value.id)
            self._bound(targets[0])
            if source is not None and (self._array(targets[0]) or self.ranks.get(targets[0]) is None):
                self._set(targets[0], source)
                self.order[targets[0]] = next(self.clock)
            return
        augmented = anno.get(stmt, "augments")
        if augmented is not None and len(targets) == 1:
            entry = self._track(augmented)
            self._bound(targets[0])
            if entry is not None and self._array(augmented) and self._array(targets[0]):
                # an array: NumPy changed it in place, and `targets[0]` holds it now
                for name in sorted(self.current[entry[0]]):
                    self._set(name, (entry[0], False))
                self._set(targets[0], (entry[0], True))
                self.order[targets[0]] = next(self.clock)
                self._changed_in_place(entry[0])
            elif entry is not None:  # (changed in place, or a new number: the names are left as written)
                self._forget(entry[0])
            return
        if kind == Kind.SETITEM:
            entry = self.state.get(anno.get(stmt, "array"))
            if entry is not None:
                self._changed_in_place(entry[0])
            return
        if kind == Kind.SETATTR:  # (`v.shape = s` changes what `v[0]` is: its views are not made again)
            for name in nodes.loaded_names(stmt.targets[0]):
                entry = self.state.get(name)
                if entry is not None:
                    for view in self.views_of.get(entry[0], ()):
                        self._forget(view)
        for name in targets:
            self._bound(name)
        if kind == Kind.OP and len(targets) == 1 and self._view(stmt):
            base = next(iter(anno.get(stmt, "bound").values())).id
            entry = self._track(base)
            cls = next(self.classes)
            self.views[cls] = _View(stmt, base, tuple(dict.fromkeys(nodes.loaded_names(stmt.value))), entry[0])
            self.views_of.setdefault(entry[0], []).append(cls)
            for name in self.views[cls].reads:
                self.readers.setdefault(name, []).append(cls)
            self._set(targets[0], (cls, True))
            self.order[targets[0]] = next(self.clock)

    def _view(self, stmt) -> bool:
        """``w = y[0:2]``, ``np.transpose(y)``: a view NumPy always makes of an array (not
        ``y[idx]`` of an index array, nor a ``reshape``, which copy where they must: a copy
        keeps the old elements), made again from the same arguments where it is read
        after a write into ``y``."""
        arguments, rule = list((anno.get(stmt, "bound") or {}).values()), anno.get(stmt, "rule")
        if rule not in self.view_rules or anno.get(stmt, "impure") or not arguments \
                or not isinstance(stmt.targets[0], gast.Name) \
                or not isinstance(arguments[0], gast.Name) or not self._array(arguments[0].id):
            return False
        target = self.ranks.get(stmt.targets[0].id)
        if not (type(target) is int and target > 0 or target is None and rule is not self.view_rules_getitem):
            return False  # (`y[i]` may be an element: a number, not a view)
        if anno.get(stmt, "rule") in self.as_given:  # (`np.asarray(y, dtype)` may convert: a copy)
            return all(isinstance(a, gast.Constant) and a.value is None for a in arguments[1:])
        flags = anno.get(stmt, "rule") is not self.view_rules_getitem  # (`y[True]` is an index array)
        return all(_basic(n, self.ranks, flags) for a in arguments[1:] for n in nodes.walk(a))

    def _rename(self, stmt, out, tests=None):
        """Rename the stale names ``stmt`` reads (making views again before it, in ``out``)."""
        read = nodes.loaded_names(tests[0]) if tests else _reads(stmt)
        mapping = {}
        for name in dict.fromkeys(read):
            entry = self.state.get(name)
            if entry is None or name in self.keep:
                continue
            holder = self._holder(entry[0]) or self._again(entry[0], stmt, out)
            if holder is not None and holder != name:
                mapping[name] = holder
        if not mapping:
            return
        if tests:
            for node in nodes.walk(tests[0]):
                if type(node) is gast.Name and node.id in mapping:
                    node.id = mapping[node.id]
            self.changed = True
            return
        if not _renamed(stmt, mapping):
            return
        if anno.get(stmt, "kind") == Kind.RETURN:
            self.core.result = nodes.copy(stmt.value)
        self.changed = True

    def _again(self, cls, stmt, out):
        """Make the view of class ``cls`` again before ``stmt`` (in ``out``): its name."""
        view = self.views.get(cls)
        if view is None:
            return None
        entry = self.state.get(view.base)
        base = view.base if entry is None or entry[1] else \
            self._holder(entry[0]) or self._again(entry[0], stmt, out)  # (a view of a view: made again too)
        if base is None:
            return None
        template = view.stmt.targets[0].id
        name = self.core.fresh(re.sub(r"_\d+$", "", template) if not template.startswith("_") else None)
        again = nodes.copy(view.stmt)
        again.targets[0].id = name
        table = getattr(again, anno.KEY)
        table["bound"] = {k: nodes.copy(v) for k, v in table["bound"].items()}
        for key in ("origin", "group"):
            if anno.has(stmt, key):
                table[key] = anno.get(stmt, key)
        _rename_nodes([again, table["bound"]], {view.base: base})
        out.append(again)
        self.ranks[name] = self.ranks.get(template)
        self._set(name, (cls, True))
        self.order[name] = next(self.clock)
        return name


def _basic(node, ranks, flags=False) -> bool:
    """A part of a basic index or a static argument: a number, a slice, a tuple, a name
    of a number (not an index array, nor a list: NumPy copies by those)."""
    if isinstance(node, gast.Constant):
        return node.value is None or node.value is Ellipsis or type(node.value) in (int, str) \
            or flags and type(node.value) is bool
    if isinstance(node, gast.Name):
        return ranks.get(node.id) == 0
    return isinstance(node, (gast.Slice, gast.Tuple, gast.UnaryOp, gast.USub, gast.UAdd, gast.Load))


def _reads(stmt) -> list:
    read = nodes.loaded_names(stmt)
    for key, value in getattr(stmt, anno.KEY, {}).items():
        if (key in _NAMED or key == _AUGMENTS) and isinstance(value, str):
            read.append(value)
    return read


def _renamed(stmt, mapping) -> bool:
    """Rename the names of ``mapping`` in ``stmt`` and in the annotations that name arrays;
    False (nothing renamed) where an annotation this pass does not know holds one."""
    table = getattr(stmt, anno.KEY, {})
    for key, value in table.items():
        if key in _FACTS or key == _AUGMENTS:
            continue
        names = [value] if isinstance(value, str) else value if isinstance(value, (list, tuple, set)) \
            else []
        if key not in _NAMED and any(isinstance(n, str) and n in mapping for n in names):
            return False  # (a name kept in an annotation this pass does not know: left as written)
    for key, value in list(table.items()):
        if key in _NAMED and isinstance(value, str) and value in mapping:
            table[key] = mapping[value]
        elif key not in _FACTS and key != _AUGMENTS:
            _rename_nodes(value, mapping)
    _rename_nodes(stmt, mapping)
    return True


def _rename_nodes(value, mapping):
    """Rename, in place, the names of ``mapping`` in ``value``'s nodes (a node, or a list,
    tuple or dict of them: an annotation)."""
    if isinstance(value, gast.AST):
        for node in nodes.walk(value):
            if type(node) is gast.Name and node.id in mapping:
                node.id = mapping[node.id]
    elif isinstance(value, (list, tuple)):
        for v in value:
            _rename_nodes(v, mapping)
    elif isinstance(value, dict):
        for v in value.values():
            _rename_nodes(v, mapping)
