"""The core program: the form of a function every pass after normalize reads and writes.

A :class:`Core` is the user's function in A-normal form with single assignment: one
primitive per statement, on atoms (names and constants), each name assigned once per
execution (``x``, ``x_2``, ...), branches joined by merge copies and loops carrying their
names by copies at the end of the body.  What each statement is, and the facts the passes
attach to it, are annotations (``srcgrad.anno``): its kind is an :class:`anno.Kind`, each
annotation's key an :class:`anno.Key`, both documented there.
"""
from __future__ import annotations

import dataclasses

import gast

from .anno import Key, Kind  # noqa: F401 - the IR's statement kinds and annotation keys


@dataclasses.dataclass
class Core:
    """A function in core form.

    Attributes:
        name: the user's function name.
        params: parameter names, in order.
        body: core statements (the last is ``return <atom>``).
        result: the returned atom.
        names: every identifier in use, so later passes can make fresh ones.
    """

    name: str
    params: list
    body: list
    result: gast.expr
    names: set
    counter: list = dataclasses.field(default_factory=lambda: [0])
    final_names: dict = dataclasses.field(default_factory=dict)  # user name -> its last SSA name
    maybe_unbound: set = dataclasses.field(default_factory=set)  # bound on some paths only
    renamed: dict = dataclasses.field(default_factory=dict)  # user name -> its name here (`_rename_reserved`)

    def fresh(self, base: str | None = None) -> str:
        """A new name: ``_t<n>`` for temporaries, else ``base``, ``base_2``, ..."""
        if base is None:
            while True:
                self.counter[0] += 1
                candidate = f"_t{self.counter[0]}"
                if candidate not in self.names:
                    break
        else:
            # (from the last one given: ``names`` only grows, so base ... base_k are still
            # taken, and a name reused on every line does not try them all each time)
            k = self._given.get(base, 1)
            candidate = base if k == 1 else f"{base}_{k}"
            while candidate in self.names:
                k += 1
                candidate = f"{base}_{k}"
            self._given[base] = k
        self.names.add(candidate)
        return candidate

    def __post_init__(self):
        self._given = {}  # base -> k of the last name fresh(base) gave (a copy starts afresh)
