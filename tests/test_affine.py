"""Affine polynomials: normal form, arithmetic, evaluation, printing."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from stripe.affine import Affine

names = st.sampled_from(["i", "j", "k", "x"])
affines = st.builds(
    lambda terms, c: Affine(tuple(terms), c),
    st.lists(st.tuples(names, st.integers(-5, 5)), max_size=4),
    st.integers(-20, 20),
)
envs = st.fixed_dictionaries({n: st.integers(-10, 10) for n in ["i", "j", "k", "x"]})


def test_normal_form_sorts_merges_and_drops_zeros():
    a = Affine((("x", 2), ("i", 1), ("x", -2), ("j", 0)), 3)
    assert a.terms == (("i", 1),)
    assert a == Affine.of("i") + 3
    assert hash(a) == hash(Affine.of("i") + 3)


def test_printing_puts_constant_first():
    assert str(Affine.of("x") + Affine.of("i") - 1) == "-1 + i + x"
    assert str(Affine.of(0)) == "0"
    assert str(-2 * Affine.of("i") + Affine.of("x")) == "-2*i + x"
    assert str(3 * Affine.of("k")) == "3*k"


def test_substitute_and_rename():
    a = 2 * Affine.of("i") + Affine.of("j") + 1
    b = a.substitute({"i": Affine.of("o") * 4 + Affine.of("i")})
    assert b == 8 * Affine.of("o") + 2 * Affine.of("i") + Affine.of("j") + 1
    assert a.rename({"j": "q"}) == 2 * Affine.of("i") + Affine.of("q") + 1


def test_product_of_variables_is_rejected():
    with pytest.raises(ValueError):
        Affine.of("i") * Affine.of("j")


@given(affines, affines, envs)
def test_arithmetic_agrees_with_evaluation(a, b, env):
    assert (a + b).eval(env) == a.eval(env) + b.eval(env)
    assert (a - b).eval(env) == a.eval(env) - b.eval(env)
    assert (3 * a).eval(env) == 3 * a.eval(env)
    assert (-a).eval(env) == -a.eval(env)


def test_eval_vectorises_over_numpy_arrays():
    a = 2 * Affine.of("i") - Affine.of("j") + 1
    i, j = np.arange(4), np.arange(4)[::-1]
    np.testing.assert_array_equal(a.eval({"i": i, "j": j}), 2 * i - j + 1)
