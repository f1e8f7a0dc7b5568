"""The public entry points: ``grad``, ``value_and_grad``, ``vjp``, ``jvp``, ``source``, ``show``.

Compiled code is cached per function, options and argument ranks; calling a
gradient function costs one dictionary lookup on top of the generated code.
"""
from __future__ import annotations

import ast
import functools
import importlib
import inspect
import linecache
import os
import random
import textwrap
import types

import numpy as np
import optree

from . import anno, backends, checking, errors, runtime, tree
from .rules import registry
from .pipeline import (Compiled, Options, compile_function, programs_run, rank_of_argument,
                       rank_of_layout)
from .transforms import resolve


def _parts_of(value, path, held, depth=0):
    """``held``: id -> the path in the argument, for ``value`` and the objects, lists,
    dicts and arrays inside it (models are shallow: a few levels)."""
    if id(value) in held or depth > 8:
        return
    if tree._has_params(value) and not isinstance(value, (tuple, float, np.floating)):
        held[id(value)] = f"`{path}`"
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    elif tree._is_object(value):
        items = vars(value).items()
    else:
        return
    for k, v in items:
        if isinstance(v, np.ndarray) or tree.is_structure(v) and not callable(v):
            _parts_of(v, f"{path}[{k!r}]" if not tree._is_object(value) else f"{path}.{k}", held, depth + 1)


def _read_origin(fn, name):
    """Where ``fn`` first reads ``name`` (its first line if not found)."""
    try:
        source = textwrap.dedent(inspect.getsource(fn))
        lines = [n.lineno for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Name) and n.id == name]
    except (OSError, TypeError, SyntaxError):
        lines = []
    origin = anno.origin_of(fn)
    if not lines or origin is None:
        return origin
    number = fn.__code__.co_firstlineno + min(lines) - 1
    text = linecache.getline(fn.__code__.co_filename, number).rstrip("\n")
    return anno.Origin(fn.__code__.co_filename, number, len(text) - len(text.lstrip()), text)


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


