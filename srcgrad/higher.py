"""Higher-order derivatives by composition: forward mode over the code that
reverse mode generated.

A gradient function's code is ordinary Python, loaded with its source
(``emit.load`` registers it with linecache), and the runtime helpers it calls
have rules of their own (transposes beside them in ``runtime/``): so ``srcgrad.jvp`` can
transform it again.  ``jvp(grad(f))`` at ``x`` along ``v`` gives ``(∇f(x),
H(x) v)`` for about the cost of two gradients (forward-over-reverse: Pearlmutter
1994, "Fast exact multiplication by the Hessian"; Griewank & Walther 2008, §5.4).
On it rest ``hvp``, ``hessian`` and ``grad(grad(f))``; ``jacfwd``/``jacrev``
take ``jvp``/``vjp`` column by column (row by row).

``jacfwd`` and ``hessian`` batch their columns: one run of a batched forward
program (``forward.transform(batched=True)``: every tangent has a leading axis of
columns) gives ``chunk_size`` columns at once.  A program with a step that does not
batch (``forward.NotBatchable``), or whose batched run fails, is run one column at a
time instead: the same values, more slowly.  ``jacrev`` batches its rows the same
way: batched forward mode over the pullback code, which is linear in the cotangent.
"""
from __future__ import annotations

import ast
import functools
import inspect
import linecache
import os

import numpy as np

from . import anno, errors, runtime, tree
from . import api
from .api import GradientFunction, _match, as_def, _tangent_of_structure, grad, with_argnum
from .pipeline import rank_of_argument
from .rules import registry
from .transforms import emit
from .transforms.forward import NotBatchable


class ForwardOverReverse:
    """``(args, tangents) -> (gradient, its tangent)``: forward mode over the code of
    ``gradient`` (a ``grad`` function), the tangents given for the parameters ``wrt``
    (names).  One forward-mode program per gradient program (per argument ranks)."""

    def __init__(self, gradient: GradientFunction, wrt: tuple, batched: bool = False):
        _refuse_fixed(gradient, "hvp")
        options = gradient.options
        if options.mode != "grad" or options.has_aux or options.intermediates or options.hooks \
                or not gradient._whole:
            raise errors.UnsupportedSyntaxError(
                "srcgrad differentiates the gradient of a function once more only for srcgrad.grad(f) of "
                "whole named parameters, without has_aux=, intermediates= or hooks=",
                anno.origin_of(gradient.fn), "differentiate srcgrad.grad(f, wrt=...) of the function itself")
        self.gradient, self.wrt, self.batched = gradient, wrt, batched
        self._jvps: dict = {}

    def transformed(self, args) -> GradientFunction:
        """The ``jvp`` of the gradient program for these arguments."""
        program = self.gradient.compiled(args).current(args)
        fn = program.function
        transformed = self._jvps.get(fn)
        if transformed is None:
            self._refuse_calls(program)
            transformed = self._jvps[fn] = GradientFunction(
                fn, "jvp", self.wrt if len(self.wrt) > 1 else self.wrt[0], self.gradient.options.backend,
                self.gradient.options.optimize, internal=True, batched=self.batched)
        return transformed

    def source(self, args) -> str:
        """The forward-over-reverse code run for these arguments (``srcgrad.show``)."""
        return self.transformed(args).compiled(tuple(args)).source

    def __call__(self, args, tangents):
        transformed = self.transformed(args)
        primals = [args[self.gradient._params.index(name)] for name in self.wrt]
        tangents = [_tangent_of_structure(t, x) if tree.is_structure(x) else t for t, x in zip(tangents, primals)]
        try:
            return transformed(*args, tangents if len(self.wrt) > 1 else tangents[0])
        except errors.UserCodeError as error:
            if error.origin is not None and not _inside_srcgrad(error.origin.filename):
                raise  # at the user's own line (a helper of theirs): as it is
            # Forward mode met something in the gradient code, or in a runtime helper it
            # calls, that it does not differentiate: refused at the user's line whose
            # adjoint that code is, naming the functions that line calls.
            origin, calls = self._user_line(error)
            name = self.gradient.fn.__name__
            if calls:
                raise errors.UnsupportedSyntaxError(
                    f"this second derivative of {name} needs the derivative of the adjoint of "
                    f"{' or '.join(f'`{c}`' for c in calls)} on this line, which srcgrad does not have "
                    f"yet (forward mode over its gradient code met: {error.problem})", origin,
                    "take this second derivative by central differences of srcgrad.grad(f) (hvp: "
                    "(g(x + e v) - g(x - e v)) / 2e), or write this step with functions whose adjoints "
                    "are differentiable (for log|det a|, `np.log(np.abs(np.linalg.det(a)))`)") from None
            raise errors.UnsupportedSyntaxError(
                f"this second derivative needs forward mode over the gradient code of "
                f"{name}, and that code uses something forward mode does not "
                f"differentiate yet ({error.problem})", origin,
                "take the second derivative by finite differences of srcgrad.grad, or write this "
                "step of the function with the NumPy functions and layers srcgrad documents") from None

    def _user_line(self, error):
        """The user's line (an ``Origin``) whose adjoint the generated code that failed
        computes, and the functions that line calls; ``f``'s ``def`` line and ``[]`` where
        not known.  Generated code heads each group of lines with ``# file.py:12  source``
        (forward-over-reverse code names the gradient code's lines, which name the user's):
        the deepest place in generated code, from the error's origin or its traceback, is
        followed up those comments."""
        places = [(error.origin.filename, error.origin.line)] if error.origin is not None else []
        frame = error.__traceback__
        while frame is not None:
            places.append((frame.tb_frame.f_code.co_filename, frame.tb_lineno))
            frame = frame.tb_next
        code = self.gradient.fn.__code__.co_filename
        for filename, line in reversed([p for p in places if p[0].startswith("<srcgrad")][-1:]):
            for _ in range(3):  # user <- gradient code <- its forward mode
                filename, line, text = errors.group_comment(filename, line)
                if filename is None or not filename.startswith("<srcgrad"):
                    break
            if filename == os.path.basename(code):
                try:
                    calls = [ast.unparse(n.func) for n in ast.walk(ast.parse(text.strip().removeprefix("return ")))
                             if isinstance(n, ast.Call)]
                except SyntaxError:
                    calls = []
                full = linecache.getline(code, line).rstrip("\n")
                return anno.Origin(code, line, len(full) - len(full.lstrip()), full), list(dict.fromkeys(calls))
        return anno.origin_of(users_function(self.gradient.fn)), []

    def _refuse_calls(self, program):
        """The gradient code calls another function's compiled vjp (a callee that was not
        inlined) or a hook: its pullback is a closure, which forward mode cannot follow."""
        tree = ast.parse(program.source)
        namespace = program.namespace
        # What the code calls by a name of its namespace (`helper(x)`, `mvn.logpdf(x)`): a
        # primitive has its rule (and a type, a module's function, no closure).
        targets = {}
        for call in ast.walk(tree):
            func = call.func if isinstance(call, ast.Call) else None
            if isinstance(func, ast.Name) and func.id in namespace and func.id != "rt":
                targets[func.id] = namespace[func.id]
            elif isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                    and func.value.id in namespace and not isinstance(namespace[func.value.id], type(np)) \
                    and func.value.id != "rt":
                targets[f"{func.value.id}.{func.attr}"] = getattr(namespace[func.value.id], func.attr, None)
        called = sorted(n for n, value in targets.items()
                        if callable(value) and not isinstance(value, (type, type(np)))
                        and registry.lookup(value) is None
                        and not runtime.is_gradient_function(value))  # (forward over reverse, in turn)
        if called or "dispatch." in program.source.replace("dispatch.gradient_pullback(", ""):
            # Named as the user wrote them (the names the code binds, `specialised`, are srcgrad's).
            named = [what for call in ast.walk(tree) if (what := _dispatched(call)) is not None]
            named += [f"`{getattr(targets[n], '__name__', n)}`" for n in called]
            what = named[0] if named else "a function known only when it runs"
            raise errors.UnsupportedSyntaxError(
                f"this second derivative needs forward mode over the gradient code of "
                f"{self.gradient.fn.__name__}, which differentiates {what} through a pullback closure "
                "(compiled when the code runs) that forward mode does not follow yet",
                anno.origin_of(users_function(self.gradient.fn)),
                "make what it calls known when compiling: functions defined with `def` and called by "
                "name, arrays and models passed as arguments (an `nn.Module`'s layers are inlined), "
                "values read by key rather than through `.values()`; or take the derivative by "
                "finite differences of srcgrad.grad")


