"""Every annotation key srcgrad uses is documented in ``anno.Key``, every ``kind`` in ``anno.Kind``.

The keys are read from the sources of srcgrad/ (every ``*.py``, as test_imports.py reads
imports), wherever they are spelled:

* ``anno.get/set/has(node, "key", ...)``, the key a literal or a loop's variable over
  literals (``for key in ("group", "origin")``, ``for key, value in (("kind", "call"), ...)``);
* the keyword annotations of a function that sets its ``**annotations`` on a statement
  (``for key, value in annotations.items(): anno.set(stmt, key, value)``: anf's ``_emit_stmt``),
  or passes its ``**kwargs`` on to one that does (``_emit``, ``_apply``, ``_call``...): each
  keyword a call gives it that is none of the named parameters along the way, the
  ``kwargs[...] = ...`` written into that dict, and the keys of a dict passed as ``**extra``;
* an annotation table read or written directly (``table = getattr(stmt, anno.KEY)``,
  ``table["bound"]``).

Functions are matched by name within their own module, so a pass may be split or its
helpers renamed without this test changing.
"""
from __future__ import annotations

import ast
import collections
import functools
import pathlib

import gast
import pytest

import srcgrad
from srcgrad import anno

ROOT = pathlib.Path(srcgrad.__file__).parent
_ANNO_FUNCTIONS = {"get", "set", "has", "pop", "setdefault"}


@functools.lru_cache(maxsize=None)
@functools.lru_cache(maxsize=None)
def _modules() -> dict[str, ast.Module]:
    return {str(p.relative_to(ROOT)): ast.parse(p.read_text(), str(p))
            for p in sorted(ROOT.rglob("*.py")) if p != ROOT / "anno.py"}


def _is_anno_call(node) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
        and isinstance(node.func.value, ast.Name) and node.func.value.id == "anno" \
        and node.func.attr in _ANNO_FUNCTIONS and len(node.args) >= 2


def _constant_strings(node) -> list:
    """The string literals of ``node`` (a constant, or a tuple/list/set of them)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [s for e in node.elts for s in _constant_strings(e)]
    return []


def _loop_values(loop: ast.For, name: str) -> list | None:
    """What ``name``, a variable of ``loop``'s target, takes over a literal iterable: a name
    alone over strings (``for key in ("a", "b")``), or the first of a pair over pairs."""
    target, iterable = loop.target, loop.iter
    if not isinstance(iterable, (ast.Tuple, ast.List, ast.Set)):
        return None
    if isinstance(target, ast.Name) and target.id == name:
        return [e.value for e in iterable.elts if isinstance(e, ast.Constant)]
    if isinstance(target, ast.Tuple):
        positions = [i for i, t in enumerate(target.elts) if isinstance(t, ast.Name) and t.id == name]
        if positions:
            return [e.elts[positions[0]].value for e in iterable.elts
                    if isinstance(e, ast.Tuple) and len(e.elts) > positions[0]
                    and isinstance(e.elts[positions[0]], ast.Constant)]
    return None


def _parents(tree) -> dict:
    parents = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parents[child] = node
    return parents


def _functions(tree):
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _called_name(call: ast.Call) -> str | None:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None


def _named_parameters(fdef) -> set:
    a = fdef.args
    return {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}


def _outer_dicts(node) -> list:
    """The dict displays ``node`` may be (``{...} if c else {}``), not those inside them."""
    if isinstance(node, ast.Dict):
        return [node]
    if isinstance(node, ast.IfExp):
        return _outer_dicts(node.body) + _outer_dicts(node.orelse)
    if isinstance(node, ast.BoolOp):
        return [d for v in node.values for d in _outer_dicts(v)]
    return []


@functools.lru_cache(maxsize=None)
def _all_annotating_functions() -> dict:
    """``_annotating_functions`` over all of srcgrad at once: a pass's walk is a class of mixins
    in several modules (anf's ``_emit`` is called from ``lower_*.py``)."""
    return _annotating_functions(ast.Module(body=[s for t in _modules().values() for s in t.body], type_ignores=[]))


def _annotating_functions(tree) -> dict:
    """``{name: (def, parameters)}``: the functions that set their ``**kwargs`` on a statement
    as annotations, or pass them on to one that does; ``parameters``, their named parameters
    and those of the functions they pass them to (not annotations)."""
    defs = {f.name: f for f in _functions(tree) if f.args.kwarg is not None}
    found = {}
    for name, f in defs.items():
        kwarg = f.args.kwarg.arg
        for loop in ast.walk(f):
            if isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call) \
                    and isinstance(loop.iter.func, ast.Attribute) and loop.iter.func.attr == "items" \
                    and isinstance(loop.iter.func.value, ast.Name) and loop.iter.func.value.id == kwarg \
                    and any(_is_anno_call(c) and c.func.attr == "set" for c in ast.walk(loop)):
                found[name] = (f, _named_parameters(f))
    changed = True
    while changed:  # ... and those passing theirs on, to a fixed point
        changed = False
        for name, f in defs.items():
            kwarg = f.args.kwarg.arg
            for call in ast.walk(f):
                if isinstance(call, ast.Call) and _called_name(call) in found and _called_name(call) != name \
                        and any(k.arg is None and isinstance(k.value, ast.Name) and k.value.id == kwarg
                                for k in call.keywords):
                    params = _named_parameters(f) | found[_called_name(call)][1]
                    if name not in found or not params <= found[name][1]:
                        found[name] = (f, params | (found[name][1] if name in found else set()))
                        changed = True
    return found


