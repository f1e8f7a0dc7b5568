"""Pass 7 — optimize the generated sweeps.

Requires: forward and backward statement lists from ``reverse``.
Guarantees: no dead forward values and no unused adjoints (dead code
elimination), no adjoint that is a mere copy of another (copy propagation),
no forward value kept alive only for its shape (shape forwarding).  The
passes run once each, in the order in which they enable one another, and
each is linear in the code's length (``transform`` says why that order).  The
gradient tests run with the passes on and off (``optimize=False``).

Before (``wrt=x``)::

    return np.sum((x - y) ** 2)

After ``reverse`` (the forward sweep; after ``# backward``, the backward sweep)::

    _t1 = x - y
    _t2 = _t1 ** 2
    result = np.sum(_t2)
    # backward
    _t2_bar = rt.fill_like(_t2, result_bar)
    _t1_bar = _t2_bar * (2 * _t1)
    x_bar = rt.unbroadcast(_t1_bar, x)

After (``_t2`` and ``result`` dead, the seed's fill forwarded into its one use)::

    _t1 = x - y
    # backward
    _t1_bar = result_bar * (2 * _t1)
    x_bar = rt.unbroadcast(_t1_bar, x)
"""
from __future__ import annotations

import copy
import heapq

import gast

from ..anno import Kind
from .. import anno, nodes
from . import coalesce

# The generated code's name for the array module ("np", or "cp" for CuPy), set by transform().
_module = ["np"]
_arrays: set = set()  # names known to hold arrays, for the pass running now
_shared: dict = {}    # name -> the names that may share its memory (analysis/sharing.py)
_names: set = set()   # the names prune_saves's code uses: a new one (`h_shape`) avoids them


def _is_call_to(node, *attrs) -> bool:
    return isinstance(node, gast.Call) and _dotted(node.func) == (_module[0], *attrs)


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
    target = stmt.targets[0] if isinstance(stmt, gast.Assign) else getattr(stmt, "target", None)
    if isinstance(stmt, (gast.Assign, gast.AugAssign)) and isinstance(target, gast.Subscript):
        base = target.value
        return base.id if isinstance(base, gast.Name) else None
    if isinstance(stmt, gast.AugAssign) and isinstance(target, gast.Name):
        return target.id  # v += e updates v in place
    if isinstance(stmt, gast.Expr) and isinstance(stmt.value, gast.Call):
        call = stmt.value
        if _is_call_to(call, "add", "at") and call.args and isinstance(call.args[0], gast.Name):
            return call.args[0].id
    return None


def _defined(stmt):
    if isinstance(stmt, gast.Assign) and isinstance(stmt.targets[0], gast.Name):
        return stmt.targets[0].id
    return None


def _pure(stmt) -> bool:
    return anno.get(stmt, "kind") not in (Kind.UNKNOWN, Kind.SETATTR) and not anno.get(stmt, "impure", False)


def _header_names(stmt) -> set:
    header = stmt.iter if isinstance(stmt, gast.For) else stmt.test
    return set(nodes.loaded_names(header))


def _with_body(stmt, body, orelse=None):
    new = copy.copy(stmt)
    new.body = body
    if orelse is not None:
        new.orelse = orelse
    return new


def _dce_block(stmts, live_out):
    """Dead code elimination on a block; returns (kept statements, names live on entry)."""
    live = set(live_out)
    return _DeadCode().block(stmts, live), live


