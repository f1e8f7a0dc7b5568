"""The public entry points: ``grad``, ``value_and_grad``, ``vjp``, ``source``, ``show``.

Compiled code is cached per function, options and argument ranks; calling a
gradient function costs one dictionary lookup on top of the generated code.
"""
from __future__ import annotations

import functools
import inspect
import linecache

import numpy as np

from . import anno, backends, errors, tree
from .pipeline import Compiled, Options, compile_function, rank_of_argument


def _origin_of(fn):
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    line = linecache.getline(code.co_filename, code.co_firstlineno).rstrip("\n")
    return anno.Origin(code.co_filename, code.co_firstlineno, len(line) - len(line.lstrip()), line)


class GradientFunction:
    """A function transformed by srcgrad; call it like the original.

    Attributes:
        fn: the user's function.
        options: what is generated (mode, wrt, backend).
    """

    def __init__(self, fn, mode: str, wrt, backend: str | None = None, optimize: bool = True,
                 has_aux: bool = False, internal: bool = False, intermediates=(), hooks=None):
        if isinstance(fn, GradientFunction):
            raise errors.UnsupportedSyntaxError(
                "srcgrad cannot differentiate a gradient function yet (higher-order derivatives)",
                _origin_of(fn.fn), "differentiate the original function")
        if not callable(fn):
            raise TypeError(f"srcgrad.{mode} expects a function, got {type(fn).__name__}")
        self.fn = fn
        functools.update_wrapper(self, fn)
        self._signature = inspect.signature(fn)
        self._params = [p.name for p in self._signature.parameters.values()
                        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        names, as_tuple = self._wrt_names(wrt)
        if (intermediates or hooks) and mode == "vjp":
            raise ValueError("intermediates= and hooks= work with grad and value_and_grad")
        backend = backend or backends.default_backend()
        backends.get(backend)  # an unknown name fails here, not at the first call
        self.options = Options(mode, names, as_tuple, backend, optimize, has_aux, tuple(intermediates),
                               tuple((hooks or {}).items()))
        self._wrt_index = tuple(self._params.index(n) for n in names)
        self._cache: dict[tuple, Compiled] = {}
        self._last: Compiled | None = None
        # Called from generated code (rt.vjp_call): adjoints stay raw (sparse for
        # structures); the outermost call gives them their primal's shape and type.
        self._internal = internal

    def _wrt_names(self, wrt):
        as_tuple = isinstance(wrt, (tuple, list))
        items = tuple(wrt) if as_tuple else (wrt,)
        if not items:
            raise self._wrt_error("`wrt` is empty")
        names = []
        for item in items:
            if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
                if not 0 <= item < len(self._params):
                    raise self._wrt_error(f"wrt={item} is out of range: {self.fn.__name__} has "
                                          f"{len(self._params)} parameters")
                names.append(self._params[item])
            elif isinstance(item, str):
                if item not in self._params:
                    raise self._wrt_error(f"wrt={item!r} names no parameter of {self.fn.__name__}")
                names.append(item)
            else:
                raise self._wrt_error(f"wrt must be a parameter index or name, got {item!r}")
        if len(set(names)) != len(names):
            raise self._wrt_error(f"wrt names a parameter twice: {names}")
        return tuple(names), as_tuple

    def _wrt_error(self, problem):
        return errors.WrtError(problem, _origin_of(self.fn),
                               f"the parameters are ({', '.join(self._params)}); pass "
                               "wrt=<index or name> or a tuple of them")

    # ---- calling ----------------------------------------------------------
    def _arguments(self, args, kwargs):
        if not kwargs and len(args) == len(self._params):
            return args
        bound = self._signature.bind(*args, **kwargs)
        bound.apply_defaults()
        return tuple(bound.arguments[p] for p in self._params)

    def compiled(self, args) -> Compiled:
        """The compiled program for these (positional) arguments, from the cache if there."""
        return self.program_for(tuple(map(rank_of_argument, args)))

    def program_for(self, key: tuple) -> Compiled:
        """The compiled program for arguments of these ranks (see ``rank_of_argument``)."""
        program = self._cache.get(key)
        if program is None:
            backends.get(self.options.backend).check_device()
            program = self._cache[key] = compile_function(self.fn, self.options, key)
        self._last = program
        return program

    def _check_wrt_types(self, args):
        for i in self._wrt_index:
            value = args[i]
            if type(value) is np.ndarray and value.dtype.kind in "fc":
                continue  # the common case, checked first: this runs on every call
            if tree.is_structure(value):
                continue  # its leaves are checked when the gradient is built
            dtype = getattr(value, "dtype", None)
            kind = dtype.kind if dtype is not None else (
                "b" if isinstance(value, bool) else "i" if isinstance(value, int) else "f"
                if isinstance(value, float) else None)
            if kind in ("i", "u", "b"):
                raise errors.WrtError(
                    f"cannot differentiate with respect to `{self._params[i]}`: it is an integer "
                    f"value ({type(value).__name__}{'' if dtype is None else ' of ' + str(dtype)})",
                    _origin_of(self.fn),
                    f"pass a floating-point value, e.g. {self._params[i]}.astype(np.float64) "
                    f"or float({self._params[i]})")

    def __call__(self, *args, **kwargs):
        args = self._arguments(args, kwargs)
        if self._internal:  # from generated code: raw (value, pullback), no checks twice
            return self.compiled(args)(*args)
        self._check_wrt_types(args)
        program = self.compiled(args)
        mode, has_aux = self.options.mode, self.options.has_aux
        if mode == "vjp":
            value, pullback, *aux = program(*args)
            return (value, self._finalizing(pullback, args), *aux)
        out = program(*args)
        if mode == "grad":
            if has_aux:
                return self._finalize_watched(out[0], args), out[1]
            return self._finalize_watched(out, args)
        value, grads = out
        return value, self._finalize_watched(grads, args)

    def _finalize_watched(self, grads, args):
        if self.options.intermediates:
            return self._finalize(grads[0], args), grads[1]
        return self._finalize(grads, args)

    def _finalizing(self, pullback, args):
        @functools.wraps(pullback)
        def finalized_pullback(ans_bar):
            return self._finalize(pullback(ans_bar), args)
        return finalized_pullback

    def _finalize(self, grads, args):
        if self._internal:
            return grads
        if not self.options.wrt_tuple:
            return _match(grads, args[self._wrt_index[0]])
        return tuple(_match(g, args[i]) for g, i in zip(grads, self._wrt_index))

    @property
    def source(self) -> str:
        """The generated source last run (or compiled without rank information)."""
        if self._last is None:
            self._last = compile_function(self.fn, self.options, (None,) * len(self._params))
        return self._last.source

    def __repr__(self):
        return f"<srcgrad.{self.options.mode} of {self.fn.__qualname__} wrt {self.options.wrt}>"


def _match(g, x):
    """Give a gradient its primal's type, shape and dtype (float32 in, float32 out);
    for a structure, a value of the same structure (``g.linear1.weight``)."""
    if type(g) is np.ndarray and type(x) is np.ndarray and g.dtype == x.dtype and g.shape == x.shape \
            and g.flags.writeable:
        return g  # the common case, checked first: this runs on every gradient
    if tree.is_structure(x):
        return tree.materialize(g if isinstance(g, dict) else {}, x)
    if isinstance(x, np.ndarray):
        if type(g) is np.ndarray and g.dtype == x.dtype and g.shape == x.shape and g.flags.writeable:
            return g
        return np.array(np.broadcast_to(g, x.shape), dtype=x.dtype)
    if isinstance(x, float):
        return float(g)
    if isinstance(x, np.generic):
        return x.dtype.type(g)
    return g


def _transform(mode, f, wrt, backend, optimize, has_aux, intermediates=(), hooks=None):
    if f is None:
        return functools.partial(_transform, mode, wrt=wrt, backend=backend, optimize=optimize,
                                 has_aux=has_aux, intermediates=intermediates, hooks=hooks)
    return GradientFunction(f, mode, wrt, backend, optimize, has_aux, intermediates=intermediates,
                            hooks=hooks)


def grad(f=None, wrt=0, *, backend: str | None = None, optimize: bool = True,
         has_aux: bool = False, intermediates=(), hooks=None):
    """Reverse-mode gradient of a scalar-valued function, by source transformation.

    Usable as ``grad(f)``, ``@grad`` and ``@grad(wrt=(0, 1))``.

    Args:
        f: a Python function whose output is a scalar (0-d array or Python float).
        wrt: the parameter(s) to differentiate with respect to: an index, a
            name, or a tuple of them (then a tuple of gradients is returned).
        backend: the array library of the generated code: ``"numpy"`` or
            ``"cupy"`` (the same program retargeted to CuPy, for the GPU);
            default: :func:`srcgrad.set_default_backend`'s choice, else NumPy.
        optimize: run the optimization passes (turn off to read the raw sweeps).
        has_aux: ``f`` returns ``(loss, aux)``; the gradient function then
            returns ``(gradient, aux)``.
        intermediates: names of values computed inside ``f`` (``("h",)``) whose
            adjoints to return as well: the result is then
            ``(gradient, {"h": h_bar})`` — like PyTorch's ``retain_grad``.
        hooks: ``{"h": fn}``: in the backward sweep, ``h``'s adjoint becomes
            ``fn(h_bar)`` before it flows further (PyTorch's tensor hooks; e.g.
            guided backpropagation clamps negative adjoints at each ReLU).

    Returns:
        A function with ``f``'s parameters that returns the gradient(s).  Each
        gradient has its input's shape and floating dtype (float32 in, float32
        out; a Python float in, a Python float out).

    Raises:
        srcgrad.errors.WrtError: ``wrt`` names no parameter, or (at call time)
            an integer-typed argument.
        srcgrad.errors.NonScalarOutputError: the output is not a scalar (use ``vjp``).
        srcgrad.errors.UnsupportedSyntaxError, NoDerivativeRuleError,
            NoSourceError: at the first call, naming the user's file and line.
    """
    return _transform("grad", f, wrt, backend, optimize, has_aux, intermediates, hooks)


def value_and_grad(f=None, wrt=0, *, backend: str | None = None, optimize: bool = True,
                   has_aux: bool = False, intermediates=(), hooks=None):
    """Like :func:`grad`, but the function returns ``(value, gradient)``
    (``((value, aux), gradient)`` with ``has_aux=True``)."""
    return _transform("value_and_grad", f, wrt, backend, optimize, has_aux, intermediates, hooks)


def vjp(f=None, wrt=0, *, backend: str | None = None, optimize: bool = True, has_aux: bool = False):
    """Vector-Jacobian product for outputs of any shape.

    Returns:
        A function with ``f``'s parameters that returns ``(value, pullback)``;
        ``pullback(value_bar)`` takes an adjoint of ``value``'s shape and returns
        the adjoint(s) of the ``wrt`` inputs (a tuple when ``wrt`` is a tuple).
        A function returning a tuple has a tuple ``value`` and takes a tuple
        ``value_bar`` (``None`` for an output with no adjoint).  With
        ``has_aux=True``: ``(value, pullback, aux)``.
    """
    return _transform("vjp", f, wrt, backend, optimize, has_aux)


def source(fn, *example_args, **example_kwargs) -> str:
    """The generated Python source of a function made by ``grad``/``value_and_grad``/``vjp``.

    With example arguments, the code specialised for their ranks; without, the
    code last run (or a version compiled without rank information).

    Raises:
        TypeError: ``fn`` is not a srcgrad-transformed function.
    """
    if not isinstance(fn, GradientFunction):
        raise TypeError("srcgrad.source expects a function made by srcgrad.grad, "
                        f"value_and_grad or vjp; got {fn!r}")
    if example_args or example_kwargs:
        return fn.compiled(fn._arguments(example_args, example_kwargs)).source
    return fn.source


def show(fn, *example_args, **example_kwargs) -> None:
    """Print :func:`source`."""
    print(source(fn, *example_args, **example_kwargs), end="")
