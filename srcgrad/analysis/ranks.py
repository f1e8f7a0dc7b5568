"""Rank inference: the number of dimensions of each value, where it is known.

Compiled code is specialised on the ranks of the arguments (part of the cache
key), so rules can pick the readable form (``x.T @ g`` for 2-D operands)
instead of a general helper.  Unknown stays ``None`` and rules fall back to
code that is correct for every rank.
"""
from __future__ import annotations

import gast

from ..anno import Kind
from .. import anno, nodes
from ..rules.registry import elementwise_ndim
from ..templates import UNKNOWN, static_value
from ..tree import TreeRank


def rank_of(atom, env):
    if isinstance(atom, gast.Name):
        return env.get(atom.id)
    if isinstance(atom, gast.Constant) and isinstance(atom.value, (int, float, bool)):
        return 0
    return None


_UNSET = object()
_STRUCTURAL = set()  # ndim functions of field and getitem, filled in below


def infer(body, param_ranks: dict, callee_core=None) -> dict:
    """Rank of every name; a name assigned different ranks (in a loop) is unknown.

    ``callee_core(fn, param_ranks)``: the normalized code of a function of the user's that
    the body calls (the pipeline's front end), whose result's rank is then inferred too;
    without it, what such a call returns has an unknown rank."""
    if not _STRUCTURAL:
        _register_structural()
    env = dict(param_ranks)
    flat = list(nodes.statements(body))
    for _ in range(4):  # loops converge in a pass or two; more passes only confirm
        before = dict(env)
        for stmt in flat:
            if isinstance(stmt, gast.For):
                env[stmt.target.id] = 0  # every core loop iterates over a range
            elif isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name):
                if anno.get(stmt, "kind") == Kind.COPY and isinstance(stmt.value, gast.Name) \
                        and stmt.value.id not in env:
                    continue  # not yet known (a name a later pass over a loop binds): no information
                target = stmt.targets[0].id
                rank = _rank(stmt, env, callee_core)
                old = env.get(target, _UNSET)
                env[target] = rank if old is _UNSET or old == rank or target not in before \
                    and old is _UNSET else (rank if old == rank else None)
        if env == before:
            break
    return env


def _partial_static(atom):
    """A compile-time value; a tuple keeps its length even if some elements are
    only known at run time (``(n, 3)`` has two dimensions whatever ``n`` is)."""
    if isinstance(atom, gast.Tuple):
        return tuple(_partial_static(e) if isinstance(e, gast.Slice) else static_value(e) for e in atom.elts)
    if isinstance(atom, gast.Slice):  # a slice keeps its axis whatever its bounds (x[::s])
        value = static_value(atom)
        return slice(None) if value is UNKNOWN else value
    return static_value(atom)


_CALLEE_RANKS: dict = {}
_IN_PROGRESS: set = set()


def callee_rank(fn, arg_ranks, callee_core):
    """The rank of what a function of yours returns, given its arguments' ranks
    (its body is normalized by ``callee_core`` and ranked, not differentiated); None if unknown."""
    import types

    if callee_core is None or not isinstance(fn, types.FunctionType):
        return None
    key = (fn, arg_ranks)
    if key in _CALLEE_RANKS:
        return _CALLEE_RANKS[key]
    if key in _IN_PROGRESS:  # recursion: its rank is what we are computing
        return None
    _IN_PROGRESS.add(key)
    try:
        param_ranks = _parameter_ranks(fn, arg_ranks)
        core = callee_core(fn, param_ranks)
        env = infer(core.body, dict(zip(core.params, param_ranks)), callee_core)
        rank = rank_of(core.result, env) if not isinstance(core.result, gast.Tuple) else None
    except Exception:  # noqa: BLE001 - any problem surfaces when the callee is compiled for real
        rank = None
    finally:
        _IN_PROGRESS.discard(key)
    _CALLEE_RANKS[key] = rank
    return rank