class _DeadCode:
    """Backward liveness that drops what nothing live reads.

    A branch or a loop body can only change whether the names it binds or writes
    into (and their aliases) are live: it is given those of the live names alone,
    and the rest pass it by.  (Copying every live name into every branch made this
    quadratic: the forward sweep's live set holds what the backward sweep reads.)"""

    def __init__(self):
        self.touched = {}  # id(statement), field -> names its block may bind or write into
        self.reads = {}  # id(statement) -> its loaded names (a loop's body is passed more than once)

    def block(self, stmts, live) -> list:
        """The statements of ``stmts`` kept; ``live`` (after them) becomes the names live before."""
        kept = []
        for stmt in reversed(stmts):
            if isinstance(stmt, gast.Pass):
                continue  # a block left empty gets its `pass` back from _with_body
            if isinstance(stmt, gast.If):
                body, orelse, changes = self._if(stmt, live)
                if not body and not orelse:
                    continue
                for n in changes[0]:
                    live.discard(n)
                live |= changes[1]
                kept.append(_with_body(stmt, body or [gast.Pass()], orelse))
                continue
            if isinstance(stmt, (gast.For, gast.While)):
                body, top = self._loop(stmt, live)
                bound = {n.id for n in nodes.walk(stmt.target) if isinstance(n, gast.Name)} \
                    if isinstance(stmt, gast.For) else set()
                if not body and not bound & live:  # (a loop index read after the loop keeps it)
                    continue
                live |= top
                if isinstance(stmt, gast.For):
                    live -= bound
                    live |= _header_names(stmt)
                kept.append(_with_body(stmt, body or [gast.Pass()]))
                continue
            target, mutated = _defined(stmt), _mutated(stmt)
            if target is not None:
                if target not in live and _pure(stmt):
                    continue
                live.discard(target)
            elif mutated is not None and mutated not in live and not _shared.get(mutated, set()) & live:
                continue  # (a write into `c` is seen through an alias `a = c` that is read later)
            reads = self.reads.get(id(stmt))
            if reads is None:
                reads = self.reads[id(stmt)] = nodes.loaded_names(stmt)
            live.update(reads)
            kept.append(stmt)
        kept.reverse()
        return kept

    def _if(self, stmt, live):
        """Both branches from what is live after the ``if``.  Returns (body, orelse,
        (names no longer live before it, names live before it))."""
        touched_body, touched_else = self._touched(stmt, "body"), self._touched(stmt, "orelse")
        live_body = {n for n in touched_body if n in live}
        body = self.block(stmt.body, live_body)
        live_else = {n for n in touched_else if n in live}
        orelse = self.block(stmt.orelse, live_else)
        before = live_body | live_else | set(nodes.loaded_names(stmt.test))
        # Dead before the `if`: bound on both paths and read on neither.
        dead = {n for n in touched_body & touched_else if n in live and n not in before}
        return body, orelse, (dead, before)

    def _loop(self, stmt, live):
        """The body, and the names live at its top besides ``live``: needed after the
        loop, by the header, or by a later iteration (a fixed point; each round passes
        the body only the live names it binds or writes into)."""
        touched = self._touched(stmt, "body")
        top = _header_names(stmt)  # live at the top, besides `live`
        while True:
            entry = {n for n in touched if n in live or n in top}
            body = self.block(stmt.body, entry)
            new = {n for n in entry if n not in live and n not in top}
            if not new:
                return body, top
            top |= new

    def _touched(self, stmt, field) -> set:
        key = (id(stmt), field)
        if key not in self.touched:
            names = set()
            for inner in getattr(stmt, field):
                if isinstance(inner, (gast.If, gast.For, gast.While)):
                    names |= self._touched(inner, "body") | self._touched(inner, "orelse")
                    if isinstance(inner, gast.For):
                        names |= {n.id for n in nodes.walk(inner.target) if isinstance(n, gast.Name)}
                    continue
                names.update(nodes.assigned_names(inner))
                mutated = _mutated(inner)
                if mutated is not None:
                    names.add(mutated)
                    names |= _shared.get(mutated, set())
            self.touched[key] = names
        return self.touched[key]


def eliminate_dead_code(stmts, live_out) -> tuple[list, bool]:
    kept, _ = _dce_block(stmts, live_out)
    return kept, sum(1 for _ in nodes.statements(kept)) != sum(1 for _ in nodes.statements(stmts))


def _remove(stmts, doomed) -> list:
    out = []
    for stmt in stmts:
        if id(stmt) in doomed:
            continue
        if isinstance(stmt, (gast.If, gast.For, gast.While)):
            stmt.body = _remove(stmt.body, doomed) or [gast.Pass()]
            stmt.orelse = _remove(stmt.orelse, doomed)
        out.append(stmt)
    return out


