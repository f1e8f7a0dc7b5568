"""The parameters a transformed function is differentiated with respect to (``wrt``), and a
call's arguments checked against them.

Requires: the attributes ``GradientFunction.__init__`` sets: ``fn``, ``options``, ``_signature``,
``_params``, ``_positional``, ``_var_positional``, ``_var_keyword``, ``_variadic``, and ``_entries``,
``_as_tuple``, ``_wrt_index`` (from ``_wrt_entries``).
Guarantees: ``wrt`` read as entries (a whole parameter, or one entry of ``*args``/``**kwargs``),
refused with a ``WrtError`` naming the parameters where it names none; a call's arguments as every
parameter's value in order (a ``TypeError`` naming the function where they do not fit); each value
asked for a float, a float array or a structure of them; no global or closure variable holding one.
"""
from __future__ import annotations

import ast
import inspect
import linecache
import textwrap

import numpy as np

from . import anno, errors, tree


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


class WrtParameters:
    """A mixin of ``GradientFunction``: its ``wrt`` entries and the checks of its calls' arguments."""

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
