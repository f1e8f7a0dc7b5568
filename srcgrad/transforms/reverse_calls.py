"""Pass 6 (reverse), calls: the adjoint of a call of the user's code, by its own reverse mode.

``y = f(a, b)`` becomes, in the forward sweep, ``y, y_pullback = dispatch.vjp_call(f, (0, 1),
a, b)``, and in the backward sweep ``a_bar, b_bar = y_pullback(y_bar)``: the callee's own
reverse mode, compiled when first called (so recursion and run-time targets work).  A
method, a property read (``obj.name``) and an operator whose operand may be an object of
the user's class (its ``__mul__`` decides) go the same way (``dispatch.vjp_method``,
``vjp_field``, ``vjp_operator``); a function known when compiling is called by its
compiled vjp's name (``Sweeps.callees``); a primitive whose adjoint has a rule of its own,
and a ``srcgrad.grad`` function, are pulled back by name, so that forward mode over the
gradient code differentiates them again.

Requires: what :class:`~.reverse._Reverse` holds (its ``__init__`` sets the state these
methods read); a call statement's ``args``, ``kwargs`` and ``receiver`` annotations.
Guarantees: the call statement rewritten to return its pullback too (or left as it is,
where its adjoints are computed by name), and the pullback's call appended to the
backward sweep, each active argument's adjoint accumulated.
"""
from __future__ import annotations

import inspect
import types

import gast

from .. import anno, nodes, runtime, templates
from ..analysis.mutation import _is_srcgrad_grad
from ..analysis.nondifferentiable import _self_keyword
from ..analysis.ranks import rank_of
from ..rules.registry import lookup as registry_lookup
from ..tree import TreeRank

_OPERATOR_NAMES = {"Add": "add", "Sub": "sub", "Mult": "mul", "Div": "truediv", "MatMult": "matmul",
                   "Pow": "pow"}


