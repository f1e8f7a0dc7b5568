"""Normalize (``anf``): a call's arguments bound, and the call emitted.

``_call_arguments`` lowers a call's arguments, passing the entries of ``*xs`` and ``**d``
one by one where they are known when compiling (``_spread``); ``_apply`` emits a primitive
applied to atoms, binding them to its rule's parameters (``bound``: what ``reverse`` and
``forward`` instantiate its adjoint and tangent with), a list or tuple given where NumPy
takes an array made ``np.array(...)`` of its own (``_array_arguments``); ``_user_call``
emits a call of the user's own code, differentiated through its own vjp when it runs.

Relies on the walk (``_lower``, ``_argument``, ``_emit``), on what it knows of kinds and items
(``lower_kinds``, ``lower_aggregates``), on ``_field_rank`` (``lower_objects``) and on its state
(``aggregates``, ``structures``, ``closures``, ``passed``, ``containers``, ``lists``,
``current``).
"""
from __future__ import annotations

import operator

import gast
import numpy as np

from .. import anno, errors, nodes
from ..rules import registry
from ..templates import is_literal, literal, static_value
from .lower_objects import is_user_class
from .numpy_spellings import clip_arguments, spell


class _Applications:
    def _call_arguments(self, node):
        """A call's arguments, lowered: ``(args, kwargs)``.

        ``*xs`` and ``**d`` whose entries are known when compiling (a tuple or dict
        built here, or a parameter: what it holds is part of the specialisation)
        pass each entry on its own, ``g(*xs)`` → ``g(xs[0], xs[1])``, so each
        entry's adjoint flows back into ``xs`` as a subscript's does.  Others stay
        spread, a ``Starred`` in ``args`` or a ``("**", n)`` key in ``kwargs``:
        the call runs as written, and the reverse pass refuses to differentiate
        through them.
        """
        args, kwargs = [], {}
        for a in node.args:
            if isinstance(a, gast.Starred):
                args += self._spread(a.value, "sequence", len(args))
            else:
                args.append(self._argument(a))
        for k in node.keywords:
            entries = self._spread(k.value, "mapping", len(kwargs)) if k.arg is None \
                else {k.arg: self._argument(k.value)}
            repeated = sorted(set(entries) & set(kwargs), key=str)
            if repeated:
                raise errors.at(node, f"the keyword argument `{repeated[0]}` is passed twice",
                                "pass each keyword once")
            kwargs.update(entries)
        return args, kwargs

    def _spread(self, node, kind, position):
        base = self._lower(node)
        keys = self._entries(base, kind)
        if keys is None:
            if kind == "sequence":
                return [gast.Starred(value=base, ctx=gast.Load())]
            return {("**", position): base}
        elements = []
        for key in keys:
            element = self._aggregate_element(base, nodes.const(key))
            if element is None:
                item = gast.Subscript(value=nodes.copy(base), slice=nodes.const(key), ctx=gast.Load())
                element = self._apply(operator.getitem, item, [nodes.copy(base), nodes.const(key)], {},
                                      node, origin_node=node, target=None, target_hint=None, effect=False)
                if isinstance(element, gast.Name):
                    self._field_rank(element, base, key)
            elements.append(element)
        return elements if kind == "sequence" else dict(zip(keys, elements))

    def _entries(self, base, kind):
        """The keys of a tuple or list (``kind="sequence"``) or of a dict (``"mapping"``)
        that are known when compiling, else None."""
        if not isinstance(base, gast.Name):
            return None
        if base.id in self.aggregates and (base.id in self.dicts) == (kind == "mapping"):
            keys = list(self.aggregates[base.id])
        elif base.id in self.structures and self.structures[base.id].kind == kind:
            keys = [key for key, _ in self.structures[base.id]]
        else:
            return None
        return keys if kind == "sequence" or all(isinstance(k, str) for k in keys) else None

    def _check_spread(self, args, kwargs, node):
        """A NumPy function's rule binds each argument to a parameter when compiling."""
        spread = [a.value for a in args if isinstance(a, gast.Starred)] + \
            [v for k, v in kwargs.items() if isinstance(k, tuple)]
        if spread:
            raise errors.at(node, f"srcgrad cannot tell how many values `{nodes.to_source(spread[0])}` "
                            "holds when it compiles this call, so it cannot bind them to the "
                            "function's parameters",
                            "unpack it into names first (`a, b = pair`) and pass them, or spread a "
                            "tuple or dict built in this function or passed in as an argument")

    def _user_call(self, callee, args, kwargs, node, receiver=None, **emit):
        """A call to the user's own code: differentiated through its own vjp at run time.

        ``receiver``: for ``obj.name(...)``, the object, whose parameters may be
        differentiated too (a model calling its layers).  A list or tuple display
        among the arguments (``g([a, b])``) is built as a value first, so its
        adjoint (the callee's for that parameter) reaches the items."""
        if isinstance(callee, gast.Name) and callee.id in self.closures:
            # Python's closure reads the name when it is called; the nested def was given
            # the value the name had at the `def` (single assignment): the same only if
            # the name was not assigned again since.
            user, seen, lam = self.closures[callee.id]
            for read, name in sorted(seen.items()):
                if self.current.get(read, read) != name:
                    made, which = ("the lambda was made", "the lambda") if lam \
                        else (f"`def {user}`", f"`{user}`")
                    raise errors.at(node, f"{'the lambda called here' if lam else which} reads `{read}`, which "
                                    f"was assigned again after {made}: Python's {which.removeprefix('the ')} "
                                    "sees the new value, and srcgrad does not follow it",
                                    f"pass `{read}` to {which} as an argument")

        def value_of(atom):
            if isinstance(atom, (gast.List, gast.Tuple)) and any(isinstance(n, gast.Name)
                                                                  for n in nodes.walk(atom)):
                return self._display_value(atom, node)
            return atom
        args = [value_of(a) for a in args]
        kwargs = {k: value_of(v) for k, v in kwargs.items()}
        for atom in list(args) + list(kwargs.values()) + ([receiver] if receiver is not None else []):
            for name in nodes.loaded_names(atom):
                if name in self.containers or name in self.lists:
                    self.passed.setdefault(name, anno.get(node, "origin"))
        value = nodes.call(callee, [nodes.copy(a) for a in args],
                           [(None if isinstance(k, tuple) else k, nodes.copy(v)) for k, v in kwargs.items()])
        if receiver is None and isinstance(callee, gast.Name) and not anno.has(callee, "resolved"):
            receiver = callee  # a callable object passed in: its own parameters count
        self._escape(list(args) + list(kwargs.values()), node)  # the callee may keep or return a view
        for atom in list(args) + list(kwargs.values()) + ([receiver] if receiver is not None else []):
            for name in nodes.loaded_names(atom):  # ... or change a list, dict or object it is given
                self.aggregates.pop(name, None)
        return self._emit(value, kind="call", args=args, kwargs=kwargs, receiver=receiver,
                          impure=True, **emit)

    def _apply(self, prim, value, args, kwargs, node, func_node=None, **emit):
        """Emit a primitive application, binding its arguments to the rule's parameters."""
        rule = registry.lookup(prim)
        if prim is np.clip and value is None:
            args, kwargs = clip_arguments(args, kwargs)
        if value is None and rule is not None and rule.differentiable:
            args, kwargs = self._array_arguments(prim, rule, args, kwargs, node)
        if value is None:
            value = nodes.call(func_node, [nodes.copy(a) for a in args],
                               [(k, nodes.copy(v)) for k, v in kwargs.items()])
        if rule is None:
            return self._emit(value, kind="unknown", callee=prim, **emit)
        if not rule.differentiable:
            # A random draw must happen exactly as often as in the user's function.
            # A constructor's shape argument gives the result's rank (np.zeros((n, m))).
            shape = args[0] if args else kwargs.get("shape")
            extra = {"bound": {"shape": nodes.copy(shape)}} if rule.ndim is not None and shape is not None \
                and not any(isinstance(a, gast.Starred) for a in args) else {}
            if is_user_class(prim):  # `c = Counter()`: an object, whose methods are the user's
                extra["constructs"] = prim
            return self._emit(value, kind="nondiff", rule=rule,
                              impure=rule.impure or registry.is_random(prim), **extra, **emit)
        try:
            bound = rule.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise errors.at(node, f"srcgrad's rule for `{rule.name}` does not accept these "
                            f"arguments ({exc})", "pass only the arguments the rule lists: "
                            f"{rule.name}{rule.signature}") from None
        bound.apply_defaults()
        arguments = dict(bound.arguments)
        for unsupported in ("out",):
            if unsupported in arguments and static_value(_as_node(arguments[unsupported])) is not None:
                raise errors.at(node, f"`{unsupported}=` is not supported in differentiated code",
                                "assign the result to a name instead")
        arguments = {k: _as_node(v) for k, v in arguments.items()}
        if rule.impure:  # a random draw with a rule: it must still happen exactly as often
            emit["impure"] = True
        return self._emit(value, kind="op", rule=rule, bound=arguments, **emit)

    def _array_arguments(self, prim, rule, args, kwargs, node):
        """Lists and tuples given where a rule takes an array, made values of their own.

        NumPy reads a list or tuple given for an array (``np.sum([a, 2 * b])``,
        ``np.max(xs)``) as ``np.array(it)``: so does srcgrad, with ``np.array``'s
        rule carrying each item's adjoint back.  A rule of yours (not NumPy's) is
        given the list or tuple itself, built as an aggregate, and its adjoint for
        that parameter is split among the items.  (Parameters that take a list of
        arrays, such as ``np.stack``'s, read displays item by item already.)
        Returns the new ``(args, kwargs)``.
        """
        try:
            bound = rule.signature.bind(*args, **kwargs)
        except TypeError:
            return args, kwargs  # reported by _apply
        numpy = registry.is_numpy(prim) or (getattr(prim, "__module__", None) or "").split(".")[0] == "scipy"
        replaced = {}
        for param in rule.diff_params:
            atom = bound.arguments.get(param)
            if param in rule.sequence_params or atom is None:
                continue
            if isinstance(atom, (gast.List, gast.Tuple)) \
                    and any(isinstance(n, gast.Name) for n in nodes.walk(atom)):
                replaced[id(atom)] = self._as_array(atom, node) if numpy else self._display_value(atom, node)
            elif numpy and isinstance(atom, gast.Name) and self._holds_sequence(atom.id):
                replaced[id(atom)] = self._as_array(atom, node)
        if not replaced:
            return args, kwargs
        return ([replaced.get(id(a), a) for a in args],
                {k: replaced.get(id(v), v) for k, v in kwargs.items()})

    def _as_array(self, atom, node):
        """``np.array(atom)`` as a statement of its own; its atom."""
        func = nodes.dotted(spell(np.array, node, self.backend) or "np.array")
        return self._apply(np.array, None, [atom], {}, node, func_node=func, origin_node=node,
                           target=None, target_hint=None, effect=False)


def _as_node(value):
    if isinstance(value, gast.AST):
        return nodes.copy(value)
    if isinstance(value, tuple) and value and all(isinstance(v, gast.AST) for v in value):
        return nodes.tuple_([nodes.copy(v) for v in value])  # a *operands parameter
    return literal(value) if is_literal(value) else nodes.const(None)
