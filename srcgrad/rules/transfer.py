"""Host <-> device transfers: the adjoint of a copy is the copy back; its tangent, the copy."""
from __future__ import annotations

from .. import runtime
from ..runtime import to_device, to_host
from .registry import defadjoint


@defadjoint(runtime.to_device, elementwise=True, tangent="linear")
def device_copy(ans_bar, ans, x):
    return to_host(ans_bar)


@defadjoint(runtime.to_host, elementwise=True, tangent="linear")
def host_copy(ans_bar, ans, x):
    return to_device(ans_bar)
