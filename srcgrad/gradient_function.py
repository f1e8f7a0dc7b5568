"""``GradientFunction``: a function transformed by srcgrad, called like the original.

Requires: a Python function (or a bound method, a ``functools.partial``, a callable object, a
function without source that has a derivative rule), a mode and ``wrt``; ``COMPILING``, which
``srcgrad.api`` fills: how a program is compiled once per code, and how generated code binds the
vjps it calls (``api`` keeps their caches, and makes the callees' own ``GradientFunction``s).
Guarantees: a call checks its arguments against ``wrt`` (``wrt.WrtParameters``), runs the
program compiled for their ranks (at the first call with those ranks, then from the cache) and
hands out the gradients with their primals' types, shapes and structures
(``gradient_values.FinalizedGradients``).
"""
from __future__ import annotations

import functools
import importlib
import inspect
import linecache
import os
import types

import numpy as np

from . import anno, backends, checking, errors, runtime, tree
from .gradient_values import FinalizedGradients, _tangent_of_structure, _unshared
from .pipeline import Compiled, Options, compile_function, rank_of_argument, rank_of_layout
from .rules import registry
from .wrt import WrtParameters

# How a program is compiled, once per code (``api._compiled_once``), and how generated code binds
# the vjps it calls (``api.bind_vjp``): put here by srcgrad/api.py, which keeps their caches and is
# built on this module.
COMPILING: dict = {}


_OWNERS = {"numpy": ("NumPy", "np."), "scipy": ("SciPy", "scipy."), "builtins": ("Python", ""),
           "math": ("Python", "math."), "cupy": ("CuPy", "cp.")}


def _library_function(fn):
    """A NumPy, SciPy or Python function compiled in C (``np.sum``, ``np.sin``, ``math.exp``):
    not the user's code, so there is nothing of theirs to differentiate."""
    if isinstance(fn, types.FunctionType) or isinstance(fn, type):
        return None
    name = registry.label(fn)
    package, _, rest = name.partition(".")
    if package not in _OWNERS or not rest:
        return None
    owner, prefix = _OWNERS[package]
    spelled = prefix + rest if package != "scipy" else name
    return errors.NoSourceError(
        f"{spelled} is {owner}'s function, not yours, and srcgrad has no derivative rule for it: it "
        f"differentiates the Python source of your own functions, and the {owner} functions it has rules for",
        None, f"register a rule for it with @srcgrad.defadjoint({spelled}) (see docs/rules.md), or write "
        "what it computes with functions srcgrad differentiates")


def _primitive_as_source(fn):
    """A function without Python source that has a derivative rule (``np.sqrt``,
    ``scipy.special.erf``), as a ``def`` that calls it, its rule's required parameters
    by name (``def sqrt(x, *args, **kwargs): return numpy.sqrt(x, *args, **kwargs)``),
    registered with linecache so the pipeline reads it like the user's own:
    ``grad(np.sqrt)`` is then its rule, as in autograd and JAX (``jax.grad(jnp.sin)``),
    and ``grad(grad(np.sqrt))`` forward mode over that.  ``fn`` itself for anything
    else (a Python function, a callable without a derivative rule), which the caller
    differentiates or refuses as before."""
    if isinstance(fn, (types.FunctionType, type)):
        return fn
    rule = registry.lookup(fn)
    if rule is None or not rule.differentiable:
        return fn
    made = _PRIMITIVES.get(id(fn))
    if made is not None and made[0] is fn:
        return made[1]
    spelled = registry.label(fn)  # `numpy.sqrt`, with `numpy` bound, where that names `fn`
    parts, found = spelled.split("."), None
    if len(parts) > 1 and all(part.isidentifier() for part in parts):
        try:
            found = importlib.import_module(parts[0])
        except ImportError:
            pass
        for part in parts[1:]:
            found = getattr(found, part, None)
    scope = {parts[0]: importlib.import_module(parts[0])} if found is fn else {"_primitive": fn}
    spelled = spelled if found is fn else "_primitive"
    name = fn.__name__ if str(getattr(fn, "__name__", "")).isidentifier() else "primitive"
    filename = f"<srcgrad: {spelled}>"
    named = [p.name for p in rule.signature.parameters.values()  # NumPy's required ones, by name
             if p.default is p.empty and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    params = ", ".join(named + ["*args", "**kwargs"])
    source = f"def {name}({params}):\n    return {spelled}({params})\n"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), scope)
    _PRIMITIVES[id(fn)] = (fn, scope[name])
    return scope[name]


