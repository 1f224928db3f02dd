"""The intrinsics table: complete, read by the front end, the verifier and the interpreter,
and its numpy and C columns agree on every row."""

from __future__ import annotations

import importlib

import numpy as np
import pytest

from stripe import interpret, parse_ir
from stripe.compiler import compile_program
from stripe.dtypes import DType
from stripe.errors import VerifyError
from stripe.intrinsics import (
    ARITY,
    C_TYPES,
    CHEAP,
    EXACT,
    INTRINSICS_TABLE,
    IntrinsicInfo,
    NotDefined,
)
from stripe.ir import INTRINSICS, Intrinsic
from stripe.target import HOST
from stripe.tile import lower, typecheck
from stripe.verify import verify

LOWER = importlib.import_module("stripe.tile.lower")
RESULTS = ("common", "float", "bool", "integer", "given")


def test_every_row_has_every_column():
    for name, info in INTRINSICS_TABLE.items():
        assert isinstance(info, IntrinsicInfo) and info.name == name
        assert info.arity in (1, 2, 3)
        assert info.result in RESULTS
        assert callable(info.numpy) and callable(info.c)
        assert isinstance(info.cheap, bool) and isinstance(info.exact, bool)
        assert isinstance(info.tile, str)
    assert INTRINSICS == ARITY == {n: i.arity for n, i in INTRINSICS_TABLE.items()}
    assert CHEAP <= set(INTRINSICS_TABLE) and EXACT <= set(INTRINSICS_TABLE)


def test_the_front_end_writes_only_table_intrinsics():
    """Every intrinsic the Tile front end can produce is a row, and every row with a Tile
    spelling is reachable from Tile."""
    produced = (set(typecheck._UNARY.values()) | set(typecheck._ARITH.values())
                | set(typecheck._COMPARE.values()) | set(typecheck._LOGIC.values())
                | set(typecheck._BITS.values()) | set(typecheck._FLOAT_FNS)
                | set(typecheck._SAME_FNS) | set(typecheck._BINARY_FNS)
                | set(LOWER._COMB.values()) | {"cast", "cond", "cmp_eq"})
    assert produced <= set(INTRINSICS_TABLE)
    spelled = {n for n, i in INTRINSICS_TABLE.items() if i.tile}
    assert spelled <= produced
    assert set(typecheck._FLOAT_FNS + typecheck._SAME_FNS + typecheck._BINARY_FNS) <= set(
        typecheck.FUNCTIONS)


def test_tile_operators_lower_to_their_rows():
    src = "function (A[N], B[N]) -> (O) { O = max(A % B, -A) << (A & B); }"
    block = lower(src, {"A": ((4,), "int32"), "B": ((4,), "int32")})
    names = {s.name for _, b in block.walk() for s in b.stmts if isinstance(s, Intrinsic)}
    assert {"max", "mod", "neg", "shl", "bit_and"} <= names


def test_the_verifier_reads_the_table():
    with pytest.raises(VerifyError, match="takes 2 inputs, got 1"):
        verify(parse_ir(_program("add", [DType.INT32], DType.INT32, arity=1)))
    with pytest.raises(VerifyError, match="'bit_and' is not defined on float32"):
        verify(parse_ir(_program("bit_and", [DType.FLOAT32] * 2, DType.FLOAT32)))
    with pytest.raises(NotDefined):
        INTRINSICS_TABLE["shl"].numpy(DType.FLOAT64, [np.ones(2), np.ones(2)])


# numpy against C, row by row -----------------------------------------------------------------

N = 64
INTS = (DType.INT8, DType.INT16, DType.INT32, DType.INT64, DType.UINT8)
FLOATS = (DType.FLOAT32, DType.FLOAT64)


def _dtypes(info: IntrinsicInfo) -> tuple[DType, ...]:
    """The result dtypes a row is tried on: every one it is defined on."""
    if info.result == "integer":
        return INTS + (DType.BOOL,)
    if info.result == "bool":
        return (DType.BOOL,)
    return INTS + FLOATS + (DType.BOOL,)