def propagate_copies(stmts, keep=(), outside=()) -> tuple[list, bool]:
    """After ``a = b``, with both assigned once and never mutated, use one name.

    The name kept is the readable one: a temporary ``_t1_bar`` gives way to
    ``x_bar``, and so does any name in ``keep`` (the adjoints the function
    returns).  ``outside``: names bound before these statements run (the seed,
    parameters, forward values), which count as one more definition.

    Copies are taken in program order.  Joining ``old`` into ``new`` changes no
    name's count of definitions (the copy goes, ``new`` takes ``old``'s one
    definition), so only the copies that mention ``old`` can change their answer:
    those go back on the worklist, and the renaming is done once, at the end.
    """
    inside, mutated, copies = {}, set(), []
    for stmt in nodes.statements(stmts):
        for t in nodes.assigned_names(stmt):
            inside[t] = inside.get(t, 0) + 1
        if (m := _mutated(stmt)) is not None:
            mutated.add(m)
        if _defined(stmt) and isinstance(stmt.value, gast.Name) and anno.get(stmt, "kind") is None:
            copies.append(stmt)

    def once_here(n):  # defined exactly once, by these statements
        return inside.get(n) == 1 and n not in outside

    def never_changes(n):  # one value throughout
        return inside.get(n, 0) + (n in outside) <= 1

    joined = {}

    def find(n):
        while n in joined:
            n = joined[n]
        return n

    mentions = {}
    for i, stmt in enumerate(copies):
        for n in (stmt.targets[0].id, stmt.value.id):
            mentions.setdefault(n, []).append(i)
    worklist, queued, doomed = list(range(len(copies))), set(range(len(copies))), set()
    while worklist:
        i = heapq.heappop(worklist)
        queued.discard(i)
        stmt = copies[i]
        t, src = find(stmt.targets[0].id), find(stmt.value.id)
        if not once_here(t) or not never_changes(src) or {t, src} & mutated or src in keep:
            continue
        prefer_t = t in keep or (src.startswith("_") and not t.startswith("_"))
        if prefer_t and not once_here(src):
            if t in keep:
                continue  # src is a parameter or primal: keep the copy
            prefer_t = False
        old, new = (src, t) if prefer_t else (t, src)
        doomed.add(id(stmt))
        if old == new:
            continue
        joined[old] = new
        inside[new] = inside.get(old, 0) + inside.get(new, 0) - 1
        for j in mentions.pop(old, []):
            mentions.setdefault(new, []).append(j)
            if j not in queued and id(copies[j]) not in doomed:
                queued.add(j)
                heapq.heappush(worklist, j)
    if not doomed:
        return stmts, False
    out = _remove(stmts, doomed)
    nodes.rename(out, {n: find(n) for n in joined})
    return out, True


def _same_shape_map(forward) -> dict:
    """name -> a name known to have the same shape: elementwise results of one array
    and scalars share that array's shape."""
    same = {}
    multiple = _multiply_assigned(forward)
    last = {}  # name -> where the forward sweep binds it last
    for i, stmt in enumerate(nodes.statements(forward)):
        for t in nodes.assigned_names(stmt):
            last[t] = i
    for i, stmt in enumerate(nodes.statements(forward)):
        if _defined(stmt) in multiple:
            continue
        rule = anno.get(stmt, "rule")
        if anno.get(stmt, "kind") == Kind.OP and rule.elementwise:
            bound = list(anno.get(stmt, "bound").values())
            arrays = [a for a in bound if isinstance(a, gast.Name)]
            scalars = all(isinstance(a, gast.Constant) and (a.value is None or type(a.value) in (int, float))
                          for a in bound if not isinstance(a, gast.Name))
            # (not a name bound again later, a loop's carried one: the backward sweep may
            # read it when it holds another value, of another shape)
            if len(arrays) == 1 and scalars and last.get(arrays[0].id, -1) < i:
                same[stmt.targets[0].id] = arrays[0].id
    return same


def _multiply_assigned(stmts) -> set:
    seen, multiple = set(), set()
    for stmt in nodes.statements(stmts):
        for t in nodes.assigned_names(stmt):
            (multiple if t in seen else seen).add(t)
    return multiple


