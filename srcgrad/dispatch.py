"""What generated code calls to run a function known only when it runs (imported
there as ``dispatch``): a user function or method, differentiated by srcgrad and
compiled at its first call; a NumPy function through its rule; an operator, a
field or a property of an object; a callee checked for changes to its arguments.

Above the API (it makes ``GradientFunction``s) and the pipeline, unlike the
runtime helpers (``srcgrad/runtime/``), which the rules and passes use too.
"""
from __future__ import annotations

import functools
import inspect
import operator
import types
import weakref

import numpy as np

from . import anno, api, errors, higher, tree
from . import runtime as rt
from .nn.module import Module
from .pipeline import rank_of_argument
from .analysis.outside import Writes, stores, stores_refusal
from .rules import registry
from .transforms.anf import array_method
from .analysis.mutation import _MUTATING_METHODS, _mutated_parameters


_CHANGED: dict = {}  # code object -> the parameters its function changes in place


def unchanging(fn, filename: str, line: int, col: int, text: str, outside: bool = False):
    """``fn``, after checking that it does not change its arguments in place (and, with
    ``outside``, no array outside them either: its receiver's, a global's; ``"only"``:
    that alone, where no argument is being differentiated).

    How generated code calls a function known only at run time (a method, a callable
    passed in) whose result is not differentiated but whose arguments are: a change
    it makes to them would be invisible to the adjoints.

    Raises:
        UnsupportedSyntaxError: at the user's call, if ``fn``'s source writes into a
            parameter (``y[i] = v``, ``y += v``, ``y.append(v)``, through a view too),
            or, with ``outside``, into an array ``analysis/outside.py`` finds.
    """
    if outside:
        # The code passes `outside` where the backward sweep reads the receiver, or a
        # value read through a global, before this call: any array it changes may be one.
        written = Writes()(fn)
        if written:
            name = getattr(fn, "__qualname__", "the method")
            raise errors.UnsupportedSyntaxError(
                f"`{name}` writes into `{written[0][0]}` in place, which the backward sweep may read "
                "(it was read before this call): srcgrad cannot follow a change made inside another "
                "function", anno.Origin(filename, line, col, text),
                "read a copy made before the call (`np.copy(...)`), or pass the array to it and "
                "return the new one")
        if outside == "only":
            return fn
    target = getattr(fn, "__func__", fn)
    rule = registry.lookup(fn)
    if rule is not None and rule.zero_derivative:
        return fn  # (declared without derivative, its effect included: a specialisation's check)
    kept = outside != "only" and not rt.is_gradient_function(fn) and stores(fn)
    if kept:
        problem, advice = stores_refusal(getattr(fn, "__qualname__", None) or f"{type(fn).__name__}.__call__", "_", kept)
        raise errors.UnsupportedSyntaxError(problem, anno.Origin(filename, line, col, text), advice)
    if isinstance(fn, types.BuiltinMethodType) and not isinstance(fn.__self__, types.ModuleType) \
            and fn.__name__ in _MUTATING_METHODS:  # `self.buf.fill(x)`, `self.items.append(h)`
        raise errors.UnsupportedSyntaxError(
            f"`.{fn.__name__}(...)` changes a {type(fn.__self__).__name__} in place, and is given a value "
            "being differentiated: srcgrad does not follow a change to a value it did not make",
            anno.Origin(filename, line, col, text),
            "build the new value in a local name and use it from there, or return it")
    if not callable(target) or isinstance(target, type) or registry.is_numpy(target):
        return fn
    if not (isinstance(target, types.FunctionType) or isinstance(getattr(type(target), "__call__", None),
                                                                 types.FunctionType)):
        return fn
    bound = isinstance(fn, types.MethodType) or not isinstance(target, types.FunctionType)
    inner = target if isinstance(target, types.FunctionType) else type(target).__call__
    changed = _CHANGED.get(inner.__code__)
    if changed is None:
        changed = _CHANGED[inner.__code__] = _mutated_parameters(inner)
    receiver = {inner.__code__.co_varnames[0]} if bound and inner.__code__.co_argcount else set()
    if changed is True or set(changed) - receiver:
        name = getattr(inner, "__qualname__", "the function")
        raise errors.UnsupportedSyntaxError(
            f"`{name}` changes its arguments in place, and is given a value being "
            "differentiated: srcgrad cannot follow a change made inside another function",
            anno.Origin(filename, line, col, text),
            f"in `{name}`, write into a copy (`y = np.copy(y)`) and return the new value, "
            "and assign it here")
    return fn


gradient_pullback = higher.gradient_pullback  # (what the backward sweep of code calling srcgrad.grad(f) calls)


# `type(t)(items)` of a list or tuple `t` (a pytree helper rebuilding what it was given): the
# rule of `list(xs)` / `tuple(xs)`, each item's adjoint its own.
_SEQUENCE_TYPES = {list: rt.sequence_of, tuple: rt.as_tuple}


def vjp_call(fn, wrt, /, *args, **kwargs):
    if (fn is list or fn is tuple) and len(args) == 1 and not kwargs:
        fn = _SEQUENCE_TYPES[fn]
    objects = _holding_kept(fn, wrt, args, kwargs) if rt.KEPT else None
    value, pullback = _vjp_call(fn, wrt, *args, **kwargs)
    if objects:  # (a store of this computation kept with no adjoint may be read back here)
        pullback = rt.check_kept_pullback(pullback, fn, wrt, objects)
    return value, pullback


