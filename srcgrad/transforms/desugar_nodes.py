"""The nodes the desugar modules build and rename: at a source line, in a comprehension's scope.

Requires: gast nodes of a parsed function (before resolve).
Guarantees: ``_at``: a new node (and every node under it) at its source's line; ``_rename_inside``
and ``_rename_scoped``: a comprehension's own variables renamed in its scope only (Python 3:
not in its first iterable, nor where a comprehension nested in it binds them again);
``_names_outside_comprehensions``: the names a function uses other than as such a variable.
"""
from __future__ import annotations

import gast

from .. import anno, nodes

_COMPREHENSIONS = (gast.ListComp, gast.SetComp, gast.DictComp, gast.GeneratorExp)
_LOWERED = _COMPREHENSIONS + (gast.NamedExpr,)
# Builtins that iterate over what they are given, once and whole: a generator may be a list there.
_CONSUMERS = ("max", "min", "list", "tuple", "sorted", "any", "all", "set", "dict")


def _kind(node) -> str:
    return {gast.ListComp: "list comprehension", gast.SetComp: "set comprehension",
            gast.DictComp: "dict comprehension", gast.GeneratorExp: "generator expression",
            gast.NamedExpr: "`:=` expression"}[type(node)]


def _at(node, source):
    """``node`` and every node under it at ``source``'s line (where they have none of their own)."""
    for n in nodes.walk(node):
        anno.inherit(n, source)
    return node


def _is_none(node) -> bool:
    return isinstance(node, gast.Constant) and node.value is None


def _last_name(func) -> str:
    return func.id if isinstance(func, gast.Name) else func.attr


def _parameter_names(args) -> list:
    return [a.id for a in args.posonlyargs + args.args + [args.vararg] + args.kwonlyargs + [args.kwarg]
            if a is not None]
def _rename_inside(comp, mapping):
    """Rename ``comp``'s own variables in its scope: everything but its first
    iterable, and in a comprehension nested in it, what that one does not bind again."""
    gens = comp.generators
    parts = [g.target for g in gens] + [g.iter for g in gens[1:]] + [t for g in gens for t in g.ifs]
    parts += [comp.key, comp.value] if isinstance(comp, gast.DictComp) else [comp.elt]
    for part in parts:
        _rename_scoped(part, mapping)


def _rename_scoped(node, mapping):
    if isinstance(node, gast.Name):
        if node.id in mapping:
            node.id = mapping[node.id]
        return
    if isinstance(node, _COMPREHENSIONS):
        _rename_scoped(node.generators[0].iter, mapping)
        bound = {n.id for g in node.generators for n in nodes.walk(g.target) if isinstance(n, gast.Name)}
        inner = {k: v for k, v in mapping.items() if k not in bound}
        if inner:
            _rename_inside(node, inner)
        return
    for child in gast.iter_child_nodes(node):
        _rename_scoped(child, mapping)


def _names_outside_comprehensions(fdef) -> set:
    """The names the function uses other than as a comprehension's own variable,
    and those a comprehension binds again inside another that binds them."""
    outside = set()

    def visit(node, bound):
        if isinstance(node, gast.Name):
            if node.id not in bound:
                outside.add(node.id)
            return
        if isinstance(node, _COMPREHENSIONS):
            visit(node.generators[0].iter, bound)
            own = {n.id for g in node.generators for n in nodes.walk(g.target) if isinstance(n, gast.Name)}
            outside.update(own & bound)
            inner = bound | own
            for g in node.generators:
                visit(g.target, inner)
                for t in g.ifs:
                    visit(t, inner)
            for g in node.generators[1:]:
                visit(g.iter, inner)
            for part in ([node.key, node.value] if isinstance(node, gast.DictComp) else [node.elt]):
                visit(part, inner)
            return
        for child in gast.iter_child_nodes(node):
            visit(child, bound)
    visit(fdef, frozenset())
    return outside
