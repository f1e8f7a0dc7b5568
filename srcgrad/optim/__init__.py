"""Optimizers that update a model's arrays in place from gradients passed as values.

``params`` is a model (any object whose attributes hold arrays) or a
dict/list/tuple nesting of floating-point ndarrays; ``opt.step(grads)`` takes
gradients of the same structure -- what ``srcgrad.grad`` returns for it::

    opt = srcgrad.optim.Adam(model, lr=1e-3)
    for x, y in batches:
        g = dloss(model, x, y)
        opt.step(g)            # model.linear1.weight etc. change in place

There is no ``zero_grad``: gradients are values, never accumulated on the
parameters.  :class:`LBFGS`, which evaluates the loss again during a step,
takes a closure returning ``(loss, gradient)`` (``srcgrad.value_and_grad``).
:mod:`.lr_scheduler` holds PyTorch's learning-rate schedulers, acting on
``opt.param_groups``.  Every update rule follows its published equations,
cited in each class's docstring.
"""
from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .base import Optimizer, ParamGroup
from .lbfgs import LBFGS
from .rmsprop import RMSprop
from .sgd import SGD

__all__ = ["SGD", "Adadelta", "Adagrad", "Adam", "AdamW", "LBFGS", "Optimizer", "ParamGroup", "RMSprop",
           "lr_scheduler"]
