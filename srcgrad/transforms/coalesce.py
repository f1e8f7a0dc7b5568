"""Pass 7 (optimize's last step) — coalesce: two names joined by a copy become one name.

Requires: a sweep (forward or backward statement list) and the names it may
not rename.
Guarantees: after ``a = b``, where ``a`` and ``b`` never hold different values
that are both still needed, every ``a`` is spelled ``b`` (or the other way
round) and the copy, now ``b = b``, is gone.  That is what a person writes
where single assignment put a copy: the adjoint of a loop-carried name handed
to its new version at the top of each backward iteration, a branch's value
handed to the name after the ``if`` in both branches, a flag set and copied
back.

Why it is safe: this is register coalescing (Chaitin).  ``a`` and ``b``
*interfere* when one is bound at a point where the other still holds a value
that a later read needs (is live), unless that binding is a copy between the
two (then they hold the same value anyway).  Two names that never interfere
can share one name: at every read, the shared name holds what the original
name held.  Liveness is computed on the structured code (branches join, a loop's
body is live on entry with what it reads before binding it), names bound before
the sweep runs count as bound at its entry, and names a nested function reads are never renamed (it may run
later, when the shared name holds something else).

Before (``wrt=a``)::

    s = 0.0
    for t in range(3):
        if c:
            s = s + a * t
    return s

After ``reverse`` (its backward sweep: single assignment's copies of ``s``'s adjoint)::

    for t in reversed(range(3)):
        s = loop1_stack.pop()
        s_3_bar = s_bar
        if c:
            s_2_bar = s_3_bar
            s_bar = s_2_bar
            _t1_bar = s_2_bar
            a_bar = a_bar + _t1_bar * t
        else:
            s_bar = s_3_bar

After (``optimize``, which coalesces each sweep: one name, no copies)::

    for t in reversed(range(3)):
        if c:
            a_bar += s_bar * t
"""
from __future__ import annotations

import heapq
import re

import gast

from .. import anno, nodes

_SIMPLE = (gast.Assign, gast.AugAssign, gast.Expr, gast.Pass, gast.Return)


def transform(stmts, live_out, fixed=(), kept=(), entry=()) -> tuple[list, dict]:
    """Coalesce copies in ``stmts`` until none is left that may be.

    Args:
        stmts: the sweep's statements (changed in place and returned).
        live_out: names read after the sweep.
        fixed: names never renamed away (they may survive a coalescing).
        kept: names that must not be bound anywhere new (not even survive).
        entry: names bound before the sweep runs.

    Returns:
        (statements, {removed name: the name it became}).

    Liveness and interference are computed once; joining two names unites their
    entries (what one name holds where the other was live is what the joined
    name holds, since the two never interfere), so each copy is looked at again
    only when one of its names has just been joined.  Copies are taken in program
    order, the first one that may be joined first.
    """
    facts = _Facts()
    _sink_rebindings(stmts, facts)
    live_out, fixed = set(live_out), set(fixed)
    copies = [s for s in nodes.statements(stmts) if (c := _copy(s)) and c[0] != c[1]]
    if not copies:
        return stmts, {}
    banned = set(kept) | _unmodelled(stmts, facts) | _global(stmts, entry, facts)
    joined = {}

    def find(n):
        root = n
        while root in joined:
            root = joined[root]
        while n != root:  # (point the chain at its end: joins may make long ones)
            joined[n], n = root, joined[n]
        return root

    pairs = [_copy(s) for s in copies]
    interference = _Interference(stmts, live_out, entry, pairs, find, facts)
    mentions = {}
    for i, pair in enumerate(pairs):
        for n in pair:
            mentions.setdefault(n, []).append(i)
    rejected = {}  # name -> copies of it not joined because the two names interfered
    worklist, queued = list(range(len(copies))), set(range(len(copies)))
    while worklist:
        i = heapq.heappop(worklist)
        queued.discard(i)
        a, b = map(find, pairs[i])
        if a == b or a in banned or b in banned:
            continue
        # Keep the nicer name; a fixed name is never renamed away.
        old, new = sorted((a, b), key=_version, reverse=True)
        if old in fixed:
            old, new = new, old
        if old in fixed or old in live_out:
            continue
        if interference.between(a, b):
            rejected.setdefault(a, set()).add(i)
            rejected.setdefault(b, set()).add(i)
            continue
        joined[old] = new
        moved, stayed = mentions.pop(old, []), mentions.setdefault(new, [])
        # The copies between the two are now ``new = new``: their points go.
        gone = interference.join(old, new, [copies[j] for j in moved if len(set(map(find, pairs[j]))) == 1])
        stayed.extend(moved)
        # Look again at the copies that were renamed, and at those whose names
        # interfered perhaps only at the points that went.
        waiting, others = rejected.pop(new, set()), rejected.pop(old, set())
        if len(others) > len(waiting):
            waiting, others = others, waiting
        waiting |= others
        there = interference.live_names(gone) if waiting else ()
        again = list(moved)
        for j in list(waiting):
            x, y = map(find, pairs[j])
            if x == y:
                waiting.discard(j)  # joined since
            elif j not in queued and (other := y if x == new else x) in there \
                    and interference.live_at_any(other, gone):
                again.append(j)
        rejected[new] = waiting
        for j in again:
            if j not in queued:
                queued.add(j)
                heapq.heappush(worklist, j)
    if not joined:
        return stmts, {}
    renamed = {old: find(old) for old in joined}
    nodes.rename(stmts, renamed)  # (the optimizer reads `bound` atoms too)
    return _drop_self_copies(stmts), renamed


