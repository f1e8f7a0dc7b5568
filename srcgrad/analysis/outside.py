"""Outside writes: which arrays that its caller can reach may a call write into?

A function that writes, in place, into an array it was not given as an argument
(a global ``G[0] = 5``, a class attribute ``Holder.B.fill(0)``, what a global dict
holds ``CFG["w"][0] = 5``, its receiver's ``self.v[0] = 5``) changes what the
caller's backward sweep may read after the call.  This analysis reads the
callee's source and reports those writes, through the functions and methods it
calls in turn (``helper()``, ``self.bump()``, ``BUF.bump()``, and a function
given such an array that changes its argument).  Dynamic spellings are read as
what they name (``getattr(X, "v")``, ``vars(X)``, ``type(X)``, ``globals()["G"]``,
``setattr(G, "flat", v)``, an array a helper returns); where the name is known
only at run time (``globals()[k]``, ``exec``), as a write into every global.  Rebinding an attribute or a
container's entry (``self.calls += 1`` on a number, ``CFG["n"] = 3``,
``self.log.append(v)``) is not a write into an array and is not reported.

Requires: the function (its source, its globals and closure at compile time).
Guarantees: :func:`writes` returns ``[(what, obj)]``: the user's spelling of each
place written (``"G"``, ``"self.v"``) with the object there now, an array, or
the deepest container on the path that could be read (a write somewhere inside
it).  Each source is parsed once (cached by code object), each function's
writes computed once per ``Writes`` (a compilation).  A callee whose source
cannot be read (a builtin, C code) reports nothing: as before, its writes are
not seen.

Example::

    G = np.ones(3)
    def bump(): G[0] = 5.0          writes(bump) == [("G", G)]
"""
from __future__ import annotations

import functools
import inspect
import sys
import textwrap
import types

import gast
import numpy as np

from .. import nodes, runtime

_STOP = object()  # a path element known only at run time (`G[i]`)
_NUMBERS = (bool, int, float, complex, str, bytes, type(None), np.number)
_CONTAINERS = (list, dict, tuple, set)
# Array methods that write into the array itself.
_ARRAY_WRITERS = {"fill", "sort", "resize", "put", "itemset", "partition", "setfield", "__setitem__",
                  "__iadd__", "__isub__", "__imul__", "__itruediv__", "__ipow__", "__imatmul__",
                  "__ifloordiv__", "__imod__"}
# NumPy functions (and methods) that write into their first argument.
_FIRST_WRITERS = {"copyto", "put", "place", "putmask", "fill_diagonal", "put_along_axis", "shuffle", "at"}
_VIEWS = {"reshape", "ravel", "transpose", "T", "view", "squeeze", "swapaxes", "diagonal", "flat", "real",
          "imag", "asarray", "asanyarray", "expand_dims", "moveaxis"}
# An array's fields that write into it when assigned (`G.flat = 0`).
_ARRAY_FIELDS = {"flat", "real", "imag", "shape", "strides", "dtype", "data"}
_SOURCES: dict = {}  # code object -> its parsed FunctionDef (None: no source)


