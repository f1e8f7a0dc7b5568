"""``Module``: the base class of layers and models."""
from __future__ import annotations

import numpy as np

from .. import runtime, tree


class Parameters(list):
    """``model.parameters()``: a list of the model's arrays that remembers the model, so that an
    optimizer given it updates the model by path (``linear1.weight``) and takes the gradient
    ``grad(Model.loss, wrt=0)`` returns, shaped like the model (or a list in this order)."""

    __slots__ = ("module",)

    def __init__(self, module, arrays):
        super().__init__(arrays)
        self.module = module


class Module:
    """A layer or model: an object whose array attributes are its parameters.

    Subclasses define ``forward``; calling the module calls ``forward``.
    Parameters are the floating-point array attributes of the module and of
    its sub-modules (also inside lists and dicts), named by path
    (``linear1.weight``).  ``training`` switches layers such as ``Dropout``.
    """

    training = True

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    __call__.__srcgrad_calls_forward__ = True

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} has no forward method: define "
                                  f"`def forward(self, x): ...` in class {type(self).__name__}")

    forward.__srcgrad_abstract__ = True

    def named_parameters(self):
        """``[(path, array)]`` for every parameter, in a fixed order."""
        paths, leaves, _ = tree.flatten(self)
        return [(tree.path_name(p), leaf) for p, leaf in zip(paths, leaves)]

    def parameters(self):
        """Every parameter array (the arrays themselves, not copies), as a :class:`Parameters`
        list: given to an optimizer (``optim.Adam(model.parameters())``, as in PyTorch) it
        stands for the model, whose gradient ``grad(Model.loss, wrt=0)(model, x)`` then
        steps it."""
        return Parameters(self, [leaf for _, leaf in self.named_parameters()])

    def state_dict(self) -> dict:
        """``{path: copy of the array}`` for every parameter."""
        return {name: np.array(leaf, copy=True) for name, leaf in self.named_parameters()}

    def load_state_dict(self, state: dict) -> None:
        """Copy arrays into the parameters, in place.

        Raises:
            KeyError: a parameter is missing from ``state``, or ``state`` has an unknown key.
            ValueError: an array's shape differs from the parameter's (names the path).
        """
        params = dict(self.named_parameters())
        missing, unexpected = sorted(set(params) - set(state)), sorted(set(state) - set(params))
        if missing or unexpected:
            raise KeyError(f"state does not match {type(self).__name__}: missing {missing}, "
                           f"unexpected {unexpected}")
        for name, array in params.items():
            value = np.asarray(state[name])
            if value.shape != array.shape:
                raise ValueError(f"{name}: the state has shape {value.shape}, the parameter {array.shape}")
            array[...] = value

    def modules(self):
        """This module and every sub-module, depth first."""
        found = [self]
        for value in vars(self).values():
            for item in (value if isinstance(value, (list, tuple)) else
                         value.values() if isinstance(value, dict) else [value]):
                if isinstance(item, Module):
                    found += item.modules()
        return found

    def to(self, device: str):
        """Move every parameter to ``"cuda"`` (CuPy arrays, on the GPU) or ``"cpu"``
        (NumPy), replacing the arrays; returns the module.  Make optimizers after
        moving, as they hold the arrays they update.

        Raises:
            srcgrad.errors.BackendError: ``"cuda"`` without CuPy or a GPU.
            ValueError: an unknown device name.
        """
        if device not in ("cuda", "gpu", "cpu"):
            raise ValueError(f"device must be 'cuda' or 'cpu', got {device!r}")
        move = runtime.to_host if device == "cpu" else runtime.to_device
        for module in self.modules():
            for key, value in list(vars(module).items()):
                if hasattr(value, "dtype") and getattr(value.dtype, "kind", "") in "fc":
                    object.__setattr__(module, key, move(value))
        return self

    def train(self, mode: bool = True):
        """Switch training behaviour (dropout) on or off, for every sub-module."""
        for module in self.modules():
            module.training = mode
        return self

    def eval(self):
        return self.train(False)

    def __repr__(self):
        parts = []
        for key, value in vars(self).items():
            if isinstance(value, Module):
                parts.append(f"  ({key}): " + repr(value).replace("\n", "\n  "))
            elif isinstance(value, (list, tuple)) and value and all(isinstance(v, Module) for v in value):
                for i, v in enumerate(value):
                    parts.append(f"  ({i}): " + repr(v).replace("\n", "\n  "))
        extra = self.extra_repr()
        if not parts:
            return f"{type(self).__name__}({extra})"
        return f"{type(self).__name__}(\n" + "\n".join(parts) + "\n)"

    def extra_repr(self) -> str:
        return ""
