"""Instantiate a derivative rule at a call site: substitute, partially evaluate, fold.

A rule function (see ``rules.registry``) is parsed once.  At a call site its
parameters are bound to the call's atoms (``x1 -> h``, ``x2 -> 0``), then:

* an ``if`` whose test is known at compile time keeps one branch; an unknown
  test is taken as false (it guards a specialisation);
* calls the compiler can evaluate are folded: ``is_constant(p)``,
  ``np.ndim(p)`` when the rank is known, helpers marked ``@rt.static``;
* ``unbroadcast(e, p)`` becomes ``e`` where ``p`` provably has the output's shape;
* ``e ** 1``, ``e * 1``, ``1 * e`` and constant arithmetic are simplified;
* template globals become the generated module's own names (``np``, ``rt.``).

Before/after, ``np.maximum`` at ``h_relu = np.maximum(h, 0)``::

    if is_constant(x2):                       →   h_bar = h_relu_bar * (h > 0)
        return ans_bar * (x1 > x2), None
"""
from __future__ import annotations

import builtins
import dataclasses
import functools
import inspect
import linecache
import math
import operator
import textwrap
import types

import gast
import numpy as np

from . import anno, errors, nodes, runtime
from .rules import registry

UNKNOWN = object()

_BINOPS = {gast.Add: operator.add, gast.Sub: operator.sub, gast.Mult: operator.mul,
           gast.Div: operator.truediv, gast.Pow: operator.pow, gast.FloorDiv: operator.floordiv,
           gast.Mod: operator.mod}
_CMPOPS = {gast.Eq: operator.eq, gast.NotEq: operator.ne, gast.Lt: operator.lt,
           gast.LtE: operator.le, gast.Gt: operator.gt, gast.GtE: operator.ge,
           gast.Is: operator.is_, gast.IsNot: operator.is_not}
_LITERALS = (int, float, str, bool, type(None))


@functools.cache
def _parse(fn) -> gast.FunctionDef:
    """A rule function's ``def``; a ``lambda`` (``defadjoint(f)(lambda ans_bar, ans, x: ...)``)
    as the ``def`` returning its body, found in its whole file (a lambda's own lines may be a
    fragment of a longer expression).  A ``def``'s line numbers count from 1 at its first line,
    a lambda's are its file's (see :func:`_origin`).

    Raises:
        UserCodeError: a lambda not told apart from another on its line.
    """
    if fn.__name__ != "<lambda>":
        return gast.parse(textwrap.dedent(inspect.getsource(fn))).body[0]
    code = fn.__code__
    names = code.co_varnames[:code.co_argcount + code.co_kwonlyargcount]
    spots = {(line, col) for line, _, col, end in code.co_positions()  # ((0, 0): the frame's own setup)
             if line is not None and col is not None and (col, end) != (0, 0)}
    try:
        tree = gast.parse("".join(linecache.getlines(code.co_filename)))
    except SyntaxError:
        tree = None
    found = [lam for lam in nodes.walk(tree) if isinstance(lam, gast.Lambda) and lam.lineno == code.co_firstlineno
             and tuple(a.id for a in lam.args.posonlyargs + lam.args.args + lam.args.kwonlyargs) == names
             and all(_within(spot, lam) for spot in spots)] if tree is not None else []
    if len(found) != 1:
        raise errors.UserCodeError(
            "srcgrad cannot find this rule's lambda in its source apart from the code around it",
            _origin(fn, None), "write the rule as a `def`")
    return nodes.function_of_lambda(found[0], "_lambda")


def _within(spot, lam) -> bool:
    """Whether a (line, column) of a lambda's code lies in ``lam`` (its instructions' positions
    lie in its own text: they tell apart two lambdas with the same parameters on one line)."""
    line, col = spot
    return (lam.lineno, lam.col_offset) <= (line, col) <= (lam.end_lineno, lam.end_col_offset)


