"""The compiler, top to bottom: read ``REVERSE`` and ``FORWARD`` below to see the whole
of srcgrad.  Each step is one pass in ``transforms/`` or one analysis in ``analysis/``,
called on a ``Context`` that carries what the steps before it made.

    parse, desugar, resolve → fold argument kinds → inline → exits → validate → normalize (ANF)
        → analyze (ranks, aliases, activity, sharing)
        → reverse → optimize → resugar → guard calls → assemble (→ numba's subset) → emit and load
          (forward mode: refusals → forward → the same tail)

What a program is specialised on, and its cache, are in ``specialise.py``; assembling
the output function and loading it in ``transforms/emit.py``.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc

import gast

from .anno import Kind
from . import anno, backends, errors, ir, nodes, runtime
from .analysis import activity, ranks, sharing
from .specialise import Compiled, Guards, programs_run, rank_of_argument, rank_of_layout  # noqa: F401 - the API's
from .transforms import (aliases, anf, desugar, emit, exits, forward, inline, numba_subset, optimize, parse,
                         resolve, resugar, reverse, validate)

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
class Context:
    """What the steps share: the request (``fn``, ``options``, ``param_ranks``, ``link``,
    ``args``), then what each step made, in the order they make it."""

    fn: object
    options: Options
    param_ranks: tuple
    link: object = None  # (namespace, name, callee, wrt, ranks): binds a callee's vjp (api.bind_vjp)
    args: tuple = None  # the arguments themselves, where known (which layers an object's calls reach)
    backend: object = None
    fdef: gast.FunctionDef = None  # the user's function, as the front end leaves it
    own: set = None  # the names it binds itself (not those of the calls inlined into it)
    free: resolve.FreeNames = None  # what its free names denote
    kinds: dict = None  # what the argument kinds decide (`isinstance(xs, list)`)
    inlined: inline.Inlined = None  # the calls inlined, and the classes they were inlined for
    core: ir.Core = None  # normalized: one primitive per statement
    scope_ranks: dict = None  # ranks of the data read live from a scope (`model.G`)
    wrt: tuple = ()  # the parameters differentiated, as the code names them
    rank_env: dict = None
    activity: object = None
    shared: object = None  # which names share memory (sharing.check)
    # the sweeps as the differentiating step leaves them, and what optimize must keep
    forward: list = None
    backward: list = None
    optimized: dict = None  # optimize.transform's keywords for this mode
    sweeps: reverse.Sweeps = None
    tangents: forward.Tangents = None
    prebound: list = ()  # (forward mode) names a merge copy may read before any path bound them
    bound: dict = dataclasses.field(default_factory=dict)  # values the code reads by name
    guards: Guards = None
    module: gast.Module = None
    text: str = None


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


def _compile(fn, options: Options, param_ranks: tuple, link, args) -> Compiled:
    ctx = Context(fn, options, param_ranks, link, args, backend=backends.get(options.backend))
    for step in FORWARD if options.mode == "jvp" else REVERSE:
        step(ctx)
    return _load(ctx)


# ---- the front end -------------------------------------------------------------------

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


def read_source(ctx):
    """1-2. Source, desugared, names resolved (``front_end``)."""
    ctx.fdef, ctx.free = front_end(ctx.fn, ctx.param_ranks)


def fold_argument_kinds(ctx):
    """2a. What the argument kinds decide (``isinstance(v, (list, tuple))`` of a list) folded,
    before inlining and validation see the branch that does not run."""
    ctx.kinds = inline.kinds_of(ctx.fdef, dict(zip(anf.parameters(ctx.fdef.args), ctx.param_ranks)))
    inline.fold_decided_kinds(ctx.fdef, ctx.kinds)


def inline_calls(ctx):
    """2b. Calls whose targets are known now inlined (after resolve: it reads what names
    denote; before exits/validate/normalize: they then see one flat function)."""
    params, ctx.own = anf.parameters(ctx.fdef.args), resolve.local_names(ctx.fdef)
    objects = {p: v for p, v in zip(params, ctx.args or ()) if inline.is_object(v)}
    ctx.inlined = inline.transform(ctx.fdef, ctx.fn, ctx.free, objects, ctx.kinds)
    if ctx.inlined.leaked:  # an object's layers may change while the code runs: known only at run time
        ctx.fdef, ctx.free = front_end(ctx.fn, ctx.param_ranks)
        inline.fold_decided_kinds(ctx.fdef, ctx.kinds)
        ctx.inlined = inline.transform(ctx.fdef, ctx.fn, ctx.free, {}, ctx.kinds)
    ctx.free.parts = ctx.inlined.free


def structure_exits(ctx):
    """3a. break/continue/early return become flags, so later passes see structured control
    flow only (before validate, which then rejects none)."""
    exits.transform(ctx.fdef)


def validate_source(ctx):
    """3. What srcgrad does not differentiate at all (``global``, ``try``...), refused at its line."""
    validate.transform(ctx.fdef)


def normalize(ctx):
    """4. One primitive per statement, single assignment, NumPy's own names.  (The data read
    live from a scope, ``model.G``, is specialised on its rank as an argument is:
    ``free.kinds``, checked at each call.)"""
    ctx.scope_ranks = ctx.free.scope_ranks()
    ctx.core = anf.transform(ctx.fdef, ctx.free.names, ctx.backend, reserved=_reserved(ctx.backend),
                             param_ranks=ctx.param_ranks, scope_ranks=ctx.scope_ranks)
    ctx.wrt = tuple(ctx.core.renamed.get(p, p) for p in ctx.options.wrt)  # (a parameter `rt` is `rt_2`)


def analyze(ctx):
    """5. Ranks (which rule form applies) and activity (who needs an adjoint); between them,
    a read through another name for an array reads the name holding its value now (aliases:
    it needs the ranks, to know the arrays; activity then sees what is read)."""
    core, options = ctx.core, ctx.options
    ctx.rank_env = ranks.infer(core.body, {**ctx.scope_ranks, **dict(zip(core.params, ctx.param_ranks))},
                               _callee_core)
    anf.drop_decided_checks(core.body, ctx.rank_env)  # (`n, c, h, w = x.shape` of a rank-4 x: no check)
    asked = {core.final_names.get(n) for n in [*(name for name, _ in options.hooks), *options.intermediates]}
    aliases.transform(core, ctx.rank_env, keep=asked - {None})  # (an adjoint asked for: its own name's reads)
    ctx.activity = activity.analyze(core.body, ctx.wrt)
    ctx.shared = sharing.check(core.body, ctx.rank_env, core.params)  # a write seen through another name is refused


def _reserved(backend) -> tuple:
    """The modules the generated code reads by name (``emit._imports``): a local of the
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


