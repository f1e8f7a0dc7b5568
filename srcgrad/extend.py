"""HIPS autograd's way of defining a primitive: ``@primitive``, ``defvjp``, ``defjvp``.

Programs written for autograd run with their import line changed
(``from srcgrad.extend import defvjp, primitive``).  This module adapts autograd's
spelling to srcgrad's rule registry (``rules/registry.py``, which also holds
``srcgrad.custom_adjoint``); it has no machinery of its own.  autograd's *vjp makers*
are curried, ``maker(ans, *args, **kwargs) -> (lambda g: x_bar)``, one per
argument; a registry rule takes everything at once, ``rule(ans_bar, ans, *args) ->
(x_bar, y_bar)``.  ``defvjp`` writes one rule from the makers, in one of two ways:

* **Inlined** (the usual case): where each maker reads only its parameters and its
  module's globals and returns ``lambda g: <expr>`` (or a nested ``def`` of ``g``),
  its body becomes the rule's source, so the compiler inlines it at each call like
  any rule written with NumPy, and forward mode can differentiate the gradient code
  again (``grad`` of ``grad``, ``hvp``)::

      def logsumexp_vjp(ans, x):              def logsumexp_vjp(g, ans, x):
          x_shape = x.shape                       x_shape = x.shape
          return lambda g: np.full(...) * ...     return checked_adjoint(np.full(...) * ..., x, ...)

  Its source is registered with ``linecache`` under ``<srcgrad.extend N: ...>``.
  ``checked_adjoint`` (``rt.checked_adjoint`` in the generated code) refuses an
  adjoint whose shape is not its argument's.
* **Run as written** (a maker that closes over local variables, returns a callable
  object, unpacks ``*args``...): the rule calls the makers when the gradient code
  runs (``dispatch.vjp_call``).  First derivatives only: forward mode over such
  gradient code is refused, naming the primitive.

Forward mode (``srcgrad.jvp``, and the forward sweep under ``hvp`` and ``grad`` of
``grad``) uses ``defjvp``'s makers where given; otherwise it takes the tangent from
the vjp makers, ``J v = [<vjp(e_k), v>]_k``, one vjp call per element of the output
(one call for a scalar output such as logsumexp's).
"""
from __future__ import annotations

import builtins
import inspect
import itertools
import linecache
import os
import types
from typing import Callable

import gast
import numpy as np

from . import anno, errors, nodes, runtime, templates
from .rules import registry

__all__ = ["primitive", "defvjp", "defjvp"]

_JVPS: dict[int, tuple[object, Callable]] = {}  # id(primitive) -> (primitive, tangent rule) from defjvp
_COUNT = itertools.count(1)  # numbers the inlined rules' sources (their linecache names)
_P = inspect.Parameter


def primitive(f: Callable) -> Callable:
    """Mark ``f`` a primitive: srcgrad does not look inside it, and differentiates it
    by the rules given with :func:`defvjp` (and :func:`defjvp`).

    Its body may be anything Python runs (in-place writes, calls of other libraries).
    Until ``defvjp(f, ...)``, a value being differentiated that reaches ``f`` is refused
    at compile time, naming ``f``; called on constants, it simply runs.

    Returns:
        ``f`` itself (so ``defvjp`` and the compiler meet the same object).
    """
    if not callable(f):
        raise TypeError(f"primitive takes a function, not {type(f).__name__}")
    if registry.lookup(f) is None:  # (a rule registered before, srcgrad's or yours, stays)
        # A rule without an adjoint, not declared zero-derivative: the compiler does not inline f,
        # and refuses it given a value being differentiated ("no derivative rule for `f`").
        registry._RULES[id(f)] = (f, registry.Rule(registry.label(f), None, None))
    return f


