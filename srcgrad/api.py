"""The public entry points: ``grad``, ``value_and_grad``, ``vjp``, ``jvp``, ``source``, ``show``.

Compiled code is cached per function, options and argument ranks; calling a
gradient function costs one dictionary lookup on top of the generated code.
"""
from __future__ import annotations

import functools
import inspect
import linecache
import random
import types

import numpy as np
import optree

from . import anno, errors, runtime, tree
from .gradient_function import COMPILING, GradientFunction, _primitive_as_source
from .gradient_values import _match, _tangent_of_structure  # noqa: F401 - higher.py's, through this module
from .pipeline import Compiled, compile_function, programs_run
from .transforms import resolve


# ---- compiled once per code ------------------------------------------------------
PROGRAMS: dict = {}  # (id(code), options, ranks) -> [(closure key, Compiled)], most recent first
KEPT = 8  # programs kept per (code, options, ranks); functions' vjps kept per code (VJPS)


def _compiled_once(fn, options, ranks, args) -> Compiled:
    """``fn``'s program for arguments of these ranks: compiled at the first call of
    its code, and for another function of the same code (a closure or nested ``def``
    made again at each call, a lambda made in a loop, a gradient's generated code
    loaded again) the same program reading that function's own cells, globals and
    defaults (``Compiled.rebound``).  Also keyed on what the program is specialised
    on among the closure's values (``resolve.closure_key``: the function or class a
    cell holds, the kind of the data in the others), so closures over two different
    layers alternate between two programs; what it was specialised on besides (the
    classes of the objects it inlined, the free names it guards) is checked at each
    call as for any program, and compiled again where it differs."""
    if not isinstance(fn, types.FunctionType):
        return compile_function(fn, options, ranks, bind_vjp, args)
    # (By the code's identity: code objects compare equal by their contents, so two
    # lambdas written alike on the same line of two files are equal.  The programs kept
    # hold their function, so the code, and its id, live as long as the entry.)
    where, cells = (id(fn.__code__), options, ranks), resolve.closure_key(fn)
    try:
        kept = PROGRAMS.setdefault(where, [])
    except TypeError:  # (a hook that is an object without a hash: compiled for this function alone)
        return compile_function(fn, options, ranks, bind_vjp, args)
    for i, (key, program) in enumerate(kept):
        if key == cells and program.free.fn.__code__ is fn.__code__:
            kept.insert(0, kept.pop(i))
            return program if program.free.fn is fn else program.rebound(fn)
    program = compile_function(fn, options, ranks, bind_vjp, args)
    kept.insert(0, (cells, program))
    del kept[KEPT:]
    return program


# ---- callees: the vjps generated code calls ---------------------------------
VJPS: dict = {}  # (function, wrt, backend) -> its internal vjp GradientFunction
JVPS: dict = {}  # (function, wrt, backend) -> its internal jvp GradientFunction
_MADE: dict = {}  # (mode, id(code), wrt, backend) -> the functions of that code in VJPS/JVPS, oldest first


def jvp_function(fn, wrt, backend=None) -> GradientFunction:
    """The cached internal jvp of ``fn`` with respect to ``wrt`` (a tuple of positions,
    keywords) that generated code calls (``dispatch.jvp_call``)."""
    return _internal(JVPS, "jvp", fn, wrt, backend)


def vjp_function(fn, wrt, backend=None) -> GradientFunction:
    """The cached internal vjp of ``fn`` with respect to ``wrt`` (positions and keywords,
    ``"self"`` for a receiver) that generated code calls (``dispatch.vjp_call``)."""
    return _internal(VJPS, "vjp", fn, wrt, backend)


def _internal(cache: dict, mode: str, fn, wrt, backend) -> GradientFunction:
    """The ``mode`` GradientFunction of ``fn`` that generated code calls, from ``cache``."""
    key = (fn, wrt, backend)
    transformed = cache.get(key)
    if transformed is None:
        transformed = cache[key] = GradientFunction(fn, mode, wrt if len(wrt) > 1 else wrt[0],
                                                    backend=backend, internal=True)
        # A closure made at each call is a new function each time: the last few are kept
        # (their programs are the code's, shared: ``_compiled_once``), not every one made.
        made = _MADE.setdefault((mode, id(getattr(fn, "__code__", fn)), wrt, backend), [])
        made.append(key)
        if len(made) > KEPT:
            cache.pop(made.pop(0), None)
    return transformed


