"""srcgrad: reverse- and forward-mode automatic differentiation of Python + NumPy by source transformation."""
from . import rules  # noqa: F401 - registers the derivative rules
from .api import elementwise_grad, grad, jvp, show, source, value_and_grad, vjp
from .higher import hessian, hvp, jacfwd, jacobian, jacrev
from .higher import hvp as hessian_vector_product  # (HIPS autograd's name)
from .errors import (BackendError, GradientCheckError, NoDerivativeRuleError, NonScalarOutputError, NoSourceError, SrcgradError,
                     UnsupportedSyntaxError, UserCodeError, WrtError)
from .rules.registry import custom_adjoint, defadjoint, deftangent, nondifferentiable
from .backends import set_default_backend
from .runtime import stop_gradient, to_device, to_host
from . import data, misc, nn, optim, testing, tree  # noqa: E402

__version__ = "0.1.0"
__all__ = [
    "grad", "value_and_grad", "vjp", "jvp", "elementwise_grad", "hvp", "hessian_vector_product", "hessian", "jacfwd", "jacrev", "jacobian", "source", "show", "defadjoint", "deftangent", "nondifferentiable",
    "custom_adjoint", "stop_gradient", "data", "misc", "nn", "optim", "testing", "tree", "to_device", "to_host",
    "set_default_backend",
    "SrcgradError", "UserCodeError", "BackendError", "UnsupportedSyntaxError", "NoDerivativeRuleError",
    "NoSourceError", "NonScalarOutputError", "WrtError", "GradientCheckError",
]