def _holding_kept(fn, wrt, args, kwargs) -> list:
    """``[(position in wrt, obj, {name: where})]``: the call's differentiated objects (its
    receiver, its arguments) holding fields ``rt.kept`` recorded."""
    found = []
    for position, w in enumerate(wrt):
        if w == "self":
            obj = getattr(fn, "__self__", fn)
        else:
            obj = args[w] if isinstance(w, int) and w < len(args) else kwargs.get(w)
        fields = rt.kept_fields(obj) if obj is not None else {}
        if fields:
            found.append((position, obj, fields))
    differentiated = {id(obj) for _, obj, _ in found}
    for obj in list(args) + list(kwargs.values()):
        fields = rt.kept_fields(obj) if id(obj) not in differentiated else {}
        if fields:  # (not differentiated here: a read of the field in the call would be a constant)
            name, where = next(iter(fields.items()))
            rt.refuse_read_back(obj, name, where, f"`{getattr(fn, '__qualname__', 'the call')}`")
    return found


def _unwrapped_partial(fn, wrt, args, kwargs):
    """``functools.partial(f, *bound, **kw)`` called with ``args``: ``(f, wrt, args, kwargs)`` of
    the call of ``f`` it makes (the positions shifted past its bound arguments), or None.  A
    partial whose bound arguments hold values being differentiated (``"self"`` in ``wrt``)
    is left to the callable-object path, which refuses it by name."""
    if type(fn) is not functools.partial or "self" in wrt:
        return None
    shift = len(fn.args)
    return (fn.func, tuple(w + shift if isinstance(w, int) else w for w in wrt),
            fn.args + tuple(args), {**fn.keywords, **kwargs})


def _vjp_call(fn, wrt, /, *args, **kwargs):
    """Call ``fn(*args, **kwargs)`` and return ``(value, pullback)``.

    How generated code calls the user's own functions (and callables known only
    at run time).  ``wrt`` lists the positions/keywords of the arguments that
    need adjoints, and ``"self"`` for the callable object itself (a model whose
    parameters are differentiated); ``pullback(value_bar)`` returns their
    adjoints (one value for one entry, else a tuple).  A function or method is
    differentiated by srcgrad itself (compiled on first use, cached); a
    primitive with a derivative rule is applied through the rule.
    """
    if kwargs == {} and type(fn) is types.FunctionType:  # the common case, kept short
        transformed = api.VJPS.get((fn, wrt, None))
        # (A function with *args/**kwargs is called with its arguments packed: not here.)
        if transformed is not None and not transformed._variadic and rt.array_module(*args) is np:
            program = transformed._cache.get(tuple(map(rank_of_argument, args)))
            if program is not None:
                value, pullback = program(*args)
                return (value, api.tuple_pullback(pullback, value)) if isinstance(value, tuple) \
                    else (value, pullback)
    if rt.is_gradient_function(fn):  # srcgrad.grad(f) called in the function: reverse over reverse
        return higher.gradient_vjp(fn, wrt, args, kwargs)
    partial = _unwrapped_partial(fn, wrt, args, kwargs)
    if partial is not None:
        return _vjp_call(*partial[:2], *partial[2], **partial[3])
    if "self" in wrt and _plain_method(fn) and tree._has_params(fn.__self__):
        _refuse_bound_method(fn)
    receiver = ()
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, np.ndarray) or type(owner).__module__.split(".")[0] == "cupy" \
            and hasattr(owner, "ndim"):
        # x.sum(...) on an array whose kind was unknown at compile time: NumPy's sum.
        fn, args = array_method(fn.__name__, owner, args)
        wrt = tuple(0 if w == "self" else w + 1 if isinstance(w, int) else w for w in wrt)
    if isinstance(owner, dict) and getattr(fn, "__name__", None) in _DICT_METHODS:
        return _dict_method_vjp(owner, fn.__name__, wrt, args, kwargs)
    sequences = [isinstance(a, (tuple, list)) for a in args] if len(args) == 2 and not kwargs else ()
    if fn is operator.add and sequences and all(sequences):
        # `a + b`, `[h] * n` of values whose kind was unknown when compiling (what a recursive
        # call returned): Python's join or repetition of sequences, with their own rules
        # (a list times an array is NumPy's product, below).
        fn = rt.concatenated
    elif fn is operator.mul and sequences and any(sequences) and type(args[sequences.index(False)]) is int:
        if sequences[1]:
            fn, args, wrt = rt.repeated, args[::-1], tuple(1 - w if isinstance(w, int) else w for w in wrt)
        else:
            fn = rt.repeated
    if isinstance(fn, types.MethodType) and (rule := registry.lookup(fn)) is not None and rule.differentiable:
        return _rule_vjp(rule, fn, wrt, args, kwargs)  # a method with a rule of its own: rng.normal
    if isinstance(fn, types.MethodType):
        fn, receiver = fn.__func__, (fn.__self__,)
    elif not isinstance(fn, types.FunctionType) and isinstance(getattr(type(fn), "__call__", None),
                                                               types.FunctionType):
        fn, receiver = _called(fn)
    if "self" in wrt and not receiver:
        return _selfless_vjp(fn, wrt, args, kwargs)
    if receiver and fn in _PARAMETER_LISTS:  # model.parameters(): the model's own arrays
        return _parameters_vjp(fn, receiver[0], wrt, args, kwargs)
    rule = registry.lookup(fn)
    if rule is not None and rule.differentiable and receiver:  # a method that is a custom_adjoint:
        # its rule takes the receiver as its first parameter (`self`), as the method does
        wrt = tuple(0 if w == "self" else w + 1 if isinstance(w, int) else w for w in wrt)
        return _rule_vjp(rule, fn, wrt, receiver + args, kwargs)
    if rule is not None and rule.differentiable:
        return _rule_vjp(rule, fn, wrt, args, kwargs)
    if rule is not None:  # no derivative (a random draw, a constructor): zero adjoints
        given = [w for w in wrt if w != "self"]  # (the receiver: a generator, no derivative)
        if given and not rule.zero_derivative:
            raise errors.NoDerivativeRuleError(
                f"`{rule.name}` is given a value being differentiated (argument {given[0]!r}), and "
                "srcgrad has no derivative rule for it", None,
                "compute the value from NumPy functions srcgrad differentiates, or register a rule "
                "with srcgrad.defadjoint")
        value = fn(*receiver, *args, **kwargs)
        zeros = tuple({} if w == "self" else rt.zeros_like(args[w] if isinstance(w, int) else kwargs[w])
                      for w in wrt)
        return value, lambda value_bar: zeros if len(zeros) > 1 else zeros[0]
    if "self" in wrt and not receiver:
        raise TypeError(f"{fn!r} has no parameters of its own to differentiate")
    names = tuple(0 if w == "self" else w + len(receiver) if isinstance(w, int) else w for w in wrt)
    # The callee runs where its data lives: CuPy arrays in, the CuPy backend.
    backend = "cupy" if rt.array_module(*args, *kwargs.values()) is not np else None
    transformed = api.vjp_function(fn, names if receiver else wrt, backend)
    value, pullback = transformed(*receiver, *args, **kwargs)
    if isinstance(value, tuple):
        return value, api.tuple_pullback(pullback, value)
    return value, pullback