def bind_vjp(namespace, name, fn, wrt, ranks):
    """Put ``fn``'s vjp for arguments of these ranks into ``namespace[name]``:
    what generated code calls for a function known at compile time
    (``h, h_pullback = layer_vjp(h, w)``), without ``dispatch.vjp_call``'s dispatch.

    It is compiled at its first call (not now: a recursive function binds its
    own vjp while being compiled); until then ``namespace[name]`` is a stub."""
    def first_call(*args):
        program = vjp_function(fn, wrt).program_for(ranks, args)

        def several_outputs(*args):
            value, pullback = program(*args)
            return value, tuple_pullback(pullback, value)
        value, pullback = program(*args)
        several = isinstance(value, tuple)  # whether fn returns a tuple is fixed by its source
        namespace[name] = several_outputs if several else program
        return value, tuple_pullback(pullback, value) if several else pullback
    # (named as the code calls it, for messages: `p` of a `p = lambda r: ...` too)
    first_call.__name__ = fn.__name__ if fn.__name__.isidentifier() else name.split("_vjp")[0]
    namespace[name] = first_call


COMPILING.update(once=_compiled_once, bind_vjp=bind_vjp)


def tuple_pullback(pullback, value):
    """A function with several outputs: an output nobody used has adjoint zero."""
    def pull(value_bar):
        if isinstance(value_bar, dict):  # sparse: the outputs the caller read, by position
            if hasattr(type(value), "_fields"):  # a named tuple's fields read by name too
                value_bar = tree.by_position(value_bar, value)
            value_bar = [value_bar.get(i) for i in range(len(value))]
        value_bar = list(value_bar) + [None] * (len(value) - len(value_bar))  # `a, _ = f(x)`
        return pullback(tuple(runtime.zeros_like(v) if g is None else g for g, v in zip(value_bar, value)))
    return pull


# grad and jvp of a gradient function (`grad(grad(f))`: forward over reverse), by mode: put here
# by srcgrad/higher.py, which is built on this module.
OF_GRADIENT: dict = {}


def _transform(mode, f, wrt, backend, optimize, has_aux, intermediates=(), hooks=None, check=None):
    if f is None:
        return functools.partial(_transform, mode, wrt=wrt, backend=backend, optimize=optimize,
                                 has_aux=has_aux, intermediates=intermediates, hooks=hooks, check=check)
    equivalent = getattr(f, "__srcgrad_equivalent__", None)
    if equivalent is not None:  # grad(grad(f)), differentiated once more: as the grad of a def calling it
        f = equivalent()
    if isinstance(f, GradientFunction) and mode in OF_GRADIENT and not (has_aux or intermediates or hooks):
        try:
            return OF_GRADIENT[mode](f, wrt)
        except errors.UserCodeError as error:
            raise errors.shown_to_user(error) from None
    try:
        return GradientFunction(f, mode, wrt, backend, optimize, has_aux, intermediates=intermediates,
                                hooks=hooks, check=check)
    except errors.UserCodeError as error:
        raise errors.shown_to_user(error) from None


def with_argnum(wrt, argnum):
    """``wrt``, or HIPS autograd's ``argnum=`` where that was given instead."""
    if argnum is None:
        return wrt
    if wrt != 0:
        raise TypeError("give wrt= or argnum= (HIPS autograd's name for it), not both")
    return argnum