def _root(name, same):
    seen = set()
    while name in same and name not in seen:
        seen.add(name)
        name = same[name]
    return name


def _is_full_like(node) -> bool:
    """``np.full_like(t, v)`` or ``rt.fill_like(t, v)`` (a reduction's adjoint, whose dtype
    is float even where ``t``'s, or the array forwarded for its shape, is an integer)."""
    return (_is_call_to(node, "full_like") or isinstance(node, gast.Call)
            and _dotted(node.func) == ("rt", "fill_like")) \
        and len(node.args) == 2 and not node.keywords and isinstance(node.args[0], gast.Name)


def forward_shapes(backward, same) -> bool:
    """``np.full_like(t, v)`` reads only ``t``'s shape and dtype; where ``t`` is an
    elementwise function of one array ``s`` and scalars (``same``: ``_same_shape_map``),
    read ``s`` instead, so ``t`` need not be computed."""
    changed = False
    for stmt in backward:
        for node in nodes.walk(stmt):
            if _is_full_like(node) and node.args[0].id in same:
                node.args[0].id = _root(node.args[0].id, same)
                changed = True
    return changed


def fold_scalar_fills(backward, same) -> bool:
    """``v = np.full_like(s, c)`` then ``v * e`` with ``e`` of ``s``'s shape: use ``c``
    (``same``: ``_same_shape_map``'s, and each adjoint has its primal's shape).

    The adjoint of a full reduction is a scalar broadcast to the input's shape;
    multiplying by it needs no array of copies: the adjoint of ``np.sum(_t1 ** 2)`` is
    ``_t1_bar = 2.0 * _t1 * result_bar``.
    """
    fills = {}
    multiple = _multiply_assigned(backward)
    for stmt in nodes.statements(backward):
        t = _defined(stmt)
        if t in multiple:
            continue
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
        for node in nodes.walk(stmt):
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


def _owned_accumulators(backward) -> set:
    """Adjoints we may update in place: every assignment to them is ``np.zeros_like``
    or ``v = v + e`` (so each value is a fresh array), and no other name is bound
    to them (so nothing else sees the update)."""
    kinds, aliased = {}, set()
    for stmt in nodes.statements(backward):
        if isinstance(stmt, gast.AugAssign) and isinstance(stmt.target, gast.Name):
            continue  # v += e: already in place on an owned accumulator
        t = _defined(stmt)
        if t is not None:
            v = stmt.value
            fresh = _is_call_to(v, "zeros_like")
            accumulating = isinstance(v, gast.BinOp) and isinstance(v.op, gast.Add) \
                and isinstance(v.left, gast.Name) and v.left.id == t
            kinds[t] = kinds.get(t, True) and (fresh or accumulating)
            if isinstance(v, gast.Name):
                aliased.add(v.id)
        elif isinstance(stmt, gast.Assign):
            kinds.update({n: False for n in nodes.assigned_names(stmt)})
        # A call may hand its argument back (rt.unbroadcast, a pullback of the
        # identity): an accumulator passed to one may be shared afterwards.
        simple = not isinstance(stmt, (gast.If, gast.For, gast.While))
        for node in (nodes.walk(stmt) if simple else ()):
            if isinstance(node, gast.Call) and not _is_call_to(node, "add", "at"):
                aliased.update(a.id for a in node.args if isinstance(a, gast.Name))
    return {t for t, ok in kinds.items() if ok} - aliased


