"""Normalize (``anf``): each statement of the user's function, in order.

``_statement`` dispatches on the statement's kind: an assignment to a name is its value
lowered under that name (single assignment: ``_store``), to a tuple of names an unpacking
(``lower_aggregates``), to an item or a field a write (``lower_writes``, ``lower_objects``);
``z += y`` is ``z = z + y`` (checked: NumPy's ``+=`` changes the array in place, see
``_check_augmented``); ``return``, ``del d[k]`` (``d.pop(k)``), an expression alone on a line
(``np.add.at(a, idx, v)`` a write into ``a``), ``raise``, ``with`` and a nested ``def`` here;
``if``, ``for`` and ``while`` in ``anf`` and ``lower_loops``.

Relies on the walk (``_lower``, ``_emit``, ``_emit_stmt``, ``_block``, ``_store``), on its
state (``current``, ``block``, ``made_by``, what it knows of kinds: ``lower_kinds``), and on
the jobs each statement hands on to.
"""
from __future__ import annotations

import gast
import numpy as np

from .. import anno, errors, nodes, runtime
from .lower_expressions import op_symbol


class _Statements:
    # Each kind of statement's method (`if`: `anf`'s; `for` and `while`: `lower_loops`').
    _STATEMENTS = {gast.Assign: "_assign", gast.AugAssign: "_augmented", gast.Return: "_return",
                   gast.Delete: "_delete", gast.Expr: "_expression_statement", gast.If: "_if",
                   gast.For: "_for", gast.While: "_while", gast.FunctionDef: "_nested_def",
                   gast.With: "_with", gast.Raise: "_raise"}

    def _statement(self, stmt):
        lower = self._STATEMENTS.get(type(stmt))
        if lower is not None:
            getattr(self, lower)(stmt)
        # (`pass`, and what validate lets through that runs as nothing here: nothing)

    def _assign(self, stmt):
        """``x = v``, ``a, b = v``, ``y[i] = v``, ``obj.name = v``."""
        target = stmt.targets[0]
        if isinstance(target, (gast.Tuple, gast.List)):
            self._unpack(target.elts, stmt.value, stmt)
        elif isinstance(target, gast.Subscript):
            self._setitem(target, stmt.value, stmt)
        elif isinstance(target, gast.Attribute):
            self._setattr(target, stmt.value, stmt)
        else:
            self._lower(stmt.value, target=target.id)

    def _augmented(self, stmt):
        """``target op= value``: ``target = target op value``, an item or a field written back."""
        if isinstance(stmt.target, gast.Attribute):
            # `self.acc += v` changes an array the field holds in place (`s = self.acc` sees it), which
            # srcgrad computes as a new array: refused when it runs where the field holds an array.
            obj, origin = self._lower(stmt.target.value), anno.get(stmt, "origin")
            check = nodes.call("rt.not_in_place", [nodes.copy(obj), nodes.const(stmt.target.attr),
                                                   nodes.const(nodes.to_source(stmt.target).strip()),
                                                   nodes.const(op_symbol(stmt.op)),
                                                   nodes.const(origin.where if origin else "?"), nodes.const(True)])
            self._emit(check, stmt, None, "_checked", False, kind="nondiff", rule=None, impure=True)
            read = nodes.copy(stmt.target)
            read.ctx = gast.Load()
            value = gast.BinOp(left=read, op=stmt.op, right=stmt.value)
            anno.inherit(value, stmt)
            self._setattr(stmt.target, value, stmt)
        elif isinstance(stmt.target, gast.Subscript):
            self._check_augmented_entry(stmt)
            read = nodes.copy(stmt.target)
            read.ctx = gast.Load()
            value = gast.BinOp(left=read, op=stmt.op, right=stmt.value)
            anno.inherit(value, stmt)
            self._setitem(stmt.target, value, stmt)
        elif isinstance(stmt.op, gast.Add) \
                and self.current.get(stmt.target.id, stmt.target.id) in self.own_lists:
            # `outs += [h]` on a list made here grows it in place, as `outs.extend([h])` does.
            grow = gast.Expr(value=nodes.call(gast.Attribute(value=nodes.name(stmt.target.id), attr="extend",
                                                             ctx=gast.Load()), [stmt.value]))
            anno.inherit(grow, stmt)
            anno.inherit(grow.value, stmt)
            self._statement(grow)
        else:
            self._augmented_name(stmt)

    def _augmented_name(self, stmt):
        """``s += v``: ``s = s + v``, a new version of ``s`` marked ``augments`` (NumPy's ``+=``
        changes an array in place: the sharing analysis checks who sees it)."""
        self._check_augmented(stmt)
        value = gast.BinOp(left=nodes.copy(stmt.target), op=stmt.op, right=stmt.value)
        anno.inherit(value, stmt)
        value.left.ctx = gast.Load()
        before = self.current.get(stmt.target.id, stmt.target.id)
        after = self._lower(value, target=stmt.target.id)
        if self.block and before not in self.scalars and before not in self.tuples \
                and isinstance(after, gast.Name):
            # NumPy changes the array in place: analysis/sharing.py refuses it where a
            # view or alias of it is read afterwards (they would see the change).
            anno.set(self.block[-1], "augments", before)
            # The same array as before (`_check_augmented`: one no other name holds), or
            # a new number: `m &= a; m |= b` writes into it again.
            self.made_by[after.id] = (True, self.made_by.get(before, (True, None))[1])

    def _return(self, stmt):
        """``return v`` (``return a, b``: several outputs), bound to ``result`` where not a name."""
        if isinstance(stmt.value, gast.Tuple):  # several outputs (or a loss and its aux)
            atom = nodes.tuple_([self._lower(e, target_hint="result" if not isinstance(e, gast.Name)
                                             else None) for e in stmt.value.elts])
        else:
            hint = "result" if not isinstance(stmt.value, gast.Name) else None
            atom = self._lower(stmt.value, target_hint=hint)
        self.core.result = atom
        self._emit_stmt(nodes.ret(nodes.copy(atom)), stmt, kind="return")

    def _delete(self, stmt):
        """``del d[k]`` is ``d.pop(k)`` on a dict or list made here."""
        target = stmt.targets[0]
        held = self._held(target.value)
        if held is None or held not in self.dicts | self.own_lists | self.containers:
            raise errors.at(stmt, f"srcgrad cannot `del` an entry of `{nodes.to_source(target.value).strip()}`: "
                            "only of a dict or list made in this function",
                            "build a new one without the entry (`d = {k: v for k, v in d.items() if k != key}`)")
        pop = anno.inherit(nodes.call(gast.Attribute(value=nodes.copy(target.value), attr="pop",
                                                     ctx=gast.Load()), [nodes.copy(target.slice)]), stmt)
        self._lower(pop, effect=True)

    def _expression_statement(self, stmt):
        """An expression alone on a line: run for its effect (a docstring: nothing)."""
        if isinstance(stmt.value, gast.Constant):
            return  # docstring
        added = _added_at(stmt.value)
        if added is not None:
            # `np.add.at(a, idx, v)`: `a[...] = rt.added_at(a, idx, v)`, a write into `a` in
            # place (what the sharing analysis follows and refuses as any write), of `a` with
            # the values added, repeated indices each adding
            target = anno.inherit(gast.Subscript(value=nodes.copy(added[0]), slice=gast.Constant(
                value=Ellipsis, kind=None), ctx=gast.Store()), stmt)
            value = anno.inherit(nodes.call("rt.added_at", [nodes.copy(a) for a in added]), stmt)
            anno.set(value.func, "resolved", runtime.added_at)
            self._setitem(target, value, stmt)
            return
        self._lower(stmt.value, effect=True)

    def _raise(self, stmt):
        """``raise``: runs in the forward sweep; nothing to differentiate."""
        exc, cause = (None if e is None else self._lower(e) for e in (stmt.exc, stmt.cause))
        self._emit_stmt(gast.Raise(exc=exc, cause=cause), stmt, kind="unknown")

    def _with(self, stmt):
        """``with m as v: body``: ``v = rt.enter(m)``, the body as if inline, then
        ``rt.leave(m)``, in the forward sweep (``reverse`` refuses a manager given, or
        giving, a value being differentiated)."""
        group, managers = self.group, []
        for item in stmt.items:
            manager = self._lower(item.context_expr)
            enter = nodes.call("rt.enter", [nodes.copy(manager)])
            target = item.optional_vars.id if item.optional_vars is not None else None
            self._emit(enter, item.context_expr, target, None, target is None, kind="unknown", manager=True)
            managers.append(manager)
        self._block(stmt.body)
        self.group = group
        for manager in reversed(managers):
            leave = nodes.call("rt.leave", [nodes.copy(manager)])
            self._emit(leave, stmt, None, None, True, kind="unknown", manager=True)

    def _nested_def(self, stmt):
        """``def g(...)`` inside: kept as it is (compiled on its own when called),
        with the outer names it reads renamed to their current versions."""
        inner = nodes.copy(stmt)
        own = set(parameters(inner.args)) | {
            n.id for n in nodes.walk(inner) if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)}
        captured, seen, shown = set(), {}, {}
        # Defaults (`def layer(h, w=w)`) are read here, in this function, when the `def`
        # runs: captures like any other, whatever the parameter they fill is named.
        outer = [d for d in inner.args.defaults + inner.args.kw_defaults if d is not None]
        outer_ids = {id(n) for d in outer for n in nodes.walk(d)}
        for node in nodes.walk(inner):
            if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Load) and node.id in self.current \
                    and (node.id not in own or id(node) in outer_ids):
                if id(node) not in outer_ids:  # (a default is read once, at the `def`: not when called)
                    seen[node.id] = self.current[node.id]
                shown[self.current[node.id]] = node.id
                node.id = self.current[node.id]
                captured.add(node.id)
        inner.name = self._store(stmt.name)
        self.closures[inner.name] = (stmt.name, seen, anno.get(stmt, "lambda", False))
        anno.set(inner, "group", self.group)
        anno.set(inner, "origin", anno.get(stmt, "origin"))
        anno.set(inner, "kind", "def")
        anno.set(inner, "captures", sorted(captured))
        anno.set(inner, "captured_as", shown)
        self.block.append(inner)

    def _check_augmented(self, stmt):
        """``s += v`` on an array changes it in place (NumPy); srcgrad computes
        ``s = s + v``, which is the same only if no other name sees ``s``."""
        if not isinstance(stmt.target, gast.Name):
            return
        user = stmt.target.id
        name = self.current.get(user, user)
        if name in self.tuples:
            return  # (immutable: `t += (h,)` binds a new tuple, as `t = t + (h,)` does)
        if name in self.containers:
            raise errors.at(stmt, f"`{user} {op_symbol(stmt.op)}= ...` on a list, tuple or dict is not "
                            "supported", f"append items one by one (`{user}.append(v)`)")
        if name in self.scalars:
            return
        fresh, origin = self.made_by.get(name, (False, None))
        # (another name for a new array made here, read after the write, is refused by the
        # sharing analysis: `augments`, below)
        if (not fresh or name in self.escaped) and name not in self.runtime_lists:
            where = self._shared_at(name) or (f" (made at {origin.where}: `{origin.text.strip()}`)" if origin
                                               else " (it is an argument: the caller's array)"
                                               if name in self.params else "")
            op = op_symbol(stmt.op)
            advice = f"write `{user} = {user} {op} ...` (a new array)"
            viewed = errors.without_comment(origin.text).split("=", 1)[1].strip() if origin and "=" in origin.text else ""
            index = viewed[viewed.find("[") + 1:]
            if "[" in viewed and not viewed.startswith(("[", "(")) and any(c in index for c in (":", "None", "...")):
                # `v = a[1:]`, a view: maybe meant to change `a` (not `a[[0, 2]]`, a copy)
                advice += f", or, to change the array it views too, write into that by index (`{viewed} {op}= ...`)"
            raise errors.at(stmt, f"`{user} {op}= ...` changes `{user}` in place if it "
                            f"is an array, and `{user}` may share memory with another name{where}", advice)


def _added_at(call):
    """``(a, index, values)`` of a call ``np.add.at(a, index, values)`` of a name, else None."""
    if isinstance(call, gast.Call) and len(call.args) == 3 and not call.keywords \
            and not any(isinstance(a, gast.Starred) for a in call.args) and isinstance(call.args[0], gast.Name) \
            and anno.get(call.func, "resolved", None) == np.add.at:
        return tuple(call.args)
    return None


def parameters(args: gast.arguments) -> list:
    """Parameter names in signature order; ``*args`` is one parameter (a tuple) and
    ``**kwargs`` one (a dict), as :meth:`inspect.Signature.bind` gives them."""
    names = args.posonlyargs + args.args + [args.vararg] + args.kwonlyargs + [args.kwarg]
    return [a.id for a in names if a is not None]
