"""Annotations: the one place where srcgrad attaches facts to AST nodes.

gast drops unknown ``_fields`` when it converts trees, so annotations live in a
single hidden dict per node (``node._srcgrad``), read and written only here.

Every key is a member of :class:`Key`, whose description says what the value
is, which pass sets it and which passes read it; the values of the ``kind``
annotation are the members of :class:`Kind`.  :func:`set` refuses a key (or a
kind) not documented there.  Both are ``str`` enums: ``anno.get(s, "kind") ==
"op"`` and ``anno.get(s, Key.KIND) == Kind.OP`` are the same test.
"""
from __future__ import annotations

import dataclasses
import enum
import inspect
import linecache
import textwrap

KEY = _KEY = "_srcgrad"


class _Documented(str, enum.Enum):
    """A string enum whose members each carry a one- or two-line description (``.doc``),
    listed in the class's docstring (``help(anno.Key)``)."""

    def __new__(cls, value, doc):
        member = str.__new__(cls, value)
        member._value_ = value
        member.doc = doc
        return member

    def __str__(self):  # (the string itself, as the keys it stands for print)
        return self.value

    __format__ = str.__format__


def _listed(cls):
    """Append each member's value and description to ``cls``'s docstring (for ``help()``)."""
    cls.__doc__ = inspect.cleandoc(cls.__doc__ or "") + "\n\n" + "\n".join(
        f"``{m.value}``\n" + textwrap.fill(m.doc, 88, initial_indent="    ", subsequent_indent="    ")
        for m in cls) + "\n"
    return cls


