"""Errors that point at the user's code.

Every error about the user's program carries an :class:`~srcgrad.anno.Origin`
and renders like a compiler diagnostic::

    model.py:12:11: error: no derivative rule for `scipy.special.gamma`
        y = gamma(x)
            ^
    help: register one: @srcgrad.defadjoint(gamma) ...
"""
from __future__ import annotations

import linecache
import os
import re
import sys
import sysconfig

from . import anno


class SrcgradError(Exception):
    """Base class of every error srcgrad raises on purpose."""


class UserCodeError(SrcgradError):
    """An error about a place in the user's source.

    Attributes:
        origin: the :class:`srcgrad.anno.Origin` of the offending code, or None.
        problem: one sentence saying what is wrong.
        advice: what to write instead.
    """

    def __init__(self, problem: str, origin: anno.Origin | None = None, advice: str = ""):
        self.problem, self.origin, self.advice = problem, origin, advice
        self.notes: list[tuple[str, anno.Origin]] = []  # (what, where): shown below the error
        self.compiling: list = []  # the functions being compiled when it was raised, innermost first
        super().__init__(self._render())

    def _render(self) -> str:
        text = _located("error", self.problem, self.origin)
        for what, where in self.notes:
            text += "\n" + _located("note", what, where)
        return text + (f"\nhelp: {self.advice}" if self.advice else "")

    def rerender(self) -> None:
        """Update the message after ``problem``, ``origin``, ``advice`` or ``notes`` changed."""
        self.args = (self._render(),)


def _located(kind: str, what: str, origin: anno.Origin | None) -> str:
    """``file:line:col: kind: what``, the source line and a caret under the column."""
    if origin is None:
        return f"{kind}: {what}"
    stripped = origin.text.lstrip()
    indent = len(origin.text) - len(stripped)
    caret = " " * (4 + max(origin.col - indent, 0)) + "^"
    return f"{origin.filename}:{origin.line}:{origin.col + 1}: {kind}: {what}\n    {stripped}\n{caret}"


class UnsupportedSyntaxError(UserCodeError):
    """A construct srcgrad cannot differentiate (yet)."""


class NoDerivativeRuleError(UserCodeError):
    """A differentiable value flows into a call that has no derivative rule."""


class NoSourceError(UserCodeError, TypeError):
    """The function has no Python source to transform (builtin, exec, REPL)."""


class NonScalarOutputError(UserCodeError, ValueError):
    """``grad`` was asked for the gradient of a non-scalar output."""


class WrtError(UserCodeError, ValueError):
    """``wrt`` names no parameter, or a parameter that cannot be differentiated."""


def at(node, problem: str, advice: str = "", kind: type[UserCodeError] = UnsupportedSyntaxError):
    """Build a ``kind`` error located at ``node``'s origin."""
    return kind(problem, anno.get(node, "origin"), advice)


class BackendError(UserCodeError, RuntimeError):
    """The chosen array backend cannot run here (CuPy missing, no GPU)."""


class GradientCheckError(SrcgradError, AssertionError):
    """``grad(f, check=True)`` (or ``SRCGRAD_CHECK=1``) found srcgrad's value or
    gradient disagreeing with the original function: a defect in srcgrad (please
    report it), or a function that is not smooth at this point (a kink of ``abs``,
    ``maximum``, a ReLU at exactly 0), where finite differences mean nothing.

    Attributes:
        origin: where the checked function is defined.
        srcgrad_value, expected: the two numbers compared.
    """

    def __init__(self, problem: str, origin: anno.Origin | None, srcgrad_value, expected, advice: str = ""):
        self.problem, self.origin, self.advice = problem, origin, advice
        self.srcgrad_value, self.expected = srcgrad_value, expected
        super().__init__(_located("error", problem, origin) + (f"\nhelp: {advice}" if advice else ""))


class GradientCheckWarning(UserWarning):
    """``check=True`` could not check a call: the function has a kink at the point
    (its one-sided differences disagree), where no finite difference is a derivative."""


