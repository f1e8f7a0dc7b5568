"""Desugar's lambda lifting: a nested function only ever called takes what it reads as parameters.

Requires: the desugared ``FunctionDef`` (its lambdas made nested functions).
Guarantees: see ``_lift_closures``.
"""
from __future__ import annotations

import gast

from .. import nodes
from .desugar_nodes import _at, _parameter_names


def _lift_closures(fdef, desugar):
    """Lambda lifting: a nested function that is only ever called (``g(x)``, never
    returned, stored or passed on) takes the outer function's values it reads as
    its first parameters, and each call passes them (``g(w, x)``).  A Python
    closure reads a captured name when it is called, and so does the call: a name
    rebound between two calls (or in each iteration of a loop) is seen at each, and the
    values are differentiated as arguments.  Functions escaping as values keep their
    closures (and ``reverse`` refuses them where they capture a value being
    differentiated); so do those that call themselves or hide a name in their body.

    Before/after::

        def g(v):                        def g(x, /, v):
            return np.sin(v) * x             return np.sin(v) * x
        y = g(x) + g(2 * x)              y = g(x, x) + g(x, 2 * x)
    """
    defs = [n for n in nodes.own_nodes(fdef) if isinstance(n, gast.FunctionDef)]
    if not defs:
        return
    outer = set(_parameter_names(fdef.args)) | {d.name for d in defs} | {
        n.id for n in nodes.own_nodes(fdef) if isinstance(n, gast.Name) and not isinstance(n.ctx, gast.Load)}
    counts = {}
    for d in defs:
        counts[d.name] = counts.get(d.name, 0) + 1
    called = {id(n.func) for n in nodes.walk(fdef) if isinstance(n, gast.Call)}
    uses = {}  # a nested function's name -> whether every use of it is a call's
    for n in nodes.walk(fdef):
        if isinstance(n, gast.Name) and n.id in counts:
            uses[n.id] = uses.get(n.id, True) and isinstance(n.ctx, gast.Load) and id(n) in called
    lifted = {}
    for d in defs:
        if counts[d.name] != 1 or not uses.get(d.name, True):
            continue
        inside = list(nodes.walk(gast.Module(body=d.body, type_ignores=[])))
        own = set(_parameter_names(d.args)) | {n.id for n in inside if isinstance(n, gast.Name)
                                               and not isinstance(n.ctx, gast.Load)}
        own |= {name for n in inside if isinstance(n, (gast.Global, gast.Nonlocal)) for name in n.names}
        own |= {n.name for n in inside if isinstance(n, gast.FunctionDef)}
        if d.name in own or any(isinstance(n, gast.Name) and n.id == d.name for n in inside) \
                or any(isinstance(n, (gast.Yield, gast.YieldFrom, gast.Await)) for n in inside):
            continue  # (recursive, a generator left as one, or binds its own name)
        captured = sorted({n.id for n in inside if isinstance(n, gast.Name) and isinstance(n.ctx, gast.Load)
                           and n.id in outer and n.id not in own and n.id not in counts})
        lifted[d.name] = (d, captured, own)
    # A call inside another nested function passes that one's names: only where it holds
    # none of them itself (then it reads the outer's, and captures them in turn).
    for d in defs:
        local = set(_parameter_names(d.args)) | {n.id for n in nodes.walk(d) if isinstance(n, gast.Name)
                                                 and not isinstance(n.ctx, gast.Load)}
        for n in nodes.walk(gast.Module(body=d.body, type_ignores=[])):
            if isinstance(n, gast.Call) and isinstance(n.func, gast.Name) and n.func.id in lifted \
                    and local & set(lifted[n.func.id][1]):
                del lifted[n.func.id]
    calls = {g: {n.func.id for n in nodes.walk(gast.Module(body=d.body, type_ignores=[]))
                 if isinstance(n, gast.Call) and isinstance(n.func, gast.Name) and n.func.id in lifted}
             for g, (d, _, _) in lifted.items()}
    order, state = [], {}

    def visit(g):  # callees first (depth first); a cycle (mutual recursion): no lifting
        state[g] = "open"
        for h in sorted(calls[g]):
            if state.get(h) == "open" or state.get(h) is None and not visit(h):
                return False
        state[g] = "done"
        order.append(g)
        return True
    if not all(state.get(g) == "done" or visit(g) for g in sorted(lifted)):
        return
    for g in order:
        d, captured, own = lifted[g]
        more = {c for h in calls[g] for c in lifted[h][1]}
        if more & own:
            return  # (a callee's callee reads a name this one holds itself)
        lifted[g] = (d, sorted(set(captured) | more), own)
    lifted = {g: entry for g, entry in lifted.items() if entry[1]}
    for g, (d, captured, _) in sorted(lifted.items()):
        # First, positional only: neither defaults, `*args` nor a keyword (`self`, or
        # `fn` of the call that runs it) can clash with them.
        d.args.posonlyargs[:0] = [_at(nodes.name(c, "param"), d) for c in captured]
    for n in nodes.walk(fdef):
        if isinstance(n, gast.Call) and isinstance(n.func, gast.Name) and n.func.id in lifted:
            n.args[:0] = [_at(nodes.name(c), n) for c in lifted[n.func.id][1]]