def _sink_rebindings(stmts, facts):
    """With copies ``a = ... = b`` somewhere, move each ``b = f(a)`` below the statements
    after it that only read ``a`` (same source line, nothing else in common with it), so
    that ``b`` gets its new value once ``a`` is no longer needed and the two can join::

        x_2_bar = x_bar                        x_2_bar = x_bar
        x_bar = x_2_bar * w              →     w_bar += x_2_bar * x
        w_bar += x_2_bar * x                   x_bar = x_2_bar * w

    ``a`` and ``b`` are linked by a chain of copies, not only one: the joins that
    chain leads to are what let them join, and sinking first, once, sees them all.

    Safe: neither the moved statement nor one it crosses binds or changes in place
    a name the other mentions, and both call only ``np.``/``rt.`` functions, so
    nothing runs that could see the order (a user's hook, a pullback)."""
    pairs = {c for s in nodes.statements(stmts) if (c := _copy(s))}
    sources = {}  # a -> the names copied into it
    for a, b in pairs:
        sources.setdefault(a, set()).add(b)

    def copied_from(a, b) -> bool:
        """``a = ... = b``: a short chain of copies (a longer one is rare, and left)."""
        seen, frontier = {a}, [a]
        while frontier and len(seen) < 16:
            n = frontier.pop()
            for s in sources.get(n, ()):
                if s == b:
                    return True
                if s not in seen:
                    seen.add(s)
                    frontier.append(s)
        return False
    for block in _blocks(stmts):
        last = {}  # name -> the last statement of the block that mentions it
        for stmt in block:
            for n in facts.names(stmt):
                last[n] = stmt
        done, j = set(), 0
        while j < len(block):
            moved = block[j]
            # (a statement that mentions no copy's target has no link: neither walked
            # again; one not movable is in `done` too, which only stops crossing it,
            # as `_crossable` does)
            if id(moved) in done or facts.names(moved).isdisjoint(sources) or not facts.movable(moved):
                done.add(id(moved))
                j += 1
                continue
            done.add(id(moved))
            uses = facts.uses(moved)
            links = sorted(((a, b) not in pairs, a, b) for b in _defs(moved) for a in uses
                           if a != b and copied_from(a, b))
            if not links:
                j += 1
                continue
            a = links[0][1]
            k = j
            # (not past a statement moved already: two that read each other's old
            # values would only trade places)
            while k + 1 < len(block) and id(block[k + 1]) not in done \
                    and _crossable(block[k + 1], moved, a, facts):
                k += 1
            crossed = {id(s) for s in block[j:k + 1]}
            if k > j and id(last.get(a)) in crossed:  # nothing after them mentions ``a``
                block[j:k + 1] = block[j + 1:k + 1] + [moved]
                for n in facts.names(moved):
                    if id(last.get(n)) in crossed:
                        last[n] = moved
            else:
                j += 1


def _blocks(stmts):
    yield stmts
    for stmt in stmts:
        if isinstance(stmt, (gast.If, gast.For, gast.While)):
            yield from _blocks(stmt.body)
            yield from _blocks(stmt.orelse)