class Writes:
    """``writes(fn)`` for one compilation, each function's once."""

    def __init__(self):
        self.memo, self.busy = {}, set()
        self.own = False  # (of_tree: the function's own statements, not those of what it calls)

    def __call__(self, fn) -> list:
        """``[(what, obj)]``: what calling ``fn`` (a function, bound method or callable
        object) may write into, in place, outside its parameters (its receiver's
        arrays included)."""
        return self.visit(fn)[0]

    def of_tree(self, fn, fdef, own=False) -> list:
        """``self(fn)`` read from ``fdef``, a tree of ``fn``'s source (one that branches its
        arguments decide were folded out of: ``inline``); ``own``: the writes of its own
        statements only, not of the functions it calls (each judged where it is called)."""
        fdef = nodes.copy(fdef)
        _Spelled().visit(fdef)
        self.own = own
        return _Visit(self, fn, _NO_RECEIVER).run(fdef)[0]

    def returns(self, fn) -> list:
        """The outside places (a global, its receiver's field) what ``fn`` returns may
        share memory with (``def get(): return G``: ``get()[0] = 5`` writes ``G``)."""
        return self.visit(fn)[1]

    def visit(self, fn) -> tuple:
        if self.own:
            return [], []
        receiver = _NO_RECEIVER
        if isinstance(fn, functools.partial):
            return self.visit(fn.func)
        if isinstance(fn, types.MethodType):
            receiver, fn = fn.__self__, fn.__func__
        elif not isinstance(fn, (types.FunctionType, type)) and callable(fn):
            call = getattr(type(fn), "__call__", None)
            if getattr(call, "__srcgrad_calls_forward__", False):
                call = getattr(type(fn), "forward", None)
            if not isinstance(call, types.FunctionType):
                return [], []
            receiver, fn = fn, call
        if not isinstance(fn, types.FunctionType) or _library(fn):
            return [], []
        key = (fn, id(receiver))
        if key in self.memo:
            return self.memo[key]
        if key in self.busy:  # recursion: what it writes is found by the outer visit
            return [], []
        self.busy.add(key)
        try:
            self.memo[key] = _Visit(self, fn, receiver).run()
        finally:
            self.busy.discard(key)
        return self.memo[key]


def _library(fn) -> bool:
    """A function of an installed library or of Python's own (NumPy's, SciPy's, ``re``'s): what
    it writes outside its arguments is its own state (caches, tables), never the caller's arrays,
    and it is not read (reading it cost most of a compilation).  srcgrad's own layers are read."""
    module = (fn.__module__ or "").split(".")[0]
    if module == "srcgrad":
        return False
    if module in _LIBRARIES or module in sys.stdlib_module_names:
        return True
    filename = fn.__code__.co_filename
    return any(part in filename for part in ("/site-packages/", "/dist-packages/"))


_LIBRARIES = {"numpy", "scipy", "cupy", "matplotlib", "sklearn", "pandas", "optree", "gast"}
_NO_RECEIVER = object()
_SEVERAL = object()  # the root of an alias to any of several places: (_SEVERAL, places, spelling)
_ITERATORS = {"enumerate", "zip", "reversed", "list", "tuple", "sorted", "iter"}


def _inside(place):
    """Somewhere inside ``place`` (an item of it, a part of each of several)."""
    if place[0] is _SEVERAL:
        return (_SEVERAL, tuple(_inside(p) for p in place[1]), place[2])
    return place[0], place[1] + (_STOP,), place[2]


def _binding(node):
    """``(target, value, inside)`` of a statement or expression binding local names."""
    if isinstance(node, gast.Assign):
        return gast.Tuple(elts=node.targets, ctx=gast.Store()) if len(node.targets) > 1 else node.targets[0], \
            node.value, False
    if isinstance(node, gast.NamedExpr):
        return node.target, node.value, False
    if isinstance(node, (gast.For, gast.comprehension)):
        return node.target, node.iter, True
    return None


def _parsed(fn):
    code = fn.__code__
    if code not in _SOURCES:
        try:
            tree = gast.parse(textwrap.dedent(inspect.getsource(code)))
            _Spelled().visit(tree)
            if tree.body and isinstance(tree.body[0], gast.FunctionDef):
                _SOURCES[code] = tree.body[0]
            elif code.co_name == "<lambda>":  # the statement holding it: its lambdas' writes, all of them
                _SOURCES[code] = tree
            else:
                _SOURCES[code] = None
        except (OSError, TypeError, SyntaxError, ValueError, IndentationError):
            _SOURCES[code] = None
    return _SOURCES[code]