_SYMBOLS = {"add": "+", "sub": "-", "mul": "*", "truediv": "/", "matmul": "@", "pow": "**"}


def users_function(fn):
    """The user's function behind ``fn``: itself, or for a def srcgrad wrote around a call
    (``api.as_def``: ``elementwise_grad``, ``grad(grad(grad(f)))``) the function it calls,
    followed through gradient functions (their ``fn``) to the user's ``def``."""
    for _ in range(100):
        inner = getattr(fn, "__srcgrad_calls__", None) or getattr(fn, "fn", None)
        if inner is None or inner is fn:
            return fn
        fn = inner
    return fn


def _dispatched(call):
    """What a call of generated code into ``dispatch`` (``dispatch.vjp_method(m, 'forward', ...)``)
    runs, in the user's terms; None for any other call."""
    func = getattr(call, "func", None)
    if not (isinstance(call, ast.Call) and isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "dispatch"
            and call.args):
        return None
    first = call.args[0]
    if func.attr == "vjp_call":
        return f"`{ast.unparse(first).rpartition('.')[2]}`"
    if func.attr == "vjp_method" and len(call.args) > 1 and isinstance(call.args[1], ast.Constant):
        return f"the method `{call.args[1].value}`"
    if func.attr == "vjp_operator" and isinstance(first, ast.Constant):
        return (f"`{_SYMBOLS.get(first.value, first.value)}` on a value whose kind (number, array or object "
                "with its own operator) is known only when it runs")
    if func.attr == "vjp_field" and len(call.args) > 1 and isinstance(call.args[1], ast.Constant):
        return f"the field `{call.args[1].value}` of an object known only when it runs"
    return None


def _refuse_fixed(gradient: GradientFunction, what: str):
    """Higher derivatives take a function itself, not a bound method, a functools.partial or
    a callable object (``grad``, ``vjp`` and ``jvp`` take those)."""
    if gradient._fixed_args or gradient._fixed_kwargs:
        name = gradient.fn.__qualname__
        raise errors.NoSourceError(
            f"srcgrad.{what} takes a function, not `{name}` with some of its arguments bound (a bound "
            "method, a functools.partial or a callable object)", anno.origin_of(gradient.fn),
            f"pass the bound arguments at each call: srcgrad.{what}({name}, wrt=...)(obj, x, ...), "
            f"with wrt counting all of {name}'s parameters")


def _inside_srcgrad(filename: str) -> bool:
    """A place in generated gradient code or in srcgrad's own files (not the user's)."""
    return filename.startswith("<srcgrad") or filename.startswith(_PACKAGE)


_PACKAGE = os.path.dirname(os.path.abspath(__file__)) + os.sep


def _names(gradient, wrt) -> tuple:
    """The parameter names ``wrt`` (an index, a name or a tuple of them) refers to."""
    entries, _ = gradient._wrt_entries(wrt)
    if any(key is not None for _, key in entries):
        raise errors.WrtError("higher derivatives take whole named parameters", anno.origin_of(gradient.fn),
                              "pass wrt=<index or name> of a named parameter")
    return tuple(name for name, _ in entries)


def _shown(function, composed=None, gradient=None, label="{}"):
    """Call ``function`` with user errors located at the user's call (as ``grad``'s are).
    With ``composed`` (a :class:`ForwardOverReverse` of ``gradient``), ``srcgrad.source``
    of the result, given ``f``'s arguments, is the forward-over-reverse code; ``label``
    (``"grad(grad({}))"``, given ``f``'s name) is its name in messages."""
    def call(*args, **kwargs):
        try:
            return function(*args, **kwargs)
        except errors.UserCodeError as error:
            raise errors.shown_to_user(error) from None
        except Exception as error:
            errors.note_user_lines(error)
            raise
    call.__srcgrad_gradient__ = True  # (differentiated code calls it through dispatch, which refuses it)
    if gradient is not None:  # named as the user wrote it (`grad(grad(f))`), not as srcgrad's function is
        call.__name__ = call.__qualname__ = label.format(getattr(gradient.fn, "__name__", "f"))
        call.fn = gradient.fn  # (an error about it is located at the function's `def`)
    else:
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
    names = _names(gradient, wrt)
    then = f"the tangents of ({', '.join(names)}) as a tuple" if several else f"the tangent of {names[0]}"

    @functools.partial(_shown, composed=composed, gradient=gradient, label="jvp(grad({}))")
    def jvp_gradient(*args, **kwargs):
        *primals, tangents = args
        primals = gradient._arguments(tuple(primals), kwargs, then, tangents,
                                      f"jvp(grad({gradient.fn.__name__}))")
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
            anno.origin_of(gradient.fn), "use srcgrad.hessian or srcgrad.hvp")
    outer = GradientFunction(gradient.fn, "grad", wrt, gradient.options.backend, gradient.options.optimize)
    composed = ForwardOverReverse(outer, inner)

    @functools.partial(_shown, composed=composed, gradient=outer, label="grad(grad({}))")
    def grad_gradient(*args, **kwargs):
        args = gradient._arguments(args, kwargs)
        a = args[gradient._wrt_index[0]]
        if np.ndim(a) != 0 or tree.is_structure(a):
            raise errors.NonScalarOutputError(
                f"grad needs a scalar output, but grad({gradient.fn.__name__}) with respect to "
                f"`{inner[0]}` returns its gradient, of shape {np.shape(a)}", anno.origin_of(gradient.fn),
                "use srcgrad.hessian(f) for the matrix of second derivatives, or srcgrad.hvp(f)")
        outer._check_wrt(args)
        _, tangent = composed(args, (np.ones_like(a) if isinstance(a, np.ndarray) else type(a)(1.0),))
        return _matched(tangent, outer, args)
    # (differentiated again, it is the grad of a def calling `gradient`: reverse mode over that
    # def differentiates the call by forward mode over `gradient`'s code, to any order)
    grad_gradient.__srcgrad_equivalent__ = functools.cache(lambda: GradientFunction(
        as_def(gradient), "grad", wrt, gradient.options.backend, gradient.options.optimize))
    return grad_gradient


