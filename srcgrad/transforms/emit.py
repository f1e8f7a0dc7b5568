"""The last steps — assemble, emit and load: the output function, its source text, executed.

Requires: the optimized sweeps (reverse mode: forward and backward; forward mode: one).
Guarantees: one module holding the generated function (``f_grad``, ``f_vjp`` with its
pullback closure, ``f_jvp``...) with a header naming the user's function, mode, ``wrt``
and backend and explaining each stack and trip count; its imports; one
``# file:line  source`` comment per user statement in each sweep; source text (via the
stdlib's ``ast.unparse``) registered with ``linecache`` under a name of its own so
tracebacks and ``pdb`` show the generated lines.  Identical input gives byte-identical text.

Before (in ``model.py``)::

    def f(x):
        h = np.tanh(x)
        return np.sum(h * x)

After::

    # srcgrad: reverse mode of f (model.py:1) | wrt: x | backend: numpy
    import numpy as np
    from srcgrad import runtime as rt

    def f_grad(x, result_bar=1.0):
        # ---- forward sweep ----
        # model.py:2  h = np.tanh(x)
        h = np.tanh(x)
        # model.py:3  return np.sum(h * x)
        _t1 = h * x
        # ---- backward sweep ----
        # model.py:3  return np.sum(h * x)
        _t1_bar = rt.fill_like(_t1, result_bar)
        h_bar = rt.unbroadcast(_t1_bar * x, h)
        x_bar = rt.unbroadcast(_t1_bar * h, x)
        # model.py:2  h = np.tanh(x)
        x_bar = x_bar + h_bar * (1 - h ** 2)
        return x_bar
"""
from __future__ import annotations

import ast
import linecache
import re

import gast

from ..anno import Kind
from .. import anno, nodes, templates
from ..analysis import sharing

_COMMENT_LINE = re.compile(r"^(\s*)((?:'|\").*(?:'|\"))$")


def with_blocks(stmts) -> list:
    """``v = rt.enter(m) ... rt.leave(m)`` (normalized code keeps a ``with`` block's body
    flat between the two) back into ``with rt.managed(m, where=...) as v: ...``, in
    each block, so that an exception raised in the body reaches ``m.__exit__`` as
    Python's own ``with`` does.  A pair not found in one block stays as it is."""
    out, open_ = [], []  # open_: (the enter statement, the manager's source, the block's statements so far)
    for stmt in stmts:
        for field in ("body", "orelse"):
            if getattr(stmt, field, None):
                setattr(stmt, field, with_blocks(getattr(stmt, field)))
        call = _runtime_call(stmt, "enter")
        if call is not None:
            open_.append((stmt, nodes.to_source(call.args[0]), out))
            out = []
            continue
        call = _runtime_call(stmt, "leave")
        if call is not None and open_ and open_[-1][1] == nodes.to_source(call.args[0]):
            enter, _, outer = open_.pop()
            group = anno.get(enter, "group")
            manager = nodes.call("rt.managed", [call.args[0]])
            manager.keywords.append(gast.keyword(arg="where", value=nodes.const(group.where if group else "?")))
            target = enter.targets[0] if isinstance(enter, gast.Assign) else None
            block = gast.With(items=[gast.withitem(context_expr=manager, optional_vars=target)],
                              body=out or [gast.Pass()], type_comment=None)
            anno.set(block, "group", group)
            out = outer
            out.append(block)
            continue
        out.append(stmt)
    for enter, _, outer in reversed(open_):  # (not closed in this block: left flat)
        out = outer + [enter] + out
    return out


def _runtime_call(stmt, name):
    """``stmt``'s call of ``rt.<name>``, or None."""
    value = getattr(stmt, "value", None)
    if isinstance(stmt, (gast.Expr, gast.Assign)) and isinstance(value, gast.Call):
        func = value.func
        if isinstance(func, gast.Attribute) and func.attr == name and isinstance(func.value, gast.Name) \
                and func.value.id == "rt":
            return value
    return None


def with_group_comments(stmts) -> list:
    """Insert ``# file:line  text`` before each run of statements from one user line."""
    out, last = [], object()
    for stmt in stmts:
        group = anno.get(stmt, "group")
        if group is not None and group != last:
            out.append(nodes.comment(f"{group.where}  {group.text.strip()}"))
        last = group
        if isinstance(stmt, (gast.If, gast.For, gast.While, gast.With)):
            stmt.body = _inner_comments(stmt.body, group) or [gast.Pass()]
            if not isinstance(stmt, gast.With):
                stmt.orelse = _inner_comments(stmt.orelse, group)
        out.append(stmt)
    return out


def _inner_comments(stmts, header_group) -> list:
    """Inside a block, a statement from the header's own line needs no comment."""
    out = with_group_comments(stmts)
    # Drop a leading comment that only repeats the block header's line.
    if out and header_group is not None and _is_comment_for(out[0], header_group):
        out = out[1:]
    return out


def _is_comment_for(stmt, group) -> bool:
    value = getattr(getattr(stmt, "value", None), "value", None)
    return isinstance(value, str) and value == nodes.COMMENT_MARK + f"{group.where}  {group.text.strip()}"


