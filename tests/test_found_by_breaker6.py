"""Defects found by a sixth outside tester (views and in-place operators, functions stored
on a model, custom adjoints' parameters with defaults), each gradient checked against
central finite differences in float64.  Each asserts the right value, or a refusal at the
user's line."""
import functools
import types

import numpy as np
import pytest

import srcgrad
from test_found_by_breaker3 import numerical_grad  # central differences, float64
from srcgrad import errors

X3 = np.array([0.5, -1.0, 2.0])
X4 = np.array([0.5, -1.0, 2.0, 1.5])


# ---- silently wrong: `v = a[1:]; v *= 2` dropped ---------------------------------------
# A basic-slice view of a local array, then an augmented assignment on the view: NumPy
# changes `a` through it; srcgrad took the view for a NumPy scalar (a slice index compared
# equal to an unknown rank: None == None) and compiled `v = v * 2`, a new array, so the
# write into `a` was lost from the value and the gradient.  Now refused, as `v = a[0]` was.

def slice_then_multiplied(x):
    a = x * 1.0
    v = a[1:]
    v *= 2
    return np.sum(a ** 2)


def slice_then_added_a_differentiated_value(x):
    a = x * 1.0
    v = a[::2]
    v += x[:2]
    return np.sum(a ** 2)


def buffer_filled_through_views(x):
    out = np.zeros(4)
    o = out[0:2]
    o += x[:2]
    o = out[2:4]
    o += x[2:] ** 2
    return np.sum(out * np.arange(4))


def column_of_a_matrix(x):
    m = x.reshape(2, 2) * 1.0
    col = m[:, 0]
    col *= 3
    return np.sum(m ** 2)


def new_axis_view(x):
    a = x * 1.0
    v = a[None]
    v **= 2
    return np.sum(a)


def ellipsis_view(x):
    a = x * 1.0
    v = a[..., 1:]
    v -= 1.0
    return np.sum(a ** 2)


def view_of_a_view(x):
    a = x * 1.0
    v = a[1:]
    w = v[1:]
    w /= 2.0
    return np.sum(a ** 2)


def _tail(a):
    return a[1:]


def view_from_a_helper(x):
    a = x * 1.0
    v = _tail(a)
    v *= 2
    return np.sum(a ** 2)


def view_in_a_loop(x):
    a = x * 1.0
    for i in range(2):
        v = a[i:]
        v *= 2
    return np.sum(a ** 2)


def view_in_a_branch(x):
    a = x * 1.0
    if x[0] > 0:
        v = a[1:]
        v *= 2
    return np.sum(a ** 2)


class Scaler:
    def __init__(self):
        self.w = np.array([0.5, 2.0, -1.0, 1.5])

    def loss(self, x):
        a = x * self.w
        v = a[2:]
        v *= 2
        return np.sum(a ** 2)


def method_call(x):
    return Scaler().loss(x)


VIEWS = [slice_then_multiplied, slice_then_added_a_differentiated_value, new_axis_view, ellipsis_view,
         view_of_a_view, view_from_a_helper, view_in_a_loop, view_in_a_branch]