_PARAMETER_LISTS = {Module.parameters: False, Module.named_parameters: True}  # -> named


def _parameters_vjp(fn, model, wrt, args, kwargs):
    """``model.parameters()`` / ``model.named_parameters()`` with its pullback: the
    adjoint of the list (of arrays, or of ``(name, array)`` pairs) goes back to the
    model's parameters by path (a sparse adjoint of the model)."""
    if wrt != ("self",):
        raise TypeError(f"srcgrad differentiates {fn.__name__}() with respect to the model only")
    value = fn(model, *args, **kwargs)
    named = _PARAMETER_LISTS[fn]
    paths = tree.flatten(model)[0]

    def pullback(value_bar):
        sparse: dict = {}
        for i, path in enumerate(paths):
            g = rt.item_of(value_bar, i)
            g = rt.item_of(g, 1) if named else g
            if g is None or not path:
                continue
            node = sparse
            for entry in path[:-1]:
                node = node.setdefault(entry, {})
            node[path[-1]] = rt.add(node.get(path[-1]), g)
        return sparse
    return value, pullback


_DICT_METHODS = ("keys", "values", "items", "get")


def _dict_method_vjp(d, name, wrt, args, kwargs):
    """``d.keys()``, ``d.values()``, ``d.items()``, ``d.get(key, default)`` on a dict
    known only at run time, with ``(value, pullback)``.  The views come back as
    tuples (iterated, measured and tested alike; the generated loop indexes them);
    the pullback gives ``d`` the adjoints of the values read (a sparse dict), and
    ``get``'s default its adjoint where the key was missing."""
    keys = list(d)
    if name == "get":
        key = args[0] if args else kwargs["key"]
        default = args[1] if len(args) > 1 else kwargs.get("default")
        value = d.get(key, default)
    else:
        value = tuple(getattr(d, name)())

    def pullback(value_bar):
        if name == "keys":
            own = {}
        elif name == "get":
            own = {key: value_bar} if key in d and value_bar is not None else {}
        else:
            own = {}
            for i, k in enumerate(keys):
                part = rt.item_of(value_bar, i)
                part = rt.item_of(part, 1) if name == "items" else part
                if part is not None:
                    own[k] = part
        out = []
        for w in wrt:
            if w == "self":
                out.append(own)
            elif name == "get" and w in (1, "default") and key not in d:
                out.append(value_bar)
            else:  # the key, or a default that was not used
                out.append(rt.zeros_like(default) if w in (1, "default") else 0.0)
        return tuple(out) if len(out) > 1 else out[0]
    return value, pullback


def jvp_call_tangent(fn, wrt, dots, args, args_dot, dots_dot, where="?"):
    """The tangent of ``jvp_call(fn, wrt, dots, *args)``'s ``(value, tangent)`` along the
    arguments' tangents ``args_dot`` and the tangents' own ``dots_dot``: forward mode once
    more, over the code forward mode generated for ``fn`` (``higher.program_jvp``).  How
    forward mode over forward-mode code differentiates a call that code dispatched when it
    ran (a fourth derivative through a loop, jvp of jvp through a function not inlined).

    Raises:
        UnsupportedSyntaxError: ``fn`` is not a plain function (a method, a gradient function,
            a primitive): not derived yet.
    """
    if type(fn) is not types.FunctionType or rt.is_gradient_function(fn) or registry.lookup(fn) is not None \
            or not all(isinstance(w, int) for w in wrt):
        raise errors.UnsupportedSyntaxError(
            f"srcgrad does not differentiate again the forward mode it generated for "
            f"`{getattr(fn, '__qualname__', fn)}`, a call dispatched when the code runs at {where} (a "
            "method, a gradient function or a primitive: a derivative of this order through it)", None,
            "take this derivative by central differences of the one before")
    along, along_dot = [None] * len(args), [None] * len(args)
    for w, d, dd in zip(wrt, dots, dots_dot):
        along[w], along_dot[w] = d, dd
    code = higher._jvp_code(fn, tuple(args), tuple(along))
    return higher.program_jvp(code, (tuple(args), tuple(along)), (tuple(args_dot), tuple(along_dot)))


