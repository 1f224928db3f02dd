"""The reference interpreter on hand-built IR, checked against numpy.

The Tile front end is not used here: every program is built from IR nodes, so these tests
pin down the execution semantics of docs/semantics.md on their own.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence

import numpy as np
import pytest

import stripe.interp as interp_module
from stripe import interpret
from stripe.affine import Affine
from stripe.dtypes import DType, to_dtype
from stripe.errors import InterpreterError
from stripe.ir import (
    INTRINSICS,
    AggOp,
    Block,
    Constant,
    Index,
    Intrinsic,
    Load,
    LoadIndex,
    RefDir,
    Refinement,
    Special,
    Statement,
    Store,
    TensorDim,
    TensorShape,
)

F32, F64, I8, I32, I64, U8, BOOL = (DType.FLOAT32, DType.FLOAT64, DType.INT8, DType.INT32,
                                    DType.INT64, DType.UINT8, DType.BOOL)
IN, OUT, INOUT, NONE = RefDir.IN, RefDir.OUT, RefDir.INOUT, RefDir.NONE
AccessLike = Affine | str | int


# builders -----------------------------------------------------------------------------------

def lin(const: int = 0, **coeffs: int) -> Affine:
    """``lin(-1, x=1, i=1)`` is the affine ``-1 + i + x``."""
    return Affine.from_dict(coeffs, const)


def alloc(dir_: RefDir, name: str, sizes: Sequence[int], dtype: DType = F32,
          strides: Sequence[int] | None = None) -> Refinement:
    """A new buffer; at the program level tagged ``user`` (or ``tmp`` for dir none)."""
    if strides is None:
        shape = TensorShape.packed(dtype, tuple(sizes))
    else:
        shape = TensorShape(dtype, tuple(TensorDim(s, st) for s, st in zip(sizes, strides)))
    tag = "tmp" if dir_ is NONE else "user"
    return Refinement(dir_, "", name, tuple(Affine() for _ in sizes), shape,
                      tags=frozenset({tag}))


def view(dir_: RefDir, parent: Refinement, access: Sequence[AccessLike],
         sizes: Sequence[int] | None = None, agg: AggOp = AggOp.ASSIGN) -> Refinement:
    """A view of ``parent`` (same name), at ``access``, of ``sizes`` (default: parent's)."""
    sizes = parent.shape.sizes if sizes is None else sizes
    return Refinement(dir_, parent.into, parent.into, tuple(Affine.of(a) for a in access),
                      parent.shape.with_sizes(sizes), agg)


def elem(dir_: RefDir, parent: Refinement, access: Sequence[AccessLike],
         agg: AggOp = AggOp.ASSIGN) -> Refinement:
    """A one-element view, what a load or store uses."""
    return view(dir_, parent, access, [1] * parent.shape.rank, agg)


def block(name: str, idxs: Sequence[Index | tuple[str, int]], refs: Sequence[Refinement],
          stmts: Sequence[Statement], constraints: Sequence[Affine] = ()) -> Block:
    indexes = tuple(i if isinstance(i, Index) else Index(*i) for i in idxs)
    return Block(name, idxs=indexes, constraints=tuple(constraints), refs=tuple(refs),
                 stmts=tuple(stmts), tags=frozenset({"kernel"}))


def program(bufs: Sequence[Refinement], kernels: Sequence[Block]) -> Block:
    """A #program block over ``bufs`` whose main block runs ``kernels``."""
    main_dir = {IN: IN, OUT: OUT, INOUT: INOUT, NONE: INOUT}
    views = tuple(view(main_dir[r.dir], r, [0] * r.shape.rank) for r in bufs)
    main = Block("main", refs=views, stmts=tuple(kernels), tags=frozenset({"main"}))
    return Block("program", refs=tuple(bufs), stmts=(main,), tags=frozenset({"program"}))


def fill(name: str, buf: Refinement, value: float) -> Block:
    """A kernel storing ``value`` into every element of ``buf``."""
    names = [f"d{k}" for k in range(buf.shape.rank)]
    return block(name, list(zip(names, buf.shape.sizes)), [elem(OUT, buf, names)],
                 [Constant("$v", value, buf.dtype), Store("$v", buf.into)])


def multiply_accumulate(a: Refinement, b: Refinement, c: Refinement, dtype: DType,
                        out: str = "C") -> list[Statement]:
    return [Load(a.into, "$a"), Load(b.into, "$b"),
            Intrinsic("mul", ("$a", "$b"), ("$p",), dtype), Store("$p", out)]


def matmul(m: int, k: int, n: int, dtype: DType = F32) -> Block:
    a, b, c = alloc(IN, "A", (m, k), dtype), alloc(IN, "B", (k, n), dtype), \
        alloc(OUT, "C", (m, n), dtype)
    refs = [elem(IN, a, ["m", "k"]), elem(IN, b, ["k", "n"]), elem(OUT, c, ["m", "n"], AggOp.ADD)]
    mm = block("matmul", [("m", m), ("k", k), ("n", n)], refs,
               multiply_accumulate(refs[0], refs[1], refs[2], dtype))
    return program([a, b, c], [fill("zero", c, 0), mm])


def tiled_matmul(m: int, k: int, n: int, tile: int, style: str) -> Block:
    """``C = A @ B`` as outer tiles of an inner block; the last tiles overhang the buffers.

    ``tile_views``: the outer block views one tile of each buffer (reaching past the edge on
    the last tiles); the inner block uses local indexes plus passed-in copies of the outer
    ones for the constraints. ``global``: the outer block passes whole buffers; the inner
    block's indexes are passed in as global coordinates ``tile * outer + local``.
    """
    a, b, c = alloc(IN, "A", (m, k)), alloc(IN, "B", (k, n)), alloc(OUT, "C", (m, n))
    t = tile
    outer_idxs = [("io", -(-m // t)), ("ko", -(-k // t)), ("jo", -(-n // t))]
    if style == "tile_views":
        outer_refs = [view(IN, a, [lin(io=t), lin(ko=t)], (t, t)),
                      view(IN, b, [lin(ko=t), lin(jo=t)], (t, t)),
                      view(OUT, c, [lin(io=t), lin(jo=t)], (t, t), AggOp.ADD)]
        inner_idxs = [Index("i", t), Index("k", t), Index("j", t), Index("io", 1, lin(io=1)),
                      Index("ko", 1, lin(ko=1)), Index("jo", 1, lin(jo=1))]
        constraints = [lin(m - 1, io=-t, i=-1), lin(k - 1, ko=-t, k=-1),
                       lin(n - 1, jo=-t, j=-1)]
    else:
        outer_refs = [view(IN, a, [0, 0]), view(IN, b, [0, 0]),
                      view(OUT, c, [0, 0], agg=AggOp.ADD)]
        inner_idxs = [Index("i", t, lin(io=t)), Index("k", t, lin(ko=t)),
                      Index("j", t, lin(jo=t))]
        constraints = [lin(m - 1, i=-1), lin(k - 1, k=-1), lin(n - 1, j=-1)]
    ta, tb, tc = outer_refs
    inner_refs = [elem(IN, ta, ["i", "k"]), elem(IN, tb, ["k", "j"]),
                  elem(OUT, tc, ["i", "j"], AggOp.ADD)]
    inner = block("inner", inner_idxs, inner_refs,
                  multiply_accumulate(*inner_refs, F32), constraints)
    outer = block("outer", outer_idxs, outer_refs, [inner])
    return program([a, b, c], [fill("zero", c, 0), outer])


def conv2d(x: int, y: int, ci: int, co: int, style: str) -> Block:
    """3x3 'same' convolution ``O[x, y, co] = sum I[x+i-1, y+j-1, ci] * F[i, j, ci, co]``.

    Padding is done by constraints. ``flat``: one block over every index. ``window``: an
    outer block per output pixel views a 3x3 window of I at ``(x-1, y-1)`` (a negative
    offset on the border); the inner block's constraints keep its accesses in bounds.
    """
    i_, f_, o_ = alloc(IN, "I", (x, y, ci)), alloc(IN, "F", (3, 3, ci, co)), \
        alloc(OUT, "O", (x, y, co))
    if style == "flat":
        refs = [elem(IN, i_, [lin(-1, x=1, i=1), lin(-1, y=1, j=1), "ci"]),
                elem(IN, f_, ["i", "j", "ci", "co"]), elem(OUT, o_, ["x", "y", "co"], AggOp.ADD)]
        constraints = [lin(-1, x=1, i=1), lin(x, x=-1, i=-1), lin(-1, y=1, j=1),
                       lin(y, y=-1, j=-1)]
        kernel = block("conv", [("x", x), ("y", y), ("i", 3), ("j", 3), ("ci", ci), ("co", co)],
                       refs, multiply_accumulate(*refs, F32, out="O"), constraints)
    else:
        window = view(IN, i_, [lin(-1, x=1), lin(-1, y=1), 0], (3, 3, ci))
        whole_f = view(IN, f_, [0, 0, 0, 0])
        pixel = view(OUT, o_, ["x", "y", 0], (1, 1, co), AggOp.ADD)
        refs = [elem(IN, window, ["i", "j", "ci"]), elem(IN, whole_f, ["i", "j", "ci", "co"]),
                elem(OUT, pixel, [0, 0, "co"], AggOp.ADD)]
        constraints = [lin(-1, px=1, i=1), lin(x, px=-1, i=-1), lin(-1, py=1, j=1),
                       lin(y, py=-1, j=-1)]
        inner = block("taps", [("i", 3), ("j", 3), ("ci", ci), ("co", co),
                               Index("px", 1, lin(x=1)), Index("py", 1, lin(y=1))],
                      refs, multiply_accumulate(*refs, F32, out="O"), constraints)
        kernel = block("conv", [("x", x), ("y", y)], [window, whole_f, pixel], [inner])
    return program([i_, f_, o_], [fill("zero", o_, 0), kernel])


def conv2d_numpy(image: np.ndarray, filters: np.ndarray) -> np.ndarray:
    x, y, _ = image.shape
    padded = np.pad(image, ((1, 1), (1, 1), (0, 0)))
    out = np.zeros((x, y, filters.shape[3]), np.float64)
    for i in range(3):
        for j in range(3):
            out += np.einsum("xyc,cd->xyd", padded[i:i + x, j:j + y], filters[i, j])
    return out


def randf(rng: np.random.Generator, *shape: int, dtype: type = np.float32) -> np.ndarray:
    return rng.standard_normal(shape).astype(dtype)


# contractions -------------------------------------------------------------------------------

@pytest.mark.parametrize("m,k,n", [(7, 5, 9), (1, 1, 1), (13, 3, 2)])
def test_matmul_matches_numpy(rng: np.random.Generator, m: int, k: int, n: int) -> None:
    a, b = randf(rng, m, k), randf(rng, k, n)
    out = interpret(matmul(m, k, n), {"A": a, "B": b})
    assert list(out) == ["C"]
    assert out["C"].dtype == np.float32 and out["C"].shape == (m, n)
    np.testing.assert_allclose(out["C"], a @ b, rtol=1e-5, atol=1e-5)


def test_integer_matmul_is_exact(rng: np.random.Generator) -> None:
    a = rng.integers(-50, 50, (6, 11)).astype(np.int32)
    b = rng.integers(-50, 50, (11, 4)).astype(np.int32)
    out = interpret(matmul(6, 11, 4, I32), {"A": a, "B": b})
    np.testing.assert_array_equal(out["C"], a @ b)


@pytest.mark.parametrize("style", ["tile_views", "global"])
def test_tiled_matmul_with_uneven_tiles(rng: np.random.Generator, style: str) -> None:
    a, b = randf(rng, 13, 7), randf(rng, 7, 10)
    out = interpret(tiled_matmul(13, 7, 10, 4, style), {"A": a, "B": b})
    np.testing.assert_allclose(out["C"], a @ b, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("style", ["flat", "window"])
def test_conv2d_padding_by_constraints(rng: np.random.Generator, style: str) -> None:
    image, filters = randf(rng, 6, 5, 3), randf(rng, 3, 3, 3, 4)
    out = interpret(conv2d(6, 5, 3, 4, style), {"I": image, "F": filters})
    np.testing.assert_allclose(out["O"], conv2d_numpy(image, filters), rtol=1e-4, atol=1e-4)


def reduce_rows(agg: AggOp, init: float, dtype: DType = F32) -> Block:
    a, o = alloc(IN, "A", (5, 7), dtype), alloc(OUT, "O", (5,), dtype)
    kernel = block("reduce", [("r", 5), ("c", 7)],
                   [elem(IN, a, ["r", "c"]), elem(OUT, o, ["r"], agg)],
                   [Load("A", "$a"), Store("$a", "O")])
    return program([a, o], [fill("init", o, init), kernel])


@pytest.mark.parametrize("agg,init,expected", [
    (AggOp.MAX, -np.inf, lambda a: a.max(axis=1)),
    (AggOp.MIN, np.inf, lambda a: a.min(axis=1)),
    (AggOp.MUL, 1.0, lambda a: a.prod(axis=1)),
    (AggOp.ADD, 0.0, lambda a: a.sum(axis=1)),
])
def test_aggregations_combine_with_memory(rng: np.random.Generator, agg: AggOp, init: float,
                                          expected: Callable[[np.ndarray], np.ndarray]) -> None:
    a = randf(rng, 5, 7)
    out = interpret(reduce_rows(agg, init), {"A": a})
    np.testing.assert_allclose(out["O"], expected(a), rtol=1e-5)


def test_max_aggregation_on_integers(rng: np.random.Generator) -> None:
    a = rng.integers(-1000, 1000, (5, 7)).astype(np.int32)
    out = interpret(reduce_rows(AggOp.MAX, -(2**31), I32), {"A": a})
    np.testing.assert_array_equal(out["O"], a.max(axis=1))


def test_reduction_into_a_rank0_buffer(rng: np.random.Generator) -> None:
    a, total = alloc(IN, "A", (3, 4)), alloc(OUT, "S", ())
    kernel = block("sum", [("i", 3), ("j", 4)],
                   [elem(IN, a, ["i", "j"]), elem(OUT, total, [], AggOp.ADD)],
                   [Load("A", "$a"), Store("$a", "S")])
    values = randf(rng, 3, 4)
    out = interpret(program([a, total], [fill("zero", total, 0), kernel]), {"A": values})
    assert out["S"].shape == ()
    np.testing.assert_allclose(out["S"], values.sum(), rtol=1e-5)


# intrinsics ---------------------------------------------------------------------------------

def run_intrinsic(name: str, dtype: DType, *inputs: np.ndarray) -> np.ndarray:
    """``Y[e] = name(X0[e], X1[e], ...)`` over one block, the result in ``dtype``."""
    n = len(inputs[0])
    ins = [alloc(IN, f"X{k}", (n,), to_dtype(x.dtype)) for k, x in enumerate(inputs)]
    out = alloc(OUT, "Y", (n,), dtype)
    stmts: list[Statement] = [Load(r.into, f"$x{k}") for k, r in enumerate(ins)]
    stmts += [Intrinsic(name, tuple(f"$x{k}" for k in range(len(ins))), ("$y",), dtype),
              Store("$y", "Y")]
    kernel = block("eltwise", [("e", n)], [elem(IN, r, ["e"]) for r in ins] +
                   [elem(OUT, out, ["e"])], stmts)
    arrays = {f"X{k}": x for k, x in enumerate(inputs)}
    return interpret(program([*ins, out], [kernel]), arrays)["Y"]


def f32(*v: float) -> np.ndarray:
    return np.array(v, np.float32)


def i32(*v: int) -> np.ndarray:
    return np.array(v, np.int32)


def b8(*v: int) -> np.ndarray:
    return np.array(v, bool)


FA = f32(-2.5, -1.0, -0.5, 0.0, 0.75, 3.0)
FB = f32(1.5, -2.0, 0.25, 2.0, -0.5, 4.0)
POS = f32(0.25, 1.0, 2.0, 9.0, 0.5, 3.0)
UNIT = f32(-1.0, -0.5, 0.0, 0.25, 0.5, 1.0)

# (name, result dtype, inputs, expected): the expected values follow C, computed by hand or
# by numpy in float32 where C and numpy agree.
INTRINSIC_CASES: list[tuple[str, DType, tuple[np.ndarray, ...], np.ndarray]] = [
    # floats stay float32
    ("assign", F32, (FA,), FA),
    ("neg", F32, (FA,), -FA),
    ("abs", F32, (FA,), np.abs(FA)),
    ("exp", F32, (FA,), np.exp(FA)),
    ("log", F32, (POS,), np.log(POS)),
    ("sqrt", F32, (POS,), np.sqrt(POS)),
    ("tanh", F32, (FA,), np.tanh(FA)),
    ("sin", F32, (FA,), np.sin(FA)),
    ("cos", F32, (FA,), np.cos(FA)),
    ("tan", F32, (FA,), np.tan(FA)),
    ("asin", F32, (UNIT,), np.arcsin(UNIT)),
    ("acos", F32, (UNIT,), np.arccos(UNIT)),
    ("atan", F32, (FA,), np.arctan(FA)),
    ("sinh", F32, (FA,), np.sinh(FA)),
    ("cosh", F32, (FA,), np.cosh(FA)),
    ("asinh", F32, (FA,), np.arcsinh(FA)),
    ("acosh", F32, (POS + 1,), np.arccosh(POS + 1)),
    ("atanh", F32, (UNIT / 2,), np.arctanh(UNIT / 2)),
    # C's round: halfway cases away from zero (numpy's round goes to even)
    ("round", F32, (f32(-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -0.4),),
     f32(-3, -2, -1, 1, 2, 3, 0, -0.0)),
    ("floor", F32, (FA,), f32(-3, -1, -1, 0, 0, 3)),
    ("ceil", F32, (FA,), f32(-2, -1, -0.0, 0, 1, 3)),
    ("add", F32, (FA, FB), FA + FB),
    ("sub", F32, (FA, FB), FA - FB),
    ("mul", F32, (FA, FB), FA * FB),
    ("div", F32, (FA, FB), FA / FB),
    ("mod", F32, (FA, FB), f32(-1.0, -1.0, -0.0, 0.0, 0.25, 3.0)),
    ("pow", F32, (POS, FB), np.power(POS, FB)),
    ("min", F32, (FA, FB), np.minimum(FA, FB)),
    ("max", F32, (FA, FB), np.maximum(FA, FB)),
    ("pow", F64, (POS.astype(np.float64), FB.astype(np.float64)),
     np.power(POS.astype(np.float64), FB.astype(np.float64))),
    # inputs are converted to the intrinsic's dtype first
    ("add", F32, (i32(1, 2), np.array([0.5, 0.25])), f32(1.5, 2.25)),
    ("add", I32, (f32(1.9, -1.9), f32(0.9, -0.9)), i32(1, -1)),
    # integers: C division and remainder (by 0 gives 0, as the C back end)
    ("div", I32, (i32(7, -7, 7, -7, 0, 5, -128, 100), i32(2, 2, -2, -2, 3, 0, 3, 7)),
     i32(3, -3, -3, 3, 0, 0, -42, 14)),
    ("mod", I32, (i32(7, -7, 7, -7, 0, 5, -128, 100), i32(2, 2, -2, -2, 3, 0, 3, 7)),
     i32(1, -1, 1, -1, 0, 0, -2, 2)),
    ("pow", I32, (i32(2, 3, -2, 2, 1, -1, -1, 5), i32(10, 0, 3, -1, -5, -3, -2, 2)),
     i32(1024, 1, -8, 0, 1, -1, 1, 25)),
    ("neg", I32, (i32(3, -4, 0),), i32(-3, 4, 0)),
    ("abs", I32, (i32(-5, 5, 0),), i32(5, 5, 0)),
    ("min", I32, (i32(1, -2), i32(0, 3)), i32(0, -2)),
    ("max", I32, (i32(1, -2), i32(0, 3)), i32(1, 3)),
    ("floor", I32, (i32(-3, 4),), i32(-3, 4)),
    ("ceil", I32, (i32(-3, 4),), i32(-3, 4)),
    ("exp", I32, (i32(0, 1, 2),), i32(1, 2, 7)),
    ("sqrt", I32, (i32(10, 16),), i32(3, 4)),
    ("log", I32, (i32(1, 3),), i32(0, 1)),
    ("tanh", I32, (i32(0, 5),), i32(0, 0)),
    ("sin", I32, (i32(0, 2),), i32(0, 0)),
    ("cos", I32, (i32(0, 1),), i32(1, 0)),
    ("round", I32, (i32(-3, 4),), i32(-3, 4)),
    ("bit_and", I32, (i32(12, -1), i32(10, 7)), i32(8, 7)),
    ("bit_or", I32, (i32(12, -1), i32(10, 7)), i32(14, -1)),
    ("bit_xor", I32, (i32(12, -1), i32(10, 7)), i32(6, -8)),
    ("bit_not", I32, (i32(0, -1, 5),), i32(-1, 0, -6)),
    ("shl", I32, (i32(1, -3, 5), i32(3, 1, 0)), i32(8, -6, 5)),
    ("shr", I32, (i32(-8, 8, -1), i32(1, 2, 3)), i32(-4, 2, -1)),  # arithmetic shift
    ("add", I8, (np.array([100, -100], np.int8),) * 2, np.array([-56, 56], np.int8)),
    ("sub", U8, (np.array([0, 5], np.uint8), np.array([1, 10], np.uint8)),
     np.array([255, 251], np.uint8)),
    # comparisons: in the promoted type (int32 vs float32 -> float64), bool result
    ("cmp_lt", BOOL, (i32(1, 2, 3), f32(1.5, 2.0, 2.5)), b8(1, 0, 0)),
    ("cmp_le", BOOL, (i32(1, 2, 3), f32(1.5, 2.0, 2.5)), b8(1, 1, 0)),
    ("cmp_gt", BOOL, (i32(1, 2, 3), f32(1.5, 2.0, 2.5)), b8(0, 0, 1)),
    ("cmp_ge", BOOL, (i32(1, 2, 3), f32(1.5, 2.0, 2.5)), b8(0, 1, 1)),
    ("cmp_eq", BOOL, (i32(16777217, 2), f32(16777216.0, 2.0)), b8(0, 1)),
    ("cmp_ne", BOOL, (i32(16777217, 2), f32(16777216.0, 2.0)), b8(1, 0)),
    # logical operators take the truth value of their inputs
    ("and", BOOL, (f32(0, 0.5, -1, 0), i32(1, 1, 0, 0)), b8(0, 1, 0, 0)),
    ("or", BOOL, (f32(0, 0.5, -1, 0), i32(1, 1, 0, 0)), b8(1, 1, 1, 0)),
    ("not", BOOL, (f32(0, 0.5, np.nan),), b8(1, 0, 0)),
    ("cond", F32, (i32(0, 3, -1), f32(1, 2, 3), f32(-1, -2, -3)), f32(-1, 2, 3)),
    # casts: float -> int truncates, to bool is "non-zero", narrowing wraps
    ("cast", I32, (f32(-2.7, -0.5, 0.5, 2.7, 100.9),), i32(-2, 0, 0, 2, 100)),
    ("cast", I8, (i32(200, -200, 127, 128),), np.array([-56, 56, 127, -128], np.int8)),
    ("cast", BOOL, (f32(0.0, -0.0, 0.5, np.nan),), b8(0, 0, 1, 1)),
    ("cast", F32, (i32(-3, 16777217),), f32(-3, 16777216)),
    ("cast", I64, (b8(1, 0),), np.array([1, 0], np.int64)),
    # arithmetic on bool is done on ints and converted back, as in C
    ("add", BOOL, (b8(1, 1, 0, 0), b8(1, 0, 1, 0)), b8(1, 1, 1, 0)),
    ("sub", BOOL, (b8(1, 1, 0, 0), b8(1, 0, 1, 0)), b8(0, 1, 1, 0)),
    ("mul", BOOL, (b8(1, 1, 0, 0), b8(1, 0, 1, 0)), b8(1, 0, 0, 0)),
    ("neg", BOOL, (b8(1, 0),), b8(1, 0)),
    ("bit_not", BOOL, (b8(1, 0),), b8(1, 1)),
]


@pytest.mark.parametrize("name,dtype,inputs,expected", INTRINSIC_CASES,
                         ids=[f"{c[0]}-{c[1].value}-{k}" for k, c in enumerate(INTRINSIC_CASES)])
def test_intrinsic(name: str, dtype: DType, inputs: tuple[np.ndarray, ...],
                   expected: np.ndarray) -> None:
    result = run_intrinsic(name, dtype, *inputs)
    assert result.dtype == dtype.np
    np.testing.assert_array_equal(result, expected.astype(dtype.np))


def test_every_intrinsic_is_tested() -> None:
    assert {case[0] for case in INTRINSIC_CASES} == set(INTRINSICS)


def test_ieee_arithmetic_gives_inf_and_nan_without_warnings() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        div = run_intrinsic("div", F32, f32(1, -1, 0), f32(0, 0, 0))
        log = run_intrinsic("log", F32, f32(0, -1))
        exp = run_intrinsic("exp", F32, f32(1000))
        run_intrinsic("cast", I32, f32(np.nan, np.inf))  # undefined value, but no warning
    np.testing.assert_array_equal(div, f32(np.inf, -np.inf, np.nan))
    np.testing.assert_array_equal(log, f32(-np.inf, np.nan))
    np.testing.assert_array_equal(exp, f32(np.inf))


def test_bitwise_intrinsic_on_floats_is_an_error() -> None:
    with pytest.raises(InterpreterError, match="intrinsic 'bit_and' is not defined on fp32"):
        run_intrinsic("bit_and", F32, f32(1), f32(2))


def test_load_index_constant_and_store_conversion() -> None:
    o, c = alloc(OUT, "O", (3, 4), I32), alloc(OUT, "C", (2,), I32)
    iota = block("iota", [("i", 3), ("j", 4)], [elem(OUT, o, ["i", "j"])],
                 [LoadIndex(lin(0, i=10, j=1), "$k"), Store("$k", "O")])
    consts = block("consts", [("e", 2)], [elem(OUT, c, ["e"])],
                   [Constant("$c", -2.7, F64), Store("$c", "C")])
    out = interpret(program([o, c], [iota, consts]), {})
    np.testing.assert_array_equal(out["O"], 10 * np.arange(3)[:, None] + np.arange(4))
    np.testing.assert_array_equal(out["C"], i32(-2, -2))  # a store converts as C does


# allocations and layouts --------------------------------------------------------------------

def reverse_rows_through_private_buffer(rows: int, width: int) -> Block:
    """``O[r, c] = 2 * A[r, width-1-c]`` through a per-row temporary ``T``.

    If ``T`` were shared by the rows, the second nested block would see another row's data.
    """
    a, o = alloc(IN, "A", (rows, width)), alloc(OUT, "O", (rows, width))
    row_a = view(IN, a, ["r", 0], (1, width))
    row_o = view(OUT, o, ["r", 0], (1, width))
    tmp = Refinement(NONE, "", "T", (Affine(),), TensorShape.packed(F32, (width,)))
    double = block("double", [("c", width)], [elem(IN, row_a, [0, "c"]), elem(OUT, tmp, ["c"])],
                   [Load("A", "$a"), Constant("$two", 2.0, F32),
                    Intrinsic("mul", ("$a", "$two"), ("$t", ), F32), Store("$t", "T")])
    flip = block("flip", [("c", width)],
                 [elem(IN, tmp, [lin(width - 1, c=-1)]), elem(OUT, row_o, [0, "c"])],
                 [Load("T", "$t"), Store("$t", "O")])
    rows_block = block("rows", [("r", rows)], [row_a, row_o, tmp], [double, flip])
    return program([a, o], [rows_block])


def test_allocation_is_private_to_each_point(rng: np.random.Generator) -> None:
    a = randf(rng, 4, 5)
    out = interpret(reverse_rows_through_private_buffer(4, 5), {"A": a})
    np.testing.assert_array_equal(out["O"], 2 * a[:, ::-1])


def test_scratch_scalar_buffer_written_then_read_in_each_point(rng: np.random.Generator) -> None:
    a, o = alloc(IN, "A", (9,)), alloc(OUT, "O", (9,))
    scratch = Refinement(NONE, "", "S", (Affine(),), TensorShape.packed(F32, (1,)))
    kernel = block("k", [("e", 9)], [elem(IN, a, ["e"]), elem(OUT, o, ["e"]), scratch],
                   [Load("A", "$a"), Store("$a", "S"), Load("S", "$s"), Store("$s", "O")])
    values = randf(rng, 9)
    np.testing.assert_array_equal(interpret(program([a, o], [kernel]), {"A": values})["O"],
                                  values)


def test_new_memory_is_undefined_until_written(rng: np.random.Generator) -> None:
    """An output or temporary read before it is stored gives NaN (floats) or a fixed byte
    pattern (integers), never zeros: a dropped initialisation shows as a wrong result."""
    for dtype, check in ((F32, np.isnan), (I32, lambda v: v == np.full(4, 0x5A5A5A5A, np.int32) * 2
                                                    + np.arange(4, dtype=np.int32))):
        a, t, o = alloc(IN, "A", (4,), dtype), alloc(NONE, "T", (4,), dtype), \
            alloc(OUT, "O", (4,), dtype)
        acc = elem(OUT, o, ["e"], AggOp.ADD)
        kernel = block("k", [("e", 4)], [elem(IN, a, ["e"]), elem(IN, t, ["e"]), acc],
                       [Load("T", "$t"), Load("A", "$a"), Store("$t", "O"), Store("$a", "O")])
        values = np.arange(4).astype(dtype.np)  # O = (undefined) + T (undefined) + A
        got = interpret(program([a, o, t], [kernel]), {"A": values})["O"]
        assert check(got).all(), got


def test_program_temporary_between_kernels(rng: np.random.Generator) -> None:
    a, t, o = alloc(IN, "A", (6,)), alloc(NONE, "T", (6,)), alloc(OUT, "O", (6,))
    first = block("first", [("e", 6)], [elem(IN, a, ["e"]), elem(OUT, t, ["e"])],
                  [Load("A", "$a"), Intrinsic("exp", ("$a",), ("$x",), F32), Store("$x", "T")])
    second = block("second", [("e", 6)], [elem(IN, t, [lin(5, e=-1)]), elem(OUT, o, ["e"])],
                   [Load("T", "$t"), Store("$t", "O")])
    values = randf(rng, 6)
    out = interpret(program([a, o, t], [first, second]), {"A": values})
    assert list(out) == ["O"]
    np.testing.assert_array_equal(out["O"], np.exp(values)[::-1])


def test_strides_define_the_layout(rng: np.random.Generator) -> None:
    """Column-major and reversed buffers: element c lives at origin + sum(c_d * stride_d)."""
    a = alloc(IN, "A", (3, 4), strides=(1, 3))      # column-major input
    o = alloc(OUT, "O", (3, 4))                      # row-major
    q = alloc(OUT, "Q", (3, 4), strides=(1, 3))      # column-major output
    p = alloc(OUT, "P", (4,), strides=(-1,))         # reversed: element j at address 3 - j
    row_a, row_o, row_q = (view(d, r, ["r", 0], (1, 4)) for d, r in ((IN, a), (OUT, o), (OUT, q)))
    all_p = view(OUT, p, [0], agg=AggOp.ADD)
    inner = block("cols", [("j", 4)],
                  [elem(IN, row_a, [0, "j"]), elem(OUT, row_o, [0, "j"]),
                   elem(OUT, row_q, [0, "j"]), elem(OUT, all_p, ["j"], AggOp.ADD)],
                  [Load("A", "$a"), Constant("$one", 1.0, F32),
                   Intrinsic("add", ("$a", "$one"), ("$b",), F32),
                   Store("$b", "O"), Store("$b", "Q"), Store("$a", "P")])
    rows = block("rows", [("r", 3)], [row_a, row_o, row_q, all_p], [inner])
    values = randf(rng, 3, 4)
    out = interpret(program([a, o, q, p], [fill("zero", p, 0), rows]), {"A": values})
    np.testing.assert_array_equal(out["O"], values + 1)
    np.testing.assert_array_equal(out["Q"], values + 1)
    np.testing.assert_allclose(out["P"], values.sum(axis=0), rtol=1e-6)


def test_views_use_the_parent_strides(rng: np.random.Generator) -> None:
    """A transpose through a column-major buffer: only consistent strides give A.T."""
    a, o = alloc(IN, "A", (4, 3), strides=(1, 4)), alloc(OUT, "O", (3, 4))
    col = view(IN, a, [0, "c"], (4, 1))
    inner = block("rows", [("r", 4), Index("c", 1, lin(c=1))],
                  [elem(IN, col, ["r", 0]), elem(OUT, o, ["c", "r"])],
                  [Load("A", "$a"), Store("$a", "O")])
    outer = block("cols", [("c", 3)], [col, view(OUT, o, [0, 0])], [inner])
    values = randf(rng, 4, 3)
    np.testing.assert_array_equal(interpret(program([a, o], [outer]), {"A": values})["O"],
                                  values.T)


# specials -----------------------------------------------------------------------------------

def special_program(name: str, ins: list[Refinement], out: Refinement) -> Block:
    refs = [view(IN, r, [0] * r.shape.rank) for r in ins] + [view(OUT, out, [0] * out.shape.rank)]
    kernel = block(name, [], refs, [Special(name, tuple(r.into for r in ins), (out.into,))])
    return program([*ins, out], [kernel])


def test_reshape_copies_in_row_major_order(rng: np.random.Generator) -> None:
    a, b = alloc(IN, "A", (2, 6), strides=(1, 2)), alloc(OUT, "B", (3, 4), F64)
    values = randf(rng, 2, 6)
    out = interpret(special_program("reshape", [a], b), {"A": values})
    np.testing.assert_array_equal(out["B"], values.reshape(3, 4).astype(np.float64))


def test_reshape_in_a_block_of_several_points(rng: np.random.Generator) -> None:
    a, b = alloc(IN, "A", (2, 6)), alloc(OUT, "B", (2, 2, 3))
    kernel = block("rows", [("r", 2)], [view(IN, a, ["r", 0], (1, 6)),
                                        view(OUT, b, ["r", 0, 0], (1, 2, 3))],
                   [Special("reshape", ("A",), ("B",))])
    values = randf(rng, 2, 6)
    out = interpret(program([a, b], [kernel]), {"A": values})
    np.testing.assert_array_equal(out["B"], values.reshape(2, 2, 3))


def test_gather_clamps_indexes(rng: np.random.Generator) -> None:
    a, i, o = alloc(IN, "A", (5, 3)), alloc(IN, "I", (2, 3), I32), alloc(OUT, "O", (2, 3, 3))
    values, rows = randf(rng, 5, 3), np.array([[0, 4, 7], [-2, 1, 1]], np.int32)
    out = interpret(special_program("gather", [a, i], o), {"A": values, "I": rows})
    np.testing.assert_array_equal(out["O"], values[np.clip(rows, 0, 4)])


def test_scatter_adds_and_skips_out_of_range_rows(rng: np.random.Generator) -> None:
    a, i, o = alloc(IN, "A", (5, 3)), alloc(IN, "I", (5,), I32), alloc(OUT, "O", (4, 3))
    values, rows = randf(rng, 5, 3), i32(1, 3, 1, -1, 9)
    out = interpret(special_program("scatter", [a, i], o), {"A": values, "I": rows})
    expected = np.zeros((4, 3), np.float32)
    expected[1] = values[0] + values[2]
    expected[3] = values[1]
    np.testing.assert_allclose(out["O"], expected, rtol=1e-6)


def test_special_shape_mismatch_is_an_error() -> None:
    a, b = alloc(IN, "A", (2, 6)), alloc(OUT, "B", (5,))
    with pytest.raises(InterpreterError, match=r"reshape of \(2, 6\) \(12 elements\)"):
        interpret(special_program("reshape", [a], b), {"A": np.zeros((2, 6), np.float32)})


# chunked execution --------------------------------------------------------------------------

def test_chunked_execution_gives_the_same_results(rng: np.random.Generator,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = randf(rng, 13, 7), randf(rng, 7, 10)
    image, filters = randf(rng, 5, 4, 2), randf(rng, 3, 3, 2, 3)
    rows = randf(rng, 4, 5)
    monkeypatch.setattr(interp_module, "MAX_BATCH_POINTS", 3)
    tiled = interpret(tiled_matmul(13, 7, 10, 4, "tile_views"), {"A": a, "B": b})
    np.testing.assert_allclose(tiled["C"], a @ b, rtol=1e-5, atol=1e-5)
    conv = interpret(conv2d(5, 4, 2, 3, "window"), {"I": image, "F": filters})
    np.testing.assert_allclose(conv["O"], conv2d_numpy(image, filters), rtol=1e-4, atol=1e-4)
    private = interpret(reverse_rows_through_private_buffer(4, 5), {"A": rows})
    np.testing.assert_array_equal(private["O"], 2 * rows[:, ::-1])


# binding ------------------------------------------------------------------------------------

@pytest.fixture
def matmul_inputs() -> dict[str, np.ndarray]:
    return {"A": np.ones((7, 5), np.float32), "B": np.ones((5, 9), np.float32)}


@pytest.mark.parametrize("change,message", [
    (lambda d: d.pop("B"), r"missing input 'B' \(expected inputs: A, B\)"),
    (lambda d: d.update(B=np.ones((9, 5), np.float32)),
     r"input 'B' has shape \(9, 5\), expected \(5, 9\)"),
    (lambda d: d.update(A=np.ones((7, 5))), "input 'A' has dtype float64, expected float32"),
    (lambda d: d.update(Z=np.ones(3)), r"unexpected input 'Z' \(expected inputs: A, B\)"),
    (lambda d: d.update(C=np.ones((7, 9), np.float32)),
     "unexpected input 'C'.*outputs are returned, not passed"),
])
def test_binding_errors(matmul_inputs: dict[str, np.ndarray],
                        change: Callable[[dict[str, np.ndarray]], object], message: str) -> None:
    change(matmul_inputs)
    with pytest.raises(InterpreterError, match=message) as info:
        interpret(matmul(7, 5, 9), matmul_inputs)
    assert info.value.path == "program"


def test_not_a_block_or_not_a_mapping() -> None:
    with pytest.raises(InterpreterError, match="expects a Block, got str"):
        interpret("block", {})  # type: ignore[arg-type]
    with pytest.raises(InterpreterError, match="must be a mapping"):
        interpret(matmul(1, 1, 1), [np.ones((1, 1), np.float32)])  # type: ignore[arg-type]


def test_inputs_are_not_modified_and_outputs_are_fresh() -> None:
    a, b = alloc(IN, "A", (3,)), alloc(OUT, "B", (3,))
    kernel = block("k", [("e", 3)], [elem(INOUT, a, ["e"]), elem(OUT, b, ["e"])],
                   [Load("A", "$a"), Constant("$z", 0.0, F32), Store("$z", "A"), Store("$a", "B")])
    values = f32(1, 2, 3)
    main = Block("main", refs=(view(INOUT, a, [0]), view(OUT, b, [0])), stmts=(kernel,))
    prog = Block("program", refs=(a, b), stmts=(main,), tags=frozenset({"program"}))
    out = interpret(prog, {"A": values})
    np.testing.assert_array_equal(values, f32(1, 2, 3))  # the program zeroed its own copy
    np.testing.assert_array_equal(out["B"], f32(1, 2, 3))
    assert out["B"].flags.writeable and not np.shares_memory(out["B"], values)


def test_non_program_root_binds_its_allocations_by_direction() -> None:
    a, b, c = alloc(IN, "A", (3,)), alloc(INOUT, "B", (3,)), alloc(OUT, "C", (3,))
    kernel = block("k", [("e", 3)],
                   [elem(IN, a, ["e"]), elem(INOUT, b, ["e"]), elem(OUT, c, ["e"])],
                   [Load("A", "$a"), Load("B", "$b"), Intrinsic("add", ("$a", "$b"), ("$s",), F32),
                    Store("$s", "B"), Store("$b", "C")])
    root = Block("root", refs=(a, b, c), stmts=(kernel,))
    old_b = f32(10, 20, 30)
    out = interpret(root, {"A": f32(1, 2, 3), "B": old_b})
    assert list(out) == ["B", "C"]
    np.testing.assert_array_equal(out["B"], f32(11, 22, 33))
    np.testing.assert_array_equal(out["C"], f32(10, 20, 30))
    np.testing.assert_array_equal(old_b, f32(10, 20, 30))


# bounds and malformed IR --------------------------------------------------------------------

def shifted_copy(shift: int, constraints: Sequence[Affine] = ()) -> Block:
    a, o = alloc(IN, "A", (4,)), alloc(OUT, "O", (4,))
    kernel = block("shift", [("i", 4)], [elem(IN, a, [lin(shift, i=1)]), elem(OUT, o, ["i"])],
                   [Load("A", "$a"), Store("$a", "O")], constraints)
    return program([a, o], [fill("zero", o, 0), kernel])


@pytest.mark.parametrize("shift,element", [(1, r"\(4,\)"), (-1, r"\(-1,\)")])
def test_access_outside_the_buffer_is_an_error(shift: int, element: str) -> None:
    message = (rf"program/main/shift: load into '\$a': at point \(i=\d\), 'A' accesses "
               rf"element {element} of buffer 'A' \(declared in program, shape \(4,\)\), "
               "outside the buffer")
    with pytest.raises(InterpreterError, match=message) as info:
        interpret(shifted_copy(shift), {"A": f32(1, 2, 3, 4)})
    assert info.value.path == "program/main/shift"


def test_constraints_keep_out_of_bounds_points_from_running() -> None:
    out = interpret(shifted_copy(1, [lin(2, i=-1)]), {"A": f32(1, 2, 3, 4)})
    np.testing.assert_array_equal(out["O"], f32(2, 3, 4, 0))
    nothing = interpret(shifted_copy(100, [Affine((), -1)]), {"A": f32(1, 2, 3, 4)})
    np.testing.assert_array_equal(nothing["O"], f32(0, 0, 0, 0))


def test_access_outside_an_enclosing_view_is_an_error() -> None:
    a, o = alloc(IN, "A", (4,)), alloc(OUT, "O", (4,))
    pair = view(IN, a, [lin(o=2)], (2,))
    inner = block("inner", [("i", 3)], [elem(IN, pair, ["i"]), elem(OUT, o, [0])],
                  [Load("A", "$a"), Store("$a", "O")])
    outer = block("outer", [("o", 2)], [pair, view(OUT, o, [0])], [inner])
    with pytest.raises(InterpreterError, match=r"program/main/outer/inner: .* element \(2,\) "
                       r"of buffer 'A' \(.*\), outside an enclosing view"):
        interpret(program([a, o], [outer]), {"A": f32(1, 2, 3, 4)})


def test_special_outside_the_buffer_is_an_error() -> None:
    a, b = alloc(IN, "A", (2, 6)), alloc(OUT, "B", (12,))
    kernel = block("k", [], [view(IN, a, [1, 0]), view(OUT, b, [0])],
                   [Special("reshape", ("A",), ("B",))])
    with pytest.raises(InterpreterError, match=r"special 'reshape': at point \(\), 'A' accesses "
                       r"element \(2, 0\)"):
        interpret(program([a, b], [kernel]), {"A": np.zeros((2, 6), np.float32)})


def kernel_with(stmts: Sequence[Statement], refs: Sequence[Refinement] | None = None) -> Block:
    a, o = alloc(IN, "A", (2,)), alloc(OUT, "O", (2,))
    if refs is None:
        refs = [elem(IN, a, ["i"]), elem(OUT, o, ["i"])]
    return program([a, o], [block("bad", [("i", 2)], refs, stmts)])


_A, _O = alloc(IN, "A", (2,)), alloc(OUT, "O", (2,))


@pytest.mark.parametrize("prog,message", [
    (kernel_with([Store("$x", "O")]), "store of '\\$x' uses undefined scalar '\\$x'"),
    (kernel_with([Load("A", "$a"), Load("A", "$a")]), "assigns scalar '\\$a' a second time"),
    (kernel_with([Load("Q", "$a")]), "unknown refinement 'Q'"),
    (kernel_with([Load("A", "$a"), Intrinsic("frob", ("$a",), ("$b",), F32)]),
     "unknown intrinsic 'frob'"),
    (kernel_with([Load("A", "$a"), Intrinsic("add", ("$a",), ("$b",), F32)]),
     "intrinsic 'add' takes 2 inputs and 1 output, got 1 and 1"),
    (kernel_with([Load("O", "$a")]), "reads 'O', whose dir is out"),
    (kernel_with([Load("A", "$a"), Store("$a", "A")]), "writes 'A', whose dir is in"),
    (kernel_with([Special("sort", ("A",), ("O",))]), "unknown special 'sort'"),
    (kernel_with([], [elem(IN, _A, ["q"])]), "access of refinement 'A' uses unknown index 'q'"),
    (kernel_with([], [view(IN, Refinement(IN, "", "Z", (Affine(),),
                                          TensorShape.packed(F32, (2,))), [0])]),
     "refinement 'Z' views 'Z', which the parent block does not have"),
    (kernel_with([], [Refinement(IN, "A", "A", (Affine(),),
                                 TensorShape(F32, (TensorDim(2, 2),)))]),
     "view 'A' of 'A' has stride 2 in dimension 0, its parent 1"),
    (kernel_with([], [Refinement(IN, "A", "A", (Affine(),), TensorShape.packed(F64, (1,)))]),
     "view 'A' of 'A' has dtype fp64, its parent fp32"),
    (kernel_with([Constant("$c", "x", F32)]), "non-numeric value 'x'"),  # type: ignore[arg-type]
])
def test_malformed_ir_is_reported_with_the_block_path(prog: Block, message: str) -> None:
    with pytest.raises(InterpreterError, match=message) as info:
        interpret(prog, {"A": f32(1, 2)})
    assert info.value.path == "program/main/bad"


def test_root_refinement_must_be_an_allocation() -> None:
    root = Block("root", refs=(view(IN, _A, [0]),))
    with pytest.raises(InterpreterError, match="root refinement 'A' is a view of 'A'"):
        interpret(root, {})


def test_unknown_index_in_a_passed_in_index_or_constraint() -> None:
    bad_idx = block("bad", [Index("i", 2, lin(j=1))], [], [])
    with pytest.raises(InterpreterError, match="passed-in index 'i' uses unknown index 'j'"):
        interpret(program([_A, _O], [bad_idx]), {"A": f32(1, 2)})
    bad_constraint = block("bad", [("i", 2)], [], [], [lin(k=1)])
    with pytest.raises(InterpreterError, match="constraint '.*' uses unknown index 'k'"):
        interpret(program([_A, _O], [bad_constraint]), {"A": f32(1, 2)})
