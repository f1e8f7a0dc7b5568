"""Errors that point at the user's code.

Every error about the user's program carries an :class:`~srcgrad.anno.Origin`
and renders like a compiler diagnostic::

    model.py:12:11: error: no derivative rule for `scipy.special.erf`
        y = erf(x)
            ^
    help: register one with @srcgrad.defadjoint(erf) ...
"""
from __future__ import annotations

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
        super().__init__(self._render())

    def _render(self) -> str:
        if self.origin is None:
            head = f"error: {self.problem}"
            body = ""
        else:
            o = self.origin
            head = f"{o.filename}:{o.line}:{o.col + 1}: error: {self.problem}"
            stripped = o.text.lstrip()
            indent = len(o.text) - len(stripped)
            caret = " " * (4 + max(o.col - indent, 0)) + "^"
            body = f"\n    {stripped}\n{caret}"
        help_ = f"\nhelp: {self.advice}" if self.advice else ""
        return head + body + help_


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
