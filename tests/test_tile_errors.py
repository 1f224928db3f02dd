"""Every semantic error of the Tile front end: its class, message, line and column."""

from __future__ import annotations

import numpy as np
import pytest

import stripe
from stripe.errors import ShapeError, StripeError, TileError, TypeError_

M34 = ((3, 4), "float32")

# (source, inputs, error class, bare message, line, column)
CASES = [
    # signature and inputs
    ("function (A[N, M]) -> (C) { C = A; }", {"A": ((3,), "float32")}, ShapeError,
     "rank mismatch: A is declared with 2 dimensions but the given array has shape (3,)", 1, 11),
    ("function (A[N, M]) -> (C) { C = A; }", {}, TileError,
     "input A is missing from inputs", 1, 11),
    ("function (A[N, M]) -> (C) { C = A; }", {"A": M34, "B": M34}, TileError,
     "inputs has 'B', which the function does not declare (its inputs: A)", 1, 1),
    ("function (A[N, M], B[M, N]) -> (C) { C = A; }", {"A": M34, "B": M34}, ShapeError,
     "dimension M is 4 in A (line 1) but 3 in B", 1, 22),
    ("function (A[N, 5]) -> (C) { C = A; }", {"A": M34}, ShapeError,
     "A is declared with size 5 here but the given array has size 4", 1, 16),
    ("function (A[N, M]) -> (C) { C = A; }", {"A": ((3, 4), "float8")}, TypeError_,
     "input A: unknown dtype 'float8'; valid: bfloat16, bool, float16, float32, float64, "
     "int16, int32, int64, int8, uint16, uint32, uint64, uint8", 1, 11),
    ("function (A[N, M]) -> (C) { C = A; }", {"A": "x"}, TileError,
     "input A: expected an array, a (shape, dtype) pair or an int or float, got str", 1,
     11),
    ("function (A[N, A]) -> (C) { C = A; }", {"A": M34}, TileError,
     "A is both a tensor and a dimension name", 1, 16),
    ("function (A, A) -> (C) { C = A; }", {"A": M34}, TileError,
     "input A declared twice", 1, 14),
    # outputs and assignments
    ("function (A) -> (C, D) { C = A; }", {"A": M34}, TileError,
     "output D is never assigned", 1, 21),
    ("function (A) -> (C, C) { C = A; }", {"A": M34}, TileError,
     "output C is listed twice", 1, 21),
    ("function (A) -> (A) { A = A; }", {"A": M34}, TileError,
     "output A is also an input; return a copy instead (e.g. O = A;)", 1, 18),
    ("function (A[N]) -> (N) { N = A; }", {"A": ((3,), "float32")}, TileError,
     "output N is a dimension name", 1, 21),
    ("function (A) -> (C) {\n  C = A;\n  C = A;\n}", {"A": M34}, TileError,
     "C is assigned twice (first at line 2)", 3, 3),
    ("function (A) -> (C) { A = C; C = A; }", {"A": M34}, TileError,
     "cannot assign to input A", 1, 23),
    ("function (A[N]) -> (C) { N = A; C = A; }", {"A": ((3,), "float32")}, TileError,
     "N is a dimension name; choose another tensor name", 1, 26),
    ("function (A) -> (C) { C = B + A; B = A; }", {"A": M34}, TileError,
     "tensor B is used before it is assigned", 1, 27),
    ("function (A) -> (C) { C = Q + A; }", {"A": M34}, TileError,
     "unknown name Q", 1, 27),
    ("function (A[N, M]) -> (C) { C[i : N] = +(Q[i, j]); }", {"A": M34}, TileError,
     "unknown name Q", 1, 42),
    ("function (A[N, M]) -> (C) { C[i : N] = +(N[i, j]); }", {"A": M34}, TileError,
     "N is a dimension, not a tensor", 1, 42),
    # functions
    ("function (A) -> (C) { C = foo(A); }", {"A": M34}, TileError,
     "unknown function 'foo'", 1, 27),
    ("function (A) -> (C) { C = exp(A, A); }", {"A": M34}, TileError,
     "exp takes 1 argument, got 2", 1, 27),
    ("function (A) -> (C) { C = max(A); }", {"A": M34}, TileError,
     "max takes 2 arguments, got 1", 1, 27),
    ("function (A) -> (C) { C = as_int(A, 12); }", {"A": M34}, TypeError_,
     "as_int supports widths 8, 16, 32, 64, not 12", 1, 37),
    ("function (A) -> (C) { C = as_float(A, B); }", {"A": M34}, TileError,
     "as_float's bit width must be an integer literal", 1, 39),
    ("function (A) -> (C) { C = index(A, 2); }", {"A": M34}, ShapeError,
     "index: dimension 2 is out of range for A of rank 2", 1, 36),
    ("function (A) -> (C) { C = index(A + A, 0); }", {"A": M34}, TileError,
     "argument 1 of index must be a tensor name", 1, 35),
    ("function (A) -> (C) { C = A + reshape(A, 12); }", {"A": M34}, TileError,
     "reshape must be the whole right-hand side of a statement (X = reshape(...);)", 1, 31),
    ("function (A) -> (C) { C = reshape(A, 5); }", {"A": M34}, ShapeError,
     "reshape: A has 12 elements but the new shape (5,) has 5", 1, 27),
    ("function (A) -> (C) { C = reshape(A, 2.5); }", {"A": M34}, TileError,
     "expected a size (integers and dimension names)", 1, 38),
    ("function (A) -> (C) { C = gather(A, A); }", {"A": M34}, TypeError_,
     "gather: the index tensor A must have an integer type, not float32", 1, 27),
    # shapes and types of elementwise expressions
    ("function (A, B) -> (C) {\n  C = A +\n    B;\n}", {"A": M34, "B": ((4, 3), "float32")},
     ShapeError, "cannot broadcast shapes (3, 4) and (4, 3)", 2, 9),
    ("function (A) -> (C) { C = as_float(A, 8); }", {"A": ((3,), "int8")}, TypeError_,
     "as_float supports widths 16, 32, 64, not 8", 1, 39),
    ("function (A) -> (C) { C = as_bool(A, 8); }", {"A": ((3,), "int8")}, TypeError_,
     "as_bool supports widths 1, not 8", 1, 38),
    ("function (A) -> (C) { C = A & 2; }", {"A": M34}, TypeError_,
     "'&' needs integer or bool operands, got float32 and float32", 1, 29),
    ("function (A) -> (C) { C = -(A > 0); }", {"A": M34}, TypeError_,
     "cannot negate a bool value", 1, 27),
    ("function (A) -> (C) { C = (A > 0) + (A < 0); }", {"A": M34}, TypeError_,
     "arithmetic '+' on bool values; convert with as_int(x, 32) first", 1, 35),
    ("function (A) -> (C) { C = A / (1 / 0); }", {"A": M34}, TileError,
     "division by zero", 1, 34),
    # contractions
    ("function (A[N, M]) -> (C) { C[i : K] = +(A[i, j]); }", {"A": M34}, ShapeError,
     "unbound dimension K (dimensions are named in the input declarations, e.g. I[N, M])",
     1, 35),
    ("function (A) -> (C) { C[i : N] = +(A[i, j]); }", {"A": M34}, ShapeError,
     "unbound dimension N (dimensions are named in the input declarations, e.g. I[N, M])",
     1, 29),
    ("function (A[N, M]) -> (C) { C[i, k : N, exp(2)] = +(A[i, j]); }", {"A": M34}, TileError,
     "function exp is not supported in a size or index expression (only add, broadcast, "
     "ceil, div, floor, ident, match, max, min, mod, mul, neg, sub)", 1, 41),
    ("function (A[N, M]) -> (C) { C[i : N] = +(A[i, max(j, 1)]); }", {"A": M34}, TileError,
     "index expression is not affine: max of an index (only sizes may be arguments)", 1, 47),
    ("function (A[N, M], D) -> (C) { C[i : D] = +(A[i, j]); }",
     {"A": M34, "D": ((), "int32")}, TileError,
     "input D is used as a size or in an index: give its value (an int or a rank-0 integer "
     "array), not a (shape, dtype) pair", 1, 38),
    ("function (A[N, M]) -> (C) { C[i : N] = +(A[i * j, j]); }", {"A": M34}, TileError,
     "index expression is not affine: product of two indexes", 1, 46),
    ("function (A[N, M]) -> (C) { C[i : N] = +(A[4 / i, j]); }", {"A": M34}, TileError,
     "index expression is not affine: division of an index (only sizes may be divided)", 1, 46),
    ("function (A[N, M]) -> (C) { C[i : N] = +(A[i]); }", {"A": M34}, ShapeError,
     "A has rank 2 but is indexed with 1 index", 1, 42),
    ("function (A[N, M]) -> (C) { C[i, j : N] = +(A[i, j]); }", {"A": M34}, ShapeError,
     "C has 2 indexes but 1 size", 1, 29),
    ("function (A[N, M]) -> (C) { C[i, j] = +(A[i, j]); }", {"A": M34}, TileError,
     "contraction output needs its sizes, as in C[i, j : N, M]", 1, 29),
    ("function (A[N, M]) -> (C) { C[i : N - 5] = +(A[i, j]); }", {"A": M34}, ShapeError,
     "an output size evaluates to -2", 1, 37),
    ("function (A[N, M]) -> (C) { C[i : N] = +(A[i, j - k]); }", {"A": M34}, TileError,
     "cannot infer a range for index j: it is unbounded (use it in a tensor access or bound "
     "it with a constraint like 'j < N')", 1, 47),
    ("function (A[N, M]) -> (C) { C[i : N] = +(A[i, j]), j < i; }", {"A": M34}, TileError,
     "index i cannot appear in a constraint bound", 1, 56),
    ("function (A[N, M]) -> (C) { C[i : i] = +(A[i, j]); }", {"A": M34}, TileError,
     "index i cannot appear in an output size", 1, 35),
    ("function (A[N, M]) -> (C) { C[i : N] = +(A[i, A]); }", {"A": M34}, TileError,
     "A is a tensor, not a dimension", 1, 47),
    ("function (A[N, M]) -> (C) { C[i : N] = +(A[i, j]) default A; }", {"A": M34}, ShapeError,
     "default A has shape (3, 4) but C has shape (3,)", 1, 59),
    ("function (A[N, M]) -> (C) { C[i : N] = +(A[i, j] * C[i, j]); }", {"A": M34}, TileError,
     "tensor C is used before it is assigned", 1, 52),
    ("function (A[N]) -> (C) { C[] = +(A[i] > 0); }", {"A": ((3,), "float32")}, None,
     None, 1, 39),  # a comparison is not a contraction combination: a syntax error
    ("function (A[N]) -> (C) { C[] = +(A[i] < 0 ? A[i]); }", {"A": ((3,), "float32")}, None,
     None, 1, 39),
    ("function (A[N]) -> (C) { B = A > 0; C[] = +(B[i]); }", {"A": ((3,), "float32")},
     TypeError_, "aggregation '+' of bool values; convert with as_int first", 1, 37),
]