class GradientFunction:
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

    def _wrt_entries(self, wrt):
        as_tuple = isinstance(wrt, (tuple, list))
        items = tuple(wrt) if as_tuple else (wrt,)
        if not items:
            raise self._wrt_error("`wrt` is empty")
        named = [p for p in self._params if p not in (self._var_positional, self._var_keyword)]
        entries = []
        for item in items:
            if isinstance(item, (int, np.integer)) and not isinstance(item, bool):
                item = int(item)
                if self._var_positional and item >= len(self._positional):
                    # JAX's argnums: positions as passed, so past the named ones, into *args.
                    entries.append((self._var_positional, item - len(self._positional)))
                elif 0 <= item < len(named):
                    entries.append((named[item], None))
                else:
                    raise self._wrt_error(f"wrt={item} is out of range: {self.fn.__name__} has "
                                          f"{len(named)} parameters")
            elif isinstance(item, str):
                if item in self._params:
                    entries.append((item, None))
                elif self._var_keyword:  # a keyword argument that lands in **kwargs
                    entries.append((self._var_keyword, item))
                else:
                    raise self._wrt_error(f"wrt={item!r} names no parameter of {self.fn.__name__}")
            else:
                raise self._wrt_error(f"wrt must be a parameter index or name, got {item!r}")
        if len(set(entries)) != len(entries):
            raise self._wrt_error(f"wrt names a parameter twice: {list(items)}")
        return tuple(entries), as_tuple

    def _wrt_error(self, problem):
        def spelled(name):
            return f"*{name}" if name == self._var_positional else \
                f"**{name}" if name == self._var_keyword else name
        return errors.WrtError(problem, anno.origin_of(self.fn),
                               f"the parameters are ({', '.join(map(spelled, self._params))}); pass "
                               "wrt=<index or name> or a tuple of them")

    # ---- calling ----------------------------------------------------------
    def _arguments(self, args, kwargs, then: str = "", taken=None, caller: str = ""):
        """Every parameter's value in order, from a call's arguments.  ``then``: what the
        caller takes after them (``"the tangent of w"``), ``taken``: the last argument it
        took for that, for the message when the arguments come one short; ``caller``:
        the function called, for messages (``"hvp(loss)"``; default: this one).

        Raises:
            TypeError: the arguments do not fit ``fn``'s parameters (naming ``fn``).
        """
        if not kwargs and not self._variadic and len(args) == len(self._params):
            return args
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as error:
            name, params = self.fn.__name__, ", ".join(self._params)
            caller = caller or f"the {self.options.mode} of {name}"
            if then:
                try:
                    self._signature.bind(*args, taken, **kwargs)
                except TypeError:
                    pass
                else:  # the last argument passed was one of f's: what comes after is missing
                    raise TypeError(f"{then} is missing: {caller} takes {name}'s arguments ({params}), "
                                    f"then {then}") from None
            raise TypeError(f"{name}() {error} ({caller} takes {name}'s "
                            f"arguments ({params}){', then ' + then if then else ''})") from None
        bound.apply_defaults()
        return tuple(bound.arguments[p] for p in self._params)

    def _after(self, what: str) -> str:
        """``"the tangent of w"``, ``"the tangents of (w, b) as a tuple"``: what forward
        mode and hvp take after ``fn``'s arguments."""
        if self._as_tuple:
            return f"the {what}s of ({', '.join(self.options.wrt)}) as a tuple"
        return f"the {what} of {self.options.wrt[0]}"

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
                program = self._cache[key] = _compiled_once(self.fn, self.options, key, args)
                if args is not None:
                    self._check_free_names(program, args)
            except errors.UserCodeError as error:
                error.compiling.append(self.fn)  # which function's code the error sits in
                raise
        self._last = program
        return program

    def _check_free_names(self, program, args):
        """Refuse a global or closure variable that holds an object being differentiated, or
        an object or array inside it (``loss(m, x)`` reading the global ``model`` that is
        ``m``): the code reads it there, not through the argument, so its adjoint is lost."""
        held = {}
        for (param, key), i in zip(self._entries, self._wrt_index):
            value = args[i] if key is None else args[i][key]
            if tree.is_structure(value):
                _parts_of(value, param, held)
        if not held:
            return
        parts = [program.free] + [free for free, _ in (program.inlined.free if program.inlined else ())]
        for free in parts:
            read = list(free.names.items())
            for key, attrs, _ in free.kinds:  # data read through a module or object (`model.w`)
                value = free.names.get(key)
                for attr in attrs:
                    value = getattr(value, attr, None)
                    read.append((attr, value))
            for name, value in read:
                if id(value) in held:
                    raise errors.UserCodeError(
                        f"`{free.fn.__name__}` reads `{name}`, a global or closure variable that holds "
                        f"{held[id(value)]}, which is being differentiated: srcgrad follows it through "
                        "the argument, not through the variable, and its gradient would be lost",
                        _read_origin(free.fn, name), f"read it through the argument instead of `{name}`, "
                        f"or pass `{name}` as an argument")

    def _wrt_value(self, args, name, key):
        value = args[self._params.index(name)]
        return value if key is None else value[key]

    def _check_wrt(self, args):
        """The entries of *args/**kwargs asked for were passed; each value asked for is
        a float, a float array or a structure of them."""
        for (name, key), i in zip(self._entries, self._wrt_index):
            value = args[i]
            if key is not None:
                self._check_passed(value, name, key)
                value = value[key]
            if type(value) is np.ndarray and value.dtype.kind == "f":
                continue  # the common case, checked first: this runs on every call
            if tree.is_structure(value):
                continue  # its leaves are checked when the gradient is built
            dtype = getattr(value, "dtype", None)
            kind = dtype.kind if dtype is not None else (
                "b" if isinstance(value, bool) else "i" if isinstance(value, int) else "f"
                if isinstance(value, float) else None)
            label = name if key is None else f"{name}[{key!r}]"
            if kind == "c" or isinstance(value, complex):
                raise errors.WrtError(
                    f"cannot differentiate with respect to `{label}`: it is a complex value "
                    f"({type(value).__name__}{'' if dtype is None else ' of ' + str(dtype)}); srcgrad "
                    "does not differentiate complex numbers yet", anno.origin_of(self.fn),
                    "differentiate with respect to the real and imaginary parts as two float "
                    "arguments (z = re + 1j * im)")
            if kind is None:
                slots = " (its class uses __slots__)" if hasattr(type(value), "__slots__") else ""
                raise errors.WrtError(
                    f"cannot differentiate with respect to `{label}`: a {type(value).__name__} is not a "
                    f"float, an array or a structure of them{slots}", anno.origin_of(self.fn),
                    "pass float arrays, or an object whose attributes (in its __dict__) hold them, "
                    "or a list, tuple or dict of them")
            if kind in ("i", "u", "b"):
                raise errors.WrtError(
                    f"cannot differentiate with respect to `{label}`: it is an integer "
                    f"value ({type(value).__name__}{'' if dtype is None else ' of ' + str(dtype)})",
                    anno.origin_of(self.fn),
                    f"pass a floating-point value, e.g. {label}.astype(np.float64) "
                    f"or float({label})")

    def _check_passed(self, passed, name, key):
        """``wrt`` asks for an entry of *args (``key``: an index) or **kwargs (a keyword)."""
        if isinstance(key, int):
            if key < len(passed):
                return
            count = len(self._positional) + len(passed)
            problem = (f"wrt={len(self._positional) + key} asks for the positional argument at index "
                       f"{len(self._positional) + key} of {self.fn.__name__}, but only {count} were passed")
        else:
            if key in passed:
                return
            problem = (f"wrt={key!r} names no parameter of {self.fn.__name__} and no keyword argument "
                       f"passed to **{name} (passed: {', '.join(map(str, passed)) or 'none'})")
        raise errors.WrtError(problem, anno.origin_of(self.fn),
                              "ask for an argument that is passed, or pass it")

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

    def _plain_gradients(self, grads, args, layouts):
        """:meth:`_plain_call`'s gradients given their primals' types (``layouts``: the
        models' layouts by argument index, or None)."""
        if layouts is not None:
            if not self._as_tuple:
                return layouts[self._wrt_index[0]].gradient(grads, args[self._wrt_index[0]])
            return tuple(layouts[i].gradient(g, args[i]) if i in layouts else _plain_gradient(g, args[i])
                         for g, i in zip(grads, self._wrt_index))
        if not self._as_tuple:
            return _unshared(_plain_gradient(grads, args[self._wrt_index[0]]), args)
        for g, i in zip(grads, self._wrt_index):  # (a loop, not all(...): this runs every step)
            x = args[i]
            if not (type(g) is np.ndarray and type(x) is np.ndarray and g.shape == x.shape
                    and (g.dtype is x.dtype or g.dtype == x.dtype) and g.flags.writeable):
                return _unshared(tuple(_plain_gradient(g, args[i]) for g, i in zip(grads, self._wrt_index)),
                                 args)
        return _unshared(grads, args)

    def _finalize_watched(self, grads, args):
        if self.options.intermediates:
            return self._finalize(grads[0], args), grads[1]
        return self._finalize(grads, args)

    def _finalizing(self, pullback, args, value=None):
        """The pullback handed out: for the user (``value`` given), it checks the
        cotangent's shape; inside generated code it is used as it is."""
        if value is None:
            @functools.wraps(pullback)
            def finalized_pullback(ans_bar):
                return self._finalize(pullback(ans_bar), args)
            return finalized_pullback

        @functools.wraps(pullback)
        def checked_pullback(ans_bar):
            _check_cotangent(ans_bar, value, self.fn.__name__)
            try:
                return _unshared(self._finalize(pullback(_zeros_for_none(ans_bar, value)), args),
                                 ans_bar if isinstance(ans_bar, tuple) else (ans_bar,))
            except errors.UserCodeError as error:
                raise errors.shown_to_user(error, anno.origin_of(self.fn)) from None
            except Exception as error:
                errors.note_user_lines(error)
                raise
        return checked_pullback

    def _finalize(self, grads, args):
        """The adjoints the program returns (one per parameter in ``options.wrt``) as
        asked for: one per ``wrt`` entry; raw inside generated code, else each with
        its primal's type, shape and structure."""
        if self._whole:  # the common case, kept short: this runs on every call
            if self._internal:
                return grads
            if not self._as_tuple:
                return _unshared(_match(grads, args[self._wrt_index[0]]), args)
            return _unshared(tuple(_match(g, args[i]) for g, i in zip(grads, self._wrt_index)), args)
        by_name = dict(zip(self.options.wrt, grads if self.options.wrt_tuple else (grads,)))
        out = []
        for name, key in self._entries:
            g, value = by_name[name], self._wrt_value(args, name, key)
            if key is not None:
                g = runtime.item_of(g, key)
            if self._internal:
                out.append(runtime.zeros_like(value) if g is None else g)
            else:
                out.append(_match(g, value))
        if self._internal:
            return tuple(out) if self._as_tuple else out[0]
        return _unshared(tuple(out), args) if self._as_tuple else _unshared(out[0], args)

    @property
    def source(self) -> str:
        """The generated source last run (or compiled without rank information)."""
        if self._last is None:
            self._last = compile_function(self.fn, self.options, (None,) * len(self._params), bind_vjp)
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