def grad(f=None, wrt=0, *, backend: str | None = None, optimize: bool = True,
         has_aux: bool = False, intermediates=(), hooks=None, check: bool | None = None, argnum=None):
    """Reverse-mode gradient of a scalar-valued function, by source transformation.

    Usable as ``grad(f)``, ``@grad`` and ``@grad(wrt=(0, 1))``.

    Args:
        f: a Python function whose output is a scalar (0-d array or Python float);
            or a bound method (``model.loss``), a ``functools.partial`` or a
            callable object (its class's ``__call__``): the function underneath,
            given the bound object and the fixed arguments as constants, and
            ``wrt`` counts the parameters left to the caller (``x`` in
            ``model.loss(x)``).  For the gradient with respect to the object's
            own parameters, differentiate the class's function with the object
            as its first argument: ``grad(Model.loss, wrt=0)(model, x)``
            returns a gradient shaped like ``model`` (``g.linear1.weight``).
        wrt: the parameter(s) to differentiate with respect to: an index, a
            name, or a tuple of them (then a tuple of gradients is returned).
            An index counts positional arguments as passed (JAX's
            ``argnums``): for ``def f(x, *ws)``, ``wrt=(1, 2)`` on
            ``f(x, w1, w2)`` gives the gradients of ``w1`` and ``w2``.  The
            name of ``*args`` gives a tuple with one gradient per element
            passed there, the name of ``**kwargs`` a dict, and any other name,
            for a function with ``**kwargs``, the keyword argument that lands
            there (``wrt="scale"`` on ``f(x, scale=s)``).  Entries of
            ``*args``/``**kwargs`` are checked at each call.
        argnum: HIPS autograd's name for ``wrt`` (its ports run as written).
        backend: the array library of the generated code: ``"numpy"``,
            ``"cupy"`` (the same program retargeted to CuPy, for the GPU) or
            ``"numba"`` (compiled by ``numba.njit``, for loop-heavy code: docs/numba.md);
            default: :func:`srcgrad.set_default_backend`'s choice, else NumPy.
        optimize: run the optimization passes (turn off to read the raw sweeps).
        has_aux: ``f`` returns ``(loss, aux)``; the gradient function then
            returns ``(gradient, aux)``.
        intermediates: names of values computed inside ``f`` (``("h",)``) whose
            adjoints to return as well: the result is then
            ``(gradient, {"h": h_bar})`` — like PyTorch's ``retain_grad``.
        hooks: ``{"h": fn}``: in the backward sweep, ``h``'s adjoint becomes
            ``fn(h_bar)`` before it flows further (PyTorch's tensor hooks; e.g.
            guided backpropagation clamps negative adjoints at each ReLU); a
            hook that returns None leaves it unchanged.  ``fn`` gets the array
            read-only (it may be another name's adjoint too): changing it in
            place raises ValueError.
        check: each call also runs ``f`` itself, compares its value with the
            generated code's, and checks the gradient along a random direction
            against a central difference (see ``srcgrad/checking.py`` for what
            is called how often, random numbers and arguments ``f`` writes
            into).  Default: on when the environment variable
            ``SRCGRAD_CHECK=1`` is set.  Several times slower; for tests and
            debugging.

    Returns:
        A function with ``f``'s parameters that returns the gradient(s).  Each
        gradient has its input's shape and floating dtype (float32 in, float32
        out; a Python float in, a Python float out).

    Raises:
        srcgrad.errors.WrtError: ``wrt`` names no parameter or one that a
            partial or bound method fixes, or (at call time)
            an integer-typed argument or an entry of ``*args``/``**kwargs``
            that was not passed.
        srcgrad.errors.NonScalarOutputError: the output is not a scalar (use ``vjp``).
        srcgrad.errors.UnsupportedSyntaxError, NoDerivativeRuleError,
            NoSourceError: at the first call, naming the user's file and line
            (the traceback ends at the user's call; ``SRCGRAD_TRACEBACK=1``
            shows srcgrad's own frames too, for a bug report).
        srcgrad.errors.GradientCheckError: with ``check=True``, a value or
            gradient that disagrees with ``f``'s own.
    """
    return _transform("grad", f, with_argnum(wrt, argnum), backend, optimize, has_aux, intermediates, hooks, check)


def value_and_grad(f=None, wrt=0, *, backend: str | None = None, optimize: bool = True,
                   has_aux: bool = False, intermediates=(), hooks=None, check: bool | None = None, argnum=None):
    """Like :func:`grad`, but the function returns ``(value, gradient)``
    (``((value, aux), gradient)`` with ``has_aux=True``)."""
    return _transform("value_and_grad", f, with_argnum(wrt, argnum), backend, optimize, has_aux, intermediates, hooks, check)


def vjp(f=None, wrt=0, *, backend: str | None = None, optimize: bool = True, has_aux: bool = False,
        check: bool | None = None):
    """Vector-Jacobian product for outputs of any shape.

    Returns:
        A function with ``f``'s parameters that returns ``(value, pullback)``;
        ``pullback(value_bar)`` takes an adjoint of ``value``'s shape and returns
        the adjoint(s) of the ``wrt`` inputs (a tuple when ``wrt`` is a tuple).
        A function returning a tuple has a tuple ``value`` and takes a tuple
        ``value_bar`` (``None`` for an output with no adjoint).  With
        ``has_aux=True``: ``(value, pullback, aux)``.

    Raises:
        ValueError: the pullback is given an adjoint whose shape is not the output's.

    With ``check=True`` (or ``SRCGRAD_CHECK=1``) the value is compared with
    ``f``'s own, and each pullback call checks ``<pullback(u), v>`` against a
    central difference of ``<u, f>`` along a random direction ``v``.

    The pullback keeps references to the arrays it was given, not copies (no
    copy on the hot path): changing an input array in place between the call
    and ``pullback(...)`` (the next batch written into the same buffer) changes
    the adjoints it computes, silently.  Pass copies, or call the pullback
    first.  (PyTorch refuses such a change; JAX arrays cannot change.)
    """
    return _transform("vjp", f, wrt, backend, optimize, has_aux, check=check)


