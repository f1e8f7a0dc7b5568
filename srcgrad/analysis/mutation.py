"""Mutation analysis: which arguments a function of the user's may change in place, which
it may give back, and which statements write into what they are given.

Read from a callee's source (``inspect.getsource``), once per code object where cached;
conservative (True: all of them) where the source cannot be read.  The reverse pass's
refusals (``analysis/in_place.py``) ask it of each call it does not inline (a helper that
changes its argument, ``np.copyto`` into one, a method that appends), and
``analysis/outside`` of what a callee writes.

Requires: nothing of the compiler's (gast trees of the user's source).
Guarantees: nothing is changed.
"""
from __future__ import annotations

import inspect
import textwrap
import types

import gast
import numpy as np

from .. import nodes

_WRITING_RULES = {"numpy.random.shuffle", "numpy.copyto", "numpy.put", "numpy.place", "numpy.putmask",
                  "numpy.fill_diagonal", "numpy.put_along_axis"}


def _writes_into_first(fn) -> bool:
    """Whether ``fn`` is a NumPy function that writes into its first argument
    (``np.copyto``, ``np.put``, ``np.add.at``, ...)."""
    if fn is None:
        return False
    if getattr(fn, "__name__", None) == "at" and isinstance(getattr(fn, "__self__", None), np.ufunc):
        return True
    return any(fn is f for f in (np.copyto, np.put, np.place, np.putmask, np.fill_diagonal,
                                 np.put_along_axis, np.random.shuffle))


# Methods that write into their first argument (`rng.shuffle(y)`, `np.add.at(y, i, v)`),
# and NumPy functions that do, by name (in a helper's source, where nothing is resolved).
_ARGUMENT_WRITERS = {"shuffle", "at", "copyto", "put", "place", "putmask", "fill_diagonal",
                     "put_along_axis"}


def _written_arguments(call, fn=None, rule=None) -> list:
    """The argument nodes ``call`` may write into: its first argument for a NumPy
    function (or method of that name) that writes there, and any ``out=`` (or a ufunc's
    positional outputs)."""
    written = [k.value for k in call.keywords if k.arg == "out"
               and not (isinstance(k.value, gast.Constant) and k.value.value is None)]
    method = call.func.attr if isinstance(call.func, gast.Attribute) else None
    if call.args and (_writes_into_first(fn) or rule is not None and rule.name in _WRITING_RULES
                      or method in _ARGUMENT_WRITERS and (fn is None or _writes_into_first(fn))):
        written.append(call.args[0])
    # (by name only where the callee is not resolved: `math.log(x, 2.0)` is not `np.log`'s `out`)
    ufunc = fn if isinstance(fn, np.ufunc) else getattr(np, method, None) if method and fn is None else None
    if isinstance(ufunc, np.ufunc) and len(call.args) > ufunc.nin:
        written += call.args[ufunc.nin:]  # np.negative(a, a)
    return written


# Functions and methods whose result may be a view of their (first) argument.
_VIEW_FUNCTIONS = {"reshape", "ravel", "transpose", "asarray", "asanyarray", "squeeze", "expand_dims",
                   "swapaxes", "moveaxis", "flip", "fliplr", "flipud", "atleast_1d", "atleast_2d",
                   "atleast_3d", "broadcast_to", "diagonal", "view", "real", "imag", "rot90",
                   "ascontiguousarray", "matrix_transpose", "permute_dims", "T", "mT", "astype", "array",
                   "sliding_window_view", "as_strided", "stop_gradient", "diag", "float64", "float32",
                   "require", "asfortranarray", "asarray_chkfinite", "split", "array_split", "hsplit",
                   "vsplit", "dsplit", "unstack", "squeeze", "copy_if_needed", "iterated", "to_host",
                   "to_device", "flat", "base"}
_CONTAINER_MUTATORS = {"append", "extend", "insert", "pop", "remove", "clear", "update", "setdefault",
                       "popitem"}
_MUTATING_METHODS = _CONTAINER_MUTATORS | {"fill", "sort", "resize", "put", "itemset", "partition",
                                           "setfield", "__setitem__", "__delitem__", "__iadd__",
                                           "__isub__", "__imul__", "__itruediv__", "__ipow__",
                                           "__imatmul__", "__ifloordiv__", "__imod__"}


def _target_name(stmt):
    if isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name):
        return stmt.targets[0].id
    return None


def _changed_defaults(fn, call):
    """``(parameter, its default's source)`` for a parameter that ``fn`` changes in place
    and ``call`` does not give (``acc=[]``), or None.  (Error messages only.)"""
    if not isinstance(fn, types.FunctionType):
        return None
    changed = _mutated_parameters(fn)
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return None
    if changed is True:
        return None
    given = set(list(params)[:len(call.args)]) | {k.arg for k in call.keywords}
    for name in params:
        if name in changed and name not in given and params[name].default is not inspect.Parameter.empty:
            return name, type(params[name].default).__name__
    return None