def accumulate_in_place(backward) -> bool:
    """``t = np.zeros_like(x); t[i] = g; x_bar = x_bar + t``  →  ``x_bar[i] += g``.

    The adjoint of reading ``x[i]`` is a scatter into zeros; adding that to an
    accumulator we own is done in place, as a person would write it, instead
    of allocating a full-size array per read (per iteration, in a loop).
    """
    owned = _owned_accumulators(backward)
    loads = {}
    for n in nodes.loaded_names(nodes.module(backward)):
        loads[n] = loads.get(n, 0) + 1
    changed = False
    for block in _blocks(backward):
        out, i = [], 0  # (a new list: replacing in place would shift the rest of the block each time)
        while i < len(block):
            first, scatter, add = (block[i: i + 3] + [None, None])[:3]
            temp = _defined(first)
            if (temp and add is not None and _is_call_to(first.value, "zeros_like")
                    and _mutated(scatter) == temp and loads.get(temp) == 2
                    and _defined(add) in owned and isinstance(add.value, gast.BinOp)
                    and isinstance(add.value.op, gast.Add) and isinstance(add.value.right, gast.Name)
                    and add.value.right.id == temp):
                acc = _defined(add)
                if isinstance(scatter, gast.Assign):  # basic index: no repeats
                    target = gast.Subscript(value=nodes.name(acc), slice=scatter.targets[0].slice,
                                            ctx=gast.Store())
                    new = gast.AugAssign(target=target, op=gast.Add(), value=scatter.value)
                else:  # np.add.at(temp, index, g)
                    scatter.value.args[0] = nodes.name(acc)
                    new = scatter
                anno.inherit(new, add)
                out.append(new)
                i += 3
                changed = True
            else:
                out.append(first)
                i += 1
        block[:] = out
    return changed


def add_in_place(backward) -> bool:
    """``v_bar = v_bar + e`` → ``v_bar += e`` for accumulators we own (made by
    ``zeros_like``, never bound to another name): no new array per contribution."""
    owned = _owned_accumulators(backward)
    changed = False
    for block in _blocks(backward):
        for i, stmt in enumerate(block):
            target = _defined(stmt)
            if target in owned and isinstance(stmt.value, gast.BinOp) and isinstance(stmt.value.op, gast.Add) \
                    and isinstance(stmt.value.left, gast.Name) and stmt.value.left.id == target:
                new = gast.AugAssign(target=nodes.name(target, "store"), op=gast.Add(), value=stmt.value.right)
                anno.inherit(new, stmt)
                block[i] = new
                changed = True
    return changed


def _blocks(stmts):
    """Every statement list in a tree: the top one and each body and else block."""
    yield stmts
    for stmt in stmts:
        for field in ("body", "orelse"):
            inner = getattr(stmt, field, None)
            if inner:
                yield from _blocks(inner)


def _elements(target):
    return target.elts if isinstance(target, gast.Tuple) else [target]


def prune_saves(forward, backward, live_out=()) -> tuple[list, list, bool]:
    """Save on a stack only what the (optimized) backward sweep reads.

    A name popped at the top of a backward block (a loop body or a branch) is
    needed if the rest of that block reads it, or if backward code that runs
    after the block does (a carried name must get back its value from before
    the forward loop).  Blocks are pruned inside out, so an enclosing block's
    pop may still change reads (to a saved shape) that an inner pop was kept
    for: a last look drops what the backward sweep no longer reads anywhere
    (``live_out``: names read after it).
    """
    pushes = {anno.get(s, "save_id"): s for s in nodes.statements(forward)
              if isinstance(s, gast.Expr) and anno.has(s, "save_id")}
    _names.clear()
    _names.update(set(live_out), *(nodes.names_in(s) for s in forward + backward))
    read = set()  # what the backward sweep reads once its blocks are pruned
    changed = _prune_block(backward, (), pushes, read)
    changed |= _prune_unread(backward, pushes, read | set(live_out))
    if changed:
        doomed = {id(s) for s in pushes.values() if s.value is None}
        forward = _remove(forward, doomed)
        used = {anno.get(s, "stack") for s in nodes.statements(forward)
                if isinstance(s, gast.Expr) and anno.has(s, "stack")}
        forward = _remove(forward, {id(s) for s in nodes.statements(forward)
                                    if anno.has(s, "stack") and anno.get(s, "stack") not in used})
    return forward, backward, changed


