"""Higher-order derivatives by composition: forward mode over the code that
reverse mode generated.

A gradient function's code is ordinary Python, loaded with its source
(``emit.load`` registers it with linecache), and the runtime helpers it calls
have rules of their own (``rules/adjoints.py``): so ``srcgrad.jvp`` can
transform it again.  ``jvp(grad(f))`` at ``x`` along ``v`` gives ``(∇f(x),
H(x) v)`` for about the cost of two gradients (forward-over-reverse: Pearlmutter
1994, "Fast exact multiplication by the Hessian"; Griewank & Walther 2008, §5.4).
On it rest ``hvp``, ``hessian`` and ``grad(grad(f))``; ``jacfwd``/``jacrev``
take ``jvp``/``vjp`` column by column (row by row).

Columns are a Python loop over basis vectors: the tangent rules do not yet take
a leading batch axis.
"""
from __future__ import annotations

import ast
import functools
import os

import numpy as np

from . import errors, tree
from .api import GradientFunction, _match, _origin_of
from .rules import registry


class ForwardOverReverse:
    """``(args, tangents) -> (gradient, its tangent)``: forward mode over the code of
    ``gradient`` (a ``grad`` function), the tangents given for the parameters ``wrt``
    (names).  One forward-mode program per gradient program (per argument ranks)."""

    def __init__(self, gradient: GradientFunction, wrt: tuple):
        options = gradient.options
        if options.mode != "grad" or options.has_aux or options.intermediates or options.hooks \
                or not gradient._whole or gradient._variadic:
            raise errors.UnsupportedSyntaxError(
                "srcgrad differentiates the gradient of a function once more only for srcgrad.grad(f) of "
                "whole named parameters, without has_aux=, intermediates= or hooks=",
                _origin_of(gradient.fn), "differentiate srcgrad.grad(f, wrt=...) of the function itself")
        self.gradient, self.wrt = gradient, wrt
        self._jvps: dict = {}

    def transformed(self, args) -> GradientFunction:
        """The ``jvp`` of the gradient program for these arguments."""
        program = self.gradient.compiled(args)
        if not (program.free.refresh(program.namespace) and program.inlined.holds(args)):
            program(*args)  # (compiles it again, in place, from what the names hold now)
        fn = program.function
        transformed = self._jvps.get(fn)
        if transformed is None:
            self._refuse_calls(program)
            transformed = self._jvps[fn] = GradientFunction(
                fn, "jvp", self.wrt if len(self.wrt) > 1 else self.wrt[0], self.gradient.options.backend,
                self.gradient.options.optimize, internal=True)
        return transformed

    def source(self, args) -> str:
        """The forward-over-reverse code run for these arguments (``srcgrad.show``)."""
        return self.transformed(args).compiled(tuple(args)).source

    def __call__(self, args, tangents):
        transformed = self.transformed(args)
        try:
            return transformed(*args, tangents if len(self.wrt) > 1 else tangents[0])
        except errors.UserCodeError as error:
            if error.origin is not None and not _inside_srcgrad(error.origin.filename):
                raise  # at the user's own line (a helper of theirs): as it is
            # Forward mode met something in the gradient code, or in a runtime helper it
            # calls, that it does not differentiate: refused at the user's function.
            raise errors.UnsupportedSyntaxError(
                f"this second derivative needs forward mode over the gradient code of "
                f"{self.gradient.fn.__name__}, and that code uses something forward mode does not "
                f"differentiate yet ({error.problem})", _origin_of(self.gradient.fn),
                "take the second derivative by finite differences of srcgrad.grad, or write this "
                "step of the function with the NumPy functions and layers srcgrad documents") from None

    def _refuse_calls(self, program):
        """The gradient code calls another function's compiled vjp (a callee that was not
        inlined) or a hook: its pullback is a closure, which forward mode cannot follow."""
        read = {n.id for n in ast.walk(ast.parse(program.source)) if isinstance(n, ast.Name)}
        called = sorted(n for n in read & set(program.namespace) - {"rt"}
                        if not isinstance(program.namespace[n], type(np))
                        and registry.lookup(program.namespace[n]) is None)  # (a primitive: its rule)
        if called or "dispatch." in program.source:
            what = f"`{called[0]}`" if called else "a function known only when it runs"
            raise errors.UnsupportedSyntaxError(
                f"this second derivative needs forward mode over the gradient code of "
                f"{self.gradient.fn.__name__}, which calls {what} through its compiled vjp: forward mode "
                "does not follow a pullback closure yet", _origin_of(self.gradient.fn),
                "call plain functions srcgrad inlines (defined with `def`, known when compiling), "
                "or take the derivative by finite differences of srcgrad.grad")