def _parameter_ranks(fn, arg_ranks) -> tuple:
    """Ranks of ``fn``'s parameters given its positional arguments' ranks: those
    that land in ``*args`` make one tuple's (a parameter left to its default: unknown)."""
    import inspect

    signature = inspect.signature(fn, follow_wrapped=False)  # a wrapper's own parameters
    bound = signature.bind(*arg_ranks)
    out = []
    for name, param in signature.parameters.items():
        if param.kind is param.VAR_POSITIONAL:
            out.append(TreeRank(enumerate(bound.arguments.get(name, ())), "sequence"))
        elif param.kind is param.VAR_KEYWORD:
            out.append(TreeRank((), "mapping"))
        else:
            out.append(bound.arguments.get(name))
    return tuple(out)


def _rank(stmt, env, callee_core):
    value, kind = stmt.value, anno.get(stmt, "kind")
    if kind == Kind.COPY:
        return rank_of(value, env)
    if kind == Kind.UNPACK:  # `a, b = m`: m's rows, or the entries of a tuple passed in
        rank = env.get(anno.get(stmt, "source"))
        if isinstance(rank, TreeRank):
            return rank.get(anno.get(stmt, "index")) if rank.kind == "sequence" else None
        return rank - 1 if isinstance(rank, int) and rank > 0 else None
    if kind == Kind.CALL and isinstance(value, gast.Call) and anno.has(value.func, "resolved") \
            and not value.keywords and not any(isinstance(a, gast.Starred) for a in value.args):
        ranks = tuple(r if isinstance(r, int) else None for r in (rank_of(a, env) for a in value.args))
        callee = anno.get(value.func, "resolved")
        rule = _rule_of(callee)
        if rule is not None and rule.ndim is not None and rule.signature is not None:
            # A primitive whose rule runs as a function (it calls helpers of its own): its rank
            # as the rule says.
            try:
                bound = rule.signature.bind(*value.args).arguments
            except TypeError:
                return None
            return rule.ndim({p: r for p, r in zip(bound, ranks)},
                             {p: v for p, a in bound.items() if (v := _partial_static(a)) is not UNKNOWN})
        if runtime_is_gradient_function(callee):
            return _gradient_rank(callee, ranks)
        return callee_rank(callee, ranks, callee_core)
    rule = anno.get(stmt, "rule")
    if rule is not None and rule.ndim is not None and anno.has(stmt, "bound"):
        bound = anno.get(stmt, "bound")
        structural = rule.ndim in _STRUCTURAL  # only these look inside a structure's ranks
        ndims = {p: r if structural or not isinstance(r, TreeRank) else None
                 for p, a in bound.items() for r in [rank_of(a, env)]
                 if isinstance(a, gast.Name) or (isinstance(a, gast.Constant)
                                                 and isinstance(a.value, (int, float)))}
        statics = {p: _partial_static(a) for p, a in bound.items()}
        statics = {p: v for p, v in statics.items() if v is not UNKNOWN}
        return rule.ndim(ndims, statics)
    if isinstance(value, gast.Compare):
        operands = [rank_of(a, env) for a in [value.left] + value.comparators]
        if any(isinstance(r, TreeRank) for r in operands):
            return None  # an object's own `__gt__`: whatever it returns
        return elementwise_ndim(dict(enumerate(operands)), {})
    return None


def runtime_is_gradient_function(fn) -> bool:
    from .. import runtime

    return runtime.is_gradient_function(fn)


def _gradient_rank(fn, arg_ranks):
    """The rank of what ``srcgrad.grad(f)`` (of one whole parameter) returns: its parameter's."""
    options = getattr(fn, "options", None)
    if getattr(options, "mode", None) != "grad" \
            or len(options.wrt) != 1 or getattr(fn, "_as_tuple", True) or not getattr(fn, "_whole", False):
        return None
    params = list(getattr(fn, "_params", ()))
    position = params.index(options.wrt[0]) if options.wrt[0] in params else None
    rank = arg_ranks[position] if position is not None and position < len(arg_ranks) else None
    return rank if isinstance(rank, int) else None


def _rule_of(fn):
    from ..rules import registry

    return registry.lookup(fn) if callable(fn) else None


def _register_structural():
    import operator

    from ..rules import registry
    for primal in (getattr, operator.getitem):
        _STRUCTURAL.add(registry.lookup(primal).ndim)
