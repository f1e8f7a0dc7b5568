"""Compare two folders of generated programs written by ``pytest --record-generated=DIR``.

A refactoring of the compiler keeps the generated code byte for byte: run the same tests
before and after into two folders, then ``python tools/compare_generated.py BEFORE AFTER``.
It prints the programs found in one run only, each beside its nearest counterpart in the
other (by the function it defines), and exits 1 where the runs differ.
"""
from __future__ import annotations

import difflib
import pathlib
import re
import sys


def _programs(folder):
    return {p.read_text() for p in pathlib.Path(folder).glob("*.py")}


def _defined(text):
    found = re.search(r"^def (\w+)", text, re.M)
    return found.group(1) if found else ""


def main(before, after, shown=5):
    old, new = _programs(before), _programs(after)
    gone, came = sorted(old - new), sorted(new - old)
    print(f"{len(old)} programs before, {len(new)} after; {len(gone)} only before, {len(came)} only after")
    by_name = {}
    for text in came:
        by_name.setdefault(_defined(text), []).append(text)
    for text in gone[:shown]:
        twins = by_name.get(_defined(text), [])
        twin = max(twins, key=lambda t: difflib.SequenceMatcher(None, text, t).quick_ratio(), default="")
        sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), twin.splitlines(True),
                                                   "before", "after", n=2))
        print("-" * 60)
    return 1 if gone or came else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