def _keys_in(path: str, tree) -> list[tuple[str, str]]:
    """``[(key, where)]``: the annotation keys ``tree`` reads or writes."""
    keys, parents = [], _parents(tree)

    def at(node, key):
        if isinstance(key, str):
            keys.append((key, f"{path}:{node.lineno}"))

    # anno.get/set/has(node, key): a literal, or a loop variable over literals
    for call in filter(_is_anno_call, ast.walk(tree)):
        key = call.args[1]
        if isinstance(key, ast.Constant):
            at(call, key.value)
        elif isinstance(key, ast.Name):
            node, values = call, None
            while values is None and node in parents:
                node = parents[node]
                if isinstance(node, ast.For):
                    values = _loop_values(node, key.id)
            for value in values or ():
                at(call, value)
    # keyword annotations, and what is written into the dicts of them
    annotating = _all_annotating_functions()
    for name, (f, params) in annotating.items():
        kwarg = f.args.kwarg.arg
        for node in ast.walk(f):
            if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) \
                    and isinstance(node.value, ast.Name) and node.value.id == kwarg:
                for key in _constant_strings(node.slice):
                    if key not in params:
                        at(node, key)
    for f in _functions(tree):
        extras = set()
        for call in ast.walk(f):
            if isinstance(call, ast.Call) and _called_name(call) in annotating:
                params = annotating[_called_name(call)][1]
                for k in call.keywords:
                    if k.arg is not None and k.arg not in params:
                        at(call, k.arg)
                    elif k.arg is None and isinstance(k.value, ast.Name) \
                            and not (f.args.kwarg is not None and k.value.id == f.args.kwarg.arg):
                        extras.add((k.value.id, frozenset(params)))
        for extra, params in extras:  # `**extra`: a local dict of annotations
            for node in ast.walk(f):
                if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == extra
                                                        for t in node.targets):
                    for d in _outer_dicts(node.value):
                        for key in d.keys:
                            if isinstance(key, ast.Constant) and key.value not in params:
                                at(d, key.value)
                elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) \
                        and isinstance(node.value, ast.Name) and node.value.id == extra:
                    for key in _constant_strings(node.slice):
                        if key not in params:
                            at(node, key)
    # an annotation table itself: `table = getattr(stmt, anno.KEY)`, `table["bound"]`
    for f in _functions(tree):
        tables = {t.id for node in ast.walk(f) if isinstance(node, ast.Assign)
                  and any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                          and n.value.id == "anno" and n.attr == "KEY" for n in ast.walk(node.value))
                  for t in node.targets if isinstance(t, ast.Name)}
        for node in ast.walk(f):
            if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in tables:
                for key in _constant_strings(node.slice):
                    at(node, key)
    return sorted(set(keys))


