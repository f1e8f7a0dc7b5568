"""Compare two folders of generated programs written by ``pytest --record-generated=DIR``.

A refactoring of the compiler keeps the generated code byte for byte: run the same tests
before and after into two folders, then ``python tools/compare_generated.py BEFORE AFTER``.
It prints the programs found in one run only, each beside its nearest counterpart in the
other (by the function it defines), and exits 1 where the runs differ.  BEFORE may be a
run of more tests than AFTER: then only the programs found after only say a change.
"""
from __future__ import annotations

import difflib
import pathlib
import re
import sys


def _programs(folder):
    # (generated code names srcgrad's own files by absolute path, and a program read back from
    # another is named by the order of compiles in the run, `<srcgrad m.f grad ndim=(1) #2>`:
    # two checkouts or two selections of tests differ there only)
    return {_NUMBERED.sub(">", _CHECKOUT.sub(r"\1<checkout>/\2/", p.read_text()))
            for p in pathlib.Path(folder).glob("*.py")}


_NUMBERED = re.compile(r" #\d+>")
_CHECKOUT = re.compile(r"(['\"])/[^'\"]*?/(srcgrad|tests|examples|benchmarks)/")


def _defined(text):
    found = re.search(r"^def (\w+)", text, re.M)
    return found.group(1) if found else ""


def main(before, after, shown=5):
    old, new = _programs(before), _programs(after)
    gone, came = sorted(old - new), sorted(new - old)
    print(f"{len(old)} programs before, {len(new)} after; {len(gone)} only before, {len(came)} only after")
    # (a program new in AFTER first: with BEFORE a run of more tests, only those say a change)
    for text, others in [*((t, gone) for t in came[:shown]), *((t, came) for t in gone[:shown])]:
        twins = [o for o in others if _defined(o) == _defined(text)]
        twin = max(twins, key=lambda t: difflib.SequenceMatcher(None, text, t).quick_ratio(), default="")
        sides = ("before", "after") if others is came else ("after", "before")
        sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), twin.splitlines(True), *sides, n=2))
        print("-" * 60)
    return 1 if gone or came else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
