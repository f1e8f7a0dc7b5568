"""Pass 7 — optimize the generated sweeps.

Requires: forward and backward statement lists from ``reverse``.
Guarantees: no dead forward values and no unused adjoints (dead code
elimination), no adjoint that is a mere copy of another (copy propagation),
no forward value kept alive only for its shape (shape forwarding).  Each
pass returns whether it changed anything; they run until none does.  The
gradient tests run with the passes on and off (``optimize=False``).

Before/after::

    _t2 = _t1 ** 2                      (dropped: nothing reads _t2 now)
    _t2_bar = np.full_like(_t2, r)  →   _t2_bar = np.full_like(_t1, r)
"""
from __future__ import annotations

import gast

from .. import anno, nodes

# Calls that write into their first argument.
_MUTATORS = {("np", "add", "at")}


def _dotted(node):
    parts = []
    while isinstance(node, gast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, gast.Name):
        parts.append(node.id)
        return tuple(reversed(parts))
    return None


def _mutated(stmt):
    """The name a statement writes into in place, or None."""
    if isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Subscript):
        base = stmt.targets[0].value
        return base.id if isinstance(base, gast.Name) else None
    if isinstance(stmt, gast.Expr) and isinstance(stmt.value, gast.Call):
        call = stmt.value
        if _dotted(call.func) in _MUTATORS and call.args and isinstance(call.args[0], gast.Name):
            return call.args[0].id
    return None


def _defined(stmt):
    if isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name):
        return stmt.targets[0].id
    return None


def _pure(stmt) -> bool:
    return anno.get(stmt, "kind") not in ("unknown",) and not anno.get(stmt, "impure", False)


def eliminate_dead_code(stmts, live_out) -> tuple[list, bool]:
    live, kept = set(live_out), []
    for stmt in reversed(stmts):
        target, mutated = _defined(stmt), _mutated(stmt)
        if target is not None:
            if target not in live and _pure(stmt):
                continue
            live.discard(target)
        elif mutated is not None and mutated not in live:
            continue
        live.update(nodes.loaded_names(stmt))
        kept.append(stmt)
    kept.reverse()
    return kept, len(kept) != len(stmts)


def propagate_copies(stmts) -> tuple[list, bool]:
    """Replace ``a`` by ``b`` after ``a = b`` when both are assigned once and never mutated."""
    assigned, mutated = {}, set()
    for stmt in stmts:
        if (t := _defined(stmt)) is not None:
            assigned[t] = assigned.get(t, 0) + 1
        if (m := _mutated(stmt)) is not None:
            mutated.add(m)
    renames = {}
    for stmt in stmts:
        t = _defined(stmt)
        if t and isinstance(stmt.value, gast.Name) and anno.get(stmt, "kind") is None:
            src = stmt.value.id
            if assigned.get(t) == 1 and assigned.get(src) == 1 and not {t, src} & mutated:
                renames[t] = renames.get(src, src)
    if not renames:
        return stmts, False
    out = []
    for stmt in stmts:
        if _defined(stmt) in renames:
            continue
        for node in gast.walk(stmt):
            if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Load) and node.id in renames:
                node.id = renames[node.id]
        out.append(stmt)
    return out, True


def _same_shape_map(forward, primal_of) -> dict:
    """name -> a name known to have the same shape: elementwise results of one array
    and scalars share that array's shape; an adjoint has its primal's shape."""
    same = dict(primal_of)
    for stmt in forward:
        rule = anno.get(stmt, "rule")
        if anno.get(stmt, "kind") == "op" and rule.elementwise:
            bound = list(anno.get(stmt, "bound").values())
            arrays = [a for a in bound if isinstance(a, gast.Name)]
            scalars = all(isinstance(a, gast.Constant) and (a.value is None or type(a.value) in (int, float))
                          for a in bound if not isinstance(a, gast.Name))
            if len(arrays) == 1 and scalars:
                same[stmt.targets[0].id] = arrays[0].id
    return same


def _root(name, same):
    seen = set()
    while name in same and name not in seen:
        seen.add(name)
        name = same[name]
    return name


def _is_full_like(node) -> bool:
    return isinstance(node, gast.Call) and _dotted(node.func) == ("np", "full_like") \
        and len(node.args) == 2 and isinstance(node.args[0], gast.Name)


def forward_shapes(forward, backward, primal_of) -> bool:
    """``np.full_like(t, v)`` reads only ``t``'s shape and dtype; where ``t`` is an
    elementwise function of one array ``s`` and scalars, read ``s`` instead, so
    ``t`` need not be computed."""
    same = _same_shape_map(forward, {})
    changed = False
    for stmt in backward:
        for node in gast.walk(stmt):
            if _is_full_like(node) and node.args[0].id in same:
                node.args[0].id = _root(node.args[0].id, same)
                changed = True
    return changed


def fold_scalar_fills(forward, backward, primal_of) -> bool:
    """``v = np.full_like(s, c)`` then ``v * e`` with ``e`` of ``s``'s shape: use ``c``.

    The adjoint of a full reduction is a scalar broadcast to the input's shape;
    multiplying by it needs no array of copies.  ``DESIGN.md``'s
    ``_t1_bar = 2.0 * _t1 * result_bar`` is this fold.
    """
    same = _same_shape_map(forward, primal_of)
    fills = {}
    for stmt in backward:
        t = _defined(stmt)
        if t and _is_full_like(stmt.value) and isinstance(stmt.value.args[1], (gast.Name, gast.Constant)):
            fills[t] = (_root(stmt.value.args[0].id, same), stmt.value.args[1])

    def shape_root(node):
        if isinstance(node, gast.Name):
            return _root(node.id, same)
        if isinstance(node, gast.BinOp):
            left, right = node.left, node.right
            if isinstance(left, gast.Constant):
                return shape_root(right)
            if isinstance(right, gast.Constant):
                return shape_root(left)
        return None

    changed = False
    for stmt in backward:
        for node in gast.walk(stmt):
            if not isinstance(node, gast.BinOp) or not isinstance(node.op, (gast.Mult, gast.Add, gast.Sub)):
                continue
            for side, other in (("left", node.right), ("right", node.left)):
                operand = getattr(node, side)
                if isinstance(operand, gast.Name) and operand.id in fills:
                    root, scalar = fills[operand.id]
                    if root is not None and shape_root(other) == root:
                        setattr(node, side, nodes.copy(scalar))
                        changed = True
    return changed


def transform(forward, backward, live_out, primal_of):
    """Run the passes to a fixed point; return the new (forward, backward).

    ``primal_of`` maps each adjoint variable to its primal (``h_bar -> h``).
    """
    changed = True
    while changed:
        changed = forward_shapes(forward, backward, primal_of)
        changed = fold_scalar_fills(forward, backward, primal_of) or changed
        backward, c1 = propagate_copies(backward)
        both, c2 = eliminate_dead_code(forward + backward, live_out)
        n_forward = sum(1 for s in both if any(s is f for f in forward))
        forward, backward = both[:n_forward], both[n_forward:]
        changed = changed or c1 or c2
    return forward, backward