class _Facts:
    """What each statement mentions, found once (statements are moved, not changed,
    until the renaming at the end): names, reads, whether it may be moved, and the
    names it binds where this pass does not look; one walk of a simple statement."""

    def __init__(self):
        self._names, self._uses, self._movable, self._unmodelled = {}, {}, {}, {}

    def names(self, stmt) -> set:
        found = self._names.get(id(stmt))
        if found is None:
            if isinstance(stmt, (gast.If, gast.For, gast.While)):  # (each nested statement walked once)
                found = set()
                for field in stmt._fields:
                    value = getattr(stmt, field, None)
                    if field in ("body", "orelse"):
                        for inner in value:
                            found |= self.names(inner)
                    elif isinstance(value, gast.AST):
                        found |= nodes.names_in(value)
                self._names[id(stmt)] = found
            else:
                found = self._scan(stmt)
        return found

    def uses(self, stmt) -> set:
        if id(stmt) not in self._uses:
            self._scan(stmt)
        return self._uses[id(stmt)]

    def movable(self, stmt) -> bool:
        """An assignment that calls only pure ``np.``/``rt.`` functions (not ``np.random``)
        and that ``_unmodelled`` leaves to this pass."""
        if not isinstance(stmt, (gast.Assign, gast.AugAssign)):
            return False
        if id(stmt) not in self._movable:
            self._scan(stmt)
        return self._movable[id(stmt)]

    def unmodelled(self, stmt) -> set:
        """``_unmodelled`` of a statement that is not a branch or a loop."""
        if id(stmt) not in self._unmodelled:
            self._scan(stmt)
        return self._unmodelled[id(stmt)]

    def _scan(self, stmt) -> set:
        """The facts of a statement that is not a branch or a loop; returns its names."""
        targets = _defs(stmt)
        names, loads, odd = set(), set(), set()
        movable = isinstance(stmt, (gast.Assign, gast.AugAssign))
        for node in nodes.walk(stmt):
            if isinstance(node, gast.Name):
                names.add(node.id)
                if isinstance(node.ctx, gast.Load):
                    loads.add(node.id)
                elif node.id not in targets:
                    odd.add(node.id)
                    movable = False
            elif isinstance(node, gast.Call):
                if movable:
                    parts, func = [], node.func
                    while isinstance(func, gast.Attribute):
                        parts.append(func.attr)
                        func = func.value
                    if not (isinstance(func, gast.Name) and func.id in ("np", "rt") and parts) \
                            or "random" in parts or (func.id == "rt" and parts[-1] in _NOT_PURE):
                        movable = False
            elif isinstance(node, (gast.Lambda, gast.FunctionDef)):
                inner = nodes.names_in(node)
                if inner:
                    odd |= inner
                    movable = False
        if isinstance(stmt, gast.AugAssign) and isinstance(stmt.target, gast.Name):
            loads.add(stmt.target.id)
        key = id(stmt)
        self._names[key], self._uses[key], self._movable[key] = names, loads, movable
        self._unmodelled[key] = odd if isinstance(stmt, _SIMPLE) else names
        return names


def _crossable(stmt, moved, a, facts) -> bool:
    """Whether ``moved`` may go below ``stmt``: neither binds or changes in place a
    name the other mentions (reading the same names is fine)."""
    def writes(s):
        return _defs(s) | _mutated(s)
    return facts.movable(stmt) and not writes(stmt) & facts.names(moved) \
        and not writes(moved) & facts.names(stmt) and a in facts.uses(stmt) \
        and anno.get(stmt, "group") is anno.get(moved, "group")


# ``rt.`` functions that run user code (a callee's pullback) or check and raise.
_NOT_PURE = {"vjp_call", "vjp_method", "bind_vjp", "check_scalar_output", "scalar_seed", "size_one_seed", "unpop", "to_device", "to_host"}


def _mutated(stmt) -> set:
    """Names whose object a statement changes in place (``v[i] += e``, ``v[i] = e``)."""
    targets = stmt.targets if isinstance(stmt, gast.Assign) else [stmt.target]
    return {n.value.id for t in targets for n in nodes.walk(t)
            if isinstance(n, gast.Subscript) and isinstance(n.value, gast.Name)}


def _copy(stmt):
    """``(target, source)`` of a plain ``a = b`` between two names, else None."""
    if isinstance(stmt, gast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], gast.Name) \
            and isinstance(stmt.value, gast.Name):
        return stmt.targets[0].id, stmt.value.id
    return None


