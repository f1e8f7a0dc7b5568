"""Compare an ``srcgrad.nn`` layer with PyTorch's on the same weights: outputs and the
gradients of ``sum(output * output_bar)`` with respect to the input and every
parameter (by PyTorch's parameter names), in float64."""
from __future__ import annotations

import numpy as np

import srcgrad


def flatten_output(out):
    """A layer's output as a list of arrays (an LSTM gives ``(output, (h, c))``)."""
    if isinstance(out, (tuple, list)):
        return [a for item in out for a in flatten_output(item)]
    return [out]


def weighted_sum(model, x, out_bars):
    """``sum(output_i * bar_i)`` over the layer's outputs: a scalar whose adjoint is ``bars``."""
    return _weighted(model(x), out_bars)


def _weighted(out, bars):
    if isinstance(out, tuple):
        total = 0.0
        for item, bar in zip(out, bars):
            total = total + _weighted(item, bar)
        return total
    return np.sum(out * bars)


def bars_like(out, rng):
    if isinstance(out, (tuple, list)):
        return tuple(bars_like(item, rng) for item in out)
    return rng.standard_normal(np.shape(out))


def to_torch(bars, torch):
    if isinstance(bars, tuple):
        return tuple(to_torch(b, torch) for b in bars)
    return torch.tensor(bars)


def torch_weighted(out, bars, torch):
    if isinstance(out, (tuple, list)):
        return sum(torch_weighted(o, b, torch) for o, b in zip(out, bars))
    return (out * bars).sum()


def check_against_torch(layer, torch_layer, x, torch, *, rtol=1e-7, atol=1e-9, seed=0, x_grad=True,
                       load=True):
    """Load ``torch_layer``'s weights into ``layer``, then assert that the outputs and the
    gradients (input, every parameter) agree; returns the largest relative difference seen."""
    rng = np.random.default_rng(seed)
    torch_layer = torch_layer.double()
    if load:
        layer.load_state_dict(torch_layer.state_dict())
    out = layer(x)
    bars = bars_like(out, rng)
    xt = torch.tensor(x, requires_grad=x_grad and np.issubdtype(np.asarray(x).dtype, np.floating))
    out_t = torch_layer(xt)
    torch_weighted(out_t, to_torch(bars, torch), torch).backward()
    worst = 0.0
    for got, want in zip(flatten_output(out), flatten_output(out_t)):
        np.testing.assert_allclose(got, want.detach().numpy(), rtol=rtol, atol=atol)
    wrt = (0, 1) if xt.requires_grad else 0
    grads = srcgrad.grad(weighted_sum, wrt=wrt)(layer, x, bars)
    g_model = grads[0] if xt.requires_grad else grads
    if xt.requires_grad:
        np.testing.assert_allclose(grads[1], xt.grad.numpy(), rtol=rtol, atol=atol, err_msg="input")
        worst = max(worst, _relative(grads[1], xt.grad.numpy()))
    ours = dict(g_model.named_parameters())
    for name, p in torch_layer.named_parameters():
        want = p.grad.numpy() if p.grad is not None else np.zeros(tuple(p.shape))
        np.testing.assert_allclose(ours[name], want, rtol=rtol, atol=atol, err_msg=name)
        worst = max(worst, _relative(ours[name], want))
    return worst


def _relative(a, b):
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))