def elementwise_grad(f, wrt=0, *, backend: str | None = None, optimize: bool = True, argnum=None):
    """The gradient of ``sum(f(...))``: for an ``f`` acting elementwise, each output's
    derivative in its own input (HIPS autograd's ``elementwise_grad``).

    Returns:
        A function with ``f``'s parameters returning the adjoint of the ``wrt``
        input(s) for an output adjoint of ones (``vjp`` with ``ones_like(value)``),
        in the inputs' shapes.

    Raises:
        As :func:`vjp`.
    """
    return grad(as_def(f, summed=True), with_argnum(wrt, argnum), backend=backend, optimize=optimize)


def as_def(f, summed: bool = False):
    """``def tanh_summed(x): return np.sum(tanh(x))`` (``summed``), or ``def f_grad(x): return
    _f(x)``: a call of ``f`` with ``f``'s parameters, as source (registered with linecache) that
    the pipeline reads like the user's own.  The summed one's gradient is the vjp of ``f`` with
    an adjoint of ones (``d/dx sum f = J^T 1``); either, being a ``def`` that calls ``f``, can be
    differentiated again when ``f`` is a gradient function (``elementwise_grad(elementwise_grad(f))``,
    as autograd's examples write, or ``grad(grad(grad(f)))``)."""
    made = _AS_DEF.get((id(f), summed))
    if made is not None and made[0] is f:
        return made[1]
    # (a NumPy function with a rule is called as it is, with the parameters of its rule)
    shape = _primitive_as_source(f) if not isinstance(f, (types.FunctionType, GradientFunction)) else f
    try:
        signature = inspect.signature(shape.fn if isinstance(shape, GradientFunction) else shape)
    except (TypeError, ValueError):
        return f  # (no signature: grad refuses it as it is, with its own message)
    scope, params, passed = {"_f": f, "_np": np}, [], []
    kinds = inspect.Parameter
    for p in signature.parameters.values():
        if shape is not f and p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue  # (a NumPy function: its rule's required parameters, so it is differentiated again)
        text = p.name
        if p.default is not p.empty:
            scope[f"_default_{p.name}"] = p.default
            text += f"=_default_{p.name}"
        if p.kind is kinds.VAR_POSITIONAL:
            text, given = f"*{p.name}", f"*{p.name}"
        elif p.kind is kinds.VAR_KEYWORD:
            text, given = f"**{p.name}", f"**{p.name}"
        elif p.kind is kinds.KEYWORD_ONLY:
            if not any(q.startswith("*") for q in params):
                params.append("*")
            given = f"{p.name}={p.name}"
        else:
            given = p.name
        params.append(text)
        passed.append(given)
        if p.kind is kinds.POSITIONAL_ONLY and not any(q.kind is kinds.POSITIONAL_ONLY for q in list(
                signature.parameters.values())[len(params):]):
            params.append("/")
    suffix = "summed" if summed else "def"
    name = f"{getattr(f, '__name__', 'f')}_{suffix}" if str(getattr(f, "__name__", "")).isidentifier() \
        else f"f_{suffix}"  # (a lambda's `<lambda>`)
    filename = f"<srcgrad: {'elementwise_grad of' if summed else 'a def calling'} {getattr(f, '__qualname__', name)}>"
    called = f"_f({', '.join(passed)})"
    source = f"def {name}({', '.join(params)}):\n    return {f'_np.sum({called})' if summed else called}\n"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), scope)
    scope[name].__srcgrad_calls__ = f  # (errors about it are located at f's def: higher.users_function)
    _AS_DEF[id(f), summed] = (f, scope[name])
    return scope[name]


_AS_DEF: dict = {}  # (id(f), summed) -> (f, its def), for as_def


