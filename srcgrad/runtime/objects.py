"""Objects' state in differentiated code: fields a call stores with no adjoint (a cache,
running statistics), kept so that a later call reading them back is refused; a method
called through ``super()``; the scopes (a module's, a closure's) data is read from."""
from __future__ import annotations

import inspect
import types

import numpy as np

from .. import errors, tree


def keeping_fields(obj, name, where, /, *args, **kwargs):
    """``obj.name(*args, **kwargs)`` for its effects, on an object being differentiated:
    refused if it replaced a float field of ``obj`` (see :func:`stored`)."""
    if isinstance(obj, list) and name in ("reverse", "sort", "insert", "remove"):
        # (a list whose items were known when compiling only as `obj`: their adjoints go by
        # position, which a change of order would scramble, silently)
        raise errors.UnsupportedSyntaxError(
            f"`.{name}()` of a list that holds values being differentiated, where srcgrad knows the list "
            f"only when the code runs (at {where}): srcgrad does not follow a change of its order there",
            None, "make a new list instead (`xs = xs[::-1]`, `xs = sorted(xs)`, `xs = xs[:i] + [v] + xs[i:]`)")
    fields = getattr(obj, "__dict__", None)
    before = dict(fields) if fields is not None else None
    # (A float array field changed in place, `self.w[0] = 0`, is refused too, and so is a
    # list or dict a field holds grown by one, `self.hist.append(y)`.)
    arrays = {k: v.copy() for k, v in (before or {}).items()
              if isinstance(v, np.ndarray) and v.dtype.kind in "fc"}
    held = {k: _held_items(v) for k, v in (before or {}).items() if isinstance(v, (list, dict))}
    result = getattr(obj, name)(*args, **kwargs)
    if before is not None:
        for key, value in vars(obj).items():
            if before.get(key, _ABSENT) is not value:
                for old_or_new in (before.get(key), value):
                    stored(old_or_new, key, f"{where}, in `.{name}()`")
            elif key in arrays and not np.array_equal(arrays[key], value, equal_nan=True):
                stored(value, key, f"{where}, in `.{name}()`, which changed it in place")
            elif key in held:
                for item in _held_items(value) - held[key]:
                    stored(_ITEMS[item], key, f"{where}, in `.{name}()`, which added it to the container")
        _ITEMS.clear()
    return result


_ITEMS: dict = {}  # id -> item, for the items _held_items saw during one keeping_fields call


def _held_items(container, depth=2) -> frozenset:
    """The ids of the items of a list or dict (and of the lists and dicts in it, ``depth``
    deep): what a call that grows it in place adds is told apart by them."""
    items = container.values() if isinstance(container, dict) else container
    out = set()
    for item in items:
        _ITEMS[id(item)] = item
        out.add(id(item))
        if depth > 1 and isinstance(item, (list, dict)):
            out |= _held_items(item, depth - 1)
    return frozenset(out)


_ABSENT = object()


def stored(value, name: str, where: str, obj=None):
    """``value``, about to be stored as ``obj.name`` of an object being differentiated:
    a counter, flag or label is fine, and so is a first value where the field held None
    or nothing (a lazily made parameter, ``if self.w is None: self.w = ...``: no parameter
    is replaced, and the gradient has None there); a float (or float array, or
    structure) replacing one is refused, as a later read would send its adjoint to the
    parameter it replaced."""
    if isinstance(value, (bool, int, str, type(None), np.integer, np.bool_)) or isinstance(value, np.ndarray) \
            and value.dtype.kind not in "fc":
        return value  # (a counter, a flag, a label: `self.steps = self.steps + 1` of an np.int64 too)
    if obj is not None and getattr(obj, name, None) is None:
        return value
    if isinstance(value, (float, complex, np.number, np.ndarray)) or tree.is_structure(value) \
            or hasattr(value, "dtype"):
        raise errors.UnsupportedSyntaxError(
            f"storing a float value in the attribute `.{name}` of an object being differentiated is "
            f"not supported (at {where}): a later read of `.{name}` would send its adjoint to the "
            "parameter it replaced", None,
            "keep the value in a local name (or return it with has_aux=True), or make a new object")
    return value


