"""Imports flow one way: api → pipeline → passes → rules → runtime.

Every ``import`` of a srcgrad module in srcgrad/ is read from the source (those
inside functions too: a deferred import is still an edge), and each must go to
the same layer or a lower one.  The runtime, which generated code and the rules
call, imports only the leaf utilities, so no circle of imports runs through it.
"""
from __future__ import annotations

import ast
import pathlib

import srcgrad

ROOT = pathlib.Path(srcgrad.__file__).parent

# Lowest first.  A module belongs to the layer of its longest prefix here.
LAYERS = [
    ("leaf", ("srcgrad.anno", "srcgrad.ir", "srcgrad.errors", "srcgrad.tree", "srcgrad.backends",
              # the runtime's modules, which the package srcgrad.runtime gathers into one namespace:
              *sorted(f"srcgrad.runtime.{p.stem}" for p in (ROOT / "runtime").glob("[!_]*.py")))),
    ("runtime", ("srcgrad.runtime",)),
    # written on the runtime, without the compiler:
    ("libraries", ("srcgrad.nn", "srcgrad.optim", "srcgrad.misc", "srcgrad.scipy", "srcgrad.data")),
    ("rules", ("srcgrad.rules",)),
    ("passes", ("srcgrad.nodes", "srcgrad.templates", "srcgrad.analysis", "srcgrad.transforms")),
    ("pipeline", ("srcgrad.pipeline", "srcgrad.specialise")),
    ("api", ("srcgrad.api", "srcgrad.gradient_function", "srcgrad.wrt", "srcgrad.gradient_values",
             "srcgrad.checking", "srcgrad.higher")),
    # libraries whose rules differentiate a function they are given (srcgrad.vjp of it)
    ("libraries on the compiler", ("srcgrad.integrate", "srcgrad.misc.fixed_points")),
    ("dispatch", ("srcgrad.dispatch",)),  # compiles callees when generated code runs
    ("entry points", ("srcgrad.cli", "srcgrad.__main__", "srcgrad.testing", "srcgrad.extend", "srcgrad")),
]


def _module_name(path: pathlib.Path) -> str:
    parts = ("srcgrad",) + path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _layer(module: str) -> int:
    """The layer of ``module``'s longest prefix in LAYERS (``srcgrad.misc.fixed_points`` before
    ``srcgrad.misc``, ``srcgrad.api`` before ``srcgrad``)."""
    found = [(len(p), rank) for rank, (_, prefixes) in enumerate(LAYERS) for p in prefixes
             if module == p or module.startswith(p + ".")]
    if not found:
        raise AssertionError(f"{module} is in no layer: add it to LAYERS")
    return max(found)[1]


def imports_of(module: str) -> set[str]:
    """The srcgrad modules ``module`` imports (a submodule where ``from x import y`` names one)."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.split(".")[0] == "srcgrad"}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            if target.split(".")[0] != "srcgrad":
                continue
            submodules = {f"{target}.{a.name}" for a in node.names} & MODULES.keys()
            found |= submodules or {target}
    return found - {module}


GRAPH = {m: imports_of(m) for m in MODULES}


def test_every_module_is_in_a_layer():
    unplaced = [m for m in MODULES if not any(m == p or m.startswith(p + ".") for _, ps in LAYERS for p in ps)]
    assert unplaced == [], f"in no layer (add them to LAYERS): {unplaced}"


def test_no_module_imports_from_a_layer_above_it():
    upward = [f"{m} ({LAYERS[_layer(m)][0]}) imports {t} ({LAYERS[_layer(t)][0]})"
              for m, targets in GRAPH.items() for t in sorted(targets) if _layer(t) > _layer(m)]
    assert upward == []


def test_the_runtime_imports_only_leaf_utilities():
    assert {_layer(t) for t in GRAPH["srcgrad.runtime"]} <= {0}, sorted(GRAPH["srcgrad.runtime"])


def test_no_circle_of_imports_runs_through_the_runtime():
    seen, stack = set(), list(GRAPH["srcgrad.runtime"])
    while stack:
        module = stack.pop()
        if module not in seen:
            seen.add(module)
            stack.extend(GRAPH[module])
    assert "srcgrad.runtime" not in seen


def test_the_graph_is_read_right():
    """A check of the reader itself, on edges known to be there."""
    assert "srcgrad.transforms.anf" in GRAPH["srcgrad.analysis.in_place"]  # from ..transforms.anf import ...
    assert "srcgrad.rules.registry" in GRAPH["srcgrad.analysis.ranks"]  # from ..rules.registry import
    assert "srcgrad.api" in GRAPH["srcgrad.dispatch"]  # from . import api
    assert "srcgrad.tree" in GRAPH["srcgrad.runtime"]  # from .tree import add


def test_generated_code_imports_dispatch_where_it_calls_it():
    import numpy as np

    def scaled(f, x):
        return np.sum(f(x) * x)

    def plain(x):
        return np.sum(np.tanh(x))

    x = np.ones(3)
    calls = srcgrad.source(srcgrad.grad(scaled, wrt=1), np.tanh, x)
    assert "from srcgrad import dispatch\n" in calls and "dispatch.vjp_call(f, (0,), x)" in calls
    assert "dispatch" not in srcgrad.source(srcgrad.grad(plain), x)


_WITHOUT_SCIPY = """
import sys
sys.modules["scipy"] = None  # `import scipy` raises ImportError, as where it is not installed
import numpy as np
import srcgrad
from srcgrad.rules import registry

def f(x):
    return np.sum(np.tanh(x) ** 2)

registry.register_optional()
rules = [rule for _, rule in registry._RULES.values()] + list(registry._METHOD_RULES.values())
assert not any(rule.name.startswith("scipy.") for rule in rules)
print(srcgrad.grad(f)(np.ones(2)))
"""


def test_srcgrad_works_without_scipy_and_does_not_import_it(tmp_path):
    """SciPy is optional: srcgrad imports and differentiates without it, and registers its
    SciPy rules only once the user's code has imported SciPy (``registry.lookup``)."""
    import subprocess
    import sys

    script = tmp_path / "without_scipy.py"  # (a file: srcgrad reads f's source)
    script.write_text(_WITHOUT_SCIPY)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("[0.6397")  # 2 tanh(1) (1 - tanh(1)^2)
    done = subprocess.run([sys.executable, "-c", "import sys, srcgrad; print('scipy' in sys.modules)"],
                          capture_output=True, text=True, check=False)
    assert done.stdout.strip() == "False", done.stderr


def circles(graph: dict) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan 1972, iterative)."""
    index, low, on_stack, stack, found, counter = {}, {}, set(), [], [], [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = counter[0]
                    counter[0] += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(component)
    return found


def test_no_circle_of_imports():
    assert circles(GRAPH) == []


def test_circles_are_found():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": set()}
    assert sorted(sorted(c) for c in circles(graph)) == [["a", "b", "c"], ["d", "e"]]
