"""The before/after example in each pass's module docstring, checked: its ``Before::``
code is compiled up to that pass (``tests/passes/golden.py``), and each ``After::``
block must be lines of what the pass made there (``After ``reverse``::`` shows another
pass's output: what this pass starts from).

The form is ``golden.examples``': a ``Before::`` block (a function's body, or ``def``s:
the last is the function), then ``After::`` blocks; a parameter's rank comes from its
name (``golden.rank_of_name``), ``wrt`` from the label (``Before (``wrt=x``)::``).  A
pass whose output changes on purpose updates its example in the same commit."""
from __future__ import annotations

import importlib
import pkgutil

import pytest

from srcgrad import transforms
from tests.passes import golden

# module -> the pass (golden.STEPS) whose output its `After::` blocks show
CHECKED = {
    "desugar": "desugar",
    "iterators": "desugar",  # (a part of desugar)
    "inline": "inline",
    "exits": "exits",
    "anf": "normalize",
    "aliases": "aliases",
    "reverse": "reverse",
    "forward": "forward",
    "optimize": "optimize",
    "coalesce": "optimize",  # (optimize coalesces each sweep; nothing runs coalesce alone)
    "emit": "emit",
    "resugar": "resugar",
}
# Not checked here, and why.
LEFT = {
    "validate": "no example: it changes nothing, it refuses (tests/soundness/test_errors.py)",
    "numba_subset": "backend='numba' only (golden.STEPS run NumPy's): tests/modes/test_numba_backend.py checks it",
    "resolve": "its example is an annotation (`resolved=numpy.exp`), not code",
    "lower_*": "normalize's parts: anf's example shows them at work",
}


def _examples(module):
    return golden.examples(importlib.import_module(f"srcgrad.transforms.{module}").__doc__)


CASES = [(module, i, example) for module in CHECKED for i, example in enumerate(_examples(module))]


def test_every_checked_module_has_an_example():
    assert {module for module, _, _ in CASES} == set(CHECKED)


def test_every_example_is_checked_or_left_with_a_reason():
    def shows_one(module):
        doc = importlib.import_module(f"srcgrad.transforms.{module}").__doc__ or ""
        return "before/after" in doc.lower() or golden.examples(doc)

    def left(module):
        return module in LEFT or module.startswith("lower_") and "lower_*" in LEFT

    unchecked = {m.name for m in pkgutil.iter_modules(transforms.__path__)
                 if m.name not in CHECKED and not left(m.name) and shows_one(m.name)}
    assert not unchecked, f"a pass's example is neither checked nor left with a reason: {sorted(unchecked)}"


@pytest.mark.parametrize(("module", "index", "example"), CASES, ids=[f"{m}-{i}" for m, i, _ in CASES])
def test_docstring_example(module, index, example):
    fn, ranks = golden.example_function(example.before)
    assert example.after, f"{module}'s example {index} has no After:: block"
    for pass_name, block in example.after:
        pass_name = pass_name or CHECKED[module]
        wrt = example.wrt or fn.__code__.co_varnames[0]
        out = golden.after(pass_name, fn, ranks, wrt=(wrt,), lines_from_def=False)
        assert golden.contains(out, block), (
            f"srcgrad/transforms/{module}.py's example {index}: after {pass_name} the program is\n\n{out}\n"
            f"which does not hold\n\n{block}")


def test_contains_matches_lines_in_order_with_one_indent():
    out = "a = 1\nfor i in r:\n    b = a\n    c = b\nd = c\n"
    assert golden.contains(out, "b = a\nc = b")
    assert golden.contains(out, "for i in r:\n    b = a\n    ...\nd = c")
    assert not golden.contains(out, "b = a\nd = c")           # not one after another
    assert not golden.contains(out, "for i in r:\nb = a")     # indented otherwise
    assert golden.contains(out, "b  =  a")                    # spaces inside a line collapsed