# Attributes a differentiated call stored as bookkeeping (no adjoint: `_kept_apart` in the
# reverse pass), for as long as the outermost differentiated call runs: id(obj) -> (obj,
# {name: (value stored, where)}).  A later call of the same computation that reads one back
# with an adjoint (`vjp_call` checks its pullback) is refused: the adjoint would go to the
# field's old value.
KEPT: dict = {}
_COMPUTATIONS = [0]


class differentiated_call:
    """Context of one outermost gradient call: what ``kept`` records lasts as long."""

    def __enter__(self):
        _COMPUTATIONS[0] += 1

    def __exit__(self, *exc):
        _COMPUTATIONS[0] -= 1
        if not _COMPUTATIONS[0]:
            KEPT.clear()


def kept(obj, name: str, value, where: str):
    """``value``, about to be stored as ``obj.name`` with no adjoint (a cache, running
    statistics): recorded, so that a later call reading it back is refused."""
    if _COMPUTATIONS[0] and not isinstance(value, (bool, int, str, type(None))):
        KEPT.setdefault(id(obj), (obj, {}))[1][name] = (value, where)
    return value


def growing(receiver, obj, name: str, field, where: str):
    """``receiver`` (the list or dict ``obj.name`` holds, ``field``, or an entry of it), about to
    grow by a value with no adjoint (``self.inputs.append(x)``): ``obj.name`` is recorded as
    ``kept`` records a store, so that a later call reading it back is refused."""
    kept(obj, name, field, where)
    return receiver


def entries(container, name: str, where: str):
    """``container`` (``self.name``), about to have an entry replaced (``self.name[k] = v``)
    where its kind was not known when compiling: a dict or list is; an array is refused (a
    write into it in place, which srcgrad does not follow)."""
    if isinstance(container, (dict, list)):
        return container
    raise errors.UnsupportedSyntaxError(
        f"writing into `{name}[...]` (at {where}) is supported where `{name}` holds a dict or a "
        f"list (an object's cache, counters, running statistics), not a `{type(container).__name__}`: "
        "srcgrad cannot follow a write into it in place", None,
        f"replace the field instead (`{name} = ...`), with a new value made from the old one")


def not_in_place(container, key, name: str, op: str, where: str, field: bool = False):
    """Refuse ``name[key] op= v`` (``obj.key op= v`` where ``field``) where the entry holds an
    array, which NumPy changes in place (another name holding it sees the change): srcgrad
    computes a new array.  A number (a counter) is rebound, as srcgrad does."""
    value = getattr(container, key, None) if field else \
        container[key] if isinstance(container, (dict, list)) else None
    if hasattr(value, "__array__") and not isinstance(value, np.generic):
        shown = name if field else f"{name}[...]"
        raise errors.UnsupportedSyntaxError(
            f"`{shown} {op}= ...` (at {where}) changes the array it holds in place, and another "
            "name may hold the same array (a name it was read into, the caller)", None,
            f"write `{shown} = {shown} {op} ...` (a new array)")
    return None


def kept_entry(holder, obj, name: str, key, value, where: str):
    """``holder`` (the dict or list ``obj.name``), about to get ``value`` at ``key`` with no
    adjoint (``self.parameters["running_mean"] = ...``): recorded as ``kept`` records a
    field, by ``(name, key)``, so that a later call reading that entry back is refused."""
    if _COMPUTATIONS[0] and not isinstance(value, (bool, int, str, type(None))):
        KEPT.setdefault(id(obj), (obj, {}))[1][(name, key)] = (value, where)
    return holder