def _changes_arguments(fn) -> bool:
    """Whether calling ``fn`` may change an argument given to it in place.  For an object
    (a layer held in a global: ``lin(x)``), what calling it runs -- its class's
    ``forward`` for an ``nn.Module`` not given its own, else ``__call__`` -- with the
    object itself, the receiver, not counted (as ``rt.unchanging`` at run time)."""
    if isinstance(fn, (types.FunctionType, types.BuiltinFunctionType)) or isinstance(fn, type):
        return bool(_mutated_parameters(fn))
    call = getattr(type(fn), "__call__", None)
    if not isinstance(call, types.FunctionType):
        return bool(_mutated_parameters(fn))
    if getattr(call, "__srcgrad_calls_forward__", False):
        if "forward" in getattr(fn, "__dict__", {}):
            return True  # a forward of the instance's own: not read here
        call = getattr(type(fn), "forward", None)
        if not isinstance(call, types.FunctionType):
            return True
    changed = _mutated_parameters(call)
    if changed is True:
        return True
    return bool(set(changed) - {call.__code__.co_varnames[0]} if call.__code__.co_argcount else changed)


def _mutated_parameters(fn):
    """The parameters ``fn``'s own body may change in place: ``a *= k``, ``a[i] = v``,
    ``a.n = v``, ``a.append(v)`` on a parameter ``a`` (read from its source; True, all of
    them, for a function whose source cannot be read)."""
    try:
        # fn.__code__: the code that runs, not the function a functools.wraps wrapper names.
        tree = gast.parse(textwrap.dedent(inspect.getsource(fn.__code__)))
        params = set(inspect.signature(fn, follow_wrapped=False).parameters)
    except (OSError, TypeError, SyntaxError, ValueError, AttributeError):
        return True
    return _changed_in_place(tree.body[0].body if tree.body and isinstance(tree.body[0], gast.FunctionDef)
                             else tree.body, params, fn)


_RETURNS: dict = {}  # code object -> whether the function may return (part of) a parameter


def _may_return_argument(fn) -> bool:
    """Whether calling ``fn`` (a function of the user's, a ``@custom_adjoint`` one) may
    give back one of its arguments or a view of it (``def ident(a): return a``)."""
    if hasattr(fn, "defadjoint"):  # @custom_adjoint: its rule runs, its body may be an identity
        return True
    code = getattr(fn, "__code__", None)
    if code is None:
        return False
    if code not in _RETURNS:
        _RETURNS[code] = True  # (recursion: assume it may)
        try:
            tree = gast.parse(textwrap.dedent(inspect.getsource(code)))
            params = set(inspect.signature(fn, follow_wrapped=False).parameters)
        except (OSError, TypeError, SyntaxError, ValueError, AttributeError):
            return True
        returned = []
        _changed_in_place(tree.body[0].body if tree.body and isinstance(tree.body[0], gast.FunctionDef)
                          else tree.body, params, fn, returned)
        _RETURNS[code] = bool(returned)
    return _RETURNS[code]


def _changed_in_place(body, params, fn=None, returned=None) -> set:
    """The names of ``params`` that the statements ``body`` change in place (and, into
    ``returned``, those a ``return`` may give back).  ``fn``: the function whose body it
    is, to find what the names it calls refer to."""
    changes = _InPlaceChanges(params, fn, returned)
    changes.visit(body)
    return changes.found


