"""The Stripe text form: golden output, exact round trips, random trees, parse errors."""

from __future__ import annotations

import dataclasses
import enum
import math
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from stripe import parse_ir, print_ir
from stripe.affine import Affine
from stripe.dtypes import DType
from stripe.errors import IRParseError
from stripe.ir import (
    AggOp,
    Block,
    Constant,
    Index,
    Intrinsic,
    Load,
    LoadIndex,
    Location,
    RefDir,
    Refinement,
    Special,
    Statement,
    Store,
    TensorDim,
    TensorShape,
    tags,
)

A = Affine.of
F32 = DType.FLOAT32
DOCS = Path(__file__).resolve().parent.parent / "docs" / "ir.md"


# structural comparison: NaN equals NaN, and leaf types must agree (1 is not 1.0 or True) -----

def same(a: object, b: object) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or a == b  # type: ignore[arg-type]
    if isinstance(a, (tuple, list)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))  # type: ignore
    if dataclasses.is_dataclass(a) and not isinstance(a, type):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in dataclasses.fields(a))
    if isinstance(a, (frozenset, enum.Enum, str, int, bool)) or a is None:
        return a == b
    raise TypeError(f"unexpected leaf {a!r}")


def assert_round_trip(block: Block) -> str:
    text = print_ir(block)
    back = parse_ir(text)
    assert same(back, block), f"round trip changed the tree:\n{text}\n{print_ir(back)}"
    assert print_ir(back) == text
    return text


# hand-built IR covering every node kind and field ----------------------------------------------

def matmul_kernel() -> Block:
    return Block(
        name="kernel_0",
        comments="C[i, j : 4, 5] = +(A[i, k] * B[k, j])",
        idxs=(Index("i", 4), Index("j", 5), Index("k", 3)),
        refs=(
            Refinement(RefDir.IN, "A", "A", (A("i"), A("k")),
                       TensorShape(F32, (TensorDim(1, 3), TensorDim(1, 1))),
                       tags=tags("contraction")),
            Refinement(RefDir.IN, "B", "B", (A("k"), A("j")),
                       TensorShape(F32, (TensorDim(1, 5), TensorDim(1, 1))),
                       tags=tags("contraction")),
            Refinement(RefDir.OUT, "C", "C", (A("i"), A("j")),
                       TensorShape(F32, (TensorDim(1, 5), TensorDim(1, 1))), AggOp.ADD),
        ),
        stmts=(
            Load("A", "$A"),
            Load("B", "$B"),
            Intrinsic("mul", ("$A", "$B"), ("$C",), F32),
            Store("$C", "C"),
        ),
        tags=tags("kernel", "contraction", "agg_op_add", "comb_op_mul"),
    )


GOLDEN = """\
0: #agg_op_add #comb_op_mul #contraction #kernel
block [i:4, j:5, k:3]:60 ( // kernel_0
    // C[i, j : 4, 5] = +(A[i, k] * B[k, j])
    #contraction in A[i, k] fp32:I(1, 1):(3, 1):4 B
    #contraction in B[k, j] fp32:I(1, 1):(5, 1):4 B
    out C[i, j]:add fp32:I(1, 1):(5, 1):4 B
) {
    0: $A = load(A)
    1: $B = load(B)
    2: $C = mul:fp32($A, $B)
    3: C = store($C)
}
"""


def test_golden_text_of_a_kernel() -> None:
    golden = GOLDEN.replace("0: #agg", "#agg", 1)  # the root block has no position
    assert print_ir(matmul_kernel()) == golden
    assert parse_ir(golden) == matmul_kernel()
    assert str(matmul_kernel()) == golden