def _still_held(obj, name, value) -> bool:
    if isinstance(name, tuple):  # an entry of a container the object holds
        holder = getattr(obj, name[0], None)
        try:
            return holder[name[1]] is value
        except (KeyError, IndexError, TypeError):
            return False
    return getattr(obj, name, None) is value


def kept_fields(obj) -> dict:
    """``{name: where}`` of ``obj``'s fields (``(name, key)`` of entries of its containers)
    that still hold what ``kept`` or ``kept_entry`` recorded."""
    entry = KEPT.get(id(obj))
    if entry is None or entry[0] is not obj:
        return {}
    return {name: where for name, (value, where) in entry[1].items() if _still_held(obj, name, value)}


def kept_read(obj, name: str, keys=None):
    """The first of ``obj``'s kept fields a read of ``obj.name`` takes in, as ``(name, where)``,
    or None: the field itself, or an entry of it (among ``keys``, the entries the code reads
    with an adjoint, where those are known; any of them where ``keys`` is None)."""
    for kept_name, where in kept_fields(obj).items():
        if kept_name == name or isinstance(kept_name, tuple) and kept_name[0] == name \
                and (keys is None or kept_name[1] in keys):
            return kept_name, where
    return None


def field(obj, name: str, where: str, keys=None):
    """``obj.name``, read with an adjoint after a call that may have stored it as
    bookkeeping (``kept``): refused if it did (where ``obj.name`` holds a dict or list, and
    ``keys`` are given, if it stored one of the entries read)."""
    found = kept_read(obj, name, keys) if KEPT else None
    if found is not None:
        refuse_read_back(obj, found[0], found[1], f"the read of `.{name}` at {where}")
    return getattr(obj, name)


def _spelled(name) -> str:
    return f"{name[0]}[{name[1]!r}]" if isinstance(name, tuple) else name


def refuse_read_back(obj, name, where: str, reader: str):
    name = _spelled(name)
    raise errors.UnsupportedSyntaxError(
        f"{reader} reads back `.{name}`, which an earlier call of this differentiated computation "
        f"stored (at {where}) as bookkeeping, with no adjoint: the adjoint of that read would go "
        f"to the `.{name}` the object held before", None,
        f"return the value from the call that computes it and pass it on (or, for state "
        "that should stay constant such as running statistics, read it through srcgrad.stop_gradient)")


def check_kept_pullback(pullback, fn, wrt, objects):
    """``pullback`` refusing an adjoint for a kept field: ``objects`` is ``[(position in
    wrt, obj, {name: where})]`` for the call's objects holding kept fields."""
    reader = f"`{getattr(fn, '__qualname__', None) or type(fn).__name__}`"

    def pull(value_bar):
        adjoints = pullback(value_bar)
        for position, obj, fields in objects:
            adjoint = adjoints if len(wrt) == 1 else adjoints[position]
            for name, where in fields.items():
                g = tree.lookup(adjoint, name if isinstance(name, tuple) else (name,))
                if g is not None and any(np.any(np.asarray(leaf) != 0) for leaf in tree.flatten(g)[1]):
                    refuse_read_back(obj, name, where, reader)
        return adjoints
    return pull


def is_gradient_function(obj) -> bool:
    """A function srcgrad made (``srcgrad.grad(f)``, a pullback): it carries the mark
    ``__srcgrad_gradient__``.  Read without running the class's ``__getattr__`` (a
    model that delegates any name is no gradient function)."""
    return inspect.getattr_static(obj, "__srcgrad_gradient__", False) is True


def read_back(obj, name: str, value):
    """``obj.name`` read right after ``obj.name = value`` (in the same block): ``value``
    itself, so its adjoint reaches what made it.  A class whose ``__setattr__`` or
    property gave back another value is refused when it runs."""
    if getattr(obj, name) is not value:
        raise errors.UnsupportedSyntaxError(
            f"`.{name}` read back right after it was stored gives another value (the class's "
            f"`__setattr__` or a property changes what is stored), which srcgrad cannot follow", None,
            f"keep the value in a local name and use it, rather than reading `.{name}` back")
    return value


