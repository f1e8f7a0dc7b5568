"""The only module that builds gast nodes by hand.

Passes either parse code templates (``expr("a + b")``) or call these small
constructors, so a change in gast's node classes touches this file alone
(pinning to one gast's node layout is what stopped Tangent working).
"""
from __future__ import annotations

import ast

import gast
from gast.ast3 import Ast3ToGAst, GAstToAst3

from . import anno

COMMENT_MARK = "#srcgrad-comment#"


def name(id_: str, ctx: str = "load") -> gast.Name:
    ctx_node = {"load": gast.Load, "store": gast.Store, "param": gast.Param}[ctx]()
    return gast.Name(id=id_, ctx=ctx_node, annotation=None, type_comment=None)


def const(value) -> gast.Constant:
    return gast.Constant(value=value, kind=None)


def dotted(path: str) -> gast.expr:
    """``"np.linalg.norm"`` as a chain of Attribute nodes."""
    head, *rest = path.split(".")
    node = name(head)
    for part in rest:
        node = gast.Attribute(value=node, attr=part, ctx=gast.Load())
    return node


def call(func, args=(), keywords=()) -> gast.Call:
    if isinstance(func, str):
        func = dotted(func)
    kws = [gast.keyword(arg=k, value=v) for k, v in keywords]
    return gast.Call(func=func, args=list(args), keywords=kws)


def assign(target: str | gast.expr, value: gast.expr) -> gast.Assign:
    if isinstance(target, str):
        target = name(target, "store")
    return gast.Assign(targets=[target], value=value, type_comment=None)


def ret(value: gast.expr | None) -> gast.Return:
    return gast.Return(value=value)


def tuple_(elts, ctx: str = "load") -> gast.Tuple:
    ctx_node = gast.Store() if ctx == "store" else gast.Load()
    return gast.Tuple(elts=list(elts), ctx=ctx_node)


def binop(left, op: str, right) -> gast.BinOp:
    ops = {"+": gast.Add, "-": gast.Sub, "*": gast.Mult, "/": gast.Div}
    return gast.BinOp(left=left, op=ops[op](), right=right)


def comment(text: str) -> gast.Expr:
    """A statement that ``emit`` turns into a ``# text`` comment line."""
    return gast.Expr(value=const(COMMENT_MARK + text))


def if_(test, body, orelse=()) -> gast.If:
    return gast.If(test=test, body=list(body), orelse=list(orelse))


def function(fn_name: str, params, body, defaults=()) -> gast.FunctionDef:
    args = gast.arguments(
        args=[name(p, "param") for p in params], posonlyargs=[], vararg=None,
        kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=list(defaults),
    )
    return gast.FunctionDef(name=fn_name, args=args, body=list(body), decorator_list=[],
                            returns=None, type_comment=None, type_params=[])


def function_of_lambda(lam: gast.Lambda, fn_name: str) -> gast.FunctionDef:
    """The ``def`` a lambda stands for: its parameters, returning its body."""
    returned = gast.copy_location(gast.Return(value=lam.body), lam.body)
    return gast.copy_location(gast.FunctionDef(name=fn_name, args=lam.args, body=[returned], decorator_list=[],
                                               returns=None, type_comment=None, type_params=[]), lam)


def module(body) -> gast.Module:
    return gast.Module(body=list(body), type_ignores=[])


def expr(source: str) -> gast.expr:
    """Parse one expression (a template); Load contexts throughout."""
    return parse(source, mode="eval").body


def parse(source: str, mode: str = "exec"):
    """``gast.parse``: the stdlib's tree, converted as gast converts it (``_Converter``)."""
    return _ToGast().visit(ast.parse(source, mode=mode))


_UNSET = object()


