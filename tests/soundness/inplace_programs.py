"""A random-program generator for in-place writes, aliases and views (used by
``test_trust_inplace.py``'s differential fuzzer).

Each program takes a vector ``x`` of 4 and mixes: new arrays (``c = x * 1.5``),
aliases (``a = c``, ``(c, 1.0)[0]``, ``ident(c)``), views (``c[1:]``, ``c.T``,
``c.reshape(2, 2)``, ``m[:, 1]``), writes (``c[i] = s``, ``c[i] += s``,
``c[::-1] = c``, ``c[1:] = c[:-1]``, ``m[k] = ...``), calls of helpers that write
into their argument or into an array of their own, branches, ``for`` and
``while`` loops.  The oracle (in the test): the value of ``value_and_grad``
equals the function's, and the gradient matches central differences, with
``optimize`` on and off; or both refuse at the program's own line.
"""
from __future__ import annotations

import linecache

import numpy as np

HELPERS = '''
def ident(y):
    return y

def mut(y):
    y[0] = y[1] * 2.0
    return np.sum(y)

def mut_none(y):
    y[1] = y[0] * y[2]

def own(y):
    z = y * 1.0
    z[0] = z[1] * z[2]
    z[1:] = z[:-1]
    return z

def own_loop(y, s):
    z = np.zeros(4)
    for i in range(4):
        z[i] = s
        z[i] += y[i] * z[i - 1]
    return z

class Holder:
    def scaled(self, y):
        z = np.copy(y)
        z[2] *= y[3]
        return z
'''


