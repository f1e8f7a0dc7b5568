"""Numba's subset (``backend="numba"``): the assembled program rewritten where numba
compiles another spelling of it, and refused, at the user's line, where numba compiles
none — before anything runs, so the user never reads a numba typing traceback.

Requires: the assembled module (``emit.reverse_module`` / ``forward_module``), its
statements annotated with their ``group`` (the user's line they came from).
Guarantees: the same program, with

* ``for i in reversed(range(n))`` written ``for i in range(n - 1, -1, -1)`` (and
  ``reversed(range(a, b))`` ``range(b - 1, a - 1, -1)``): numba has no ``reversed``;
* a Python float beside a value in arithmetic (a literal ``0.001``, the seed ``y_bar``)
  written ``rt.weak(0.001, x) * x``: NumPy 2 reads such a float as "weak" (a float32 ``x``
  stays float32), numba as a float64 (a float32 array would become a float64 one, which
  neither unifies with the float32 array a loop carries nor multiplies a float32 matrix);
  ``rt.weak`` gives it ``x``'s float type when numba compiles, and costs nothing when it runs;
* ``np.zeros_like(x)`` written ``rt.zeros_like(x)``: a number's zero a number (numba's
  ``np.zeros_like(0.5)`` is a 0-d array, which does not unify with a float);
* every call's target one numba compiles: a NumPy function numba implements
  (``backends.numba.supports``), a helper ``rt.<name>`` that has a numba form in
  ``backends/numba_runtime.py``, a builtin numba knows (``range``, ``len``, ``min``);

and refuses (``UnsupportedSyntaxError`` at the user's line, advising ``backend="numpy"``):
a parameter that is not a number or an array (a dict, a list, an object), ``vjp``'s
pullback closure, a ``with`` block, a nested function, a dict or set display, a call of
anything else (``np.einsum``, ``dispatch.vjp_call``, a callee's compiled vjp), and a
read of a global or closure variable (numba would compile its value in as a constant,
so that a later change went unseen: pass it as an argument).

Before::

    for i in reversed(range(_t6)):
        _t10_shape, h = loop1_stack.pop()
        _t10_bar = rt.unbroadcast_to(_t11_bar, _t10_shape)

After (``rt`` is ``srcgrad.backends.numba_runtime`` there)::

    for i in range(_t6 - 1, -1, -1):
        _t10_shape, h = loop1_stack.pop()
        _t10_bar = rt.unbroadcast_to(_t11_bar, _t10_shape)
"""
from __future__ import annotations

import builtins

import gast

from .. import anno, errors, nodes
from ..backends import numba as numba_backend

ADVICE = "use backend='numpy' for this function"
_REFUSED_NODES = {
    gast.With: "a `with` block",
    gast.FunctionDef: "a nested function",
    gast.Lambda: "a lambda",
    gast.Dict: "a dict",
    gast.Set: "a set",
    gast.Try: "a `try` block",
    gast.JoinedStr: "an f-string",
    gast.Yield: "a generator",
}
_MODULES = {"np", "rt", "math"}  # what the generated module imports, which numba reads as modules
# NumPy calls whose numba form differs for a number: ``np.zeros_like(0.5)`` is a 0-d array
# in numba, which does not unify with the float an adjoint is after its first update.
_RESPELLED = {"np.zeros_like": "rt.zeros_like"}


def transform(module: gast.Module, fn, mode: str, param_ranks: tuple) -> gast.Module:
    """``module`` in numba's subset (rewritten in place and returned).

    Args:
        module: the assembled program, one function.
        fn: the user's function (its ``def`` line is where an argument's refusal points).
        mode: ``Options.mode``.
        param_ranks: the rank each argument is specialised on (``rank_of_argument``).

    Raises:
        errors.UnsupportedSyntaxError: what numba does not compile, at the user's line.
    """
    fdef = next(s for s in module.body if isinstance(s, gast.FunctionDef))
    where = anno.origin_of(fn)
    if mode in ("vjp", "pullback"):
        raise errors.UnsupportedSyntaxError(
            f"backend='numba' compiles grad, value_and_grad and jvp; {mode} returns a pullback "
            "closure, which numba cannot return", where, ADVICE)
    for param, rank in zip(fdef.args.args, param_ranks):
        if not isinstance(rank, int):
            kind = getattr(rank, "kind", None) or "an object (or a value of unknown kind)"
            kind = {"sequence": "a list or tuple", "mapping": "a dict"}.get(kind, kind)
            raise errors.UnsupportedSyntaxError(
                f"backend='numba' compiles functions of numbers and NumPy arrays; argument "
                f"`{param.id}` is {kind}", where,
                f"pass its arrays as arguments of their own, or {ADVICE}")
    seed = fdef.args.args[-1].id if fdef.args.defaults and mode != "jvp" else None
    _Subset(fdef, seed).visit_block(fdef.body, None)
    return module


