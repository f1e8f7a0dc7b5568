"""The compiler, top to bottom.  Each step is one pass in ``transforms/`` or
one analysis in ``analysis/``; read this file to see the whole of srcgrad.

    source → desugar → resolve → inline → exits → validate → normalize (ANF)
           → analyze (ranks, aliases, activity, sharing) → reverse → optimize → emit and load
                 (forward mode: → forward → optimize → emit and load)
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import linecache
import types

import gast
import numpy as np

from . import anno, backends, errors, nodes, runtime, templates, tree
from .analysis import activity, ranks, sharing
from .transforms import (aliases, anf, desugar, emit, exits, forward, inline, optimize, parse, resolve, reverse,
                         validate)
from .rules import registry

MODES = ("grad", "value_and_grad", "vjp", "jvp", "pullback")


@dataclasses.dataclass(frozen=True)
class Options:
    """What to generate (part of the cache key, with the argument ranks).

    Attributes:
        mode: ``"grad"`` (gradients only), ``"value_and_grad"``, ``"vjp"``
            (value and pullback closure), ``"jvp"`` (forward mode: value and
            tangent), or ``"pullback"`` (``grad`` of an output of any shape, its
            cotangent a parameter: ``f_pullback(*params, y_bar) -> adjoints``, the
            code ``jacrev`` batches by forward mode over it).
        wrt: names of the parameters to differentiate with respect to.
        wrt_tuple: return a tuple of gradients (``wrt`` was given as a tuple).
        backend: array backend name (``"numpy"``).
        optimize: run the optimization passes.
        has_aux: the function returns ``(output, aux)``; only ``output`` is
            differentiated, ``aux`` is passed through.
        intermediates: names of values inside the function whose adjoints are
            returned too (their last assignment).
        hooks: ``(name, function)`` pairs: ``function(adjoint)`` replaces the
            adjoint of that value in the backward sweep.
        batched: forward mode only: every tangent has a leading axis of columns
            (``jacfwd``, ``hessian``); compiling raises ``forward.NotBatchable``
            for a program it cannot batch.
    """

    mode: str
    wrt: tuple
    wrt_tuple: bool
    backend: str = "numpy"
    optimize: bool = True
    has_aux: bool = False
    intermediates: tuple = ()
    hooks: tuple = ()  # ((name, function), ...)
    batched: bool = False


@dataclasses.dataclass
class Compiled:
    """A loaded gradient program."""

    source: str
    function: object
    free: resolve.FreeNames
    namespace: dict
    remake: object = None  # (args) -> a new Compiled of the same function, options and ranks
    inlined: inline.Inlined = None
    watch: _Specialisation = None  # (what the code checks after its calls not inlined)
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
        remake = functools.partial(compile_function, fn, *self.remake.args[1:])
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


def compile_function(fn, options: Options, param_ranks: tuple, link=None, args=None) -> Compiled:
    """``fn``'s gradient program for arguments of these ranks, loaded.

    ``link(namespace, name, callee, wrt, ranks)`` binds, under ``name``, the vjp of a
    function the code calls directly (``h, h_pullback = layer_vjp(x, w)``):
    ``api.bind_vjp``, which compiles it at its first call.  The pipeline does not
    compile callees itself: that is the API's job, above it.  Without ``link`` the
    code is for reading only (a callee's name is left unbound).  ``args``, the
    arguments themselves where known, tell which methods and layers an object
    argument's calls reach (then they are inlined, and the code checks the classes).
    """
    with _collector_paused():
        return _compile(fn, options, param_ranks, link, args)


@contextlib.contextmanager
def _collector_paused():
    """The compiler makes hundreds of thousands of small objects (nodes, sets) and
    keeps most of them until it returns; Python's cyclic collector would walk the
    growing trees again and again, so that compile time grew faster than the
    function.  Nothing here makes cycles that need collecting while it runs."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def front_end(fn, param_ranks=None):
    """``fn``'s source as a gast tree, every node carrying its user origin (parse);
    comprehensions, walrus and chained assignment as plain statements (desugar, before
    resolve: the names it binds are then the function's own); ``f(*xs)`` spread where
    ``param_ranks`` gives ``xs``'s length; and what each free name denotes now
    (resolve, before validate: its messages may name resolved callees).
    Returns ``(fdef, free names)``."""
    fdef = parse.transform(fn)
    desugar.transform(fdef, fn, param_ranks)
    if param_ranks is not None:
        desugar.spread_variadic(fdef, param_ranks)
    return fdef, resolve.transform(fdef, fn)


def _reserved(backend) -> tuple:
    """The modules the generated code reads by name (``pipeline._imports``): a local of the
    user's so named is renamed (``anf._rename_reserved``), not read as the module."""
    return backend.MODULE_NAME, "rt", "dispatch", "math", "scipy"


def _callee_core(fn, param_ranks):
    """A callee's normalized code, not differentiated: what ``ranks`` reads the rank of
    its result from."""
    fdef, free = front_end(fn)
    exits.transform(fdef)
    validate.transform(fdef)
    backend = backends.get("numpy")
    return anf.transform(fdef, free.names, backend, reserved=_reserved(backend),
                         param_ranks=param_ranks)


def _compile(fn, options: Options, param_ranks: tuple, link, args) -> Compiled:
    backend = backends.get(options.backend)
    # 1-2. the front end: source, desugared, names resolved.
    fdef, free = front_end(fn, param_ranks)
    # 2a. what the argument kinds decide (`isinstance(v, (list, tuple))` of a list) folded
    #     before inlining and validation see the branch that does not run.
    kinds = inline.kinds_of(fdef, dict(zip(anf.parameters(fdef.args), param_ranks)))
    inline.fold_decided_kinds(fdef, kinds)
    # 2b. inline calls whose targets are known now (after resolve: it reads what names
    #     denote; before exits/validate/normalize: they then see one flat function).
    params, own = anf.parameters(fdef.args), resolve.local_names(fdef)
    objects = {p: v for p, v in zip(params, args or ()) if inline.is_object(v)}
    inlined = inline.transform(fdef, fn, free, objects, kinds)
    if inlined.leaked:  # an object's layers may change while the code runs: known only at run time
        fdef, free = front_end(fn, param_ranks)
        inline.fold_decided_kinds(fdef, kinds)
        inlined = inline.transform(fdef, fn, free, {}, kinds)
    free.parts = inlined.free
    # 3. exits: break/continue/early return become flags, so later passes see
    #    structured control flow only (before validate, which then rejects none).
    exits.transform(fdef)
    validate.transform(fdef)
    # 4. normalize: one primitive per statement, single assignment, NumPy's own names.
    # (The data read live from a scope, `model.G`, is specialised on its rank as an argument
    # is: `free.kinds`, checked at each call.)
    scope_ranks = free.scope_ranks()
    core = anf.transform(fdef, free.names, backend, reserved=_reserved(backend),
                         param_ranks=param_ranks, scope_ranks=scope_ranks)
    # 5. analyze: ranks (which rule form applies) and activity (who needs an adjoint); between
    #    them, a read through another name for an array reads the name holding its value now
    #    (aliases: it needs the ranks, to know the arrays; activity then sees what is read).
    wrt = _wrt(core, options)
    rank_env = ranks.infer(core.body, {**scope_ranks, **dict(zip(core.params, param_ranks))}, _callee_core)
    anf.drop_decided_checks(core.body, rank_env)  # (`n, c, h, w = x.shape` of a rank-4 x: no check)
    asked = {core.final_names.get(n) for n in [*(name for name, _ in options.hooks), *options.intermediates]}
    aliases.transform(core, rank_env, keep=asked - {None})  # (an adjoint asked for: its own name's reads)
    body_activity = activity.analyze(core.body, wrt)
    shared = sharing.check(core.body, rank_env, core.params)  # a write seen through another name is refused
    if options.mode == "jvp":
        return _compile_jvp(fn, options, param_ranks, core, body_activity, rank_env, backend, free, shared,
                            inlined, link)
    # 6. reverse: forward sweep + backward sweep from the rules.
    output = _differentiated_output(core, options)
    hook_names = {_final_name(core, own, name, "hooks"): core.fresh(f"{name}_hook") for name, _ in options.hooks}
    watched = [_final_name(core, own, name, "intermediates") for name in options.intermediates]
    sweeps = reverse.transform(core, body_activity, rank_env, wrt, backend, output,
                               hooks=hook_names, intermediates=watched, free=free.names)
    live_out = set(sweeps.adjoints.values()) | set(sweeps.intermediates.values())
    # A nested def reads the names it captures when it is called, which the optimizer's
    # liveness does not see: they stay as the source assigns them.
    live_out |= {n for s in nodes.statements(core.body) if anno.get(s, "kind") == "def"
                 for n in anno.get(s, "captures")}
    if options.mode not in ("grad", "pullback") or options.has_aux:
        live_out |= set(nodes.loaded_names(core.result))
    if options.mode not in ("vjp", "pullback"):
        check = _scalar_output_check(core, output, rank_env, sweeps.seed)
        if check is not None:
            sweeps.backward.insert(0, check)
    # 7. optimize: dead code, copies, shapes (each pass tested on and off).
    forward, backward = sweeps.forward, sweeps.backward
    if options.optimize:
        forward, backward = optimize.transform(forward, backward, live_out, sweeps.primal_of,
                                               backend.MODULE_NAME, outside={sweeps.seed, *core.params},
                                               arrays={n for n, r in rank_env.items() if isinstance(r, int) and r > 0},
                                               seed=sweeps.seed, shared=shared)
    # 7b. after a call of the user's code that was not inlined, the code checks what it was
    #     specialised on (the call may swap a layer, patch a method, rebind a function).
    watch = _Specialisation(free, inlined)
    forward = watch.after_calls(forward, core)
    # 8. emit and load.
    module = _assemble(fn, core, forward, backward, sweeps, options, backend, rank_env)
    text = emit.render(module)
    signature = ",".join("?" if r is None else "tree" if isinstance(r, tuple) else str(r)
                         for r in param_ranks)
    filename = _unique(f"<srcgrad {fn.__module__}.{fn.__qualname__} {options.mode} ndim=({signature})>", text)
    namespace = {"__name__": "srcgrad.generated", backend.MODULE_NAME: backend.module(), "rt": runtime}
    for (name, hook), variable in zip(options.hooks, hook_names.values()):
        namespace[variable] = runtime.hooked(hook)
    watch.bind(namespace)
    namespace.update(sweeps.bound)
    # (A callee is a free name, guarded by `free`: rebound, the program is compiled again.)
    if link is not None:
        for (_, callee, wrt, arg_ranks), name in sweeps.callees.items():
            link(namespace, name, callee, wrt, arg_ranks)
    free.refresh(namespace)
    filename = _own_filename(filename, text)
    errors.register_generated(filename, fn.__code__.co_filename)
    emit.load(text, filename, namespace)
    namespace[backend.MODULE_NAME] = backend.module()  # the module the backend chose (tests: a stand-in)
    return Compiled(text, namespace[_function_name(core, options)], free, namespace,
                    functools.partial(compile_function, fn, options, param_ranks, link), inlined, watch)


def _compile_jvp(fn, options, param_ranks, core, body_activity, rank_env, backend, free, shared,
                 inlined, link) -> Compiled:
    """Steps 6-8 in forward mode: ``f_jvp(*params, *tangents) -> (value, tangent)``."""
    # The reverse pass's refusals hold in forward mode too (writes it cannot follow,
    # calls that change their arguments, values stored where srcgrad does not look):
    # it runs, on a copy, for them alone.
    checked = forward.checked_copy(core)
    wrt = _wrt(core, options)
    sweeps = reverse.transform(checked, body_activity, rank_env, wrt, backend, checked.result,
                               free=free.names)
    # Names a merge copy may read before any path bound them (see reverse.run): None first.
    prebound = [s.targets[0].id for s in sweeps.forward if anno.get(s, "prebound")]
    tangents = forward.transform(core, body_activity, rank_env, wrt, backend, options.batched)
    result = nodes.tuple_([nodes.copy(core.result), tangents.result])
    body = tangents.body
    if options.optimize:  # (the passes see one sweep: no backward one)
        body, _ = optimize.transform(body, [], set(nodes.loaded_names(result)), {}, backend.MODULE_NAME,
                                     outside={*core.params, *tangents.tangents.values()},
                                     arrays={n for n, r in rank_env.items() if isinstance(r, int) and r > 0},
                                     shared=shared, methods=False)  # (a tangent may be 0.0: one form for both)
    watch = _Specialisation(free, inlined)
    body = watch.after_calls(body, core)
    unbound = [nodes.assign(n, nodes.const(None)) for n in prebound]
    unbound += [nodes.assign(tangents.names[n], nodes.const(None)) for n in prebound if n in tangents.names]
    origin = f"{fn.__code__.co_filename.rsplit('/', 1)[-1]}:{fn.__code__.co_firstlineno}"
    mode = "forward mode, batched columns," if options.batched else "forward mode"
    header = [nodes.comment(f"srcgrad: {mode} of {core.name} ({origin}) | wrt: "
                            f"{', '.join(options.wrt)} | backend: {options.backend}")]
    imports = _imports(body, backend)
    name = _function_name(core, options)
    params = core.params + [tangents.tangents[p] for p in wrt]
    fdef = nodes.function(name, params, unbound + emit.with_group_comments(emit.with_blocks(body))
                          + [nodes.ret(result)])
    text = emit.render(nodes.module(header + imports + [fdef]))
    signature = ",".join("?" if r is None else "tree" if isinstance(r, tuple) else str(r) for r in param_ranks)
    batched = " batched" if options.batched else ""
    filename = _unique(f"<srcgrad {fn.__module__}.{fn.__qualname__} jvp{batched} ndim=({signature})>", text)
    namespace = {"__name__": "srcgrad.generated", backend.MODULE_NAME: backend.module(), "rt": runtime,
                 **tangents.extras}
    watch.bind(namespace)
    free.refresh(namespace)
    filename = _own_filename(filename, text)
    errors.register_generated(filename, fn.__code__.co_filename)
    emit.load(text, filename, namespace)
    namespace[backend.MODULE_NAME] = backend.module()
    return Compiled(text, namespace[name], free, namespace,
                    functools.partial(compile_function, fn, options, param_ranks, link), inlined, watch)


def _unique(filename: str, text: str) -> str:
    """``filename``, or ``filename`` numbered (``<srcgrad m.f grad ndim=(1) #2>``) where
    linecache holds other code under it (the same function compiled with other options,
    a tuple of gradients or one): a program is parsed again from its file (forward mode
    over it), so two programs must not share one.  The same order of compiles gives the
    same names."""
    number, named = 1, filename
    while named in linecache.cache and "".join(linecache.cache[named][2]) != text:
        number += 1
        named = f"{filename[:-1]} #{number}>"
    return named


class _Specialisation:
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
            if anno.get(stmt, "kind") == "call":
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

    def rebound(self, free, namespace) -> _Specialisation:
        """The same checks in another namespace, of another function's free names
        (``Compiled.rebound``)."""
        watch = _Specialisation(free, self.inlined)
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
registry.nondifferentiable(methods=((_Specialisation, "check"),), impure=True)


def _own_filename(filename: str, text: str) -> str:
    """``filename``, or it numbered (``... ndim=(1) #2>``) where linecache holds other code
    under it (two programs of one function for the same ranks: another ``wrt=``, ``optimize=``):
    source read back (forward mode over a gradient's code parses it) must be this program's."""
    name, count = filename, 1
    while name in linecache.cache and "".join(linecache.cache[name][2]) != text:
        count += 1
        name = f"{filename[:-1]} #{count}>"
    return name


def _function_name(core, options) -> str:
    """``f_grad``; ``f_grad_2`` where ``f`` reads or binds a name ``f_grad`` (the module's
    own ``def`` would replace it: the same name each time it is asked)."""
    name, k = f"{core.name}_{options.mode}", 1
    while name in core.names:
        k += 1
        name = f"{core.name}_{options.mode}_{k}"
    return name


def _wrt(core, options) -> tuple:
    """``options.wrt`` as the code names them (a parameter ``rt`` is ``rt_2``: anf._rename_reserved)."""
    return tuple(core.renamed.get(p, p) for p in options.wrt)


def _final(core, name) -> str:
    return core.final_names[core.renamed.get(name, name)]


def _final_name(core, own, name, option):
    """The one version of ``name`` that ``intermediates=``/``hooks=`` refer to;
    ``own``: the function's own names (not those of the calls inlined into it)."""
    origin = anno.get(core.body[-1], "origin")
    if core.renamed.get(name, name) not in core.final_names or name not in own:
        raise errors.UserCodeError(f"{option}= names `{name}`, which {core.name} never assigns",
                                   origin, "name a variable the function assigns (`h = x @ w1`)")
    user, name = name, core.renamed.get(name, name)  # (`rt` is `rt_2` here: anf._rename_reserved)
    versions = [s for s in nodes.statements(core.body)
                if any(n == name or n.startswith(f"{name}_") and n[len(name) + 1:].isdigit()
                       for n in nodes.assigned_names(s))]
    in_loop = any(isinstance(s, (gast.For, gast.While)) and any(
        name in nodes.assigned_names(t) for t in nodes.statements(s.body)) for s in nodes.statements(core.body))
    if len(versions) != 1 or in_loop:
        raise errors.UserCodeError(
            f"{option}= names `{user}`, which {core.name} assigns more than once (or in a loop), "
            "so which value is meant is ambiguous", anno.get(versions[-1], "origin") if versions else origin,
            f"give the value you want a name of its own, assigned once (`{user}_out = ...`)")
    return core.final_names[name]


def _differentiated_output(core, options):
    """The returned atom whose adjoint seeds the backward sweep."""
    result = core.result
    origin = anno.get(core.body[-1], "origin")
    if isinstance(result, gast.Constant) and result.value is None:
        raise errors.UserCodeError(f"{core.name} returns None, so it has no gradient", origin,
                                   "return the value to differentiate")
    if options.has_aux:
        if not (isinstance(result, gast.Tuple) and len(result.elts) == 2):
            raise errors.UserCodeError("has_aux=True needs the function to return a pair",
                                       origin, "write `return loss, aux`")
        return result.elts[0]
    if isinstance(result, gast.Tuple) and options.mode != "vjp":
        raise errors.NonScalarOutputError(
            f"{options.mode} needs a scalar output, but this returns a tuple", origin,
            "return the loss alone, pass has_aux=True for `return loss, aux`, or use srcgrad.vjp")
    return result


def _scalar_output_check(core, result, rank_env, seed):
    """``grad`` needs a scalar output (or an array of one element, as autograd takes):
    checked in the code where the rank is unknown, or is not 0; an array output's seed
    takes its shape (``result_bar = rt.size_one_seed(result, result_bar, where)``, or
    ``rt.scalar_seed`` where the rank is known only when the code runs)."""
    rank = ranks.rank_of(result, rank_env)
    if rank == 0:
        return None
    return_stmt = core.body[-1]
    origin = anno.get(return_stmt, "origin")
    where = origin.where if origin else core.name
    helper = "rt.size_one_seed" if rank is not None else "rt.scalar_seed"
    check = nodes.assign(seed, nodes.call(helper, [nodes.copy(result), nodes.name(seed), nodes.const(where)]))
    anno.set(check, "group", anno.get(return_stmt, "group"))
    anno.set(check, "impure", True)
    return check


def _pullback_locals(core, forward, backward) -> list:
    """Let a pullback be called more than once: the values it puts back (stack
    pops), the stacks it pops and the lists it puts popped items back into go into
    local copies, so the closure keeps the forward sweep's values.  Renames in
    ``backward``; returns the copying lines."""
    rebound = sorted({n for s in nodes.statements(backward) for n in nodes.assigned_names(s)}
                     & ({n for s in nodes.statements(forward) for n in nodes.assigned_names(s)}
                        | set(core.params)))
    stacks = sorted({anno.get(s, "stack") for s in nodes.statements(backward) if anno.has(s, "stack")}
                    | {anno.get(s, "restores") for s in nodes.statements(backward) if anno.has(s, "restores")})
    indices = {s.target.id for s in nodes.statements(backward) if isinstance(s, gast.For)}
    rebound = [n for n in rebound if n not in indices]  # a loop binds its own index first
    mapping = {n: core.fresh(f"{n}_local") for n in rebound + stacks}
    nodes.rename(backward, mapping)
    # Only names read outside the backward loops need their forward value up front
    # (inside, each iteration's pop sets them; a name local to a loop body may not
    # even exist when the loop ran no iterations).
    outside = set()

    def read_outside(stmts):
        for stmt in stmts:
            if isinstance(stmt, (gast.For, gast.While)):
                outside.update(nodes.loaded_names(stmt.iter if isinstance(stmt, gast.For) else stmt.test))
            elif isinstance(stmt, gast.If):
                outside.update(nodes.loaded_names(stmt.test))
                read_outside(stmt.body)
                read_outside(stmt.orelse)
            else:
                outside.update(nodes.loaded_names(stmt))
    read_outside(backward)
    return ([nodes.assign(mapping[n], nodes.call("list", [nodes.name(n)])) for n in stacks]
            + [nodes.assign(mapping[n], nodes.name(n)) for n in rebound if mapping[n] in outside])


def _redo_writes(core, backward) -> list:
    """A pullback puts back what the forward sweep's writes (``y[i] = v``) overwrote;
    called again, it must find them written.  Each put-back in ``backward`` becomes
    ``rt.restore(y, i, old, done)``, which remembers the written values, and the
    pullback ends with ``rt.redo(done)``.  Returns ``[done = [], rt.redo(done)]``, or
    ``[]`` where nothing is put back."""
    restores = [s for s in nodes.statements(backward) if anno.has(s, "restore")]
    if not restores:
        return []
    done = core.fresh("written")

    def rewrite(stmts):
        for i, stmt in enumerate(stmts):
            if anno.has(stmt, "restore"):
                if isinstance(stmt, gast.Expr):  # rt.restore_entry(xs, i, old): a list's, a dict's
                    xs, index, old = stmt.value.args
                else:
                    xs, index, old = stmt.targets[0].value, stmt.targets[0].slice, stmt.value
                call = nodes.call("rt.restore", [nodes.copy(xs), templates._slices_as_calls(nodes.copy(index)),
                                                 nodes.copy(old), nodes.name(done)])
                stmts[i] = anno.set(gast.Expr(value=call), "group", anno.get(stmt, "group"))
            for field in ("body", "orelse"):
                rewrite(getattr(stmt, field, None) or [])
    rewrite(backward)
    return [nodes.assign(done, gast.List(elts=[], ctx=gast.Load())),
            gast.Expr(value=nodes.call("rt.redo", [nodes.name(done)]))]


def _notes(forward, notes) -> list[str]:
    """Header lines that explain each stack and trip count in the generated code."""
    pushed = {anno.get(s, "stack"): s.value.args[0] for s in nodes.statements(forward)
              if isinstance(s, gast.Expr) and anno.has(s, "stack")}
    lines = [f"{s.targets[0].id} = None: assigned on some paths only (its adjoint is 0.0 where it was not)"
             for s in forward if anno.get(s, "prebound")]
    saved = {n.id for values in pushed.values() for n in nodes.walk(values) if isinstance(n, gast.Name)}
    def line(note):
        number = note[1].rsplit(":", 1)[-1]
        return int(number) if number.isdigit() else 0
    for name, where in sorted(notes, key=line):  # in the order of the source
        if name.endswith("_taken"):
            if name in saved:
                lines.append(f"{name}: whether the `if` at {where} took its first branch, in each iteration")
        elif name.endswith("_trips"):
            lines.append(f"{name}: how many times the loop at {where} ran")
        elif name in pushed:
            values = pushed[name]
            listed = ", ".join(nodes.to_source(v) for v in getattr(values, "elts", [values]))
            run = f"each run of a branch of the `if` at {where}" if name.startswith("if") \
                else f"each iteration of the loop at {where}"
            lines.append(f"{name}: {listed} from {run}, for the backward sweep")
    return lines


def _callee_notes(callees) -> list[str]:
    notes = []
    for (key, callee, wrt, _), name in callees.items():
        params = ", ".join(callee.__code__.co_varnames[i] for i in wrt)
        code = callee.__code__
        notes.append(f"{name}: {key}'s value and pullback wrt {params} (srcgrad.vjp of "
                     f"{code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno}, compiled at its first call)")
    return notes


def _imports(body, backend) -> list:
    """The generated module's imports: the backend's, and the modules its code reads besides
    (``dispatch`` for calls compiled when they run, ``math`` for the rules of ``math.*`` on
    floats, ``scipy.special`` and its kin for the SciPy rules)."""
    read = {n.id for s in body for n in nodes.walk(s) if isinstance(n, gast.Name)}
    scipy = sorted({f"scipy.{n.attr}" for s in body for n in nodes.walk(s) if isinstance(n, gast.Attribute)
                    and isinstance(n.value, gast.Name) and n.value.id == "scipy"} if "scipy" in read else ())
    lines = ["import math"] * ("math" in read) + [f"import {m}" for m in scipy] + list(backend.IMPORTS)
    lines += ["from srcgrad import dispatch"] * ("dispatch" in read)
    return [gast.parse(line).body[0] for line in lines]


def _assemble(fn, core, forward, backward, sweeps, options, backend, rank_env=None):
    grads = [nodes.name(sweeps.adjoints[p]) for p in _wrt(core, options)]
    grads_value = nodes.tuple_(grads) if options.wrt_tuple else grads[0]
    origin = f"{fn.__code__.co_filename.rsplit('/', 1)[-1]}:{fn.__code__.co_firstlineno}"
    header = [
        nodes.comment(f"srcgrad: reverse mode of {core.name} ({origin}) | wrt: "
                      f"{', '.join(options.wrt)} | backend: {options.backend}"),
    ] + [nodes.comment(f"  {note}") for note in _notes(forward, sweeps.notes) + _callee_notes(sweeps.callees)]
    imports = _imports(forward + backward, backend)
    result = core.result
    touched = {n for s in nodes.statements(backward) for n in nodes.assigned_names(s)} | {
        s.targets[0].value.id for s in nodes.statements(backward)
        if isinstance(s, gast.Assign) and isinstance(s.targets[0], gast.Subscript)}
    written = {anno.get(s, "array") for s in nodes.statements(core.body) if anno.get(s, "kind") == "setitem"}
    shown = options.mode not in ("vjp", "pullback") and (options.mode != "grad" or options.has_aux)
    overwritten = shown and bool(written) and rank_env is not None and any(
        memory.overlap(n, a) for memory in [sharing.Memory(core.body, rank_env, core.params)]
        for n in nodes.loaded_names(result) for a in written)
    if shown and (set(nodes.loaded_names(result)) & touched or overwritten):
        # The backward sweep puts earlier values back into these names (and into the
        # elements a write changed: then the returned arrays, or views of them, are
        # copied as the function returned them, before it runs): keep the result.
        kept = core.fresh("value")
        forward = forward + [nodes.assign(kept, nodes.call("rt.snapshot", [nodes.copy(result)])
                                          if overwritten else nodes.copy(result))]
        result = nodes.tuple_([gast.Subscript(value=nodes.name(kept), slice=nodes.const(i), ctx=gast.Load())
                               for i in range(len(result.elts))]) if isinstance(result, gast.Tuple) \
            else nodes.name(kept)
    fwd = [nodes.comment("---- forward sweep ----")] + emit.with_group_comments(emit.with_blocks(forward))
    bwd = [nodes.comment("---- backward sweep ----")] + emit.with_group_comments(backward)
    name = _function_name(core, options)
    aux = [nodes.copy(result.elts[1])] if options.has_aux else []
    if options.mode == "vjp":
        redo = _redo_writes(core, bwd)
        pullback = nodes.function(core.fresh(f"{core.name}_pullback"), [sweeps.seed],
                                  _pullback_locals(core, forward, backward) + redo[:1] + bwd + redo[1:]
                                  + [nodes.ret(grads_value)])
        value = result.elts[0] if options.has_aux else result
        body = fwd + [pullback, nodes.ret(nodes.tuple_([nodes.copy(value), nodes.name(pullback.name)]
                                                       + aux))]
        fdef = nodes.function(name, core.params, body)
    else:
        if options.intermediates:
            watched = gast.Dict(keys=[nodes.const(n) for n in options.intermediates],
                                values=[nodes.name(sweeps.intermediates[_final(core, n)])
                                        for n in options.intermediates])
            grads_value = nodes.tuple_([grads_value, watched])
        if options.mode in ("grad", "pullback"):
            value = nodes.tuple_([grads_value] + aux) if aux else grads_value
        else:
            value = nodes.tuple_([nodes.copy(result.elts[0] if options.has_aux else result)]
                                 + ([nodes.copy(result.elts[1])] if options.has_aux else []))
            value = nodes.tuple_([value if options.has_aux else value.elts[0], grads_value])
        fdef = nodes.function(name, core.params + [sweeps.seed], fwd + bwd + [nodes.ret(value)],
                              defaults=[] if options.mode == "pullback" else [nodes.const(1.0)])
    return nodes.module(header + imports + [fdef])


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
