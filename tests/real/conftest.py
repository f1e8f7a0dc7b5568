"""The corpus of real programs (tests/real/programs/): each is loaded twice, as
ported to srcgrad and, with its import lines turned back into autograd's, as the
oracle, so both differentiate the same source."""
from __future__ import annotations

import importlib.util
import pathlib
import re
import sys

import numpy as np
import pytest

PROGRAMS = pathlib.Path(__file__).parent / "programs"

# srcgrad's import line -> autograd's (the port changed these lines only).
_TO_AUTOGRAD = [
    (r"^import numpy as np\b", "import autograd.numpy as np"),
    (r"^import numpy\.random as npr\b", "import autograd.numpy.random as npr"),
    (r"^from scipy\.special import", "from autograd.scipy.special import"),
    (r"^import scipy\.stats\.multivariate_normal as mvn\b", "import autograd.scipy.stats.multivariate_normal as mvn"),
    (r"^from scipy\.stats import", "from autograd.scipy.stats import"),
    (r"^import srcgrad as autograd\b", "import autograd"),
    (r"^import srcgrad\.scipy\.signal\b", "import autograd.scipy.signal"),
    (r"^from numpy\.linalg import", "from autograd.numpy.linalg import"),
    (r"^from srcgrad\.misc\.optimizers import", "from autograd.misc.optimizers import"),
    (r"^from srcgrad\.misc\.flatten import", "from autograd.misc.flatten import"),
    (r"^from srcgrad\.misc import", "from autograd.misc import"),
    (r"^from srcgrad\.misc\.fixed_points import", "from autograd.misc.fixed_points import"),
    (r"^from srcgrad\.integrate import", "from autograd.scipy.integrate import"),
    (r"^from srcgrad\.testing import", "from autograd.test_util import"),
    (r"^from srcgrad\.extend import", "from autograd.extend import"),
    (r"^from srcgrad\.util import", "from autograd.util import"),
    (r"^from builtins import tuple\b", "from autograd.builtins import tuple"),
    (r"^from srcgrad import", "from autograd import"),
    (r"^import srcgrad\b", "import autograd as srcgrad"),
]


def load(name: str, flavour: str = "srcgrad"):
    """Module ``programs/<name>.py`` as ported (``flavour="srcgrad"``) or with its
    import lines turned back into autograd's (``"autograd"``; skips without it).
    Its sibling programs import the same flavour (``from rnn import ...``)."""
    if flavour == "autograd":
        pytest.importorskip("autograd")
    key = f"_real_{flavour}_{name}"
    if key in sys.modules:
        return sys.modules[key]
    path = PROGRAMS / f"{name}.py"
    source = path.read_text()
    if flavour == "autograd":
        lines = []
        for line in source.splitlines():
            for pattern, spelling in _TO_AUTOGRAD:
                line = re.sub(pattern, spelling, line)
            lines.append(line)
        source = "\n".join(lines) + "\n"
    spec = importlib.util.spec_from_loader(key, loader=None, origin=str(path))
    module = importlib.util.module_from_spec(spec)
    module.__file__ = str(path)  # srcgrad reads the source from here (linecache below)
    import linecache
    linecache.cache[str(path) if flavour == "srcgrad" else f"<{key}>"] = (
        len(source), None, source.splitlines(True), str(path) if flavour == "srcgrad" else f"<{key}>")
    if flavour != "srcgrad":
        module.__file__ = f"<{key}>"
    sibling = _SiblingImporter(flavour)
    _forget_siblings()
    sys.meta_path.insert(0, sibling)
    try:
        sys.modules[key] = module
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    except BaseException:
        sys.modules.pop(key, None)
        raise
    finally:
        sys.meta_path.remove(sibling)
        _forget_siblings()
    return module


def _forget_siblings():
    """Drops ``sys.modules["rnn"]`` and the like, which ``from rnn import ...`` leaves: the next
    program to import ``rnn`` must get it in its own flavour (the cached one is ``_real_*``)."""
    for name in [n for n, m in sys.modules.items()
                 if "." not in n and getattr(m, "__name__", "").startswith("_real_")]:
        del sys.modules[name]


class _SiblingImporter:
    """``from data import ...`` inside a program loads ``programs/data.py`` in the same flavour."""

    def __init__(self, flavour):
        self.flavour = flavour

    def find_spec(self, fullname, path=None, target=None):
        if "." in fullname or not (PROGRAMS / f"{fullname}.py").exists():
            return None
        module = load(fullname, self.flavour)
        return importlib.util.spec_from_loader(fullname, _Loaded(module))


class _Loaded:
    def __init__(self, module):
        self.module = module

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        pass


def assert_close(ours, theirs, rtol=1e-6, atol=1e-10, path="gradient"):
    """``ours`` equals ``theirs`` leaf by leaf (tuples, lists, dicts, arrays, numbers)."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and set(ours) == set(theirs), f"{path}: keys differ"
        for k in theirs:
            assert_close(ours[k], theirs[k], rtol, atol, f"{path}[{k!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert isinstance(ours, (list, tuple)) and len(ours) == len(theirs), f"{path}: lengths differ"
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_close(a, b, rtol, atol, f"{path}[{i}]")
    else:
        a, b = np.asarray(ours), np.asarray(theirs)
        assert a.shape == b.shape, f"{path}: shape {a.shape} against {b.shape}"
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, err_msg=path)


def main_block(module, skip=(), before=None):
    """The program's ``if __name__ == "__main__":`` block, run as its author wrote it in
    ``module``'s namespace (as when run as a script: the program's functions see its
    globals), less each of the block's top-level statements whose first line holds
    one of the strings ``skip`` (plotting, the long optimisation run); ``before``: names set
    first (what the block would read from files).  Returns the namespace.  Its functions
    keep the program's file and line numbers, so srcgrad reads their source."""
    import ast
    import linecache
    source = "".join(linecache.getlines(module.__file__))
    block = next(node for node in ast.parse(source).body
                 if isinstance(node, ast.If) and "__main__" in ast.unparse(node.test))
    kept = [s for s in block.body if not any(word in source.splitlines()[s.lineno - 1] for word in skip)]
    namespace = module.__dict__
    namespace.update(before or {})
    exec(compile(ast.Module(body=kept, type_ignores=[]), module.__file__, "exec"), namespace)
    return namespace