def render(module) -> str:
    """Unparse a gast module, turning comment markers into real comments."""
    text = nodes.to_source(module)
    lines = []
    for line in text.splitlines():
        match = _COMMENT_LINE.match(line)
        if match:
            value = ast.literal_eval(match.group(2))
            if isinstance(value, str) and value.startswith(nodes.COMMENT_MARK):
                line = f"{match.group(1)}# {value[len(nodes.COMMENT_MARK):]}"
        lines.append(line)
    return "\n".join(lines) + "\n"


def load(text: str, filename: str, namespace: dict) -> dict:
    """Register ``text`` under ``filename`` with linecache and execute it in ``namespace``."""
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    exec(compile(text, filename, "exec"), namespace)  # noqa: S102 - our own generated code
    return namespace


def _checks_note(checks) -> list:
    """The header line saying what ``specialised.check(...)`` is (bound when the code is loaded)."""
    return [f"{checks}.check(...): after a call not inlined, that the layers and functions this code "
            "was compiled for are still there"] if checks else []


def reverse_module(fn, core, forward, backward, sweeps, options, backend, wrt, rank_env=None, checks=None):
    """The module of a reverse-mode program: ``f_grad(*params, seed=1.0)`` (or
    ``f_value_and_grad``, ``f_pullback(*params, y_bar)``), or ``f_vjp(*params)`` returning
    the value and its pullback closure."""
    grads = [nodes.name(sweeps.adjoints[p]) for p in wrt]
    grads_value = nodes.tuple_(grads) if options.wrt_tuple else grads[0]
    origin = f"{fn.__code__.co_filename.rsplit('/', 1)[-1]}:{fn.__code__.co_firstlineno}"
    header = [
        nodes.comment(f"srcgrad: reverse mode of {core.name} ({origin}) | wrt: "
                      f"{', '.join(options.wrt)} | backend: {options.backend}"),
    ] + [nodes.comment(f"  {note}") for note in _notes(forward, sweeps.notes) + _callee_notes(sweeps.callees)
         + _checks_note(checks)]
    imports = _imports(forward + backward, backend)
    result = core.result
    touched = {n for s in nodes.statements(backward) for n in nodes.assigned_names(s)} | {
        s.targets[0].value.id for s in nodes.statements(backward)
        if isinstance(s, gast.Assign) and isinstance(s.targets[0], gast.Subscript)}
    written = {anno.get(s, "array") for s in nodes.statements(core.body) if anno.get(s, "kind") == Kind.SETITEM}
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
    fwd = [nodes.comment("---- forward sweep ----")] + with_group_comments(with_blocks(forward))
    bwd = [nodes.comment("---- backward sweep ----")] + with_group_comments(backward)
    name = function_name(core, options)
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


def forward_module(fn, core, body, tangents, options, backend, wrt, prebound, checks=None):
    """The module of a forward-mode program: ``f_jvp(*params, *tangents) -> (value, tangent)``.
    ``prebound``: names a merge copy may read before any path bound them (None first)."""
    result = nodes.tuple_([nodes.copy(core.result), tangents.result])
    unbound = [nodes.assign(n, nodes.const(None)) for n in prebound]
    unbound += [nodes.assign(tangents.names[n], nodes.const(None)) for n in prebound if n in tangents.names]
    origin = f"{fn.__code__.co_filename.rsplit('/', 1)[-1]}:{fn.__code__.co_firstlineno}"
    mode = "forward mode, batched columns," if options.batched else "forward mode"
    header = [nodes.comment(f"srcgrad: {mode} of {core.name} ({origin}) | wrt: "
                            f"{', '.join(options.wrt)} | backend: {options.backend}")]
    header += [nodes.comment(f"  {note}") for note in _checks_note(checks)]
    imports = _imports(body, backend)
    params = core.params + [tangents.tangents[p] for p in wrt]
    fdef = nodes.function(function_name(core, options), params,
                          unbound + with_group_comments(with_blocks(body)) + [nodes.ret(result)])
    return nodes.module(header + imports + [fdef])


def filename(fn, options, param_ranks, text) -> str:
    """The name the program is registered under, ``<srcgrad m.f grad ndim=(2,1)>``: unique
    to this text (``_unique``)."""
    signature = ",".join("?" if r is None else "tree" if isinstance(r, tuple) else str(r) for r in param_ranks)
    mode = ("jvp batched" if options.batched else "jvp") if options.mode == "jvp" else options.mode
    return _unique(f"<srcgrad {fn.__module__}.{fn.__qualname__} {mode} ndim=({signature})>", text)


def function_name(core, options) -> str:
    """``f_grad``; ``f_grad_2`` where ``f`` reads or binds a name ``f_grad`` (the module's
    own ``def`` would replace it: the same name each time it is asked)."""
    name, k = f"{core.name}_{options.mode}", 1
    while name in core.names:
        k += 1
        name = f"{core.name}_{options.mode}_{k}"
    return name


def _final(core, name) -> str:
    return core.final_names[core.renamed.get(name, name)]


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