_PRIMITIVES: dict = {}  # id(fn) -> (fn, the def calling it), for _primitive_as_source


def _no_source(fn):
    library = _library_function(fn)
    if library is not None:
        return library
    wrapped = getattr(fn, "__wrapped__", None)
    label = getattr(wrapped or fn, "__qualname__", repr(fn))
    advice = (f"`{label}` is wrapped by `{type(fn).__module__}.{type(fn).__qualname__}`, which is not "
              "Python source; differentiate the function it wraps (`fn.__wrapped__`) if the wrapper "
              "does not change its values" if wrapped is not None else
              "define the function with `def` in a .py file, or register a derivative rule for it "
              "with @srcgrad.defadjoint")
    return errors.NoSourceError(f"srcgrad cannot read the source of `{label}`: it is not a Python function",
                                anno.origin_of(wrapped), advice)


class GradientFunction(WrtParameters, FinalizedGradients):
    """A function transformed by srcgrad; call it like the original.

    Attributes:
        fn: the user's function.
        options: what is generated (mode, wrt, backend).
    """

    __srcgrad_gradient__ = True  # never inlined: differentiated code calls it through dispatch (higher.py)

    def __init__(self, fn, mode: str, wrt, backend: str | None = None, optimize: bool = True,
                 has_aux: bool = False, internal: bool = False, intermediates=(), hooks=None,
                 check: bool | None = None, batched: bool = False):
        if runtime.is_gradient_function(fn):
            raise errors.UnsupportedSyntaxError(
                f"srcgrad cannot take the {mode} of `{getattr(fn, '__name__', fn)}`, a function srcgrad made: "
                "it differentiates a plain srcgrad.grad(f) only, and only as grad(grad(f)) (a scalar first "
                "derivative), jvp(grad(f)), jacfwd(grad(f)) or jacrev(grad(f)) (the Hessian)",
                anno.origin_of(getattr(fn, "fn", None)),
                "use srcgrad.hvp, srcgrad.hessian, srcgrad.jacfwd or srcgrad.jacrev of the original function")
        if not callable(fn):
            raise TypeError(f"srcgrad.{mode} expects a function, got {type(fn).__name__}")
        fn = _primitive_as_source(fn)  # np.sqrt: its rule, through a def calling it
        if _library_function(fn) is not None:
            raise _library_function(fn)
        # A bound method, a functools.partial or a callable object: the function underneath,
        # called with the bound object / the fixed arguments first (constants: never in wrt).
        self._fixed_args, self._fixed_kwargs = (), {}
        if not internal:
            fn, self._fixed_args, self._fixed_kwargs, wrt = _unbound(fn, wrt, mode)
        self.fn = fn
        functools.update_wrapper(self, fn)
        try:
            self._signature = inspect.signature(fn, follow_wrapped=False)  # the wrapper's, which runs
        except ValueError:  # a C callable: functools.lru_cache, np.vectorize of ..., a builtin
            raise _no_source(fn) from None
        parameters = self._signature.parameters.values()
        # The compiled program takes every parameter in order, *args as one tuple
        # and **kwargs as one dict: structures, which get adjoints of their own.
        self._params = [p.name for p in parameters]
        self._positional = [p.name for p in parameters
                            if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        self._var_positional = next((p.name for p in parameters if p.kind is p.VAR_POSITIONAL), None)
        self._var_keyword = next((p.name for p in parameters if p.kind is p.VAR_KEYWORD), None)
        self._variadic = bool(self._var_positional or self._var_keyword)
        # What is asked for: (parameter, None) for a whole parameter, (parameter, key)
        # for one entry of *args (key: its index there) or of **kwargs (its keyword).
        self._entries, self._as_tuple = self._wrt_entries(wrt)
        names = tuple(dict.fromkeys(name for name, _ in self._entries))
        self._whole = all(key is None for _, key in self._entries)
        self._wrt_index = tuple(self._params.index(name) for name, _ in self._entries)
        if (intermediates or hooks) and mode == "vjp":
            raise ValueError("intermediates= and hooks= work with grad and value_and_grad")
        backend = backend or backends.default_backend()
        backends.get(backend)  # an unknown name fails here, not at the first call
        self.options = Options(mode, names, self._as_tuple or not self._whole, backend, optimize, has_aux,
                               tuple(intermediates), tuple((hooks or {}).items()), batched)
        self._cache: dict[tuple, Compiled] = {}
        self._last: Compiled | None = None
        # Called from generated code (dispatch.vjp_call): adjoints stay raw (sparse for
        # structures); the outermost call gives them their primal's shape and type.
        self._internal = internal
        # `grad(f, wrt=(...))(arrays...)`: the call a training loop makes every step.
        # check=True / SRCGRAD_CHECK=1: every call also checks itself (srcgrad/checking.py).
        self._check = not internal and (check if check is not None
                                        else os.environ.get("SRCGRAD_CHECK", "") not in ("", "0"))
        self._wrt_spec = wrt
        # Called inside a differentiated function: names differentiated -> the forward over
        # reverse that gives this function's pullback (higher.gradient_vjp), made at first use.
        self._over: dict = {}
        self._plain = mode in ("grad", "value_and_grad") and self._whole and not (
            has_aux or intermediates or internal or self._variadic or self._check)
        # Code that calls this function reads it when it runs (through dispatch): one made
        # again alike (`g = grad(f)` in a factory, at each call) is the same to it, so that
        # code is not compiled again for it (``resolve._same``).
        fixed = tuple(map(id, self._fixed_args)), tuple((k, id(v)) for k, v in self._fixed_kwargs.items())
        self._alike = (id(fn), self.options, self._entries, internal, self._check, fixed)

    # ---- calling ----------------------------------------------------------
    def compiled(self, args) -> Compiled:
        """The compiled program for these (positional) arguments, from the cache if there."""
        return self.program_for(tuple(map(rank_of_argument, args)), args)

    def program_for(self, key: tuple, args=None) -> Compiled:
        """The compiled program for arguments of these ranks (see ``rank_of_argument``);
        ``args``: the arguments, whose objects' methods it may inline."""
        program = self._cache.get(key)
        if program is None:
            backends.get(self.options.backend).check_device()
            try:
                program = self._cache[key] = COMPILING["once"](self.fn, self.options, key, args)
                if args is not None:
                    self._check_free_names(program, args)
            except errors.UserCodeError as error:
                error.compiling.append(self.fn)  # which function's code the error sits in
                raise
        self._last = program
        return program

    def __call__(self, /, *args, **kwargs):
        if self._fixed_args:
            args = (*self._fixed_args, *args)
        if self._fixed_kwargs:
            kwargs = {**self._fixed_kwargs, **kwargs}
        try:
            if self.options.mode == "jvp":
                return self._jvp_call(args, kwargs)
            if not self._internal:
                with runtime.differentiated_call():
                    return self._gradient_call(args, kwargs)
            return self._gradient_call(args, kwargs)
        except errors.UserCodeError as error:
            if self._internal:
                raise  # the outermost call shows it
            # Located at the user's line, without srcgrad's frames (SRCGRAD_TRACEBACK=1 keeps them).
            raise errors.shown_to_user(error, anno.origin_of(self.fn)) from None
        except Exception as error:
            if not self._internal:  # (NumPy's error for a wrong shape: which line of the user's it was)
                errors.note_user_lines(error)
            raise

    def _gradient_call(self, args, kwargs):
        if self._plain and not kwargs and len(args) == len(self._params):
            grads = self._plain_call(args)
            if grads is not None:
                return grads
        if self._check:
            return checking.checked_call(self, args, kwargs)
        return self._call(self._arguments(args, kwargs))

    def _jvp_call(self, args, kwargs):
        """``(*primals, tangents)`` -> ``(value, tangent)``: forward mode's call."""
        name = getattr(self.fn, "__name__", None) or type(self.fn).__name__  # (a functools.partial)
        if not args:
            raise TypeError(f"the jvp of {name} takes {name}'s arguments, then the tangents of the "
                            "wrt ones (a tuple when wrt is a tuple)")
        *primals, tangents = args
        args = self._arguments(tuple(primals), kwargs, self._after("tangent"), tangents)
        if self._as_tuple:
            if not isinstance(tangents, (tuple, list)) or len(tangents) != len(self._entries):
                raise TypeError(f"the jvp of {name} with respect to {self.options.wrt} takes a tuple of "
                                f"{len(self._entries)} tangents after the arguments, got "
                                f"{type(tangents).__name__}")
            dots = tuple(tangents)
        else:
            dots = (tangents,)
        if not self._internal:
            self._check_wrt(args)
            given = []
            for (param, key), i, dot in zip(self._entries, self._wrt_index, dots):
                primal = args[i] if key is None else args[i][key]
                if tree.is_structure(primal):
                    dot = _tangent_of_structure(dot, primal)
                elif np.shape(dot) != np.shape(primal):
                    raise ValueError(f"the tangent of `{param}` has shape {np.shape(dot)}, but `{param}` "
                                     f"has shape {np.shape(primal)}: a tangent has its primal's shape")
                given.append(dot)
            dots = tuple(given)
        if not self._whole:  # entries of *args/**kwargs: the whole tuple's (dict's) tangent, zeros elsewhere
            given = {}
            for (param, key), dot in zip(self._entries, dots):
                given.setdefault(param, {})[key] = dot
            dots = []
            for param in self.options.wrt:
                value, entries = args[self._params.index(param)], given[param]
                if None in entries:
                    dots.append(entries[None])
                elif param == self._var_positional:
                    dots.append(tuple(entries[k] if k in entries else runtime.zeros_tangent(v)
                                      for k, v in enumerate(value)))
                else:
                    dots.append({k: entries[k] if k in entries else runtime.zeros_tangent(v)
                                 for k, v in value.items()})
        value, tangent = self.compiled(args)(*args, *dots)
        if self._internal:
            return value, tangent
        inputs = (*args, *dots)  # (the tangent of `x * 1.0` is the caller's own tangent array)
        return _unshared(value, inputs), _unshared(tangent, (*inputs, value))

    def _call(self, args):
        """The call, given every parameter's value in order (``_arguments``)."""
        if self._internal:  # from generated code: raw (value, pullback), no checks twice
            if self._whole:
                return self.compiled(args)(*args)
            value, pullback = self.compiled(args)(*args)
            return value, self._finalizing(pullback, args)
        self._check_wrt(args)
        program = self.compiled(args)
        mode, has_aux = self.options.mode, self.options.has_aux
        if mode == "vjp":
            value, pullback, *aux = program(*args)
            self._check_value(value)
            return (value, self._finalizing(pullback, args, value), *aux)
        out = program(*args)
        if mode == "grad":
            if has_aux:
                return self._finalize_watched(out[0], args), out[1]
            return self._finalize_watched(out, args)
        value, grads = out
        self._check_value(value[0] if has_aux else value)
        return value, self._finalize_watched(grads, args)

    def _check_value(self, value):
        """The function's value (value_and_grad, vjp) is not None and not complex."""
        if value is None:
            raise errors.UserCodeError(
                f"{self.fn.__name__} returned None on the path this call took, so it has no "
                "gradient", anno.origin_of(self.fn), "return the value to differentiate on every path")
        for leaf in value if isinstance(value, tuple) else (value,):
            if isinstance(leaf, complex) or getattr(getattr(leaf, "dtype", None), "kind", "") == "c":
                raise errors.UnsupportedSyntaxError(
                    f"{self.fn.__name__} returned a complex value; srcgrad does not differentiate "
                    "complex numbers yet", anno.origin_of(self.fn),
                    "return a real value (np.abs(z) ** 2, z.real, z.imag), computed from real arguments")

    def _plain_call(self, args):
        """The common call kept short (it runs every training step): float arrays,
        Python floats or models (objects laid out by ``tree.Layout``) in, gradients that
        already have their shapes and dtypes out (a float for a float), after the value
        for ``value_and_grad``; None where anything differs, for the general path (which
        checks, and converts, as usual)."""
        layouts = None
        for i in self._wrt_index:
            value = args[i]
            if type(value) is not float and (type(value) is not np.ndarray or value.dtype.kind != "f"):
                # A model (an object of parameters): its layout gives the cache key and
                # builds the gradient, without walking it again while it holds.
                plan = tree.layout(value) if tree._is_object(value) and not isinstance(value, tuple) else None
                if plan is None:
                    return None
                layouts = layouts or {}
                layouts[i] = plan
        if layouts is None:
            key = tuple(a.ndim if type(a) is np.ndarray else rank_of_argument(a) for a in args)
            grads = self.program_for(key, args)(*args)
        else:
            key = tuple(rank_of_layout(layouts[i]) if i in layouts else rank_of_argument(a)
                        for i, a in enumerate(args))
            grads = self.program_for(key, args)(*args)
        if self.options.mode == "value_and_grad":
            value, grads = grads
            self._check_value(value)
            return value, self._plain_gradients(grads, args, layouts)
        return self._plain_gradients(grads, args, layouts)

    @property
    def source(self) -> str:
        """The generated source last run (or compiled without rank information)."""
        if self._last is None:
            self._last = compile_function(self.fn, self.options, (None,) * len(self._params),
                                          COMPILING["bind_vjp"])
        return self._last.source

    def __repr__(self):
        return f"<srcgrad.{self.options.mode} of {self.fn.__qualname__} wrt {self.options.wrt}>"


def _unbound(fn, wrt, mode):
    """``fn`` as ``(function, fixed positional arguments, fixed keywords, wrt)``: the function
    whose source srcgrad reads, what is passed before the caller's arguments, and ``wrt``
    counted among that function's parameters.

    A bound method ``obj.loss`` is ``Model.loss`` with ``obj`` first; a callable object is
    its class's ``__call__`` bound to it; ``functools.partial(f, a, k=b)`` is ``f`` with
    ``a`` first and ``k=b`` (constants).  ``wrt`` counts and names the parameters left to
    the caller (``x`` in ``obj.loss(x)``); a name that is bound or fixed is refused.

    Raises:
        srcgrad.errors.WrtError: ``wrt`` names a fixed argument or counts past the parameters left.
    """
    args, kwargs, label = (), {}, None
    while True:
        if inspect.ismethod(fn):
            args, label = (fn.__self__, *args), label or fn.__qualname__
            fn = fn.__func__
        elif isinstance(fn, functools.partial):
            args, kwargs = (*fn.args, *args), {**fn.keywords, **kwargs}
            label = label or f"functools.partial({getattr(fn.func, '__qualname__', fn.func)!s}, ...)"
            fn = fn.func
        elif not isinstance(fn, (types.FunctionType, type)) and inspect.isfunction(
                getattr(type(fn), "__call__", None)):
            label = label or f"a {type(fn).__name__} object"
            fn = fn.__call__
        else:
            break
    if label is None:
        return fn, args, kwargs, wrt
    if not isinstance(fn, types.FunctionType):
        raise _no_source(fn)
    parameters = list(inspect.signature(fn, follow_wrapped=False).parameters.values())  # (what runs)
    named = [p.name for p in parameters if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    positional = [p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    fixed = set(positional[:len(args)]) | set(kwargs)
    left = [name for name in named if name not in fixed]
    var_positional = any(p.kind is p.VAR_POSITIONAL for p in parameters)

    def moved(item):
        if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
            if 0 <= item < len(left):
                return left[item]
            if var_positional and item >= 0:  # into *args: a position as passed, after the fixed ones
                return int(item) + len(args)
            raise errors.WrtError(f"wrt={item} is out of range: {label} leaves {len(left)} parameters "
                                  f"to the caller ({', '.join(left)})", anno.origin_of(fn),
                                  "pass wrt=<index or name> of one of those")
        if isinstance(item, str) and item in fixed:
            raise errors.WrtError(
                f"wrt={item!r} names a parameter that {label} fixes: it is a constant there",
                anno.origin_of(fn), f"differentiate `{fn.__qualname__}` itself with wrt={item!r} and pass "
                f"`{item}` at each call: srcgrad.{mode}({fn.__qualname__}, wrt={item!r})")
        return item
    wrt = tuple(map(moved, wrt)) if isinstance(wrt, (tuple, list)) else moved(wrt)
    return fn, args, kwargs, wrt