def full_block() -> Block:
    """A tree that sets every field of every node kind to a non-default value."""
    inner = Block(
        name="inner tile",
        comments="line one\n\n  indented\ttab\n\"quoted\"\ntrailing  ",
        idxs=(Index("i", 2, tags=tags("inner")), Index("x", 3, A("o") * 2 - 1, tags("pass.in"))),
        constraints=(A("x") * -1 + 7, A("i") + A("x") - 1),
        refs=(
            Refinement(RefDir.INOUT, "T", "t", (A("i") * 3, A("x") - 2),
                       TensorShape(DType.FLOAT64, (TensorDim(2, -4), TensorDim(3, 1))),
                       AggOp.MAX, Location("SRAM", A("i") + 1), 4096, True,
                       tags("a=b", "x-y.z", "with space", "#hash", "")),
            Refinement(RefDir.NONE, "", "scratch", (), TensorShape(DType.BOOL, ()),
                       AggOp.MIN, Location("", A(3)), -16),
            Refinement(RefDir.OUT, "U", "U", (A(0),), TensorShape.packed(DType.UINT8, (8,)),
                       AggOp.MUL, Location("DRAM")),
        ),
        stmts=(
            Load("t", "$t", tags("ld")),
            LoadIndex(A("x") * 2 + 1, "$i", tags("idx")),
            Constant("$half", 0.5, F32, tags("c")),
            Constant("$one", 1.0, DType.INT32),
            Constant("$big", 2**70, DType.INT64),
            Constant("$true", True, DType.BOOL),
            Constant("$false", False, DType.BOOL),
            Constant("$inf", math.inf, F32),
            Constant("$ninf", -math.inf, DType.FLOAT64),
            Constant("$tiny", 5e-324, DType.FLOAT64),
            Constant("$third", 1 / 3, DType.FLOAT64),
            Constant("$negzero", -0.0, F32),
            Intrinsic("cond", ("$true", "$half", "$one"), ("$y",), F32, tags("sel")),
            Intrinsic("divmod", ("$y", "$one"), ("$q", "$r"), DType.INT16),
            Intrinsic("barrier", (), (), DType.INT8),
            Special("gather", ("t", "I"), ("O",), ("mode", 3, -1, ""), tags("sp")),
            Special("reshape", ("t",), ("U",)),
            Special("load", ("t",), ("$weird",)),
            Store("$y", "t", tags("st")),
        ),
        tags=tags("tile", "key=value"),
        location=Location("CORE", A("o")),
    )
    return Block(
        name="outer",
        idxs=(Index("o", 4),),
        refs=(Refinement(RefDir.INOUT, "T", "T", (A("o"), A(0)),
                         TensorShape.packed(DType.FLOAT64, (4, 8))),),
        stmts=(inner, Block(), Block(tags=tags("empty"))),
        tags=tags("program"),
    )


def test_every_field_round_trips() -> None:
    text = assert_round_trip(full_block())
    assert "$inf = (fp32)inf" in text and "$ninf = (fp64)-inf" in text
    assert "$one = (i32)1.0" in text and "$big = (i64)1180591620717411303424" in text
    assert "$true = (bool)true" in text and '"load"(t)' in text
    assert 'params("mode", 3, -1, "")' in text
    assert "inout const t = T<SRAM[1 + i]>@0x1000[3*i, -2 + x]:max" in text


def test_nan_constant_round_trips() -> None:
    block = Block(stmts=(Constant("$nan", math.nan, F32),))
    text = assert_round_trip(block)
    assert "$nan = (fp32)nan" in text


@pytest.mark.parametrize("name", [
    "", "a b", "block", "in", "new", "const", "load", "$", "$1", "1x", "x\ny", 'q"uote',
    "back\\slash", "ünï", "\u2028", "tab\t", "//", "#tag", "-", "a.b",
])
def test_any_name_round_trips(name: str) -> None:
    ref = Refinement(RefDir.IN, name, name, (A(name),), TensorShape.packed(F32, (1,)),
                     location=Location(name))
    block = Block(
        name=name, comments=name, idxs=(Index(name, 2, A(name)),), constraints=(A(name),),
        refs=(ref, dataclasses.replace(ref, from_=name + "p", into=name + "2")),
        stmts=(Load(name, name), Store(name, name), LoadIndex(A(name), name),
               Constant(name, 1, F32), Intrinsic(name, (name,), (name, name), F32),
               Special(name, (name, name), (name,), (name,)), Block(name=name)),
        tags=tags(name) if name else tags(),
    )
    assert_round_trip(block)
    assert_round_trip(Block(stmts=(block,)))


@pytest.mark.parametrize("tag", ["a=b", "k=v.1-2", "x:y/z", "a b", "", '"', "#", "é", "a\nb"])
def test_any_tag_round_trips(tag: str) -> None:
    assert_round_trip(Block(tags=tags(tag), idxs=(Index("i", 1, tags=tags(tag)),),
                            stmts=(Load("A", "$a", tags(tag)),)))