# ---- differentiate --------------------------------------------------------------------

def differentiate_reverse(ctx):
    """6. Reverse mode: a forward sweep and a backward sweep from the rules."""
    core, options = ctx.core, ctx.options
    output = _differentiated_output(core, options)
    own = ctx.own
    hook_names = {_final_name(core, own, name, "hooks"): core.fresh(f"{name}_hook") for name, _ in options.hooks}
    watched = [_final_name(core, own, name, "intermediates") for name in options.intermediates]
    sweeps = reverse.transform(core, ctx.activity, ctx.rank_env, ctx.wrt, ctx.backend, output,
                               hooks=hook_names, intermediates=watched, free=ctx.free.names)
    live_out = set(sweeps.adjoints.values()) | set(sweeps.intermediates.values())
    # A nested def reads the names it captures when it is called, which the optimizer's
    # liveness does not see: they stay as the source assigns them.
    live_out |= {n for s in nodes.statements(core.body) if anno.get(s, "kind") == Kind.DEF
                 for n in anno.get(s, "captures")}
    if options.mode not in ("grad", "pullback") or options.has_aux:
        live_out |= set(nodes.loaded_names(core.result))
    if options.mode not in ("vjp", "pullback"):
        check = _scalar_output_check(core, output, ctx.rank_env, sweeps.seed)
        if check is not None:
            sweeps.backward.insert(0, check)
    ctx.sweeps, ctx.forward, ctx.backward = sweeps, sweeps.forward, sweeps.backward
    ctx.optimized = dict(live_out=live_out, primal_of=sweeps.primal_of, outside={sweeps.seed, *core.params},
                         seed=sweeps.seed)
    for (name, hook), variable in zip(options.hooks, hook_names.values()):
        ctx.bound[variable] = runtime.hooked(hook)
    ctx.bound.update(sweeps.bound)


def check_refusals(ctx):
    """6. (forward mode) The reverse pass's refusals hold in forward mode too (writes it cannot
    follow, calls that change their arguments, values stored where srcgrad does not look):
    it runs, on a copy, for them alone."""
    checked = forward.checked_copy(ctx.core)
    sweeps = reverse.transform(checked, ctx.activity, ctx.rank_env, ctx.wrt, ctx.backend, checked.result,
                               free=ctx.free.names)
    # Names a merge copy may read before any path bound them (see reverse.run): None first.
    ctx.prebound = [s.targets[0].id for s in sweeps.forward if anno.get(s, "prebound")]


def differentiate_forward(ctx):
    """6. Forward mode: one sweep carrying each value's tangent beside it."""
    core = ctx.core
    ctx.tangents = forward.transform(core, ctx.activity, ctx.rank_env, ctx.wrt, ctx.backend, ctx.options.batched)
    ctx.forward, ctx.backward = ctx.tangents.body, []
    ctx.optimized = dict(live_out={*nodes.loaded_names(core.result), *nodes.loaded_names(ctx.tangents.result)},
                         primal_of={}, outside={*core.params, *ctx.tangents.tangents.values()},
                         methods=False)  # (a tangent may be 0.0: one form for both)
    ctx.bound.update(ctx.tangents.extras)


