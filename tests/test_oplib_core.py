"""stripe.ops core: tensors, emit, function, the Tile text it writes, and that the result goes
through lower, interpret and compile like hand-written Tile."""

from __future__ import annotations

import numpy as np
import pytest

import stripe
from stripe import ops
from stripe.errors import ArgumentError, ArgumentTypeError


def run(fn: ops.Function, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Interpret ``fn`` and check every output's shape and dtype against the Tensor's."""
    outs = stripe.interpret(stripe.lower(fn), arrays)
    for name, (shape, dtype) in fn.tile_outputs.items():
        assert outs[name].shape == shape, name
        assert outs[name].dtype == np.dtype(dtype), name
    return outs


def test_function_text_is_readable_and_elementwise_chains_become_one_statement():
    x = ops.input("X", (2, 3))
    b = ops.input("B", (3,))
    y = ops.emit("{O}[i : 2] = +({0}[i, j])", [(x + b) * 2.0], (2,), "float32", name="Sum")
    fn = ops.function({"Y": y - 1})
    assert fn.source == fn.tile_source == str(fn)
    lines = fn.source.splitlines()
    assert lines[0] == "function (X[2, 3], B[3]) -> (Y) {"
    assert lines[1] == "    Mul = (X + B) * 2.0;"
    assert lines[2] == "    Sum[i : 2] = +(Mul[i, j]);"
    assert lines[3] == "    Y = Sum - 1;"
    assert fn.tile_inputs == {"X": ((2, 3), "float32"), "B": ((3,), "float32")}
    assert fn.inputs == ("X", "B") and fn.outputs == ("Y",)
    xs = np.arange(6, dtype=np.float32).reshape(2, 3)
    bs = np.array([1, -2, 0.5], np.float32)
    np.testing.assert_allclose(run(fn, {"X": xs, "B": bs})["Y"],
                               ((xs + bs) * 2).sum(1) - 1, rtol=1e-6)


def test_a_value_used_twice_is_computed_once():
    x = ops.input("X", (5,))
    t = ops.emit("{O} = exp({0})", [x], (5,), "float32", name="E")
    fn = ops.function({"Y": t * t + t})
    assert fn.source.count("exp(") == 1
    assert "Y = E * E + E;" in fn.source


def test_arguments_of_calls_are_not_parenthesised_twice():
    x = ops.input("X", (4,))
    y = ops.emit("{O} = max({0}, 0)", [x + 1.0], (4,), "float32", name="Relu")
    fn = ops.function(y)
    assert "O = max(X + 1.0, 0);" in fn.source
    z = ops.emit("{O} = {0} * 2", [x - 1.0], (4,), "float32")
    assert "O = (X - 1.0) * 2;" in ops.function(z).source


def test_names_are_unique_and_deterministic():
    def build() -> str:
        x = ops.input("X", (3, 3))
        a = ops.emit("{O}[i, j : 3, 3] = =({0}[j, i])", [x], (3, 3), "float32", name="T")
        b = ops.emit("{O}[i, j : 3, 3] = =({0}[j, i])", [a], (3, 3), "float32", name="T")
        c = ops.emit("{O}[i, j : 3, 3] = =({0}[j, i])", [b], (3, 3), "float32", name="T")
        return ops.function({"T_1": c, "Out": a + c}).source

    text = build()
    assert text == build()
    # T_1 is taken by an output: the fresh names skip it
    assert "    T[i, j : 3, 3] = =(X[j, i]);" in text
    assert "    T_2[i, j : 3, 3] = =(T[j, i]);" in text
    assert "    T_1[i, j : 3, 3] = =(T_2[j, i]);" in text
    assert "    Out = T + T_1;" in text


def test_outputs_that_are_inputs_constants_or_repeated_become_copies():
    x = ops.input("X", (2,), "int32")
    y = x * 3
    fn = ops.function({"A": x, "B": y, "C": y, "K": ops.constant(2.5, "float64")})
    assert "    A = X;" in fn.source and "    C = B;" in fn.source
    assert "    K = float64(2.5);" in fn.source
    outs = run(fn, {"X": np.array([1, -4], np.int32)})
    assert outs["A"].tolist() == [1, -4] and outs["C"].tolist() == [3, -12]
    assert outs["K"] == 2.5
    seq = ops.function([y, x])
    assert seq.outputs == ("O", "O_1")


def test_literals_are_weak_and_dtype_constants_are_strong():
    x = ops.input("X", (3,), "int8")
    f = ops.input("F", (3,), "float32")
    assert (x + 1).dtype == "int8"
    assert (x * 2.5).dtype == "float32"
    assert (f + ops.constant(1.0, "float64")).dtype == "float64"
    assert ops.result_dtype(x, f) == "float32"
    assert ops.result_dtype(ops.input("I", (1,), "int32"), f) == "float32"  # PlaidML's rule
    assert ops.result_dtype(ops.input("Q", (1,), "bool"), 1) == "int32"
    assert ops.result_dtype(1, 2.0) == "float32"
    assert (x < 2).dtype == "bool"
    fn = ops.function({"A": x + 1, "B": x * 2.5, "C": f + ops.constant(1.0, "float64"),
                       "D": (x < 2) & (x > -2), "E": -x, "G": 1 - x, "H": abs(x), "J": ~x,
                       "K": 7 % x})
    xs = np.array([1, -3, 100], np.int8)
    fs = np.array([0.5, 1, 2], np.float32)
    outs = run(fn, {"X": xs, "F": fs})
    assert outs["A"].tolist() == (xs + np.int8(1)).tolist()
    np.testing.assert_allclose(outs["B"], xs.astype(np.float32) * 2.5)
    assert outs["D"].tolist() == [True, False, False]
    assert outs["G"].tolist() == (np.int8(1) - xs).tolist()
    assert outs["J"].tolist() == (~xs).tolist()
    assert outs["K"].tolist() == [0, 1, 7]  # C remainder: sign of the dividend


@pytest.mark.parametrize("dtype", ["int8", "uint8", "int16", "int64", "uint32", "float16",
                                   "float32", "float64", "bool"])
def test_python_numbers_keep_the_tensor_type_as_in_numpy_2(dtype):
    x = ops.input("X", (4,), dtype)
    xs = np.array([0, 1, 2, 3]).astype(dtype)
    cases = {"A": (lambda v: v + 1, lambda v: v + 1), "B": (lambda v: 2 * v, lambda v: 2 * v),
             "C": (lambda v: v * 0.5, lambda v: v * 0.5), "D": (lambda v: v < 2,
                                                                 lambda v: v < 2),
             "E": (lambda v: 3 - v, lambda v: 3 - v)}
    if dtype == "bool":
        del cases["B"]  # numpy: bool * int is int64, Tile: int32 (the weak number rule)
    outs = {k: f(x) for k, (f, _) in cases.items()}
    got = run(ops.function(outs), {"X": xs})
    for k, (_, g) in cases.items():
        want = g(xs)
        if dtype == "bool" and k in "AE":
            want = want.astype(np.int32)
        if np.dtype(dtype).kind in "iub" and k == "C":
            want = want.astype(np.float32)
        assert got[k].dtype == want.dtype, (k, got[k].dtype, want.dtype)
        np.testing.assert_array_equal(got[k], want, err_msg=k)
    if dtype in ("int8", "uint8"):
        with pytest.raises(ArgumentError, match="add: the number 300 does not fit"):
            x + 300


def test_numbers_fold():
    c = ops.constant(7)
    assert (c / -2)._value == -3 and (c % -2)._value == 1 and (-7 % ops.constant(2))._value == -1
    assert (ops.constant(1.5) * 2)._value == 3.0 and (c < 8).dtype == "bool"
    fn = ops.function({"O": ops.input("X", (2,), "int8") * (c - 5)})
    assert "O = X * int8(2);" in fn.source


@pytest.mark.parametrize("value", [float("inf"), -float("inf"), float("nan"), -0.0, 1e-30,
                                   2**40, -7, True])
def test_constant_values_round_trip(value):
    fn = ops.function({"C": ops.constant(value) + ops.input("Z", (1,), "float64")})
    out = run(fn, {"Z": np.zeros(1)})["C"][0]
    np.testing.assert_equal(out, np.float64(value) + 0.0)


def test_a_literal_used_in_a_contraction_gets_a_statement():
    c = ops.constant(3)
    x = ops.input("X", (4,), "int32")
    y = ops.emit("{O}[i : 4] = +({0}[i] * {1}[])", [x, c], (4,), "int32")
    fn = ops.function({"Y": y, "Z": x + c})
    assert "    C = 3;" in fn.source and "Z = X + 3;" in fn.source
    assert run(fn, {"X": np.arange(4, dtype=np.int32)})["Y"].tolist() == [0, 3, 6, 9]


def test_broadcasting_and_numpy_scalars():
    a = ops.input("A", (3, 1))
    b = ops.input("B", (1, 4))
    y = np.float32(2) * (a - b)
    assert y.shape == (3, 4)
    with pytest.raises(ArgumentError, match="add: shapes"):
        a + ops.input("C", (2, 4))
    fn = ops.function(y)
    av = np.arange(3, dtype=np.float32).reshape(3, 1)
    bv = np.arange(4, dtype=np.float32).reshape(1, 4)
    np.testing.assert_allclose(run(fn, {"A": av, "B": bv})["O"], 2 * (av - bv))


def test_lower_and_compile_accept_a_function():
    x = ops.input("X", (5, 3))
    w = ops.input("W", (3, 2))
    y = ops.emit("{O}[i, j : 5, 2] = +({0}[i, k] * {1}[k, j])", [x, w], (5, 2), "float32",
                 name="MatMul")
    fn = ops.function({"Y": y + 1.0})
    xs = np.linspace(-1, 1, 15, dtype=np.float32).reshape(5, 3)
    ws = np.linspace(0, 2, 6, dtype=np.float32).reshape(3, 2)
    want = xs @ ws + 1
    prog = stripe.compile(fn)
    np.testing.assert_allclose(prog(X=xs, W=ws)["Y"], want, rtol=1e-5)
    prog = stripe.compile(fn, target="npu_example")
    np.testing.assert_allclose(prog(X=xs, W=ws)["Y"], want, rtol=1e-5)


def test_errors_name_the_op_and_argument():
    x = ops.input("X", (2,))
    with pytest.raises(ArgumentError, match="input: name"):
        ops.input("x", (2,))
    with pytest.raises(ArgumentTypeError, match="input: shape"):
        ops.input("X", "2")
    with pytest.raises(ArgumentError, match="input: shape"):
        ops.input("X", (-1,))
    with pytest.raises(ArgumentError, match="input: dtype"):
        ops.input("X", (1,), "complex64")
    with pytest.raises(ArgumentTypeError, match="constant: value"):
        ops.constant("1")
    with pytest.raises(ArgumentError, match="constant: value"):
        ops.constant(2.5, "int32")
    with pytest.raises(ArgumentError, match="field"):
        ops.emit("{O} = {1}", [x], (2,), "float32")
    with pytest.raises(ArgumentError, match="operand 0 is not used"):
        ops.emit("{O} = 1.0", [x], (2,), "float32")
    with pytest.raises(ArgumentError, match="one Tile statement"):
        ops.emit("{O} = {0}; B = {0}", [x], (2,), "float32")
    with pytest.raises(ArgumentTypeError, match="emit: operands"):
        ops.emit("{O} = {0}", x, (2,), "float32")
    with pytest.raises(ArgumentTypeError, match="add: y"):
        x + "a"
    with pytest.raises(ArgumentTypeError, match="truth value"):
        bool(x < 1)
    with pytest.raises(ArgumentError, match="bitwise_and"):
        x & x
    with pytest.raises(ArgumentError, match="two different inputs"):
        ops.function(x + ops.input("X", (2,)))
    with pytest.raises(ArgumentError, match="also an input"):
        ops.function({"X": x + 1})
    with pytest.raises(ArgumentTypeError, match="outputs"):
        ops.function(3)
    with pytest.raises(ArgumentError, match="empty"):
        ops.function({})


def test_long_chains_do_not_recurse():
    x = ops.input("X", (2,))
    y = x
    for _ in range(3000):
        y = y + 1.0
    fn = ops.function(y)
    assert fn.source.count("+ 1.0") == 3000
    t = x
    for _ in range(200):
        t = ops.emit("{O}[i : 2] = =({0}[i])", [t], (2,), "float32", name="Copy")
    assert len(ops.function(t).source.splitlines()) == 202


def test_equal_and_precedence_of_inlined_expressions():
    x = ops.input("X", (5,), "int32")
    y = ops.input("Y", (5,), "int32")
    fn = ops.function({"A": ops.equal(x, 1) | ops.not_equal(y, 2),
                       "B": (x - y) - (y - x) * (x + 1),
                       "C": -(x * y) - -x,
                       "D": ops.equal(x < y, y < x)})
    xs = np.array([1, 2, -3, 4, 0], np.int32)
    ys = np.array([2, 2, 7, -1, 0], np.int32)
    outs = run(fn, {"X": xs, "Y": ys})
    assert outs["A"].tolist() == ((xs == 1) | (ys != 2)).tolist()
    assert outs["B"].tolist() == ((xs - ys) - (ys - xs) * (xs + 1)).tolist()
    assert outs["C"].tolist() == (-(xs * ys) - -xs).tolist()
    assert outs["D"].tolist() == ((xs < ys) == (ys < xs)).tolist()
    assert "B = X - Y - (Y - X) * (X + 1);" in fn.source


def test_docs_ops_md_example_is_what_function_prints():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "ops.md").read_text()
    code = text[text.index("```python\n") + 10:]
    code = code[:code.index("print(fn)")]
    scope: dict[str, object] = {}
    exec(code, scope)  # the example's own statements
    shown = text[text.index("```tile\n") + 8:]
    shown = shown[:shown.index("```")]
    assert str(scope["fn"]) == shown
    # the example of writing a new op
    block = text[text.index("def outer("):]
    scope2: dict[str, object] = {"ops": ops}
    exec(block[:block.index("```")], scope2)
    a = ops.input("A", (3,))
    b = ops.input("B", (4,), "float64")
    fn = ops.function({"O": scope2["outer"](a, b), "C": scope2["cube"](a)})
    av = np.array([1, 2, 3], np.float32)
    bv = np.array([1, -1, 0.5, 2])
    outs = run(fn, {"A": av, "B": bv})
    np.testing.assert_allclose(outs["O"], np.outer(av, bv))
    np.testing.assert_allclose(outs["C"], av ** 3)


def test_the_modules_export_distinct_names():
    from stripe.ops import array, core, nn

    names = [*core.__all__, *nn.__all__, *array.__all__]
    assert len(names) == len(set(names)), sorted(n for n in set(names) if names.count(n) > 1)
    assert set(ops.__all__) == set(names)


def test_indexing_a_tensor_uses_the_array_ops():
    x = ops.input("X", (4, 5), "int32")
    xs = np.arange(20, dtype=np.int32).reshape(4, 5)
    fn = ops.function({"A": x[1:, ::-2], "B": x[-1], "C": x[None, 2, 1:4]})
    outs = run(fn, {"X": xs})
    np.testing.assert_array_equal(outs["A"], xs[1:, ::-2])
    np.testing.assert_array_equal(outs["B"], xs[-1])
    np.testing.assert_array_equal(outs["C"], xs[None, 2, 1:4])


def test_docs_ops_md_gradient_example():
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "ops.md").read_text()
    rest = text[text.index("## Gradients"):]
    code = rest[rest.index("```python\n") + 10:]
    code = code[:code.index("print(g)")]
    scope: dict[str, object] = {"ops": ops}
    exec(code, scope)
    shown = rest[rest.index("```tile\n") + 8:]
    shown = shown[:shown.index("```")]
    assert str(scope["g"]).strip() == shown.strip()