def _version(name):
    """Sort key that prefers ``s_bar`` to ``s_3_bar``, ``x_2`` to ``x_4``, names to temporaries."""
    core = name.removesuffix("_bar")
    m = re.fullmatch(r".*?_?(\d+)", core)
    number = int(m.group(1)) if m else 1
    return (name.startswith("_t"), name.startswith("_"), number, len(name), name)


def _unmodelled(stmts, facts) -> set:
    """Names this pass leaves alone: read in a nested function, bound where it does
    not look (a comprehension's or walrus's target, ``a, *b = ...``), or in a
    statement it does not model (``with``, ``del``, ``global``)."""
    names = set()
    for stmt in stmts:
        if not isinstance(stmt, (gast.If, gast.For, gast.While)):
            names |= facts.unmodelled(stmt)
            continue
        names |= _unmodelled(stmt.body, facts) | _unmodelled(stmt.orelse, facts)
        header = [stmt.test] if not isinstance(stmt, gast.For) else [stmt.iter, stmt.target]
        targets = {stmt.target.id} if isinstance(stmt, gast.For) and isinstance(stmt.target, gast.Name) \
            else set()
        for root in header:
            for node in nodes.walk(root):
                if isinstance(node, (gast.Lambda, gast.FunctionDef)):
                    names |= nodes.names_in(node)
                elif isinstance(node, gast.Name) and not isinstance(node.ctx, gast.Load) \
                        and node.id not in targets:
                    names.add(node.id)
    return names


def _global(stmts, entry, facts) -> set:
    """Names read but never bound here nor before (globals, builtins): binding one
    anywhere would make it local to the whole function."""
    bound = {n for s in nodes.statements(stmts) for n in _defs(s)} | set(entry)
    return {n for s in stmts for n in facts.names(s)} - bound


def _defs(stmt) -> set:
    """Names a simple statement binds (an in-place ``v += e`` binds ``v`` again)."""
    if isinstance(stmt, gast.AugAssign):
        return {stmt.target.id} if isinstance(stmt.target, gast.Name) else set()
    return set(nodes.assigned_names(stmt))