@_listed
class Key(_Documented):
    """The annotation keys: one member per key in use, the value the key itself.

    Each says what the value is, which pass sets it (→) and which read it (←)."""

    # -- the user's code: front passes --------------------------------------------------
    ORIGIN = "origin", (
        "An :class:`Origin`: where in the user's code a node came from.  → parse, on every user "
        "node; inherited (:func:`inherit`) by the nodes later passes build.  ← errors, anf, inline, "
        "reverse, forward, sharing, pipeline, specialise.")
    RESOLVED = "resolved", (
        "The Python object a ``Name``/``Attribute`` denotes at compile time (``numpy.exp``).  "
        "→ resolve (inline_callees, anf for the names they make).  ← inline*, folding, anf, ranks, "
        "sharing, reverse, forward, templates.")
    LAMBDA = "lambda", (
        "True on a nested ``FunctionDef`` made from a lambda (a refusal says \"this lambda\", not its "
        "generated name).  → desugar.  ← anf, reverse.")
    PARTIAL_BINDS = "partial_binds", (
        "``[statement]``: the assignments of a ``functools.partial``'s held arguments, which replace "
        "the statement making it.  → desugar_functional.  ← desugar_functional (the same walk).")
    NEXT_COUNTER = "next_counter", (
        "``str``: the counter name of a ``next(it)`` read rewritten as an index into the generator's "
        "items.  → desugar_generators.  ← desugar_generators (the same walk).")
    CONSUMED = "consumed", (
        "True on a call site whose inlined body's final assignment replaced it (dropped).  "
        "→ inline.  ← inline (the same walk).")
    FLAGS = "flags", (
        "True on a ``while`` test that exits joined with its break/return flags (plain booleans, "
        "lowered as they are).  → exits.  ← anf.")

    # -- every core statement: anf ----------------------------------------------------------
    KIND = "kind", (
        "A :class:`Kind`: what a core statement does (the shape of its right-hand side).  → anf "
        "(reverse turns an operator/field read into ``call``).  ← every later pass: activity, ranks, "
        "sharing, aliases, reverse, forward, optimize, emit, pipeline, specialise.")
    GROUP = "group", (
        "The :class:`Origin` of the user statement a core statement was lowered from; generated code "
        "gets one ``# file:line`` comment per group.  → anf (reverse, forward, pipeline, specialise, emit "
        "for the statements they add).  ← reverse, forward, coalesce, pipeline, emit.")
    IMPURE = "impure", (
        "True on a statement that must run even where its result is unused (a random draw, a call of "
        "the user's code, a check, a stack).  → anf, reverse, specialise, pipeline.  ← optimize, aliases.")

    # -- kind op / nondiff / unknown: primitives ---------------------------------------------
    RULE = "rule", (
        "The :class:`srcgrad.rules.registry.Rule` of a statement's primitive (None: a nondiff "
        "statement with none).  → anf.  ← reverse, forward, activity, ranks, sharing, optimize, aliases.")
    BOUND = "bound", (
        "``{parameter: atom}``: the primitive's arguments bound to its rule's parameter names.  "
        "→ anf.  ← reverse, forward, activity, ranks, sharing, optimize, aliases, nodes.")
    CALLEE = "callee", (
        "The Python object an ``unknown`` statement calls (a function with no rule), or None: named "
        "in the refusal if it is given a value being differentiated.  → anf.  ← reverse.")
    WHY = "why", (
        "``(problem, advice)``: the refusal to give if the statement is given a value being "
        "differentiated (``a & b``, joining tuples).  → anf.  ← reverse.")
    CONSTRUCTS = "constructs", (
        "The user's class a ``nondiff`` statement instantiates (``c = Counter()``): an object whose "
        "methods are the user's.  → anf.  ← reverse.")
    MAYBE_OBJECT = "maybe_object", (
        "``[name]``: operands of an ``op`` statement's ``a * b``/``-a`` that may be objects whose class's "
        "operator decides (dispatched when it runs).  → anf.  ← reverse, forward.")
    MANAGER = "manager", (
        "True on the ``__enter__``/``__exit__`` calls of a ``with`` statement (kind ``unknown``).  "
        "→ anf.  ← reverse.")

    # -- kind call: the user's code, differentiated through when it runs ----------------------
    ARGS = "args", (
        "``[atom]``: a ``call`` statement's positional arguments.  → anf (reverse for an operator "
        "or field made a call).  ← reverse, forward, activity.")
    KWARGS = "kwargs", (
        "``{name: atom}``: a ``call`` statement's keyword arguments.  → anf (reverse).  "
        "← reverse, forward, activity.")
    RECEIVER = "receiver", (
        "The atom of the object whose method a ``call`` statement calls (``obj.f(x)``), its "
        "parameters differentiated too; None for a plain function.  → anf (reverse).  ← reverse, "
        "forward, activity.")
    OPERATOR = "operator", (
        "``str``: the operator (``\"mul\"``, ``\"neg\"``) of a ``maybe_object`` statement made a "
        "call of ``dispatch.vjp_operator``.  → reverse.  ← reverse, forward.")
    FIELD = "field", (
        "``(obj atom, name atom)``: the field read of ``y = obj.name`` (maybe a property) made a call "
        "of ``dispatch.vjp_field``.  → reverse.  ← reverse, forward.")

    # -- containers and writes --------------------------------------------------------------
    ELEMENTS = "elements", (
        "``{key: atom}``: an ``aggregate`` statement's items by index or key.  → anf.  ← reverse, "
        "activity.")
    SOURCE = "source", (
        "``str``: the name an ``unpack`` statement (``a = m[i]`` of ``a, b = m``) takes an item of.  "
        "→ anf.  ← reverse, forward, activity, ranks, sharing, aliases (renames it).")
    INDEX = "index", (
        "The index of an ``unpack`` (an ``int``), ``item``, ``pop`` (an atom, None for the last), "
        "``setitem`` or ``setentry`` (an index expression) statement.  → anf.  ← reverse, forward, ranks.")
    LIST = "list", (
        "``str``: the list an ``append``, ``pop`` or ``item`` statement grows, shrinks or reads.  "
        "→ anf.  ← reverse, forward, activity, sharing.")
    VALUE = "value", (
        "The atom an ``append``, ``setitem``, ``setentry`` or ``setattr`` statement stores.  → anf.  "
        "← reverse, forward, activity, sharing.")
    ARRAY = "array", (
        "``str``: the array (or list, dict) a ``setitem`` statement writes into.  → anf.  ← reverse, "
        "forward, activity, sharing, emit, aliases (renames it).")
    SAVED = "saved", (
        "``str``: the name holding a ``setitem``'s overwritten elements (``y_overwritten``), put back "
        "by the backward sweep.  → anf.  ← reverse.")
    GENERIC = "generic", (
        "True where a ``setitem`` writes into a value not known to be an array (a list, a dict: "
        "``rt.overwritten``, not NumPy).  → anf.  ← reverse, forward.")
    CONTAINER = "container", (
        "True where a ``setitem`` replaces an item of a list grown when it runs (no array changed).  "
        "→ anf.  ← sharing.")
    SHOWN = "shown", (
        "``str``: the user's name of the array a ``setitem`` writes into, for messages.  → anf.  "
        "← sharing.")
    HOLDER = "holder", (
        "``str``: the name holding the object's dict or list a ``setentry`` statement writes into "
        "(``self.cache[k] = v``).  → anf.  ← reverse, sharing.")
    CHECKS = "checks", (
        "``str``: the holder a ``rt.not_in_place`` check (before ``self.d[k] += v``) checks.  → anf.  "
        "← reverse.")
    AUGMENTS = "augments", (
        "``str``: the array (its version before) that ``y += v`` changed in place.  → anf.  "
        "← sharing, aliases.")

    # -- functions and loops ------------------------------------------------------------------
    CAPTURES = "captures", (
        "``[str]``: on a nested ``FunctionDef`` (kind ``def``), the outer function's names it reads, "
        "under their current versions (``x_2``).  → anf.  ← reverse, activity, sharing, pipeline.")
    CAPTURED_AS = "captured_as", (
        "``{version: user name}`` (``{\"x_2\": \"x\"}``) of a nested ``FunctionDef``'s captures, for "
        "messages.  → anf.  ← reverse.")
    FIRST_DEFINED = "first_defined", (
        "``[str]``: the user's names a loop binds first (no value on entry), on the user's loop, then "
        "its ``for``/``while``.  → anf.  ← anf, reverse.")
    CARRIED = "carried", (
        "``[str]``: the names a ``for``/``while`` carries from one iteration to the next (sorted).  "
        "→ anf.  ← reverse.")
    CARRY = "carry", (
        "True on a loop body's carry copy (``h = h_2``, at its end).  → anf.  ← reverse.")

    # -- the reverse pass's own statements ------------------------------------------------------
    STACK = "stack", (
        "``str``: the stack a statement creates, pushes to or pops from (saved values of loops).  "
        "→ reverse.  ← optimize (prune_saves), emit.")
    SAVE_ID = "save_id", (
        "``int``: pairs a stack's push with its pop.  → reverse.  ← optimize.")
    RESTORE = "restore", (
        "``str``: on the backward statement putting back elements a ``setitem`` overwrote, the array "
        "or list written.  → reverse.  ← emit (so a pullback called again redoes the write).")
    RESTORES = "restores", (
        "``str``: the list an ``xs.pop()`` undoing an ``append`` in the backward sweep shrinks.  "
        "→ reverse.  ← emit.")
    PREBOUND = "prebound", (
        "True on ``v = rt.Unbound(\"v\")``, binding a name a merge copy may read before any path "
        "bound it.  → reverse.  ← pipeline, emit.")