def _origin(fn, node) -> anno.Origin:
    """The origin of ``node`` of a rule function parsed by :func:`_parse` (its first line
    where ``node`` is None), for an error about the rule."""
    if node is None:
        number, col = fn.__code__.co_firstlineno, None
    elif fn.__name__ == "<lambda>":
        number, col = node.lineno, node.col_offset
    else:
        number, col = fn.__code__.co_firstlineno + node.lineno - 1, None
    text = linecache.getline(fn.__code__.co_filename, number).rstrip("\n")
    return anno.Origin(fn.__code__.co_filename, number, len(text) - len(text.lstrip()) if col is None else col,
                       text)


def self_contained(fn) -> bool:
    """Whether a rule can be inlined: every global it reads is NumPy, ``math`` (the
    rules of ``math.*`` on floats), a SciPy module (``special``, written ``scipy.special``),
    a runtime helper or a builtin (the generated module binds those: ``import math``,
    ``import scipy.special`` where its code reads them).  A rule of yours that
    calls your own helpers runs as a function instead (``dispatch.vjp_call``)."""
    if not getattr(fn, "__module__", "").startswith("srcgrad."):
        _refuse_writes(fn)
        if _branches(fn):
            return False  # (its tests may be known only when it runs: see `_block`)
    reads = _global_reads(fn)
    return all(
        (value := fn.__globals__.get(name, getattr(builtins, name, UNKNOWN))) is np or value is math
        or _scipy_module(value) or _runtime_helper(name, value)
        or hasattr(builtins, name) and name not in fn.__globals__
        for name in reads)  # (the values looked up at each compilation: a global may be rebound)


def _scipy_module(value) -> bool:
    """``scipy.special`` and its kin: the SciPy rules (``rules/special.py``) call them by
    their full name, so a user's own ``special`` does not shadow them."""
    return isinstance(value, types.ModuleType) and value.__name__.startswith("scipy.")


_IN_PLACE_METHODS = {"fill", "sort", "partition", "resize", "put", "itemset", "setfield", "__setitem__",
                     "__iadd__", "__isub__", "__imul__", "__itruediv__"}


@functools.cache
def _refuse_writes(fn) -> None:
    """Refuse a rule of the user's that changes one of its arguments in place (``ans_bar *=
    3``, ``g[0] = 0``, ``out=g``, ``g.fill(0)``): the adjoint it is given may be another
    value's too (``sum(f(a) + b)``: ``b``'s), which would change with it.

    Raises:
        UserCodeError: at the rule's line that writes.
    """
    fdef = _parse(fn)
    params = {a.id for a in fdef.args.args + fdef.args.kwonlyargs}

    def base(node):
        while isinstance(node, (gast.Subscript, gast.Attribute)):
            node = node.value
        return node.id if isinstance(node, gast.Name) else None

    for node in nodes.walk(fdef):
        written = None
        if isinstance(node, gast.AugAssign):
            written = base(node.target)
        elif isinstance(node, gast.Assign):
            written = next((base(t) for t in node.targets if isinstance(t, gast.Subscript)
                            and base(t) in params), None)
        elif isinstance(node, gast.Call):
            written = next((base(k.value) for k in node.keywords if k.arg == "out" and base(k.value) in params),
                           None)
            if written is None and isinstance(node.func, gast.Attribute) and node.func.attr in _IN_PLACE_METHODS:
                written = base(node.func.value)
        if written in params:
            raise errors.UserCodeError(
                f"the rule `{fn.__name__}` changes its argument `{written}` in place: the adjoint (or value) "
                "it is given may be another's too, which would change with it", _origin(fn, node),
                f"make a new array instead (`{written} = {written} * 3`, `np.where(...)`)")


@functools.cache
def _branches(fn) -> bool:
    """Whether a rule function has control flow (``if``, a loop, ``try``, ``with``, ``match``)."""
    return any(isinstance(n, (gast.If, gast.For, gast.While, gast.Try, gast.With, gast.Match))
               for n in nodes.walk(_parse(fn)))