class _Subset:
    """One walk over the generated function: rewrites and refusals, each at the group
    (the user's line) of the statement it is in."""

    def __init__(self, fdef: gast.FunctionDef, seed: str | None):
        self.seed = seed
        self.local = {a.id for a in fdef.args.args} | {
            n.id for n in nodes.walk(fdef) if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store)}

    def visit_block(self, stmts, group):
        for stmt in stmts:
            here = anno.get(stmt, "group") if anno.has(stmt, "group") else group
            if isinstance(stmt, gast.For):
                stmt.iter = _reversed_range(stmt.iter) or stmt.iter
            if isinstance(stmt, (gast.For, gast.While, gast.If)):
                self.check(stmt.iter if isinstance(stmt, gast.For) else stmt.test, here)
                self.visit_block(stmt.body, here)
                self.visit_block(stmt.orelse, here)
            else:
                self.check(stmt, here)

    def check(self, node, group):
        if _is_comment(node):
            return
        for sub in nodes.walk(node):
            what = _REFUSED_NODES.get(type(sub))
            if what is not None:
                self.refuse(f"{what} in the generated code", group)
            if isinstance(sub, gast.BinOp):
                self.weaken(sub)
            if isinstance(sub, gast.Call):
                if _dotted(sub.func) in _RESPELLED:
                    sub.func = nodes.dotted(_RESPELLED[_dotted(sub.func)])
                self.check_call(sub.func, group)
            elif isinstance(sub, gast.Attribute) and isinstance(sub.ctx, gast.Load):
                path = _dotted(sub)  # (a global is read live as ``module.NAME``: ``NAME`` is the user's)
                if path is not None and not self.known(path.split(".")[0]):
                    self.check_name(path.split(".", 1)[1], group)
            elif isinstance(sub, gast.Name) and isinstance(sub.ctx, gast.Load):
                self.check_name(sub.id, group)

    def weaken(self, op: gast.BinOp):
        """``rt.weak(c, x)`` for a Python float ``c`` (a literal, the seed) beside ``x``."""
        for side, other in (("left", op.right), ("right", op.left)):
            value = getattr(op, side)
            weak = isinstance(value, gast.Constant) and type(value.value) is float or (
                isinstance(value, gast.Name) and value.id == self.seed)
            like = next((n for n in nodes.walk(other) if isinstance(n, gast.Name) and n.id in self.local
                         and n.id != self.seed), None)
            if weak and like is not None:
                setattr(op, side, nodes.call("rt.weak", [value, nodes.name(like.id)]))

    def check_call(self, func, group):
        path = _dotted(func)
        if path is None:
            return  # a method of a value (``h.reshape(s)``): numba's typing decides, when first called
        head, *rest = path.split(".")
        if head == "rt":
            from ..backends import numba_runtime
            if not hasattr(numba_runtime, rest[0]):
                self.refuse(f"srcgrad's runtime helper `rt.{rest[0]}` (what the derivative here calls) "
                            "has no numba form yet", group)
        elif head in ("np", "math"):
            target = _resolve(path)
            if target is None or not numba_backend.supports(target):
                self.refuse(f"numba does not compile `{path}` (what the derivative here calls)", group)
        elif head not in self.local and not (not rest and _builtin(head)):
            self.refuse(f"the generated code calls `{path}`, which numba cannot compile "
                        "(a call compiled when it runs, or a function that is not NumPy's)", group)

    def known(self, name) -> bool:
        return name in self.local or name in _MODULES or _builtin(name)

    def check_name(self, name, group):
        if self.known(name):
            return
        self.refuse(f"the function reads `{name}` from outside it (a global or closure variable); numba "
                    "compiles such a value in as a constant, so a later change would go unseen", group,
                    f"pass `{name}` as an argument, or {ADVICE}")

    @staticmethod
    def refuse(problem, group, advice=ADVICE):
        raise errors.UnsupportedSyntaxError(f"backend='numba': {problem}", group, advice)


def _reversed_range(node):
    """``range(n - 1, -1, -1)`` for ``reversed(range(n))`` (``range(b - 1, a - 1, -1)`` for
    ``reversed(range(a, b))``), else None."""
    if not (isinstance(node, gast.Call) and _dotted(node.func) == "reversed" and len(node.args) == 1):
        return None
    inner = node.args[0]
    if not (isinstance(inner, gast.Call) and _dotted(inner.func) == "range" and 1 <= len(inner.args) <= 2
            and not inner.keywords):
        return None
    start, stop = inner.args if len(inner.args) == 2 else (nodes.const(0), inner.args[0])
    return nodes.call("range", [_minus_one(stop), _minus_one(start), nodes.const(-1)])


def _minus_one(node):
    if isinstance(node, gast.Constant) and type(node.value) is int:
        return nodes.const(node.value - 1)
    return nodes.binop(nodes.copy(node), "-", nodes.const(1))


def _dotted(node) -> str | None:
    if isinstance(node, gast.Name):
        return node.id
    if isinstance(node, gast.Attribute):
        inner = _dotted(node.value)
        return None if inner is None else f"{inner}.{node.attr}"
    return None


def _resolve(path: str):
    import math

    import numpy as np
    target = {"np": np, "math": math}[path.split(".")[0]]
    for part in path.split(".")[1:]:
        target = getattr(target, part, None)
    return target


def _builtin(name: str) -> bool:
    value = getattr(builtins, name, None)
    return value is not None and numba_backend.supports(value)


def _is_comment(node) -> bool:
    return isinstance(node, gast.Expr) and isinstance(node.value, gast.Constant) and isinstance(
        node.value.value, str) and node.value.value.startswith(nodes.COMMENT_MARK)