def _zeros_for_none(ans_bar, value):
    """``None`` for an output's adjoint means zero (as ``torch.autograd.grad`` takes it):
    the generated code computes with arrays, so each ``None`` becomes zeros of its output."""
    if ans_bar is None:
        return runtime.zeros_like(value)
    if isinstance(value, tuple) and isinstance(ans_bar, (tuple, list)):
        return type(ans_bar)(_zeros_for_none(g, v) for g, v in zip(ans_bar, value))
    return ans_bar


def _check_cotangent(ans_bar, value, name, path="value"):
    """``vjp``'s pullback is given an adjoint of its output's shape (a tuple for a tuple)."""
    if ans_bar is None:
        return  # zero
    if isinstance(value, tuple):
        if not isinstance(ans_bar, (tuple, list)) or len(ans_bar) != len(value):
            raise ValueError(f"the pullback of {name} takes a tuple of {len(value)} adjoints, one per "
                             f"output, got {type(ans_bar).__name__}"
                             + (f" of {len(ans_bar)}" if isinstance(ans_bar, (tuple, list)) else ""))
        for i, (g, v) in enumerate(zip(ans_bar, value)):
            if g is not None:
                _check_cotangent(g, v, name, f"{path}[{i}]")
        return
    if isinstance(value, list) and not isinstance(ans_bar, (list, tuple)) and np.ndim(ans_bar) \
            and _shape_or_none(value) == np.shape(ans_bar):
        return  # (a list of arrays NumPy takes for one array: its adjoint may be one array)
    if isinstance(value, (list, dict)):
        # (An array or a list given for a dict would reach no output: zeros, silently.)
        kind = (list, tuple) if isinstance(value, list) else dict
        if not isinstance(ans_bar, kind) or isinstance(value, list) and len(ans_bar) != len(value) \
                or isinstance(value, dict) and not set(ans_bar) <= set(value):
            what = f"a list of {len(value)}" if isinstance(value, list) else f"a dict with keys among {list(value)}"
            raise ValueError(f"the pullback of {name} takes an adjoint of its output's structure "
                             f"{'' if path == 'value' else '(' + path + ') '}{what}, one per entry (a missing "
                             f"key or None: zero), got {type(ans_bar).__name__}"
                             + (f" {list(ans_bar)}" if isinstance(ans_bar, (dict, list, tuple)) else ""))
        for key, g in (ans_bar.items() if isinstance(value, dict) else enumerate(ans_bar)):
            if g is not None:
                _check_cotangent(g, value[key], name, f"{path}[{key!r}]")
        return
    if tree.is_structure(value) or tree.is_structure(ans_bar):
        return
    expected, given = np.shape(value), np.shape(ans_bar)
    if expected != given:
        raise ValueError(f"the pullback of {name} takes an adjoint of the shape of its output "
                         f"{'' if path == 'value' else path + ' '}{expected}, but was given one of shape "
                         f"{given}")
    if isinstance(ans_bar, complex) or getattr(getattr(ans_bar, "dtype", None), "kind", "") == "c":
        raise ValueError(f"the pullback of {name} was given a complex adjoint; srcgrad does not "
                         "differentiate complex numbers yet")


