"""srcgrad: reverse-mode automatic differentiation of Python + NumPy by source transformation."""
from . import rules  # noqa: F401 - registers the derivative rules
from .api import grad, show, source, value_and_grad, vjp
from .errors import (NoDerivativeRuleError, NonScalarOutputError, NoSourceError, SrcgradError,
                     UnsupportedSyntaxError, UserCodeError, WrtError)
from .rules.registry import defadjoint, nondifferentiable

__version__ = "0.1.0"
__all__ = [
    "grad", "value_and_grad", "vjp", "source", "show", "defadjoint", "nondifferentiable",
    "SrcgradError", "UserCodeError", "UnsupportedSyntaxError", "NoDerivativeRuleError",
    "NoSourceError", "NonScalarOutputError", "WrtError",
]