def _prune_unread(backward, pushes, read) -> bool:
    """Drop from each pop the names not in ``read`` (what ``backward`` and the code after it read)."""
    changed = False
    for block in _blocks(backward):
        for field_owner in block:
            for field in ("body", "orelse"):
                inner = getattr(field_owner, field, None)
                if inner and anno.has(inner[0], "save_id") and isinstance(inner[0], gast.Assign):
                    names = [t.id for t in _elements(inner[0].targets[0])]
                    keep = [n for n in names if n in read]
                    if keep != names:
                        _keep_popped(field_owner, field, pushes, names, keep)
                        changed = True
    return changed


def _keep_popped(owner, field, pushes, names, keep):
    """Pop (and push) only ``keep`` of ``names``: the pop at the top of ``owner``'s
    ``field`` block; a push left with nothing is marked (``value = None``) for removal."""
    block = getattr(owner, field)
    pop = block[0]
    push = pushes[anno.get(pop, "save_id")]
    if not keep:
        setattr(owner, field, block[1:] or ([gast.Pass()] if field == "body" else []))
        push.value = None  # removed by the caller
        return
    values = list(_elements(push.value.args[0]))
    many = len(keep) > 1
    kept_values = [v for n, v in zip(names, values) if n in keep]
    pop.targets = [nodes.tuple_([nodes.name(n, "store") for n in keep], "store") if many
                   else nodes.name(keep[0], "store")]
    push.value.args = [nodes.tuple_(kept_values) if many else kept_values[0]]


def _loads(stmts) -> set:
    return {n for s in stmts for n in nodes.loaded_names(s)}


def _read(name, after) -> bool:
    """Whether ``name`` is in one of the sets of ``after`` (read later)."""
    return any(name in names for names in after)


def _prune_block(block, after, pushes, later=None) -> bool:
    """``after``: sets of names read by backward code that runs once ``block`` is done.

    The block is walked from its end, gathering what its later statements read
    as it goes (each statement's reads are added once, after it is pruned), so
    every pop sees the reads of code already pruned, in one pass.  ``later``, if
    given, gets them: what the pruned block reads (pruning a pop changes no read
    of code already gathered)."""
    changed = False
    later = set() if later is None else later
    for i in reversed(range(len(block))):
        stmt = block[i]
        chain = (later, *after)
        for field in ("body", "orelse"):
            inner = getattr(stmt, field, None)
            if not inner:
                continue
            # Inside a loop, a nested block's values may be read by the next iteration.
            # (Nested blocks first: a loop they leave empty reads nothing in its header.)
            nested = (_loads(inner), *chain) if isinstance(stmt, (gast.For, gast.While)) else chain
            changed |= _prune_block(inner, nested, pushes)
            if not inner and field == "body":
                inner.append(gast.Pass())
            if anno.has(inner[0], "save_id"):
                # A loop body's own pop runs again before the next iteration reads anything.
                changed |= _prune_pop(stmt, field, chain, pushes)
        if _emptied(stmt, chain):
            # Its pop was all it did: drop it here, as dead code elimination would,
            # so that what its header reads is not kept on a stack for it.
            del block[i]
            changed = True
            continue
        later.update(nodes.loaded_names(stmt))
    return changed


def _emptied(stmt, after) -> bool:
    """A branch or loop left with nothing to do (a loop's index read later still counts)."""
    if not isinstance(stmt, (gast.If, gast.For, gast.While)) or stmt.orelse and not isinstance(stmt, gast.If):
        return False
    if any(not isinstance(s, gast.Pass) for s in stmt.body + stmt.orelse):
        return False
    bound = [n.id for n in nodes.walk(stmt.target) if isinstance(n, gast.Name)] \
        if isinstance(stmt, gast.For) else []
    return not any(_read(n, after) for n in bound)


def _shape_only(stmts) -> dict:
    """name -> the ``rt.unbroadcast(g, name)`` calls in ``stmts``, for the names they
    are all the uses of."""
    calls, uses = {}, {}
    for stmt in stmts:
        for node in nodes.walk(stmt):
            if isinstance(node, gast.Name) and isinstance(node.ctx, gast.Load):
                uses[node.id] = uses.get(node.id, 0) + 1
            if isinstance(node, gast.Call) and _dotted(node.func) == ("rt", "unbroadcast") \
                    and len(node.args) == 2 and isinstance(node.args[1], gast.Name):
                calls.setdefault(node.args[1].id, []).append(node)
    return {n: c for n, c in calls.items() if len(c) == uses.get(n)}


