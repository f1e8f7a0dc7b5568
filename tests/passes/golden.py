"""The program as one pass leaves it: ``after(pass_name, fn, ranks)`` runs the
pipeline's steps on ``fn`` up to and including the one that runs that pass and returns
the program's text there (``test_golden_passes.py``); and the before/after examples of
the passes' docstrings, read and run (``test_pass_docstrings.py``).

The steps are ``pipeline.REVERSE``'s (``FORWARD``'s for ``forward`` or ``mode="jvp"``),
called in order on a ``pipeline.Context`` as ``pipeline._compile`` calls them; nothing
is loaded.  What is printed is what the pass made:

- ``desugar`` (the ``read_source`` step: parse, desugar, resolve), ``inline``,
  ``exits``, ``validate``: the user's function (``ctx.fdef``);
- ``normalize`` (``anf``), ``aliases`` (the ``analyze`` step): the core body
  (``ctx.core.body``);
- ``reverse``, ``forward``, ``optimize`` (``coalesce``): the sweeps, ``ctx.forward``,
  then a line ``# backward`` and ``ctx.backward`` (reverse mode);
- ``emit``: the module's text (``ctx.text``), what ``Compiled.source`` holds.

Comment markers are rendered as comments (``emit.render``); a line of the user's file
is written ``fn:line``, counted from the function's ``def`` (``lines_from_def``).
"""
from __future__ import annotations

import ast
import builtins
import dataclasses
import linecache
import os
import re
import textwrap

import numpy as np

from srcgrad import nodes, pipeline
from srcgrad.transforms import emit

# Pass name -> the pipeline step that runs it (its last step, where it takes several).
STEPS = {
    "desugar": pipeline.read_source,
    "inline": pipeline.inline_calls,
    "exits": pipeline.structure_exits,
    "validate": pipeline.validate_source,
    "normalize": pipeline.normalize,
    "anf": pipeline.normalize,
    "aliases": pipeline.analyze,
    "reverse": pipeline.differentiate_reverse,
    "forward": pipeline.differentiate_forward,
    "optimize": pipeline.optimize_sweeps,
    "coalesce": pipeline.optimize_sweeps,  # (optimize calls it on each sweep)
    "resugar": pipeline.resugar_sweeps,
    "emit": pipeline.render,
}


def context(fn, ranks, mode="grad", wrt=None, **options):
    """The ``Context`` the pipeline starts from: ``wrt`` defaults to the first parameter."""
    if wrt is None:
        wrt = (fn.__code__.co_varnames[0],)
    elif isinstance(wrt, str):
        wrt = (wrt,)
    opts = pipeline.Options(mode, tuple(wrt), False, **options)
    return pipeline.Context(fn, opts, tuple(ranks), backend=pipeline.backends.get(opts.backend))


def run_until(pass_name, fn, ranks, mode=None, **options):
    """The ``Context`` after the step that runs ``pass_name``; forward mode where the
    pass is ``forward`` (or ``mode="jvp"``)."""
    if mode is None:
        mode = "jvp" if pass_name == "forward" else "grad"
    ctx = context(fn, ranks, mode, **options)
    last = STEPS[pass_name]
    for step in pipeline.FORWARD if mode == "jvp" else pipeline.REVERSE:
        step(ctx)
        if step is last:
            return ctx
    raise ValueError(f"no step for {pass_name!r} in mode {mode!r}")


def text(stmts) -> str:
    """Statements as source, comment markers as comments, trailing blanks dropped."""
    return emit.render(nodes.module(list(stmts))).rstrip() + "\n" if stmts else ""


def after(pass_name, fn, ranks=(0,), mode=None, lines_from_def=True, **options) -> str:
    """``fn``'s program as the pass ``pass_name`` leaves it (see the module docstring).

    Args:
        pass_name: a key of ``STEPS``.
        fn: a user function defined in a file (srcgrad reads its source).
        ranks: each parameter's rank (``0`` scalar, ``1`` vector...), as
            ``pipeline.rank_of_argument`` gives them.
        mode: ``"grad"`` (default) or ``"jvp"`` (default for ``forward``).
        lines_from_def: ``file.py:47`` (where the user's function is) written
            ``fn:2``, the line counted from its ``def`` (then a golden does not change
            when the file around the function does).
        options: more ``pipeline.Options`` (``wrt=("x",)``, ``optimize=False``).
    """
    ctx = run_until(pass_name, fn, ranks, mode, **options)
    if pass_name in ("desugar", "inline", "exits", "validate"):
        out = text([ctx.fdef])
    elif pass_name in ("normalize", "anf", "aliases"):
        out = text(ctx.core.body)
    elif pass_name == "emit":
        out = ctx.text.rstrip() + "\n"
    elif ctx.options.mode == "jvp":
        out = text(ctx.forward)
    else:
        out = text(ctx.forward) + "# backward\n" + text(ctx.backward)
    return _lines_from_def(out, fn) if lines_from_def else out