def _inside_srcgrad(filename: str) -> bool:
    """A place in generated gradient code or in srcgrad's own files (not the user's)."""
    return filename.startswith("<srcgrad") or filename.startswith(_PACKAGE)


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _names(gradient, wrt) -> tuple:
    """The parameter names ``wrt`` (an index, a name or a tuple of them) refers to."""
    entries, _ = gradient._wrt_entries(wrt)
    if any(key is not None for _, key in entries):
        raise errors.WrtError("higher derivatives take whole named parameters", _origin_of(gradient.fn),
                              "pass wrt=<index or name> of a named parameter")
    return tuple(name for name, _ in entries)


def _shown(function, composed=None, gradient=None):
    """Call ``function`` with user errors located at the user's call (as ``grad``'s are).
    With ``composed`` (a :class:`ForwardOverReverse` of ``gradient``), ``srcgrad.source``
    of the result, given ``f``'s arguments, is the forward-over-reverse code."""
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except errors.UserCodeError as error:
            raise errors.shown_to_user(error) from None
    call.__srcgrad_gradient__ = True  # (refused as an argument's function in differentiated code)
    call.__name__ = call.__qualname__ = function.__name__
    if composed is not None:
        n = len(gradient._params)
        call.__srcgrad_source__ = lambda *args, **kwargs: composed.source(
            gradient._arguments(args[:n] if not gradient._variadic else args, kwargs))
    return call


def jvp_of_gradient(gradient: GradientFunction, wrt):
    """``srcgrad.jvp(srcgrad.grad(f), wrt)``: ``(*args, tangents) -> (gradient, tangent)``."""
    composed = ForwardOverReverse(gradient, _names(gradient, wrt))
    several = isinstance(wrt, (tuple, list))

    @functools.partial(_shown, composed=composed, gradient=gradient)
    def jvp_gradient(*args, **kwargs):
        *primals, tangents = args
        primals = gradient._arguments(tuple(primals), kwargs)
        dots = tuple(tangents) if several else (tangents,)
        value, tangent = composed(primals, dots)
        return _matched(value, gradient, primals), _matched(tangent, gradient, primals)
    return jvp_gradient


def _matched(values, gradient, args):
    """Gradients (or their tangents) in their primals' types, shapes and dtypes."""
    primals = [args[i] for i in gradient._wrt_index]
    if gradient._as_tuple:
        return tuple(_match(v, x) for v, x in zip(values, primals))
    return _match(values, primals[0])


def grad_of_gradient(gradient: GradientFunction, wrt):
    """``srcgrad.grad(srcgrad.grad(f, wrt=a), wrt=b)`` for a scalar ``a``.

    ``∂/∂b (∂f/∂a)`` is ``∂/∂a (∇_b f)`` (mixed partials commute for a ``C²`` ``f``;
    for ``b = a`` the two are the same expression): forward mode over the gradient
    code of ``∇_b f`` along the tangent ``1.0`` of ``a``."""
    inner = _names(gradient, gradient._wrt_spec)
    if gradient._as_tuple or len(inner) != 1:
        raise errors.NonScalarOutputError(
            "grad needs a scalar output, but the gradient with respect to several parameters is a tuple",
            _origin_of(gradient.fn), "use srcgrad.hessian or srcgrad.hvp")
    outer = GradientFunction(gradient.fn, "grad", wrt, gradient.options.backend, gradient.options.optimize)
    composed = ForwardOverReverse(outer, inner)

    @functools.partial(_shown, composed=composed, gradient=outer)
    def second_derivative(*args, **kwargs):
        args = gradient._arguments(args, kwargs)
        a = args[gradient._wrt_index[0]]
        if np.ndim(a) != 0 or tree.is_structure(a):
            raise errors.NonScalarOutputError(
                f"grad needs a scalar output, but grad({gradient.fn.__name__}) with respect to "
                f"`{inner[0]}` returns its gradient, of shape {np.shape(a)}", _origin_of(gradient.fn),
                "use srcgrad.hessian(f) for the matrix of second derivatives, or srcgrad.hvp(f)")
        outer._check_wrt(args)
        _, tangent = composed(args, (np.ones_like(a) if isinstance(a, np.ndarray) else type(a)(1.0),))
        return _matched(tangent, outer, args)
    return second_derivative