def jvp_call(fn, wrt, dots, /, *args, _where="?", **kwargs):
    """Call ``fn(*args, **kwargs)`` and return ``(value, tangent)``: how forward-mode
    code calls the user's own functions and callables known only at run time.

    ``wrt`` lists the positions/keywords of the arguments that have tangents
    (``"self"`` for the callable object itself), ``dots`` their tangents.  A function
    or method runs its own forward mode (compiled at its first call, cached); a
    primitive with a tangent rule function runs it.

    Raises:
        NoDerivativeRuleError: a primitive reached here without a tangent rule
            function (forward mode does not derive one at run time yet).
    """
    if (fn is list or fn is tuple) and len(args) == 1 and not kwargs:
        fn = _SEQUENCE_TYPES[fn]
    if kwargs == {} and type(fn) is types.FunctionType:  # the common case, kept short
        transformed = api.JVPS.get((fn, wrt, None))
        if transformed is not None and not transformed._variadic and rt.array_module(*args) is np:
            program = transformed._cache.get(tuple(map(rank_of_argument, args)))
            if program is not None:
                return program(*args, *dots)
    if rt.is_gradient_function(fn):  # srcgrad.grad(f) called in the function: forward over reverse
        return higher.gradient_jvp(fn, wrt, dots, args, kwargs)
    partial = _unwrapped_partial(fn, wrt, args, kwargs)
    if partial is not None:
        return jvp_call(partial[0], partial[1], dots, *partial[2], _where=_where, **partial[3])
    if "self" in wrt and _plain_method(fn) and tree._has_params(fn.__self__):
        _refuse_bound_method(fn)
    receiver = ()
    owner = getattr(fn, "__self__", None)
    if isinstance(owner, dict) and getattr(fn, "__name__", None) in _DICT_METHODS:
        return _dict_method_jvp(owner, fn.__name__, wrt, dots, args, kwargs)
    if isinstance(fn, types.MethodType) and registry.lookup(fn) is None and not isinstance(owner, type):
        fn, receiver = fn.__func__, (owner,)
    elif not isinstance(fn, (types.FunctionType, types.MethodType)) and registry.lookup(fn) is None \
            and isinstance(getattr(type(fn), "__call__", None), types.FunctionType):
        fn, receiver = _called(fn)
    if isinstance(owner, np.ndarray) or type(owner).__module__.split(".")[0] == "cupy" and hasattr(owner, "ndim"):
        # x.clip(...) on an array whose kind was unknown at compile time: NumPy's clip, the
        # array its first argument (so its tangent, "self", is not taken for a callable's own).
        fn, args = array_method(fn.__name__, owner, args)
        wrt = tuple(0 if w == "self" else w + 1 if isinstance(w, int) else w for w in wrt)
    elif "self" in wrt and not receiver:
        return _selfless_jvp(fn, wrt, dots, args, kwargs, _where)
    rule = registry.lookup(fn)
    if rule is not None and receiver:  # a method that is a custom_adjoint: the receiver is its `self`
        wrt = tuple(0 if w == "self" else w + 1 if isinstance(w, int) else w for w in wrt)
        return _rule_jvp(rule, fn, wrt, dots, receiver + args, kwargs, _where)
    if rule is not None:
        return _rule_jvp(rule, fn, wrt, dots, args, kwargs, _where)
    if "self" in wrt and not receiver:
        raise TypeError(f"{fn!r} has no parameters of its own to differentiate")
    names = tuple(0 if w == "self" else w + len(receiver) if isinstance(w, int) else w for w in wrt)
    backend = "cupy" if rt.array_module(*args, *kwargs.values()) is not np else None
    transformed = api.jvp_function(fn, names, backend)
    return transformed(*receiver, *args, dots if len(dots) > 1 else dots[0], **kwargs)


def jvp_method(obj, name, wrt, dots, /, *args, _where="?", **kwargs):
    """``obj.name(*args)`` and its tangent (:func:`jvp_call`), ``"self"`` in ``wrt`` with
    ``obj``'s tangent: a method's receiver is ``obj``, but a callable stored in ``obj``
    (a layer of a model) is its own receiver, whose tangent is the same field of ``obj``'s
    (as :func:`vjp_method` puts the layer's adjoint in ``obj``'s at ``name``)."""
    attr = getattr(obj, name)
    if "self" in wrt:
        key = _stored_under(obj, name, attr)
        if key is not None:
            at = wrt.index("self")
            dots = dots[:at] + (jvp_field(obj, key, dots[at], _where)[1],) + dots[at + 1:]
        if _plain_method(attr):  # (as vjp_method)
            spec = tuple(0 if w == "self" else w + 1 if isinstance(w, int) else w for w in wrt)
            return jvp_call(attr.__func__, spec, dots, attr.__self__, *args, _where=_where, **kwargs)
    return jvp_call(attr, wrt, dots, *args, _where=_where, **kwargs)


def jvp_field(obj, name, obj_dot, where="?"):
    """``obj.name`` and its tangent: a field's tangent is the same field of ``obj_dot``
    (the tangent of an object is an object of its class); a property's getter runs its
    own forward mode with respect to ``obj``.  A field without gradient (a count, a
    flag, integer indices, a container of them: ``grad`` gives it None) has a zero
    tangent, whatever ``obj_dot`` holds there: a tangent made as a copy of the model,
    or by ``jacfwd``, holds the primal's ``stride = 2``."""
    found = inspect.getattr_static(type(obj), name, None)
    if isinstance(found, property) and found.fget is not None:
        return jvp_call(found.fget, (0,), (obj_dot,), obj, _where=where)
    value = getattr(obj, name)
    if tree._is_integer(value) or isinstance(value, (list, tuple, dict)) and not tree._has_params(value):
        return value, rt.zeros_tangent(value)
    return value, getattr(obj_dot, name)