def _lines_from_def(source: str, fn) -> str:
    code = fn.__code__
    file = re.escape(os.path.basename(code.co_filename))
    return re.sub(rf"\b{file}:(\d+)", lambda m: f"{fn.__name__}:{int(m.group(1)) - code.co_firstlineno + 1}",
                  source)


# ---- the examples in the passes' docstrings ------------------------------------------

_LABEL = re.compile(r"^(Before|After)\b(?: ``(\w+)``)?.*::$")


@dataclasses.dataclass
class Example:
    """A pass docstring's example: ``Before::`` (the user's code; ``wrt=x`` on its label
    line names the parameter differentiated, else the first) and its ``After::`` blocks,
    each ``(pass name or None for the module's own pass, text)``."""

    before: str
    after: list
    wrt: str = None


def examples(doc: str) -> list:
    """The examples in a module docstring, in order.  A block is the indented text after
    a line ``Before::`` or ``After::`` (words may come between, ``After, with ...::``;
    ``After ``reverse``::`` names another pass whose output the block shows)."""
    lines, found = doc.splitlines(), []
    for i, line in enumerate(lines):
        match = _LABEL.match(line)
        if not match:
            continue
        block = []
        for body in lines[i + 1:]:
            if body.strip() and not body.startswith(" "):
                break
            block.append(body)
        block = textwrap.dedent("\n".join(block)).strip("\n")
        if match.group(1) == "Before":
            wrt = re.search(r"wrt=(\w+)", line)
            found.append(Example(block, [], wrt and wrt.group(1)))
        else:
            found[-1].after.append((match.group(2), block))
    return found


def rank_of_name(name: str) -> int:
    """The rank an example's parameter is given, by its name (``STYLE.md``'s corpus
    convention): ``x y v u h z`` vectors, ``m w`` matrices, anything else a scalar
    (``a b c s t``, and the integers ``n i k``)."""
    first = name.rstrip("0123456789_")[:1]
    return 1 if first in "xyvuhz" else 2 if first in "mwW" else 0


def example_function(before: str):
    """The function an example's ``Before::`` code is, and its parameters' ranks: its last
    ``def`` where it has one (the ones before it are its helpers), else the code as the
    body of ``def f(...)`` whose parameters are the names it reads before binding them.
    Its source is registered with ``linecache`` as ``model.py`` (srcgrad reads the
    source), with ``np`` as its one global."""
    tree = ast.parse(before)
    if not any(isinstance(s, ast.FunctionDef) for s in tree.body):
        params = _free_names(tree)
        before = f"def f({', '.join(params)}):\n" + textwrap.indent(before, "    ") + "\n"
    filename = "model.py"
    linecache.cache[filename] = (len(before), None, before.splitlines(True), filename)
    namespace = {"__name__": "srcgrad_examples", "np": np}
    exec(compile(before, filename, "exec"), namespace)  # noqa: S102 - the docstring's own example
    last = [s for s in ast.parse(before).body if isinstance(s, ast.FunctionDef)][-1]
    fn = namespace[last.name]
    return fn, tuple(rank_of_name(p) for p in fn.__code__.co_varnames[:fn.__code__.co_argcount])


def _free_names(tree) -> list:
    bound = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load)}
    loads = sorted((n.lineno, n.col_offset, n.id) for n in ast.walk(tree)
                   if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
    return list(dict.fromkeys(n for _, _, n in loads if n not in bound and n != "np"
                              and not hasattr(builtins, n)))


def contains(output: str, block: str) -> bool:
    """Whether ``block``'s lines are lines of ``output``, one after another, each
    indented as in the block plus one offset for all (a block may show a part of a
    function); a line ``...`` stands for any lines (none too).  Spaces inside a line are
    compared collapsed; blank lines are not compared."""
    out = [(len(line) - len(line.lstrip()), " ".join(line.split())) for line in output.splitlines()
           if line.strip()]
    want = [(len(line) - len(line.lstrip()), " ".join(line.split())) for line in block.splitlines()
            if line.strip()]
    if not want or want[0][1] == "...":
        raise ValueError("an example's block starts with a line of its own, not `...`")
    return any(_matches(out, start, want, out[start][0] - want[0][0]) for start in range(len(out)))


def _matches(out, at, want, offset) -> bool:
    for k, (indent, text) in enumerate(want):
        if text == "...":
            return any(_matches(out, j, want[k + 1:], offset) for j in range(at, len(out) + 1))
        if at >= len(out) or out[at] != (indent + offset, text):
            return False
        at += 1
    return True