class _Spelled(nodes.Transformer):
    """The attributes a function reaches through builtins, as attributes: ``getattr(X, "v")``
    is ``X.v``, ``type(X)`` is ``X.__class__``, ``vars(X)`` is ``X.__dict__`` (a write
    through them is one into what they name)."""

    def visit_Call(self, node):
        self.generic_visit(node)
        name = getattr(node.func, "id", None)
        if node.keywords or name not in ("getattr", "type", "vars") or not node.args:
            return node
        if name == "getattr" and len(node.args) >= 2 and isinstance(node.args[1], gast.Constant) \
                and isinstance(node.args[1].value, str):
            return gast.Attribute(value=node.args[0], attr=node.args[1].value, ctx=gast.Load())
        if name in ("type", "vars") and len(node.args) == 1:
            return gast.Attribute(value=node.args[0], attr="__class__" if name == "type" else "__dict__",
                                  ctx=gast.Load())
        return node


def _step(obj, element):
    """``obj.attr`` or ``obj[key]`` read now, without running a property; _STOP where not."""
    if element is _STOP or obj is _STOP:
        return _STOP
    kind, key = element
    if element == ("attr", "__class__"):
        return type(obj)
    if element == ("attr", "__dict__"):
        return getattr(obj, "__dict__", _STOP)
    if kind == "attr" and isinstance(obj, (runtime.Cells, runtime.Globals)):
        # A closure's or exec'd code's variables, as the code reads them live (`outer.G`).
        return getattr(obj, key, _STOP)
    if kind == "attr":
        try:
            found = inspect.getattr_static(obj, key)
        except AttributeError:
            return _STOP
        if hasattr(type(found), "__get__") and not isinstance(found, (np.ndarray, *_CONTAINERS)):
            return _STOP if not isinstance(found, (types.FunctionType, staticmethod, classmethod)) else found
        return found
    if isinstance(obj, (*_CONTAINERS, types.MappingProxyType)):
        try:
            return obj[key]
        except (KeyError, IndexError, TypeError):
            return _STOP
    return _STOP