def test_simple_tags_are_bare_and_sorted() -> None:
    text = print_ir(Block(tags=tags("z", "key=value", "a.b-c")))
    assert text.splitlines()[0] == "#a.b-c #key=value #z"


def test_deterministic_across_equal_trees() -> None:
    a, b = full_block(), full_block()
    assert a is not b and print_ir(a) == print_ir(b)


def test_derived_numbers_are_optional_and_ignored() -> None:
    text = "block [i:4]:999 (\n    in A[i] fp32:I(1):(1):7 MiB\n) {\n}\n"
    bare = "block [i:4] ( in A[i] fp32:I(1):(1) ) { }"
    assert parse_ir(text) == parse_ir(bare)
    assert print_ir(parse_ir(bare)) == "block [i:4]:4 (\n    in A[i] fp32:I(1):(1):4 B\n) {\n}\n"


def test_hex_offsets_and_negative_literals_parse() -> None:
    block = parse_ir("block [] ( none new X@0x10[] fp32:I():() ) { 0: $c = (i64)-3 }")
    assert block.refs[0].offset == 16 and block.refs[0].is_alloc
    assert block.stmts[0] == Constant("$c", -3, DType.INT64)


# random trees ----------------------------------------------------------------------------------

IDENT = st.from_regex(r"\$?[A-Za-z_][A-Za-z0-9_]{0,3}", fullmatch=True)
NAMES = st.one_of(IDENT, IDENT, st.sampled_from(["block", "in", "new", "index"]),
                  st.text(max_size=4))
SMALL = st.integers(-20, 20)
TAGS = st.frozensets(st.one_of(st.sampled_from(["kernel", "a=b", "x.y-z"]), st.text(max_size=4)),
                     max_size=3)
DTYPES = st.sampled_from(list(DType))
AFFINES = st.builds(lambda terms, c: Affine(tuple(terms), c),
                    st.lists(st.tuples(NAMES, SMALL), max_size=3), SMALL)
LOCATIONS = st.one_of(st.just(Location()), st.builds(Location, NAMES, AFFINES))
VALUES = st.one_of(st.booleans(), st.integers(), st.floats(allow_nan=True))


@st.composite
def shapes(draw: st.DrawFn) -> TensorShape:
    dims = draw(st.lists(st.builds(TensorDim, st.integers(0, 9), SMALL), max_size=3))
    return TensorShape(draw(DTYPES), tuple(dims))


REFS = st.builds(
    Refinement, st.sampled_from(list(RefDir)), st.one_of(st.just(""), NAMES), NAMES,
    st.lists(AFFINES, max_size=3).map(tuple), shapes(), st.sampled_from(list(AggOp)),
    LOCATIONS, st.integers(-(2**40), 2**40), st.booleans(), TAGS)
NAME_TUPLES = st.lists(NAMES, max_size=3).map(tuple)
SIMPLE_STMTS = st.one_of(
    st.builds(Load, NAMES, NAMES, TAGS),
    st.builds(Store, NAMES, NAMES, TAGS),
    st.builds(LoadIndex, AFFINES, NAMES, TAGS),
    st.builds(Constant, NAMES, VALUES, DTYPES, TAGS),
    st.builds(Intrinsic, NAMES, NAME_TUPLES, NAME_TUPLES, DTYPES, TAGS),
    st.builds(Special, NAMES, NAME_TUPLES, NAME_TUPLES,
              st.lists(st.one_of(st.integers(), st.text(max_size=4)), max_size=3).map(tuple),
              TAGS),
)


def blocks(depth: int) -> st.SearchStrategy[Block]:
    stmts: st.SearchStrategy[Statement] = SIMPLE_STMTS
    if depth > 0:
        stmts = st.one_of(SIMPLE_STMTS, st.deferred(lambda: blocks(depth - 1)))
    return st.builds(
        Block, NAMES, st.text(max_size=8),
        st.lists(st.builds(Index, NAMES, st.integers(-3, 50), AFFINES, TAGS), max_size=3)
        .map(tuple),
        st.lists(AFFINES, max_size=2).map(tuple),
        st.lists(REFS, max_size=3).map(tuple),
        st.lists(stmts, max_size=4).map(tuple),
        TAGS, LOCATIONS)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(blocks(2))
