"""The limits of docs/limits.md outside the Tile front end: STRIPE_MAX_BYTES, 64-bit
integers in IR text, the verifier and the interpreter, block nesting, and isl's exact
integers (the Tile front end's limits are tested in test_tile_errors.py)."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

import stripe
from stripe import limits, parse_ir, print_ir
from stripe.affine import Affine
from stripe.dtypes import DType
from stripe.errors import InterpreterError, IRParseError, LimitError, StripeError, VerifyError
from stripe.interp import interpret
from stripe.ir import Block, Constant, Index, RefDir, Refinement, TensorShape
from stripe.poly import Space, affine_bounds, dim_bounds, implies, make_set
from stripe.verify import verify

DOC = Path(__file__).resolve().parent.parent / "docs" / "limits.md"

SMALL = stripe.lower("function (A[N]) -> (C) { C = A * 2.0; }", {"A": ((5,), "float32")})
SMALL_TEXT = print_ir(SMALL)


def _with(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


# STRIPE_MAX_BYTES -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, value", [
    ("", limits.DEFAULT_MAX_BYTES), ("  ", limits.DEFAULT_MAX_BYTES), ("1000", 1000),
    ("2KiB", 2048), ("3 MiB", 3 * 2**20), ("1g", 2**30), ("4GiB", 4 * 2**30), ("2T", 2**41),
    ("17B", 17),
])
def test_max_bytes_reads_the_environment(monkeypatch, text, value):
    monkeypatch.setenv("STRIPE_MAX_BYTES", text)
    assert limits.max_bytes() == value


@pytest.mark.parametrize("text", ["0", "-5", "abc", "1.5GiB", "12 parsecs", "9" * 5000,
                                  "99999999999999999999", "8589934592TiB"])
def test_a_bad_max_bytes_is_a_limit_error(monkeypatch, text):
    monkeypatch.setenv("STRIPE_MAX_BYTES", text)
    with pytest.raises(LimitError, match="STRIPE_MAX_BYTES=.* is not a positive number"):
        limits.max_bytes()


def test_the_documented_default_is_the_default():
    text = DOC.read_text()
    assert limits.DEFAULT_MAX_BYTES == 16 * 2**30
    assert "16 GiB" in text and "STRIPE_MAX_BYTES" in text
    assert f"{limits.MAX_EXPR_DEPTH:,}" in text and f"{limits.MAX_BLOCK_DEPTH}" in text


@pytest.mark.parametrize("nbytes, shown", [
    (2**34 + 1, "17179869185 bytes (16.0 GiB)"), (3 * 2**40, "3298534883328 bytes (3.0 TiB)"),
    (2**63, "9223372036854775808 bytes (8388608.0 TiB)"), (10**400, "about 2**1328 B"),
])
def test_check_bytes_names_any_size(monkeypatch, nbytes, shown):
    monkeypatch.delenv("STRIPE_MAX_BYTES", raising=False)
    with pytest.raises(LimitError) as info:
        limits.check_bytes(nbytes, "the thing")
    assert str(info.value) == (f"the thing: {shown}, more than the limit of 17179869184 bytes "
                               "(16.0 GiB; set STRIPE_MAX_BYTES to raise it)")


def test_check_int_and_check_product():
    assert limits.check_int(2**63 - 1, "x") == 2**63 - 1
    assert limits.check_int(-(2**63), "x") == -(2**63)
    for bad in (2**63, -(2**63) - 1, 10**400):
        with pytest.raises(LimitError, match="the size does not fit in 64 bits"):
            limits.check_int(bad, "the size")
    assert limits.check_product([0, 3, 2**40], "p") == 3 * 2**40  # 0 counts as 1 (strides)
    with pytest.raises(LimitError, match="the strides"):
        limits.check_product([2**32, 0, 2**31], "the strides")


# IR text --------------------------------------------------------------------------------------

@pytest.mark.parametrize("old, new, message", [
    ("block [i1:5]:5", "block [i1:9223372036854775808]:5", "bad integer 9223372036854775808"),
    ("block [i1:5]:5", "block [i1:0x10000000000000000]:5", "bad integer 0x10000000000000000"),
    ("block [i1:5]:5", "block [i1:" + "9" * 5000 + "]:5", "bad integer 9999999999...999999"),
    ("in A[i1]", "in A[9223372036854775807 + 1 + i1]",
     "this affine's coefficients or constant do not fit in 64 bits"),
    ("in A[i1]", "in A[4611686018427387904*i1 + 4611686018427387904*i1]",
     "this affine's coefficients or constant do not fit in 64 bits"),
    ("in A[i1] fp32:I(1):(1)", "in A[i1] fp32:I(1):(-9223372036854775809)", "bad integer -9223"),
    ("in A[i1] fp32:I(1):(1)", "in A[i1] fp32:I(4611686018427387904):(1)",
     "this shape's element count or byte size does not fit in 64 bits"),
    ("in A[i1] fp32:I(1):(1)", "in A[i1] fp32:I(2, 2):(4611686018427387904, 1)",
     "this shape's element count or byte size does not fit in 64 bits"),
    ("in A[i1] fp32", "in A@9223372036854775808[i1] fp32", "bad integer"),
    ("$c0 = (fp32)2.0", "$c0 = (i64)" + "1" * 41, "bad integer 1111111111...111111: more than"),
])
def test_huge_integers_in_ir_text_are_parse_errors(old, new, message):
    text = _with(SMALL_TEXT, old, new)
    with pytest.raises(IRParseError, match=re.escape(message)) as info:
        parse_ir(text)
    assert info.value.line == next(k for k, s in enumerate(text.splitlines(), 1) if new in s)


def test_the_extreme_64_bit_integers_parse():
    text = _with(SMALL_TEXT, "in A[i1]", "in A[-9223372036854775808 + 9223372036854775807*i1]")
    kernel = parse_ir(text).stmts[0].stmts[0]
    assert kernel.ref("A").access == (Affine((("i1", 2**63 - 1),), -(2**63)),)
    with pytest.raises(VerifyError, match="outside"):
        verify(parse_ir(text))


def test_a_wide_constant_parses_but_does_not_verify():
    text = _with(SMALL_TEXT, "$c0 = (fp32)2.0", "$c0 = (i64)1180591620717411303424")
    block = parse_ir(text)
    assert print_ir(block) == text
    with pytest.raises(VerifyError, match="constant '\\$c0' = 1180591620717411303424 does not "
                                          "fit in 64 bits"):
        verify(block)


# the verifier and the interpreter on IR built in Python ----------------------------------------

def _program(*refs: Refinement, stmts: tuple = (), idxs: tuple = ()) -> Block:
    return Block(name="program", refs=refs, stmts=stmts, idxs=idxs)


def _alloc(name: str, sizes: tuple[int, ...], dtype: DType = DType.FLOAT32,
           direction: RefDir = RefDir.OUT) -> Refinement:
    return Refinement(direction, "", name, (Affine(),) * len(sizes),
                      TensorShape.packed(dtype, sizes))


WIDE = [
    ("a range", _program(idxs=(Index("i", 2**63),)), "index 'i'"),
    ("a range product", _program(idxs=(Index("i", 2**62), Index("j", 4))), "index 'j'"),
    ("a size", _program(_alloc("A", (2**63,), DType.UINT8)), "refinement 'A'"),
    ("a byte size", _program(_alloc("A", (2**62,), DType.INT64)), "refinement 'A'"),
    ("a constant", _program(stmts=(Constant("$c", 2**64, DType.INT64),)), "constant '$c'"),
    ("a constraint", Block(name="program", idxs=(Index("i", 2),),
                           constraints=(Affine.of("i") + 2**63,)), "constraint"),
]


@pytest.mark.parametrize("what, block, message", WIDE, ids=[w[0] for w in WIDE])
def test_wide_integers_in_ir_are_refused(what, block, message):
    with pytest.raises(VerifyError, match=re.escape(message)):
        verify(block)
    with pytest.raises(InterpreterError, match=re.escape(message)) as info:
        interpret(block, {})
    assert info.value.path == "program"


def test_the_interpreter_refuses_a_program_beyond_the_memory_limit_before_allocating():
    text = _with(_with(SMALL_TEXT.replace("I(5):(1):20 B", "I(100000, 100000):(100000, 1)"),
                       "new A[0]", "new A[0, 0]"), "new C[0]", "new C[0, 0]")
    block = parse_ir(text)
    with pytest.raises(LimitError) as info:
        interpret(block, {"A": np.zeros((1, 1), np.float32)})
    message = str(info.value)
    assert "the buffers of program" in message and "80000000000 bytes (74.5 GiB)" in message
    assert "STRIPE_MAX_BYTES" in message


def test_nested_allocations_count_against_the_memory_limit(monkeypatch):
    inner = Block(name="inner", refs=(_alloc("T", (1000,), DType.FLOAT64, RefDir.NONE),))
    block = _program(_alloc("A", (10,), direction=RefDir.IN), _alloc("C", (10,)),
                     stmts=(inner,))
    monkeypatch.setenv("STRIPE_MAX_BYTES", "8079")
    with pytest.raises(LimitError, match="the largest: 'T'.*: 8080 bytes"):
        interpret(block, {"A": np.zeros(10, np.float32)})
    monkeypatch.setenv("STRIPE_MAX_BYTES", "8080")
    interpret(block, {"A": np.zeros(10, np.float32)})
    assert limits.program_bytes(block) == 8080


def _nested(depth: int) -> Block:
    block = Block(name=f"b{depth}")
    for k in range(depth - 1, 0, -1):
        block = Block(name=f"b{k}", stmts=(block,))
    return block


def test_blocks_nest_at_most_max_block_depth():
    ok = _nested(limits.MAX_BLOCK_DEPTH)
    verify(ok)
    interpret(ok, {})
    assert parse_ir(print_ir(ok)) == ok
    deep = _nested(1000)
    for run in (verify, lambda b: interpret(b, {})):
        with pytest.raises(StripeError, match=f"blocks nest deeper than "
                                              f"{limits.MAX_BLOCK_DEPTH}") as info:
            run(deep)
        assert info.value.path.count("/") == limits.MAX_BLOCK_DEPTH
    with pytest.raises(IRParseError, match=f"nested deeper than {limits.MAX_BLOCK_DEPTH}"):
        parse_ir(print_ir(_nested(limits.MAX_BLOCK_DEPTH + 1)))


def test_inputs_and_outputs_keep_their_layout():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    for strides in ((4, 1), (1, 3), (5, 1), (0, 1)):
        shape = TensorShape.packed(DType.INT32, (3, 4)).with_strides(strides)
        block = Block(name="program", refs=(
            Refinement(RefDir.INOUT, "", "A", (Affine(), Affine()), shape),))
        got = interpret(block, {"A": a})["A"]
        expected = a if strides != (0, 1) else np.broadcast_to(a[-1], (3, 4))
        np.testing.assert_array_equal(got, expected)


# isl gets exact integers -----------------------------------------------------------------------

def test_poly_takes_integers_wider_than_64_bits():
    space = Space(("i",))
    s = make_set(space, [Affine.of("i") * 2**70 + 5, 2**80 - Affine.of("i")])
    assert dim_bounds(space, s, "i") == (0, 2**80)
    assert affine_bounds(space, s, Affine.of("i") * 3 - 2**100) == (-(2**100), 3 * 2**80
                                                                     - 2**100)
    assert implies(space, s, Affine.of("i") + 2**90)
    assert not implies(space, s, 2**79 - Affine.of("i"))


@pytest.mark.parametrize("value", [None, b"block [] ( ) { }", 3, ["block"]])
def test_parse_ir_takes_only_text(value):
    with pytest.raises(TypeError, match="parse_ir: text must be a str"):
        parse_ir(value)