@pytest.mark.parametrize("source, inputs, cls, message, line, column", CASES,
                         ids=[f"{c[3] or 'syntax'}"[:60] for c in CASES])
def test_error(source: str, inputs: dict, cls: type | None, message: str | None, line: int,
               column: int):
    with pytest.raises(StripeError) as info:
        stripe.lower(source, inputs)
    e = info.value
    if cls is None:
        assert isinstance(e, stripe.TileSyntaxError)
    else:
        assert type(e) is cls
        assert e.bare_message == message
        assert str(e) == f"line {line}, column {column}: {message}"
    assert (e.line, e.column) == (line, column)


def test_errors_are_stripe_errors_not_builtins():
    assert issubclass(TypeError_, TileError) and issubclass(ShapeError, TileError)
    assert issubclass(TileError, StripeError)


def test_inputs_must_be_a_mapping():
    with pytest.raises(TileError, match="inputs must be a dict"):
        stripe.lower("function (A) -> (B) { B = A; }", [np.zeros(3)])  # type: ignore[arg-type]


def test_negative_input_size():
    with pytest.raises(ShapeError, match=r"input A: negative size in shape \(-1,\)"):
        stripe.lower("function (A) -> (B) { B = A; }", {"A": ((-1,), "float32")})


def test_any_shape_input_binds_no_dimensions():
    src = "function (A) -> (B) { B[i : N] = +(A[i]); }"
    with pytest.raises(ShapeError, match="unbound dimension N"):
        stripe.lower(src, {"A": ((3,), "float32")})
    # without dimension names the rank still comes from the array
    prog = stripe.lower("function (A) -> (B) { B = A * 2.0; }", {"A": ((2, 5), "float32")})
    assert prog.ref("B").shape.sizes == (2, 5)


