"""Tensor basics in NumPy terms, and gradients of intermediate values with srcgrad.

A textbook's chapter on PyTorch basics ("3.2 PyTorch basics": creating
tensors, converting Python data, operations, devices, automatic
differentiation), retold for NumPy arrays, which are what srcgrad
differentiates:

1. creating arrays: by shape only, by a random distribution, by filling;
2. converting Python data: ``np.array`` copies (like ``torch.tensor``),
   ``np.asarray`` shares memory with an existing array (like
   ``torch.as_tensor`` / ``torch.from_numpy``);
3. operations: three ways to add (``+``, ``np.add``, in place with ``+=``,
   PyTorch's ``add_``), and changing shape (``reshape``, PyTorch's ``view``);
   srcgrad differentiates in-place writes, and refuses a write into an array
   that may share memory with another (it would change both);
4. devices: NumPy arrays live in host memory only; CuPy's arrays live on a
   GPU, and srcgrad's CuPy backend (``backend="cupy"``; ``02_numpy_gpu.py``
   trains with it where CuPy and a GPU are found) generates the same
   gradient code calling CuPy.  This section only reports
   what it finds and never fails;
5. automatic differentiation: ``out = mean(3 (x + 2)^2)`` at
   ``x = ones((2, 2))`` has gradient 4.5 in every entry.  PyTorch keeps no
   gradients of intermediate values unless asked (``retain_grad``) and
   changes them with hooks (``register_hook``); srcgrad's
   ``grad(f, intermediates=("y",))`` returns ``y``'s adjoint too, and
   ``grad(f, hooks={"y": fn})`` makes ``fn`` transform it in the backward
   sweep, where the generated code calls it (printed and saved).

Run it from the repository root::

    python examples/10_tensor_basics.py           # well under a second of work
    python examples/10_tensor_basics.py --quick   # the same (also SRCGRAD_QUICK=1), as CI does

Every statement about copies, views and gradients is checked with an
assertion; it exits with a message starting ``FAILED:`` if one does not hold,
and writes ``out/10_tensor_basics_grad.py``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from _gallery import check, quick_by_default

try:
    import srcgrad
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import srcgrad



def section(title: str) -> None:
    print(f"\n==== {title} ====")


# ---- 1. creating arrays -------------------------------------------------------
def creating(rng: np.random.Generator) -> None:
    section("1. creating arrays")
    a = np.empty((2, 3))  # torch.empty: memory not initialised, any values
    check(a.shape == (2, 3) and a.dtype == np.float64, "np.empty((2, 3)) is a 2x3 float64 array")
    print(f"np.empty((2, 3)): shape {a.shape}, dtype {a.dtype} (values: whatever was in memory)")

    normal = rng.standard_normal((2, 3))     # torch.randn: standard normal
    uniform = rng.random((2, 3))             # torch.rand: uniform on [0, 1)
    gauss = rng.normal(10.0, 0.1, (2, 3))    # torch.normal(mean, std)
    print("standard normal:\n", normal)
    print("uniform on [0, 1):\n", uniform)
    check(np.all((0 <= uniform) & (uniform < 1)), "rng.random draws from [0, 1)")
    check(np.all(np.abs(gauss - 10.0) < 1.0), "rng.normal(10, 0.1) draws within 1 of 10")

    ones, zeros, sevens = np.ones((2, 2)), np.zeros((2, 2)), np.full((2, 2), 7.0)
    print("np.ones, np.zeros, np.full(.., 7.0):", ones.tolist(), zeros.tolist(), sevens.tolist())
    check(ones.sum() == 4 and zeros.sum() == 0 and np.all(sevens == 7), "ones, zeros, full")
    # NumPy's default float is float64, PyTorch's float32: srcgrad keeps either (float32 in, float32 out).
    check(np.ones(1).dtype == np.float64 and np.ones(1, dtype=np.float32).dtype == np.float32,
          "NumPy's default dtype is float64; dtype= chooses float32")


# ---- 2. converting Python data ----------------------------------------------------
def converting() -> None:
    section("2. converting: copies and shared memory")
    from_list = np.array([1.0, 2.0, 3.0])  # torch.tensor([...]): a new array
    print("np.array([1.0, 2.0, 3.0]) ->", from_list, from_list.dtype)

    source = np.arange(4.0)
    shared = np.asarray(source)   # torch.as_tensor / torch.from_numpy: the same memory
    copied = np.array(source)     # torch.tensor(ndarray): a copy
    shared[0] = 100.0
    copied[1] = -1.0
    print(f"after shared[0] = 100 and copied[1] = -1: source = {source}")
    check(source[0] == 100.0, "np.asarray shares memory: writing through it changes the source")
    check(source[1] == 1.0, "np.array copies: writing into the copy leaves the source alone")
    check(np.shares_memory(shared, source) and not np.shares_memory(copied, source),
          "np.shares_memory tells which is which")
    # asarray copies when it must convert: another dtype cannot share the memory.
    check(not np.shares_memory(np.asarray(source, dtype=np.float32), source),
          "np.asarray with another dtype copies")
    check(source.tolist() == [100.0, 1.0, 2.0, 3.0], ".tolist() gives Python floats back")


# ---- 3. operations --------------------------------------------------------------------
def clipped_energy(x):
    """An in-place write after ``y`` was used: srcgrad saves the element it overwrites."""
    y = x * 2
    z = y * y
    y[0] = 0.0
    return np.sum(z) + np.sum(y)


def writes_into_a_view(x):
    """``y`` is a view of ``x`` (reshape shares memory): writing into it changes ``x`` too."""
    y = x.reshape(2, 2)
    y[0, 0] = 5.0
    return np.sum(y * x.reshape(2, 2))


def operations() -> None:
    section("3. operations: out of place, in place, reshape")
    x, y = np.ones(3), np.arange(3.0)
    first = x + y              # 1. the operator
    second = np.add(x, y)      # 2. the function (torch.add)
    before = x
    x += y                     # 3. in place (torch's x.add_(y)): no new array
    print(f"x + y = {first}, np.add(x, y) = {second}, after x += y: x = {x}")
    check(np.array_equal(first, second) and np.array_equal(x, first), "three ways, one sum")
    check(x is before, "x += y updates x in place: the same array object")
    np.add(x, y, out=x)        # the same, spelled with out=
    check(np.array_equal(x, [1.0, 3.0, 5.0]), "np.add(x, y, out=x) adds in place")

    m = np.arange(16.0)
    v = m.reshape(4, 4)        # torch's m.view(4, 4): the same memory, another shape
    w = m.reshape(-1, 8)       # -1: inferred (2)
    print(f"m.reshape(4, 4) shape {v.shape}, m.reshape(-1, 8) shape {w.shape}")
    v[0, 0] = -1.0
    check(m[0] == -1.0 and np.shares_memory(v, m), "reshape of a contiguous array is a view")
    t = v.T.reshape(16)        # a transposed array cannot be viewed flat: reshape copies
    check(not np.shares_memory(t, m), "reshape of a transposed array copies (torch's view would refuse)")

    # Gradients of code with in-place writes.
    x = np.array([1.0, 2.0, 3.0, 4.0])
    gradient = srcgrad.grad(clipped_energy)
    g = gradient(x)
    expected = 8 * x + np.array([0.0, 2.0, 2.0, 2.0])  # d sum(4x^2) + d sum(2x without x[0])
    print(f"gradient of clipped_energy at {x}: {g}")
    check(np.array_equal(g, expected), f"clipped_energy's gradient is {expected}, srcgrad gave {g}")
    check("y_overwritten = np.copy(y[0])" in srcgrad.source(gradient, x),
          "the generated code saves the overwritten element")
    try:
        srcgrad.grad(writes_into_a_view)(x)
    except srcgrad.UnsupportedSyntaxError as error:
        print("srcgrad refuses a write into a view, with advice:\n" + str(error))
    else:
        check(False, "srcgrad differentiated a write into a view of its input")


# ---- 4. devices ---------------------------------------------------------------------
def devices() -> None:
    section("4. devices")
    print("NumPy arrays live in host (CPU) memory; there is no .to('cuda') or .cpu().\n"
          "On a GPU the NumPy-like library is CuPy: cupy.asarray(x) copies to the device,\n"
          "cupy.asnumpy(x) back.  srcgrad's CuPy backend, srcgrad.grad(f, backend='cupy'),\n"
          "generates the same gradient code calling CuPy; examples/02_numpy_gpu.py trains\n"
          "with it where CuPy and a GPU are found.")
    try:
        import cupy

        x = np.arange(6.0).reshape(2, 3)
        on_device = cupy.asarray(x)          # torch's x.to("cuda")
        back = cupy.asnumpy(on_device * 2)   # torch's .cpu(): a NumPy array again
        print(f"CuPy {cupy.__version__}: round trip through {on_device.device} gave {back.tolist()}")
        check(np.array_equal(back, x * 2), "a round trip through the GPU keeps the values")
    except SystemExit:
        raise
    except Exception as error:  # noqa: BLE001 - no CuPy, no CUDA, no device: all just reported
        print(f"no GPU round trip here ({type(error).__name__}: {str(error).splitlines()[0]})")


# ---- 5. automatic differentiation -----------------------------------------------------
def textbook_out(x):
    """The textbook's example: out = mean(3 (x + 2)^2)."""
    y = x + 2
    z = y * y * 3
    out = z.mean()
    return out


