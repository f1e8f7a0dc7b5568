"""Normalize (``anf``): which call is what.

``_call`` sorts a call by its callee: ``super().name(...)`` and the classes whose instances
the walk follows field by field (``lower_objects``); a function or class resolved when
compiling (``_resolved_call``): the user's code (``_user_call``), Python's containers
(``zip``, ``dict``, ``list``, ``tuple``, ``dict.fromkeys``: displays where their items are
known, ``_container_builtin``), else a primitive with a rule, NumPy under the generated
code's name for it (``_primitive_call``); a method (``_method_call``): an array's, as its
NumPy function (``numpy_spellings``), a list's or dict's made here (``lower_lists``,
``lower_dicts``), refused where the walk would not follow what it changes; anything else,
a callable known only when the code runs (``_unknown_call``).

Relies on ``_call_arguments``, ``_check_spread``, ``_apply`` and ``_user_call``
(``lower_apply``), on what the walk knows of kinds and containers (``lower_kinds``,
``lower_aggregates``, ``lower_lists``, ``lower_dicts``), on ``_lower`` and on the walk's
state (``current``, ``sequences``, the sets of kinds).
"""
from __future__ import annotations

import gast
import numpy as np

from .. import anno, errors, nodes, runtime, templates
from ..rules import registry
from .lower_aggregates import is_display
from .lower_lists import CHANGES
from .lower_objects import is_named_tuple_class, is_user_class, is_user_code, stored_parameters
from .numpy_spellings import METHODS, VARARG_METHODS, einsum_sublists, method_function, spell