def _prune_pop(owner, field, after, pushes) -> bool:
    block = getattr(owner, field)
    pop = block[0]
    push = pushes[anno.get(pop, "save_id")]
    names = [t.id for t in _elements(pop.targets[0])]
    values = list(_elements(push.value.args[0])) if push.value is not None else []
    shapes = False
    shape_only = _shape_only(block[1:])
    for i, name in enumerate(names):
        calls = [] if _read(name, after) or not isinstance(values[i], gast.Name) else shape_only.get(name, [])
        if calls:  # the backward sweep reads only its shape: save the shape, not the array
            shape_name = nodes.fresh_name(f"{name}_shape", _names)  # (a user's `h_shape` keeps its own)
            values[i] = gast.Attribute(value=nodes.name(name), attr="shape", ctx=gast.Load()) \
                if name in _arrays else nodes.call(f"{_module[0]}.shape", [nodes.name(name)])
            names[i] = shape_name
            for call in calls:
                call.func = nodes.dotted("rt.unbroadcast_to")
                call.args[1] = nodes.name(shape_name)
            shapes = True
    if shapes:
        many = len(names) > 1
        pop.targets = [nodes.tuple_([nodes.name(n, "store") for n in names], "store") if many
                       else nodes.name(names[0], "store")]
        push.value.args = [nodes.tuple_(values) if many else values[0]]
    here = _loads(block[1:])
    keep = [n for n in names if n in here or _read(n, after)]
    if keep == names:
        return shapes
    _keep_popped(owner, field, pushes, names, keep)
    return True


# np.f(x, ...) -> x.f(...) for an array x: the same NumPy code without the Python
# wrapper around it (np.reshape costs 0.77 us against 0.13 us for the method; measured).
_METHOD_FORMS = {"reshape": 2, "transpose": 2, "max": 2, "min": 2, "sum": 2, "mean": 2}
_REDUCTION_KEYWORDS = {"axis", "keepdims"}


def method_forms(forward, backward, arrays) -> None:
    """Call NumPy's array methods, not its functions, on names known to hold arrays
    (``arrays``: a rank above 0, or the adjoint of such a name, which has its shape):
    ``np.reshape(h, s)`` becomes ``h.reshape(s)``, ``np.shape(h)`` ``h.shape``.  For an
    array the two are the same NumPy call (CuPy's too); the function only adds a
    Python wrapper that dispatches to the method.  ``np.zeros_like(h)`` becomes
    ``np.zeros(h.shape, h.dtype)``: the same zeros (in C order), without the
    wrapper that reads ``h``'s subclass and memory order."""
    def rewrite(node):
        if not isinstance(node, gast.Call) or not node.args or not isinstance(node.args[0], gast.Name) \
                or node.args[0].id not in arrays or any(isinstance(a, gast.Starred) for a in node.args):
            return None
        name = _dotted(node.func)
        if name is None or len(name) != 2 or name[0] != _module[0]:
            return None
        array, rest = node.args[0], node.args[1:]
        if name[1] == "shape" and not rest and not node.keywords:
            return gast.Attribute(value=array, attr="shape", ctx=gast.Load())
        if name[1] == "zeros_like" and not rest and not node.keywords:  # (1.8 us against 0.5 us: measured)
            return nodes.call(f"{_module[0]}.zeros", [gast.Attribute(value=array, attr=a, ctx=gast.Load())
                                                       for a in ("shape", "dtype")])
        most = _METHOD_FORMS.get(name[1])
        if most is None or len(node.args) > most:
            return None
        if name[1] in ("reshape", "transpose") and node.keywords:
            return None
        if name[1] not in ("reshape", "transpose") and any(k.arg not in _REDUCTION_KEYWORDS for k in node.keywords):
            return None
        return nodes.call(gast.Attribute(value=array, attr=name[1], ctx=gast.Load()), rest,
                          [(k.arg, k.value) for k in node.keywords])

    class Methods(nodes.Transformer):
        def visit_Call(self, node):
            self.generic_visit(node)  # (the inner call first: np.reshape(g, np.shape(h)))
            return rewrite(node) or node

    for block in (forward, backward):
        for stmt in block:
            Methods().visit(stmt)


