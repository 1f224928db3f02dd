"""Lowering Tile to Stripe: program structure, range inference, init kernels, elementwise
kernels, dtype rules, specials; every program verified, round-tripped and (a few) executed."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

import stripe
from stripe.affine import Affine
from stripe.dtypes import DType, to_dtype
from stripe.ir import (
    AggOp,
    Block,
    Constant,
    Intrinsic,
    Load,
    LoadIndex,
    RefDir,
    Special,
    Store,
)

F32 = "float32"


def aff(text: str) -> Affine:
    """``"x + i - 1"`` -> Affine (terms separated by + and -, optional ``k*name``)."""
    total = Affine()
    for sign, term in _terms(text):
        if "*" in term:
            k, name = term.split("*")
            total = total + sign * int(k) * Affine.of(name.strip())
        elif term.strip().lstrip("-").isdigit():
            total = total + sign * int(term)
        else:
            total = total + sign * Affine.of(term.strip())
    return total


def _terms(text: str) -> list[tuple[int, str]]:
    out, sign, cur = [], 1, ""
    for ch in text.replace(" ", ""):
        if ch in "+-" and cur:
            out.append((sign, cur))
            cur, sign = "", 1 if ch == "+" else -1
        elif ch == "-" and not cur:
            sign = -sign
        elif ch != "+":
            cur += ch
    out.append((sign, cur))
    return out


def lower(source: str, **inputs: object) -> Block:
    """Lower, verify, and check the print/parse round trip."""
    prog = stripe.lower(source, inputs)
    stripe.verify(prog)
    assert stripe.parse_ir(stripe.print_ir(prog)) == prog
    return prog


def kernels(prog: Block) -> tuple[Block, ...]:
    return prog.stmts[0].sub_blocks


def run(source: str, **arrays: np.ndarray) -> dict[str, np.ndarray]:
    return stripe.interpret(lower(source, **arrays), arrays)


CONV = """function (I[N, X, Y, CI], F[KX, KY, CI, CO]) -> (O) {
    O[n, x, y, co : N, X, Y, CO] = +(I[n, x + i - 1, y + j - 1, ci] * F[i, j, ci, co]);
}"""
CONV_INPUTS = {"I": ((2, 5, 6, 3), F32), "F": ((3, 3, 3, 4), F32)}


# program structure ------------------------------------------------------------------------------

def test_program_and_main_follow_the_contract():
    prog = lower("""function (A[N, M], B[M]) -> (C, D) {
        T = A * B;
        C = T + 1.0;
        D[i : N] = +(C[i, j]);
    }""", A=((3, 4), F32), B=((4,), F32))
    assert prog.name == "program" and prog.tags == {"program"} and prog.idxs == ()
    assert [(r.into, r.dir, r.tags) for r in prog.refs] == [
        ("A", RefDir.IN, {"user"}), ("B", RefDir.IN, {"user"}),
        ("C", RefDir.OUT, {"user"}), ("D", RefDir.OUT, {"user"}),
        ("T", RefDir.NONE, {"tmp"}),
    ]
    for r in prog.refs:
        assert r.is_alloc and all(a.is_zero for a in r.access)
    assert prog.refs[0].shape.sizes == (3, 4) and prog.refs[0].shape.strides == (4, 1)
    assert prog.refs[3].shape.sizes == (3,) and prog.refs[3].shape.dtype is DType.FLOAT32
    (main,) = prog.stmts
    assert main.name == "main" and main.tags == {"main"}
    # C is an output read by a later kernel: inout; T is read: inout; D only written: out
    assert [(r.from_, r.into, r.dir) for r in main.refs] == [
        ("A", "A", RefDir.IN), ("B", "B", RefDir.IN), ("C", "C", RefDir.INOUT),
        ("D", "D", RefDir.OUT), ("T", "T", RefDir.INOUT),
    ]
    assert [k.name for k in kernels(prog)] == ["kernel_0", "kernel_1", "kernel_2", "kernel_3"]
    assert all("kernel" in k.tags for k in kernels(prog))
    assert [k.comments for k in kernels(prog)] == [
        "T = A * B", "C = T + 1.0", "D[i : N] = +(C[i, j])", "D[i : N] = +(C[i, j])"]


def test_lowering_is_deterministic():
    a = stripe.lower(CONV, CONV_INPUTS)
    b = stripe.lower(CONV, dict(CONV_INPUTS))
    assert a == b and stripe.print_ir(a) == stripe.print_ir(b)


def test_inputs_may_be_arrays_or_shape_dtype_pairs():
    arr = np.zeros((2, 3), np.int16)
    a = stripe.lower("function (A[N, M]) -> (B) { B = A; }", {"A": arr})
    b = stripe.lower("function (A[N, M]) -> (B) { B = A; }", {"A": ((2, 3), "int16")})
    c = stripe.lower("function (A[N, M]) -> (B) { B = A; }", {"A": ([2, 3], np.int16)})
    assert a == b == c and a.refs[0].dtype is DType.INT16


# contractions: range inference ------------------------------------------------------------------

def test_padded_convolution_ranges_constraints_and_refs():
    init, conv = kernels(lower(CONV, **CONV_INPUTS))
    assert conv.tags == {"kernel", "contraction", "agg_op_add", "comb_op_mul"}
    assert [(i.name, i.range) for i in conv.idxs] == [
        ("n", 2), ("x", 5), ("y", 6), ("co", 4), ("i", 3), ("j", 3), ("ci", 3)]
    assert conv.constraints == (aff("x + i - 1"), aff("5 - x - i"), aff("y + j - 1"),
                                aff("6 - y - j"))
    i_ref, f_ref, o_ref = conv.refs
    assert (i_ref.dir, i_ref.from_, i_ref.into, i_ref.tags) == (RefDir.IN, "I", "I",
                                                                {"contraction"})
    assert i_ref.access == (aff("n"), aff("x + i - 1"), aff("y + j - 1"), aff("ci"))
    assert i_ref.shape.sizes == (1, 1, 1, 1) and i_ref.shape.strides == (90, 18, 3, 1)
    assert f_ref.access == (aff("i"), aff("j"), aff("ci"), aff("co"))
    assert (o_ref.dir, o_ref.agg_op) == (RefDir.OUT, AggOp.ADD)
    assert o_ref.access == (aff("n"), aff("x"), aff("y"), aff("co"))
    assert conv.stmts == (Load("I", "$I"), Load("F", "$F"),
                          Intrinsic("mul", ("$I", "$F"), ("$O",), DType.FLOAT32),
                          Store("$O", "O"))
    # every output element is written: one identity (0) kernel over the whole output
    assert init.tags == {"kernel", "init"}
    assert [(i.name, i.range) for i in init.idxs] == [("i1", 2), ("i2", 5), ("i3", 6),
                                                       ("i4", 4)]
    assert init.stmts == (Constant("$identity", 0.0, DType.FLOAT32), Store("$identity", "O"))


def test_strided_pool_with_constraint():
    init, pool = kernels(lower("function (I[N]) -> (O) { O[i : N / 2] = >(I[2 * i + j]), j < 2; }",
                               I=((9,), F32)))
    assert [(i.name, i.range) for i in pool.idxs] == [("i", 4), ("j", 2)]
    assert pool.constraints == ()  # 2*i + j <= 7 < 9 follows from the ranges
    assert pool.refs[0].access == (aff("2*i + j"),)
    assert pool.tags == {"kernel", "contraction", "agg_op_max", "agg_op_max_no_comb_op"}
    assert pool.stmts == (Load("I", "$I"), Store("$I", "O"))
    assert init.tags == {"kernel", "init"}
    assert init.stmts[0] == Constant("$identity", float("-inf"), DType.FLOAT32)


def test_index_with_nonzero_minimum_is_shifted():
    zero, k = kernels(lower("function (I[N]) -> (O) { O[i : N] = +(I[i - 2]); }", I=((9,), F32)))
    assert [(i.name, i.range) for i in k.idxs] == [("i", 7)]
    assert k.refs[0].access == (aff("i"),) and k.refs[1].access == (aff("i + 2"),)
    assert k.constraints == ()
    assert zero.tags == {"kernel", "zero"}  # O[0], O[1] are never written


def test_shift_applies_to_kept_constraints():
    (_, k) = kernels(lower("function (I[N]) -> (O) { O[i : N] = +(I[i + j - 3]), j < 2; }",
                           I=((6,), F32)))
    # i in [2, 5] after the access bound i + j - 3 >= 0 with j <= 1: shifted to i' = i - 2
    assert [(i.name, i.range) for i in k.idxs] == [("i", 4), ("j", 2)]
    assert k.refs[0].access == (aff("i + j - 1"),) and k.refs[1].access == (aff("i + 2"),)
    assert k.constraints == (aff("i + j - 1"),)  # the upper bound follows from the ranges


def test_single_value_index_is_dropped():
    (_, k) = kernels(lower("function (I[N, M]) -> (O) { O[i : M] = +(I[j, i]); }",
                           I=((1, 5), F32)))
    assert [i.name for i in k.idxs] == ["i"] and k.refs[0].access == (aff("0"), aff("i"))


def test_constraint_with_dimension_bound_and_reversal():
    (_, k) = kernels(lower("function (I[N]) -> (O) { O[i : N] = =(I[N - 1 - i]), i < N - 2; }",
                           I=((5,), F32)))
    assert [(i.name, i.range) for i in k.idxs] == [("i", 3)]
    assert k.refs[0].access == (aff("4 - i"),)


def test_empty_iteration_space_gives_only_the_zero_kernel():
    (zero,) = kernels(lower("function (I[N]) -> (O) { O[i : N] = >(I[i + 10]); }",
                            I=((4,), F32)))
    assert zero.tags == {"kernel", "zero"}


def test_same_tensor_twice_gets_a_fresh_view_name():
    (_, k) = kernels(lower("""function (A[N], A_2[N]) -> (O) {
        O[i : N] = +(A[i] * A[N - 1 - i]);
    }""", A=((4,), F32), A_2=((4,), F32)))
    assert [(r.from_, r.into) for r in k.refs] == [("A", "A"), ("A", "A_3"), ("O", "O")]
    assert k.stmts[2] == Intrinsic("mul", ("$A", "$A_3"), ("$O",), DType.FLOAT32)


def test_identical_accesses_share_one_view():
    (_, k) = kernels(lower("function (A[N]) -> (O) { O[i : N] = +(A[i] * A[i]); }",
                           A=((4,), F32)))
    assert [r.into for r in k.refs] == ["A", "O"]
    assert k.stmts[1] == Intrinsic("mul", ("$A", "$A"), ("$O",), DType.FLOAT32)


def test_cond_combination():
    (_, k) = kernels(lower("""function (X[N], Y[M], V[M]) -> (O) {
        O[i, j : N, M] = +(X[i] == Y[j] ? V[j]);
    }""", X=((3,), "int32"), Y=((4,), "int32"), V=((4,), "float64")))
    assert k.tags == {"kernel", "contraction", "agg_op_add", "comb_op_cond"}
    assert k.stmts[3:] == (
        Intrinsic("cmp_eq", ("$X", "$Y"), ("$eq",), DType.BOOL),
        Constant("$zero", 0.0, DType.FLOAT64),
        Intrinsic("cond", ("$eq", "$V", "$zero"), ("$O",), DType.FLOAT64),
        Store("$O", "O"))


def test_contraction_dtype_promotes_inputs():
    (_, k) = kernels(lower("function (A[N], B[N]) -> (O) { O[i : N] = +(A[i] * B[i]); }",
                           A=((3,), "int8"), B=((3,), "float32")))
    assert k.refs[-1].dtype is DType.FLOAT32 and k.stmts[2].dtype is DType.FLOAT32


# contractions: initialisation ---------------------------------------------------------------------

@pytest.mark.parametrize("agg, op, identity", [
    ("+", AggOp.ADD, 0.0), ("=", AggOp.ASSIGN, 0.0), ("*", AggOp.MUL, 1.0),
    (">", AggOp.MAX, float("-inf")), ("<", AggOp.MIN, float("inf")),
])
def test_fully_covered_output_gets_one_identity_kernel(agg: str, op: AggOp, identity: float):
    init, k = kernels(lower(f"function (I[N, M]) -> (O) {{ O[i : N] = {agg}(I[i, j]); }}",
                            I=((3, 4), F32)))
    assert init.tags == {"kernel", "init"}
    assert init.stmts[0] == Constant("$identity", identity, DType.FLOAT32)
    assert k.refs[-1].agg_op is op


@pytest.mark.parametrize("dtype, agg, identity", [
    ("int8", ">", -128), ("int8", "<", 127), ("uint8", "<", 255), ("int32", "*", 1),
    ("bool", ">", False), ("bool", "<", True),
])
def test_integer_and_bool_identities(dtype: str, agg: str, identity: object):
    init, _ = kernels(lower(f"function (I[N]) -> (O) {{ O[] = {agg}(I[i]); }}",
                            I=((3,), dtype)))
    assert init.stmts[0] == Constant("$identity", identity, to_dtype(dtype))


@pytest.mark.parametrize("agg, force, identity", [
    (">", AggOp.MIN, float("-inf")), ("<", AggOp.MAX, float("inf")), ("*", AggOp.MAX, 1.0),
])
def test_partially_covered_output_gets_zero_then_identity_over_the_domain(
        agg: str, force: AggOp, identity: float):
    zero, init, k = kernels(lower(
        f"function (I[N]) -> (O) {{ O[i : N + 2] = {agg}(I[i]); }}", I=((4,), F32)))
    assert zero.tags == {"kernel", "zero"} and [i.range for i in zero.idxs] == [6]
    assert zero.stmts == (Constant("$zero", 0.0, DType.FLOAT32), Store("$zero", "O"))
    assert init.tags == {"kernel", "init"}
    assert init.idxs == k.idxs and init.constraints == k.constraints
    assert init.refs[0].agg_op is force and init.refs[0].access == k.refs[-1].access
    assert init.stmts[0] == Constant("$identity", identity, DType.FLOAT32)


def test_partially_covered_sum_needs_only_the_zero_kernel():
    zero, k = kernels(lower("function (I[N]) -> (O) { O[i : N + 2] = +(I[i]); }",
                            I=((4,), F32)))
    assert zero.tags == {"kernel", "zero"} and "contraction" in k.tags


@pytest.mark.parametrize("source, covered", [
    ("O[i : N] = >(I[i])", True),
    ("O[i : N] = >(I[i + j - 1]), j < 3", True),  # padding couples i and j, unit coefficients
    ("O[i : N / 2] = >(I[2 * i + j]), j < 2", True),
    ("O[i : N] = >(I[N - 1 - i])", True),  # the reversal is on the input side
    ("O[N - 1 - i : N] = >(I[i])", False),  # not a plain output index: conservative
    ("O[i : N] = >(I[i]), i < 3", False),
    ("O[i : N] = >(I[2 * j - i]), j < N", False),  # odd i are never written
    ("O[2 * i : N] = >(I[i])", False),
])
def test_coverage_decision(source: str, covered: bool):
    ks = kernels(lower(f"function (I[N]) -> (O) {{ {source}; }}", I=((6,), F32)))
    assert (ks[0].tags == {"kernel", "init"}) is covered


def test_default_copies_then_aggregates():
    copy, k = kernels(lower("function (I[N], D[M]) -> (O) { O[i : M] = =(I[i]) default D; }",
                            I=((4,), F32), D=((7,), F32)))
    assert copy.tags == {"kernel", "copy"}
    assert [(r.dir, r.from_) for r in copy.refs] == [(RefDir.IN, "D"), (RefDir.OUT, "O")]
    assert copy.stmts == (Load("D", "$D"), Store("$D", "O"))
    assert k.refs[-1].agg_op is AggOp.ASSIGN


# elementwise ----------------------------------------------------------------------------------

def test_broadcasting_accesses_and_tags():
    (k,) = kernels(lower("function (A[N, M], B[M], C[N, 1]) -> (O) { O = A + B * C; }",
                         A=((3, 4), F32), B=((4,), F32), C=((3, 1), F32)))
    assert k.tags == {"kernel", "eltwise", "eltwise_add"}
    assert [(i.name, i.range) for i in k.idxs] == [("i1", 3), ("i2", 4)]
    assert {r.into: r.access for r in k.refs} == {
        "A": (aff("i1"), aff("i2")), "B": (aff("i2"),), "C": (aff("i1"), aff("0")),
        "O": (aff("i1"), aff("i2"))}
    assert k.stmts[-2:] == (Intrinsic("add", ("$A", "$t0"), ("$O",), DType.FLOAT32),
                            Store("$O", "O"))


def test_size_one_output_dimensions_have_no_index():
    (k,) = kernels(lower("function (A[N, M]) -> (O) { O = A * 2.0; }", A=((1, 4), F32)))
    assert [i.name for i in k.idxs] == ["i2"] and k.refs[0].access == (aff("0"), aff("i2"))


def test_repeated_subexpressions_and_constants_are_computed_once():
    (k,) = kernels(lower("function (A) -> (O) { O = tanh(A) * tanh(A) + 2.0 * 2.0; }",
                         A=((3,), F32)))
    assert [s.name for s in k.stmts if isinstance(s, Intrinsic)] == ["tanh", "mul", "add"]
    assert [s for s in k.stmts if isinstance(s, Constant)] == [
        Constant("$c0", 4.0, DType.FLOAT32)]  # 2.0 * 2.0 folded


def test_copy_statement_and_constant_statement():
    copy, const = kernels(lower("function (A) -> (B, C) { B = A; C = 1.5; }", A=((3,), F32)))
    assert copy.tags == {"kernel", "eltwise", "eltwise_assign", "copy"}
    assert copy.stmts == (Load("A", "$A"), Store("$A", "B"))
    assert const.idxs == () and const.stmts == (Constant("$C", 1.5, DType.FLOAT32),
                                                Store("$C", "C"))


def test_index_function():
    (k,) = kernels(lower("function (A[N, M]) -> (O) { O = index(A, 1); }", A=((3, 4), F32)))
    assert k.tags == {"kernel", "eltwise", "eltwise_index"}
    assert k.stmts == (LoadIndex(aff("i2"), "$O"), Store("$O", "O"))
    assert k.refs[0].dtype is DType.INT32


@pytest.mark.parametrize("dtypes, expr, result", [
    (("float32",), "A * 2.0", "float32"),
    (("float64",), "A * 2.0", "float64"),
    (("int8",), "A + 1", "int32"),  # PlaidML: an integer literal is int32 (docs/dtypes.md)
    (("uint8",), "A * 2", "int32"),
    (("float16",), "A * 2.0", "float32"),
    (("float16",), "A * 2", "float16"),
    (("uint32",), "A + 1", "uint32"),  # equal widths: the first operand's type
    (("uint32",), "1 + A", "int32"),
    (("int32",), "A * 2.5", "float32"),
    (("int64",), "A + 1.5", "float32"),
    (("bool",), "A + 1", "int32"),
    (("bool",), "A * 1.0", "float32"),
    (("int8", "int16"), "A + B", "int16"),
    (("uint8", "int8"), "A + B", "uint8"),
    (("int8", "uint8"), "A + B", "int8"),
    (("uint64", "float16"), "A + B", "float16"),  # a float type wins whatever the widths
    (("float16", "bfloat16"), "A + B", "float32"),
    (("float32", "float64"), "A + B", "float64"),
    (("int32", "float32"), "A + B", "float32"),
    (("int32",), "exp(A)", "float32"),
    (("float64",), "sqrt(A)", "float64"),
    (("int16",), "abs(A)", "int16"),
    (("float32",), "A > 0", "bool"),
    (("int8", "int8"), "A == B && A != 0", "bool"),
    (("int32",), "!A", "bool"),
    (("int8", "uint8"), "A & B", "int8"),
    (("int16",), "A << 2", "int32"),
    (("float32",), "as_int(A, 16)", "int16"),
    (("float32",), "as_uint(A, 8)", "uint8"),
    (("int32",), "as_float(A, 64)", "float64"),
    (("int32",), "as_bool(A)", "bool"),
    (("int32",), "float32(A)", "float32"),
    (("float32",), "index(A, 0)", "int32"),
    (("float32",), "A > 0 ? 1.0 : 0.0", "float32"),
    (("float32",), "A > 0 ? 1 : 0", "int32"),
    (("int8",), "A > 0 ? A : 0", "int32"),
    (("int32",), "A > 0 ? A : 2.5", "float32"),
    (("float32", "int64"), "max(A, B)", "float32"),
    (("int8",), "pow(A, 2)", "int32"),
    (("int8",), "A + N", "int32"),  # a dimension size is an integer literal
    (("float32",), "as_float(A, 16)", "float16"),
    (("float32",), "as_uint(A, 64)", "uint64"),
    (("float32",), "as_bool(A, 1)", "bool"),
    (("int32",), "bfloat16(A)", "bfloat16"),
    (("uint16",), "round(A)", "uint16"),
    (("float16",), "tan(A)", "float16"),
])
def test_dtype_rules(dtypes: tuple[str, ...], expr: str, result: str):
    names = "AB"[:len(dtypes)]
    params = ", ".join(f"{n}[N]" for n in names)
    prog = lower(f"function ({params}) -> (O) {{ O = {expr}; }}",
                 **{n: ((3,), d) for n, d in zip(names, dtypes)})
    assert prog.ref("O").dtype.long_name == result


def test_every_operator_round_trips_through_the_text_form():
    prog = lower("""function (A[N], B[N]) -> (O) {
        O = (A + B - A * B / 2 % 3 > 0) && !(A <= B) || (A >= B) != (A == B)
            ? (A & B | A ^ ~B) << 1 >> 1 : -min(max(A, B), abs(A)) + pow(A, 2);
    }""", A=((4,), "int32"), B=((4,), "int32"))
    assert "&&" in kernels(prog)[0].comments


def test_float_literal_keeps_float32_numerically():
    a = np.array([1.0, 2.5, -3.0], np.float32)
    out = run("function (A) -> (O) { O = A * 0.1 + 2.0; }", A=a)["O"]
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, a * np.float32(0.1) + np.float32(2.0), rtol=1e-6)


# specials ----------------------------------------------------------------------------------------

def test_reshape_gather_scatter_kernels():
    prog = lower("""function (A[N, M], I[K], L[P, M]) -> (R, G, S) {
        R = reshape(A, M, N);
        G = gather(A, I);
        S = scatter(G, I, L);
    }""", A=((3, 4), F32), I=((5,), "int32"), L=((6, 4), F32))
    r, g, s = kernels(prog)
    for k in (r, g, s):
        assert k.tags == {"kernel", "special"} and k.idxs == ()
    assert r.stmts == (Special("reshape", ("A",), ("R",)),)
    assert [(x.dir, x.into, x.shape.sizes) for x in r.refs] == [
        (RefDir.IN, "A", (3, 4)), (RefDir.OUT, "R", (4, 3))]
    assert g.stmts == (Special("gather", ("A", "I"), ("G",)),)
    assert prog.ref("G").shape.sizes == (5, 4)
    assert s.stmts == (Special("scatter", ("G", "I"), ("S",)),)
    assert prog.ref("S").shape.sizes == (6, 4)


# end to end through the interpreter ------------------------------------------------------------

def test_padded_convolution_matches_numpy(rng: np.random.Generator):
    i = rng.standard_normal((2, 5, 6, 3)).astype(np.float32)
    f = rng.standard_normal((3, 3, 3, 4)).astype(np.float32)
    padded = np.pad(i, ((0, 0), (1, 1), (1, 1), (0, 0)))
    expected = sum(np.einsum("nxyc,cd->nxyd", padded[:, a:a + 5, b:b + 6], f[a, b])
                   for a in range(3) for b in range(3))
    np.testing.assert_allclose(run(CONV, I=i, F=f)["O"], expected, rtol=1e-5, atol=1e-5)


def test_uncovered_max_is_zero_outside_and_max_inside(rng: np.random.Generator):
    i = -np.abs(rng.standard_normal(5)).astype(np.float32) - 1  # all negative
    out = run("function (I[N]) -> (O) { O[i : N + 3] = >(I[i]); }", I=i)["O"]
    np.testing.assert_array_equal(out, np.concatenate([i, np.zeros(3, np.float32)]))


def test_odd_elements_unwritten_by_max_stay_zero(rng: np.random.Generator):
    i = rng.standard_normal(6).astype(np.float32) - 5
    out = run("function (I[N]) -> (O) { O[2 * i : N] = >(I[i]), i < 3; }", I=i)["O"]
    np.testing.assert_array_equal(out, [i[0], 0, i[1], 0, i[2], 0])


def test_product_over_window_and_default(rng: np.random.Generator):
    i = rng.standard_normal(5).astype(np.float32)
    d = np.full(8, 7.0, np.float32)
    out = run("""function (I[N], D[M]) -> (P, Q) {
        P[i : N] = *(I[i + j]), j < 2;
        Q[i : M] = +(I[i]) default D;
    }""", I=i, D=d)
    np.testing.assert_allclose(out["P"], np.append(i[:-1] * i[1:], i[-1]), rtol=1e-6)
    np.testing.assert_allclose(out["Q"], np.concatenate([i + 7, d[5:]]), rtol=1e-6)


def test_integer_semantics_and_index(rng: np.random.Generator):
    a = np.array([-7, 7, 5, -5], np.int32)
    b = np.array([2, -2, 3, 3], np.int32)
    out = run("""function (A[N], B[N]) -> (Q, R, S) {
        Q = A / B;
        R = A % B;
        S = index(A, 0) * 10 + (A > 0 ? 1 : 0);
    }""", A=a, B=b)
    np.testing.assert_array_equal(out["Q"], [-3, -3, 1, -1])
    np.testing.assert_array_equal(out["R"], [-1, 1, 2, -2])
    np.testing.assert_array_equal(out["S"], [0, 11, 21, 30])
    assert out["S"].dtype == np.int32


def test_two_outputs_through_a_temporary(rng: np.random.Generator):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    out = run("""function (A[N, M]) -> (S, E) {
        Mx[i, z : N, 1] = >(A[i, j]), z < 1;
        E = exp(A - Mx);
        S[i : N] = +(E[i, j]);
    }""", A=a)
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(out["E"], e, rtol=1e-5)
    np.testing.assert_allclose(out["S"], e.sum(1), rtol=1e-5)


# random contractions against a brute-force reading of the Tile semantics -------------------------

SEEDS = 40
_NP_AGG = {"+": np.add, "*": np.multiply, ">": np.maximum, "<": np.minimum}


def _term(coeffs: tuple[int, int, int]) -> str:
    a, b, c = coeffs
    return f"{a} * i + {b} * j + {c}"


def _brute_force(agg: str, out_c: tuple, in_c: tuple, bound: int | None, out_size: int,
                 data: np.ndarray) -> np.ndarray:
    """Every (i, j) with all accesses in bounds and the constraint true contributes."""
    out = np.zeros(out_size)
    written = np.zeros(out_size, bool)
    for i in range(-40, 41):
        for j in range(-40, 41):
            o = out_c[0] * i + out_c[1] * j + out_c[2]
            x = in_c[0] * i + in_c[1] * j + in_c[2]
            if not (0 <= o < out_size and 0 <= x < len(data)):
                continue
            if bound is not None and not 0 <= j < bound:
                continue
            out[o] = _NP_AGG[agg](out[o], data[x]) if written[o] else data[x]
            written[o] = True
    return out


@pytest.mark.parametrize("seed", range(SEEDS))
def test_random_contractions_match_brute_force(seed: int):
    rng = np.random.default_rng(seed)
    agg = "+*><"[seed % 4]
    while True:
        out_c = (int(rng.integers(-2, 3)), int(rng.integers(-1, 2)), int(rng.integers(-2, 5)))
        in_c = (int(rng.integers(-2, 3)), int(rng.integers(-2, 3)), int(rng.integers(-3, 4)))
        bound = int(rng.integers(1, 4)) if rng.random() < 0.5 else None
        bounded = bound is not None or out_c[0] * in_c[1] != out_c[1] * in_c[0]
        j_used = in_c[1] != 0 or bound is not None
        if out_c[0] != 0 and in_c[0] != 0 and j_used and bounded:
            break  # i, j used outside the output, both with finite ranges
    n_in, n_out = int(rng.integers(1, 8)), int(rng.integers(1, 8))
    data = rng.uniform(0.5, 1.5, n_in) * rng.choice([-1, 1], n_in)
    tail = f", j < {bound}" if bound is not None else ""
    source = (f"function (I[N]) -> (O) {{ O[{_term(out_c)} : {n_out}] = "
              f"{agg}(I[{_term(in_c)}]){tail}; }}")
    out = run(source, I=data)["O"]
    expected = _brute_force(agg, out_c, in_c, bound, n_out, data)
    np.testing.assert_allclose(out, expected, rtol=1e-12, err_msg=source)


def test_docs_example_is_what_lower_produces():
    doc = (Path(__file__).resolve().parent.parent / "docs" / "tile.md").read_text()
    source = doc.split("Example — `C = A·B` then a bias and ReLU:\n\n```\n")[1].split("```")[0]
    shown = doc.split("lowers (A: 4x3, B: 3x5) to\n\n```stripe\n")[1].split("```")[0]
    prog = lower(source, A=((4, 3), F32), B=((3, 5), F32), Bias=((5,), F32))
    assert stripe.print_ir(prog).strip() == shown.strip()


@pytest.mark.parametrize("statement, expected", [
    ("O[2 * x + i, y : 2 * X, Y] = =(I[x, y]), i < 2", lambda i: np.repeat(i, 2, axis=0)),
    ("O[j, i : Y, X] = =(I[i, j])", lambda i: i.T),
    ("O[i : X] = =(I[X - 1 - i, 0])", lambda i: i[::-1, 0]),
    ("O[x, 0 : X, 1] = >(I[x, y])", lambda i: i.max(1, keepdims=True)),
])
def test_doc_examples_run(rng: np.random.Generator, statement: str,
                          expected: Callable[[np.ndarray], np.ndarray]):
    i = rng.standard_normal((3, 4)).astype(np.float32)
    out = run(f"function (I[X, Y]) -> (O) {{ {statement}; }}", I=i)["O"]
    np.testing.assert_array_equal(out, expected(i))
