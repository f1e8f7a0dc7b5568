"""``fixed_point`` (HIPS autograd's ``autograd.misc.fixed_points``): iterate ``x = f(a)(x)``
to a fixed point, with the gradient with respect to ``a`` by the implicit function
theorem rather than through the iterations.

At a fixed point ``x* = F(a, x*)`` (``F(a, x) = f(a)(x)``), ``dx*/da = (I - ∂F/∂x)^-1
∂F/∂a``, so ``a_bar = ∂F/∂a^T w`` where ``w = x_bar + ∂F/∂x^T w``: ``w`` is itself the
fixed point of a linear map, found by the same iteration from zero (Christianson 1994,
"Reverse accumulation and attractive fixed points", Optimization Methods and Software
3(4)).  Both products are vector-Jacobian products of ``F`` that srcgrad compiles
(:func:`srcgrad.vjp`), so this module sits above the API and registers
``fixed_point``'s rule when it is imported.

``F`` is ``f`` uncurried: ``f``'s body followed by the body of the function it returns,
as one ``def`` of ``(a, x)`` (:func:`uncurried`), since srcgrad differentiates a
returned closure only in its own argument.
"""
from __future__ import annotations

import ast
import inspect
import linecache
import textwrap
import types
import weakref

import numpy as np

from .. import anno, api, errors, tree
from ..rules import _ndim
from ..rules.registry import defadjoint


def fixed_point(f, a, x0, distance, tol):
    """The fixed point of ``f(a)`` reached from ``x0``.

    Iterates ``x = f(a)(x)`` (``f(a)`` made once) until ``distance(x, previous) <= tol``.

    Args:
        f: ``f(a) -> step``, ``step(x)`` of ``x``'s shape: a contraction near the fixed
            point.  For the gradient, ``f`` must be a ``def`` whose last statement returns
            the step (a ``lambda`` or a nested ``def``), see :func:`uncurried`.
        a: the parameters: a float, an array, or a structure of them.
        x0: the start, an array or float of the fixed point's shape.
        distance: ``distance(x, y) -> float``, e.g. ``np.max(np.abs(x - y))``.
        tol: the distance at which to stop.

    Returns:
        The last iterate, ``x0``'s shape.

    The gradient with respect to ``a`` is :func:`fixed_point_adjoint`'s; with respect to
    ``x0`` and ``tol`` it is zero; its tangent is :func:`fixed_point_tangent`'s.
    """
    step = f(a)
    x, previous = step(x0), x0
    while distance(x, previous) > tol:
        x, previous = step(x), x
    return x


def fixed_point_adjoint(ans_bar, ans, f, a, distance, tol):
    """The adjoint of ``a`` in ``ans = fixed_point(f, a, x0, distance, tol)``.

    ``w = x_bar + ∂F/∂x^T w`` is solved by :func:`fixed_point` from ``w = 0`` with the same
    ``distance`` and ``tol``, then ``a_bar = ∂F/∂a^T w`` (implicit function theorem; the
    module docstring), both at ``(a, ans)``.

    Args:
        ans_bar: the adjoint of the fixed point, its shape.
        ans: the fixed point.
        f, a, distance, tol: as given to :func:`fixed_point`.

    Returns:
        ``a_bar``, ``a``'s shape (or structure).

    Raises:
        UnsupportedSyntaxError: ``f`` is not of a form :func:`uncurried` reads.
    """
    applied = uncurried(f)
    w = _weights(applied, ans_bar, ans, a, distance, tol)
    _, pull_a = _vjp(applied, 0)(a, ans)
    return pull_a(w)


def _weights(applied, ans_bar, ans, a, distance, tol):
    """``w = ans_bar + ∂F/∂x^T w`` at ``(a, ans)``, by :func:`fixed_point` from zero."""
    _, pull_x = _vjp(applied, 1)(a, ans)
    return fixed_point(lambda _: lambda w: pull_x(w) + ans_bar, None, np.zeros_like(ans), distance, tol)


def fixed_point_tangent(ans, f, a, x0, distance, tol, a_dot=None, x0_dot=None, tol_dot=None):
    """The tangent of ``ans = fixed_point(f, a, x0, distance, tol)`` along ``a_dot``: ``t = ∂F/∂x
    t + ∂F/∂a a_dot`` (the implicit function theorem read forwards), solved by
    :func:`fixed_point` from ``t = 0`` with the same ``distance`` and ``tol``; both
    products are Jacobian-vector products of ``F`` (:func:`srcgrad.jvp`), at ``(a, ans)``."""
    if a_dot is None:
        return np.zeros_like(ans)
    applied = uncurried(f)
    _, moved = _jvp(applied, 0)(a, ans, a_dot)
    return fixed_point(lambda _: lambda t: _jvp(applied, 1)(a, ans, t)[1] + moved, None, np.zeros_like(ans),
                       distance, tol)