class _CallAdjoints:
    """The adjoints of calls of the user's code, a part of :class:`~.reverse._Reverse`."""

    def _object_operator(self, stmt) -> bool:
        """``a * b`` where an operand being differentiated may be an object of a class
        of the user's (its rank unknown, or an object's): its ``__mul__`` decides."""
        value = stmt.value
        unknown = anno.get(stmt, "maybe_object", ())
        if not unknown:
            return False
        if not (isinstance(value, gast.BinOp) and type(value.op).__name__ in _OPERATOR_NAMES
                or isinstance(value, gast.UnaryOp) and type(value.op).__name__ in ("USub", "UAdd")):
            return False
        operands = [value.left, value.right] if isinstance(value, gast.BinOp) else [value.operand]
        for atom in operands:
            rank = rank_of(atom, self.ranks)
            if isinstance(atom, gast.Name) and atom.id in unknown and not isinstance(rank, int) and not (
                    isinstance(rank, TreeRank) and rank.kind != "object"):
                return True
        return False

    def _operator_adjoint(self, stmt, target, g):
        """The operator dispatched when it runs (``dispatch.vjp_operator``), as a method call."""
        value = stmt.value
        operands = [value.left, value.right] if isinstance(value, gast.BinOp) else [value.operand]
        name = _OPERATOR_NAMES[type(value.op).__name__] if isinstance(value, gast.BinOp) else \
            {"USub": "neg", "UAdd": "pos"}[type(value.op).__name__]
        for key, item in (("kind", "call"), ("receiver", None), ("args", operands), ("kwargs", {}),
                          ("operator", name), ("impure", True)):
            anno.set(stmt, key, item)
        self._call_adjoint(stmt, target, g)

    def _plain_field(self, stmt) -> bool:
        """``obj.name`` reads a parameter stored in ``obj`` (known from the structure
        ``obj`` was specialised on), not a property computed from them."""
        bound = anno.get(stmt, "bound")
        rank, name = rank_of(bound["obj"], self.ranks), templates.static_value(bound["name"])
        return isinstance(rank, TreeRank) and any(key == name for key, _ in rank)

    def _field_adjoint(self, stmt, target, g):
        """``y = obj.name`` where ``name`` may be a property: ``dispatch.vjp_field`` runs the
        getter's own reverse mode (or reads a plain field), as for a method call."""
        bound = anno.get(stmt, "bound")
        for key, value in (("kind", "call"), ("receiver", bound["obj"]), ("args", []), ("kwargs", {}),
                           ("field", (bound["obj"], bound["name"])), ("impure", True)):
            anno.set(stmt, key, value)
        self._call_adjoint(stmt, target, g)

    def _call_adjoint(self, stmt, target, g):
        """``y = f(a, b)`` → forward ``y, y_pullback = dispatch.vjp_call(f, (0, 1), a, b)``,
        backward ``a_bar, b_bar = y_pullback(y_bar)``: the callee's own reverse mode,
        compiled when first called (so recursion and run-time targets work)."""
        args, kwargs = anno.get(stmt, "args"), anno.get(stmt, "kwargs")
        receiver = anno.get(stmt, "receiver")
        self.refusals.check_spread(stmt, args, kwargs)
        wrt = [("self", receiver)] if self._active_name(receiver) else []
        wrt += [(i, a) for i, a in enumerate(args) if self._active_name(a)]
        wrt += [(k, a) for k, a in kwargs.items() if self._active_name(a)]
        if "self" in kwargs and self._active_name(kwargs["self"]):
            raise _self_keyword(stmt)
        if not wrt:
            return
        call = stmt.value
        if not (anno.get(stmt, "field") or anno.get(stmt, "operator")) \
                and (self._adjoint_called(stmt, target, g, call, [w for w, _ in wrt])
                     or self._gradient_pulled_back(call, g, wrt)):
            return
        pullback = self.core.fresh(f"{target}_pullback")
        stmt.targets = [nodes.tuple_([nodes.name(target, "store"), nodes.name(pullback, "store")], "store")]
        spec = nodes.tuple_([nodes.const(w) for w, _ in wrt])
        field = anno.get(stmt, "field")
        direct = None if field or anno.get(stmt, "operator") else self._direct_callee(call, [w for w, _ in wrt])
        if anno.get(stmt, "operator"):
            origin = anno.get(stmt, "origin")
            stmt.value = nodes.call("dispatch.vjp_operator", [nodes.const(anno.get(stmt, "operator")), spec]
                                    + [nodes.copy(a) for a in anno.get(stmt, "args")],
                                    [("where", nodes.const(origin.where if origin else "?"))])
        elif field:  # obj.name or getattr(obj, name): a field or a property
            origin = anno.get(stmt, "origin")
            stmt.value = nodes.call("dispatch.vjp_field", [nodes.copy(field[0]), nodes.copy(field[1]),
                                                     nodes.const(origin.where if origin else "?")])
        elif direct is not None:
            stmt.value = nodes.call(direct, call.args)
        else:
            if isinstance(call.func, gast.Attribute):  # obj.name(...): a method or a stored layer
                head = ["dispatch.vjp_method",
                        [nodes.copy(call.func.value), nodes.const(call.func.attr), spec]]
            else:
                head = ["dispatch.vjp_call", [call.func, spec]]
            stmt.value = nodes.call(head[0], head[1] + call.args, [(k.arg, k.value) for k in call.keywords])
        outputs, later, claimed = [], [], set()
        for _, atom in wrt:
            var = atom.id
            # (a list grown by appends: its adjoint is one per item, which the appends pop,
            # whatever form the pullback gives it in: `_accumulate` lays it out)
            if var not in self.defined and var not in claimed and var not in self.lists:
                claimed.add(var)
                outputs.append(self._bar_name(var))
            else:
                temp = self.core.fresh()
                outputs.append(temp)
                later.append((var, temp))
        targets = nodes.tuple_([nodes.name(o, "store") for o in outputs], "store") if len(outputs) > 1 \
            else nodes.name(outputs[0], "store")
        self._append(nodes.assign(targets, nodes.call(nodes.name(pullback), [g])), self.group)
        self.defined |= claimed
        for var, temp in later:
            self._accumulate(var, nodes.name(temp))

    def _adjoint_called(self, stmt, target, g, call, wrt) -> bool:
        """``y = f(a, b)`` of a primitive whose rule is not inlined (its adjoint calls helpers
        of its own module) but whose adjoint has a rule of its own, a derivative of the
        derivative (``fixed_point``'s): the forward sweep calls ``f`` as it is, the backward
        sweep its adjoint (bound in the loaded module as ``self.bound``), so forward mode over
        the gradient code differentiates that call by the adjoint's rule (``grad(grad(f))``)
        where a pullback closure (``dispatch.vjp_call``) would stop it.  False (nothing done)
        for any other call."""
        fn = anno.get(call.func, "resolved", None) if isinstance(call.func, (gast.Name, gast.Attribute)) else None
        rule = registry_lookup(fn) if isinstance(fn, types.FunctionType) else None
        if rule is None or rule.adjoint is None or registry_lookup(rule.adjoint) is None or rule.elementwise \
                or call.keywords or any(isinstance(a, gast.Starred) for a in call.args) \
                or not all(isinstance(w, int) for w in wrt):
            return False
        params = list(rule.signature.parameters)
        if len(call.args) > len(params) or any(params[w] not in rule.diff_params for w in wrt):
            return False  # (dispatch.vjp_call refuses a parameter the rule has no derivative for)
        adjoint = self.bound_name(rule.adjoint)
        adjoints = self.core.fresh(f"{target}_adjoints")
        self._append(nodes.assign(adjoints, nodes.call(adjoint, [g, nodes.name(target)]
                                                       + [nodes.copy(a) for a in call.args])), self.group)
        for w in wrt:
            param = params[w]
            part = nodes.name(adjoints) if len(rule.diff_params) == 1 else gast.Subscript(
                value=nodes.name(adjoints), slice=nodes.const(rule.diff_params.index(param)), ctx=gast.Load())
            self._accumulate(call.args[w].id, part)
        return True

    def _gradient_pulled_back(self, call, g, wrt) -> bool:
        """``y = grad_f(a, b)`` of ``grad_f = srcgrad.grad(f)`` (a free name, or made in the
        function): the forward sweep calls it as it is, the backward sweep computes the
        adjoints by name (``dispatch.gradient_pullback``: ``H y_bar``, forward mode over
        ``f``'s gradient code, as ``dispatch.vjp_call``'s pullback does), which forward mode
        over this code differentiates by its rule (a third derivative).  False for any
        other call."""
        if not isinstance(call.func, gast.Name) or call.keywords \
                or any(isinstance(a, gast.Starred) for a in call.args) \
                or not all(isinstance(w, int) for w, _ in wrt) or not self._makes_gradient(call.func):
            return False
        adjoints = self.core.fresh("_adjoints")
        self._append(nodes.assign(adjoints, nodes.call("dispatch.gradient_pullback", [
            nodes.copy(call.func), nodes.tuple_([nodes.const(w) for w, _ in wrt]), g,
            nodes.tuple_([nodes.copy(a) for a in call.args])])), self.group)
        for k, (_, atom) in enumerate(wrt):
            part = nodes.name(adjoints) if len(wrt) == 1 else gast.Subscript(
                value=nodes.name(adjoints), slice=nodes.const(k), ctx=gast.Load())
            self._accumulate(atom.id, part)
        return True

    def _makes_gradient(self, func) -> bool:
        """``func`` (a name) holds ``srcgrad.grad(f)`` (its plain ``grad`` mode): a free name
        bound to one, or a name the function binds to a call of ``srcgrad.grad``."""
        if anno.has(func, "resolved"):
            value = anno.get(func, "resolved")
            return runtime.is_gradient_function(value) and getattr(getattr(value, "options", None), "mode",
                                                                     None) == "grad"
        if self.grad_made is None:
            self.grad_made = {s.targets[0].id for s in nodes.statements(self.core.body)
                              if isinstance(s, gast.Assign) and len(s.targets) == 1
                              and isinstance(s.targets[0], gast.Name) and isinstance(s.value, gast.Call)
                              and _is_srcgrad_grad(anno.get(s.value.func, "resolved", None))}
        return func.id in self.grad_made

    def bound_name(self, fn) -> str:
        """The name under which the loaded code reads ``fn`` (``Sweeps.bound``)."""
        for name, value in self.bound.items():
            if value is fn:
                return name
        name = self.core.fresh(f"_{fn.__name__}")
        self.bound[name] = fn
        return name

    def _direct_callee(self, call, wrt):
        """The name under which the loaded code calls ``call``'s callee's compiled
        vjp directly, skipping ``dispatch.vjp_call``'s dispatch per call (what a layer
        applied in a loop pays), or None.  Only for a function known at compile
        time, called with all its parameters positionally, argument ranks known."""
        fn = anno.get(call.func, "resolved") if isinstance(call.func, gast.Name) else None
        if not isinstance(fn, types.FunctionType) or registry_lookup(fn) is not None or call.keywords \
                or self.backend.MODULE_NAME != "np":
            return None
        code = fn.__code__
        ranks = tuple(rank_of(a, self.ranks) for a in call.args)
        if code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) or code.co_kwonlyargcount \
                or code.co_argcount != len(call.args) or not all(isinstance(r, int) for r in ranks):
            return None
        key = (call.func.id, fn, tuple(wrt), ranks)
        if key not in self.callees:
            params = code.co_varnames[:code.co_argcount]
            which = "" if len(wrt) == len(params) else "_" + "_".join(params[i] for i in wrt)
            self.callees[key] = self.core.fresh(f"{call.func.id}_vjp{which}")
        return self.callees[key]