@_listed
class Kind(_Documented):
    """The values of the ``kind`` annotation: what a core statement is (set by anf)."""

    OP = "op", (
        "``y = prim(a, b)``: a primitive with a differentiable rule (``rule``, ``bound``); always an "
        "assignment.")
    NONDIFF = "nondiff", (
        "``y = f(a)``: a value with no derivative (a non-differentiable rule, or ``rule`` None: "
        "shapes, checks, f-strings, constructors).")
    UNKNOWN = "unknown", (
        "``y = f(a)``: a call neither inlined nor a known primitive (``callee``, ``why``), refused if "
        "given a value being differentiated; also a ``with``'s enter/exit (``manager``).")
    CALL = "call", (
        "``y = f(a, b)``: a call of the user's code differentiated through its own vjp when it runs "
        "(``args``, ``kwargs``, ``receiver``; ``operator``/``field`` once reverse dispatches them).")
    COPY = "copy", (
        "``y = x`` or ``y = 3``: an atom copied (merge copies, loop carries, unpacked constants).")
    AGGREGATE = "aggregate", (
        "``t = (a, b)``, ``[a, b]``, ``{k: v}``, a record: a container built from atoms (``elements``).")
    UNPACK = "unpack", (
        "``a = m[i]`` from ``a, b = m``: an item of an array or sequence (``source``, ``index``).")
    ITEM = "item", (
        "``h = xs[i]``: an item of a list known only when it runs (``list``, ``index``).")
    APPEND = "append", (
        "``xs.append(v)``: a list made here grows in place (``list``, ``value``).")
    POP = "pop", (
        "``a = xs.pop(i)``: a list made here shrinks in place (``list``, ``index``).")
    SETITEM = "setitem", (
        "``y[i] = v``: a write into an array, list or dict (``array``, ``index``, ``value``, "
        "``saved``, ``generic``, ``container``, ``shown``).")
    SETENTRY = "setentry", (
        "``obj.d[k] = v``: an entry of a dict or list an object holds replaced (``holder``, "
        "``index``, ``value``).")
    SETATTR = "setattr", (
        "``obj.name = v``: a field of an object replaced (``value``).")
    DEF = "def", (
        "``def inner(...):``: a nested function (``captures``, ``captured_as``).")
    RETURN = "return", (
        "``return result``: the function's one return, of an atom.")
    IF = "if", (
        "``if c: ... else: ...``: a branch, its test an atom.")
    FOR = "for", (
        "``for _i in range(n): ...``: an index loop (``carried``, ``first_defined``).")
    WHILE = "while", (
        "``while c: ...``: a loop, its test an atom (``carried``, ``first_defined``).")