class _Converter:
    """gast's conversion between its trees and the stdlib's (``gast.ast3``, whose special
    cases are kept), with its step for every other node done as gast does it, without
    a ``hasattr`` per field nor a method looked up by name per node: the whole program
    is converted each time it is printed, and each source when it is parsed."""

    target = None  # the module of the new nodes' classes (ast or gast)

    def __init_subclass__(cls):
        cls.classes, cls.methods = {}, {}  # (one pair per direction)

    def visit(self, node):
        kind = type(node)
        method = self.methods.get(kind)
        if method is None:
            method = getattr(type(self), "visit_" + kind.__name__, None)
            if method is None or method is ast.NodeVisitor.visit_Constant and not any(
                    hasattr(self, f"visit_{n}") for n in ("Num", "Str", "Bytes", "NameConstant", "Ellipsis")):
                method = type(self).generic_visit
            self.methods[kind] = method
        return method(self, node)

    def _visit(self, node):
        if isinstance(node, _AST):
            return self.visit(node)
        if isinstance(node, list):
            return [self._visit(n) for n in node]
        return node

    def generic_visit(self, node):
        kind = type(node)
        new_kind = self.classes.get(kind, _UNSET)
        if new_kind is _UNSET:
            new_kind = self.classes[kind] = getattr(self.target, kind.__name__, None)
        if new_kind is None:
            return None  # (no such node in the other tree: gast drops it too)
        fields = {}
        for field in node._fields:
            value = getattr(node, field, _UNSET)
            if value is not _UNSET:
                fields[field] = self.visit(value) if isinstance(value, _AST) else \
                    [self._visit(v) for v in value] if isinstance(value, list) else value
        new = new_kind(**fields)
        for attr in node._attributes:
            value = getattr(node, attr, _UNSET)
            if value is not _UNSET:
                setattr(new, attr, value)
        return new


class _ToAst(_Converter, GAstToAst3):
    target = ast


class _ToGast(_Converter, Ast3ToGAst):
    target = gast



_POSITIONS = ("lineno", "col_offset", "end_lineno", "end_col_offset")


def copy(node):
    """Copy a tree, so no node is shared by two parents.

    The nodes are new; their annotations are facts about the user's code
    (origins, resolved objects such as modules) and are shared, not copied.
    """
    cls = type(node)
    if cls is list:
        return [copy(n) for n in node]
    if not isinstance(node, _AST):
        return node
    # (gast's constructor only fills the instance dict: filled here directly, as it
    # would, without its call per node; a rule's template is copied per statement)
    old = node.__dict__
    state = {field: copy(old[field]) if field in old else getattr(node, field, None) for field in cls._fields}
    for attr in _POSITIONS:
        if attr in old:
            state[attr] = old[attr]
        elif hasattr(cls, attr):
            state[attr] = getattr(cls, attr)
    if anno.KEY in old:
        state[anno.KEY] = dict(old[anno.KEY])
    new = _AST.__new__(cls)
    new.__dict__.update(state)
    return new


def with_store_ctx(node):
    node = copy(node)
    node.ctx = gast.Store()
    return node


def _signed(node):
    """``-3.0`` as ``-(3.0)``: ``ast.unparse`` parenthesises a unary minus where
    precedence needs it (``(-3.0) ** 2``) but never a negative constant."""
    if type(node) is ast.Constant:
        value = node.value
        if type(value) in (int, float) and (value < 0 or (value == 0 and str(value).startswith("-"))):
            return ast.UnaryOp(op=ast.USub(), operand=ast.Constant(value=-value))
    return node


def _ready_to_unparse(tree):
    """``tree`` (a stdlib ``ast`` tree) with signed literals (``_signed``) and a line on
    every node that has one (``ast.unparse`` looks type comments up by line), as
    ``ast.fix_missing_locations`` gives: one walk rather than a NodeTransformer and
    that, which the whole program's rendering paid twice per node."""
    tree = _signed(tree)
    todo = [(tree, 1)]
    for node, line in todo:
        if "lineno" in node._attributes:
            if hasattr(node, "lineno"):
                line = node.lineno
            else:
                node.lineno = line
        for field in node._fields:
            value = getattr(node, field, None)
            if type(value) is list:
                for i, item in enumerate(value):
                    if isinstance(item, _AST):
                        value[i] = item = _signed(item)
                        todo.append((item, line))
            elif isinstance(value, _AST):
                signed = _signed(value)
                if signed is not value:
                    setattr(node, field, signed)
                todo.append((signed, line))
    return tree


def to_source(node) -> str:
    """Python source of a gast node (via the stdlib's ``ast.unparse``)."""
    return ast.unparse(_ready_to_unparse(_ToAst().visit(node)))


def walk(node):
    """Every node under ``node``, itself first, in ``ast.walk``'s order.

    The passes walk the whole program a few dozen times; ``ast.walk`` pays three
    generators a node (``iter_child_nodes``, ``iter_fields``), this one none."""
    todo = [node]
    for node in todo:  # (the list grows as it is read: breadth first)
        for field in node._fields:  # (children first, as ast.walk: the caller may replace them)
            value = getattr(node, field, None)
            if type(value) is list:
                todo.extend([v for v in value if isinstance(v, _AST)])
            elif isinstance(value, _AST):
                todo.append(value)
        yield node


