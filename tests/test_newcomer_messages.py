"""Messages a newcomer met: each names the user's file:line, or what is missing."""
import math

import numpy as np
import pytest

import srcgrad

HERE = __file__


def _line(fn, text):
    """The line number of ``text`` in this file, at or after ``fn``'s def."""
    lines = open(HERE).read().splitlines()
    start = fn.__code__.co_firstlineno
    return next(i + 1 for i in range(start - 1, len(lines)) if text in lines[i])


def loss(w, x):
    h = x @ w
    return np.sum(np.tanh(h) ** 2)


def helper(h, b):
    return np.tanh(h + b)


def loss_with_helper(w, b, x):
    h = x @ w
    return np.sum(helper(h, b) ** 2)


def test_wrong_shape_in_the_forward_sweep_names_the_users_line():
    with pytest.raises(ValueError, match="matmul") as info:  # NumPy's own error, kept
        srcgrad.grad(loss)(np.ones((2, 3)), np.ones((4, 3)))
    notes = info.value.__notes__
    assert notes == [f"srcgrad: in the forward sweep srcgrad generated for {HERE}:{_line(loss, 'h = x @ w')}"
                     "\n    h = x @ w"]


@pytest.mark.parametrize("make", [srcgrad.grad, srcgrad.value_and_grad,
                                  lambda f: srcgrad.grad(f, wrt=(0, 1)), srcgrad.jvp, srcgrad.hvp])
def test_wrong_shape_inside_a_helper_names_the_helpers_line(make):
    w, b, x = np.ones((3, 2)), np.ones(5), np.ones((4, 3))
    extra = (w,) if make in (srcgrad.jvp, srcgrad.hvp) else ()
    with pytest.raises(ValueError, match="broadcast") as info:
        make(loss_with_helper)(w, b, x, *extra)
    where = f"{HERE}:{_line(helper, 'return np.tanh(h + b)')}\n    return np.tanh(h + b)"
    assert any(where in note for note in info.value.__notes__), info.value.__notes__


def test_wrong_shape_in_the_backward_sweep_names_the_users_line():
    w, x = np.ones((3, 2)), np.ones((4, 3))
    with pytest.raises(ValueError) as info:  # a hook giving h's adjoint the wrong shape
        srcgrad.grad(loss, hooks={"h": lambda h_bar: h_bar[:1, :1].repeat(3, 0)})(w, x)
    line = _line(loss, "h = x @ w")
    assert f"srcgrad: in the backward sweep srcgrad generated for {HERE}:{line}" in info.value.__notes__[0]


def test_forgotten_tangent_and_vector_are_named():
    w, x = np.ones((3, 2)), np.ones((4, 3))
    with pytest.raises(TypeError, match=r"^the tangent of w is missing: the jvp of loss takes loss's "
                                        r"arguments \(w, x\), then the tangent of w$"):
        srcgrad.jvp(loss)(w, x)
    with pytest.raises(TypeError, match=r"^the vector of w is missing: hvp\(loss\) takes"):
        srcgrad.hvp(loss)(w, x)
    with pytest.raises(TypeError, match=r"tangents of \(w, x\) as a tuple is missing"):
        srcgrad.jvp(loss, wrt=(0, 1))(w, x)
    with pytest.raises(TypeError, match=r"^the tangent of w is missing: jvp\(grad\(loss\)\)"):
        srcgrad.jvp(srcgrad.grad(loss))(w, x)


def test_a_missing_argument_names_the_function():
    with pytest.raises(TypeError, match=r"^loss\(\) missing a required argument: 'x' \(the grad of loss "
                                        r"takes loss's arguments \(w, x\)\)$"):
        srcgrad.grad(loss)(np.ones((3, 2)))


@pytest.mark.parametrize("fn, spelled, owner", [(np.fft.fft, "np.fft.fft", "NumPy"),
                                                (np.fft.rfft, "np.fft.rfft", "NumPy"),
                                                (math.gcd, "math.gcd", "Python")])
def test_a_library_function_without_a_rule_is_named_as_not_the_users(fn, spelled, owner):
    with pytest.raises(srcgrad.errors.NoSourceError) as info:
        srcgrad.grad(fn)(np.ones(3))
    text = str(info.value)
    assert f"{spelled} is {owner}'s function, not yours, and srcgrad has no derivative rule for it" in text
    assert f"@srcgrad.defadjoint({spelled})" in text
    assert "_pocketfft" not in text


@pytest.mark.parametrize("fn, expected", [(np.sin, np.cos), (np.tanh, lambda x: 1 - np.tanh(x) ** 2),
                                          (np.exp, np.exp)])
def test_a_library_function_with_a_rule_is_differentiated(fn, expected):
    x = np.array([0.3, -1.2])
    np.testing.assert_allclose(srcgrad.elementwise_grad(fn)(x), expected(x), rtol=1e-12)


@srcgrad.custom_adjoint
def tripled_relu(x):
    return np.maximum(x, 0)


@tripled_relu.defadjoint
def tripled_relu_adjoint(ans_bar, ans, x):
    return ans_bar * 3.0  # deliberately wrong: the derivative is 1 where x > 0


def uses_tripled(w, x):
    return np.sum(tripled_relu(x @ w))


def test_check_blames_the_users_own_rule_at_its_line():
    rng = np.random.default_rng(1)
    w, x = rng.normal(size=(3, 2)), rng.normal(size=(4, 3))
    with pytest.raises(srcgrad.errors.GradientCheckError) as info:
        srcgrad.grad(uses_tripled, check=True)(w, x)
    text = str(info.value)
    first = tripled_relu_adjoint.__code__.co_firstlineno
    assert text.startswith(f"{HERE}:{uses_tripled.__code__.co_firstlineno}:1: error: srcgrad's gradient of "
                           "uses_tripled disagrees")
    assert f"the derivative rule you wrote for `tripled_relu` ({HERE}:{first}), used here, disagrees with " \
           "central differences of `tripled_relu` itself" in text
    assert "its adjoint of x for ans_bar=1 is 3.0" in text
    assert "defect in srcgrad" not in text
    assert text.count(repr(info.value.srcgrad_value)) == 1  # each number once