class _InPlaceChanges:
    """One walk of a function's body in program order (a loop's body twice), following
    which names may share memory with a parameter, collecting the parameters changed."""

    def __init__(self, params, fn=None, returned=None):
        self.found, self.returned = set(), returned
        self.namespace = dict(getattr(fn, "__globals__", None) or {})
        for name, cell in zip(getattr(getattr(fn, "__code__", None), "co_freevars", ()),
                              getattr(fn, "__closure__", None) or ()):
            try:
                self.namespace[name] = cell.cell_contents
            except ValueError:
                pass
        # Names that may share memory with a parameter, in program order: `z = y`, `z = y[1:]`,
        # `z = y.T`, `z = y.reshape(2, 2)`, `z = np.reshape(y, ...)`; `y = np.copy(y)` ends it.
        self.owner = {p: p for p in params}

    def called(self, func):
        """What a call's function names refers to (None: not known)."""
        if isinstance(func, gast.Name):
            return self.namespace.get(func.id)
        if isinstance(func, gast.Attribute):
            obj = self.called(func.value)
            return getattr(obj, func.attr, None) if obj is not None else None
        return None

    def base(self, node):
        """The parameter whose memory ``node`` may share, or None."""
        owner, base = self.owner, self.base
        while True:
            if isinstance(node, gast.Call):
                func = node.func
                if not (isinstance(func, gast.Attribute) and func.attr in _VIEW_FUNCTIONS):
                    target = self.called(func)
                    if target is not None and _may_return_argument(target):
                        # `b = ident(a)`: any argument may come back
                        parts = node.args + [k.value for k in node.keywords]
                        return next((b for b in map(base, parts) if b is not None), None)
                    return None
                if isinstance(func.value, gast.Name) and func.value.id in owner:
                    node = func.value  # y.reshape(...)
                elif node.args:
                    node = node.args[0]  # np.reshape(y, ...)
                else:
                    return None
            elif isinstance(node, gast.Attribute) and node.attr in ("shape", "ndim", "size", "dtype",
                                                                   "strides", "nbytes", "itemsize"):
                return None  # a new tuple or number: `np.asarray(a.shape)` is a new array
            elif isinstance(node, (gast.Subscript, gast.Attribute, gast.Starred)):
                node = node.value
            elif isinstance(node, (gast.Set, gast.Dict, gast.IfExp, gast.BoolOp)) \
                    or isinstance(node, (gast.List, gast.Tuple)) and isinstance(node.ctx, gast.Load):
                # `[a, b]`, `a if c else b`: a container holding the parameter, or it itself
                parts = node.values + node.keys if isinstance(node, gast.Dict) else [node.body, node.orelse] \
                    if isinstance(node, gast.IfExp) else node.values if isinstance(node, gast.BoolOp) \
                    else node.elts
                return next((b for b in map(base, [p for p in parts if p is not None]) if b is not None), None)
            else:
                return owner.get(node.id) if isinstance(node, gast.Name) else None

    def iterated(self, node):
        """What a loop over ``node`` binds its target to may share memory with: the rows of
        an array, the items of a container, of ``enumerate``/``zip``/``reversed`` of one."""
        if isinstance(node, gast.Call) and isinstance(node.func, gast.Name) \
                and node.func.id in ("enumerate", "zip", "reversed", "list", "tuple", "iter", "sorted"):
            return next((b for b in map(self.iterated, node.args) if b is not None), None)
        if isinstance(node, (gast.List, gast.Tuple, gast.Set)):
            return next((b for b in map(self.base, node.elts) if b is not None), None)
        return self.base(node)

    def bind(self, target, source):
        """``target`` (a store) now shares memory with parameter ``source`` (None: with none)."""
        for n in nodes.walk(target):
            if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Store):
                if source is None:
                    self.owner.pop(n.id, None)
                else:
                    self.owner[n.id] = source

    def visit(self, stmts):
        for stmt in stmts:
            if isinstance(stmt, (gast.For, gast.While)):
                if isinstance(stmt, gast.For):
                    self.bind(stmt.target, self.iterated(stmt.iter))  # `for r in [a]: r[0] = 0`
                self.visit(stmt.body)
                self.visit(stmt.body)  # the second iteration sees what the first aliased
                self.visit(stmt.orelse)
                continue
            if isinstance(stmt, (gast.If, gast.With, gast.Try)):
                for field in ("body", "orelse", "finalbody"):
                    self.visit(getattr(stmt, field, None) or [])
                for handler in getattr(stmt, "handlers", []):
                    self.visit(handler.body)
                continue
            if isinstance(stmt, gast.FunctionDef):
                continue
            if isinstance(stmt, gast.Return) and self.returned is not None and stmt.value is not None \
                    and self.base(stmt.value) is not None:
                self.returned.append(self.base(stmt.value))
            self.changes(stmt)
            if isinstance(stmt, gast.Assign):
                source = self.base(stmt.value)
                for t in stmt.targets:
                    self.bind(t, source)

    def changes(self, stmt):
        """Collect the parameters ``stmt`` changes in place: ``a *= k``, ``a[i] = v``,
        ``a.append(v)``, ``np.copyto(a, v)`` on a name sharing a parameter's memory."""
        base = self.base
        for node in nodes.walk(stmt):
            targets = node.targets if isinstance(node, gast.Assign) else [node.target] \
                if isinstance(node, gast.AugAssign) else []
            for t in targets:
                if isinstance(t, gast.Name) and isinstance(node, gast.AugAssign) and t.id in self.owner \
                        or not isinstance(t, gast.Name) and base(t) is not None:
                    self.found.add(base(t))
            if isinstance(node, gast.Call) and isinstance(node.func, gast.Attribute) \
                    and node.func.attr in _MUTATING_METHODS and base(node.func.value) is not None:
                self.found.add(base(node.func.value))
            if isinstance(node, gast.Call):  # np.copyto(a, v), np.negative(a, out=a), rng.shuffle(a)
                self.found.update(b for b in map(base, _written_arguments(node)) if b is not None)


def _is_srcgrad_grad(fn) -> bool:
    """``srcgrad.grad`` itself (reverse mode sits below the API: by its module and name)."""
    return getattr(fn, "__module__", None) == "srcgrad.api" and getattr(fn, "__name__", None) == "grad"