def hvp(f, wrt=0, backend=None, optimize=True, *, argnum=None):
    """Hessian-vector product of a scalar function: forward mode over its gradient's code.

    Args:
        f: a Python function with a scalar output (as for :func:`srcgrad.grad`).
        wrt: the parameter(s): an index or a name, or a tuple of them (named
            parameters, whole); each an array, a float or a structure of them.
        backend, optimize, argnum: as for :func:`srcgrad.grad`.

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
    wrt = with_argnum(wrt, argnum)
    gradient = GradientFunction(f, "grad", wrt, backend, optimize)
    several = isinstance(wrt, (tuple, list))
    composed = ForwardOverReverse(gradient, _names(gradient, wrt))

    @functools.partial(_shown, composed=composed, gradient=gradient, label="hvp({})")
    def hessian_vector_product(*args, **kwargs):
        if not args:
            raise TypeError(f"hvp({f.__name__}) takes {f.__name__}'s arguments, then the vector(s)")
        *primals, vectors = args
        primals = gradient._arguments(tuple(primals), kwargs, gradient._after("vector"), vectors,
                                      f"hvp({f.__name__})")
        gradient._check_wrt(primals)
        dots = tuple(vectors) if several else (vectors,)
        for name, i, v in zip(gradient.options.wrt, gradient._wrt_index, dots):
            if not tree.is_structure(primals[i]) and np.shape(v) != np.shape(primals[i]):
                raise ValueError(f"the vector for `{name}` has shape {np.shape(v)}, but `{name}` has shape "
                                 f"{np.shape(primals[i])}")
        _, tangent = composed(primals, dots)
        return _matched(tangent, gradient, primals)
    return hessian_vector_product


def _float_dtype(x):
    return x.dtype if isinstance(x, np.ndarray) and x.dtype.kind == "f" else np.float64


def _differentiable(leaf) -> bool:
    """A float leaf; an integer, boolean or string leaf of a structure has no gradient
    (None in ``grad``'s, ``tree.materialize``), so no columns and no block."""
    return leaf.dtype.kind == "f"


def _dtype(xs):
    """The result dtype of derivatives with respect to the arguments ``xs``: their float
    arrays' (a Python float among them does not widen float32, as NEP 50 has it), float64
    for none."""
    leaves = [leaf for x in xs for leaf in (tree.flatten(x, tree.TANGENTS)[1] if tree.is_structure(x) else [x])]
    arrays = [leaf.dtype for leaf in leaves if isinstance(leaf, (np.ndarray, np.floating)) and leaf.dtype.kind == "f"]
    return np.result_type(*arrays) if arrays else np.float64


def _leaves(x):
    """``x``'s leaves (itself for an array or a float; an object's float attributes
    among them, as ``grad`` differentiates them: ``tree.TANGENTS``), the function that
    puts one tangent per leaf in their places (a value like ``x``), and the one that
    puts one result per leaf in the places of ``x``'s gradient (an object's integer
    attributes None there, as in ``grad``'s; a leaf without gradient gets None)."""
    if not tree.is_structure(x):
        return [np.asarray(x)], _first, _first
    _, leaves, spec = tree.flatten(x, tree.TANGENTS)
    leaves = [np.asarray(leaf) for leaf in leaves]
    kept = list(map(_differentiable, leaves))
    gradient_spec = tree.flatten(_match(None, x), tree.TANGENTS)[2]  # (None flattens to nothing)

    def like_gradient(values):
        return tree.unflatten(gradient_spec, [v for v, k in zip(values, kept) if k])
    return leaves, functools.partial(tree.unflatten, spec), like_gradient


def _first(values):
    return values[0]


def _split(xs):
    """The leaves of the arguments ``xs`` (arrays, floats or structures), in order, and
    two functions putting one value per leaf back in their places (a tuple with one value,
    a structure of them, per argument): tangents in ``xs``' places, results in their
    gradients' (:func:`_leaves`)."""
    split = [_leaves(x) for x in xs]

    def placing(which):
        def put(values):
            out, at = [], 0
            for ls, *places in split:
                out.append(places[which](list(values[at:at + len(ls)])))
                at += len(ls)
            return tuple(out)
        return put
    return [leaf for ls, *_ in split for leaf in ls], placing(0), placing(1)


def _batched_leaves(t, x, count):
    """A batched adjoint or tangent ``t`` of the argument ``x`` as one array per leaf of
    ``x``, ``(count,) + leaf.shape`` (or one row, which broadcasts, where ``t`` is an
    array that does not vary along the columns)."""
    if not tree.is_structure(x):
        return [t]
    # A structure's gradient is sparse (its tangent too), each leaf with its own column
    # axis: put in x's leaves column by column (no arithmetic: indexing).
    leaves = _leaves(x)[0]
    columns = [_adjoint_leaves(runtime.batch_column(t, r), x, leaves) for r in range(count)]
    return [np.stack([c[a] for c in columns]) for a in range(len(columns[0]))]


def _adjoint_leaves(g, x, leaves=None):
    """An adjoint (or tangent) ``g`` of the argument ``x``, sparse as generated code gives
    it, as one array per leaf of ``x`` (:func:`_leaves`; ``leaves`` when given): zeros for
    a leaf without gradient."""
    return _gradient_leaves(_match(g, x), x, leaves)


def _gradient_leaves(g, x, leaves=None):
    """:func:`_adjoint_leaves` of a gradient ``g`` already of ``x``'s structure (as
    ``grad`` and a pullback give it: matching it again would read an object in it as
    no adjoint at all)."""
    if not tree.is_structure(x):
        return [np.asarray(g)]
    leaves = _leaves(x)[0] if leaves is None else leaves
    got = _leaves(g)[0]  # (None, the gradient of a leaf without one, flattens to nothing)
    if len(got) != sum(map(_differentiable, leaves)):
        raise errors.SrcgradError(
            f"srcgrad computed an adjoint of the {type(x).__name__} argument whose leaves are not its float "
            "leaves (a defect in srcgrad: please report it); pass the float arrays as arguments meanwhile")
    got = iter(got)
    return [next(got) if _differentiable(leaf) else np.zeros(leaf.shape) for leaf in leaves]


def _chunks(leaves, chunk_size):
    """The unit vectors over all of ``leaves`` (their float elements in order), ``chunk_size``
    at a time (None: all): per chunk, one array per leaf of shape ``(c,) + leaf.shape``
    in the leaf's float dtype, whose row ``r`` is the unit vector of column ``start + r``."""
    sizes = [leaf.size if _differentiable(leaf) else 0 for leaf in leaves]
    total = sum(sizes)
    step = total if chunk_size is None else int(chunk_size)
    if step < 1 and total:
        raise ValueError(f"chunk_size must be a positive integer or None, got {chunk_size!r}")
    for start in range(0, total, max(step, 1)):
        stop = min(total, start + step)
        dots, offset = [], 0
        for leaf, size in zip(leaves, sizes):
            d = np.zeros((stop - start, leaf.size), _float_dtype(leaf))
            lo, hi = max(start, offset), min(stop, offset + size)
            if lo < hi:
                d[np.arange(lo - start, hi - start), np.arange(lo - offset, hi - offset)] = 1
            dots.append(d.reshape((stop - start,) + leaf.shape))
            offset += size
        yield dots


def _columns(run, loop, leaves, chunk_size, state, key):
    """The tangents of the outputs along every unit vector of ``leaves``: one array per
    output leaf, of shape ``(N,) + y.shape`` (``N`` the number of input elements).
    ``run(dots)`` gives a chunk's batched output tangents, ``loop(dots)`` the same one
    column at a time; ``state[key]``: False once this program did not batch."""
    chunks = []
    for dots in _chunks(leaves, chunk_size):
        count = len(dots[0])
        if state.setdefault(key, True):
            try:
                chunks.append((count, run(dots)))
                continue
            except NotBatchable:
                state[key] = False
            except (ValueError, TypeError, IndexError):  # a batched step NumPy refused: the loop
                state[key] = False                       # gives the answer, or the error at its place
        chunks.append((count, loop(dots)))
    return chunks


def _stacked(chunks, outputs, dtype):
    """Each output's tangents over all columns, ``(N,) + y.shape`` (a chunk's tangent
    that is zero for all its columns has one row, which broadcasts)."""
    return [np.concatenate([np.broadcast_to(c[o], (count,) + np.shape(y)) for count, c in chunks])
            .astype(dtype, copy=False) if chunks
            else np.zeros((0,) + np.shape(y), dtype) for o, y in enumerate(outputs)]


def _blocks(stacked, y, leaves):
    """``J[a]`` of shape ``y.shape + leaf_a.shape`` for each input leaf (None for one
    without gradient), from the tangents of ``y`` over all columns, ``(N,) + y.shape``."""
    out, offset = [], 0
    for leaf in leaves:
        if not _differentiable(leaf):
            out.append(None)
            continue
        part = stacked[offset:offset + leaf.size].reshape((leaf.size,) + np.shape(y))
        out.append(np.moveaxis(part, 0, -1).reshape(np.shape(y) + leaf.shape))
        offset += leaf.size
    return out


def _column(dots, r):
    return tuple(d[r] for d in dots)


def hessian(f, wrt=0, backend=None, optimize=True, chunk_size=None):
    """The Hessian of a scalar function: forward mode over its gradient's code along
    every unit vector, ``chunk_size`` of them per run.

    Args:
        f, wrt, backend, optimize: as for :func:`hvp`; the ``wrt`` arguments are
            arrays, floats or structures of them (a dict, list, tuple or object
            of parameters: a model).
        chunk_size: how many columns one run of the batched forward-over-reverse
            program computes (its tangents have a leading axis of that length:
            memory grows with it); None: all of them at once.

    Returns:
        A function with ``f``'s parameters returning ``H`` of shape
        ``x.shape + x.shape`` (``H[a, b] = ∂²f/∂x[a]∂x[b]``) in ``x``'s float
        dtype; for ``wrt`` a tuple, blocks ``H[i][j]`` of shape
        ``x_i.shape + x_j.shape``.  For a structure ``x``, as ``jax.hessian`` on
        a pytree: ``x``'s structure whose leaf ``a`` is ``x``'s structure whose
        leaf ``b`` is the block ``∂²f/∂a∂b`` of shape ``a.shape + b.shape``
        (``H["w"]["b"]`` for a dict).  Where the gradient's code has a step that
        does not batch (see :mod:`srcgrad.higher`), one column per run.

    Raises:
        ValueError: ``chunk_size`` not a positive integer or None.
        srcgrad.errors.UnsupportedSyntaxError: as :func:`hvp`.
    """
    gradient = GradientFunction(f, "grad", wrt, backend, optimize)
    several = isinstance(wrt, (tuple, list))
    names = _names(gradient, wrt)
    composed = ForwardOverReverse(gradient, names)
    batched = ForwardOverReverse(gradient, names, batched=True)
    state: dict = {}

    @functools.partial(_shown, composed=composed, gradient=gradient, label="hessian({})")
    def hessian_of(*args, **kwargs):
        args = gradient._arguments(args, kwargs)
        gradient._check_wrt(args)
        xs = [args[i] for i in gradient._wrt_index]
        leaves, tangents_of, _ = _split(xs)
        split = [_leaves(x) for x in xs]
        counts = [len(ls) for ls, *_ in split]
        dtype = _dtype(xs)

        def run(dots):
            _, tangent = batched(args, tangents_of(dots))
            out = []
            for t, x in zip(tangent if several else (tangent,), xs):
                out += _batched_leaves(t, x, len(dots[0]))
            return out

        def loop(dots):
            columns = []
            for r in range(len(dots[0]) if dots else 0):
                _, tangent = composed(args, tangents_of(_column(dots, r)))
                columns.append([leaf for t, x in zip(tangent if several else (tangent,), xs)
                                for leaf in _adjoint_leaves(t, x)])
            return [np.stack([c[o] for c in columns]) for o in range(len(leaves))]

        chunks = _columns(run, loop, leaves, chunk_size, state, tuple(map(rank_of_argument, args)))
        rows = _stacked(chunks, leaves, dtype)  # row a: the gradient's leaf a along every column
        block = [_blocks(rows[a], leaves[a], leaves) for a in range(len(leaves))]  # block[a][b]
        starts = np.cumsum([0] + counts)
        result = [[split[i][2]([split[j][2](block[a][starts[j]:starts[j + 1]]) if _differentiable(leaves[a])
                                else None for a in range(starts[i], starts[i + 1])]) for j in range(len(xs))]
                  for i in range(len(xs))]
        if not several:
            return result[0][0]
        return tuple(tuple(row) for row in result)
    hessian_of.columns = state
    return hessian_of


def _shaped(blocks, several_in, spec):
    """The Jacobian from its blocks (per output leaf, one per ``wrt`` argument): as
    ``jax.jacfwd``, the output's structure (``spec``; None for one array) outermost,
    then a tuple over the arguments when ``wrt`` is a tuple."""
    rows = [tuple(row) if several_in else row[0] for row in blocks]
    return rows[0] if spec is None else tree.unflatten(spec, rows)


def _outputs(y):
    """The output's leaves (the arrays and numbers of a tuple, list or dict it returns;
    itself for one array) and its treespec (None for one array)."""
    if not tree.is_structure(y):
        return [y], None
    _, leaves, spec = tree.flatten(y)
    return leaves, spec


def _output_tangents(tangent, y):
    """The output tangent's leaves, one per leaf of ``y`` (:func:`_outputs`)."""
    if not tree.is_structure(y):
        return [tangent]
    try:
        return _outputs(y)[1].flatten_up_to(tangent)
    except (ValueError, TypeError):
        raise errors.UnsupportedSyntaxError(
            f"srcgrad.jacfwd cannot lay out the tangent of this output, a {type(y).__name__}, leaf by "
            f"leaf (its tangent is a {type(tangent).__name__})", None,
            "return an array, or a tuple, list or dict of arrays") from None


def _basis(x):
    """The unit vectors of ``x``'s shape and floating dtype, one at a time."""
    for i in range(int(np.size(x))):
        e = np.zeros(np.size(x), _float_dtype(x))
        e[i] = 1
        yield e.reshape(np.shape(x))


def _hessian_of_gradient(gradient, wrt, what: str, chunk_size):
    """``jacfwd(grad(f))`` / ``jacrev(grad(f))``: the Jacobian of ``∇_a f`` with respect to ``a``
    is the Hessian of ``f`` (:func:`hessian`, forward mode over the gradient's code)."""
    _refuse_fixed(gradient, what)
    inner = _names(gradient, gradient._wrt_spec)
    if _names(gradient, wrt) != inner or isinstance(wrt, (tuple, list)) != gradient._as_tuple:
        raise errors.UnsupportedSyntaxError(
            f"srcgrad.{what} of grad({gradient.fn.__name__}) is its Hessian only with respect to the same "
            f"parameters ({', '.join(inner)}); a mixed block is not supported", anno.origin_of(gradient.fn),
            f"use srcgrad.hessian({gradient.fn.__name__}, wrt=(a, b)) and take the block [0][1]")
    return hessian(gradient.fn, gradient._wrt_spec, gradient.options.backend, gradient.options.optimize,
                   chunk_size)


def _plain_gradient(f) -> bool:
    return isinstance(f, GradientFunction) and f.options.mode == "grad" and not (
        f.options.has_aux or f.options.intermediates or f.options.hooks)


def jacfwd(f, wrt=0, backend=None, optimize=True, chunk_size=None):
    """The Jacobian by forward mode: batched :func:`srcgrad.jvp` along the unit vectors
    of the inputs, ``chunk_size`` of them per run.

    Args:
        f: a Python function whose output is an array (or a tuple of them).
        wrt: an index or a name, or a tuple of them; those arguments are arrays,
            floats or structures of them (a dict, list, tuple or object of
            parameters: a model).
        backend, optimize: as for :func:`srcgrad.grad`.
        chunk_size: how many columns one run of the batched forward program
            computes (its tangents have a leading axis of that length: memory
            grows with it); None: all of them at once.

    Returns:
        A function with ``f``'s parameters returning ``J`` of shape
        ``y.shape + x.shape`` (``J[o, a] = ∂y[o]/∂x[a]``) in the inputs' float
        dtype; for a structure ``x``, as ``jax.jacfwd`` on a pytree: ``x``'s
        structure (an object like ``x``'s gradient for a model) whose leaf ``a``
        is the block of shape ``y.shape + a.shape``: the leaves ``grad`` gives
        gradients, an object's float attributes among them (None for an
        integer leaf or attribute, which has no gradient).  A tuple over the
        ``wrt`` arguments when ``wrt`` is a tuple; when ``f`` returns a tuple,
        list or dict (nested too), its structure outermost holding each leaf's
        Jacobian (as ``jax.jacfwd``).  The same values as
        :func:`jacrev`; cheaper when the inputs have fewer elements than the
        output.  Where ``f`` has a step that does not batch (see
        :mod:`srcgrad.higher`), one column per run.

    Raises:
        ValueError: ``chunk_size`` not a positive integer or None.
        And as :func:`srcgrad.jvp`.
    """
    if _plain_gradient(f):
        return _hessian_of_gradient(f, wrt, "jacfwd", chunk_size)
    forward = GradientFunction(f, "jvp", wrt, backend, optimize)
    _refuse_fixed(forward, "jacfwd")
    batched = GradientFunction(f, "jvp", wrt, backend, optimize, internal=True, batched=True)
    several = isinstance(wrt, (tuple, list))
    state: dict = {}

    @_shown
    def jacobian_by_columns(*args, **kwargs):
        args = forward._arguments(args, kwargs)
        forward._check_wrt(args)
        xs = [args[i] for i in forward._wrt_index]
        leaves, tangents_of, results_of = _split(xs)
        dtype = _dtype(xs)
        value = []

        def run(dots):
            y, tangent = batched.compiled(args)(*args, *tangents_of(dots))
            value[:] = [y]
            return _output_tangents(tangent, y)

        def loop(dots):
            columns = []
            for r in range(len(dots[0])):
                tangents = tangents_of(_column(dots, r))
                y, tangent = forward(*args, tangents if several else tangents[0])
                value[:] = [y]
                columns.append(_output_tangents(tangent, y))
            return [np.stack([np.asarray(c[o]) for c in columns]) for o in range(len(columns[0]))]

        chunks = _columns(run, loop, leaves, chunk_size, state, tuple(map(rank_of_argument, args)))
        y = value[0] if value else f(*args)  # (no input elements: evaluated for the output's shape)
        outputs, spec = _outputs(y)
        blocks = [results_of(_blocks(t, out, leaves))
                  for t, out in zip(_stacked(chunks, outputs, dtype), outputs)]
        return _shaped(blocks, several, spec)
    jacobian_by_columns.columns = state
    return jacobian_by_columns


def jacrev(f, wrt=0, backend=None, optimize=True, chunk_size=None):
    """The Jacobian by reverse mode: one forward sweep, then the pullback of the output's
    unit vectors, ``chunk_size`` of them per run of a batched pullback.

    The pullback code (mode ``"pullback"``: ``f_pullback(*args, y_bar) -> adjoints``) is
    linear in ``y_bar``, so its tangent along ``ȳ`` at any ``y_bar`` is the pullback of
    ``ȳ``: batched forward mode over it with respect to ``y_bar`` (the tangents' leading
    axis holding the unit vectors) pulls back many rows in one run, as ``vmap`` of the
    pullback would.  Where that program has a step that does not batch, or ``f``
    returns a tuple, list or dict, one pullback per row (:func:`srcgrad.vjp`): the same values.

    Args, returns, raises: as :func:`jacfwd` (and as :func:`srcgrad.vjp`); cheaper
    when the output has fewer elements than the inputs.
    """
    if _plain_gradient(f):
        return _hessian_of_gradient(f, wrt, "jacrev", chunk_size)
    reverse = GradientFunction(f, "vjp", wrt, backend, optimize)
    _refuse_fixed(reverse, "jacrev")
    pullback_code = GradientFunction(f, "pullback", wrt, backend, optimize, internal=True)
    several = isinstance(wrt, (tuple, list))
    transformed: dict = {}  # pullback program -> its batched forward mode over the cotangent
    state: dict = {}

    def batched_pullback(args, xs, y_bar, ys_bar):
        """The adjoints of the leaves of the ``wrt`` arguments ``xs`` along each row of
        ``ys_bar``, batched."""
        try:
            program = pullback_code.compiled(args + (y_bar,)).current(args + (y_bar,))
            jvp = transformed.get(program.function)
            if jvp is None:
                seed = list(inspect.signature(program.function).parameters)[-1]
                jvp = transformed[program.function] = GradientFunction(
                    program.function, "jvp", seed, reverse.options.backend, reverse.options.optimize,
                    internal=True, batched=True)
            _, adjoints = jvp(*args, y_bar, ys_bar)
        except errors.UserCodeError:
            raise NotBatchable from None  # (the rows one at a time meet it again, at its place)
        return [leaf for a, x in zip(adjoints if several else (adjoints,), xs)
                for leaf in _batched_leaves(a, x, len(ys_bar))]

    def pulled_back(pullback, xs, ys_bar):
        """The leaves of the adjoints along each row, one at a time: per leaf, stacked."""
        rows = [[leaf for a, x in zip(adjoints if several else (adjoints,), xs)
                 for leaf in _gradient_leaves(a, x)] for adjoints in map(pullback, ys_bar)]
        return [np.stack([r[a] for r in rows]) for a in range(len(rows[0]))]

    @_shown
    def jacobian_by_rows(*args, **kwargs):
        args = reverse._arguments(args, kwargs)
        xs = [args[i] for i in reverse._wrt_index]
        leaves, _, put = _split(xs)
        dtype = _dtype(xs)
        value, pullback = reverse(*args)
        outputs, spec = _outputs(value)
        if spec is not None:  # (the pullback code takes one array's cotangent): row by row
            blocks = []
            zeros = [runtime.zeros_like(y) for y in outputs]
            for o, y in enumerate(outputs):
                basis = [tree.unflatten(spec, zeros[:o] + [e] + zeros[o + 1:]) for e in _basis(y)]
                rows = pulled_back(pullback, xs, basis) if basis else [np.zeros((0,) + x.shape)
                                                                       for x in leaves]
                blocks.append(put([r.astype(dtype, copy=False).reshape(np.shape(y) + x.shape)
                                   if _differentiable(x) else None for r, x in zip(rows, leaves)]))
            return _shaped(blocks, several, spec)
        y = np.asarray(value)
        y_bar = np.zeros(y.shape, _float_dtype(y))
        chunks = _columns(lambda dots: batched_pullback(args, xs, y_bar, dots[0]),
                          lambda dots: pulled_back(pullback, xs, dots[0]), [y_bar], chunk_size, state,
                          tuple(map(rank_of_argument, args)))
        rows = _stacked(chunks, leaves, dtype)  # per leaf, its adjoint along each row: (y.size,) + leaf.shape
        return _shaped([put([r.reshape(y.shape + x.shape) if _differentiable(x) else None
                             for r, x in zip(rows, leaves)])], several, None)
    jacobian_by_rows.columns = state
    return jacobian_by_rows


jacobian = jacrev


def _called_gradient(gradient, wrt, args, kwargs):
    """What differentiating a call ``g(*args, **kwargs)`` of ``g = srcgrad.grad(f)`` (or
    ``value_and_grad``) needs: ``f``'s arguments, the names the call differentiates
    (``wrt``: positions and keywords of the call, as ``dispatch`` gives them), and the
    forward-over-reverse of ``f``'s gradient with respect to ``g``'s own parameters and
    those.  Refuses what it cannot differentiate at the user's call."""
    what = getattr(gradient, "__name__", repr(gradient))
    gradient = plain_gradient(gradient)
    plain = isinstance(gradient, GradientFunction) and gradient.options.mode in ("grad", "value_and_grad") \
        and not (gradient.options.has_aux or gradient.options.intermediates or gradient.options.hooks
                 or gradient._fixed_args or gradient._fixed_kwargs or gradient._variadic) and gradient._whole
    if not plain or "self" in wrt:
        raise errors.UnsupportedSyntaxError(
            f"this differentiates through `{what}`, a function srcgrad made: srcgrad differentiates a call of "
            "srcgrad.grad(f) or srcgrad.value_and_grad(f) of a function's whole named parameters, without "
            "has_aux=, intermediates=, hooks= or bound arguments (not hvp, hessian, jacobians or vjp)", None,
            "call srcgrad.grad(f, wrt=...) of the plain function here, or compute this value outside the "
            "differentiated function and pass it in (or wrap the argument in srcgrad.stop_gradient)")
    primals = gradient._arguments(tuple(args), kwargs)
    given = tuple(gradient._params[w] if isinstance(w, int) else w for w in wrt)
    names = tuple(dict.fromkeys(gradient.options.wrt + given))
    composed = gradient._over.get(names)
    if composed is None:
        over = GradientFunction(gradient.fn, "grad", names, gradient.options.backend, gradient.options.optimize,
                                internal=True)
        composed = gradient._over[names] = ForwardOverReverse(over, names)
    return primals, given, names, composed


def plain_gradient(gradient):
    """``gradient``, or for ``grad(grad(f))`` (a function, not a ``GradientFunction``) the
    ``GradientFunction`` of a def calling it that computes the same: what a call of it in
    differentiated code is differentiated as."""
    equivalent = getattr(gradient, "__srcgrad_equivalent__", None)
    return gradient if equivalent is None else equivalent()


def _parts(bar, count: int) -> list:
    """A tuple output's cotangent, one entry per output (None: zero), from what generated
    code passes: a tuple or list (shorter where `a, _ = ...` dropped some), a sparse
    ``{position: adjoint}``, or None."""
    if bar is None:
        return [None] * count
    if isinstance(bar, dict):
        return [bar.get(i) for i in range(count)]
    return list(bar) + [None] * (count - len(bar))


def _plus_scaled(a, g, s):
    """``a + s * g`` for adjoints ``a``, ``g`` of one primal (arrays, floats or full
    structures of them, as ``_match`` gives them)."""
    if tree.is_structure(a):
        _, leaves, spec = tree.flatten(a, tree.TANGENTS)
        return tree.unflatten(spec, [x + s * y for x, y in zip(leaves, tree.flatten(g, tree.TANGENTS)[1])])
    return a + s * g


def gradient_vjp(gradient, wrt, args, kwargs):
    """``(g(*args, **kwargs), pullback)`` for ``g = srcgrad.grad(f, wrt=W)`` called inside a
    function being differentiated (reverse over reverse): how ``dispatch.vjp_call`` runs it.

    The pullback of ``x ↦ ∇_W f(x)`` applied to a cotangent ``u`` (the shape of ``∇_W f``)
    is, for each differentiated argument ``a``, ``∂/∂a ⟨u, ∇_W f⟩ = Σ_i H_{a,W_i} u_i``:
    the Hessian of the scalar ``f`` (symmetric) times ``u`` placed on the ``W`` parameters
    and zero on the others, which is forward mode over ``f``'s gradient code with respect
    to ``W`` and the differentiated arguments (Pearlmutter 1994).  For ``value_and_grad``
    the value's cotangent ``v̄`` adds ``v̄ ∇_a f``.  ``wrt``: the call's positions and
    keywords to differentiate; the pullback returns their adjoints (a tuple for several),
    in their primals' dtypes.

    Raises:
        UnsupportedSyntaxError: ``g`` is not a plain ``grad``/``value_and_grad`` of whole
            named parameters (``has_aux=``, bound arguments, ``hvp`` ...).
    """
    gradient = plain_gradient(gradient)
    called = _called_gradient(gradient, wrt, args, kwargs)
    value = gradient(*args, **kwargs)
    return value, functools.partial(_pulled_back, gradient, called)


def _pulled_back(gradient, called, value_bar):
    """:func:`gradient_vjp`'s pullback: ``value_bar`` pulled back through the call
    ``_called_gradient`` describes (``called``)."""
    primals, given, names, composed = called
    index = {name: gradient._params.index(name) for name in names}
    own = gradient.options.wrt
    v_bar, u = _parts(value_bar, 2) if gradient.options.mode == "value_and_grad" else (None, value_bar)
    u = _parts(u, len(own)) if gradient._as_tuple else [u]
    tangents = tuple(_match(u[own.index(n)] if n in own else None, primals[index[n]]) for n in names)
    grads, hu = composed(primals, tangents)
    adjoints = []
    for name in given:
        k, x = names.index(name), primals[index[name]]
        # (a structure's adjoint stays sparse, as the code calling this adds it up)
        matched = (lambda g, x: tree.sparse_of(_match(g, x))) if tree.is_structure(x) else _match
        a_bar = matched(hu[k], x)
        if v_bar is not None:
            a_bar = matched(_plus_scaled(a_bar, matched(grads[k], x), v_bar), x)
        adjoints.append(a_bar)
    return adjoints[0] if len(adjoints) == 1 else tuple(adjoints)


def gradient_pullback(gradient, wrt, value_bar, args):
    """The adjoints of ``args`` (at the call's positions ``wrt``) in a call ``gradient(*args)``
    of ``g = srcgrad.grad(f)`` whose output's adjoint is ``value_bar``: ``H value_bar`` (see
    :func:`gradient_vjp`), as the backward sweep of code calling ``g`` computes it, by name
    (``dispatch.gradient_pullback``), so that forward mode over that code differentiates it
    by :func:`gradient_pullback_tangent` (a third derivative)."""
    gradient = plain_gradient(gradient)
    return _pulled_back(gradient, _called_gradient(gradient, wrt, args, {}), value_bar)


def gradient_pullback_tangent(ans, gradient, wrt, value_bar, args, value_bar_dot=None, args_dot=None):
    """The tangent of :func:`gradient_pullback` along ``value_bar_dot`` and the arguments'
    tangents ``args_dot`` (a tuple, None for a constant): ``H(x) v̇ + D³f(x)[ẋ] v`` for
    ``g = grad(f)``, the tangent of the forward-over-reverse program of ``f`` (whose second
    output is ``H v``, linear in ``v``) along ``(ẋ, v̇)``: forward mode over that program's
    code (Pearlmutter's construction applied once more), by :func:`program_jvp`, whose own
    tangent is forward mode once more: a fourth derivative and beyond
    (``egrad(egrad(egrad(egrad(tanh))))``).  Forward mode over code calling this function
    compiles it: what it computes flows through ``program_jvp`` alone.

    Raises:
        UnsupportedSyntaxError: a ``value_and_grad``, a call given a tangent in an argument
            it does not differentiate, or a structure argument (not derived yet).
    """
    program = _hessian_times(gradient, wrt, args)
    return program_jvp(program, (args, value_bar), (args_dot, value_bar_dot))


def _hessian_times(gradient, wrt, args):
    """``hessian_times(args, u)``: :func:`gradient_pullback`'s value, ``H u`` for the
    arguments the call differentiates, as a ``def`` calling the plain code of ``f``'s
    forward-over-reverse program (so that forward mode can differentiate it again).  One
    per program, kept.  Refuses what :func:`gradient_pullback_tangent` does not derive."""
    gradient = plain_gradient(gradient)
    primals, given, names, composed = _called_gradient(gradient, wrt, args, {})
    # (an argument the call does not differentiate may move: hessian_times reads it as its
    # code does, and forward mode differentiates that code in it too)
    if gradient.options.mode != "grad" or gradient._as_tuple \
            or any(tree.is_structure(x) for x in primals):
        raise errors.UnsupportedSyntaxError(
            f"a third derivative through `{getattr(gradient, '__name__', gradient)}` (srcgrad.grad(f) called "
            "in the function) is derived for srcgrad.grad of one parameter, of arrays and floats, only", None,
            "take this derivative by central differences of the second")
    transformed = composed.transformed(primals)
    full = transformed._arguments(tuple(primals), {})
    program = transformed.compiled(full).function
    key = (program, len(args), given)
    made = _HESSIAN_TIMES.get(key)
    if made is not None:
        return made
    own = gradient.options.wrt[0]
    index = {name: gradient._params.index(name) for name in names}
    scope = {"_program": program, "_np": np, "_fixed": tuple(full[len(args):])}
    tangents = ", ".join("u" if n == own else f"_np.zeros_like({_argument(index[n], len(args))})" for n in names)
    picked = [f"hu[{names.index(n)}]" for n in given]
    name = f"{program.__name__}_hessian_times"
    passed = ", ".join(_argument(k, len(args)) for k in range(len(full)))
    source = (f"def {name}(args, u):\n"
              f"    value, hu = _program({passed}, {tangents})\n"
              f"    return {picked[0] if len(picked) == 1 else '(' + ', '.join(picked) + ')'}\n")
    emit.load(source, f"<srcgrad: {name}>", scope)
    _HESSIAN_TIMES[key] = scope[name]
    return scope[name]


def _argument(k: int, given: int) -> str:
    """How ``hessian_times`` reads the ``k``-th argument of the gradient's program."""
    return f"args[{k}]" if k < given else f"_fixed[{k - given}]"


_HESSIAN_TIMES: dict = {}  # (program, argument count, differentiated names) -> its hessian_times def


def program_jvp(program, inputs, along):
    """The tangent of ``program(*inputs)`` along ``along`` (one entry per input: its tangent,
    None for a constant; None inside a tuple: zero there), by forward mode over
    ``program``'s code (a plain function srcgrad generated or reads).

    A primitive whose tangent (:func:`program_jvp_tangent`) is this function once more, of
    the code forward mode generated: derivatives of any order by composition."""
    moved = tuple(k for k, t in enumerate(along) if t is not None)
    if not moved:
        return runtime.zeros_tangent(program(*inputs))
    dots = tuple(_filled(along[k], inputs[k]) for k in moved)
    _, tangent = _jvp_of(program, moved)(*inputs, dots if len(moved) > 1 else dots[0])
    return tangent


def program_jvp_tangent(ans, program, inputs, along, inputs_dot=None, along_dot=None):
    """The tangent of :func:`program_jvp` along ``inputs_dot`` and ``along_dot``: the
    tangent of the jvp program's own tangent output, forward mode over its code."""
    return program_jvp(_jvp_code(program, inputs, along), (inputs, along), (inputs_dot, along_dot))[1]


def _jvp_of(program, moved):
    return api.jvp_function(program, moved)


def _filled(tangent, x):
    """``tangent`` with zeros where it is None (a tuple's entries too), each of its primal's dtype."""
    if tangent is None:
        return runtime.zeros_tangent(x)
    if isinstance(tangent, tuple) and isinstance(x, tuple):
        return tuple(_filled(t, v) for t, v in zip(tangent, x))
    return tangent


def _jvp_code(program, inputs, along):
    """``program_jvp_code(inputs, along)``: the plain code of ``program``'s jvp for these
    inputs' ranks (what forward mode generated), called with the tangents ``along`` gives,
    returning ``(value, tangent)``: a ``def`` forward mode can differentiate again."""
    moved = tuple(k for k, t in enumerate(along) if t is not None)
    jvp = _jvp_of(program, moved)
    full = jvp._arguments(tuple(inputs), {})  # (the parameters left to their defaults: constants)
    code = jvp.compiled(full).function
    key = (code, len(inputs), moved)
    made = _JVP_CODE.get(key)
    if made is not None:
        return made
    name = f"{code.__name__}_of"
    scope = {"_code": code, "_fixed": tuple(full[len(inputs):])}
    passed = ", ".join([f"inputs[{k}]" for k in range(len(inputs))]
                       + [f"_fixed[{k}]" for k in range(len(full) - len(inputs))]
                       + [f"along[{k}]" for k in moved])
    source = f"def {name}(inputs, along):\n    return _code({passed})\n"
    emit.load(source, f"<srcgrad: {name}>", scope)
    _JVP_CODE[key] = scope[name]
    return scope[name]


_JVP_CODE: dict = {}


@registry.defadjoint(program_jvp, diff=("inputs", "along"), zero=("program",), sequence=("inputs", "along"),
                     tangent=program_jvp_tangent)
def program_jvp_transposed(ans_bar, ans, program, inputs, along):
    """Reverse mode over a jvp (a reverse-mode jacobian of a third derivative): not derived; refused."""
    raise errors.UnsupportedSyntaxError(
        f"srcgrad differentiates the tangent of `{getattr(program, '__name__', program)}` in forward mode "
        "only (reverse mode over forward mode over a gradient is not derived)", None,
        "take this derivative with srcgrad.jacfwd, or by central differences")


registry.nondifferentiable(_hessian_times, _jvp_code)


def _inner_product(a, b):
    """``⟨a, b⟩`` summed over every element (of every leaf of a full structure)."""
    if tree.is_structure(a):
        return sum((np.sum(x * y) for x, y in zip(tree.flatten(a, tree.TANGENTS)[1], tree.flatten(b, tree.TANGENTS)[1])), 0.0)
    return np.sum(a * b)


def gradient_jvp(gradient, wrt, dots, args, kwargs):
    """``(g(*args, **kwargs), its tangent)`` for ``g = srcgrad.grad(f, wrt=W)`` called inside
    a function in forward mode (forward over reverse): how ``dispatch.jvp_call`` runs it.

    The tangent of ``∇_W f`` along the tangents ``ȧ`` of the arguments ``wrt`` (the call's
    positions and keywords, ``dots`` in their order) is ``Σ_a H_{W,a} ȧ``: forward mode over
    ``f``'s gradient code with respect to ``W`` and those arguments, the tangent zero on the
    others (Pearlmutter 1994).  For ``value_and_grad`` the value's tangent is
    ``Σ_a ⟨∇_a f, ȧ⟩``.  Values and tangents in their primals' dtypes.

    Raises:
        UnsupportedSyntaxError: as :func:`gradient_vjp`.
    """
    gradient = plain_gradient(gradient)
    primals, given, names, composed = _called_gradient(gradient, wrt, args, kwargs)
    index = {name: gradient._params.index(name) for name in names}
    tangents = tuple(_match(dots[given.index(n)] if n in given else None, primals[index[n]]) for n in names)
    grads, hu = composed(primals, tangents)
    own = gradient.options.wrt

    def packed(values):
        out = [_match(values[names.index(n)], primals[index[n]]) for n in own]
        return tuple(out) if gradient._as_tuple else out[0]
    if gradient.options.mode == "grad":
        return packed(grads), packed(hu)
    value = gradient.fn(*primals)
    value_dot = sum((_inner_product(_match(grads[names.index(n)], primals[index[n]]), t)
                     for n, t in zip(names, tangents) if n in given), 0.0)
    return (value, packed(grads)), (value_dot, packed(hu))


@registry.defadjoint(gradient_pullback, diff=("value_bar", "args"), zero=("gradient", "wrt"), sequence=("args",),
                     tangent=gradient_pullback_tangent)
def gradient_pullback_transposed(u, ans, gradient, wrt, value_bar, args):
    """Reverse mode over a gradient function's pullback (a fourth derivative through it, or a
    reverse-mode jacobian of a third): not derived; refused."""
    raise errors.UnsupportedSyntaxError(
        f"srcgrad differentiates the pullback of `{getattr(gradient, '__name__', gradient)}` (srcgrad.grad(f) "
        "called in the function) in forward mode only: a third derivative, not a fourth", None,
        "take the fourth derivative by central differences of the third")


# srcgrad.grad(f) called in a function makes a function: no derivative (forward mode over
# code that calls it passes it by; the call of what it made is differentiated).
registry.nondifferentiable(grad)


api.OF_GRADIENT.update(grad=grad_of_gradient, jvp=jvp_of_gradient)