def _rule_jvp(rule, fn, wrt, dots, args, kwargs, where):
    """``fn(*args, **kwargs)`` and its tangent from its rule, when it runs: a tangent
    rule function, or the derivations of ``registry.TANGENTS`` on values (a pointwise
    rule's adjoint given its varying inputs broadcast to the output's shape, so that its
    ``unbroadcast`` keeps them)."""
    value = fn(*args, **kwargs)
    if not rule.differentiable:
        if rule.zero_derivative:
            return value, rt.zeros_tangent(value)
        raise errors.NoDerivativeRuleError(
            f"`{rule.name}` is given a value with a tangent at {where}, and srcgrad has no derivative "
            "rule for it", None, "compute the value from NumPy functions srcgrad differentiates")
    names = list(rule.signature.parameters)
    param = {(names[w] if isinstance(w, int) else w): (w, d) for w, d in zip(wrt, dots)}
    for p in [p for p in param if p not in rule.diff_params]:
        if p not in rule.discrete_params and p not in rule.zero_params:
            # (`ord=p` with a tangent: a derivative the rule lacks; a `zero=` one has none)
            raise errors.NoDerivativeRuleError(
                f"`{rule.name}` is given a value with a tangent as `{p}` at {where}, and its rule has no "
                f"derivative with respect to `{p}`", None, f"pass a constant `{p}`")
        del param[p]  # (a dtype or an axis handed a "tangent" by the code around it: none there)
    bound = rule.signature.bind(*args, **kwargs)
    bound.apply_defaults()

    def replaced(changes):
        new_args, new_kwargs = list(args), dict(kwargs)
        for w, v in changes:
            if isinstance(w, int):
                new_args[w] = v
            else:
                new_kwargs[w] = v
        return new_args, new_kwargs
    how = rule.tangent
    if callable(how):
        # A tangent rule's `is_constant(x_dot)` means "no tangent": a tangent that is a
        # Python number goes in as NumPy's (as `_rule_vjp` does for arguments).
        return value, how(value, **bound.arguments, **{
            p + "_dot": np.array(d, dtype=np.float64) if _python_number(d) else d for p, (_, d) in param.items()})
    if how == "linear":
        new_args, new_kwargs = replaced(param.values())
        return value, fn(*new_args, **new_kwargs)
    if how == "bilinear":
        terms = [fn(*a, **k) for a, k in (replaced([change]) for change in param.values())]
        return value, functools.reduce(operator.add, terms)
    if how in ("pointwise", "reduction"):
        total = 0.0
        for p, (_, d) in param.items():
            arguments = dict(bound.arguments)
            if how == "pointwise":
                arguments[p] = rt.broadcast_tangent(arguments[p], value)  # (a new array of the output's shape)
                seed = rt.broadcast_tangent(d, value)
            else:
                seed = rt.array_module(value).ones_like(value)
            out = rule.adjoint(seed, value, **arguments)
            out = out[rule.diff_params.index(p)] if len(rule.diff_params) > 1 else out
            if out is None:
                continue
            total = total + (out if how == "pointwise" else rt.reduction_tangent(
                out, d, arguments.get("axis"), arguments.get("keepdims", False)))
        return value, rt.broadcast_tangent(total, value) if np.ndim(total) else total + rt.zeros_tangent(value)
    raise errors.NoDerivativeRuleError(
        f"forward mode has no tangent rule for `{rule.name}` (called at {where})", None,
        "register one with srcgrad.deftangent, or use srcgrad.vjp")


def _called(obj):
    """``(function, receiver)`` that calling ``obj`` runs: its class's ``__call__`` (or
    ``forward`` for an ``nn.Module``) with ``obj`` as ``self`` -- unless ``obj`` holds a
    ``forward`` of its own (set on the instance), which ``Module.__call__`` then runs."""
    if getattr(type(obj).__call__, "__srcgrad_calls_forward__", False) and "forward" in vars(obj):
        own = vars(obj)["forward"]
        if isinstance(own, types.MethodType) and own.__self__ is obj:
            return own.__func__, (obj,)
        return own, ()  # a function stored on the instance: obj is not its argument
    return _call_method(type(obj)), (obj,)


def _selfless_vjp(fn, wrt, args, kwargs):
    """``vjp_call`` of a plain function where ``wrt`` asks for ``"self"``: a function has
    no parameters of its own (it was stored in a model, ``self.act = relu``), so its
    adjoint is the empty structure ``{}``; the other entries as usual."""
    if _holds_params(fn):  # (a lambda in a model's list of hooks reading a layer: its adjoint lost)
        _refuse_held_callable(fn)
    _refuse_container_method(fn)
    position, rest = wrt.index("self"), tuple(w for w in wrt if w != "self")
    if not rest:
        return fn(*args, **kwargs), lambda value_bar: {}
    value, pullback = vjp_call(fn, rest, *args, **kwargs)

    def pull(value_bar):
        adjoints = list(pullback(value_bar)) if len(rest) > 1 else [pullback(value_bar)]
        adjoints.insert(position, {})
        return tuple(adjoints)
    return value, pull


def _dict_method_jvp(d, name, wrt, dots, args, kwargs):
    """``_dict_method_vjp``'s forward mode: the method applied to ``d`` and to its
    tangent (a dict of the values' tangents; zeros for the values it lacks), and
    ``get``'s default's tangent where the key is missing."""
    given = dict(zip(wrt, dots))
    d_dot = given.get("self")

    def tangent_of(key, value):
        t = d_dot.get(key) if isinstance(d_dot, dict) else None
        return rt.zeros_tangent(value) if t is None else t
    if name == "get":
        key = args[0] if args else kwargs["key"]
        default = args[1] if len(args) > 1 else kwargs.get("default")
        if key in d:
            return d[key], tangent_of(key, d[key])
        default_dot = given.get(1, given.get("default"))
        return default, rt.zeros_tangent(default) if default_dot is None else default_dot
    if name == "keys":
        value = tuple(d)
        return value, rt.zeros_tangent(value)
    if name == "values":
        return tuple(d.values()), tuple(tangent_of(k, v) for k, v in d.items())
    return tuple(d.items()), tuple((0.0, tangent_of(k, v)) for k, v in d.items())


def _selfless_jvp(fn, wrt, dots, args, kwargs, where):
    """``jvp_call`` of a plain function where ``wrt`` has ``"self"`` (see ``_selfless_vjp``):
    the function's own tangent does not reach its output."""
    if _holds_params(fn):
        _refuse_held_callable(fn)
    _refuse_container_method(fn)
    rest = [(w, d) for w, d in zip(wrt, dots) if w != "self"]
    if not rest:
        value = fn(*args, **kwargs)
        return value, rt.zeros_tangent(value)
    return jvp_call(fn, tuple(w for w, _ in rest), tuple(d for _, d in rest), *args, _where=where, **kwargs)