# ---- errors as the user sees them -------------------------------------------------

_GENERATED: dict[str, str] = {}  # generated code's file name -> the user's file it was compiled from


def register_generated(filename: str, user_file: str) -> None:
    """Remember which user file the generated code ``filename`` came from, so a
    traceback through it can be mapped back to the user's lines."""
    _GENERATED[filename] = user_file


def _library_roots() -> tuple:
    roots = {os.path.dirname(os.path.abspath(__file__))}
    paths = sysconfig.get_paths()
    roots |= {paths[k] for k in ("stdlib", "platstdlib", "purelib", "platlib") if k in paths}
    for name in ("numpy", "scipy"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "__file__", None):
            roots.add(os.path.dirname(os.path.abspath(module.__file__)))
    return tuple(os.path.join(r, "") for r in roots)


def is_library_file(filename: str) -> bool:
    """Whether ``filename`` is srcgrad's, NumPy's, SciPy's or another installed
    library's own file (not a place the user can fix), or not a file at all."""
    if not filename or filename.startswith("<"):
        return True
    return os.path.abspath(filename).startswith(_library_roots())


def group_comment(filename: str, line: int):
    """``(file, line, source)`` from the ``# file:line  source`` comment heading the
    group of generated code ``filename`` that holds ``line`` (``file``: the base name
    the comment gives); ``(None, 0, "")`` if none."""
    for text in reversed(linecache.getlines(filename)[:line]):
        comment = text.strip()
        head = comment[2:].split("  ", 1) if comment.startswith("# ") else []
        where, _, number = head[0].rpartition(":") if head else ("", "", "")
        if len(head) == 2 and number.isdigit() and where:
            return where, int(number), head[1]
    return None, 0, ""


def user_origin(filename: str, line: int):
    """The user's line (an ``Origin``) that line ``line`` of the generated code
    ``filename`` came from, following forward-over-reverse code (whose comments name
    the gradient code's lines) up to the user's; None where no comment says."""
    for _ in range(3):
        user_file = _GENERATED.get(filename)
        where, number, text = group_comment(filename, line)
        if user_file is None or where is None:
            return None
        generated = next((g for g in _GENERATED if g.rsplit("/", 1)[-1] == where and g.startswith("<")), None)
        if generated is None:
            # The user's file, or (an inlined helper from another module) only its base name.
            path = user_file if os.path.basename(user_file) == where else where
            full = linecache.getline(path, number).rstrip("\n") or text
            return anno.Origin(path, number, len(full) - len(full.lstrip()), full)
        filename, line = generated, number
    return None


def user_lines(tb) -> list:
    """The user's lines a traceback passed through, outermost first: for each frame of
    generated code, the user statement it was running (from the ``# file:line``
    comments that head each group of generated lines)."""
    found = []
    while tb is not None:
        origin = user_origin(tb.tb_frame.f_code.co_filename, tb.tb_lineno)
        if origin is not None:
            found.append(origin)
        tb = tb.tb_next
    return found


def note_user_lines(error: BaseException) -> None:
    """Add to an exception raised inside generated code (NumPy's ValueError for a wrong
    shape) a note naming the user's line each generated frame was running, innermost
    first, with the part of the code (forward or backward sweep) it was in; its type,
    message and traceback stay.  Called on the exception path only; a frame already
    noted (by a call nested inside another) is not noted twice."""
    notes = getattr(error, "__notes__", [])
    added, tb = [], error.__traceback__
    while tb is not None:
        filename, line = tb.tb_frame.f_code.co_filename, tb.tb_lineno
        origin = user_origin(filename, line)
        if origin is not None:
            part = next((text.strip()[7:-5] for text in reversed(linecache.getlines(filename)[:line])
                         if text.strip().startswith("# ---- ") and text.strip().endswith(" ----")),
                        "forward-mode code" if " jvp" in filename else "code")
            added.append(f"srcgrad: in the {part} srcgrad generated for {origin.filename}:{origin.line}"
                         f"\n    {origin.text.strip()}")
        tb = tb.tb_next
    seen = {n.partition(" generated for ")[2] for n in notes}
    for i, note in enumerate(reversed(added)):
        if note.partition(" generated for ")[2] not in seen:
            outer = note.replace("srcgrad: in the", "srcgrad: reached from the", 1)
            error.add_note(note if i == 0 else outer)