class Transformer(gast.NodeTransformer):
    """``gast.NodeTransformer`` whose ``generic_visit`` reads ``_fields`` itself: the same
    result without ``ast.iter_fields``'s generator per node (a rule's template is
    transformed once per statement it differentiates)."""

    def generic_visit(self, node):
        for field in node._fields:
            try:
                old_value = getattr(node, field)
            except AttributeError:
                continue
            if isinstance(old_value, list):
                new_values = []
                for value in old_value:
                    if isinstance(value, _AST):
                        value = self.visit(value)
                        if value is None:
                            continue
                        if not isinstance(value, _AST):
                            new_values.extend(value)
                            continue
                    new_values.append(value)
                old_value[:] = new_values
            elif isinstance(old_value, _AST):
                new_node = self.visit(old_value)
                if new_node is None:
                    delattr(node, field)
                else:
                    setattr(node, field, new_node)
        return node


def own_nodes(fdef):
    """The nodes of ``fdef``'s body, not those of functions defined inside it."""
    stack = list(fdef.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (gast.FunctionDef, gast.Lambda)):
            for field in node._fields:  # (gast.iter_child_nodes' order, without its two generators)
                value = getattr(node, field, None)
                if type(value) is list:
                    stack.extend([v for v in value if isinstance(v, _AST)])
                elif isinstance(value, _AST):
                    stack.append(value)


def fresh_name(base: str, taken: set) -> str:
    """``base``, or ``base2``, ``base3``... : the first not in ``taken`` (then added to it)."""
    candidate, k = base, 1
    while candidate in taken:
        k += 1
        candidate = f"{base}{k}"
    taken.add(candidate)
    return candidate


def _children_first(node) -> list:
    """``list(walk(node))``, built without a generator."""
    todo = [node]
    for node in todo:
        for field in node._fields:
            value = getattr(node, field, None)
            if type(value) is list:
                todo.extend([v for v in value if isinstance(v, _AST)])
            elif isinstance(value, _AST):
                todo.append(value)
    return todo


_AST = ast.AST


def rename(stmts, mapping: dict) -> None:
    """Rename the names in ``mapping`` (old -> new) throughout ``stmts``, including
    the rule arguments a statement keeps in its ``bound`` annotation."""
    atoms = [a for s in statements(stmts) for a in (anno.get(s, "bound") or {}).values()]
    for root in [*stmts, *atoms]:
        for node in _children_first(root):
            if type(node) is gast.Name and node.id in mapping:
                node.id = mapping[node.id]


def names_in(node) -> set[str]:
    return {n.id for n in _children_first(node) if type(n) is gast.Name}


def loaded_names(node) -> list[str]:
    return [n.id for n in _children_first(node) if type(n) is gast.Name and type(n.ctx) is gast.Load]


def is_atom(node) -> bool:
    return isinstance(node, (gast.Name, gast.Constant))


def statements(body):
    """Every statement in ``body``, nested ones included, in program order."""
    for stmt in body:
        yield stmt
        # (no generator for the empty blocks of a simple statement: most of them)
        inner = getattr(stmt, "body", None)
        if inner:
            yield from statements(inner)
        inner = getattr(stmt, "orelse", None)
        if inner:
            yield from statements(inner)


def assigned_names(stmt) -> list[str]:
    """Names a simple statement binds (``a = ...``, ``a, b = ...``, a loop's index)."""
    if isinstance(stmt, gast.Assign):
        target = stmt.targets[0]
        elts = target.elts if isinstance(target, gast.Tuple) else [target]
        return [t.id for t in elts if isinstance(t, gast.Name)]
    if isinstance(stmt, gast.For) and isinstance(stmt.target, gast.Name):
        return [stmt.target.id]
    return []


def copies_by_index(node) -> bool:
    """Whether ``node`` is an index by a list display (``a[[0, 2]]``, ``m[:, [1, 0]]``): NumPy's
    integer-array indexing, which makes a new array rather than a view."""
    if not isinstance(node, gast.Subscript):
        return False
    parts = node.slice.elts if isinstance(node.slice, gast.Tuple) else [node.slice]
    return any(isinstance(part, gast.List) for part in parts)