def _tangent_of_structure(dot, primal):
    """A tangent given for a structure, with zeros for its leaves without gradient (an
    int, a flag: None in ``grad``'s): a tangent made as a copy of the parameters holds
    their counts, which are no tangents (``dispatch.jvp_field`` does the same for an
    object's integer attributes)."""
    _, leaves, spec = tree.flatten(primal, tree.TANGENTS)
    _, dots, dot_spec = tree.flatten(dot, tree.TANGENTS)
    kept = [tree._is_float(x) or tree._is_float_array(x) for x in leaves]
    if dot_spec != spec or all(kept):
        return dot
    return tree.unflatten(spec, [d if k else runtime.zeros_tangent(x) for d, k, x in zip(dots, kept, leaves)])


def _matches(g, x) -> bool:
    """``g`` is already a gradient for the array ``x``: its own writable array, same shape and dtype."""
    return type(g) is np.ndarray and type(x) is np.ndarray and g.dtype == x.dtype and g.shape == x.shape \
        and g.flags.writeable


def _unshared(out, inputs):
    """``out`` (an array, or a tuple of arrays) with each array that is one of ``inputs`` or an
    earlier item of ``out`` copied: a gradient changed in place (``g *= 0.5``) must change no
    other gradient and no argument (``sum(x + y)``'s two gradients are one adjoint; a vjp of
    the identity hands back its cotangent)."""
    if type(out) is tuple:
        seen = {id(a) for a in inputs if type(a) is np.ndarray}
        copied = None
        for k, g in enumerate(out):
            if type(g) is np.ndarray:
                if id(g) in seen:
                    copied = copied or list(out)
                    copied[k] = g.copy()
                else:
                    seen.add(id(g))
        return out if copied is None else tuple(copied)
    if type(out) is np.ndarray and any(out is a for a in inputs):
        return out.copy()
    return out