def defvjp(prim: Callable, *vjpmakers: Callable | None, argnums=None) -> None:
    """Give the primitive ``prim`` its vector-Jacobian products, as autograd's ``defvjp``.

    Args:
        prim: a function marked with :func:`primitive` (or any function with a signature).
        *vjpmakers: one per differentiated positional argument, in order:
            ``maker(ans, *args, **kwargs)`` is called with ``prim``'s output ``ans`` and the
            arguments of the call, and returns a function of ``g``, the adjoint of ``ans``
            (its shape), which returns that argument's adjoint (the argument's shape:
            ``g @ J``).  ``None`` for an argument whose derivative is zero.  A positional
            argument without a maker has no derivative rule: a value being differentiated
            passed there is refused.
        argnums: the positions the makers are for (default ``0, 1, ...``).

    Raises:
        TypeError: ``argnums`` names no positional parameter of ``prim``, or its length is
            not the number of makers; a maker that is not callable.
        srcgrad.NoDerivativeRuleError: (when a gradient runs) a maker that returned
            something other than a function, or an adjoint whose shape is not its
            argument's, at the maker's line.

    Example (HIPS autograd's ``examples/define_gradient.py``)::

        defvjp(logsumexp, lambda ans, x: lambda g: np.full(x.shape, g) * np.exp(x - ans))
    """
    signature, names = _positions(prim, vjpmakers, argnums, "defvjp")
    for maker in vjpmakers:
        if maker is not None and not callable(maker):
            raise TypeError(f"defvjp({_name(prim)}, ...) takes functions (or None), "
                            f"not {type(maker).__name__}")
    makers = dict(sorted(zip(names, vjpmakers), key=lambda item: list(signature.parameters).index(item[0])))
    rule = _inlined(prim, signature, makers) or _run_as_written(prim, signature, makers)
    jvp = _JVPS.get(id(prim))
    tangent = jvp[1] if jvp is not None and jvp[0] is prim else _tangent_from_vjps(prim, signature, makers)
    registry.defadjoint(prim, diff=tuple(makers), tangent=tangent)(rule)


def defjvp(prim: Callable, *jvpmakers: Callable | None, argnums=None) -> None:
    """Give the primitive ``prim`` its Jacobian-vector products, as autograd's ``defjvp``:
    forward mode (``srcgrad.jvp``, the forward sweep under ``hvp`` and ``hessian``) uses
    them instead of taking the tangent from the vjp makers.

    Args:
        prim: a primitive; its :func:`defvjp` may come before or after (srcgrad needs it:
            reverse mode is what ``grad`` runs, and forward mode is refused until then).
        *jvpmakers: one per positional argument: ``maker(g, ans, *args, **kwargs)``
            returns the output's tangent (``ans``'s shape) given ``g``, that argument's
            tangent (its shape); ``None`` for an argument whose derivative is zero.
            The output's tangent is their sum over the arguments that have one.
        argnums: the positions the makers are for (default ``0, 1, ...``).

    Raises:
        TypeError: as :func:`defvjp`.
    """
    signature, names = _positions(prim, jvpmakers, argnums, "defjvp")
    makers = dict(zip(names, jvpmakers))

    def tangent(ans, **given):
        dots = {name: given.pop(f"{name}_dot", None) for name in makers}
        args, kwargs = _call(signature, given)
        total = None
        for name, maker in makers.items():
            if maker is not None and dots[name] is not None:
                term = maker(dots[name], ans, *args, **kwargs)
                total = term if total is None else total + term
        return runtime.zeros_tangent(ans) if total is None else total

    _described(tangent, prim, "jvp")
    _JVPS[id(prim)] = (prim, tangent)
    rule = registry.lookup(prim)
    if rule is not None and rule.differentiable:
        registry.deftangent(prim)(tangent)


# ---- the two ways of writing the rule ---------------------------------------------------

def _run_as_written(prim, signature, makers) -> Callable:
    """The rule as a function that calls the makers when the gradient code runs."""
    def adjoint(ans_bar, ans, *args, **kwargs):
        return _adjoints(prim, signature, makers, ans_bar, ans, args, kwargs)
    _described(adjoint, prim, "vjp")
    adjoint.__signature__ = _rule_signature(signature)
    return adjoint


def _adjoints(prim, signature, makers, g, ans, args, kwargs):
    arguments = signature.bind(*args, **kwargs).arguments
    out = []
    for name, maker in makers.items():
        if maker is None:
            out.append(None)
            continue
        vjp = maker(ans, *args, **kwargs)
        if not callable(vjp):
            raise errors.NoDerivativeRuleError(
                f"the vjp maker `{_name(maker)}` given to defvjp for `{name}` of `{_name(prim)}` returned "
                f"{type(vjp).__name__}, not a function of the output's adjoint", _origin(maker),
                "return `lambda g: <the adjoint of the argument>` (autograd's curried form)")
        out.append(_checked(vjp(g), arguments.get(name), prim, name, maker))
    return out[0] if len(out) == 1 else tuple(out)