class _Visit:
    """One function's outside writes."""

    def __init__(self, writes, fn, receiver):
        self.writes, self.fn, self.receiver = writes, fn, receiver
        self.found = []
        self.namespace = dict(fn.__globals__)
        for name, cell in zip(fn.__code__.co_freevars, fn.__closure__ or ()):
            try:
                self.namespace[name] = cell.cell_contents
            except ValueError:
                pass
        code = fn.__code__
        self.params = set(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount
                                           + bool(code.co_flags & inspect.CO_VARARGS)
                                           + bool(code.co_flags & inspect.CO_VARKEYWORDS)])
        self.self_name = code.co_varnames[0] if receiver is not _NO_RECEIVER and code.co_argcount else None
        self.declared = set()  # `global G`
        self.alias = {}  # local name -> (root, path) it may share memory with

    def run(self, fdef=None) -> list:
        fdef = _parsed(self.fn) if fdef is None else fdef
        if fdef is None:
            return [], []
        self.local = {n.id for n in nodes.walk(fdef) if isinstance(n, gast.Name)
                      and isinstance(n.ctx, gast.Store)} | self.params
        self.declared = {name for n in nodes.walk(fdef) if isinstance(n, gast.Global) for name in n.names}
        self.local -= self.declared
        for _ in range(2):  # twice: a loop's second iteration sees what the first aliased
            for node in nodes.walk(fdef):
                bound = _binding(node)
                if bound is None:
                    continue
                target, value, inside = bound
                places = self.places(value, inside)
                for name in {n.id for n in nodes.walk(target) if isinstance(n, gast.Name)} - self.declared:
                    whole = places if isinstance(target, gast.Name) else [_inside(p) for p in places]
                    if whole:
                        self.alias[name] = whole[0] if len(whole) == 1 else (_SEVERAL, tuple(whole), whole[0][2])
        returned = []
        for node in nodes.walk(fdef):
            self.visit(node)
            if isinstance(node, gast.Return) and node.value is not None:
                returned += self.places(node.value)
        return list({id(obj): (what, obj) for what, obj in self.found}.values()), returned

    # ---- places -----------------------------------------------------------
    def places(self, node, inside=False):
        """Every outside place ``node``'s value may share memory with: a place, either arm of a
        conditional, the entries of a tuple or list display, the arguments of ``enumerate``,
        ``zip``, a dict's ``values()``; ``inside``: an item of it (a `for` target)."""
        place = self.place(node)
        if place is not None:
            found = [place]
        elif isinstance(node, gast.IfExp):
            found = self.places(node.body) + self.places(node.orelse)
        elif isinstance(node, (gast.Tuple, gast.List, gast.Set)):
            found = [_inside(p) if inside else p for e in node.elts for p in self.places(e)]
            return found if inside else [_inside(p) for p in found]
        elif isinstance(node, gast.Starred):
            found = self.places(node.value)
        elif isinstance(node, gast.Call) and (getattr(node.func, "id", None) in _ITERATORS or isinstance(
                node.func, gast.Attribute) and node.func.attr in ("values", "items", "copy")):
            found = [p for a in node.args + ([node.func.value] if isinstance(node.func, gast.Attribute) else [])
                     for p in self.places(a)]
        else:
            return []
        return [_inside(p) for p in found] if inside else found

    def place(self, node):
        """``(root object, path, spelling)`` of what ``node`` may share memory with, where
        that is outside the function (a global, the receiver), else None."""
        if isinstance(node, gast.NamedExpr):
            return self.place(node.value)
        if isinstance(node, gast.Name):
            if node.id == self.self_name:
                return self.receiver, (), node.id
            if node.id in self.alias:
                return self.alias[node.id]
            if node.id in self.local or node.id not in self.namespace:
                return None
            return self.namespace[node.id], (), node.id
        if isinstance(node, gast.Attribute):
            base = self.place(node.value)
            if base is None:
                return None
            if base[0] is _SEVERAL:
                return _inside(base)
            if node.attr in _VIEWS or node.attr in ("shape", "ndim", "size", "dtype"):
                return None if node.attr in ("shape", "ndim", "size", "dtype") else base
            return base[0], base[1] + (("attr", node.attr),), f"{base[2]}.{node.attr}"
        if isinstance(node, gast.Subscript):
            base = self.place(node.value)
            if base is None:
                return None
            if base[0] is _SEVERAL:
                return _inside(base)
            key = node.slice.value if isinstance(node.slice, gast.Constant) else _STOP
            shown = f"{base[2]}[{node.slice.value!r}]" if key is not _STOP else base[2]
            return base[0], base[1] + (("item", key) if key is not _STOP else _STOP,), shown
        if isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute) and node.func.attr in _VIEWS:
            base = self.place(node.func.value)
            if node.args and (base is None or isinstance(self.resolve(base)[0], types.ModuleType)):
                return self.place(node.args[0])  # np.reshape(G, ...)
            return base
        if isinstance(node, gast.Call):
            return self.called(node)
        return None

    def called(self, node):
        """The place of what a call returns: the module's namespace for ``globals()``,
        somewhere inside ``X`` for ``getattr(X, name)``, what a function of the user's
        returns (``get()`` with ``def get(): return G``)."""
        name = node.func.id if isinstance(node.func, gast.Name) and node.func.id not in self.local else None
        if name == "globals" and not node.args:
            return self.fn.__globals__, (), "globals()"
        if name == "getattr" and node.args:
            base = self.place(node.args[0])
            return None if base is None else _inside(base)
        target = self.callee(node)
        if target is None:
            return None
        returned = self.writes.returns(target)
        return returned[0] if len(returned) == 1 else (_SEVERAL, tuple(returned), returned[0][2]) \
            if returned else None

    def callee(self, node):
        """The function of the user's a call runs (a bound method for ``self.bump()``),
        known when compiling; None for NumPy's, a builtin, or one known only at run time."""
        callee = self.place(node.func)
        if callee is None or callee[0] is _SEVERAL:
            return None
        target, complete = self.resolve(callee)
        if not complete or isinstance(target, types.ModuleType) or type(target).__module__ == "numpy" \
                or getattr(target, "__module__", "") and str(getattr(target, "__module__", "")).split(".")[0] \
                in ("numpy", "builtins"):
            return None
        if isinstance(target, types.FunctionType) and isinstance(node.func, gast.Attribute) \
                and callee[1] and callee[1][-1][0] == "attr":
            # `self.bump()`, `BUF.bump()`: the method bound to the object it was read from
            owner, owned = self.resolve((callee[0], callee[1][:-1], ""))
            if owned and not isinstance(owner, (type, types.ModuleType)) \
                    and not isinstance(inspect.getattr_static(owner, node.func.attr, None), staticmethod):
                target = types.MethodType(target, owner)
        return target

    def resolve(self, place):
        """``(obj, complete)``: the object at ``place`` now (or the deepest one read)."""
        if place[0] is _SEVERAL:
            return None, False
        obj, path, _ = place
        shown = obj  # (through `X.__dict__`: what is written into is X)
        for element in path:
            nxt = _step(obj, element)
            if nxt is _STOP:
                return shown, False
            obj = nxt
            if element != ("attr", "__dict__"):
                shown = obj
        return obj, True

    def written(self, place, rebinds=False):
        """A write into the array at ``place`` (``rebinds``: ``X.a += v``, ``global G; G += v``,
        which write in place only for an array)."""
        if place is None or place[0] is _NO_RECEIVER:
            return
        if place[0] is _SEVERAL:
            for each in place[1]:
                self.written(each, rebinds)
            return
        obj, complete = self.resolve(place)
        if complete and (isinstance(obj, _NUMBERS) or rebinds and not isinstance(obj, np.ndarray)):
            return  # a number rebound (a counter), not an array changed
        if not complete and (isinstance(obj, types.ModuleType) or obj is self.fn.__globals__):
            self.everything(vars(obj) if isinstance(obj, types.ModuleType) else obj)
            return
        if isinstance(obj, (types.ModuleType, types.FunctionType)):
            return
        self.found.append((place[2], obj))

    def everything(self, namespace):
        """A write somewhere in a module's namespace (``globals()[name][0] = v``, ``exec``):
        into anything its globals hold or reach."""
        for name, value in list(namespace.items()):
            if not isinstance(value, (types.ModuleType, types.FunctionType, *_NUMBERS)) \
                    and not name.startswith("__"):
                self.found.append((name, value))

    def stored(self, target):
        """``X[k] = v``: into an array, or an entry of a list or dict rebound."""
        base = self.place(target.value)
        if base is None:
            return
        if base[0] is _SEVERAL:
            self.written(base)
            return
        obj, complete = self.resolve(base)
        if complete and isinstance(obj, _CONTAINERS):
            return  # `CFG["n"] = 3`, `log[i] = v`: the container's entry, not an array
        self.written(base)

    # ---- statements -------------------------------------------------------
    def rebound(self, owner, attr):
        """``owner.attr = v``: a write into an array when ``owner`` is one (``G.flat = 0``,
        ``G.shape = (3, 1)``); ``attr`` None: known only when it runs."""
        if attr is not None and attr not in _ARRAY_FIELDS:
            return
        place = self.place(owner)
        if place is None:
            return
        if place[0] is not _SEVERAL:
            obj, complete = self.resolve(place)
            if complete and not isinstance(obj, np.ndarray):
                return  # an object's field rebound, not an array changed
        self.written(place)

    def visit(self, node):
        if isinstance(node, (gast.Assign, gast.AugAssign)):
            for t in node.targets if isinstance(node, gast.Assign) else [node.target]:
                if isinstance(t, gast.Attribute) and isinstance(node, gast.Assign):
                    self.rebound(t.value, t.attr)
                if isinstance(t, gast.Subscript):
                    self.stored(t)
                elif isinstance(node, gast.AugAssign) and isinstance(t, gast.Attribute):
                    self.written(self.place(t), rebinds=True)  # `self.v += 1`
                elif isinstance(node, gast.AugAssign) and isinstance(t, gast.Name) \
                        and (t.id in self.declared or t.id in self.alias):
                    self.written(self.place(t), rebinds=True)  # `global G; G += 1`
        if not isinstance(node, gast.Call):
            return
        func = node.func
        if isinstance(func, gast.Attribute) and func.attr in _ARRAY_WRITERS:
            self.written(self.place(func.value))
        name = func.attr if isinstance(func, gast.Attribute) else getattr(func, "id", None)
        if name in _FIRST_WRITERS and node.args:
            self.written(self.place(node.args[0]))
        ufunc = self.place(func)
        ufunc = self.resolve(ufunc)[0] if ufunc is not None and ufunc[0] is not _SEVERAL else None
        if isinstance(ufunc, np.ufunc) and len(node.args) > ufunc.nin:  # np.multiply(a, b, G)
            for out in node.args[ufunc.nin:]:
                self.written(self.place(out))
        for k in node.keywords:
            if k.arg == "out":
                self.written(self.place(k.value))
        builtin = func.id if isinstance(func, gast.Name) and func.id not in self.local else None
        if builtin in ("exec", "eval"):  # code known only when it runs: it may write any global
            self.everything(self.fn.__globals__)
        if (builtin == "setattr" or name == "__setattr__") and node.args:
            # `setattr(G, "flat", v)`, `object.__setattr__(X, name, v)`: as `X.name = v`
            given = builtin == "setattr" or len(node.args) == 3  # (else `X.__setattr__(name, v)`)
            owner, key = (node.args[0], node.args[1:2]) if given else (func.value, node.args[:1])
            self.rebound(owner, key[0].value if key and isinstance(key[0], gast.Constant) else None)
        target = self.callee(node)
        if target is None:
            return
        callee = self.place(func)
        prefix = callee[2].rsplit(".", 1)[0] if isinstance(target, types.MethodType) else None
        for what, obj in self.writes(target):
            if prefix is not None and what.split(".")[0] == _receiver_name(target):
                what = prefix + what[len(_receiver_name(target)):]
            self.found.append((what, obj))
        # An argument it changes in place: `helper(G)` with `def helper(a): a[0] = 5`.
        from .mutation import _changes_arguments
        given = [self.place(a) for a in node.args + [k.value for k in node.keywords]]
        if any(p is not None for p in given) and _changes_arguments(target):
            for p in given:
                self.written(p)