def _call_method(cls):
    """What calling an instance of ``cls`` runs: ``forward`` for an ``nn.Module``."""
    call = cls.__call__
    if getattr(call, "__srcgrad_calls_forward__", False):
        forward = getattr(cls, "forward", None)
        if forward is None or getattr(forward, "__srcgrad_abstract__", False):
            raise TypeError(f"{cls.__name__} has no forward method: define "
                            f"`def forward(self, x): ...` in class {cls.__name__}")
        return forward
    return call


def vjp_method(obj, name, wrt, /, *args, **kwargs):
    """``obj.name(*args)`` with ``(value, pullback)``; ``"self"`` in ``wrt`` asks for
    ``obj``'s adjoint, whether ``name`` is a method of ``obj`` or a callable
    stored in it (a layer of a model)."""
    attr = getattr(obj, name)
    if "self" not in wrt:
        return vjp_call(attr, wrt, *args, **kwargs)
    key = _stored_under(obj, name, attr)
    if _plain_method(attr):
        # A method (of obj, or of a layer obj holds): its receiver is its first argument, whose
        # adjoint goes to obj (key None) or to the field holding the layer.
        spec = tuple(0 if w == "self" else w + 1 if isinstance(w, int) else w for w in wrt)
        value, pullback = vjp_call(attr.__func__, spec, attr.__self__, *args, **kwargs)
    else:
        value, pullback = vjp_call(attr, wrt, *args, **kwargs)
    if key is None:
        return value, pullback  # a method: its own receiver is obj
    position = wrt.index("self")

    def pull(value_bar):
        adjoints = pullback(value_bar)
        if len(wrt) == 1:
            return {key: adjoints}
        return tuple({key: a} if i == position else a for i, a in enumerate(adjoints))
    return value, pull


def _stored_under(obj, name, attr):
    """The field of ``obj`` whose adjoint ``obj.name(...)``'s receiver gives (None: a method
    of ``obj`` itself, whose receiver is ``obj``); refused where the callable reads the
    model's parameters some other way (:func:`_holds_params`)."""
    if getattr(attr, "__self__", None) is obj:  # (a bound method, C ones too: x.reshape)
        return None
    key = _field_key(obj, name, attr)
    function = _function_like(attr) and not (isinstance(attr, types.MethodType) and key is not None)
    if key is None and (tree._has_params(attr) or _function_like(attr) and _holds_params(attr)) \
            or key is not None and function and _holds_params(attr):
        _refuse_held(obj, name)
    return name if key is None else key


def _held(fn) -> list:
    """What the function-like ``fn`` reads besides its arguments: a partial's arguments, a
    bound method's receiver, a function's closure cells, defaults and the globals it names,
    a weak reference's referent."""
    held = []
    while isinstance(fn, functools.partial):
        held += list(fn.args) + list(fn.keywords.values())
        fn = fn.func
    if isinstance(fn, types.MethodType):
        held.append(fn.__self__)
        fn = fn.__func__
    if isinstance(fn, weakref.ref):
        held.append(fn())
    if isinstance(fn, types.FunctionType):
        held += [_contents(c) for c in fn.__closure__ or ()]
        held += list(fn.__defaults__ or ()) + list((fn.__kwdefaults__ or {}).values())
        held += [fn.__globals__[n] for n in fn.__code__.co_names if n in fn.__globals__]
    return held


def _holds_params(fn) -> bool:
    """Whether ``fn`` (a function, partial, bound method or weak reference, not an object
    with fields) reads float arrays, or objects or containers holding them, other than
    through its arguments: a layer it captured, a model a global names."""
    def param_like(v):
        if isinstance(v, np.ndarray):
            return v.dtype.kind == "f"
        if isinstance(v, (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType, float, int, str)):
            return False
        return tree._has_params(v)
    return any(param_like(v) for v in _held(fn))


def _function_like(fn) -> bool:
    return isinstance(fn, (types.FunctionType, functools.partial, types.MethodType, weakref.ref))


def _field_key(obj, name, attr):
    """Under which of ``obj``'s fields the adjoint of ``obj.name``'s receiver goes: ``name``
    for a layer (or function) stored there; for a bound method of a layer (``self.step =
    self.lin.forward``) or a layer a property returns, the field holding that layer; None
    where no field holds it."""
    fields = vars(obj) if hasattr(obj, "__dict__") else {}
    target = attr.__self__ if isinstance(attr, types.MethodType) else attr
    if target is attr and fields.get(name) is attr:
        return name
    return next((k for k, v in fields.items() if v is target), None)


def _refuse_held_callable(fn):
    name = getattr(fn, "__qualname__", None) or type(fn).__name__
    raise errors.UnsupportedSyntaxError(
        f"`{name}`, held by a model being differentiated, reads parameters other than through its "
        "arguments (a closure, a global, a partial's or bound method's receiver): srcgrad does not "
        "follow the values it reads that way, and their gradient would be lost", None,
        "pass what it reads as arguments, or make it a method of the model")


def _refuse_container_method(fn):
    """A method of a list, tuple, dict or set holding values being differentiated, called
    where the compiler did not know the receiver's kind (``ys.pop()`` on a list known only
    when it runs): its receiver is an argument whose derivative reaches the result, which
    ``_selfless_vjp`` would drop.  Refused, never silently zero."""
    owner = getattr(fn, "__self__", None)
    if isinstance(fn, types.BuiltinMethodType) and isinstance(owner, (list, tuple, dict, set)):
        raise errors.UnsupportedSyntaxError(
            f"`.{fn.__name__}()` of a {type(owner).__name__} that holds values being differentiated, "
            "where srcgrad knows the list only when the code runs: srcgrad does not differentiate "
            "this method there", None,
            "read the items by index (`xs[-1]`, then `xs = xs[:-1]` for a pop), or build the list "
            "with a display or appends in this function")