@pytest.mark.parametrize("f", VIEWS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_in_place_operator_on_a_view_is_right_or_refused(f, dtype):
    x = X3.astype(dtype)
    try:
        g = srcgrad.grad(f)(x)
    except errors.UserCodeError as e:
        assert "test_found_by_breaker6.py" in str(e) and "share memory" in str(e), str(e)
        return
    np.testing.assert_allclose(g, numerical_grad(f, X3), rtol=1e-4 if dtype == np.float32 else 1e-7)


@pytest.mark.parametrize("f", [buffer_filled_through_views, column_of_a_matrix, method_call],
                         ids=lambda f: f.__name__)
def test_in_place_operator_on_a_view_of_four(f):
    with pytest.raises(errors.UserCodeError, match="share memory"):
        srcgrad.grad(f)(X4)


def test_the_refusal_says_how_to_write_into_the_viewed_array():
    with pytest.raises(errors.UserCodeError, match=r"`a\[1:\] \*= \.\.\.`"):
        srcgrad.grad(slice_then_multiplied)(X3)


def written_by_index(x):  # what the advice says: the same values, differentiated
    a = x * 1.0
    a[1:] *= 2
    return np.sum(a ** 2)


def test_written_by_index_instead():
    np.testing.assert_allclose(srcgrad.grad(written_by_index)(X3), [2 * 0.5, 8 * -1.0, 8 * 2.0])
    np.testing.assert_allclose(srcgrad.grad(written_by_index)(X3), numerical_grad(slice_then_multiplied, X3),
                               rtol=1e-7)


def element_of_a_parameter_added_to(x):  # x[0] of a rank-1 argument: a NumPy scalar, a new value
    s = x[0]
    s += x[1] * x[2]
    return s


def test_an_element_is_still_a_new_value():
    np.testing.assert_allclose(srcgrad.grad(element_of_a_parameter_added_to)(X3), [1.0, 2.0, -1.0])


# ---- silently wrong: a function stored on the model that reaches the model -------------
# `model.act = functools.partial(act, model)` (or a lambda, a closure naming `model`, one
# holding `model.w`): `m.act(x)` read the model's arrays through the partial, not through
# `m`, so the gradient with respect to `m` was zero.

class Model:
    def __init__(self):
        self.w = np.array([0.3, -1.2, 0.8])


def act(self, x):
    return np.sin(self.w * x)


def model_loss(m, x):
    return np.sum(m.act(x))


def _closure_over(model):
    def a(x):
        return np.sin(model.w * x)
    return a


def _closure_over_field(w):
    return lambda x: np.sin(w * x)


STORED = {
    "partial": lambda model: functools.partial(act, model),
    "keyword partial": lambda model: functools.partial(act, self=model),
    "closure": _closure_over,
    "closure over a field": lambda model: _closure_over_field(model.w),
    "partial of a partial": lambda model: functools.partial(functools.partial(act, model)),
}


@pytest.mark.parametrize("how", list(STORED))
def test_a_function_stored_on_the_model_reaching_it_is_refused(how):
    model = Model()
    model.act = STORED[how](model)
    with pytest.raises(errors.UserCodeError, match="reached other than as a layer stored in it"):
        srcgrad.grad(model_loss)(model, X3)


def test_a_method_bound_on_the_instance_is_differentiated():
    model = Model()
    model.act = types.MethodType(act, model)
    np.testing.assert_allclose(srcgrad.grad(model_loss)(model, X3).w, X3 * np.cos(model.w * X3), rtol=1e-12)


def test_a_stored_function_holding_nothing_of_the_model_is_differentiated():
    model = Model()
    model.act = np.tanh
    g = srcgrad.grad(model_loss, wrt=(0, 1))(model, X3)
    np.testing.assert_allclose(g[1], 1 - np.tanh(X3) ** 2, rtol=1e-12)


# ---- silently wrong: a custom adjoint's parameter with a default, given a differentiated value
# `k`, `shift`, `n`, ... are NumPy's discrete parameters by name (an axis, a shift); a user's
# custom adjoint's `k=2.0` is a float: it was taken for one and treated as a constant.

@srcgrad.custom_adjoint
def scaled(x, k=2.0):
    return x * k


@scaled.defadjoint
def _scaled_adjoint(ans_bar, ans, x, k=2.0):
    return ans_bar * k


@srcgrad.custom_adjoint
def shifted(x, shift=0.0):
    return x + shift


@shifted.defadjoint(diff=("x", "shift"))
def _shifted_adjoint(ans_bar, ans, x, shift=0.0):
    return ans_bar, np.sum(ans_bar) if np.ndim(shift) == 0 else ans_bar


def scaled_by_a_differentiated_value(x):
    return np.sum(scaled(x, np.sum(x)) ** 2)


def scaled_by_a_constant(x):
    return np.sum(scaled(x, 3.0) ** 2)


def shifted_by_a_differentiated_value(x):
    return np.sum(shifted(x, shift=np.sum(x)) ** 2)


def test_a_default_parameter_given_a_differentiated_value_is_refused():
    with pytest.raises(errors.NoDerivativeRuleError, match="`k` of .*scaled.* has no derivative"):
        srcgrad.grad(scaled_by_a_differentiated_value)(X3)
    with pytest.raises(errors.NoDerivativeRuleError, match="diff="):
        srcgrad.grad(scaled_by_a_differentiated_value)(X3)
    with pytest.raises(errors.NoDerivativeRuleError, match="`k`"):
        srcgrad.grad(scaled_by_an_argument, wrt=1)(X3, 1.7)


def scaled_by_an_argument(x, k):
    return np.sum(scaled(x, k) ** 2)


def test_a_default_parameter_named_in_diff_is_differentiated():
    np.testing.assert_allclose(srcgrad.grad(shifted_by_a_differentiated_value)(X3),
                               numerical_grad(shifted_by_a_differentiated_value, X3), rtol=1e-7)
    np.testing.assert_allclose(srcgrad.grad(scaled_by_a_constant)(X3), 18 * X3, rtol=1e-12)


# ---- silently wrong: a rule of yours with a test known only when it runs ----------------
# Rules are inlined as templates; a test not known when compiling took the `else` (srcgrad's
# own rules put the general form there).  A rule of yours with a test now runs as written.

@srcgrad.custom_adjoint
def signed_square(x):
    if np.sum(x) > 0:
        return x ** 2
    return -x ** 2


@signed_square.defadjoint
def _signed_square_adjoint(ans_bar, ans, x):
    if np.sum(x) > 0:
        return ans_bar * 2 * x
    return -ans_bar * 2 * x


@signed_square.defjvp
def _signed_square_tangent(ans, x, x_dot=None):
    if np.sum(x) > 0:
        return 2 * x * x_dot
    return -2 * x * x_dot


@srcgrad.custom_adjoint
def product(a, b):
    return a * b


@product.defadjoint
def _product_adjoint(ans_bar, ans, a, b):
    return ans_bar * b, ans_bar * a


@product.defjvp
def _product_tangent(ans, a, b, a_dot=None, b_dot=None):
    if a_dot is not None and b_dot is not None:
        return a_dot * b + a * b_dot
    if a_dot is not None:
        return a_dot * b
    return a * b_dot


def signed_square_sum(x):
    return np.sum(signed_square(x))


def signed_square_in_a_loop(x):
    t = 0.0
    for k in range(2):
        t = t + np.sum(signed_square(x * (k + 1))) * 0.5
    return t


def _helper_calling_the_rule(x):
    return signed_square(x) * 2.0


def signed_square_in_a_helper(x):
    return np.sum(_helper_calling_the_rule(x))


def product_squared(x):
    return np.sum(product(x, 2.0) ** 2)


@pytest.mark.parametrize("f", [signed_square_sum, signed_square_in_a_loop, signed_square_in_a_helper],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("sign", [1.0, -1.0])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_rule_with_a_test_known_when_it_runs(f, sign, dtype):
    x = (sign * np.abs(X3)).astype(dtype)
    g = srcgrad.grad(f)(x)
    assert g.dtype == dtype
    tol = 1e-4 if dtype == np.float32 else 1e-7
    np.testing.assert_allclose(g, numerical_grad(f, sign * np.abs(X3)), rtol=tol)
    _, t = srcgrad.jvp(f)(x, np.ones(3, dtype))
    np.testing.assert_allclose(t, np.sum(numerical_grad(f, sign * np.abs(X3))), rtol=tol)


def test_a_tangent_rule_testing_for_a_constant():
    _, t = srcgrad.jvp(product)(1.5, 2.0, 1.0)  # a = 1.5, b = 2.0 (a constant), a_dot = 1
    assert t == 2.0
    _, t = srcgrad.jvp(lambda_free_product)(1.5, 1.0)
    assert t == 2.0
    np.testing.assert_allclose(srcgrad.hvp(product_squared)(X3[:2], np.ones(2)), [8.0, 8.0])


def lambda_free_product(x):
    return product(x, 2.0)


# ---- silently wrong: the model being differentiated read through a global ---------------
# `loss(m, x)` whose helper reads the global `model`, the very object passed as `m` (or `W =
# model.w`, or a closure over it): the values read there were constants, the gradient lost
# that path.  Refused when compiling, at the line that reads the global.

GLOBAL_MODEL = Model()
GLOBAL_W = GLOBAL_MODEL.w
GLOBAL_PARAMS = {"w": np.array([0.3, -1.2, 0.8])}


def _helper_reading_the_global_model(x):
    return np.sin(GLOBAL_MODEL.w * x)


def loss_through_a_global_model(m, x):
    return np.sum(_helper_reading_the_global_model(x)) + np.sum(m.w * x)


def loss_through_a_global_array(m, x):
    return np.sum(GLOBAL_W * x * m.w)


def loss_through_global_params(p, x):
    return np.sum(GLOBAL_PARAMS["w"] * x) + np.sum(p["w"] * x)


def _closure_loss(model):
    def loss(m, x):
        return np.sum(model.w * x * m.w)
    return loss


@pytest.mark.parametrize("f, arg", [(loss_through_a_global_model, GLOBAL_MODEL),
                                    (loss_through_a_global_array, GLOBAL_MODEL),
                                    (loss_through_global_params, GLOBAL_PARAMS),
                                    (_closure_loss(GLOBAL_MODEL), GLOBAL_MODEL)],
                         ids=["helper reads the model", "a field of it", "a dict of params", "a closure"])
def test_the_differentiated_object_read_through_a_global_is_refused(f, arg):
    with pytest.raises(errors.UserCodeError, match="being differentiated: srcgrad follows it through"):
        srcgrad.grad(f)(arg, X3)


def test_another_object_than_the_global_is_differentiated():
    other = Model()
    g = srcgrad.grad(loss_through_a_global_array)(other, X3)
    np.testing.assert_allclose(g.w, GLOBAL_W * X3, rtol=1e-12)


# ---- silently wrong: unpacking a part of an unpacked argument ---------------------------
# `a, b = p; u, v = a` (and JAX's `(w1, b1), (w2, b2) = params`): `a`'s adjoint, gathered
# from `u` and `v`, was put together only after the sweep, too late for `p`: zeros.

W1, B1, W2, B2 = np.array([[0.5, -1.0], [2.0, 0.3]]), np.array([0.1, -0.2]), np.array([[1.5], [-0.7]]), \
    np.array([0.4])
XS = np.array([[0.2, -0.4], [1.0, 0.5], [-0.3, 0.8]])


def unpacked_twice(p):
    a, b = p
    u, v = a
    return np.sum(u * v) + np.sum(b[0] ** 2)


def jax_style_mlp(params, x):
    (w1, b1), (w2, b2) = params
    h = np.tanh(x @ w1 + b1)
    return np.sum((h @ w2 + b2) ** 2)


def three_levels(p):
    ((a, b), c), d = p
    return np.sum(a * b * c) + np.sum(d)


def _mlp_in_a_helper(params, x):
    (w1, b1), (w2, b2) = params
    return np.tanh(x @ w1 + b1) @ w2 + b2


def mlp_through_a_helper(params, x):
    return np.sum(_mlp_in_a_helper(params, x) ** 2)


def unpacked_in_a_loop(params, x):
    h = x
    for layer in params:
        (w, b), scale = layer
        h = np.tanh(h @ w + b) * scale
    return np.sum(h ** 2)


class TupleModel:
    def __init__(self, params):
        self.params = params

    def loss(self, x):
        (w1, b1), (w2, b2) = self.params
        return np.sum((np.tanh(x @ w1 + b1) @ w2 + b2) ** 2)


def method_unpacking_a_field(m, x):
    return m.loss(x)


def _flat(tree):
    if isinstance(tree, np.ndarray):
        return [tree]
    if isinstance(tree, (list, tuple)):
        return [leaf for t in tree for leaf in _flat(t)]
    return _flat(vars(tree)["params"])


def _numerical_leaves(f, tree, *rest, eps=1e-6):
    out = []
    for leaf in _flat(tree):
        g = np.zeros(leaf.shape)
        for i in np.ndindex(leaf.shape):
            old = leaf[i]
            leaf[i] = old + eps
            up = f(tree, *rest)
            leaf[i] = old - eps
            down = f(tree, *rest)
            leaf[i] = old
            g[i] = (up - down) / (2 * eps)
        out.append(g)
    return out


CASES = [
    (unpacked_twice, lambda: ((np.array([1.0, 2.0]), np.array([3.0, 4.0])), (np.array([5.0]),)), ()),
    (jax_style_mlp, lambda: ((W1.copy(), B1.copy()), (W2.copy(), B2.copy())), (XS,)),
    (jax_style_mlp, lambda: [[W1.copy(), B1.copy()], [W2.copy(), B2.copy()]], (XS,)),
    (three_levels, lambda: (((np.array([1.0, 2.0]), np.array([3.0, 4.0])), np.array([0.5, 2.0])),
                            np.array([1.0])), ()),
    (mlp_through_a_helper, lambda: ((W1.copy(), B1.copy()), (W2.copy(), B2.copy())), (XS,)),
    (unpacked_in_a_loop, lambda: [((W1.copy(), B1.copy()), np.array(0.5)), ((W1.T.copy(), B1.copy()),
                                                                             np.array(2.0))], (XS,)),
    (method_unpacking_a_field, lambda: TupleModel(((W1.copy(), B1.copy()), (W2.copy(), B2.copy()))), (XS,)),
]


@pytest.mark.parametrize("f, make, rest", CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_an_unpacked_part_unpacked_again(f, make, rest):
    tree = make()
    g = srcgrad.grad(f)(tree, *rest)
    got = _flat(g)
    for a, b in zip(got, _numerical_leaves(f, tree, *rest)):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-9)


def test_an_unpacked_part_unpacked_again_in_float32():
    params = ((W1.astype(np.float32), B1.astype(np.float32)), (W2.astype(np.float32), B2.astype(np.float32)))
    g = srcgrad.grad(jax_style_mlp)(params, XS.astype(np.float32))
    assert all(leaf.dtype == np.float32 for leaf in _flat(g))
    expected = _numerical_leaves(jax_style_mlp, ((W1.copy(), B1.copy()), (W2.copy(), B2.copy())), XS)
    for a, b in zip(_flat(g), expected):
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-4)


# ---- silently wrong: a rule's leading parameters named otherwise than ans_bar, ans ---------
# They were bound by name: `(g, y, x)` read undefined names (NameError in generated code),
# and `(result_bar, result, x)` read the generated function's own `result_bar` (1.0): the
# chain rule dropped with no error.  They are positional now, as when a rule runs as a function.

@srcgrad.custom_adjoint
def soft_clip(x):
    return np.tanh(x) * 2


@soft_clip.defadjoint
def _soft_clip_adjoint(result_bar, result, x):
    return result_bar * 2 * (1 - np.tanh(x) ** 2)


@soft_clip.defjvp
def _soft_clip_tangent(y, x, x_dot=None):
    return x_dot * (2 - y * y / 2)


@srcgrad.custom_adjoint
def cube(x):
    return x ** 3


@cube.defadjoint
def _cube_adjoint(g, y, x):
    return g * 3 * np.cbrt(y) ** 2  # (reads y: the output, by position)


def soft_clip_squared(x):
    return np.sum(soft_clip(x) ** 2)


def cube_in_a_loop(x):
    t = 0.0
    for k in range(2):
        t = t + np.sum(cube(x + k) * 0.5)
    return t


def _through_a_helper(x):
    return soft_clip(x) * cube(x)


def rules_in_a_helper(x):
    return np.sum(_through_a_helper(x))


@pytest.mark.parametrize("f", [soft_clip_squared, cube_in_a_loop, rules_in_a_helper], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_rule_parameters_named_otherwise(f, dtype):
    g = srcgrad.grad(f)(X3.astype(dtype))
    assert g.dtype == dtype
    np.testing.assert_allclose(g, numerical_grad(f, X3), rtol=1e-4 if dtype == np.float32 else 1e-7)


def test_tangent_rule_parameters_named_otherwise():
    _, t = srcgrad.jvp(soft_clip_squared)(X3, np.ones(3))
    np.testing.assert_allclose(t, np.sum(numerical_grad(soft_clip_squared, X3)), rtol=1e-7)


def real_part_of_a_complex_value(x):
    return np.sum(np.real(x * 1j) + x)


def test_the_real_part_of_a_complex_value_is_refused():
    with pytest.raises(errors.UserCodeError, match="complex"):
        srcgrad.grad(real_part_of_a_complex_value)(X3)


# ---- silently wrong (forward mode): a value kept in an object ---------------------------
# Reverse mode refuses a differentiated value kept in an attribute by a call; forward mode
# dropped its tangent (jvp 0.0).  Refused alike now.

class Accumulator:
    def __init__(self):
        self.total = 0.0

    def add(self, v):
        self.total = self.total + v
        return self.total


class History:
    def __init__(self):
        self.xs = []

    def log(self, x):
        self.xs.append(x)


class StatefulCell:
    def __init__(self):
        self.h = 0.0

    def __call__(self, x):
        self.h = np.tanh(0.5 * self.h + x)


def kept_by_a_method(a):
    acc = Accumulator()
    acc.add(np.sum(a))
    return acc.total ** 2


def appended_by_a_method(a):
    h = History()
    h.log(np.sum(a))
    h.log(np.sum(a ** 2))
    return h.xs[0] * h.xs[1]


def kept_by_a_callable(a, cell):
    for i in range(2):
        cell(a[i])
    return cell.h


def stored_in_an_attribute(a, cell):
    cell.h = np.sum(a)
    return cell.h * 2.0


@pytest.mark.parametrize("f", [kept_by_a_method, appended_by_a_method, kept_by_a_callable, stored_in_an_attribute],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("transform", ["jvp", "jacfwd", "grad"])
def test_a_value_kept_in_an_object_is_refused_in_every_mode(f, transform):
    args = (X3,) if f.__code__.co_argcount == 1 else (X3, StatefulCell())
    if f is stored_in_an_attribute and transform == "grad":
        # Read back at once: differentiated through in reverse mode (tests/test_object_state.py).
        np.testing.assert_allclose(srcgrad.grad(f)(*args), 2.0 * np.ones_like(X3))
        return
    with pytest.raises(errors.UserCodeError, match="keeps a value|storing a value"):
        if transform == "jvp":
            srcgrad.jvp(f)(*args, np.ones(3))
        elif transform == "jacfwd":
            srcgrad.jacfwd(f)(*args)
        else:
            srcgrad.grad(f)(*args)


# ---- silently wrong: results sharing memory ---------------------------------------------
# `grad(f, wrt=(0, 1))` of `sum(x + y)` returned one array twice (`gx *= 0.5` halved gy), a
# vjp of the identity handed back the caller's cotangent, a jvp the caller's tangent; a rule
# or a hook changing its adjoint in place changed another's.

def summed_pair(x, y):
    return np.sum(x + y)


def summed_triple(x, y, z):
    return np.mean(x + y + z)


def identity_scaled(x):
    return x * 1.0


def test_gradients_are_separate_arrays():
    for f, args in ((summed_pair, (X3.copy(), X3.copy())), (summed_triple, (X3.copy(),) * 3)):
        for transform in (srcgrad.grad, srcgrad.value_and_grad):
            out = transform(f, wrt=tuple(range(len(args))))(*args)
            grads = out[1] if transform is srcgrad.value_and_grad else out
            expected = [g.copy() for g in grads]
            first = grads[0]
            first *= 0.5
            for g, e in zip(grads[1:], expected[1:]):
                np.testing.assert_array_equal(g, e)


def test_a_pullback_and_a_jvp_give_new_arrays():
    u = np.ones(3)
    _, pullback = srcgrad.vjp(identity_scaled)(X3)
    back = pullback(u)
    back[0] = 7.0
    np.testing.assert_array_equal(u, np.ones(3))
    t_in = np.ones(3)
    _, t_out = srcgrad.jvp(identity_scaled)(X3, t_in)
    t_out *= 10
    np.testing.assert_array_equal(t_in, np.ones(3))


@srcgrad.custom_adjoint
def tripled(a):
    return a * 3.0


@tripled.defadjoint
def _tripled_adjoint(ans_bar, ans, a):
    ans_bar *= 3.0
    return ans_bar


def tripled_plus(a, b):
    return np.sum(tripled(a) + b)


def test_a_rule_changing_its_adjoint_in_place_is_refused_at_its_line():
    with pytest.raises(errors.UserCodeError, match="changes its argument `ans_bar` in place") as info:
        srcgrad.grad(tripled_plus, wrt=(0, 1))(X3, X3)
    assert "ans_bar *= 3.0" in str(info.value)


def clamped_through_a_hook(a, b):
    p = a * 1.0
    return np.sum((p + b) ** 2)


def _clamp_in_place(p_bar):
    p_bar *= 0.0


def test_a_hook_gets_its_adjoint_read_only():
    with pytest.raises(ValueError, match="read-only"):
        srcgrad.grad(clamped_through_a_hook, wrt=(0, 1), hooks={"p": _clamp_in_place})(X3, X3)
    g = srcgrad.grad(clamped_through_a_hook, wrt=(0, 1), hooks={"p": lambda p_bar: None})(X3, X3)
    np.testing.assert_allclose(g[1], 4 * X3)
    g = srcgrad.grad(clamped_through_a_hook, wrt=(0, 1), hooks={"p": lambda p_bar: 0.0 * p_bar})(X3, X3)
    np.testing.assert_allclose(g[0], 0.0)
    np.testing.assert_allclose(g[1], 4 * X3)


# ---- silently wrong (found on the way): a rule's unpacked locals named like the user's --
# A rule doing `p_bar, q_bar = helper(...)` (math.dist's) was inlined with those names as
# written: in a function whose own variables are `p` and `q`, it overwrote their adjoints.

import math  # noqa: E402


def dist_of_p_and_q(p, q):
    return math.dist([p, q], [0.5, q]) * p + q * p


def prod_of_items(items, start):
    t = 0.0
    for k in range(2):
        t = t + math.prod([items, start, items + k], start=start) * items
    return t


def _named_like_the_rule(p, q):
    p_bar = p * q  # (a user's own `p_bar`)
    return math.dist([p, p_bar], [q, 1.0]) + p_bar


def dist_in_a_helper(p, q):
    return _named_like_the_rule(p, q) * q


@pytest.mark.parametrize("f", [dist_of_p_and_q, prod_of_items, dist_in_a_helper], ids=lambda f: f.__name__)
def test_a_rule_unpacking_into_names_like_the_users(f):
    p, q = 0.3, 1.7
    got = srcgrad.grad(f, wrt=(0, 1))(p, q)
    h = 1e-6
    expected = ((f(p + h, q) - f(p - h, q)) / (2 * h), (f(p, q + h) - f(p, q - h)) / (2 * h))
    np.testing.assert_allclose(got, expected, rtol=1e-6)


# ---- silently wrong: a layer reached other than as a field ------------------------------
# `self.encoder(x)` through a @property returning `self._encoder`, or `self.step =
# self.lin.forward`: the layer's adjoint went under `encoder`/`step`, which is no field, and
# was dropped (zero gradient).  Now under the field holding the layer.  A lambda, partial or
# weak reference reading a layer is refused (its reads cannot be followed).

from srcgrad import nn  # noqa: E402
import weakref  # noqa: E402


class WithProperty(nn.Module):
    def __init__(self):
        self._encoder = nn.Linear(3, 3, rng=np.random.default_rng(1))

    @property
    def encoder(self):
        return self._encoder

    def forward(self, x):
        return np.tanh(self.encoder(x))


class WithBoundStep(nn.Module):
    def __init__(self):
        self.lin = nn.Linear(3, 3, rng=np.random.default_rng(2))
        self.step = self.lin.forward

    def forward(self, x):
        return np.tanh(self.step(x)) + self.lin(x)


class WithPropertyOfABoundMethod(nn.Module):
    def __init__(self):
        self.a = nn.Linear(3, 3, rng=np.random.default_rng(3))

    @property
    def enc(self):
        return self.a.forward

    def forward(self, x):
        return np.tanh(self.enc(x))


def model_sum_of_sines(m, x):
    return np.sum(np.sin(m(x)))


def _numerical_layer_grad(m, layer, x):
    out = np.zeros_like(layer.weight)
    for i in np.ndindex(layer.weight.shape):
        old = layer.weight[i]
        layer.weight[i] = old + 1e-6
        up = model_sum_of_sines(m, x)
        layer.weight[i] = old - 1e-6
        down = model_sum_of_sines(m, x)
        layer.weight[i] = old
        out[i] = (up - down) / 2e-6
    return out


XS3 = np.random.default_rng(0).standard_normal((4, 3))


@pytest.mark.parametrize("cls, field", [(WithProperty, "_encoder"), (WithBoundStep, "lin"),
                                        (WithPropertyOfABoundMethod, "a")], ids=lambda v: getattr(v, "__name__", v))
def test_a_layer_reached_through_a_property_or_a_bound_method(cls, field):
    m = cls()
    g = srcgrad.grad(model_sum_of_sines)(m, XS3)
    layer = getattr(m, field)
    np.testing.assert_allclose(getattr(g, field).weight, _numerical_layer_grad(m, layer, XS3), rtol=1e-6, atol=1e-9)
    jac = srcgrad.jacfwd(model_sum_of_sines)(m, XS3)  # (forward mode: a scalar's Jacobian is its gradient)
    np.testing.assert_allclose(getattr(jac, field).weight, getattr(g, field).weight, rtol=1e-6, atol=1e-9)


class HoldingALambda(nn.Module):
    def __init__(self):
        self.lin = nn.Linear(3, 3, rng=np.random.default_rng(4))
        lin = self.lin
        self.f = lambda h: np.tanh(lin(h))

    def forward(self, x):
        return self.f(x)


class HoldingAPartial(nn.Module):
    def __init__(self):
        self.lin = nn.Linear(3, 3, rng=np.random.default_rng(4))
        self.f = functools.partial(_apply_layer, self.lin)

    def forward(self, x):
        return self.f(x)


def _apply_layer(layer, h):
    return np.tanh(layer(h))


class HoldingAWeakReference(nn.Module):
    def __init__(self):
        self.lin = nn.Linear(3, 3, rng=np.random.default_rng(4))
        self.f = weakref.ref(self.lin)

    def forward(self, x):
        return self.f()(x)


class WithHooks(nn.Module):
    def __init__(self):
        self.lin = nn.Linear(3, 3, rng=np.random.default_rng(4))
        self.hooks = []

    def forward(self, x):
        h = self.lin(x)
        for hook in self.hooks:
            h = hook(h)
        return h


@pytest.mark.parametrize("cls", [HoldingALambda, HoldingAPartial, HoldingAWeakReference], ids=lambda c: c.__name__)
@pytest.mark.parametrize("transform", ["grad", "jacfwd"])
def test_a_callable_reading_a_layer_is_refused(cls, transform):
    with pytest.raises(errors.UserCodeError, match="reached other than as a layer stored in it"):
        getattr(srcgrad, transform)(model_sum_of_sines)(cls(), XS3)


def test_a_hook_in_a_list_reading_the_model_is_refused():
    m = WithHooks()
    m.hooks.append(lambda h: h + m.lin.bias)
    with pytest.raises(errors.UserCodeError, match="reads parameters other than through its arguments"):
        srcgrad.grad(model_sum_of_sines)(m, XS3)
    plain = WithHooks()
    plain.hooks.append(lambda h: np.tanh(h) * 2.0)  # reads nothing of the model: differentiated
    g = srcgrad.grad(model_sum_of_sines)(plain, XS3)
    np.testing.assert_allclose(g.lin.weight, _numerical_layer_grad(plain, plain.lin, XS3), rtol=1e-6, atol=1e-9)


# ---- silently wrong (forward mode): an integer leaf's zero tangent times an infinite derivative
# `x ** o.n` with `o.n = 3` an int attribute (or a dict's or tuple's int entry), x < 0: forward
# mode gave the int a zero tangent, and `0 * log(x)` is NaN.  An integer entry is a constant of
# the specialised code now (TreeRank.constants): no tangent, no adjoint.  Turned into a float,
# it compiles again and is differentiated.

class PowerModel:
    def __init__(self, n=3):
        self.a = np.array([1.5, -0.5])
        self.n = n


def power_of_an_attribute(o, x):
    return o.a * x ** o.n


def power_of_an_entry(p, x):
    return p["a"] * x ** p["n"]


def power_of_a_pair(p, x):
    a, n = p
    return a * x ** n


def root_of_an_entry(p, x):
    return p["a"] * np.sqrt(p["k"]) + x


XN = np.array([-1.2, 0.7])


@pytest.mark.parametrize("f, make", [
    (power_of_an_attribute, lambda: PowerModel()), (power_of_an_entry, lambda: {"a": np.array([1.5, -0.5]), "n": 3}),
    (power_of_a_pair, lambda: (np.array([1.5, -0.5]), 3))], ids=["attribute", "dict", "tuple"])
def test_an_integer_leaf_has_no_tangent(f, make):
    p = make()
    a = p.a if isinstance(p, PowerModel) else p["a"] if isinstance(p, dict) else p[0]
    jac = srcgrad.jacfwd(f, wrt=1)(p, XN)
    np.testing.assert_allclose(jac, np.diag(3 * a * XN ** 2), rtol=1e-12)
    jac_p = srcgrad.jacfwd(f)(p, XN)
    block = jac_p.a if isinstance(p, PowerModel) else jac_p["a"] if isinstance(p, dict) else jac_p[0]
    np.testing.assert_allclose(block, np.diag(XN ** 3), rtol=1e-12)
    assert not np.isnan(block).any()


def test_an_integer_leaf_under_a_root_and_a_hessian():
    p = {"a": np.array([1.0, 2.0, 3.0]), "k": 0}
    _, t = srcgrad.jvp(root_of_an_entry)(p, X3, {"a": np.ones(3), "k": 0})
    np.testing.assert_array_equal(t, np.zeros(3))

    def loss(q):
        return np.sum(q["a"] ** q["n"])
    h = srcgrad.hessian(loss)({"a": np.array([1.5, -0.5]), "n": 3})
    np.testing.assert_allclose(h["a"]["a"], np.diag(6 * np.array([1.5, -0.5])), rtol=1e-12)


def test_an_integer_leaf_turned_float_is_differentiated():
    o = PowerModel(n=2)
    g = srcgrad.grad(lambda_free_power_loss)(o, XN)
    assert g.n is None
    o.n = 2.0  # a float now: a parameter, whose gradient is d/dn sum(a x^n) = sum(a x^n log|x|)... at x > 0
    x = np.abs(XN)
    g = srcgrad.grad(lambda_free_power_loss)(o, x)
    np.testing.assert_allclose(g.n, np.sum(o.a * x ** 2.0 * np.log(x)), rtol=1e-12)


def lambda_free_power_loss(o, x):
    return np.sum(power_of_an_attribute(o, x))


# ---- refused, now right: an integer-array index is a copy -------------------------------

def copy_by_a_list_index_then_multiplied(x):
    a = x * 1.0
    v = a[[0, 2]]
    v *= 2  # v is a new array: a unchanged
    return np.sum(a ** 2) + np.sum(v ** 3)


def column_copy_then_added(x):
    m = np.reshape(x, (2, 2)) * 1.0
    c = m[:, [1, 0]]
    c += 1.0
    return np.sum(m * c)


@pytest.mark.parametrize("f, x", [(copy_by_a_list_index_then_multiplied, X3), (column_copy_then_added, X4)],
                         ids=lambda v: getattr(v, "__name__", ""))
def test_an_integer_array_index_copies(f, x):
    np.testing.assert_allclose(srcgrad.grad(f)(x), numerical_grad(f, x), rtol=1e-7)


class StepsOfBoundMethods(nn.Module):
    def __init__(self):
        self.a = nn.Linear(3, 3, rng=np.random.default_rng(6))
        self.steps = [self.a.forward, np.tanh]

    def forward(self, x):
        for step in self.steps:
            x = step(x)
        return x


class ForwardKeptInAName(nn.Module):
    def __init__(self):
        self.a = nn.Linear(3, 3, rng=np.random.default_rng(7))

    def forward(self, x):
        f = self.a.forward
        return np.tanh(f(x))


@pytest.mark.parametrize("cls", [StepsOfBoundMethods, ForwardKeptInAName], ids=lambda c: c.__name__)
@pytest.mark.parametrize("transform", ["grad", "jacfwd"])
def test_a_bound_method_kept_apart_from_its_layer_is_right_or_refused(cls, transform):
    """`self.steps = [self.a.forward, np.tanh]` gave zero gradients: the method's receiver's
    adjoint went to the list's item.  Right (against central differences) or refused."""
    m = cls()
    try:
        g = getattr(srcgrad, transform)(model_sum_of_sines)(m, XS3)
    except errors.UserCodeError as e:
        assert "bound method kept apart" in str(e) and "test_found_by_breaker6.py" in str(e), str(e)
        return
    np.testing.assert_allclose(g.a.weight, _numerical_layer_grad(m, m.a, XS3), rtol=1e-6, atol=1e-9)
