"""``srcgrad show file.py:function``: print the gradient code srcgrad generates."""
from __future__ import annotations

import argparse
import importlib.util
import pathlib
import sys

from . import api
from .errors import SrcgradError
from .pipeline import compile_function

DESCRIPTION = """\
Print the Python code srcgrad generates for the gradient of a function.

  srcgrad show model.py:loss --wrt w1,w2
  srcgrad show model.py:TwoLayerNet.forward --mode vjp --ndim self=tree,x=2

The file is imported (its top-level code runs, as with `python -c "import ..."`);
the function is found by name (Class.method for a method).  Without --ndim the
code is the general form that works for arrays of any rank; with it, the code
is specialised as it is when called with arrays of those ranks.
"""


def _load(target: str):
    path, _, name = target.rpartition(":")
    if not path or not name:
        raise SystemExit(f"srcgrad: expected FILE.py:FUNCTION, got {target!r}")
    file = pathlib.Path(path)
    if not file.is_file():
        raise SystemExit(f"srcgrad: no such file: {file}")
    sys.path.insert(0, str(file.resolve().parent))
    spec = importlib.util.spec_from_file_location(file.stem, file)
    module = importlib.util.module_from_spec(spec)
    sys.modules[file.stem] = module
    spec.loader.exec_module(module)
    obj = module
    for part in name.split("."):
        if not hasattr(obj, part):
            raise SystemExit(f"srcgrad: {file} has no {name!r}")
        obj = getattr(obj, part)
    return obj


def _parse_wrt(text):
    items = [w.strip() for w in text.split(",") if w.strip()]
    parsed = tuple(int(w) if w.lstrip("-").isdigit() else w for w in items)
    return parsed if len(parsed) > 1 else parsed[0]


def _highlight(code: str) -> str:
    if not sys.stdout.isatty():
        return code
    try:  # optional: colour on a terminal when Pygments is installed
        from pygments import highlight
        from pygments.formatters import TerminalFormatter
        from pygments.lexers import PythonLexer
    except ImportError:
        return code
    return highlight(code, PythonLexer(), TerminalFormatter())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="srcgrad", description=DESCRIPTION,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("show", help="print the generated gradient code of FILE.py:FUNCTION")
    show.add_argument("target", help="FILE.py:FUNCTION (or FILE.py:Class.method)")
    show.add_argument("--wrt", default="0", help="parameters to differentiate: indices or names, "
                      "comma-separated (default: 0)")
    show.add_argument("--mode", choices=("grad", "value_and_grad", "vjp"), default="grad")
    show.add_argument("--backend", choices=("numpy", "cupy"), default="numpy")
    show.add_argument("--ndim", default="", help="ranks of the parameters, e.g. w1=2,x=2 "
                      "(`tree` for a model or dict)")
    show.add_argument("--no-optimize", action="store_true", help="show the sweeps before optimization")
    args = parser.parse_args(argv)
    fn = _load(args.target)
    try:
        return _show(fn, args)
    except SrcgradError as exc:  # the user's mistake: the message says it all
        print(f"srcgrad: {exc}", file=sys.stderr)
        return 1


def _show(fn, args) -> int:
    transformed = api.GradientFunction(fn, args.mode, _parse_wrt(args.wrt), args.backend,
                                       not args.no_optimize)
    ranks = dict(item.split("=") for item in args.ndim.split(",") if item)
    params = transformed._params
    unknown = set(ranks) - set(params)
    if unknown:
        raise SystemExit(f"srcgrad: --ndim names no parameter: {sorted(unknown)}; the parameters "
                         f"are {params}")
    key = tuple(None if ranks.get(p, "?") in ("?", "tree") else int(ranks[p]) for p in params)
    code = compile_function(fn, transformed.options, key, api.bind_vjp).source
    print(_highlight(code), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
