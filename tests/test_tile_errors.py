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
    ("function (A[N, M]) -> (C) { C = A; }", {"A": ((3, 4), "float16")}, TypeError_,
     "input A: unknown dtype 'float16'; valid: bool, float32, float64, int16, int32, int64, "
     "int8, uint8", 1, 11),
    ("function (A[N, M]) -> (C) { C = A; }", {"A": "x"}, TileError,
     "input A: expected an array or a (shape, dtype) pair, got str", 1, 11),
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
    ("function (A) -> (C) { C = A + 300; }", {"A": ((3,), "int8")}, TypeError_,
     "literal 300 does not fit int8", 1, 31),
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
    ("function (A[N, M]) -> (C) { C[i, k : N, 5] = +(A[i, j]); }", {"A": M34}, TileError,
     "index k is used only in the output (use it in an input or bound it with a constraint, "
     "e.g. 'k < N')", 1, 34),
    ("function (A[N, M]) -> (C) { C[i : N] = +(A[i * j, j]); }", {"A": M34}, TileError,
     "index expression is not affine: product of two indexes", 1, 46),
    ("function (A[N, M]) -> (C) { C[i : N] = +(A[i / 2, j]); }", {"A": M34}, TileError,
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
