"""Routes the compiler saw only as calls, which once gave silently wrong gradients:
a helper writing into an array the backward sweep reads through a dynamic spelling
(``getattr(obj, "v")[0] = v``, ``globals()["G"]``, ``vars(obj)``, ``setattr``,
``exec``, an array a helper returns), an operator dunder or a property getter that
swaps a layer mid-call, and ``a, b = xs`` with ``xs`` of another length.  Each is
refused at the user's line, or computed right (checked against central differences)."""
from __future__ import annotations

import operator

import numpy as np
import pytest

import srcgrad

X = np.array([0.5, -1.0, 2.0])
G = np.array([3.0, 1.0, 2.0])
G32 = np.array([3.0, 1.0, 2.0], dtype=np.float32)


class Holder:
    B = np.array([3.0, 1.0, 2.0])

    def __init__(self):
        self.v = np.array([3.0, 1.0, 2.0])
        self.count = 0

    def bump(self):
        getattr(self, "v")[0] = 5.0

    def loss(self, x):
        a = np.sum(x * self.v)
        self.bump()
        return a * np.sum(x)


HOLDER = Holder()


def _reset():
    for a in (G, G32, HOLDER.v, Holder.B):
        a[:] = [3.0, 1.0, 2.0]


def _get():
    return G


def by_getattr():
    getattr(HOLDER, "v")[0] = 5.0


def by_globals():
    globals()["G"][0] = 5.0


def by_globals_any_key():
    for key in ["G"]:
        globals()[key][0] = 5.0


def by_vars():
    vars(HOLDER)["v"][0] = 5.0


def by_dunder_dict():
    HOLDER.__dict__["v"][0] = 5.0


def by_getattr_method():
    getattr(G, "fill")(5.0)


def by_type():
    type(HOLDER).B[0] = 5.0


def by_flat():
    G.flat = 5.0


def by_setattr():
    setattr(G, "flat", 5.0)


def by_exec():
    exec("G[0] = 5.0")


def by_alias():
    a = getattr(HOLDER, "v")
    a[0] = 5.0


def by_returned():
    _get()[0] = 5.0


def by_operator_setitem():
    operator.setitem(G, 0, 5.0)


def by_globals_float32():
    globals()["G32"][0] = 5.0


_READS = {by_getattr: "HOLDER.v", by_vars: "HOLDER.v", by_dunder_dict: "HOLDER.v", by_alias: "HOLDER.v",
          by_type: "Holder.B", by_globals_float32: "G32"}
WRITERS = [by_getattr, by_globals, by_globals_any_key, by_vars, by_dunder_dict, by_getattr_method, by_type,
           by_flat, by_setattr, by_exec, by_alias, by_returned, by_operator_setitem, by_globals_float32]


def _caller(writer, shape):
    """``a = np.sum(x * G); writer(); return a * np.sum(x)`` (straight, or in a loop), read
    through the spelling ``writer`` writes into."""
    read = _READS.get(writer, "G")
    namespace = {"np": np, writer.__name__: writer, "G": G, "G32": G32, "HOLDER": HOLDER, "Holder": Holder}
    if shape == "loop":
        source = (f"def f(x):\n    s = 0.0\n    for _ in range(2):\n        s = s + np.sum(x * {read})\n"
                  f"        {writer.__name__}()\n    return s * np.sum(x)\n")
    else:
        source = f"def f(x):\n    a = np.sum(x * {read})\n    {writer.__name__}()\n    return a * np.sum(x)\n"
    filename = f"<test_trust_dynamic {writer.__name__} {shape}>"
    import linecache
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    exec(compile(source, filename, "exec"), namespace)
    return namespace["f"], filename


@pytest.mark.parametrize("shape", ["straight", "loop"])
@pytest.mark.parametrize("writer", WRITERS, ids=lambda w: w.__name__)
def test_a_dynamic_write_into_what_the_backward_sweep_reads_is_refused(writer, shape):
    _reset()
    fn, filename = _caller(writer, shape)
    x = X.astype(np.float32) if writer is by_globals_float32 else X
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="in place") as info:
        srcgrad.grad(fn)(x)
    assert filename in str(info.value) and writer.__name__ in str(info.value)  # the user's call


def test_a_method_writing_its_receiver_through_getattr_is_refused():
    _reset()
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="in place"):
        srcgrad.grad(lambda x, h: h.loss(x))(X, Holder())


def _bookkeeping():
    setattr(HOLDER, "count", getattr(HOLDER, "count") + 1)  # an object's field rebound
    vars(HOLDER)["count"] += 1


def with_bookkeeping(x):
    a = np.sum(x * G)
    _bookkeeping()
    return a * np.sum(x)


