"""The warm-up's two-layer network on a GPU, with srcgrad's CuPy backend, when there is one.

The tutorial's second step ("PyTorch: Tensors") runs the same network on the
GPU.  With srcgrad the loss stays NumPy code; ``backend="cupy"`` asks for
generated gradient code that calls CuPy instead of NumPy, and the arrays
live on the device.

The script first reports, one line each, whether CuPy is installed, whether
CUDA sees a GPU, and whether this srcgrad has a CuPy backend (a srcgrad
without one raises ``ValueError: unknown backend 'cupy'``).  When any is
missing it says which and why, prints the CuPy code if the backend can
generate it without a GPU, and exits 0 without training.  When all three are
there, it prints the generated CuPy code, runs the warm-up's training (N=64,
D_in=1000, H=100, D_out=10, learning rate 1e-6) on the device, checks the
first gradient against srcgrad's NumPy backend on the host (relative 1e-10)
and checks that the loss falls.

Run it from the repository root::

    python examples/02_numpy_gpu.py           # 500 steps on the GPU, if it can
    python examples/02_numpy_gpu.py --quick   # 50 steps (also SRCGRAD_QUICK=1), as CI does

The same network on the CPU, with its generated code: ``python examples/01_numpy_warmup.py``.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from _gallery import check, quick_by_default

try:
    import srcgrad
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import srcgrad

N, D_IN, H, D_OUT = 64, 1000, 100, 10
LEARNING_RATE = 1e-6
RTOL = 1e-10  # the GPU sums in another order than the CPU: agreement to rounding, not bit for bit


def loss(w1, w2, x, y):
    """The warm-up's loss (as in 01_numpy_warmup.py), written with NumPy; the backend decides
    which array library the generated gradient code calls."""
    h = x.dot(w1)
    h_relu = np.maximum(h, 0)
    y_pred = h_relu.dot(w2)
    return np.square(y_pred - y).sum()



def find_cupy():
    """(the cupy module or None, a line saying what was found)."""
    try:
        import cupy
    except Exception as error:  # noqa: BLE001 - ImportError, or a CuPy built for another CUDA
        return None, f"CuPy: not available ({type(error).__name__}: {error})"
    return cupy, f"CuPy: {cupy.__version__}"


def find_gpu(cupy):
    """(True if CUDA sees a GPU, a line saying what was found)."""
    if cupy is None:
        return False, "GPU: cannot ask CUDA without CuPy"
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as error:  # noqa: BLE001 - CUDA reports no driver / no device in several ways
        return False, f"GPU: none found ({type(error).__name__}: {error})"
    if count == 0:
        return False, "GPU: none found (CUDA reports 0 devices)"
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"]
    name = name.decode() if isinstance(name, bytes) else name
    return True, f"GPU: {count} device(s); using device 0, {name}"


def find_backend():
    """(True if srcgrad has a CuPy backend, a line saying what was found, its code or None).

    Compiling without example arguments needs no arrays and no GPU, so this
    asks srcgrad itself rather than guessing from its version; the code it
    returns is the general one, not specialised to the arguments' ranks.
    """
    try:
        code = srcgrad.source(srcgrad.value_and_grad(loss, wrt=("w1", "w2"), backend="cupy"))
    except ValueError as error:  # unknown backend 'cupy': this srcgrad has none
        return False, (f"srcgrad's CuPy backend: not available in srcgrad {srcgrad.__version__} "
                       f"({type(error).__name__}: {error})"), None
    except Exception as error:  # noqa: BLE001 - the backend is there but cannot compile here
        return False, (f"srcgrad's CuPy backend: present, but unusable here "
                       f"({type(error).__name__}: {error})"), None
    return True, "srcgrad's CuPy backend: available", code


def train_on_gpu(cp, steps: int, report_every: int, seed: int) -> None:
    """The warm-up's training loop with the arrays on the device."""
    # The same data as the CPU warm-up (same seed), made on the host and copied to the device.
    rng = np.random.default_rng(seed)
    host = [rng.standard_normal(shape) for shape in ((N, D_IN), (N, D_OUT), (D_IN, H), (H, D_OUT))]
    x, y, w1, w2 = (cp.asarray(a) for a in host)

    loss_and_grads = srcgrad.value_and_grad(loss, wrt=("w1", "w2"), backend="cupy")
    print("---- the gradient code srcgrad generated for loss() with the CuPy backend ----")
    srcgrad.show(loss_and_grads, w1, w2, x, y)

    # The device's first gradient against the NumPy backend's on the host.
    _, (grad_w1, grad_w2) = loss_and_grads(w1, w2, x, y)
    _, host_grads = srcgrad.value_and_grad(loss, wrt=("w1", "w2"))(host[2], host[3], host[0], host[1])
    for name, on_device, on_host in zip(("w1", "w2"), (grad_w1, grad_w2), host_grads):
        difference = float(np.max(np.abs(cp.asnumpy(on_device) - on_host)) / np.max(np.abs(on_host)))
        check(difference <= RTOL, f"the GPU's gradient of {name} differs from the CPU's by "
                                  f"{difference:.3g} (relative; allowed {RTOL:g})")
    print(f"the first gradients on the GPU agree with the NumPy backend's (relative {RTOL:g})")

    losses = []
    cp.cuda.Device().synchronize()
    start = time.perf_counter()
    for t in range(steps):
        value, (grad_w1, grad_w2) = loss_and_grads(w1, w2, x, y)
        w1 -= LEARNING_RATE * grad_w1
        w2 -= LEARNING_RATE * grad_w2
        if t % report_every == report_every - 1 or t == 0:
            losses.append(float(value))  # float() copies the value to the host: only when printing
            print(f"step {t + 1:4d}  loss {losses[-1]:.6g}")
    cp.cuda.Device().synchronize()
    elapsed = time.perf_counter() - start
    print(f"GPU training: loss {losses[0]:.6g} -> {losses[-1]:.6g} in {steps} steps "
          f"({elapsed / steps * 1e3:.2f} ms per step)")
    check(losses[-1] < 1e-3 * losses[0], f"the loss did not fall enough on the GPU: "
                                         f"{losses[0]:.6g} -> {losses[-1]:.6g}")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        default=quick_by_default(),
                        help="50 steps instead of 500, for CI (also SRCGRAD_QUICK=1)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    cp, cupy_line = find_cupy()
    has_gpu, gpu_line = find_gpu(cp)
    has_backend, backend_line, code = find_backend()
    for line in (cupy_line, gpu_line, backend_line):
        print(line)
    if code is not None and not has_gpu:
        print("---- the CuPy gradient code srcgrad generates for loss() (general ranks; not run here) ----")
        print(code, end="")
    if not (cp is not None and has_gpu and has_backend):
        missing = [what for what, ok in (("srcgrad's CuPy backend", has_backend), ("CuPy", cp is not None),
                                         ("a CUDA GPU", has_gpu)) if not ok]
        print(f"skipped: this example needs {' and '.join(missing)}; nothing was run.")
        print("The same network on the CPU, with its generated gradient code: "
              "python examples/01_numpy_warmup.py")
        return

    train_on_gpu(cp, 50 if args.quick else 500, 10 if args.quick else 100, args.seed)
    print("02_numpy_gpu: all checks passed")


if __name__ == "__main__":
    main()