def _kinds_in(path: str, tree) -> list[tuple[str, str]]:
    """``[(kind, where)]``: the kinds ``tree`` gives a statement (``anno.set(s, "kind", "copy")``,
    ``("kind", "call")`` in a loop of annotations, ``kind="op"`` to an annotating function)."""
    kinds = []
    for node in ast.walk(tree):
        if _is_anno_call(node) and node.func.attr == "set" and len(node.args) >= 3 \
                and isinstance(node.args[1], ast.Constant) and node.args[1].value == "kind":
            kinds += [(k, f"{path}:{node.lineno}") for k in _constant_strings(node.args[2])]
        if isinstance(node, ast.Tuple) and len(node.elts) == 2 and isinstance(node.elts[0], ast.Constant) \
                and node.elts[0].value == "kind":
            kinds += [(k, f"{path}:{node.lineno}") for k in _constant_strings(node.elts[1])]
    annotating = _all_annotating_functions()
    for call in ast.walk(tree):
        if isinstance(call, ast.Call) and _called_name(call) in annotating:
            for k in call.keywords:
                if k.arg == "kind" and "kind" not in annotating[_called_name(call)][1]:
                    kinds += [(v, f"{path}:{call.lineno}") for v in _constant_strings(k.value)]
    return sorted(set(kinds))


@functools.lru_cache(maxsize=None)
def _used_keys() -> dict:
    used = collections.defaultdict(list)
    for path, tree in _modules().items():
        for key, where in _keys_in(path, tree):
            used[key].append(where)
    return dict(used)


@functools.lru_cache(maxsize=None)
def _used_kinds() -> dict:
    used = collections.defaultdict(list)
    for path, tree in _modules().items():
        for kind, where in _kinds_in(path, tree):
            used[kind].append(where)
    return dict(used)


def test_the_scan_finds_the_keys_of_each_way_of_spelling_them():
    used = _used_keys()
    assert {"origin", "kind", "rule", "bound", "group"} <= set(used)  # literals
    assert "saved" in used and "carried" in used  # keywords to anf's _emit_stmt
    assert "args" in used and "elements" in used  # ... and to _emit, passing them on
    assert "why" in used and "maybe_object" in used  # written into `emit` before it is passed on
    assert "target_hint" not in used and "origin_node" not in used  # (_emit's parameters)
    assert {"op", "copy", "call", "def"} <= set(_used_kinds())


def test_every_key_in_use_is_documented():
    documented = {k.value for k in anno.Key}
    missing = {key: where[:3] for key, where in _used_keys().items() if key not in documented}
    assert not missing, f"annotation keys used but not documented in anno.Key: {missing}"


def test_every_kind_in_use_is_documented():
    documented = {k.value for k in anno.Kind}
    missing = {kind: where[:3] for kind, where in _used_kinds().items() if kind not in documented}
    assert not missing, f"statement kinds used but not documented in anno.Kind: {missing}"


def test_every_documented_key_is_used():
    stale = [k.name for k in anno.Key if k.value not in _used_keys()]
    assert not stale, f"anno.Key documents keys no source in srcgrad/ uses: {stale}"


def test_every_documented_kind_is_given():
    stale = [k.name for k in anno.Kind if k.value not in _used_kinds()]
    assert not stale, f"anno.Kind documents kinds no statement is given: {stale}"


def test_each_member_is_described():
    for member in list(anno.Key) + list(anno.Kind):
        assert member.doc.strip(), member
        assert f"``{member.value}``" in type(member).__doc__  # (listed for help())


def test_members_are_the_strings_themselves():
    node = gast.Pass()
    anno.set(node, anno.Key.KIND, anno.Kind.COPY)
    assert anno.get(node, "kind") == "copy" and anno.has(node, anno.Key.KIND)
    assert f"{anno.Key.KIND}" == str(anno.Key.KIND) == "kind"


def test_an_undocumented_key_is_refused():
    with pytest.raises(KeyError, match=r"'undocumented'.*document it in anno\.Key"):
        anno.set(gast.Pass(), "undocumented", 1)


def test_an_undocumented_kind_is_refused():
    node = gast.Pass()
    with pytest.raises(KeyError, match=r"'nonsense'.*document it in anno\.Kind"):
        anno.set(node, "kind", "nonsense")
    assert not anno.has(node, "kind")  # (nothing written)
    anno.set(node, "impure", "nonsense")  # (another key's value is not a kind)