def _inputs(info: IntrinsicInfo, dtype: DType, rng: np.random.Generator) -> list[np.ndarray]:
    """Random inputs on which C defines the result (no overflow, no shift by the width or
    of a negative value, no float out of an integer's range)."""
    t = DType.FLOAT32 if info.name.startswith(("cmp_", "and", "or", "not")) and \
        dtype is DType.BOOL else dtype
    if info.name in ("cast", "assign"):
        t = DType.FLOAT64 if not dtype.is_float else DType.INT32
    lo, hi = (0, 10) if t in (DType.UINT8, DType.BOOL) else (-10, 10)
    if info.result == "float" and not t.is_float:
        lo, hi = 1, 4  # a math function on integers: its double result fits
    if info.name == "pow":
        lo, hi = (0, 5) if t in (DType.UINT8, DType.BOOL) else (-5, 5)
    args = []
    for k in range(info.arity):
        if info.name in ("shl", "shr") and k == 1:
            args.append(rng.integers(0, 4, N))
        elif info.name == "shl":
            args.append(rng.integers(0, 8, N))
        elif info.name == "pow" and k == 1:
            args.append(rng.integers(-2 if not dtype.is_float else 0, 4, N))
        elif t.is_float:
            x = rng.standard_normal(N) * 3
            args.append(np.abs(x) if info.name == "cast" and dtype is DType.UINT8 else x)
        else:
            args.append(rng.integers(lo, hi, N))
    if info.name == "cond":
        return [args[0].astype(DType.BOOL.np)] + [a.astype(t.np) for a in args[1:]]
    return [a.astype(t.np) for a in args]


def _program(name: str, inputs: list[DType], dtype: DType, arity: int | None = None,
             kernels: int = 1) -> str:
    """A program of ``kernels`` kernels, kernel k computing ``O{k}[i] = name(I{k}_j[i])``;
    every kernel has the same input and output dtypes unless given per kernel."""
    return _multi_program(name, [(inputs, dtype)] * kernels, arity)


def _multi_program(name: str, cases: list[tuple[list[DType], DType]],
                   arity: int | None = None) -> str:
    refs, main_refs, kernels = [], [], []
    for k, (inputs, dtype) in enumerate(cases):
        body_refs, loads = [], []
        for j, t in enumerate(inputs):
            refs.append(f"    #user in new I{k}_{j}[0] {t.value}:I({N}):(1)")
            main_refs.append(f"        in I{k}_{j}[0] {t.value}:I({N}):(1)")
            body_refs.append(f"            in I{k}_{j}[i] {t.value}:I(1):(1)")
            loads.append(f"$a{j} = load(I{k}_{j})")
        refs.append(f"    #user out new O{k}[0] {dtype.value}:I({N}):(1)")
        main_refs.append(f"        out O{k}[0] {dtype.value}:I({N}):(1)")
        body_refs.append(f"            out O{k}[i] {dtype.value}:I(1):(1)")
        args = ", ".join(f"$a{j}" for j in range(arity if arity is not None else len(inputs)))
        stmts = loads + [f"$r = {name}:{dtype.value}({args})", f"O{k} = store($r)"]
        kernels.append(f"        {k}: #kernel\n        block [i:{N}]:{N} ( // k{k}\n"
                       + "\n".join(body_refs) + "\n        ) {\n"
                       + "\n".join(f"            {n}: {s}" for n, s in enumerate(stmts))
                       + "\n        }")
    return ("#program\nblock []:1 ( // program\n" + "\n".join(refs) + "\n) {\n"
            "    0: #main\n    block []:1 ( // main\n" + "\n".join(main_refs) + "\n    ) {\n"
            + "\n".join(kernels) + "\n    }\n}\n")


@pytest.mark.parametrize("name", list(INTRINSICS_TABLE))
def test_interpreter_and_c_agree(name: str):
    """Every row, on every dtype it is defined on, in one program: the interpreter (the
    numpy column) and the compiled C (the C column, built for the default target)."""
    info = INTRINSICS_TABLE[name]
    rng = np.random.default_rng(sum(map(ord, name)))
    cases, arrays = [], {}
    for k, dtype in enumerate(_dtypes(info)):
        args = _inputs(info, dtype, rng)
        cases.append(([DType(_dtype_value(a)) for a in args], dtype))
        arrays.update({f"I{k}_{j}": a for j, a in enumerate(args)})
    program = parse_ir(_multi_program(name, cases))
    verify(program)
    with np.errstate(all="ignore"):
        want = interpret(program, arrays)
    got = compile_program(program, target=HOST)(**arrays)
    for k, (_, dtype) in enumerate(cases):
        out = f"O{k}"
        if dtype.is_float:
            # the vectorisable float32 exp, log and tanh are within a few ulps of libm
            np.testing.assert_allclose(got[out], want[out], rtol=2e-6, atol=1e-30,
                                       equal_nan=True, err_msg=f"{name}:{dtype.value}")
        else:
            np.testing.assert_array_equal(got[out], want[out], err_msg=f"{name}:{dtype.value}")


