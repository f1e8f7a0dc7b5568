"""Values being differentiated that reach what srcgrad does not differentiate.

A value being differentiated given to a ``with`` block's manager, to a class being
constructed, to ``map``/``zip``/``list`` kept as it is, to a function without a derivative
rule or to a parameter a rule gives no adjoint, read by a nested function used other than
by calling it, spread by ``*`` into a call whose length is unknown, or an object indexed
through its class's ``__getitem__``: its derivative would be lost, so the reverse pass
refuses the statement at the user's line, saying what to write instead.

Requires: a :class:`~srcgrad.ir.Core` program, its activity and ranks.
Guarantees: nothing is changed; a statement is refused
(``errors.UnsupportedSyntaxError``, ``errors.NoDerivativeRuleError``) or passes.
"""
from __future__ import annotations

import functools

import gast
import numpy as np

from ..anno import Kind
from .. import anno, errors, nodes, templates
from ..rules.registry import label as registry_label
from ..tree import TreeRank
from .ranks import rank_of

# Builtins that make a container (or an iterator over one) from what they are given.
_CONTAINERS = {f"builtins.{t}" for t in ("list", "tuple", "dict", "set", "frozenset", "zip", "enumerate",
                                          "reversed", "map", "filter")}


class _Nondifferentiable:
    """The checks of values reaching what srcgrad does not differentiate, a part of
    :class:`~.refusals.Refusals` (whose ``__init__`` sets the state they read)."""

    def _check_manager(self, stmt):
        """A ``with`` block's manager runs in the forward sweep only: refused where it is given, or gives,
        a value being differentiated."""
        varied = [n for n in nodes.loaded_names(stmt) if n in self.activity.varied]
        if varied:
            raise errors.at(stmt.value, "this `with` block's context manager is given, or gives, a "
                            "value being differentiated: srcgrad runs the manager in the forward "
                            "sweep only and does not differentiate through it",
                            "give the manager constants only and compute with the differentiated "
                            "values in the block's body", kind=errors.UnsupportedSyntaxError)

    def _check_construction(self, stmt):
        """``Cls(...)`` given a value being differentiated: refused (a value stored in a new object is not
        followed)."""
        varied = [n for n in nodes.loaded_names(stmt.value) if n in self.activity.varied]
        if varied:
            cls = anno.get(stmt, "constructs").__name__
            raise errors.at(stmt.value, f"`{cls}(...)` is given `{varied[0]}`, which is being "
                            "differentiated: srcgrad does not follow values stored in a new object",
                            f"create the object outside the function and pass it in (and "
                            f"differentiate with respect to it), or pass `{varied[0]}` to its methods")

    def _check_container_builtin(self, stmt):
        """``map(...)``, ``zip(...)``, ``list(...)`` run as they are: refused where given a value being
        differentiated."""
        rule = anno.get(stmt, "rule")
        if anno.get(stmt, "kind") == Kind.NONDIFF and rule is not None and rule.name in _CONTAINERS:
            varied = [n for n in nodes.loaded_names(stmt.value) if n in self.activity.varied]
            if varied:
                kind = rule.name.split(".")[1]
                given = "a value" if varied[0].startswith("_") else f"`{varied[0]}`"
                iterator = kind in ("map", "filter", "zip", "enumerate", "reversed")
                raise errors.at(stmt.value, f"`{kind}(...)` is given {given}, which is being "
                                f"differentiated: srcgrad does not follow values through `{kind}(...)`"
                                + (" kept as an iterator (read lazily, once)" if iterator else ""),
                                f"read it whole where it is made (`list({kind}(...))`, `sum({kind}(...))`), "
                                "or write a list comprehension (`[f(v) for v in xs]`)" if iterator else
                                "use the value itself, index it, or build the new one with a display of "
                                "its items (`[xs[0], xs[1]]`, `{'a': d['a']}`)",
                                kind=errors.UnsupportedSyntaxError)

    def _check_nested_def(self, stmt):
        """A nested ``def`` or lambda: refused where it reads a value being differentiated and is used
        other than by calling it."""
        active = [n for n in anno.get(stmt, "captures") if self.activity.active(n)]
        if active and self.activity.active(stmt.name):
            lam = anno.get(stmt, "lambda", False)
            read = anno.get(stmt, "captured_as", {}).get(active[0], active[0])
            kind = "lambda" if lam else "nested function"
            raise errors.at(stmt, f"{'this lambda' if lam else f'the nested function `{stmt.name}`'} "
                            f"reads `{read}`, which depends on the inputs being differentiated, and is "
                            "used other than by calling it (returned, stored, passed on) or calls itself: "
                            f"srcgrad passes what a {kind} reads as arguments only where it is just called",
                            f"pass `{read}` to the lambda where it is called (a parameter without a "
                            "default)" if lam else f"pass `{read}` to `{stmt.name}` as an argument")

    def check_underived(self, stmt):
        """Refuse a value being differentiated that reaches an argument srcgrad has no
        derivative for, where the result matters to the output: an argument of a
        function it has no rule for (a random draw other than those of
        ``rules/random.py``, a class), or a parameter a rule gives no adjoint
        (``np.linalg.norm(x, ord=p)``'s ``ord``).  A function declared with
        ``nondifferentiable`` has zero derivative in every argument: nothing to refuse."""
        kind, rule = anno.get(stmt, "kind"), anno.get(stmt, "rule")
        if kind == Kind.NONDIFF and rule is not None and not rule.zero_derivative \
                and rule.name not in _CONTAINERS:
            varied = [n for n in nodes.loaded_names(stmt.value) if n in self.activity.varied]
            if varied:
                given = "a value" if varied[0].startswith("_") else f"`{varied[0]}`"
                random = " (a random draw: srcgrad differentiates `normal`, `uniform` and " \
                    "`exponential` by reparameterisation, see docs/rules.md)" if rule.impure else ""
                called = nodes.to_source(stmt.value.func) if isinstance(stmt.value, gast.Call) else rule.name
                raise errors.at(stmt.value, f"`{called}` is given {given}, which is being differentiated, "
                                "and srcgrad has no "
                                f"derivative rule for it{random}",
                                "compute the value from NumPy functions srcgrad differentiates, or "
                                "register a rule with srcgrad.defadjoint",
                                kind=errors.NoDerivativeRuleError)
        if kind != Kind.OP:
            return
        bound = anno.get(stmt, "bound")
        for param, atom in bound.items():
            if param in rule.diff_params and param not in rule.sequence_params \
                    and isinstance(atom, (gast.List, gast.Tuple)):
                # np.sum([a, b]): the rule's adjoint is the array's; the items would get none.
                varied = [n for n in nodes.loaded_names(atom) if n in self.activity.varied]
                if varied:
                    raise errors.at(stmt.value, f"`{param}` of `{rule.name}` is given a list or tuple "
                                    "holding a value being differentiated, and srcgrad gives adjoints to "
                                    "arrays there, not to the items of a list",
                                    "make it an array first: `np.array([...])` (or np.stack)",
                                    kind=errors.NoDerivativeRuleError)
            if param in rule.diff_params or param in rule.discrete_params or param in rule.zero_params:
                continue
            varied = [n for n in nodes.loaded_names(atom) if n in self.activity.varied]
            if varied:
                given = "a value" if varied[0].startswith("_") else f"`{varied[0]}`"
                raise errors.at(stmt.value, f"`{param}` of `{rule.name}` is given {given}, which is being "
                                f"differentiated, but srcgrad's rule has no derivative with respect "
                                f"to `{param}`",
                                f"pass a constant as `{param}` (one that does not depend on the inputs "
                                "being differentiated), or compute it another way" + (
                                    "" if _builtin_rule(rule) else f"; or have the adjoint return `{param}`'s "
                                    "adjoint too (a parameter without a default value gets one, or name it "
                                    "in `defadjoint(..., diff=(...))`)"),
                                kind=errors.NoDerivativeRuleError)

    def check_spread(self, stmt, args, kwargs):
        """``g(*xs)`` whose length is known only at run time (normalize passes the
        entries one by one when it is known): which position gets which adjoint is
        unknown when compiling, so a differentiated value must not be in or after it."""
        starred = next((i for i, a in enumerate(args) if isinstance(a, gast.Starred)), len(args))
        spread = [a.value for a in args[starred:] if isinstance(a, gast.Starred)] + \
            [v for k, v in kwargs.items() if isinstance(k, tuple)]
        after = [a for a in args[starred:] if not isinstance(a, gast.Starred)]
        active = [a for a in spread + after if isinstance(a, gast.Name) and self.activity.active(a.id)]
        if not active:
            return
        call = nodes.to_source(stmt.value)
        if active[0] in spread and active[0].id in self.core.params:  # compiled without ranks
            raise errors.at(stmt.value, f"srcgrad cannot differentiate through `{call}` without "
                            f"knowing how many values `{active[0].id}` holds",
                            "pass example arguments (srcgrad.source(f, *args) or srcgrad.show(f, *args)); "
                            "their lengths are part of the specialisation")
        raise errors.at(stmt.value, f"srcgrad cannot differentiate through `{call}`: it cannot tell, "
                        "when it compiles the call, how many values the `*`/`**` argument holds, so "
                        f"where the adjoint of `{active[0].id}` goes",
                        "unpack it into names first (`a, b = pair`) and pass them, or spread a "
                        "tuple or dict built in this function or passed in as an argument")

    def no_rule(self, stmt):
        """The error for an active value computed by what srcgrad has no derivative rule for."""
        if anno.has(stmt, "why"):
            problem, advice = anno.get(stmt, "why")
            return errors.at(stmt.value, problem, advice, kind=errors.NoDerivativeRuleError)
        callee = anno.get(stmt, "callee")
        if callee is None:
            return errors.at(stmt.value, f"cannot differentiate `{nodes.to_source(stmt.value)}`: "
                             "srcgrad does not know what this attribute is",
                             "use array attributes (.T, .shape) or NumPy functions",
                             kind=errors.NoDerivativeRuleError)
        if isinstance(callee, functools.partial):  # named by its function, not by its repr
            name = getattr(callee.func, "__qualname__", None) or repr(callee.func)
            shown = [repr(a) if templates.is_literal(a) else "..." for a in callee.args] + ["<your arguments>"] \
                + [f"{k}={v!r}" if templates.is_literal(v) else f"{k}=..." for k, v in callee.keywords.items()]
            return errors.at(stmt.value, f"srcgrad does not differentiate a call of a functools.partial "
                             f"(of `{name}`)", f"call `{name}` itself with the bound arguments "
                             f"(`{name}({', '.join(shown)})`), or define a function that does",
                             kind=errors.NoDerivativeRuleError)
        label = getattr(callee, "__qualname__", None) or getattr(callee, "__name__", None) or repr(callee)
        module = getattr(callee, "__module__", None)
        full = f"{module}.{label}" if module else (registry_label(callee) if isinstance(callee, np.ufunc)
                                                   else label)  # (a ufunc names no module)
        advice = (f"register one: @srcgrad.defadjoint({label}) on a function "
                  "`def rule(ans_bar, ans, <its parameters>): return <adjoint>`")
        return errors.at(stmt.value, f"no derivative rule for `{full}`", advice,
                         kind=errors.NoDerivativeRuleError)

    def check_object_getitem(self, stmt):
        """``obj[i]`` of an object being differentiated runs its class's ``__getitem__``, which
        srcgrad does not follow (an adjoint keyed by ``i`` would match no field): refused."""
        base = anno.get(stmt, "bound")["a"]
        rank = rank_of(base, self.ranks)
        key = templates.static_value(anno.get(stmt, "bound")["index"])
        # (Entries all integers: a list or tuple held in an object, flattened by position.)
        if isinstance(rank, TreeRank) and rank.kind == "object" \
                and not all(isinstance(entry, int) for entry, _ in rank) \
                and not any(entry == key for entry, _ in rank):
            # `obj[i]` runs the class's own __getitem__, which srcgrad does not follow:
            # an adjoint keyed by `i` would match no field and be dropped.
            shown = self._user_spelling(base)
            if key is templates.UNKNOWN:
                index = nodes.to_source(anno.get(stmt, "bound")["index"])
                raise errors.at(stmt.value, f"indexing `{shown}`, which holds values being differentiated, "
                                f"with a key known only when the code runs (`{index}`): srcgrad must "
                                "know which entry is read when it compiles (and does not differentiate "
                                "a class's own `__getitem__`)", f"index it with a literal key "
                                f"(`{shown}['a']`), keep each entry in an attribute of its own "
                                "(`self.a(x)`), or call a method that does the same (`obj.item(i)`)",
                                kind=errors.UnsupportedSyntaxError)
            raise errors.at(stmt.value, f"indexing `{shown}`, an object being "
                            "differentiated, runs its class's `__getitem__`, which srcgrad does not "
                            "differentiate", "index the list or array it holds (`obj.layers[i]`, `obj.c[i]`; "
                            "for a slice of an `nn.Sequential`, call its layers in a loop: `for layer in "
                            "obj.layers[:-1]: x = layer(x)`), or call a method that does the same (`obj.item(i)`)",
                            kind=errors.UnsupportedSyntaxError)

def _self_keyword(stmt):
    """A differentiated value passed as ``self=``: the name generated code uses for the
    callable's own adjoint (``dispatch.vjp_call(f, ("self", 0), ...)``), so refused."""
    return errors.at(stmt.value, "a value being differentiated is passed as the keyword argument "
                     "`self=`, which srcgrad's calls keep for the called object itself",
                     "pass it by position, or give the parameter another name",
                     kind=errors.UnsupportedSyntaxError)


def _builtin_rule(rule) -> bool:
    """A rule of srcgrad's own (its rules read a missing part of a tuple's adjoint as None)."""
    return getattr(rule.adjoint, "__module__", "").startswith("srcgrad.")