def _receiver_name(method) -> str:
    code = method.__func__.__code__
    return code.co_varnames[0] if code.co_argcount else ""


# ---- stores: values computed from the arguments, kept outside the call ----------------------

_CONTAINER_MUTATORS = {"append", "extend", "insert", "update", "setdefault", "add", "__setitem__"}
_PURE_MODULES = ("numpy", "math", "scipy", "cupy", "builtins", "srcgrad", "operator", "functools", "itertools")


def stores(fn, _seen=None):
    """Where ``fn`` keeps a value computed from its arguments outside its own variables,
    as ``"file:line: text"`` of the first such store, else None: an attribute or an item
    of something it did not make (``self.total = self.total + v``, ``G.h = v``,
    ``STORE["k"] = v``, ``self.log.append(v)``, ``setattr(obj, "h", v)``), a ``global``
    rebound, or a function of the user's it calls with such a value that does so in
    turn.  A method's own receiver does not count as an argument (``self.calls += 1``
    keeps nothing of the arguments; an object being differentiated is checked by
    ``rt.keeping_fields`` when the call runs).  A value kept there and read back by the caller would reach it
    with no adjoint: the caller's reverse pass refuses the call.  Conservative where a
    callee is known only at run time (a method of an argument, of an object of unknown
    class): reported when it is given such a value.  Linear in the callee's size; each
    function's answer cached per code object."""
    bound = isinstance(fn, types.MethodType)
    target, receiver = (fn.__func__, fn.__self__) if bound else (fn, None)
    if not isinstance(target, types.FunctionType):
        call = getattr(type(fn), "__call__", None)
        if not isinstance(call, types.FunctionType):
            return None
        target, bound, receiver = call, True, fn
    key = (target.__code__, bound, type(receiver))
    if key in _STORES:
        return _STORES[key]
    _seen = _seen or set()
    if key in _seen:  # recursion: what it stores is found at its first visit
        return None
    _seen.add(key)
    fdef = _parsed(target)
    _STORES[key] = found = None if fdef is None or not isinstance(fdef, gast.FunctionDef) \
        else _Stores(target, fdef, receiver, bound, _seen).first()
    return found