# limits: deep expressions, 64-bit integers, memory (docs/limits.md) ---------------------------

F4 = {"A": ((4,), "float32")}


def _run(source: str, inputs: dict, arrays: dict) -> dict:
    return stripe.interpret(stripe.lower(source, inputs), arrays)


def test_a_10000_term_sum_lowers():
    n = 10_000
    src = "function (A, B) -> (C) { C = " + " + ".join(["A", "B"] * (n // 2)) + "; }"
    prog = stripe.lower(src, {"A": ((3,), "float32"), "B": ((3,), "float32")})
    (kernel,) = prog.stmts[0].stmts
    assert sum(type(s).__name__ == "Intrinsic" for s in kernel.stmts) == n - 1


def test_long_chains_compute_the_right_values():
    a = np.arange(4, dtype=np.float32)
    chains = {
        "sum": " + ".join(["A"] * 2000),
        "ternaries": "A > 100.0 ? A : " * 1000 + "A * 2000.0",
        "left-nested calls": "max(" * 1000 + "A" + ", A)" * 1000 + " * 2000.0",
    }
    for what, expr in chains.items():
        out = _run(f"function (A) -> (C) {{ C = {expr}; }}", F4, {"A": a})
        np.testing.assert_allclose(out["C"], a * 2000, err_msg=what)


@pytest.mark.parametrize("wrap, expect", [
    (("-", ""), lambda a, n: a * (-1) ** n),
    (("(", ")"), lambda a, n: a),
    (("abs(", ")"), lambda a, n: np.abs(a)),
    (("(A + ", ")"), lambda a, n: a * (n + 1)),
    (("A > 1.0 ? ", " : A"), lambda a, n: a),
])
def test_1000_deep_nesting_computes_the_right_values(wrap, expect):
    n = 1000
    a = np.array([-1.5, 0.0, 2.0, 3.0], np.float32)
    expr = wrap[0] * n + "A" + wrap[1] * n
    out = _run(f"function (A) -> (C) {{ C = {expr}; }}", F4, {"A": a})
    np.testing.assert_allclose(out["C"], expect(a, n))


def test_long_index_and_size_polynomials():
    n = 1500
    index = " + ".join(["i"] + ["1 - 1"] * n)
    size = " + ".join(["N"] + ["0"] * n)
    src = f"function (A[N]) -> (C) {{ C[{index} : {size}] = +(A[i]); }}"
    a = np.arange(4, dtype=np.float32)
    np.testing.assert_array_equal(_run(src, {"A": ((4,), "float32")}, {"A": a})["C"], a)


def test_nesting_deeper_than_the_limit_is_a_located_error():
    from stripe.limits import MAX_EXPR_DEPTH, TileLimitError

    src = "function (A) -> (C) {\n  C = " + "-" * (MAX_EXPR_DEPTH + 1) + "A; }"
    with pytest.raises(TileLimitError, match=f"nests deeper than {MAX_EXPR_DEPTH}") as info:
        stripe.lower(src, F4)
    assert (info.value.line, info.value.column) == (2, 7 + MAX_EXPR_DEPTH + 1)
    assert isinstance(info.value, TileError) and isinstance(info.value, stripe.errors.LimitError)


@pytest.mark.parametrize("template", [
    "C = {0}A{1};",
    "C[i : N] = +(A[{0}i{1}]);",
])
def test_the_depth_limit_is_exact(monkeypatch, template):
    from stripe import limits

    monkeypatch.setattr(limits, "MAX_EXPR_DEPTH", 20)
    for depth, ok in ((20, True), (21, False)):
        body = template.format("-(" * depth, ")" * depth)
        src = f"function (A[N]) -> (C) {{ {body} }}"
        if ok:
            stripe.lower(src, F4)
        else:
            with pytest.raises(limits.TileLimitError, match="nests deeper than 20"):
                stripe.lower(src, F4)


I64 = {"A": ((3,), "int64")}
TOO_BIG = [
    # (source, inputs, message, line, column)
    ("function (A) -> (C) { C = A + 9223372036854775808; }", I64,
     "integer literal 9223372036854775808 (19 digits) does not fit in 64 bits (it must be "
     "below 2**63)", 1, 31),
    ("function (A) -> (C) { C = A + " + "7" * 5000 + "; }", I64,
     "integer literal 7777777777...777777 (5000 digits) does not fit in 64 bits (it must be "
     "below 2**63)", 1, 31),
    ("function (A) -> (C) { C = A + 4611686018427387904 * 2; }", I64,
     "this constant expression overflows 64-bit integers (9223372036854775808)", 1, 51),
    ("function (A) -> (C) { C = A + (1 << 63); }", I64,
     "this constant expression overflows 64-bit integers (9223372036854775808)", 1, 34),
    ("function (A) -> (C) { C = A + -(-9223372036854775807 - 1); }", I64,
     "this constant expression overflows 64-bit integers (9223372036854775808)", 1, 31),
    ("function (A[N]) -> (C) { C[i : 4611686018427387904 * 2] = +(A[i]); }", I64,
     "an output size overflows 64-bit integers", 1, 52),
    ("function (A[N]) -> (C) { C[i : N] = +(A[i + 9223372036854775807 + 1]); }", I64,
     "an index expression overflows 64-bit integers", 1, 65),
    ("function (A[N]) -> (C) { C[i, j : 4294967296, 4294967296] = +(A[i]), j < 2; }", I64,
     "the element count of C (4294967296, 4294967296) does not fit in 64 bits (|value| must "
     "be below 2**63)", 1, 26),
    ("function (A[N]) -> (C) { C[i, j, k : 0, 4294967296, 4294967296] = +(A[i]), j < 2, "
     "k < 2; }", I64,
     "the element count of C (0, 4294967296, 4294967296) does not fit in 64 bits (|value| "
     "must be below 2**63)", 1, 26),
    ("function (A) -> (C) { C = A; }", {"A": ((2**63,), "int8")},
     "size 0 of A does not fit in 64 bits (|value| must be below 2**63)", 1, 11),
    ("function (A[N]) -> (C) { C = reshape(A, 0, 4294967296, 4294967296); }",
     {"A": ((0,), "int64")}, "the element count of C (0, 4294967296, 4294967296) does not fit "
     "in 64 bits (|value| must be below 2**63)", 1, 26),
]


@pytest.mark.parametrize("source, inputs, message, line, column", TOO_BIG,
                         ids=[c[2][:50] for c in TOO_BIG])
def test_integers_beyond_64_bits_are_located_errors(source, inputs, message, line, column):
    from stripe.limits import TileLimitError

    with pytest.raises(TileLimitError) as info:
        stripe.lower(source, inputs)
    assert info.value.bare_message == message
    assert (info.value.line, info.value.column) == (line, column)


def test_the_largest_64_bit_integers_are_accepted():
    src = ("function (A) -> (C, D) { C = A + 9223372036854775807; "
           "D = A + (-9223372036854775807 - 1); }")
    out = _run(src, I64, {"A": np.zeros(3, np.int64)})
    assert out["C"][0] == 2**63 - 1 and out["D"][0] == -(2**63)


def test_float_folding_overflows_to_ieee_values():
    src = ("function (A) -> (C, D, E, F) { C = A + floor(1e309); D = A + ceil(-1e309); "
           "E = A + 1e309 % 2.0; F = A + min(0.0 * 1e309, 1.0); }")
    out = _run(src, F4, {"A": np.zeros(4, np.float32)})
    assert np.all(out["C"] == np.inf) and np.all(out["D"] == -np.inf)
    assert np.all(np.isnan(out["E"])) and np.all(np.isnan(out["F"]))


def test_a_program_beyond_the_memory_limit_is_refused_at_lowering():
    from stripe.limits import TileLimitError

    src = ("function (A[N]) -> (C) {\n"
           "  C[i, j : 100000, 100000] = +(A[j]), i < 100000;\n}")
    with pytest.raises(TileLimitError) as info:
        stripe.lower(src, {"A": ((100000,), "float32")})
    assert "tensor C (100000, 100000) of float32: 40000000000 bytes (37.3 GiB)" in str(info.value)
    assert "STRIPE_MAX_BYTES" in str(info.value)
    assert (info.value.line, info.value.column) == (2, 3)


def test_the_memory_limit_counts_inputs_outputs_and_temporaries(monkeypatch):
    from stripe.limits import TileLimitError

    monkeypatch.setenv("STRIPE_MAX_BYTES", "1000")
    src = "function (A) -> (C) {\n  T = A + 1.0;\n  U = T * 2.0;\n  C = U - A;\n}"
    inputs = {"A": ((100,), "float32")}  # 400 bytes each
    with pytest.raises(TileLimitError, match="1200 bytes") as info:
        stripe.lower(src, inputs)
    assert info.value.line == 3
    monkeypatch.setenv("STRIPE_MAX_BYTES", "1600")
    stripe.lower(src, inputs)
    monkeypatch.setenv("STRIPE_MAX_BYTES", "1599")
    with pytest.raises(TileLimitError, match="1600 bytes") as info:
        stripe.lower(src, inputs)
    assert info.value.line == 4


@pytest.mark.parametrize("shape", [(2.5,), (True, 4), (np.bool_(False),), ("3",), 3])
def test_shapes_must_be_integers(shape):
    with pytest.raises(TileError, match=r"input A: shape must be a sequence of integers"):
        stripe.lower("function (A) -> (B) { B = A; }", {"A": (shape, "float32")})


def test_offsets_near_64_bits_give_exact_ranges():
    """Bounds derived from 64-bit offsets (size - 1 - access) pass 64 bits; isl gets them
    exactly, so the range inference sees an empty domain and the output is all zeros."""
    a = np.ones(9, np.float32)
    src = "function (I[N]) -> (O) { O[x : N] = +(I[x - 9223372036854775807]); }"
    np.testing.assert_array_equal(_run(src, {"I": ((9,), "float32")}, {"I": a})["O"], 0 * a)
    src = ("function (I[N]) -> (O) { O[x : N] = "
           "+(I[x + 9223372036854775807 - 9223372036854775807]); }")
    np.testing.assert_array_equal(_run(src, {"I": ((9,), "float32")}, {"I": a})["O"], a)


@pytest.mark.parametrize("seed", range(3))
def test_large_random_expressions_compute_what_numpy_computes(seed):
    """Random trees of 600 tensor leaves (depths up to hundreds, repeated subtrees)
    give exactly numpy's float32 results: the iterative typing, folding and scalar sharing
    compute every node once and never confuse two subtrees."""
    import random

    rng = random.Random(seed)
    a = np.linspace(-1.5, 1.5, 6, dtype=np.float32)
    b = np.linspace(0.25, 1.0, 6, dtype=np.float32)[::-1].copy()
    pool = [("A", a), ("B", b)] * 300  # every combination below is parenthesised
    rng.shuffle(pool)
    while len(pool) > 1:
        i = rng.randrange(len(pool) - 1)
        (x, vx), (y, vy) = pool[i], pool[i + 1]
        kind = rng.randrange(8)
        if kind == 0:
            new = (f"({x} + {y})", vx + vy)
        elif kind == 1:
            new = (f"({x} - {y})", vx - vy)
        elif kind == 2:
            new = (f"({x} * {y} * 0.5)", vx * vy * np.float32(0.5))
        elif kind == 3:
            new = (f"max({x}, {y})", np.maximum(vx, vy))
        elif kind == 4:
            new = (f"min({x}, -{y})", np.minimum(vx, -vy))
        elif kind == 5:
            new = (f"({x} > {y} ? {x} : {y} + 1.0)", np.where(vx > vy, vx, vy + np.float32(1)))
        elif kind == 6:
            new = (f"(abs({x}) - {y})", np.abs(vx) - vy)
        elif len(x) < 100:  # a repeated subtree, which the lowering computes once
            new = (f"({x} + {x} * {y})", vx + vx * vy)
        else:
            new = (f"({x} * 2.0 + {y})", vx * np.float32(2) + vy)
        pool[i:i + 2] = [new]
    text, expected = pool[0]
    src = f"function (A[N], B[N]) -> (C) {{ C = {text}; }}"
    got = _run(src, {"A": ((6,), "float32"), "B": ((6,), "float32")}, {"A": a, "B": b})["C"]
    np.testing.assert_array_equal(got, expected)


def test_integer_pow_folds_as_the_intrinsic_computes():
    src = ("function (A, B) -> (C, D, E, F, G) { C = A + pow(2, -1); D = A + pow(-1, -3); "
           "E = A + pow(-1, 1000000000000); F = A + pow(3, 39); G = A + pow(B, -1); }")
    a = np.zeros(2, np.int64)
    b = np.array([2, -1], np.int64)
    out = _run(src, {"A": ((2,), "int64"), "B": ((2,), "int64")}, {"A": a, "B": b})
    assert out["C"].dtype == np.int64 and list(out["C"]) == [0, 0]
    assert list(out["D"]) == [-1, -1] and list(out["E"]) == [1, 1]
    assert list(out["F"]) == [3**39] * 2 and list(out["G"]) == [0, -1]
    with pytest.raises(TileError, match=r"overflows 64-bit integers \(2 to the power "
                                        r"100000000000000000\)"):
        stripe.lower("function (A) -> (C) { C = A + pow(2, 100000000000000000); }", I64)