def _checked(x_bar, x, prim, name, maker):
    """``x_bar`` when it can be the adjoint of ``x`` (an array or number of its shape);
    structures (lists, dicts) are not checked."""
    if x_bar is None or not isinstance(x, (np.ndarray, np.generic, float, int)) or isinstance(x, bool):
        return x_bar
    if isinstance(x_bar, (np.ndarray, np.generic, float, int)) and np.shape(x_bar) == np.shape(x):
        return x_bar
    got = f"an array of shape {np.shape(x_bar)}" if isinstance(x_bar, (np.ndarray, np.generic, float, int)) \
        else f"a {type(x_bar).__name__}"
    raise errors.NoDerivativeRuleError(
        f"the vjp given to defvjp for `{name}` of `{_name(prim)}` returned {got}, where `{name}` has shape "
        f"{np.shape(x)}", _origin(maker),
        "return the adjoint of the argument, of its shape: the output's adjoint `g` times the "
        "Jacobian (for a scalar output, `g * <the gradient>`)")


def _inlined(prim, signature, makers) -> Callable | None:
    """The rule written out from the makers' own source (see the module's docstring), or
    None where a maker is not of that form."""
    params = list(signature.parameters.values())
    if any(p.kind in (_P.VAR_POSITIONAL, _P.VAR_KEYWORD, _P.KEYWORD_ONLY) for p in params):
        return None
    primal = [p.name for p in params]
    parts = []
    for name, maker in makers.items():
        part = None if maker is None else _body_of(maker, primal)
        if maker is not None and part is None:
            return None
        parts.append((name, maker, part))
    given = [part for _, _, part in parts if part is not None]
    if not given or len({id(m.__globals__) for m in makers.values() if m is not None}) > 1:
        return None  # (the rule reads one module's globals)
    g, ans = given[0]["g"], given[0]["ans"]
    if {g, ans} & set(primal) or g == ans:
        return None
    reserved = set(primal) | {g, ans, "checked_adjoint"}
    statements, results, seen = [], [], set()
    for name, maker, part in parts:
        if part is None:
            results.append("None")
            continue
        renames = dict(zip(part["params"], [ans] + primal)) | {part["g"]: g}
        renames = {old: new for old, new in renames.items() if old != new}
        own = reserved | set(part["params"]) | {part["g"]}
        if set(renames.values()) & part["names"] or part["stored"] & own \
                or part["names"] & (seen - reserved) or "checked_adjoint" in part["names"]:
            return None  # (a clash of names, a parameter reassigned: run the makers as written)
        seen |= part["names"]
        for stmt in part["statements"]:
            statements.append(nodes.to_source(_renamed(stmt, renames)))
        expr = nodes.to_source(_renamed(part["expr"], renames))
        results.append(f"checked_adjoint({expr}, {name}, {_name(prim)!r}, {name!r}, {part['where']!r})")
    fn_name = f"{getattr(prim, '__name__', 'primitive')}_vjp"
    if not fn_name.isidentifier():
        fn_name = "primitive_vjp"
    body = [line for stmt in statements for line in stmt.splitlines()] + [f"return {', '.join(results)}"]
    source = f"def {fn_name}({', '.join([g, ans] + primal)}):\n" + "".join(f"    {line}\n" for line in body)
    filename = f"<srcgrad.extend {next(_COUNT)}: {_name(prim)}'s vjp>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    namespace: dict = {}
    exec(compile(source, filename, "exec"), {"__builtins__": builtins}, namespace)
    first = next(maker for _, maker, part in parts if part is not None)
    scope = _Scope(first.__globals__, {"checked_adjoint": runtime.checked_adjoint})
    rule = types.FunctionType(namespace[fn_name].__code__, scope, fn_name)
    _described(rule, prim, "vjp")
    rule.__signature__ = _rule_signature(signature, (g, ans))
    return rule