def _central(fn, x, eps=1e-6):
    out = []
    for e in np.eye(x.size):
        _reset()
        hi = fn(x + eps * e)
        _reset()
        lo = fn(x - eps * e)
        out.append((hi - lo) / (2 * eps))
    return np.array(out)


def test_dynamic_bookkeeping_is_differentiated():
    _reset()
    g = srcgrad.grad(with_bookkeeping)(X)
    np.testing.assert_allclose(g, _central(with_bookkeeping, X), rtol=1e-6)


# ---- an operator dunder or a property swapping a layer mid-call ------------------------
W = np.array([1.0, 2.0, -1.0])


class Lin:
    def __init__(self, w):
        self.w = w

    def __call__(self, x):
        return x * self.w


class Sq(Lin):
    def __call__(self, x):
        return x * x * self.w


class Net:
    def __init__(self):
        self.l = Lin(W.copy())

    def __call__(self, x):
        return np.tanh(self.l(x))


NET = None


class Scale:
    """Multiplies by 2; with ``swap``, puts another layer into the last net first."""
    __array_ufunc__ = None

    def __init__(self, swap):
        self.swap = swap

    def __mul__(self, x):
        if self.swap:
            NET.l = Sq(NET.l.w)
        return x * 2.0

    __rmul__ = __mul__

    @property
    def factor(self):
        if self.swap:
            NET.l = Sq(NET.l.w)
        return 2.0


def through_operator(m, x, s):
    a = m(x)
    return np.sum(a + m(x) + s * x)


def through_property(m, x, s):
    a = m(x)
    return np.sum(a + m(x) + s.factor * x)


def through_operator_in_a_loop(m, x, s):
    total = 0.0
    for _ in range(2):
        total = total + np.sum(m(x) * (x * s))
    return total


def _net():
    global NET
    NET = Net()
    return NET


@pytest.mark.parametrize("fn", [through_operator, through_property, through_operator_in_a_loop])
def test_an_operator_or_property_swapping_a_layer_is_refused(fn):
    g = srcgrad.grad(fn, wrt="x")
    with pytest.raises(srcgrad.errors.UnsupportedSyntaxError, match="changed, while the differentiated"):
        g(_net(), X, Scale(True))
        g(_net(), X, Scale(True))


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fn", [through_operator, through_property, through_operator_in_a_loop])
def test_an_operator_or_property_leaving_the_layers_is_differentiated(fn, dtype):
    x = X.astype(dtype)
    net, scale = _net(), Scale(False)
    g = srcgrad.grad(fn, wrt="x")(net, x, scale)
    expected = _central(lambda v: fn(net, v, scale), X)
    np.testing.assert_allclose(g, expected, rtol=1e-6 if dtype is np.float64 else 2e-3)


# ---- `a, b = xs` with xs of a length unknown when compiling ----------------------------
def unpack(x, xs):
    a, b = xs
    return np.sum(x * a) + np.sum(x * b * 2.0)


def _unpack_helper(x, xs):
    a, b = xs
    return np.sum(x * a * b)


def unpack_in_a_helper(x, xs):
    return _unpack_helper(x, xs) * 2.0


def unpack_in_a_loop(x, xs):
    s = 0.0
    for i in range(2):
        a, b = xs
        s = s + np.sum(x * a) * (i + 1) + np.sum(b)
    return s


class Pair:
    def loss(self, x, xs):
        a, b = xs
        return np.sum(x * a - b)


def unpack_in_a_method(x, xs):
    return Pair().loss(x, xs)


UNPACKERS = [unpack, unpack_in_a_helper, unpack_in_a_loop, unpack_in_a_method]
ARGUMENTS = {"list": lambda n, dt: [np.arange(3.0, dtype=dt) + k for k in range(n)],
             "tuple": lambda n, dt: tuple(np.arange(3.0, dtype=dt) + k for k in range(n)),
             "array": lambda n, dt: np.arange(3.0 * n, dtype=dt).reshape(n, 3)}


@pytest.mark.parametrize("kind", sorted(ARGUMENTS))
@pytest.mark.parametrize("fn", UNPACKERS, ids=lambda f: f.__name__)
def test_unpacking_another_length_raises_as_python_does(fn, kind):
    g = srcgrad.grad(fn)
    for dtype in (np.float64, np.float32):
        x = X.astype(dtype)
        xs = ARGUMENTS[kind](2, dtype)
        expected = _central(lambda v: fn(v, xs), X)
        np.testing.assert_allclose(g(x, xs), expected, rtol=1e-6 if dtype is np.float64 else 2e-3)
        for n in (1, 3):
            with pytest.raises(ValueError):
                fn(x, ARGUMENTS[kind](n, dtype))
            with pytest.raises(ValueError, match="values to unpack"):
                g(x, ARGUMENTS[kind](n, dtype))