_STORES: dict = {}


class _Stores:
    def __init__(self, fn, fdef, receiver, bound, seen):
        self.fn, self.fdef, self.receiver, self.seen = fn, fdef, receiver, seen
        params = [a.id for a in fdef.args.posonlyargs + fdef.args.args + fdef.args.kwonlyargs]
        params += [a.id for a in (fdef.args.vararg, fdef.args.kwarg) if a is not None]
        self.own = params[0] if bound and params else None
        self.params = set(params)
        self.local, self.fresh, self.declared = set(), set(), set()
        other = set()  # names bound to something not made here (at least once)
        uses = {}  # local name -> the names its values are computed from
        for node in nodes.walk(fdef):
            if isinstance(node, (gast.Global, gast.Nonlocal)):
                self.declared.update(node.names)
            binding = _binding(node) or ((node.target, node.value, False)
                                         if isinstance(node, (gast.AugAssign, gast.AnnAssign)) and node.value
                                         else None)
            if binding is None:
                continue
            target, value, _ = binding
            made = isinstance(target, gast.Name) and self.makes(value)
            for name in _bound_names(target):
                self.local.add(name)
                uses.setdefault(name, set()).update(
                    n.id for n in nodes.walk(value) if isinstance(n, gast.Name))
                (self.fresh if made else other).add(name)
        self.local -= self.declared
        self.fresh -= other | self.declared | self.params
        # The names computed from the arguments: a worklist over the bindings.
        users = {}
        for name, read in uses.items():
            for r in read:
                users.setdefault(r, set()).add(name)
        self.tainted = set(self.params - {self.own})
        work = list(self.tainted)
        while work:
            for user in users.get(work.pop(), ()):
                if user not in self.tainted:
                    self.tainted.add(user)
                    work.append(user)

    def makes(self, value) -> bool:
        """A new container or array: a display, a comprehension, NumPy's constructors."""
        if isinstance(value, (gast.List, gast.Dict, gast.Set, gast.ListComp, gast.DictComp, gast.SetComp,
                              gast.Constant)):
            return True
        if isinstance(value, gast.Call) and isinstance(value.func, gast.Attribute) \
                and isinstance(value.func.value, gast.Name) and value.func.attr in _MAKERS:
            module = self.fn.__globals__.get(value.func.value.id)
            return isinstance(module, types.ModuleType) and module.__name__.split(".")[0] in ("numpy", "cupy")
        return isinstance(value, gast.Call) and isinstance(value.func, gast.Name) \
            and value.func.id in ("dict", "list", "set") and value.func.id not in self.fn.__globals__

    def carries(self, node) -> bool:
        return node is not None and any(isinstance(n, gast.Name) and n.id in self.tainted for n in nodes.walk(node))

    def outside(self, target) -> bool:
        """Whether writing into ``target`` (``X.a``, ``X[k]``) changes something the call did not make."""
        root = target
        while isinstance(root, (gast.Attribute, gast.Subscript)):
            root = root.value
        return not (isinstance(root, gast.Name) and root.id in self.fresh)

    def where(self, node) -> str:
        lines = self.fn.__code__.co_firstlineno + getattr(node, "lineno", 1) - 1
        text = gast.unparse(node).strip().splitlines()[0] if hasattr(gast, "unparse") else ""
        return f"{self.fn.__code__.co_filename.rsplit('/', 1)[-1]}:{lines}: `{text}`"

    def first(self):
        for node in nodes.walk(self.fdef):
            if isinstance(node, (gast.Assign, gast.AugAssign, gast.AnnAssign)) and self.carries(node.value):
                for target in node.targets if isinstance(node, gast.Assign) else [node.target]:
                    for t in nodes.walk(target):
                        if isinstance(t, (gast.Attribute, gast.Subscript)) and isinstance(t.ctx, gast.Store) \
                                and self.outside(t) or isinstance(t, gast.Name) and t.id in self.declared:
                            return self.where(node)
            if isinstance(node, gast.Call) and (found := self.call(node)):
                return found
        return None

    def call(self, node):
        args = node.args + [k.value for k in node.keywords]
        if not any(self.carries(a) for a in args):
            return None
        func = node.func
        if isinstance(func, gast.Name) and func.id == "setattr":
            return self.where(node)
        if isinstance(func, gast.Attribute) and func.attr in _CONTAINER_MUTATORS and self.outside(func.value):
            return self.where(node)
        if isinstance(func, gast.Attribute) and self.carries(func.value) and hasattr(np.ndarray, func.attr):
            return None  # an array's method (`v.sum()`); writes into the array are checked as such
        callee = self.resolve(func)
        if callee is _UNKNOWN:
            return self.where(node)
        return None if callee is None else stores(callee, self.seen)

    def resolve(self, func):
        """The callee of the user's, None for a library's, _UNKNOWN where not known now."""
        if isinstance(func, gast.Name):
            if func.id in self.local or func.id in self.params:
                return _UNKNOWN
            value = self.fn.__globals__.get(func.id, getattr(__import__("builtins"), func.id, _UNKNOWN))
            if value is _UNKNOWN and self.fn.__closure__:
                cells = dict(zip(self.fn.__code__.co_freevars, self.fn.__closure__))
                try:
                    value = cells[func.id].cell_contents if func.id in cells else _UNKNOWN
                except ValueError:
                    value = _UNKNOWN
        elif isinstance(func, gast.Attribute) and isinstance(func.value, gast.Name) and func.value.id == self.own \
                and self.receiver is not None:
            value = getattr(self.receiver, func.attr, _UNKNOWN)
        else:  # `np.linalg.norm`, `BOX.keep`: a chain from a global, read now
            chain, root = [], func
            while isinstance(root, gast.Attribute):
                chain.append(root.attr)
                root = root.value
            if not isinstance(root, gast.Name) or root.id in self.local | self.params:
                return _UNKNOWN
            value = self.fn.__globals__.get(root.id, _UNKNOWN)
            for attr in reversed(chain):
                value = _UNKNOWN if value is _UNKNOWN else getattr(value, attr, _UNKNOWN)
        if value is _UNKNOWN:
            return _UNKNOWN
        module = str(getattr(value, "__module__", None) or getattr(type(value), "__module__", ""))
        if module.split(".")[0] in _PURE_MODULES or isinstance(value, (type, types.BuiltinFunctionType)):
            return None
        return value


_UNKNOWN = object()
_MAKERS = {"zeros", "ones", "empty", "full", "zeros_like", "ones_like", "empty_like", "full_like", "array",
           "copy", "arange", "linspace", "eye", "identity"}


def _bound_names(target):
    """The names a target binds (``a``, ``a, (b, *c)``), not those inside ``x.f``/``x[k]``."""
    if isinstance(target, gast.Name):
        return [target.id]
    if isinstance(target, (gast.Tuple, gast.List)):
        return [n for t in target.elts for n in _bound_names(t)]
    if isinstance(target, gast.Starred):
        return _bound_names(target.value)
    return []


def stores_refusal(callee, given, kept) -> tuple:
    """``(problem, advice)`` for a call given a value being differentiated that keeps a
    value computed from it outside itself (``outside.stores``): read back later, that
    value would carry no adjoint."""
    given = "a value" if given.startswith("_") else f"`{given}`"
    return (f"`{callee}` is given {given}, which is being differentiated, and keeps a value computed "
            f"from it outside the call ({kept}): srcgrad does not follow values kept in objects or "
            "globals, so a later read would carry no gradient",
            "return the value and assign it here, or, if it is only recorded (a log, a plot), pass "
            "`srcgrad.stop_gradient(...)` of it")