def test_random_trees_round_trip(block: Block) -> None:
    assert_round_trip(block)


# parse errors ---------------------------------------------------------------------------------

@pytest.mark.parametrize("text, line, column, message", [
    ("", 1, 1, "expected 'block', found end of input"),
    ("block [i:4] (\n) {\n    0: $a = load(A\n}\n", 4, 1, "expected ')' to close 'load'"),
    ("block [i 4] ( ) { }", 1, 10, "expected ':' before the index range"),
    ("block [] (\n    in A[i] fp33:I(1):(1)\n) { }", 2, 13, "expected a dtype"),
    ("block [] (\n    in A[i] fp32:I(1, 2):(1)\n) { }", 2, 26, "2 sizes but 1 strides"),
    ("block [] (\n    i >= 1\n) { }", 2, 10, "a constraint compares with 0"),
    ("block [] ( ) {\n  0: $a, $b = load(A)\n}", 2, 15, "'load' needs exactly one name"),
    ("block [] ( ) {\n  0: $a = (fp32)\"x\"\n}", 2, 17, "a constant is a number or a bool"),
    ("block [] ( ) {\n  $a = load(A)\n}", 2, 3, "expected a statement number or '}'"),
    ("block [] ( ) { } block", 1, 18, "expected end of input after the root block"),
    ("block [] ( ) { 0: ? }", 1, 19, "unexpected character '?'"),
    ('block [] ( ) { 0: "unterminated }', 1, 19, "unexpected character '\"'"),
    ('block [] ( ) { 0: $a = load("\\q") }', 1, 29, "bad string literal"),
    ("block [] ( in A[] fp32:I():() :agg ) { }", 1, 32, "expected a byte size, found 'agg'"),
    ("block [] ( in A[]:sum fp32:I():() ) { }", 1, 19, "expected an aggregation op"),
    ("block [] ( ) { 0: $c = (fp32)1 params(1) }", 1, 32, "expected a statement number"),
    ("block [i = 2*:1] ( ) { }", 1, 14, "expected an index name"),
])
def test_parse_errors_carry_line_and_column(text: str, line: int, column: int,
                                            message: str) -> None:
    with pytest.raises(IRParseError) as info:
        parse_ir(text)
    err = info.value
    assert message in str(err)
    assert (err.line, err.column) == (line, column), str(err)
    assert str(err).startswith(f"line {line}, column {column}: ")


def test_deep_nesting_is_an_error_not_a_crash() -> None:
    text = "block [] ( ) { 0: " * 500 + "}" * 500
    with pytest.raises(IRParseError, match="nested deeper"):
        parse_ir(text)


def test_huge_integer_is_a_parse_error() -> None:
    with pytest.raises(IRParseError, match="bad integer"):
        parse_ir("block [i:" + "9" * 5000 + "] ( ) { }")


def test_truncations_and_garbage_raise_only_parse_errors() -> None:
    text = print_ir(full_block())
    for cut in range(0, len(text) - 1, 3):
        try:
            parse_ir(text[:cut])
        except IRParseError:
            pass
    lines = text.splitlines(keepends=True)
    for i in range(len(lines)):
        for junk in ("", "?", "]", "0: ", "block", '"', "#", "(", "-"):
            try:
                parse_ir("".join(lines[:i] + [junk] + lines[i + 1:]))
            except IRParseError:
                pass


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("block[]():{},=<>@#$\"/ \n0123-+*ixAfp32I")),
               max_size=60))
def test_fuzz_never_raises_anything_but_parse_errors(text: str) -> None:
    try:
        parse_ir(text)
    except IRParseError:
        pass


# the examples in docs/ir.md are exact printer output -------------------------------------------

def doc_examples() -> list[str]:
    return re.findall(r"```stripe\n(.*?)```", DOCS.read_text(), re.S)


def test_docs_examples_are_printer_output() -> None:
    examples = doc_examples()
    assert len(examples) >= 2
    for text in examples:
        assert print_ir(parse_ir(text)) == text