@defadjoint(fixed_point, diff=("a",), zero=("x0", "tol"), tangent=fixed_point_tangent, ndim=_ndim.same_as("x0"))
def fixed_point_rule(ans_bar, ans, f, a, x0, distance, tol):
    """``ans = fixed_point(f, a, x0, distance, tol)``: :func:`fixed_point_adjoint`."""
    return fixed_point_adjoint(ans_bar, ans, f, a, distance, tol)


def fixed_point_rule_tangent(a_bar, ans_bar, ans, f, a, x0, distance, tol, ans_bar_dot=None, ans_dot=None,
                             a_dot=None):
    """The tangent of the adjoint ``a_bar = ∂F/∂a^T w``, ``w = ans_bar + ∂F/∂x^T w``
    (:func:`fixed_point_adjoint`), along the tangents of ``ans_bar``, of the fixed point
    ``ans`` and of ``a``: what forward mode over a gradient's code needs (``grad(grad(f))``,
    ``hvp``).

    With ``φ(a, x) = ⟨w, F(a, x)⟩`` for the ``w`` of these arguments held fixed, the second
    derivatives ``(h_a, h_x)`` of ``φ`` along ``(a_dot, ans_dot)`` (``srcgrad.hvp`` of
    :func:`_paired`), ``w``'s tangent solves ``t = ans_bar_dot + h_x + ∂F/∂x^T t`` (the
    same iteration, from zero), and ``a_bar``'s is ``∂F/∂a^T t + h_a``.
    """
    from .. import higher

    applied = uncurried(f)
    w = _weights(applied, ans_bar, ans, a, distance, tol)
    da = _zeros(a) if a_dot is None else a_dot
    dx = np.zeros_like(ans, dtype=float) if ans_dot is None else ans_dot
    h_a, h_x = higher.hvp(_paired(applied), wrt=(0, 1))(a, ans, w, (da, dx))
    moved = h_x if ans_bar_dot is None else ans_bar_dot + h_x
    t = _weights(applied, moved, ans, a, distance, tol)
    _, pull_a = _vjp(applied, 0)(a, ans)
    return tree.add(pull_a(t), h_a)  # (a structure's adjoints: leaf by leaf)


def _zeros(a):
    """Zeros of ``a``'s shape (each leaf's, for a structure): a tangent that moves nothing."""
    if not tree.is_structure(a):
        return np.zeros_like(a, dtype=float)
    _, leaves, spec = tree.flatten(a)
    return tree.unflatten(spec, [np.zeros_like(leaf, dtype=float) for leaf in leaves])


@defadjoint(fixed_point_rule, diff=("ans_bar", "ans", "a"), zero=("x0", "tol"), tangent=fixed_point_rule_tangent,
            ndim=_ndim.same_as("a"))
def fixed_point_rule_transposed(u, a_bar, ans_bar, ans, f, a, x0, distance, tol):
    """Reverse mode over the adjoint of ``fixed_point`` (a third derivative, or a reverse-mode
    jacobian of a gradient through it): not derived; refused."""
    raise errors.UnsupportedSyntaxError(
        "srcgrad differentiates fixed_point's adjoint in forward mode only (grad(grad(f)), hvp, "
        "hessian), not in reverse mode (a third derivative)", None,
        "take the third derivative by central differences of the second")


_PAIRED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # F -> its pairing φ


def _paired(applied):
    """``φ(a, x, w) = Σ w F(a, x)`` as a function with source (its gradient in ``(a, x)`` is
    ``F``'s two vector-Jacobian products of ``w``), registered with linecache."""
    made = _PAIRED.get(applied)
    if made is None:
        name = f"{applied.__name__}_paired"
        source = f"def {name}(a, x, w):\n    return _np.sum(w * _F(a, x))\n"
        filename = f"<srcgrad: {name}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
        scope = {"_np": np, "_F": applied}
        exec(compile(source, filename, "exec"), scope)
        made = _PAIRED[applied] = scope[name]
    return made


_TRANSFORMED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # uncurried F -> {(mode, wrt): made}


def _transformed(transform, applied, wrt):
    """``transform(applied, wrt)`` (``api.vjp``, ``api.jvp``), made once per ``F``."""
    made = _TRANSFORMED.setdefault(applied, {})
    if (transform, wrt) not in made:
        made[transform, wrt] = transform(applied, wrt)
    return made[transform, wrt]