def jvp(f=None, wrt=0, *, backend: str | None = None, optimize: bool = True):
    """Jacobian-vector product (forward mode), for outputs of any shape.

    The generated code follows ``f`` statement by statement, each followed by
    its tangent (``h_dot = x_dot @ w1 + x @ w1_dot``): one pass, no stack,
    about the cost of one more evaluation of ``f``.  ``srcgrad.show`` prints it.

    Args:
        f: a Python function (the subset ``grad`` takes).
        wrt: the parameter(s) whose tangents are given: an index, a name, or a
            tuple of them (whole parameters only).
        backend, optimize: as for :func:`grad`.

    Returns:
        A function taking ``f``'s arguments followed by the tangents of the
        ``wrt`` ones (one value, or a tuple when ``wrt`` is a tuple; each of its
        primal's shape, a structure of the same structure for a structure:
        its entries for integer leaves and an object's integer attributes,
        which have no gradient, are ignored; its float attributes are tangents),
        and returning ``(value, tangent)``: ``f``'s value and its directional
        derivative ``J v`` along the tangents, of the value's shape (a tuple
        for a tuple, zeros for an output that does not depend on them).

    Raises:
        ValueError: a tangent whose shape is not its primal's.
        srcgrad.errors.NoDerivativeRuleError: at the first call, a primitive
            without a tangent rule given a value with a tangent (at the user's
            line, naming it); and as :func:`grad`.
    """
    return _transform("jvp", f, wrt, backend, optimize, False)


def source(fn, *example_args, **example_kwargs) -> str:
    """The generated Python source of a function made by ``grad``/``value_and_grad``/``vjp``/``jvp``.

    With example arguments, the code specialised for their ranks, followed by the
    code of each function it calls that is compiled when the code runs (a closure or
    nested ``def``, a callable passed in, a method of an object known only then,
    a helper whose vjp is bound at its first call), at any depth, each headed by
    ``# ---- called when it runs: make.<locals>.scaled (model.py:12) ----``: what
    those calls run is known once their arguments are seen, so the gradient is
    called once on the example arguments to find them (NumPy's and Python's global
    random states are put back after it).  Without example arguments, the code last
    run (or a version compiled without rank information), without its callees.

    Raises:
        TypeError: ``fn`` is not a srcgrad-transformed function.
    """
    composed = getattr(fn, "__srcgrad_source__", None)
    if composed is not None:  # hvp, hessian, jvp(grad(f)), grad(grad(f)): forward over reverse
        if not (example_args or example_kwargs):
            raise TypeError(f"srcgrad.source({fn.__name__}) needs example arguments (the code is forward mode "
                            "over the gradient code compiled for them)")
        return composed(*example_args, **example_kwargs)
    if not isinstance(fn, GradientFunction):
        raise TypeError("srcgrad.source expects a function made by srcgrad.grad, "
                        f"value_and_grad, vjp, jvp, hvp or hessian; got {fn!r}")
    given, given_kwargs = example_args, example_kwargs
    try:
        complete = fn.options.mode != "jvp" or fn._variadic or len(example_args) > len(fn._params)
        if fn.options.mode == "jvp" and not fn._variadic and len(example_args) > len(fn._params):
            example_args = example_args[:len(fn._params)]  # (the tangents: of the primals' ranks)
        if example_args or example_kwargs:
            example_args = (*fn._fixed_args, *example_args)
            example_kwargs = {**fn._fixed_kwargs, **example_kwargs}
            arguments = fn._arguments(example_args, example_kwargs)
            text = fn.compiled(arguments).current(arguments).source
            return text + _callees_run(fn, text, given, given_kwargs) if complete else text
        return fn.source
    except errors.UserCodeError as error:
        raise errors.shown_to_user(error, anno.origin_of(fn.fn)) from None


def _callees_run(fn, text, args, kwargs) -> str:
    """The code of the programs that calling ``fn(*args, **kwargs)`` runs besides its own
    (``text``), in the order they first run, each after a comment naming its function and
    its ``file:line``; ``""`` where the code calls nothing compiled when it runs."""
    if "from srcgrad import dispatch" not in text and "compiled at its first call" not in text:
        return ""
    states = np.random.get_state(), random.getstate()
    try:
        with programs_run() as run:
            fn(*args, **kwargs)
    finally:
        np.random.set_state(states[0])
        random.setstate(states[1])
    shown, parts = {text}, []
    for callee, code in run:
        if code in shown:
            continue
        shown.add(code)
        where = f"{callee.__code__.co_filename.rsplit('/', 1)[-1]}:{callee.__code__.co_firstlineno}"
        parts.append(f"\n\n# ---- called when it runs: {callee.__qualname__} ({where}) ----\n{code}")
    return "".join(parts)


def show(fn, *example_args, **example_kwargs) -> None:
    """Print :func:`source`."""
    print(source(fn, *example_args, **example_kwargs), end="")