class _Scope(dict):
    """The globals of an inlined rule: its makers' module's, read when used (so a global
    defined after ``defvjp``, or rebound, is seen), under ``checked_adjoint``."""

    def __init__(self, module: dict, own: dict):
        super().__init__(own)
        self.module = module

    def __missing__(self, name):
        return self.module[name]

    def __contains__(self, name) -> bool:
        return dict.__contains__(self, name) or name in self.module

    def get(self, name, default=None):
        return self[name] if name in self else default


# What a maker's statements may not hold to be inlined: new scopes, exits, declarations.
_NOT_IN_A_MAKER = (gast.Lambda, gast.FunctionDef, gast.AsyncFunctionDef, gast.ClassDef, gast.Return,
                   gast.Yield, gast.YieldFrom, gast.Await, gast.Global, gast.Nonlocal, gast.ListComp,
                   gast.SetComp, gast.DictComp, gast.GeneratorExp)


def _body_of(maker, primal) -> dict | None:
    """A maker of the form ``def maker(ans, <one per primal parameter>): <statements>;
    return lambda g: <expr>`` (or ``def vjp(g): ...; return vjp``, or a ``lambda``) taken
    apart: its parameters, ``g``, the statements, ``<expr>``, the names it reads and
    stores, where it returns.  None for any other form."""
    if type(maker) is not types.FunctionType or maker.__closure__ or maker.__defaults__ \
            or maker.__kwdefaults__:
        return None
    try:
        fdef = templates._parse(maker)  # (a lambda found in its file, as srcgrad's rules are)
    except (errors.UserCodeError, OSError, TypeError, SyntaxError):
        return None
    args = fdef.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.defaults:
        return None
    params = [a.id for a in args.posonlyargs + args.args]
    if len(params) != 1 + len(primal):
        return None
    body = list(fdef.body)
    if body and isinstance(body[0], gast.Expr) and isinstance(body[0].value, gast.Constant):
        body = body[1:]  # docstring
    if not body or not isinstance(body[-1], gast.Return) or body[-1].value is None:
        return None
    returned, statements = body[-1].value, body[:-1]
    if isinstance(returned, gast.Lambda):
        inner, expr, lam_args, at = [], returned.body, returned.args, returned
    elif isinstance(returned, gast.Name) and statements and isinstance(statements[-1], gast.FunctionDef) \
            and statements[-1].name == returned.id and not statements[-1].decorator_list:
        vjp = statements.pop()
        inner = [s for s in vjp.body[:-1]
                 if not (isinstance(s, gast.Expr) and isinstance(s.value, gast.Constant))]
        last = vjp.body[-1]
        if not isinstance(last, gast.Return) or last.value is None:
            return None
        expr, lam_args, at = last.value, vjp.args, last
    else:
        return None
    if lam_args.vararg or lam_args.kwarg or lam_args.kwonlyargs or lam_args.defaults or lam_args.posonlyargs \
            or len(lam_args.args) != 1:
        return None
    g = lam_args.args[0].id
    statements = statements + inner
    if g in params or any(isinstance(n, _NOT_IN_A_MAKER) for s in statements + [expr] for n in nodes.walk(s)):
        return None
    found = [n for s in statements + [expr] for n in nodes.walk(s) if isinstance(n, gast.Name)]
    if any(n.id == returned.id for n in found) if isinstance(returned, gast.Name) else False:
        return None  # (the nested def used as a value)
    line = getattr(at, "lineno", 1)
    if maker.__name__ != "<lambda>":
        line += maker.__code__.co_firstlineno - 1
    return {"params": params, "g": g, "ans": params[0], "statements": statements, "expr": expr,
            "names": {n.id for n in found}, "stored": {n.id for n in found if isinstance(n.ctx, gast.Store)},
            "where": f"{os.path.basename(maker.__code__.co_filename)}:{line}"}


def _renamed(node, renames: dict):
    """A copy of ``node`` with each name in ``renames`` replaced."""
    node = nodes.copy(node)
    for n in nodes.walk(node):
        if isinstance(n, gast.Name) and n.id in renames:
            n.id = renames[n.id]
    return node


# ---- forward mode ------------------------------------------------------------------------