def autograd() -> str:
    section("5. automatic differentiation")
    x = np.ones((2, 2))
    gradient = srcgrad.grad(textbook_out)
    x_grad = gradient(x)
    print(f"out = {textbook_out(x)}; d out / d x =\n{x_grad}")
    # d out / d x_i = 6 (x_i + 2) / 4 = 4.5 at x_i = 1, exactly in floating point.
    check(textbook_out(x) == 27.0, f"out is 27 at ones((2, 2)), got {textbook_out(x)}")
    check(np.array_equal(x_grad, np.full((2, 2), 4.5)), f"the gradient is 4.5 everywhere, got {x_grad}")

    # Gradients of intermediate values (PyTorch: y.retain_grad(); y.grad after backward).
    with_intermediates = srcgrad.grad(textbook_out, intermediates=("y", "z"))
    x_grad, watched = with_intermediates(x)
    print(f"d out / d y =\n{watched['y']}\nd out / d z =\n{watched['z']}")
    check(np.array_equal(watched["z"], np.full((2, 2), 0.25)), "d out / d z = 1/4 (the mean of 4 entries)")
    check(np.array_equal(watched["y"], np.full((2, 2), 4.5)), "d out / d y = 6 y / 4 = 4.5")
    check(np.array_equal(x_grad, np.full((2, 2), 4.5)), "and x's gradient is unchanged")

    # A hook sees y's gradient in the backward sweep and may replace it (PyTorch: y.register_hook).
    seen = []

    def print_and_double(y_grad):
        print(f"hook: d out / d y arrives as\n{y_grad}\nand leaves doubled")
        seen.append(y_grad.copy())
        return 2 * y_grad

    hooked = srcgrad.grad(textbook_out, hooks={"y": print_and_double}, intermediates=("y",))
    x_grad, watched = hooked(x)
    print(f"with the hook, d out / d x =\n{x_grad}")
    check(len(seen) == 1 and np.array_equal(seen[0], np.full((2, 2), 4.5)),
          "the hook runs once and sees y's whole gradient, 4.5")
    check(np.array_equal(x_grad, np.full((2, 2), 9.0)), "x's gradient is built from the doubled one: 9")
    check(np.array_equal(watched["y"], np.full((2, 2), 9.0)),
          "the reported intermediate is the hook's result (as PyTorch's retain_grad after a hook)")

    parts = [("grad(textbook_out)", srcgrad.source(gradient, x)),
             ('grad(textbook_out, intermediates=("y", "z")): returned beside the gradient',
              srcgrad.source(with_intermediates, x)),
             ('grad(textbook_out, hooks={"y": ...}): the hook runs where y_bar is complete',
              srcgrad.source(hooked, x))]
    return "\n\n".join(f"# ==== {title} ====\n{code}" for title, code in parts)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        default=quick_by_default(),
                        help="accepted for uniformity: this example is quick anyway (also SRCGRAD_QUICK=1)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent.parent / "out",
                        help="where to save the generated code (default: the repository's out/)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    creating(np.random.default_rng(args.seed))
    converting()
    operations()
    devices()
    code = autograd()

    args.out.mkdir(parents=True, exist_ok=True)
    code_path = args.out / "10_tensor_basics_grad.py"
    code_path.write_text(code)
    print(f"\n---- the gradient code srcgrad generated for textbook_out (saved to {code_path}) ----")
    print(code)
    print("10_tensor_basics: all checks passed")


if __name__ == "__main__":
    main()