def entry_read_back(container, key, value):
    """``container[key]`` read right after ``container[key] = value`` (an entry of a dict or
    list an object holds, in the same block): ``value`` itself, so its adjoint reaches what
    made it.  A container that gave back another value is refused when it runs."""
    if container[key] is not value:
        raise errors.UnsupportedSyntaxError(
            f"an entry read back right after it was stored gives another value (the container's "
            f"`__setitem__` changes what is stored), which srcgrad cannot follow", None,
            "keep the value in a local name and use it, rather than reading the entry back")
    return value


def super_method(cls, obj, name):
    """What ``super(cls, obj).name`` finds, as a plain function of ``obj``: the first
    class after ``cls`` in ``type(obj)``'s MRO that defines ``name``.

    Raises:
        AttributeError: no class after ``cls`` defines it (as Python's ``super`` does).
        TypeError: it is not a plain method (a property, staticmethod or classmethod).
    """
    mro = type(obj).__mro__
    for klass in mro[mro.index(cls) + 1:]:
        if name in vars(klass):
            found = vars(klass)[name]
            if not isinstance(found, types.FunctionType):
                raise TypeError(f"srcgrad differentiates `super().{name}(...)` for plain methods only; "
                                f"{klass.__name__}.{name} is a {type(found).__name__}")
            return found
    raise AttributeError(f"'super' object has no attribute {name!r}")


def array_attribute(value, name: str, where: str):
    """``value.ndim``, ``.shape``, ``.size`` or ``.dtype`` of a value whose kind is known only when
    the code runs: an array's (ints, a tuple of ints, a dtype) have no derivative, and the code
    was compiled so.  Another object's attribute of that name holding a float could carry one.

    Raises:
        srcgrad.errors.UnsupportedSyntaxError: the attribute holds a float, or floats.
    """
    found = getattr(value, name)
    kind = getattr(getattr(found, "dtype", None), "kind", None) if not isinstance(found, np.dtype) else "V"
    parts = found if isinstance(found, tuple) else (found,)
    if kind in ("f", "c") or any(isinstance(p, (float, complex)) for p in parts):
        raise errors.UnsupportedSyntaxError(
            f"`.{name}` of this {type(value).__name__} holds a float (at {where}): srcgrad reads `.ndim`, "
            "`.shape`, `.size` and `.dtype` of a value whose kind it knows only when the code runs as an "
            "array's, which have no derivative", None,
            f"give the attribute another name, or read `{name}` from an object passed in as an argument")
    return found


class Cells:
    """A closure's variables as attributes, each read from its cell when the code reads
    it (``outer.G``): a call may rebind it (``nonlocal G``) while the code runs."""

    __slots__ = ("_cells",)

    def __init__(self, cells: dict):
        self._cells = cells

    def __getattr__(self, name):
        try:
            return self._cells[name].cell_contents
        except (KeyError, ValueError):
            # (AttributeError, as a module's: `getattr(scope, name, default)` expects it)
            raise AttributeError(f"free variable {name!r} referenced before assignment") from None


class Globals:
    """The globals of code made by ``exec`` (no module holds them) as attributes, read
    when the code reads them (``module.G``), as a module's are."""

    __slots__ = ("_globals",)

    def __init__(self, globals_: dict):
        self._globals = globals_

    def __getattr__(self, name):
        try:
            return self._globals[name]
        except KeyError:
            raise AttributeError(f"name {name!r} is not defined") from None


_GLOBALS_SCOPES: dict = {}  # id(globals) -> (globals, its Globals): one view per dict


def scope_of_globals(globals_: dict) -> Globals:
    """The one :class:`Globals` of this dict (code inlined from the same globals shares it)."""
    held = _GLOBALS_SCOPES.get(id(globals_))
    if held is None or held[0] is not globals_:
        held = _GLOBALS_SCOPES[id(globals_)] = (globals_, Globals(globals_))
    return held[1]