def _call_in(text: str, name: str):
    """``(column, dotted name)`` of the first call of ``name`` in a line of source
    (``scipy.special.spherical_jn(1, x)`` for ``spherical_jn``), or None."""
    match = re.search(r"([A-Za-z_][\w.]*\.)?\b" + re.escape(name) + r"\s*\(", text)
    if match is None:
        return None
    return match.start(), text[match.start():match.end()].rstrip("( ")


def _library_call_in(text: str):
    """``(column, dotted name)`` of the last call on a line of source of a dotted name that
    is not NumPy's (``scipy.special.spherical_jn(1, x)`` in ``np.sum(scipy.special...)``), or
    None: what the line calls into a library with."""
    found = [m for m in re.finditer(r"\b([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\s*\(", text)
             if m.group(1).split(".")[0] not in ("np", "numpy", "self")]
    return (found[-1].start(), found[-1].group(1)) if found else None


def shown_to_user(error: UserCodeError, fallback: anno.Origin | None = None) -> UserCodeError:
    """``error`` as the user sees it: located at the user's own line and, unless the
    environment variable ``SRCGRAD_TRACEBACK=1`` asks for srcgrad's internal frames
    (for a bug report), without them — the traceback ends at the user's call.

    An error located in a library's file (SciPy's code that srcgrad was asked to
    differentiate), or not located at all, is moved to the user's line that called
    into it; the library's line stays as a note.  One raised where no user line is
    known is located at ``fallback`` (the differentiated function's ``def``)."""
    calls = [o for o in user_lines(error.__traceback__) if not is_library_file(o.filename)]
    if calls and error.origin is not None and is_library_file(error.origin.filename):
        call = calls[-1]
        library = next((fn for fn in reversed(error.compiling)
                        if is_library_file(getattr(getattr(fn, "__code__", None), "co_filename", ""))), None)
        error.notes.append(("in the library code the call above runs: " + error.problem, error.origin))
        if library is not None:
            name = f"{getattr(library, '__module__', '') or ''}.{library.__qualname__}".lstrip(".")
            short = library.__name__
            spelled = _call_in(call.text, library.__name__) or _library_call_in(call.text)
            if spelled is not None:  # as the user wrote it, with the caret under it (the function the
                # line calls: the library function that failed may be one its code calls in turn)
                call = anno.Origin(call.filename, call.line, spelled[0], call.text)
                name, short = spelled[1], spelled[1].rsplit(".", 1)[-1]
            error.problem = f"srcgrad cannot differentiate `{name}`, called here (see the note below)"
            error.advice = (f"give `{name}` a derivative rule (@srcgrad.defadjoint({short}), "
                            "see docs/rules.md), or compute it with NumPy functions that have rules")
        error.origin = call
        error.rerender()
    elif error.origin is None and calls:
        error.origin = calls[-1]
        error.rerender()
    elif error.origin is None and fallback is not None:
        error.origin = fallback
        error.rerender()
    if os.environ.get("SRCGRAD_TRACEBACK") == "1":
        return error
    return error.with_traceback(None)


def without_comment(text: str) -> str:
    """A source line without its trailing ``# comment`` (read by Python's tokenizer, so a
    ``#`` inside a string stays), for code quoted back in advice."""
    import io
    import tokenize

    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                return text[:token.start[1]].rstrip()
    except (tokenize.TokenError, SyntaxError):
        pass
    return text
