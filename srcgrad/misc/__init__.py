"""Helpers for programs written in HIPS autograd's style: a structure of parameters
flattened into one vector (:mod:`.flatten`) and optimizers that take a gradient
function ``g(x, i)`` (:mod:`.optimizers`).  They need no compiler: the gradient
they are given is any function, ``srcgrad.grad(objective)`` as much as another."""
from .flatten import flatten, flatten_func

__all__ = ["flatten", "flatten_func"]