def hvp(f, wrt=0, backend=None, optimize=True):
    """Hessian-vector product of a scalar function: forward mode over its gradient's code.

    Args:
        f: a Python function with a scalar output (as for :func:`srcgrad.grad`).
        wrt: the parameter(s): an index or a name, or a tuple of them (named
            parameters, whole); each an array, a float or a structure of them.
        backend, optimize: as for :func:`srcgrad.grad`.

    Returns:
        A function taking ``f``'s arguments, then the vector ``v`` (a tuple of
        them when ``wrt`` is a tuple, each of its parameter's shape), returning
        ``H v``: the directional derivative of ``∇f`` along ``v`` (a tuple when
        ``wrt`` is a tuple: ``Σ_j H_ij v_j`` for each ``i``), in the parameters'
        shapes and floating dtypes.  Exact (no differencing), for about twice
        the cost of one gradient (Pearlmutter 1994).

    Raises:
        ValueError: a vector whose shape is not its parameter's.
        srcgrad.errors.UnsupportedSyntaxError: ``f`` calls a function srcgrad
            does not inline (its gradient code calls a compiled vjp), or
            ``wrt`` names entries of ``*args``/``**kwargs``; and as ``grad``.
        srcgrad.errors.NoDerivativeRuleError: the gradient code calls a
            function with no tangent rule (named).
    """
    gradient = GradientFunction(f, "grad", wrt, backend, optimize)
    several = isinstance(wrt, (tuple, list))
    composed = ForwardOverReverse(gradient, _names(gradient, wrt))

    @functools.partial(_shown, composed=composed, gradient=gradient)
    def hessian_vector_product(*args, **kwargs):
        if not args:
            raise TypeError(f"hvp({f.__name__}) takes {f.__name__}'s arguments, then the vector(s)")
        *primals, vectors = args
        primals = gradient._arguments(tuple(primals), kwargs)
        gradient._check_wrt(primals)
        dots = tuple(vectors) if several else (vectors,)
        for name, i, v in zip(gradient.options.wrt, gradient._wrt_index, dots):
            if not tree.is_structure(primals[i]) and np.shape(v) != np.shape(primals[i]):
                raise ValueError(f"the vector for `{name}` has shape {np.shape(v)}, but `{name}` has shape "
                                 f"{np.shape(primals[i])}")
        _, tangent = composed(primals, dots)
        return _matched(tangent, gradient, primals)
    return hessian_vector_product


def _basis(x):
    """The unit vectors of ``x``'s shape and floating dtype, one at a time."""
    dtype = x.dtype if isinstance(x, np.ndarray) and x.dtype.kind == "f" else np.float64
    for i in range(int(np.size(x))):
        e = np.zeros(np.size(x), dtype)
        e[i] = 1
        yield e.reshape(np.shape(x))


def _arrays_only(args, index, fn, what):
    for i in index:
        if tree.is_structure(args[i]):
            raise TypeError(f"srcgrad.{what} takes arrays and floats; {fn.__name__}'s argument {i} is a "
                            f"{type(args[i]).__name__} (use srcgrad.hvp or srcgrad.vjp for structures)")


def hessian(f, wrt=0, backend=None, optimize=True):
    """The Hessian of a scalar function: :func:`hvp` along each unit vector.

    Args:
        f, wrt, backend, optimize: as for :func:`hvp`; the ``wrt`` arguments
            are arrays or floats (not structures).

    Returns:
        A function with ``f``'s parameters returning ``H`` of shape
        ``x.shape + x.shape`` (``H[a, b] = ∂²f/∂x[a]∂x[b]``) in ``x``'s float
        dtype; for ``wrt`` a tuple, blocks ``H[i][j]`` of shape
        ``x_i.shape + x_j.shape``.  One forward-over-reverse pass per element of
        the ``wrt`` arguments (a Python loop: the tangent rules do not take a
        batch axis yet).

    Raises:
        TypeError: a ``wrt`` argument is a structure; and as :func:`hvp`.
    """
    gradient = GradientFunction(f, "grad", wrt, backend, optimize)
    several = isinstance(wrt, (tuple, list))
    composed = ForwardOverReverse(gradient, _names(gradient, wrt))

    @functools.partial(_shown, composed=composed, gradient=gradient)
    def hessian_of(*args, **kwargs):
        args = gradient._arguments(args, kwargs)
        gradient._check_wrt(args)
        _arrays_only(args, gradient._wrt_index, f, "hessian")
        xs = [np.asarray(args[i]) for i in gradient._wrt_index]
        blocks = [[None] * len(xs) for _ in xs]
        for j, xj in enumerate(xs):
            columns = [[] for _ in xs]
            for e in _basis(xj):
                dots = tuple(e if k == j else np.zeros_like(x, dtype=e.dtype) for k, x in enumerate(xs))
                _, tangent = composed(args, dots)
                for i, t in enumerate(tangent if several else (tangent,)):
                    columns[i].append(np.asarray(t, dtype=e.dtype))
            for i, xi in enumerate(xs):  # H[i][j][a, b] = ∂²f / ∂x_i[a] ∂x_j[b]
                stacked = np.stack(columns[i], axis=-1) if columns[i] else np.zeros(xi.shape + (0,))
                blocks[i][j] = stacked.reshape(xi.shape + xj.shape)
        if not several:
            return blocks[0][0]
        return tuple(tuple(row) for row in blocks)
    return hessian_of