class Program:
    """One random program's source (``def program(x):``)."""

    def __init__(self, rng, loops=True):
        self.r = rng
        self.arrays = ["x"]     # vectors of 4 that may be read
        self.fresh = []         # vectors that may be written into
        self.mats = []          # 2×2 arrays that may be written into (or their views)
        self.scalars = ["x[0]"]
        # Integer arrays (a float written into one is truncated) stay out of helpers' arguments:
        # see test_trust_inplace.py::test_an_integer_array_written_and_passed_to_a_helper.
        self.integers = set()
        self.n = 0
        self.loops = loops

    def _name(self, base):
        self.n += 1
        return f"{base}{self.n}"

    def _arr(self):
        return self.r.choice(self.arrays)

    def _float_arr(self):
        return self.r.choice([a for a in self.arrays if a not in self.integers])

    def _scal(self):
        return self.r.choice(self.scalars)

    def statement(self, ind, loop=None):
        r = self.r
        k, j = r.randrange(4), r.randrange(4)
        idx = loop if loop and r.random() < 0.6 else str(k)
        kinds = ["fresh", "alias", "view", "scalar", "write", "write", "write", "write", "loss", "call",
                 "matrix", "if", "rebind"]
        kind = r.choice(kinds) if self.fresh else "fresh"
        out = []
        if kind == "fresh":
            n = self._name("c")
            made = r.choice(["x * 1.5", "np.zeros(4)", "np.sin(x)", "np.copy(x)", "x + 0.0",
                             f"{self._arr()} * {self._scal()}", "own(x)",
                             f"own_loop({self._float_arr()}, {self._scal()})",
                             f"Holder().scaled({self._float_arr()})", "np.arange(4)", "np.zeros(4, dtype=int)"])
            out.append(f"{n} = {made}")
            if "arange" in made or "int" in made:
                self.integers.add(n)
            self.arrays.append(n)
            self.fresh.append(n)
        elif kind == "alias":
            c = r.choice(self.fresh)
            n = self._name("a")
            if c in self.integers:
                self.integers.add(n)
            out.append(f"{n} = " + r.choice([f"{c}", f"({c}, 1.0)[0]", f"ident({c})", f"[{c}][0]",
                                              f"{c}.reshape(4)", f"{c}.T", f"{c}[:]", f"np.asarray({c})",
                                              f"{c}.ravel()", f"{c} if x[1] > 0 else {c}"]))
            self.arrays.append(n)
            self.fresh.append(n)
        elif kind == "view":
            c = r.choice(self.fresh + self.mats)
            n = self._name("v")
            if c in self.mats:
                out.append(f"{n} = {c}" + r.choice(["[0]", "[:, 1]", ".T[0]", ".ravel()[1:3]"]))
            else:
                out.append(f"{n} = {c}" + r.choice(["[0:2]", "[::-1][:2]", "[1:3]", "[::2]",
                                                    ".reshape(2, 2)[1]"]))
            self.scalars.append(f"{n}[0]")
            self.arrays.append(f"np.sum({n}) * x")
        elif kind == "matrix":
            n = self._name("m")
            c = r.choice(self.fresh)
            out.append(f"{n} = " + r.choice([f"{c}.reshape(2, 2)", f"{c}.reshape(2, 2).T",
                                              "np.outer(x[:2], x[2:])",
                                              f"{self._arr()}.reshape(2, 2) * 1.0"]))
            self.mats.append(n)
        elif kind == "scalar":
            n = self._name("s")
            out.append(f"{n} = " + r.choice([f"x[{k}] * 2.0", f"np.sum({self._arr()}) * 0.5",
                                              f"{self._scal()} * x[{j}]", f"{self._arr()}[{k}]"]))
            self.scalars.append(n)
        elif kind == "write":
            if self.mats and r.random() < 0.3:
                m = r.choice(self.mats)
                out.append(r.choice([f"{m}[{k % 2}, {j % 2}] = {self._scal()}",
                                     f"{m}[{k % 2}] = x[0:2] * {self._scal()}",
                                     f"{m}[:, {j % 2}] += x[1:3]",
                                     f"{m}[{f'{loop} % 2' if loop else k % 2}] = {m}[{j % 2}]"]))
            else:
                c = r.choice(self.fresh)
                s = self._scal()
                out.append(r.choice([
                    f"{c}[{idx}] = {s}", f"{c}[{idx}] = {s} * 2.0", f"{c}[{idx}] += {s}",
                    f"{c}[{idx}] -= {self._arr()}[{j}]", f"{c}[{idx}] *= x[{j}]",
                    f"{c}[0:2] = {self._arr()}[1:3]", f"{c}[:] = {c} * 0.5", f"{c}[::-1] = {c}",
                    f"{c}[1:] = {c}[:-1]", f"{c}[np.array([1, 0, 3, 2])] = {c}",
                    f"{c}[{idx}] = {c}[{j}] * {s}", f"{c}[{idx}] = {c}[{idx}] ** 2"]))
        elif kind == "loss":
            if self.mats and r.random() < 0.3:
                m = r.choice(self.mats)
                out.append(f"L = L + np.sum({m} * x.reshape(2, 2))")
            elif r.random() < 0.7:
                out.append(f"L = L + np.sum({self._arr()} * x)")
            else:
                out.append(f"L = L + {self._scal()} ** 2")
        elif kind == "call" and set(self.fresh) - self.integers:
            c = r.choice([f for f in self.fresh if f not in self.integers])
            if r.random() < 0.4:
                n = self._name("h")
                out.append(f"{n} = mut({c})")
                self.scalars.append(n)
            elif r.random() < 0.3:
                out.append(f"mut_none({c})")
            else:
                n = self._name("c")
                out.append(f"{n} = " + r.choice([f"own({c})", f"own_loop({c}, {self._scal()})",
                                                  f"Holder().scaled({c})"]))
                self.arrays.append(n)
                self.fresh.append(n)
        elif kind == "rebind":  # a new array under an old name: in a branch, or carried by a loop
            c = r.choice(self.fresh)
            if r.random() < 0.5:
                out.append(f"{c} = {c} * {self._scal()}")
            else:
                other = r.choice([f"x * {self._scal()}", "x", f"{self._arr()}"])
                if other in self.integers:
                    self.integers.add(c)
                out += [f"if {self._scal()} > 0.0:", f"    {c} = {c} * 0.5", "else:", f"    {c} = {other}"]
        elif kind == "if":
            c = r.choice(self.fresh)
            s = self._scal()
            out += [f"if {self._scal()} > 0.1:", f"    {c}[{idx}] = {s} * x[{j}]", "else:",
                    f"    {c}[{j}] += {s}"]
        if not out:  # (a call with only integer arrays to give)
            out.append(f"L = L + x[{k}] ** 2")
        return [ind + o for o in out]

    def source(self):
        lines = ["def program(x):", "    L = 0.0"]
        for _ in range(self.r.randint(2, 7)):
            roll = self.r.random()
            if self.loops and roll < 0.2 and self.fresh:
                lines.append(f"    for i in range({self.r.randint(1, 3)}):")
                for _ in range(self.r.randint(1, 3)):
                    if self.r.random() < 0.15:  # a nested loop
                        lines.append(f"        for j2 in range({self.r.randint(1, 2)}):")
                        lines += self.statement("            ", loop=self.r.choice(["j2", "(i + j2) % 4"]))
                    lines += self.statement("        ", loop=self.r.choice(["i", "i", "(i + 1) % 4"]))
            elif self.loops and roll < 0.27 and self.fresh:
                lines += ["    k = 0", f"    while k < {self.r.randint(1, 3)}:"]
                for _ in range(self.r.randint(1, 2)):
                    lines += self.statement("        ", loop="k")
                lines.append("        k = k + 1")
            else:
                lines += self.statement("    ")
        a = self._arr()
        lines.append(f"    return L + np.sum({a} * {a}) + np.sum(x * x[0])")
        return "\n".join(lines) + "\n"


_count = [0]


def load(source, method=False):
    """The function ``program`` defined by ``source`` (after the helpers), with its
    source registered so srcgrad can read it (with ``method``, ``program`` calls the
    same code as a method of an object); and its file name."""
    _count[0] += 1
    filename = f"<inplace program {_count[0]}>"
    if method:
        source = "class Program:\n" + "".join(
            "    " + line.replace("def program(x)", "def run(self, x)") + "\n"
            for line in source.splitlines()) + "\ndef program(x):\n    return Program().run(x)\n"
    text = HELPERS + source
    linecache.cache[filename] = (len(text), None, text.splitlines(True), filename)
    namespace = {"np": np}
    exec(compile(text, filename, "exec"), namespace)  # noqa: S102 - generated test programs
    return namespace["program"], filename