_KEYS = frozenset(k.value for k in Key)
_KINDS = frozenset(k.value for k in Kind)


class UndocumentedAnnotation(KeyError):
    """An annotation key (or a ``kind``) that :class:`Key` (:class:`Kind`) does not document."""

    __str__ = Exception.__str__  # (the message, not its repr)


@dataclasses.dataclass(frozen=True)
class Origin:
    """Where a node came from in the user's source."""

    filename: str
    line: int
    col: int
    text: str  # the full source line, without its newline

    @property
    def where(self) -> str:
        """``file.py:12`` — the file's base name, for comments in generated code."""
        return f"{self.filename.rsplit('/', 1)[-1]}:{self.line}"


def origin_of(fn) -> Origin | None:
    """Where ``fn``'s ``def`` is (its first line), or None for a function without Python code."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    line = linecache.getline(code.co_filename, code.co_firstlineno).rstrip("\n")
    return Origin(code.co_filename, code.co_firstlineno, len(line) - len(line.lstrip()), line)


_NONE: dict = {}  # (read only: what a node without annotations has)


def get(node, key, default=None):
    return getattr(node, _KEY, _NONE).get(key, default)


def set(node, key, value):  # noqa: A001 - mirrors get()
    if key not in _KEYS or key == "kind" and value not in _KINDS:
        _refuse(key, value)
    table = node.__dict__.setdefault(_KEY, {})
    table[key] = value
    return node


def _refuse(key, value):
    if key not in _KEYS:
        raise UndocumentedAnnotation(f"the annotation key {key!r} is not documented: document it in "
                                     "anno.Key (what its value is, which pass sets it, which read it)")
    raise UndocumentedAnnotation(f"the kind {value!r} is not documented: document it in anno.Kind "
                                 "(what a statement of that kind looks like)")


def has(node, key) -> bool:
    return key in getattr(node, _KEY, _NONE)


def inherit(target, source):
    """Give ``target`` the origin and group of ``source`` unless it has its own."""
    for key in ("origin", "group"):
        if has(source, key) and not has(target, key):
            set(target, key, get(source, key))
    return target
