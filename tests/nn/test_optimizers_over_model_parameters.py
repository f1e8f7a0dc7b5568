"""Optimizers built over `model.parameters()`: an edited list is refused, a list of their own
is stepped entry by entry."""

import numpy as np
import pytest

from srcgrad import nn, optim


# ---- optimizers given an edited model.parameters() ----------------------------------------

class TwoLayers(nn.Module):
    def __init__(self):
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 1)

    def forward(self, x):
        return self.b(np.tanh(self.a(x)))


@pytest.mark.parametrize("edit", ["append", "delete", "reverse", "rebind"])
@pytest.mark.parametrize("make", [optim.SGD, optim.Adam])
def test_optimizer_refuses_an_edited_parameters_list(edit, make):
    # The optimizer stepped the model, ignoring the list: an appended array was never
    # trained, one deleted (to freeze it) was still trained, a reversed list mismatched.
    model = TwoLayers()
    params = model.parameters()
    if edit == "append":
        params.append(np.ones(3))
    elif edit == "delete":
        del params[0]
    elif edit == "reverse":
        params.reverse()
    else:
        model.a.weight = model.a.weight.copy()
    with pytest.raises(ValueError, match="no longer holds"):
        make(params, lr=0.1)


def test_optimizer_given_a_list_of_its_own_steps_every_array():
    model = TwoLayers()
    extra = np.ones(3)
    params = list(model.parameters()) + [extra]
    opt = optim.SGD(params, lr=0.5)
    opt.step([np.zeros_like(p) for p in params[:-1]] + [np.ones(3)])
    np.testing.assert_allclose(extra, 0.5)