def _tangent_from_vjps(prim, signature, makers) -> Callable:
    """The tangent rule ``J v`` got from the vjp makers: ``sum_k vjp(e_k) . v`` for each
    element ``k`` of the output (one vjp for a scalar output)."""
    def tangent(ans, **given):
        dots = {name: given.pop(f"{name}_dot", None) for name in makers}
        args, kwargs = _call(signature, given)
        if not isinstance(ans, (np.ndarray, np.generic, float, int)):
            raise errors.NoDerivativeRuleError(
                f"forward mode through `{_name(prim)}`, whose output is a {type(ans).__name__}, needs its "
                "jvp", _origin(prim), f"give one with srcgrad.extend.defjvp({_name(prim)}, ...)")
        total = np.zeros(np.shape(ans), np.result_type(ans, float))
        for name, maker in makers.items():
            v = dots[name]
            if maker is None or v is None:
                continue
            vjp = maker(ans, *args, **kwargs)
            for k in np.ndindex(np.shape(ans)):
                e = np.zeros_like(total)
                e[k] = 1.0
                total[k] += np.sum(vjp(e) * v)
        return total if np.ndim(ans) else total[()]
    return _described(tangent, prim, "jvp")


# ---- helpers -----------------------------------------------------------------------------

def _positions(prim, makers, argnums, what):
    """``(prim's signature, the names of the parameters the makers are for)``."""
    try:
        signature = inspect.signature(prim)
    except (TypeError, ValueError):
        raise TypeError(f"{what} needs a function whose parameters Python can read, not {prim!r}") from None
    params = list(signature.parameters.values())
    argnums = tuple(range(len(makers))) if argnums is None else tuple(argnums)
    if len(argnums) != len(makers):
        raise TypeError(f"{what}({_name(prim)}, ...) was given {len(makers)} makers for argnums={argnums}")
    names = []
    for n in argnums:
        if type(n) is not int or not 0 <= n < len(params) \
                or params[n].kind not in (_P.POSITIONAL_ONLY, _P.POSITIONAL_OR_KEYWORD):
            raise TypeError(f"{what}({_name(prim)}, ...): argnum {n!r} is not a positional parameter of "
                            f"{_name(prim)}{signature}")
        names.append(params[n].name)
    if len(set(names)) != len(names):
        raise TypeError(f"{what}({_name(prim)}, ...): argnums {argnums} repeats a position")
    return signature, names


def _rule_signature(signature, leading=("ans_bar", "ans")) -> inspect.Signature:
    """``(ans_bar, ans, <prim's parameters>)``: the registry reads the primal's parameters
    (names, defaults) from the rule's signature."""
    taken = set(signature.parameters)
    first = [f"{name}_" if name in taken else name for name in leading]
    return signature.replace(parameters=[_P(name, _P.POSITIONAL_ONLY) for name in first]
                             + list(signature.parameters.values()), return_annotation=_P.empty)


def _call(signature, arguments: dict):
    """``(args, kwargs)`` of a call binding ``arguments`` (parameter name -> value)."""
    bound = inspect.BoundArguments(signature, {name: arguments[name] for name in signature.parameters
                                               if name in arguments})
    return bound.args, bound.kwargs


def _described(fn, prim, what):
    """Names ``fn`` after ``prim`` (``logsumexp_vjp``) and makes it a rule of the user's module
    (srcgrad reads a rule of its own modules' as one of NumPy's names and conventions)."""
    fn.__name__ = f"{getattr(prim, '__name__', 'primitive')}_{what}"
    fn.__qualname__ = f"{getattr(prim, '__qualname__', fn.__name__)}_{what}"
    fn.__module__ = getattr(prim, "__module__", None) or "__main__"
    return fn


def _name(fn) -> str:
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _origin(fn) -> anno.Origin | None:
    """Where ``fn`` is defined (its first line), for an error about it."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    text = linecache.getline(code.co_filename, code.co_firstlineno).rstrip("\n")
    return anno.Origin(code.co_filename, code.co_firstlineno, len(text) - len(text.lstrip()), text)


# rt.checked_adjoint, which the inlined rules return through, is the identity on the adjoint
# it checks: forward mode over gradient code (hvp, grad of grad) differentiates through it.
@registry.defadjoint(runtime.checked_adjoint, diff=("g",), zero=("x",), tangent="linear",
                     ndim=lambda ndims, statics: ndims.get("g"))
def _checked_adjoint(ans_bar, ans, g, x, rule, param, where=""):
    return ans_bar