@functools.cache
def _global_reads(fn) -> tuple:
    """The names a rule function reads that are not its own (parsed once per rule)."""
    fdef = _parse(fn)
    params = fdef.args.args + fdef.args.kwonlyargs + [a for a in (fdef.args.vararg, fdef.args.kwarg) if a]
    local = {a.id for a in params} | {n.id for n in nodes.walk(fdef) if isinstance(n, gast.Name)
                                              and isinstance(n.ctx, gast.Store)}
    return tuple(dict.fromkeys(node.id for stmt in fdef.body for node in nodes.walk(stmt)
                               if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Load)
                               and node.id not in local))


def _runtime_helper(name, value) -> bool:
    """What ``rt.<name>`` is in generated code (``rt.add`` is ``tree.add``, bound there)."""
    return value is not UNKNOWN and getattr(runtime, name, None) is value


def static_value(node):
    """The compile-time value of an atom or index expression, or UNKNOWN."""
    if isinstance(node, gast.Constant):
        return node.value
    if anno.has(node, "resolved"):
        value = anno.get(node, "resolved")
        return value if isinstance(value, _LITERALS) else UNKNOWN
    if isinstance(node, gast.Tuple):
        values = tuple(static_value(e) for e in node.elts)
        return UNKNOWN if any(v is UNKNOWN for v in values) else values
    if isinstance(node, gast.Slice):
        parts = [None if p is None else static_value(p) for p in (node.lower, node.upper, node.step)]
        return UNKNOWN if any(p is UNKNOWN for p in parts) else slice(*parts)
    return UNKNOWN


def is_literal(value) -> bool:
    if isinstance(value, tuple):
        return all(is_literal(v) for v in value)
    return isinstance(value, _LITERALS) and not (isinstance(value, float) and not np.isfinite(value))


def literal(value):
    if isinstance(value, tuple):
        return nodes.tuple_([literal(v) for v in value])
    return nodes.const(value)


@dataclasses.dataclass
class Site:
    """What the compiler knows at one call site.

    Attributes:
        bindings: template parameter -> atom (ANF guarantees atoms), including
            ``ans_bar`` and ``ans``.
        ndim: atom -> rank or None.
        same_shape: parameters that provably have the output's shape.
        wanted: differentiable parameters whose adjoint is needed.
        hints: template local -> the name to give it (the adjoint being defined).
        fresh: () -> a new temporary name.
        module_name: the generated module's name for the array module.
    """

    bindings: dict
    ndim: callable
    same_shape: set
    wanted: set
    hints: dict
    fresh: callable
    module_name: str = "np"
    structure: callable = lambda atom: None  # atom -> True (a structure), False (an array), None


def instantiate(rule, site: Site):
    """Inline ``rule.adjoint`` at ``site``.

    Returns:
        ``(statements, adjoints)``: gast statements to emit, and a dict from each
        wanted parameter to the expression of its adjoint contribution (absent
        when the rule gives none).
    """
    return _Instantiator(rule, site).run()


def instantiate_tangent(rule, site: Site):
    """Inline ``rule.tangent`` (a tangent rule function) at ``site``, whose bindings
    give ``ans``, the primal parameters and ``<param>_dot`` for each varying one
    (the others are bound to ``None``).

    Returns:
        ``(statements, tangent)``: gast statements to emit, and the expression of
        the output's tangent.
    """
    inst = _Instantiator(rule, site, rule.tangent)
    returned = inst._block(_parse(rule.tangent).body)
    if returned is None or returned.value is None:
        raise TypeError(f"the tangent rule of {rule.name} returned nothing")
    return inst.out, inst._subst(returned.value)