def _plain_method(fn) -> bool:
    """A bound method of the user's Python class, without a rule of its own and not
    ``model.parameters()`` (which the dispatch reads as the model's arrays)."""
    return type(fn) is types.MethodType and fn.__func__ not in _PARAMETER_LISTS and registry.lookup(fn) is None


def _refuse_bound_method(fn):
    """A bound method of a layer kept apart from the layer (``steps = [self.a.forward, ...]``,
    ``f = self.forward``) and called: its receiver's adjoint has no field to go to."""
    raise errors.UnsupportedSyntaxError(
        f"`{fn.__qualname__}` is called as a bound method kept apart from its "
        f"{type(fn.__self__).__name__} (in a list, or a name of its own), which holds values being "
        "differentiated: srcgrad cannot put their gradient back in the model from there", None,
        "call the method on the layer itself (`self.a.forward(h)`), or keep the layers in a list and call "
        "them (`self.steps = [self.a, ...]`, `step(h)`)")


def _refuse_held(obj, name):
    raise errors.UnsupportedSyntaxError(
        f"`.{name}` of the {type(obj).__name__} being differentiated is reached other than as a layer "
        "stored in it (a function, partial, bound method, property or weak reference that reads "
        "parameters through a closure, a global or its own receiver): srcgrad does not follow the "
        "values it reads that way, and their gradient would be lost", None,
        f"store the layer itself in an attribute and call it (`self.{name} = layer`, `self.{name}(x)`), "
        "or define a method that calls it (`def step(self, h): return self.lin(h)`)")


def _contents(cell):
    try:
        return cell.cell_contents
    except ValueError:  # (a cell not yet bound)
        return None


_REFLECTED = {"add": "radd", "sub": "rsub", "mul": "rmul", "truediv": "rtruediv", "matmul": "rmatmul",
              "pow": "rpow"}


def vjp_operator(name, wrt, *operands, where="?"):
    """``a * b`` (``name``: ``"mul"``) where an operand's kind was unknown when
    compiling: NumPy's rule for arrays and numbers; for an object of a class of
    yours, its own ``__mul__`` (or the other's ``__rmul__``), differentiated as a
    method is -- never NumPy's rule applied to an object that only looks like it.

    Raises:
        srcgrad.errors.UnsupportedSyntaxError: an array with an object NumPy would
            map over element by element (its class does not set ``__array_ufunc__ = None``).
        TypeError: no class defines the operator (as Python would).
    """
    op = getattr(operator, name)
    if all(_is_array_value(x) or isinstance(x, (bool, list, tuple, dict)) for x in operands):  # (True + x)
        return vjp_call(op, wrt, *operands)
    if len(operands) == 1:
        return vjp_method(operands[0], f"__{name}__", ("self",) if wrt else ())
    a, b = operands
    order = [(0, f"__{name}__"), (1, f"__{_REFLECTED[name]}__")]
    if type(b) is not type(a) and isinstance(b, type(a)) and hasattr(type(b), order[1][1]):
        order.reverse()  # Python asks a subclass's reflected method first
    for position, dunder in order:
        obj, other = operands[position], operands[1 - position]
        if _is_array_value(obj):
            if isinstance(obj, np.ndarray) and getattr(type(other), "__array_ufunc__", 0) is not None:
                raise errors.UnsupportedSyntaxError(
                    f"srcgrad cannot differentiate `{name}` of an array and a {type(other).__name__} (at "
                    f"{where}): NumPy applies it element by element to an object array", None,
                    f"set `__array_ufunc__ = None` in {type(other).__name__} so that its own method runs, "
                    "or write the operation with arrays")
            continue  # NumPy and Python numbers defer to the object's reflected method
        if getattr(type(obj), dunder, None) is None:
            continue
        spec = tuple("self" if w == position else 0 for w in wrt)
        value, pullback = vjp_method(obj, dunder, spec, other)
        if value is not NotImplemented:
            return value, pullback
    raise TypeError(f"unsupported operand type(s) for {name}: '{type(a).__name__}' and '{type(b).__name__}'")


def vjp_field(obj, name, where="?"):
    """``obj.name`` with ``(value, pullback)``, ``pullback`` giving ``obj``'s adjoint:
    for a property (or ``functools.cached_property``), its getter's own reverse mode;
    for a plain field, ``{name: value_bar}``; for a method read as a value, the method's
    adjoint is its receiver's; for an attribute ``__getattr__`` finds, that method's.

    Raises:
        srcgrad.errors.UnsupportedSyntaxError: another kind of descriptor, or a class
            with its own ``__getattribute__`` (``where``: the user's file and line).
    """
    if _is_array_value(obj):
        return _array_attribute(obj, name, where)
    found = rt.kept_read(obj, name) if rt.KEPT else None
    if found is not None:  # (stored by an earlier call with no adjoint)
        rt.refuse_read_back(obj, found[0], found[1], f"the read of `.{name}` at {where}")
    attribute = None
    for klass in type(obj).__mro__:
        if name in vars(klass):
            attribute = vars(klass)[name]
            break
    getter = attribute.fget if isinstance(attribute, property) else \
        attribute.func if isinstance(attribute, functools.cached_property) else None
    if getter is not None:
        value, pullback = vjp_call(getter, (0,), obj)
        return getattr(obj, name) if isinstance(attribute, functools.cached_property) else value, pullback
    if type(obj).__getattribute__ not in (object.__getattribute__, types.SimpleNamespace.__getattribute__,
                                          type.__getattribute__) and not isinstance(obj, tuple):
        raise errors.UnsupportedSyntaxError(
            f"srcgrad cannot differentiate reading `{name}` of a {type(obj).__name__} (at {where}): its "
            "class defines __getattribute__, which srcgrad does not follow", None,
            "read the value through a @property or a method, or pass it in as an argument")
    fields = getattr(obj, "__dict__", {})
    if attribute is None and name not in fields and hasattr(type(obj), "__getattr__"):
        return vjp_call(type(obj).__getattr__, (0,), obj, name)  # a delegating wrapper: its own code
    value = getattr(obj, name)
    if isinstance(obj, tuple) and name in getattr(type(obj), "_fields", ()):
        return value, lambda value_bar: {name: value_bar}  # a named tuple's field (by name)
    if isinstance(attribute, types.FunctionType) and name not in getattr(obj, "__dict__", ()):
        return value, lambda value_bar: value_bar  # a bound method: its adjoint is obj's
    if attribute is not None and hasattr(attribute, "__get__") and name not in getattr(obj, "__dict__", ()) \
            and not isinstance(attribute, (staticmethod, classmethod, type)):
        raise errors.UnsupportedSyntaxError(
            f"srcgrad cannot differentiate reading `{name}` of a {type(obj).__name__} (at {where}): it is "
            f"computed by a {type(attribute).__name__} descriptor, which srcgrad does not follow", None,
            "write it as a @property or a method")
    return value, lambda value_bar: {name: value_bar}