def _dtype_value(a: np.ndarray) -> str:
    return next(d.value for d in DType if d.np == a.dtype)


# the C column as the back end writes it ------------------------------------------------------

ALL = (DType.BOOL,) + INTS + FLOATS




def test_every_dtype_has_a_c_type():
    assert set(C_TYPES) == set(DType)


# edge inputs: NaN, infinities, overflow, division by 0, shifts by the width ------------------

FLOAT_EDGES = (np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 300.0, -300.0, 3e9,
               -3e9, 1e30, -1e30, 255.9, -0.5, 1e-40)


def _int_edges(dtype: DType) -> tuple[int, ...]:
    if dtype is DType.BOOL:
        return (0, 1)
    info = np.iinfo(dtype.np)
    bits = dtype.itemsize * 8
    values = {int(info.min), int(info.min) + 1, int(info.max), int(info.max) - 1, 0, 1, -1,
              2, -2, 3, bits - 1, bits, bits + 1, -bits, 7, -7}
    return tuple(sorted(v for v in values if info.min <= v <= info.max))


def _edge_inputs(info: IntrinsicInfo, dtype: DType, rng: np.random.Generator,
                 ) -> list[np.ndarray]:
    """Inputs drawn from the edge values of their type (every pair of them appears in some
    lane with some probability: N random draws per input)."""
    t = DType.FLOAT32 if info.name.startswith(("cmp_", "and", "or", "not")) and \
        dtype is DType.BOOL else dtype
    if info.name in ("cast", "assign"):
        t = DType.FLOAT64 if not dtype.is_float else DType.INT64
    if info.result == "float" and not t.is_float:
        t = DType.INT32  # a math function on integers (computed in double, converted)
    if info.name == "cond":
        return [rng.choice(FLOAT_EDGES, N).astype(np.float32)] + [
            rng.choice(FLOAT_EDGES if t.is_float else _int_edges(t), N).astype(t.np)
            for _ in range(2)]
    pool = FLOAT_EDGES if t.is_float else _int_edges(t)
    return [rng.choice(np.array(pool, dtype=object), N).astype(t.np)
            for _ in range(info.arity)]


@pytest.mark.parametrize("name", list(INTRINSICS_TABLE))
def test_interpreter_and_c_agree_on_edge_inputs(name: str):
    """Every row on every dtype it is defined on, on NaN, infinities, out-of-range floats,
    the integer limits, division by 0 and -1, and shift counts past the width: the
    semantics define all of them (docs/semantics.md), and the numpy and C columns agree."""
    info = INTRINSICS_TABLE[name]
    rng = np.random.default_rng(sum(map(ord, name)) + 1)
    cases, arrays = [], {}
    for k, dtype in enumerate(_dtypes(info)):
        args = _edge_inputs(info, dtype, rng)
        cases.append(([DType(_dtype_value(a)) for a in args], dtype))
        arrays.update({f"I{k}_{j}": a for j, a in enumerate(args)})
    program = parse_ir(_multi_program(name, cases))
    verify(program)
    with np.errstate(all="ignore"):
        want = interpret(program, arrays)
    got = compile_program(program, target=HOST)(**arrays)
    for k, (_, dtype) in enumerate(cases):
        out = f"O{k}"
        if dtype.is_float:
            np.testing.assert_array_equal(np.isnan(got[out]), np.isnan(want[out]),
                                          err_msg=f"{name}:{dtype.value} NaN")
            with np.errstate(invalid="ignore"):
                np.testing.assert_allclose(got[out], want[out], rtol=2e-6, atol=1e-30,
                                           equal_nan=True, err_msg=f"{name}:{dtype.value}")
        else:
            np.testing.assert_array_equal(got[out], want[out], err_msg=f"{name}:{dtype.value}")