class _Calls:
    def _call(self, node, **emit):
        """``f(...)``, by what ``f`` is (the module's docstring)."""
        func = node.func
        if isinstance(func, gast.Attribute) and isinstance(func.value, gast.Call) \
                and anno.get(func.value.func, "resolved", None) is super:
            return self._super_call(node, **emit)
        if anno.has(func, "resolved"):
            return self._resolved_call(node, **emit)
        if isinstance(func, gast.Attribute):
            return self._method_call(node, **emit)
        return self._unknown_call(node, **emit)

    def _resolved_call(self, node, **emit):
        """A call of a function or class known when compiling."""
        func = node.func
        callee = anno.get(func, "resolved")
        if callee is super:
            raise errors.at(node, "`super()` is supported only to call a method (`super().forward(x)`)",
                            "call the method through it, or name the base class's method "
                            "(`Base.forward(self, x)`)")
        if is_named_tuple_class(callee):
            return self._named_tuple(callee, node, **emit)
        stored = stored_parameters(callee) if is_user_class(callee) else None
        if stored is not None:
            return self._record(callee, stored, node, **emit)
        args, kwargs = self._call_arguments(node)
        rule = registry.lookup(callee)
        if rule is None and is_user_code(callee) or (
                rule is not None and rule.differentiable and not templates.self_contained(rule.adjoint)):
            return self._user_call(nodes.copy(func), args, kwargs, node, **emit)
        if rule is None or rule.differentiable or any(isinstance(k, tuple) for k in kwargs):
            self._check_spread(args, kwargs, node)  # (a draw's or a constructor's `*shape` runs as written)
        fromkeys = getattr(callee, "__self__", None) is dict \
            and getattr(callee, "__name__", None) == "fromkeys"
        if any(callee is c for c in (zip, dict, list, tuple)) or fromkeys:
            return self._container_builtin(callee, args, kwargs, node, **emit)
        return self._primitive_call(callee, args, kwargs, node, **emit)

    def _container_builtin(self, callee, args, kwargs, node, **emit):
        """``zip``, ``dict``, ``list``, ``tuple`` and ``dict.fromkeys``: a display of the items
        where they are known here, a container the walk follows where they are known when the
        code runs only; else as any other function (``_primitive_call``)."""
        func = node.func
        if callee is zip and args and not kwargs and all(self._has_items(a) or is_display(a) for a in args):
            args = [self._display_value(a, node) if is_display(a) else a for a in args]
            return self._zip_display(args, node, **emit)
        entries = self._known_pairs(args[0]) if callee is dict and len(args) == 1 and not kwargs else None
        if entries is not None:
            # `dict(zip(["w", "b"], [w, b]))`, `dict([("w", w)])`: the display of its entries
            # (a later pair's value in an earlier one's place, as Python's)
            display = gast.Dict(keys=[nodes.const(k) for k in entries], values=list(entries.values()))
            return self._emit_aggregate(display, list(entries), list(entries.values()), node, **emit)
        if callee is dict and not args and kwargs:  # `dict(w=w, b=b)` is `{"w": w, "b": b}`
            display = gast.Dict(keys=[nodes.const(k) for k in kwargs], values=list(kwargs.values()))
            anno.inherit(display, node)
            return self._lower(display, **{k: v for k, v in emit.items() if k != "origin_node"})
        if callee in (list, tuple) and len(args) == 1 and not kwargs:
            copied = self._copied_container(callee, args[0], node, **emit)
            if copied is not None:
                return copied
            at_run_time = isinstance(args[0], gast.Name) and args[0].id not in self.dicts \
                and args[0].id not in self.runtime_mappings and (
                args[0].id in self.lists or args[0].id in self.runtime_lists or args[0].id in self.containers)
            if callee is tuple and at_run_time:
                # (`tuple(p[1] for p in params)`: a list made by appends, as a tuple)
                made = self._apply(runtime.as_tuple, None, args, {}, node, func_node=nodes.dotted("rt.as_tuple"),
                                   **emit)
                if isinstance(made, gast.Name):
                    self.containers.add(made.id)
                    self.tuples.add(made.id)
                return made
            if callee is list and at_run_time and args[0].id in self.lists:
                # A list whose items are known when it runs only (grown by append): a new
                # list of the same items is `xs + []`, a join, item by item.
                joined = anno.inherit(gast.BinOp(left=args[0], op=gast.Add(),
                                                 right=gast.List(elts=[], ctx=gast.Load())), node)
                made = self._lower(joined, **{k: v for k, v in emit.items() if k != "origin_node"})
                if isinstance(made, gast.Name):
                    self._own_list(made.id)
                return made
            if callee is list and (at_run_time or args[0].id in self.arrays):
                # (of a tuple too, `rest + list(axes)`; of an array, its rows: `rt.sequence_of`'s
                # rule gives each item's adjoint to the row or item it came from)
                made = self._apply(runtime.sequence_of, None, args, {}, node, func_node=nodes.copy(func), **emit)
                if isinstance(made, gast.Name):
                    self.runtime_lists.add(made.id)
                    self.made_by[made.id] = (True, anno.get(node, "origin"))
                return made
        if getattr(callee, "__self__", None) is dict and getattr(callee, "__name__", None) == "fromkeys" \
                and 1 <= len(args) <= 2 and not kwargs:  # `dict.fromkeys(KEYS)`: a new dict made here
            made = self._apply(runtime.fromkeys, None, args, {}, node, func_node=nodes.dotted("rt.fromkeys"),
                               **emit)
            if isinstance(made, gast.Name):
                self.containers.add(made.id)
                self.dicts.add(made.id)
                self.arrays.discard(made.id)
                self.made_by[made.id] = (True, anno.get(node, "origin"))
            return made
        if callee in (list, tuple, dict) and len(args) == 1 and not kwargs \
                and not isinstance(args[0], gast.Starred):
            # `list(xs)`, `tuple(xs)`, `dict(d)` of a value whose items are known only when it
            # runs (`np.split`'s list, a dict passed in): the user's call, with the rule of
            # `rt.sequence_of` / `rt.mapping_of`, whose adjoint gives each item its own.
            made = self._apply(runtime.mapping_of if callee is dict else runtime.sequence_of, None, args, {},
                               node, func_node=nodes.copy(func), **emit)
            if isinstance(made, gast.Name) and callee is tuple:
                self.containers.add(made.id)
                self.tuples.add(made.id)
            if isinstance(made, gast.Name) and callee is dict:  # (a new dict: its keys known when it runs)
                self.containers.add(made.id)
                self.dicts.add(made.id)
            return made
        return self._primitive_call(callee, args, kwargs, node, **emit)

    def _primitive_call(self, callee, args, kwargs, node, **emit):
        """A function with a rule (or none: run as written), NumPy's under the generated
        code's name for it."""
        func = node.func
        if callee is np.einsum:
            args = einsum_sublists(args)
        if callee in (max, min) and len(args) > 1:  # Python's max(a, b) is max((a, b)): one rule
            args = [nodes.tuple_(args)]
        if callee is sorted and len(args) == 1 and not kwargs and isinstance(args[0], gast.Name) \
                and self._dict_keys(args[0].id) is not None:  # `for k in sorted(params)`
            keys = sorted(self._dict_keys(args[0].id))
            display = gast.List(elts=[nodes.const(k) for k in keys], ctx=gast.Load())
            return self._emit_aggregate(display, list(range(len(keys))), [nodes.const(k) for k in keys],
                                        node, **emit)
        spelled = spell(callee, node, self.backend)
        func_node = nodes.dotted(spelled) if spelled else nodes.copy(func)
        if callee is np.where and len(args) == 1 and not kwargs:  # np.where(c) is np.nonzero(c): indices
            callee = np.nonzero
        return self._apply(callee, None, args, kwargs, node, func_node=func_node, **emit)

    def _method_call(self, node, **emit):
        """``obj.name(...)`` of an ``obj`` not known when compiling: an array's method, a list's or
        dict's (made here, or passed in), else an object's method, called as it is."""
        func = node.func
        if func.attr in METHODS and self._is_array(func.value):
            return self._array_method_call(node, **emit)
        self._refuse_method(node)
        if func.attr == "copy" and not node.args and not node.keywords \
                and isinstance(func.value, gast.Name) and not anno.has(func.value, "resolved") \
                and self._container_kind(self.current.get(func.value.id, func.value.id)) in ("list", "dict"):
            # `ps.copy()` of a list or dict (passed in, or made here): `list(ps)` / `dict(ps)`
            kind = list if self._container_kind(self.current.get(func.value.id, func.value.id)) == "list" else dict
            maker = anno.set(nodes.name(kind.__name__), "resolved", kind)
            copied = anno.inherit(gast.Call(func=maker, args=[func.value], keywords=[]), node)
            return self._lower(copied, **{k: v for k, v in emit.items() if k != "origin_node"})
        # A list or dict made here, by its name or as an item of another (`ys[0].append(h)`).
        held = self._held(func.value)
        user = nodes.to_source(func.value) if held is not None else None
        if held is not None and func.attr == "append" and held in self.made_by:
            return self._append(user, node, name=held, **emit)
        if held is not None and func.attr == "extend" and held in self.made_by:
            return self._extend(user, node, held, **emit)
        if held is not None and func.attr in ("reverse", "insert", "sort") and isinstance(func.value, gast.Name) \
                and held in self.own_lists | self.lists | self.runtime_lists and held not in self.dicts \
                and held not in self.tuples:
            return self._reordered(user, held, node, **emit)
        if held is not None and func.attr == "pop" and held in self.dicts and isinstance(func.value, gast.Name):
            return self._dict_pop(user, held, node, **emit)
        if held is not None and func.attr == "pop" and held in self.own_lists | self.containers:
            return self._pop(user, node, name=held, **emit)
        if self._dict_method_call(node) is not None:
            return self._dict_method(held, func.attr, node, **emit)
        if held is not None and (held in self.dicts or held in self.runtime_mappings) \
                and func.attr in ("update", "setdefault") and isinstance(func.value, gast.Name):
            written = self._dict_written(func.value, node)
            if written is not None:  # (the call's value: `d["k"]`, or None)
                return self._lower(written, **{k: v for k, v in emit.items() if k != "origin_node"})
        if held is not None and held in self.containers and not (
                held in self.dicts and func.attr in ("keys", "values", "items", "get")):
            # (a dict made here whose keys are known only at run time: as a dict passed in, below)
            raise errors.at(node, f"the method `.{func.attr}()` of a list, tuple or dict is not supported "
                            "in differentiated code (only `append`, `extend` and `pop`, a dict's `keys`, "
                            "`values`, `items` and `get`, `setdefault`, and `update` with a dict display or "
                            "keywords)",
                            f"index it instead (`{user}[key]`)")
        return self._unknown_call(node, **emit)

    def _array_method_call(self, node, **emit):
        """``x.sum(axis)`` of an array: ``np.sum(x, axis)``."""
        func = node.func
        receiver = self._lower(func.value)
        args, kwargs = self._call_arguments(node)
        if func.attr in VARARG_METHODS and len(args) == 1 and isinstance(args[0], gast.Starred):
            args = [args[0].value]  # (`x.reshape(*shape)` is `x.reshape(shape)`)
        self._check_spread(args, kwargs, node)
        if func.attr in VARARG_METHODS and len(args) > 1:
            args = [nodes.tuple_(args)]
        prim, spelled = method_function(func.attr, self.backend)
        return self._apply(prim, None, [receiver] + args, kwargs, node, func_node=nodes.dotted(spelled),
                           **emit)

    def _refuse_method(self, node):
        """Refuse a method the walk does not follow: an array's with no rule, one that changes
        the caller's list or one whose items are known when the code runs only."""
        func = node.func
        if func.attr not in METHODS and self._is_array(func.value) \
                and (isinstance(func.value, gast.Name) or self._surely_array(func.value)
                     and hasattr(np.ndarray, func.attr)):
            if hasattr(list, func.attr) and isinstance(func.value, gast.Name):
                # (`vals = list(x)`: NumPy reads the list as the array, and so does srcgrad)
                raise errors.at(node, f"srcgrad cannot differentiate `.{func.attr}()` of `{func.value.id}`, "
                                "which holds an array's values (an array, or a list made from one): srcgrad "
                                "follows neither the list method nor an array method of that name",
                                "reverse or sort with NumPy before making the list (`x[::-1]`, `np.sort(x)`), "
                                "or index the items in the order you need (`[x[2], x[1], x[0]]`)")
            instead = f"call the NumPy function instead (`np.{func.attr}(x, ...)`)" if hasattr(np, func.attr) \
                else "write it as an assignment or with NumPy functions"
            raise errors.at(node, f"srcgrad has no derivative rule for the array method `.{func.attr}()`",
                            f"{instead}, or register a rule with srcgrad.defadjoint")
        if func.attr in ("append", "pop") \
                and isinstance(func.value, gast.Name) and func.value.id in self.sequences \
                and self.current.get(func.value.id) == func.value.id:
            user = func.value.id
            raise errors.at(node, f"`{user}.{func.attr}(...)` would change the caller's list `{user}`, "
                            "which srcgrad does not follow",
                            f"build a list of your own from its items (`items = [{user}[0], {user}[1]]`) "
                            "and change that")
        if func.attr in CHANGES - {"reverse", "insert", "sort"} \
                and isinstance(func.value, gast.Name) \
                and self.current.get(func.value.id, func.value.id) in self.runtime_lists - self.dicts \
                and not (func.attr in ("update", "setdefault")
                         and self.current.get(func.value.id, func.value.id) in self.runtime_mappings):
            # (`vals = list(x)`, `hs = [None] * n`: its items are known when it runs only, and
            # their adjoints are followed by position: a change of order or length is not)
            user = func.value.id
            raise errors.at(node, f"srcgrad does not follow `.{func.attr}()` of `{user}`, a list whose "
                            "items it knows only when the code runs (their adjoints go by position)",
                            f"make a new list instead (`{user} = {user}[::-1]`, `{user} = {user}[:-1]`, "
                            f"`{user} = {user} + [v]`), or build `{user}` with appends in this function")

    def _unknown_call(self, node, **emit):
        """Known only at run time: a function passed in, a method of an object."""
        func = node.func
        receiver = None
        if isinstance(func, gast.Attribute):
            receiver = self._lower(func.value)
            callee = gast.Attribute(value=nodes.copy(receiver), attr=func.attr, ctx=gast.Load())
        else:
            callee = self._lower(func)
        args, kwargs = self._call_arguments(node)
        return self._user_call(callee, args, kwargs, node, receiver=receiver, **emit)