def _jacobian_blocks(columns, outputs, inputs, by_input):
    """``J[o][i]`` of shape ``outputs[o].shape + inputs[i].shape`` from the columns (one list
    per input, of the outputs' tangents, ``by_input``) or the rows (one list per output,
    of the inputs' adjoints)."""
    blocks = []
    for o, y in enumerate(outputs):
        row = []
        for i, x in enumerate(inputs):
            if by_input:
                parts = [np.asarray(c[o]) for c in columns[i]]
                stacked = np.stack(parts, axis=-1) if parts else np.zeros(np.shape(y) + (0,))
                row.append(stacked.reshape(np.shape(y) + np.shape(x)))
            else:
                parts = [np.asarray(r[i]) for r in columns[o]]
                stacked = np.stack(parts, axis=0) if parts else np.zeros((0,) + np.shape(x))
                row.append(stacked.reshape(np.shape(y) + np.shape(x)))
        blocks.append(row)
    return blocks


def _shaped(blocks, several_in, several_out):
    rows = [tuple(row) if several_in else row[0] for row in blocks]
    return tuple(rows) if several_out else rows[0]


def jacfwd(f, wrt=0, backend=None, optimize=True):
    """The Jacobian by forward mode: one :func:`srcgrad.jvp` per input element.

    Args:
        f: a Python function whose output is an array (or a tuple of them).
        wrt: an index or a name, or a tuple of them; those arguments are arrays
            or floats.
        backend, optimize: as for :func:`srcgrad.grad`.

    Returns:
        A function with ``f``'s parameters returning ``J`` of shape
        ``y.shape + x.shape`` (``J[o, a] = ∂y[o]/∂x[a]``); a tuple over the
        ``wrt`` arguments when ``wrt`` is a tuple, and a tuple over the outputs
        (outermost) when ``f`` returns a tuple.  The same values as
        :func:`jacrev`; cheaper when the inputs have fewer elements than the
        output.

    Raises:
        TypeError: a ``wrt`` argument is a structure; and as :func:`srcgrad.jvp`.
    """
    forward = GradientFunction(f, "jvp", wrt, backend, optimize)
    several = isinstance(wrt, (tuple, list))

    @_shown
    def jacobian_by_columns(*args, **kwargs):
        args = forward._arguments(args, kwargs)
        forward._check_wrt(args)
        _arrays_only(args, forward._wrt_index, f, "jacfwd")
        xs = [args[i] for i in forward._wrt_index]
        columns, value = [], None
        for j, xj in enumerate(xs):
            columns.append([])
            for e in _basis(xj):
                dots = tuple(e if k == j else np.zeros(np.shape(x), e.dtype) for k, x in enumerate(xs))
                value, tangent = forward(*args, dots if several else dots[0])
                columns[j].append(tangent if isinstance(value, tuple) else (tangent,))
        if value is None:  # no input elements: evaluate for the output's shape
            value = f(*args)
        outputs = value if isinstance(value, tuple) else (value,)
        return _shaped(_jacobian_blocks(columns, outputs, xs, True), several, isinstance(value, tuple))
    return jacobian_by_columns


def jacrev(f, wrt=0, backend=None, optimize=True):
    """The Jacobian by reverse mode: one forward sweep, then the pullback of each
    output element's unit vector (:func:`srcgrad.vjp`).

    Returns, raises: as :func:`jacfwd` (and as :func:`srcgrad.vjp`); cheaper
    when the output has fewer elements than the inputs.
    """
    reverse = GradientFunction(f, "vjp", wrt, backend, optimize)
    several = isinstance(wrt, (tuple, list))

    @_shown
    def jacobian_by_rows(*args, **kwargs):
        args = reverse._arguments(args, kwargs)
        _arrays_only(args, reverse._wrt_index, f, "jacrev")
        xs = [args[i] for i in reverse._wrt_index]
        value, pullback = reverse(*args)
        outputs = value if isinstance(value, tuple) else (value,)
        rows = []
        for o, y in enumerate(outputs):
            rows.append([])
            for e in _basis(y):
                cotangents = tuple(e if k == o else None for k in range(len(outputs)))
                adjoints = pullback(cotangents if isinstance(value, tuple) else e)
                rows[o].append(adjoints if several else (adjoints,))
        return _shaped(_jacobian_blocks(rows, outputs, xs, False), several, isinstance(value, tuple))
    return jacobian_by_rows


jacobian = jacrev