class _Interference:
    """For each binding point: the names bound there, the names live just after, and
    the name copied from (``a = b``); indexed by name.

    Liveness is tracked for the names of copies only, and at a binding point only
    for the names that copies connect to a name bound there (only those are ever
    asked about: two names are joined only along copies).  It is computed in one
    backward walk: a loop's body is walked once, knowing what is live at its top,
    which is what is live after the loop plus what the body reads before binding
    it (``_exposed``: a first walk of the body that records nothing)."""

    def __init__(self, stmts, live_out, entry, pairs, find, facts):
        self.find, self.facts = find, facts
        parent = {}

        def root(n):
            while parent.setdefault(n, n) != n:
                parent[n] = n = parent[parent[n]]
            return n
        for a, b in pairs:
            parent[root(a)] = root(b)
        self.component = {n: root(n) for n in parent}  # name -> one name of its copy-connected set
        self.names = set(self.component)
        self.exposed = {}  # id(loop) -> its body's live set on entry when nothing is live after it
        self.recording = True
        self.points = []  # (bound names, live after (connected names), copied-from name or None, statement)
        live_in = self._names(self._block(stmts, self._live(set(live_out) & self.names)))
        # Names with a value from before the sweep are bound together at its entry.
        self.points.append(((set(entry) & self.names) | live_in, live_in, None, None))
        self.bound_at, self.live_at, self.point_of = {}, {}, {}
        for i, (bound, live, _, stmt) in enumerate(self.points):
            for n in bound & self.names:
                self.bound_at.setdefault(n, set()).add(i)
            for n in live:
                self.live_at.setdefault(n, set()).add(i)
            if stmt is not None:
                self.point_of[id(stmt)] = i

    def between(self, a, b) -> bool:
        for x, y in ((a, b), (b, a)):
            bound, live = self.bound_at.get(x, set()), self.live_at.get(y, set())
            for p in (bound if len(bound) <= len(live) else live):
                if p in bound and p in live:
                    names, _, source, _ = self.points[p]
                    if not (source is not None and self.find(source) == y
                            and len({self.find(n) for n in names}) == 1):
                        return True
        return False

    def join(self, old, new, self_copies) -> set:
        """``old`` is spelled ``new`` from now on; ``self_copies``' points go.  Returns them."""
        gone = {self.point_of[id(s)] for s in self_copies if id(s) in self.point_of}
        for index in (self.bound_at, self.live_at):
            merged = index.pop(old, set())
            kept = index.get(new, set())
            if len(merged) > len(kept):
                merged, kept = kept, merged
            kept |= merged
            kept -= gone
            index[new] = kept
        return gone

    def live_names(self, points) -> set:
        """The names (as joined so far) that were live at any of ``points`` (or more)."""
        return {self.find(n) for p in points for n in self.points[p][1]}

    def live_at_any(self, name, points) -> bool:
        live = self.live_at.get(name, ())
        return any(p in live for p in points)

    # A live set is {component: the live names of that component}, so that a binding
    # point takes the live names connected to what it binds without looking at the rest.
    def _live(self, names) -> dict:
        live = {}
        for n in names:
            live.setdefault(self.component[n], set()).add(n)
        return live

    @staticmethod
    def _copy(live) -> dict:
        return {c: set(names) for c, names in live.items() if names}

    @staticmethod
    def _union(live, other) -> dict:
        for c, names in other.items():
            live.setdefault(c, set()).update(names)
        return live

    @staticmethod
    def _names(live) -> set:
        return set().union(*live.values())

    def _block(self, stmts, live):
        """Live names before ``stmts``, given ``live`` after (changed in place); records binding points."""
        for stmt in reversed(stmts):
            live = self._statement(stmt, live)
        return live

    def _loaded(self, node) -> set:
        return set(nodes.loaded_names(node)) & self.names

    def _top(self, loop):
        """What the loop's body needs live on entry when nothing is live after it."""
        if id(loop) not in self.exposed:
            recording, self.recording = self.recording, False
            self.exposed[id(loop)] = self._names(self._block(loop.body, {}))
            self.recording = recording
        return self.exposed[id(loop)]

    def _statement(self, stmt, live):
        if isinstance(stmt, gast.If):
            body = self._block(stmt.body, self._copy(live))
            orelse = self._block(stmt.orelse, live)
            return self._union(self._union(body, orelse), self._live(self._loaded(stmt.test)))
        if isinstance(stmt, gast.While):
            # Live at the top of each iteration: after the loop, in the test, or read by
            # the body before it binds it (the least fixed point, found without rounds).
            top = self._union(live, self._live(self._loaded(stmt.test) | self._top(stmt)))
            self._block(stmt.body, self._copy(top))
            return top
        if isinstance(stmt, gast.For):
            target = _defs(stmt)
            # Live where the next index is bound (and after the last).
            top = self._union(live, self._live(self._top(stmt) - target))
            body_entry = self._block(stmt.body, self._copy(top))
            if self.recording:
                self.points.append((target, self._connected(body_entry, target), None, None))
            return self._union(top, self._live(self._loaded(stmt.iter)))
        bound = _defs(stmt)
        if bound and self.recording:
            copy = _copy(stmt)
            self.points.append((bound, self._connected(live, bound), copy[1] if copy else None, stmt))
        for n in bound:
            if n in self.component:
                live.get(self.component[n], set()).discard(n)
        for n in self.facts.uses(stmt) & self.names:
            live.setdefault(self.component[n], set()).add(n)
        return live

    def _connected(self, live, bound) -> set:
        """The live names that copies connect to a name in ``bound``."""
        out = set()
        for c in {self.component[n] for n in bound if n in self.component}:
            out |= live.get(c, set())
        return out


def _drop_self_copies(stmts) -> list:
    out = []
    for stmt in stmts:
        if (c := _copy(stmt)) and c[0] == c[1]:
            continue
        if isinstance(stmt, (gast.If, gast.For, gast.While)):
            stmt.body = _drop_self_copies(stmt.body) or [gast.Pass()]
            stmt.orelse = _drop_self_copies(stmt.orelse)
            if isinstance(stmt, gast.If) and all(isinstance(s, gast.Pass) for s in stmt.body) \
                    and not stmt.orelse and not _has_effect(stmt.test):
                continue
        out.append(stmt)
    return out


def _has_effect(test) -> bool:
    return not all(isinstance(n, (gast.Name, gast.Load, gast.Constant, gast.UnaryOp, gast.Not))
                   for n in nodes.walk(test))