_NONDIFF_ARRAY_ATTRIBUTES = {"shape", "ndim", "size", "dtype", "itemsize", "nbytes", "strides"}


def _is_array_value(obj) -> bool:
    """An array or number of NumPy or CuPy (whose attributes are NumPy's: ``.T``, ``.shape``)."""
    return isinstance(obj, (np.ndarray, np.generic, int, float, complex)) and not isinstance(obj, bool) \
        or type(obj).__module__.split(".")[0] == "cupy"


def _array_attribute(obj, name, where):
    """``x.T`` / ``x.shape`` on what turned out, at run time, to be an array (the compiler
    could not tell it from an object's field): transposed back, or zero (``shape`` and
    its like are integers, whose derivative is zero)."""
    value = getattr(obj, name)
    if name == "T":
        return value, lambda value_bar: value_bar.T if hasattr(value_bar, "T") else value_bar
    if name == "mT":
        return value, lambda value_bar: value_bar.mT
    if name in _NONDIFF_ARRAY_ATTRIBUTES:
        return value, lambda value_bar: rt.zeros_like(obj)
    if name == "real" and not np.iscomplexobj(obj):
        return value, lambda value_bar: value_bar
    raise errors.UnsupportedSyntaxError(
        f"srcgrad has no derivative rule for the array attribute `.{name}` (at {where})", None,
        "compute it with NumPy functions, or register a rule with srcgrad.defadjoint")


def _python_number(a) -> bool:
    return isinstance(a, (int, float)) and not isinstance(a, bool)


def _rule_vjp(rule, fn, wrt, args, kwargs):
    value = fn(*args, **kwargs)
    # A rule's `is_constant(p)` means "a literal in the source": a Python number
    # being differentiated is not one (its adjoint is wanted), so it goes in as NumPy's.
    # (A 0-d array: np.float64 is a Python float too.)
    args = tuple(np.array(a, dtype=np.float64) if i in wrt and _python_number(a) else a
                 for i, a in enumerate(args))
    kwargs = {k: np.array(a, dtype=np.float64) if k in wrt and _python_number(a) else a
              for k, a in kwargs.items()}
    bound = rule.signature.bind(*args, **kwargs)
    bound.apply_defaults()

    params = list(rule.signature.parameters.values())
    star = next((i for i, p in enumerate(params) if p.kind is p.VAR_POSITIONAL), None)

    def where(w):
        """(parameter name, item of a *operands parameter or None) of an entry of ``wrt``."""
        if not isinstance(w, int):
            return w, None
        if star is not None and w >= star:
            return params[star].name, w - star
        return params[w].name, None
    wanted = [where(w) for w in wrt if w != "self"]  # the receiver: a generator, no derivative
    for name, _ in wanted:
        if name not in rule.diff_params and name not in rule.discrete_params and name not in rule.zero_params:
            raise errors.NoDerivativeRuleError(
                f"`{name}` of `{rule.name}` is given a value being differentiated, but srcgrad's rule "
                f"has no derivative with respect to `{name}`", None,
                f"pass a constant as `{name}`, or compute it another way")

    def pullback(value_bar):
        adjoints = rule.adjoint(value_bar, value, *bound.args, **bound.kwargs)
        if len(rule.diff_params) == 1 and not (type(adjoints) is tuple and len(adjoints) == 1):
            adjoints = (adjoints,)
        elif not isinstance(adjoints, (tuple, list)) or len(adjoints) != len(rule.diff_params):
            raise TypeError(registry.adjoint_count_problem(
                rule, len(adjoints) if isinstance(adjoints, (tuple, list)) else 1)[0])
        by_name = dict(zip(rule.diff_params, adjoints))
        if rule.elementwise:  # adjoints of the broadcast shape: summed back to each input's
            by_name = {name: g if g is None or name in rule.sequence_params
                       else rt.unbroadcast(g, bound.arguments[name])
                       for name, g in by_name.items() if name in bound.arguments}
        elif not getattr(rule.adjoint, "__module__", "").startswith("srcgrad.") and len(rule.diff_params) > 1:
            by_name = {name: g if name in rule.sequence_params or name not in bound.arguments
                       else rt.checked_adjoint(g, bound.arguments[name], rule.name, name)
                       for name, g in by_name.items()}
        out = []
        for name, item in wanted:
            g = by_name.get(name)
            g = g[item] if item is not None and g is not None else g
            out.append(0.0 if g is None else g)
        if "self" in wrt:
            out.insert(list(wrt).index("self"), 0.0)
        return tuple(out) if len(out) > 1 else out[0]

    return value, pullback