class _Instantiator:
    def __init__(self, rule, site: Site, fn=None):
        self.rule, self.site = rule, site
        self.fn = fn or rule.adjoint
        self.env = dict(site.bindings)
        # A rule's leading parameters are positional, whatever it names them: an adjoint
        # rule's (ans_bar, ans), a tangent rule's (ans); `(g, y, x)` reads them as `g`, `y`.
        given = [a.id for a in _parse(self.fn).args.args]
        for name, own in zip(("ans_bar", "ans") if fn is None else ("ans",), given):
            if own != name and name in self.env:
                self.env[own] = self.env.pop(name)
        self.locals = {}  # template local -> generated Name
        self.out = []

    def run(self):
        fdef = _parse(self.fn)
        returned = self._block(fdef.body)
        if returned is None:
            return self.out, {}
        value = returned.value
        params = self.rule.diff_params
        if len(params) == 1 and isinstance(value, gast.Tuple) and len(value.elts) == 1:
            value = value.elts[0]  # (one adjoint in a tuple, as JAX's custom_vjp and torch's backward write)
        elements = value.elts if len(params) > 1 and isinstance(value, (gast.Tuple, gast.List)) else [value]
        if len(elements) != len(params):
            problem, advice = registry.adjoint_count_problem(self.rule, len(elements))
            raise errors.UserCodeError(problem, _origin(self.fn, returned), advice)
        adjoints = {}
        for param, element in zip(params, elements):
            if param in self.site.wanted and not (isinstance(element, gast.Constant) and element.value is None):
                adjoints[param] = self._subst(element)
        return self.out, adjoints

    # ---- statements -------------------------------------------------------
    def _block(self, body):
        for stmt in body:
            if isinstance(stmt, gast.Expr) and isinstance(stmt.value, gast.Constant):
                continue  # docstring
            if isinstance(stmt, gast.If):
                taken = self._static(stmt.test)
                # srcgrad's rules put a special case under a test and the general form after
                # it, so a test not known when compiling takes the general form; a rule of
                # yours with a test is not inlined (`self_contained`): it runs as written.
                if taken is UNKNOWN and not stmt.orelse \
                        and not (stmt.body and isinstance(stmt.body[-1], (gast.Return, gast.Raise))):
                    raise errors.SrcgradError(
                        f"the rule {getattr(self.fn, '__qualname__', self.fn)} tests, when compiling, what is "
                        "known only when it runs, in an `if` without `else` whose body does not return: the "
                        "template would drop that body (a defect in srcgrad: please report it)")
                found = self._block(stmt.body if taken is True else stmt.orelse)
                if found is not None:
                    return found
            elif isinstance(stmt, gast.Return):
                return stmt
            elif isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name):
                local = stmt.targets[0].id
                new = self.site.hints.get(local) or self.site.fresh()
                self.out.append(nodes.assign(new, self._subst(stmt.value)))
                self.locals[local] = new
                self.env[local] = nodes.name(new)
            elif isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Tuple) \
                    and all(isinstance(e, gast.Name) for e in stmt.targets[0].elts):
                # `p_bar, q_bar = helper(...)`: each a fresh name too (as written, they would be
                # the user's own `p_bar`, `q_bar` in the generated code).
                value = self._subst(stmt.value)
                names = []
                for element in stmt.targets[0].elts:
                    new = self.site.fresh()
                    self.locals[element.id] = new
                    self.env[element.id] = nodes.name(new)
                    names.append(nodes.name(new, "store"))
                self.out.append(nodes.assign(nodes.tuple_(names, "store"), value))
            else:
                self.out.append(self._subst(stmt))
        return None

    # ---- compile-time evaluation ------------------------------------------
    def _global(self, ident):
        if ident in self.fn.__globals__:
            return self.fn.__globals__[ident]
        return getattr(builtins, ident, UNKNOWN)

    def _static(self, node):
        """Value of a template expression at compile time, or UNKNOWN."""
        if isinstance(node, gast.Constant):
            return node.value
        if isinstance(node, gast.Name):
            if node.id in self.env:
                return static_value(self.env[node.id])
            return UNKNOWN
        if isinstance(node, gast.Tuple):
            values = tuple(self._static(e) for e in node.elts)
            return UNKNOWN if any(v is UNKNOWN for v in values) else values
        if isinstance(node, gast.BoolOp):
            is_and = isinstance(node.op, gast.And)
            result = True if is_and else False
            for value in node.values:
                v = self._static(value)
                if v is UNKNOWN:
                    return UNKNOWN
                if bool(v) != is_and:
                    return v
                result = v
            return result
        if isinstance(node, gast.UnaryOp):
            v = self._static(node.operand)
            if v is UNKNOWN:
                return UNKNOWN
            return {gast.Not: operator.not_, gast.USub: operator.neg,
                    gast.UAdd: operator.pos}[type(node.op)](v)
        if isinstance(node, gast.BinOp) and type(node.op) in _BINOPS:
            a, b = self._static(node.left), self._static(node.right)
            if a is UNKNOWN or b is UNKNOWN:
                return UNKNOWN
            try:
                return _BINOPS[type(node.op)](a, b)
            except Exception:  # noqa: BLE001 - an invalid fold is simply not folded
                return UNKNOWN
        if isinstance(node, gast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _CMPOPS:
            a, b = self._static(node.left), self._static(node.comparators[0])
            if a is UNKNOWN or b is UNKNOWN:
                return UNKNOWN
            try:
                return _CMPOPS[type(node.ops[0])](a, b)
            except TypeError:  # (1, 2) >= 1: not known when compiling
                return UNKNOWN
        if isinstance(node, gast.Call):
            return self._static_call(node)
        return UNKNOWN

    def _callee(self, func):
        if isinstance(func, gast.Name) and func.id not in self.env:
            return self._global(func.id)
        if isinstance(func, gast.Attribute):
            base = self._callee(func.value)
            return UNKNOWN if base is UNKNOWN else getattr(base, func.attr, UNKNOWN)
        return UNKNOWN

    def _static_call(self, node):
        fn = self._callee(node.func)
        if fn is UNKNOWN or node.keywords:
            return UNKNOWN
        if fn is runtime.is_constant:
            arg = node.args[0]
            binding = self.env.get(arg.id) if isinstance(arg, gast.Name) else None
            return binding is not None and static_value(binding) is not UNKNOWN
        if fn is runtime.basic_index:
            arg = node.args[0]
            binding = self.env.get(arg.id) if isinstance(arg, gast.Name) else None
            return UNKNOWN if binding is None else self._basic_syntax(binding)
        if fn is runtime.is_array or fn is runtime.is_structure:
            arg = node.args[0]
            if isinstance(arg, gast.Name) and arg.id in self.site.bindings:
                kind = self.site.structure(self.site.bindings[arg.id])
                return UNKNOWN if kind is None else kind == (fn is runtime.is_structure)
            return UNKNOWN
        if fn is np.ndim:
            arg = node.args[0]
            if isinstance(arg, gast.Name) and arg.id in self.site.bindings:
                rank = self.site.ndim(self.site.bindings[arg.id])
                return UNKNOWN if rank is None else rank
            return UNKNOWN
        if fn is len and isinstance(node.args[0], gast.Name) \
                and isinstance(self.env.get(node.args[0].id), (gast.Tuple, gast.List)):
            return len(self.env[node.args[0].id].elts)  # *operands: the call's own count
        if getattr(fn, "__srcgrad_static__", False) or fn in (len, runtime.is_basic_index):
            args = [self._static(a) for a in node.args]
            if any(a is UNKNOWN for a in args):
                return UNKNOWN
            return fn(*args)
        return UNKNOWN

    def _basic_syntax(self, index):
        """Basic indexing decided from an index's syntax (see ``rt.basic_index``)."""
        parts = index.elts if isinstance(index, gast.Tuple) else [index]
        for part in parts:
            if isinstance(part, gast.Slice):
                continue
            if isinstance(part, gast.Constant) and (part.value is None or part.value is Ellipsis
                                                    or type(part.value) is int):
                continue
            if isinstance(part, gast.Name) and self.site.ndim(part) == 0:
                continue  # an integer scalar, such as a loop index
            value = static_value(part)
            if value is None or value is Ellipsis:
                continue
            return UNKNOWN
        return True

    # ---- substitution -----------------------------------------------------
    def _subst(self, node):
        return _Substitute(self).visit(nodes.copy(node))


class _Substitute(nodes.Transformer):
    """Replace template names by the call site's, and fold what is known."""

    def __init__(self, inst: _Instantiator):
        self.inst = inst

    def visit_Name(self, node):
        env = self.inst.env
        if node.id in env:
            replacement = nodes.copy(env[node.id])
            if isinstance(node.ctx, gast.Store):
                replacement = nodes.with_store_ctx(replacement)
            return _slices_as_calls(replacement)
        value = self.inst._global(node.id)
        if value is np:
            return nodes.name(self.inst.site.module_name)
        if _scipy_module(value):
            return nodes.dotted(value.__name__)
        if isinstance(value, types.FunctionType) and _runtime_helper(node.id, value):
            return nodes.dotted(f"rt.{node.id}")
        return node

    def visit_Subscript(self, node):
        # operands[1] of a *operands parameter: that operand.
        if isinstance(node.value, gast.Name) and isinstance(self.inst.env.get(node.value.id), gast.Tuple) \
                and isinstance(node.slice, gast.Constant) and type(node.slice.value) is int:
            return nodes.copy(self.inst.env[node.value.id].elts[node.slice.value])
        # An index bound to a parameter keeps its slice syntax inside [ ].
        if isinstance(node.slice, gast.Name) and node.slice.id in self.inst.env:
            node.value = self.visit(node.value)
            node.slice = nodes.copy(self.inst.env[node.slice.id])
            return node
        return self.generic_visit(node)

    def visit_Call(self, node):
        value = self.inst._static(node)
        if value is not UNKNOWN and is_literal(value):
            return literal(value)
        fn = self.inst._callee(node.func)
        if fn is runtime.unbroadcast and isinstance(node.args[1], gast.Name) \
                and node.args[1].id in self.inst.site.same_shape:
            return self.visit(node.args[0])
        return self.generic_visit(node)

    def visit_BinOp(self, node):
        value = self.inst._static(node)
        if value is not UNKNOWN and is_literal(value):
            return literal(value)
        node = self.generic_visit(node)
        return simplify(node)

    def visit_Compare(self, node):
        value = self.inst._static(node)
        if value is not UNKNOWN and is_literal(value):
            return literal(value)
        return self.generic_visit(node)


def _is_const(node, value) -> bool:
    return isinstance(node, gast.Constant) and type(node.value) in (int, float) and node.value == value


def simplify(node):
    """``e ** 1 -> e``, ``e * 1 -> e``, ``1 * e -> e``, ``e / 1 -> e``."""
    if isinstance(node, gast.BinOp):
        if isinstance(node.op, (gast.Pow, gast.Div)) and _is_const(node.right, 1):
            return node.left
        if isinstance(node.op, gast.Mult):
            if _is_const(node.right, 1):
                return node.left
            if _is_const(node.left, 1):
                return node.right
    return node


def _slices_as_calls(node):
    """An index used outside ``[...]``: ``1:3`` becomes ``slice(1, 3, None)``."""
    if isinstance(node, gast.Slice):
        parts = [p if p is not None else nodes.const(None) for p in (node.lower, node.upper, node.step)]
        return nodes.call("slice", parts)
    if isinstance(node, gast.Tuple):
        node.elts = [_slices_as_calls(e) for e in node.elts]
    return node