# ---- the shared tail -----------------------------------------------------------------

def optimize_sweeps(ctx):
    """7. Dead code, copies, shapes (each pass tested on and off)."""
    if ctx.options.optimize:
        arrays = {n for n, r in ctx.rank_env.items() if isinstance(r, int) and r > 0}
        kw = dict(ctx.optimized)
        ctx.forward, ctx.backward = optimize.transform(ctx.forward, ctx.backward, kw.pop("live_out"),
                                                       kw.pop("primal_of"), ctx.backend.MODULE_NAME,
                                                       arrays=arrays, shared=ctx.shared, **kw)


def resugar_sweeps(ctx):
    """7a. The code a person would write: a temporary read once folded into its read,
    ``a, b = t`` and ``a or b`` as written (after optimize: what it keeps is final; before
    guard_calls: a check after a call stays after it).  With ``optimize=False`` the code
    stays as normalized."""
    if ctx.options.optimize:
        kept = set(ctx.optimized["live_out"]) | set(ctx.optimized["outside"]) | set(ctx.prebound)
        kept |= set(nodes.loaded_names(ctx.core.result))
        if ctx.tangents is not None:
            kept |= set(nodes.loaded_names(ctx.tangents.result))
        ctx.forward, ctx.backward = resugar.transform(ctx.forward, ctx.backward, kept)


def guard_calls(ctx):
    """7b. After a call of the user's code that was not inlined, the code checks what it
    was specialised on (the call may swap a layer, patch a method, rebind a function)."""
    ctx.guards = Guards(ctx.free, ctx.inlined)
    ctx.forward = ctx.guards.after_calls(ctx.forward, ctx.core)


def assemble(ctx):
    """8. The output function, as one module."""
    if ctx.options.mode == "jvp":
        ctx.module = emit.forward_module(ctx.fn, ctx.core, ctx.forward, ctx.tangents, ctx.options, ctx.backend,
                                         ctx.wrt, ctx.prebound, checks=ctx.guards.name)
    else:
        ctx.module = emit.reverse_module(ctx.fn, ctx.core, ctx.forward, ctx.backward, ctx.sweeps, ctx.options,
                                         ctx.backend, ctx.wrt, ctx.rank_env, checks=ctx.guards.name)


def numba_subset_module(ctx):
    """8b. (``backend="numba"``) The module in the subset numba compiles: rewritten, or
    refused at the user's line."""
    if ctx.options.backend == "numba":
        ctx.module = numba_subset.transform(ctx.module, ctx.fn, ctx.options.mode, ctx.param_ranks)


def render(ctx):
    """8c. The module's source text."""
    ctx.text = emit.render(ctx.module)


FRONT = [read_source, fold_argument_kinds, inline_calls, structure_exits, validate_source, normalize, analyze]
TAIL = [optimize_sweeps, resugar_sweeps, guard_calls, assemble, numba_subset_module, render]
REVERSE = FRONT + [differentiate_reverse] + TAIL
FORWARD = FRONT + [check_refusals, differentiate_forward] + TAIL


def _load(ctx) -> Compiled:
    """9. Load: the text executed in a namespace of its own, registered under its own name
    (tracebacks and ``pdb`` show the generated lines, errors are told it is srcgrad's)."""
    fn, backend = ctx.fn, ctx.backend
    namespace = {"__name__": "srcgrad.generated", backend.MODULE_NAME: backend.module(), "rt": runtime}
    namespace.update(ctx.bound)
    ctx.guards.bind(namespace)
    # (A callee is a free name, guarded by `free`: rebound, the program is compiled again.)
    if ctx.link is not None and ctx.sweeps is not None:
        for (_, callee, wrt, arg_ranks), name in ctx.sweeps.callees.items():
            ctx.link(namespace, name, callee, wrt, arg_ranks)
    ctx.free.refresh(namespace)
    filename = emit.filename(fn, ctx.options, ctx.param_ranks, ctx.text)
    errors.register_generated(filename, fn.__code__.co_filename)
    emit.load(ctx.text, filename, namespace)
    namespace[backend.MODULE_NAME] = backend.module()  # the module the backend chose (tests: a stand-in)
    # (numba: compiled by numba.njit at its first call)
    function = backend.compiled(namespace[emit.function_name(ctx.core, ctx.options)], ctx.core.name)
    return Compiled(ctx.text, function, ctx.free, namespace,
                    functools.partial(compile_function, fn, ctx.options, ctx.param_ranks, ctx.link), ctx.inlined,
                    ctx.guards)


# ---- what the steps check of the user's request ---------------------------------------

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