def _jvp(applied, wrt):
    return _transformed(api.jvp, applied, wrt)


def _vjp(applied, wrt):
    return _transformed(api.vjp, applied, wrt)


_UNCURRIED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # f -> uncurried(f)


def uncurried(f):
    """``F(a, x) = f(a)(x)`` as one function with source, which srcgrad differentiates in both.

    ``f`` is a ``def`` of one parameter whose last statement returns the step: ``return
    lambda x: ...`` or ``return step`` for a ``def step(x): ...`` of its body.  ``F`` runs
    ``f``'s statements, binds the step's parameter to its second argument, and runs the
    step's statements::

        def newton(a):                             def newton_applied(a, x):
            return lambda x: 0.5 * (x + a / x)  →       return 0.5 * (x + a / x)

    It reads ``f``'s globals and closure; its source is registered with linecache under
    ``<srcgrad: fixed point of newton>``.

    Raises:
        UnsupportedSyntaxError: ``f`` of another form (a lambda, a step not returned last,
        a step of several parameters, a step parameter also named in ``f``).
    """
    made = _UNCURRIED.get(f)
    if made is None:
        made = _UNCURRIED[f] = _uncurry(f)
    return made


def _uncurry(f):
    code = getattr(f, "__code__", None)
    try:
        definition = ast.parse(textwrap.dedent(inspect.getsource(f))).body[0]
    except (OSError, TypeError, SyntaxError, IndexError):
        definition = None
    problem = _unsupported(definition, code)
    if problem is None:
        *body, last = definition.body
        inner = last.value
        if isinstance(inner, ast.Lambda):
            parameters, steps = inner.args, [ast.Return(inner.body)]
        else:
            nested = next(s for s in body if isinstance(s, ast.FunctionDef) and s.name == inner.id)
            body.remove(nested)
            parameters, steps = nested.args, nested.body
        x = parameters.args[0].arg if len(parameters.args) == 1 and not (
            parameters.posonlyargs or parameters.kwonlyargs or parameters.vararg or parameters.kwarg
            or parameters.defaults) else None
        outer_names = {n.id for s in body for n in ast.walk(s) if isinstance(n, ast.Name)}
        outer_names |= {p.arg for p in definition.args.args}
        if x is None:
            problem = "the step it returns does not take exactly one parameter"
        elif x in outer_names:
            problem = f"the step's parameter `{x}` is also a name of `{f.__name__}` itself"
    if problem is not None:
        raise errors.UnsupportedSyntaxError(
            f"srcgrad's fixed_point differentiates `{getattr(f, '__name__', f)}` as `f(a)(x)` made one "
            f"function of `(a, x)`, and cannot here: {problem}", anno.origin_of(f),
            "write f as a `def` of one parameter whose last statement returns the step: "
            "`return lambda x: ...`, or `return step` after `def step(x): ...`")
    name = f"{f.__name__}_applied"
    # Inside a def binding f's free names, so the step reads f's closure cells as f does.
    free = list(code.co_freevars)
    statements = "\n".join(ast.unparse(s) for s in body + steps)
    source = ("def _closure():\n" + "".join(f"    {n} = None\n" for n in free)
              + f"    def {name}({definition.args.args[0].arg}, {x}):\n"
              + textwrap.indent(statements, " " * 8) + f"\n    return {name}\n")
    filename = f"<srcgrad: fixed point of {f.__qualname__}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    outer = compile(source, filename, "exec").co_consts
    inner = next(c for c in outer if isinstance(c, types.CodeType)).co_consts
    inner = next(c for c in inner if isinstance(c, types.CodeType) and c.co_name == name)
    cells = dict(zip(free, f.__closure__ or ()))
    return types.FunctionType(inner, f.__globals__, name, None, tuple(cells[n] for n in inner.co_freevars))


def _unsupported(definition, code) -> str | None:
    if code is None or not isinstance(definition, ast.FunctionDef):
        return "it is not a `def` whose source srcgrad reads (a lambda, or a function without source)"
    arguments = definition.args
    if len(arguments.args) != 1 or arguments.posonlyargs or arguments.kwonlyargs or arguments.vararg \
            or arguments.kwarg or definition.decorator_list:
        return "it does not take exactly one parameter, undecorated"
    last = definition.body[-1]
    if not isinstance(last, ast.Return) or not (
            isinstance(last.value, ast.Lambda) or isinstance(last.value, ast.Name) and any(
                isinstance(s, ast.FunctionDef) and s.name == last.value.id for s in definition.body[:-1])):
        return "its last statement does not return a `lambda` or a `def` of its body"
    return None