def _plain_gradient(g, x):
    """:func:`_match` for a float array or a Python float ``x``, the float case first."""
    if type(x) is float and isinstance(g, float):  # (np.float64 is a float: a scalar adjoint)
        return float(g)
    return _match(g, x)


def _match(g, x):
    """Give a gradient its primal's type, shape and dtype (float32 in, float32 out);
    for a structure, a value of the same structure (``g.linear1.weight``)."""
    if _matches(g, x):
        return g  # the common case, checked first: this runs on every gradient
    if g is None:
        g = {} if tree.is_structure(x) else np.zeros_like(x)
    if isinstance(g, (list, tuple, dict)) and not tree.is_structure(x):
        raise errors.NoDerivativeRuleError(
            f"the gradient of an argument that is {'an array' if hasattr(x, 'shape') else 'a number'} came "
            f"out as a {type(g).__name__}: a derivative rule of yours (srcgrad.custom_adjoint, "
            "defadjoint, defvjp) returned one as the adjoint of an array", None,
            "return one array of the argument's shape from the rule (a rule of several arguments "
            "returns a tuple of them, one per argument)")
    if (isinstance(g, complex) or getattr(getattr(g, "dtype", None), "kind", "") == "c") \
            and not (isinstance(x, complex) or getattr(getattr(x, "dtype", None), "kind", "") == "c"):
        raise errors.UnsupportedSyntaxError(
            "a complex value reached the gradient of a real argument (a complex output, or a complex "
            "value on the way to it); srcgrad does not differentiate complex numbers yet", None,
            "keep the computation real (np.abs(z) ** 2, z.real, z.imag) or split it into real and "
            "imaginary parts")
    if tree.is_structure(x):
        if isinstance(g, (np.ndarray, np.generic, float, int)):  # NumPy took a list for an array
            if np.ndim(g) == 0 and g == 0:
                g = {}
            else:
                shape = _shape_or_none(x) if isinstance(x, (list, tuple)) else None
                if shape is None or np.ndim(g) and np.shape(g) != shape:
                    raise errors.SrcgradError(
                        f"srcgrad computed an adjoint of shape {np.shape(g)} for the {type(x).__name__} "
                        "argument and cannot lay it out in it (a defect in srcgrad: please report it); "
                        "pass the argument as a NumPy array (np.asarray(...)) meanwhile")
                g = np.broadcast_to(g, shape)
        if tree._is_object(g):  # (laid out as an object already: a gradient function's own result)
            g = tree.sparse_of(g)
        if not isinstance(g, (dict, np.ndarray, list, tuple)):
            raise errors.SrcgradError(
                f"srcgrad computed an adjoint of the {type(x).__name__} argument that is a {type(g).__name__}, "
                "not one of its structure (a defect in srcgrad: please report it)")
        sparse = g if isinstance(g, (dict, np.ndarray)) else dict(enumerate(g))
        return tree.materialize(sparse, x)
    if isinstance(x, np.ndarray):
        if type(g) is np.ndarray and g.dtype == x.dtype and g.shape == x.shape and g.flags.writeable:
            return g
        try:
            return np.array(np.broadcast_to(g, x.shape), dtype=x.dtype)
        except ValueError:
            raise errors.NoDerivativeRuleError(
                f"the gradient of an argument of shape {x.shape} came out of shape {np.shape(g)}: a "
                "derivative rule of yours (srcgrad.custom_adjoint, defadjoint, defvjp) returned an "
                "adjoint of another shape than its argument (or a list)", None,
                "return one array of each argument's shape from the rule; for a function that "
                "broadcasts its arguments, register the rule with elementwise=True") from None
    if isinstance(x, float):
        return float(g)
    if isinstance(x, np.generic):
        return x.dtype.type(g)
    return g


def _shape_or_none(x):
    """``np.shape`` of a list or tuple NumPy can take for an array, else None."""
    try:
        return np.shape(x)
    except ValueError:  # ragged
        return None


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