def transform(forward, backward, live_out, primal_of, module_name="np", outside=(), arrays=(), seed=None,
              shared=None, methods=True):
    """Run the passes, each once; return the new (forward, backward).

    ``primal_of`` maps each adjoint variable to its primal (``h_bar -> h``);
    ``module_name`` is the generated code's array module (``np``, ``cp``);
    ``arrays``: names known to hold arrays (``x.shape`` rather than ``np.shape(x)``;
    with ``methods``, ``h.reshape(s)`` rather than ``np.reshape(h, s)`` too);
    ``outside``: names bound before the backward sweep runs, of which ``seed`` is
    the output's adjoint; ``shared``: name -> the names that may share its memory
    (a write into one is kept while another is read later).
    """
    _module[0] = module_name
    _arrays.clear()
    _arrays.update(arrays)
    _shared.clear()
    _shared.update(shared or {})
    # One sweep, each pass once, in the order in which they enable one another
    # (no whole-program rounds: each pass is linear, and none undoes another's work):
    # - copies first: a copy aliases an accumulator (`a = x_bar`), which keeps it from
    #   being updated in place, and hides a fill from fold_scalar_fills;
    # - shapes and fills next: they leave forward values and fills unread, for DCE;
    # - dead code before accumulating in place: that rewrites three adjacent statements,
    #   which dead ones between them would keep apart;
    # - saves after the backward sweep is final (they keep what it reads), and the
    #   forward sweep's dead code last (a dropped save leaves its values unread).
    forward_names = {n for s in nodes.statements(forward) for n in nodes.assigned_names(s)}
    backward, _ = propagate_copies(backward, keep=live_out, outside=set(outside) | forward_names)
    shapes = _same_shape_map(forward)  # (forward_shapes changes the backward sweep only)
    forward_shapes(backward, shapes)
    fold_scalar_fills(backward, {**primal_of, **shapes})
    backward, _ = _dce_block(backward, live_out)
    accumulate_in_place(backward)
    add_in_place(backward)
    forward, backward, _ = prune_saves(forward, backward, live_out)
    backward, live = _dce_block(backward, live_out)
    forward, _ = _dce_block(forward, live)
    if methods:
        method_forms(forward, backward, _arrays | {a for a, p in primal_of.items() if p in _arrays})
    # Last: the passes above rely on single assignment (a name bound once has one
    # value), which joining names gives up; joining removes copies and nothing else.
    return _coalesce(forward, backward, live_out, outside, seed)


def _coalesce(forward, backward, live_out, outside, seed):
    """Join names that copies connect (``coalesce``), in each sweep on its own.

    The backward sweep renames only its own adjoints (it reads forward values
    and may put some back, which the pullback's local copies rely on); the
    forward sweep renames only names the backward sweep never mentions."""
    params = set(outside)
    forward_names = {n for s in forward for n in nodes.names_in(s)}  # (a loop's walk covers its body)
    before = params | forward_names
    # An array written in place keeps its own name: joined with a name that elsewhere holds
    # another array (`padded = x` in the other branch), the code would read as a write that
    # may reach that array, which srcgrad refuses when it transforms this code again (hvp).
    written = {n.value.id for s in forward + backward for n in nodes.walk(s)
               if isinstance(n, gast.Subscript) and isinstance(n.ctx, gast.Store) and isinstance(n.value, gast.Name)}
    backward, _ = coalesce.transform(backward, live_out, fixed={seed}, kept=(before - {seed}) | written,
                                     entry=before)
    backward_names = {n for s in backward for n in nodes.names_in(s)}
    forward, _ = coalesce.transform(forward, set(live_out) | backward_names, kept=written,
                                    fixed=backward_names | set(live_out) | params, entry=params)
    return forward, backward


def _count(stmts) -> int:
    return sum(1 for _ in nodes.statements(stmts))
