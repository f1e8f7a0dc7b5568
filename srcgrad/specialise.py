"""What a compiled program is specialised on, and how it checks it.

A program is compiled for the ranks of its arguments (``rank_of_argument``: the cache
key, with the options) and for what its free names and object arguments hold when it
is compiled (``resolve.FreeNames``, ``inline.Inlined``).  ``Compiled`` checks those
before each call and compiles again (or takes back a program compiled before) where
they changed; ``Guards`` are the checks the code itself makes after a call of the
user's code that was not inlined, where compiling again would be too late.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import types

import gast
import numpy as np

from .anno import Kind
from . import anno, errors, nodes, tree
from .rules import registry
from .transforms import inline, resolve


@dataclasses.dataclass
class Compiled:
    """A loaded gradient program."""

    source: str
    function: object
    free: resolve.FreeNames
    namespace: dict
    remake: object = None  # (args) -> a new Compiled of the same function, options and ranks
    inlined: inline.Inlined = None
    watch: Guards = None  # (what the code checks after its calls not inlined)
    # The programs compiled before for other classes of the objects it inlined (or other
    # functions behind its free names), most recent first: a call site whose receiver's
    # layer alternates (a Sigmoid, then a Tanh) switches between them, compiled once each.
    others: list = dataclasses.field(default_factory=list)

    KEPT = 8  # programs kept in ``others``
    rules: int = dataclasses.field(default_factory=registry.version)  # (registry.version when compiled)

    def __call__(self, *args):
        if not (self.free.refresh(self.namespace) and self.inlined.holds(args)) or self.rules != registry.version():
            self._renew(args)
        if _RUN is not None:  # (srcgrad.show: which programs a call runs)
            _RUN.append((self.free.fn, self.source))
        return self.function(*args)

    def current(self, args) -> Compiled:
        """This program, compiled again first if what it was specialised on changed
        (what ``__call__`` checks), without running it (``srcgrad.source``, hvp)."""
        if not (self.free.refresh(self.namespace) and self.inlined.holds(args)) or self.rules != registry.version():
            self._renew(args)
        return self

    def _parts(self) -> tuple:
        return self.source, self.function, self.free, self.namespace, self.inlined, self.watch

    def _renew(self, args):
        # A function or class the code was specialised on was rebound, a global holds
        # data of another kind, or an object whose methods it inlined has another class:
        # the program compiled for what the names and arguments hold now, kept from an
        # earlier call or compiled again (in place: callers keep this object).  A rule
        # registered since (`@f.defadjoint` given again) makes each of them stale.
        if self.rules != registry.version():
            self.others.clear()
            self.rules = registry.version()
        for i, (source, function, free, namespace, inlined, watch) in enumerate(self.others):
            if free.refresh(namespace) and inlined.holds(args):
                self.others[i] = self._parts()
                self.source, self.function, self.free, self.namespace, self.inlined, self.watch = \
                    source, function, free, namespace, inlined, watch
                return
        fresh = self.remake(args)
        self.others = [self._parts()] + self.others[:self.KEPT - 1]
        self.source, self.function, self.free, self.namespace, self.inlined, self.watch = fresh._parts()
        self.free.refresh(self.namespace)

    def rebound(self, fn) -> Compiled:
        """This program for ``fn``, another function of the same code (a closure or
        nested ``def`` made again, a lambda made in a loop), specialised alike: it
        reads ``fn``'s closure cells, its globals and its defaults when it runs, in a
        namespace of its own (so two closures of one code, live at once, never read
        each other's values).  Nothing is compiled: the loaded code is run again."""
        free = self.free.rebound(fn)
        namespace = dict(self.namespace)
        watch = self.watch.rebound(free, namespace) if self.watch is not None else None
        function = types.FunctionType(self.function.__code__, namespace, self.function.__name__,
                                      self.function.__defaults__)
        remake = functools.partial(self.remake.func, fn, *self.remake.args[1:])
        free.refresh(namespace)
        return Compiled(self.source, function, free, namespace, remake, self.inlined, watch, rules=self.rules)


_RUN: list | None = None  # while ``programs_run`` watches: (function, source) of each program run


@contextlib.contextmanager
def programs_run():
    """Collect, as ``[(function, source)]`` in the order they run, the programs called
    inside the block: the caller's, and those of the callees compiled when it runs
    (``dispatch.vjp_call``, ``api.bind_vjp``), at any depth (``srcgrad.show``)."""
    global _RUN
    outer, _RUN = _RUN, []
    try:
        yield _RUN
    finally:
        _RUN = outer


class Guards:
    """What compiled code was specialised on (the functions and classes behind its free
    names, the class at each object path and the functions behind the methods it
    inlined), checked by the code itself after each call of the user's code that was
    not inlined: such a call may rebind a function, swap a layer (``model.l = Sq(w)``)
    or patch a method while the code runs, and the code would go on running the
    old one.  (``pipeline.Compiled`` checks the same before each call, and compiles
    again; in the middle of a call that is too late, so a change there is refused.)
    NumPy's functions, rules and calls that were inlined are not checked after:
    code that calls only those (a model whose calls were all inlined) has no check."""

    def __init__(self, free, inlined):
        self.free, self.inlined = free, inlined
        self.name, self.origins, self.namespace = None, {}, None

    def after_calls(self, body, core) -> list:
        """``body`` with ``specialised.check((m, x), 'loss.py:12')`` after each call of the
        user's code that was not inlined, where the code is specialised on anything."""
        if not (self.free.guards or self.free.kinds or any(part.guards or part.kinds for part, _ in self.free.parts)
                or self.inlined.classes or self.inlined.methods):
            return body
        out = []
        for stmt in body:
            for field in ("body", "orelse"):
                if getattr(stmt, field, None):
                    setattr(stmt, field, self.after_calls(getattr(stmt, field), core))
            out.append(stmt)
            # (An operator or a field dispatched when it runs is a call too: a class's
            # `__mul__` or a property's getter may swap a layer as much as a method may.)
            if anno.get(stmt, "kind") == Kind.CALL:
                origin = anno.get(stmt, "origin")
                where = origin.where if origin else "?"
                self.origins.setdefault(where, origin)
                self.name = self.name or core.fresh("specialised")
                check = gast.Expr(value=nodes.call(f"{self.name}.check", [
                    nodes.tuple_([nodes.name(p) for p in core.params]), nodes.const(where)]))
                for key in ("group", "origin"):
                    anno.set(check, key, anno.get(stmt, key))
                anno.set(check, "impure", True)
                out.append(check)
        return out

    def bind(self, namespace):
        if self.name is not None:
            self.namespace = namespace
            namespace[self.name] = self

    def rebound(self, free, namespace) -> Guards:
        """The same checks in another namespace, of another function's free names
        (``Compiled.rebound``)."""
        watch = Guards(free, self.inlined)
        watch.name, watch.origins = self.name, self.origins
        watch.bind(namespace)
        return watch

    def check(self, args, where):
        """Raises ``UnsupportedSyntaxError`` (at the call's line) when what the code was
        specialised on changed during the call just made."""
        if self.free.refresh(self.namespace, between=False) and self.inlined.holds(args):
            return
        raise errors.UnsupportedSyntaxError(
            "this call changed, while the differentiated code ran, a function, a layer or a method "
            "that srcgrad compiled this code for (it rebound a function, put another layer into a "
            "model, or replaced a method of a class): the code would go on using the old one",
            self.origins.get(where), "make the change before calling the gradient function (a change "
            "between calls is seen), or pass the layer to use as an argument")


# (Bookkeeping: forward mode over gradient code that checks passes the check by as it is.)
registry.nondifferentiable(methods=((Guards, "check"),), impure=True)


def rank_of_argument(value):
    """What compiled code is specialised on for an argument: an array's rank, the
    ranks inside a structure of parameters (a ``TreeRank``), or None."""
    if isinstance(value, np.ndarray):
        return value.ndim
    if isinstance(value, (float, int, np.generic)):
        return 0
    # A tuple, list or dict records every entry (a None too), so its length is in the key.
    if isinstance(value, (tuple, list)):
        return tree.TreeRank(((i, rank_of_argument(v)) for i, v in enumerate(value)), "sequence",
                              frozenset(i for i, v in enumerate(value) if tree._is_integer(v)))
    if isinstance(value, dict):
        return tree.TreeRank(((k, rank_of_argument(v)) for k, v in value.items()), "mapping",
                              frozenset(k for k, v in value.items() if tree._is_integer(v)))
    if tree.is_structure(value):
        return _tree_rank(value)
    return None


def _tree_rank(value):
    if tree._is_object(value) and not isinstance(value, tuple):
        plan = tree.layout(value)
        if plan is not None:  # a model of objects and arrays (each training step): no flattening
            return rank_of_layout(plan)
    paths, leaves, _ = tree.flatten(value)
    nested: dict = {}
    for path, leaf in zip(paths, leaves):
        node = nested
        for entry in path[:-1]:
            node = node.setdefault(entry, {})
        if path:
            node[path[-1]] = rank_of_argument(leaf)

    def freeze(d, held):
        fields = vars(held) if tree._is_object(held) and not isinstance(held, tuple) else None
        # (an integer field or a buffer, ``tree.BUFFERS``: read as a constant, with no derivative)
        constants = frozenset(k for k, v in fields.items()
                              if (tree._is_integer(v) or k in tree.constant_fields(held))
                              and not _data_descriptor(type(held), k)) if fields is not None else frozenset()
        def child(k):
            if fields is not None:
                return fields.get(k)
            return held[k] if isinstance(held, (list, tuple, dict)) else getattr(held, k, None)
        if fields is not None:  # (an object's fields in its order, one holding an object without
            # parameters included, as the one walk lays it out: `rank_of_layout`)
            d = {k: d[k] if k in d else {} for k, v in fields.items()
                 if k in d or tree._is_object(v) and k not in tree.buffer_names(held)}
        return tree.TreeRank(((k, freeze(v, child(k)) if isinstance(v, dict) else v) for k, v in d.items()),
                              constants=constants)
    return freeze(nested, value)


def rank_of_layout(plan):
    """``rank_of_argument`` of the object a ``tree.Layout`` was made from (the same
    ``TreeRank`` as flattening it gives), computed once per layout."""
    if plan.rank is None:
        def freeze(node):
            nested = dict(node.children)
            nested.update((key, dict(enumerate(children))) for key, _, children in node.sequences)
            entries = []
            for key, rank in node.ranks:
                if isinstance(rank, int):
                    entries.append((key, rank))
                elif isinstance(nested[key], dict):  # a list of layers: by position, each laid out
                    entries.append((key, tree.TreeRank((i, freeze(nested[key][i])) for i, _ in rank)))
                else:
                    entries.append((key, freeze(nested[key])))
            return tree.TreeRank(entries, constants=frozenset(k for k in node.nones
                                                                if not _data_descriptor(node.cls, k)))
        plan.rank = freeze(plan.root)
    return plan.rank


def _data_descriptor(cls, name) -> bool:
    """A property (or other data descriptor) of the class, which a read goes through
    whatever the instance holds under its name."""
    return hasattr(type(getattr(cls, name, None)), "__set__")
