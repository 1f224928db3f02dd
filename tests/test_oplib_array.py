"""stripe.ops array ops against numpy: every op on odd shapes in at least two dtypes through the
interpreter, a representative function of many ops through every shipped config, and the
errors for wrong arguments."""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from conftest import runnable_configs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ops_catalog import random_array

import stripe
from stripe import ops
from stripe.errors import ArgumentError, ArgumentTypeError


def run(fn: ops.Function, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Interpret ``fn``; every output has the shape and dtype its Tensor promised."""
    outs = stripe.interpret(stripe.lower(fn), {k: arrays[k] for k in fn.inputs})
    for name, (shape, dtype) in fn.tile_outputs.items():
        assert outs[name].shape == shape, (name, outs[name].shape, shape)
        assert outs[name].dtype == np.dtype(dtype), (name, outs[name].dtype, dtype)
    return outs


# numpy references that numpy does not have ------------------------------------------------

def np_cumulative(a: np.ndarray, axis: int | None, *, prod: bool = False,
                  exclusive: bool = False, reverse: bool = False) -> np.ndarray:
    if axis is None:
        a, axis = a.reshape(-1), 0
    if a.dtype == bool:
        a = a.astype(np.int32)
    f = np.cumprod if prod else np.cumsum
    if reverse:
        a = np.flip(a, axis)
    out = f(a, axis=axis, dtype=a.dtype)
    if exclusive:
        out = np.roll(out, 1, axis)
        idx = [slice(None)] * a.ndim
        idx[axis] = 0
        out[tuple(idx)] = 1 if prod else 0
    return np.flip(out, axis) if reverse else out


def np_one_hot(ind: np.ndarray, depth: int, axis: int, dtype: str, on: object = 1,
               off: object = 0) -> np.ndarray:
    axis = axis % (ind.ndim + 1)
    shape = [1] * (ind.ndim + 1)
    shape[axis] = depth
    hit = np.expand_dims(ind, axis) == np.arange(depth).reshape(shape)
    return np.where(hit, np.array(on, dtype), np.array(off, dtype)).astype(dtype)


def source_coordinate(c: int, n: int, m: int, coordinates: str) -> Fraction:
    if coordinates == "half_pixel" or (coordinates == "pytorch_half_pixel" and m > 1):
        return Fraction(2 * c + 1, 2) * Fraction(n, m) - Fraction(1, 2)
    if coordinates == "align_corners":
        return Fraction(c * (n - 1), m - 1) if m > 1 else Fraction(0)
    if coordinates == "asymmetric":
        return Fraction(c * n, m)
    return Fraction(0)


def np_resize_axis(a: np.ndarray, axis: int, m: int, mode: str, coordinates: str,
                   rounding: str) -> np.ndarray:
    """ONNX Resize along one axis, the coordinate as an exact fraction."""
    import math
    n = a.shape[axis]
    if mode == "nearest":
        idx = []
        for c in range(m):
            x = source_coordinate(c, n, m, coordinates)
            j = {"floor": math.floor(x), "ceil": math.ceil(x),
                 "round_prefer_floor": math.ceil(x - Fraction(1, 2)),
                 "round_prefer_ceil": math.floor(x + Fraction(1, 2))}[rounding]
            idx.append(min(max(j, 0), n - 1))
        return np.take(a, idx, axis)
    lo, hi, w = [], [], []
    for c in range(m):
        x = min(max(source_coordinate(c, n, m, coordinates), Fraction(0)), Fraction(n - 1))
        f = math.floor(x)
        lo.append(f)
        hi.append(min(f + 1, n - 1))
        w.append(float(x - f))
    shape = [1] * a.ndim
    shape[axis] = m
    wt = np.array(w, a.dtype).reshape(shape)
    return np.take(a, lo, axis) * (1 - wt) + np.take(a, hi, axis) * wt


def np_resize(a: np.ndarray, sizes: list[int], axes: list[int], mode: str = "nearest",
              coordinates: str = "half_pixel",
              rounding: str = "round_prefer_floor") -> np.ndarray:
    if mode == "bilinear" and a.dtype.kind != "f":
        a = a.astype(np.float32)
    for ax, m in zip(axes, sizes):
        if a.shape[ax] != m:
            a = np_resize_axis(a, ax, m, mode, coordinates, rounding)
    return a


# the cases -----------------------------------------------------------------------------

@dataclass
class Case:
    """One op call: ``build(X, ...)`` on inputs of ``shapes`` against ``ref(x, ...)``."""
    id: str
    shapes: tuple[tuple[int, ...], ...]
    build: Callable[..., ops.Tensor]
    ref: Callable[..., np.ndarray]
    dtypes: tuple[str, ...] = ("float32", "int32")
    tol: float = 0.0
    # per-input dtype overrides (e.g. integer indices) and value ranges
    fixed: dict[int, str] = field(default_factory=dict)
    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)


F = ("float32", "float64")
FI = ("float32", "int32")
ALL_INT = ("int8", "int32", "int64", "uint8")

CASES = [
    # reductions
    Case("sum_axis", ((3, 5, 7),), lambda x: ops.sum(x, 1), lambda x: x.sum(1, dtype=x.dtype),
         FI, 1e-5),
    Case("sum_all", ((3, 5),), lambda x: ops.sum(x), lambda x: x.sum(dtype=x.dtype),
         ("float64", "int64"), 1e-9),
    Case("sum_keepdims", ((3, 5, 7),), lambda x: ops.sum(x, (0, -1), keepdims=True),
         lambda x: x.sum((0, 2), keepdims=True, dtype=x.dtype), FI, 1e-5),
    Case("sum_bool", ((4, 3),), lambda x: ops.sum(x, 0),
         lambda x: x.sum(0).astype(np.int32), ("bool",)),
    Case("sum_dtype", ((4, 3),), lambda x: ops.sum(x, 1, dtype="float64"),
         lambda x: x.astype(np.float64).sum(1), ("int8", "float32"), 1e-9),
    Case("sum_no_axes", ((3, 2),), lambda x: ops.sum(x, ()), lambda x: x, FI),
    Case("prod", ((3, 4, 5),), lambda x: ops.prod(x, 2, keepdims=True),
         lambda x: x.prod(2, keepdims=True, dtype=x.dtype), ("float64", "int64"), 1e-9,
         ranges={0: (-3, 4)}),
    Case("max", ((5, 3, 4),), lambda x: ops.max(x, (0, 2)), lambda x: x.max((0, 2)),
         ("float32", "int8")),
    Case("max_keepdims", ((5, 3),), lambda x: ops.max(x, -1, keepdims=True),
         lambda x: x.max(-1, keepdims=True), ("float64", "uint8")),
    Case("min", ((5, 3, 4),), lambda x: ops.min(x, 1), lambda x: x.min(1), ("float32", "int16")),
    Case("min_all", ((5, 3),), lambda x: ops.min(x), lambda x: x.min(), ("float32", "int32")),
    Case("all", ((4, 5),), lambda x: ops.all(x, 1), lambda x: x.astype(bool).all(1),
         ("bool", "int32"), ranges={0: (0, 3)}),
    Case("any", ((4, 5),), lambda x: ops.any(x, 0, keepdims=True),
         lambda x: x.astype(bool).any(0, keepdims=True), ("bool", "float32"),
         ranges={0: (0, 1)}),
    Case("mean", ((3, 5, 7),), lambda x: ops.mean(x, (1, 2)),
         lambda x: x.astype(np.float32 if x.dtype.kind in "iub" else x.dtype).mean((1, 2)),
         ("float64", "int32"), 1e-5),
    Case("mean_keepdims", ((3, 5),), lambda x: ops.mean(x, 0, keepdims=True),
         lambda x: x.mean(0, keepdims=True), F, 1e-5),
    Case("variance", ((3, 5, 7),), lambda x: ops.variance(x, -1),
         lambda x: x.astype(np.float32 if x.dtype.kind in "iub" else x.dtype).var(-1),
         ("float32", "int32"), 1e-4),
    Case("variance_ddof", ((6, 5),), lambda x: ops.variance(x, 0, keepdims=True, ddof=1),
         lambda x: x.var(0, keepdims=True, ddof=1), F, 1e-5),
    Case("std", ((3, 5, 7),), lambda x: ops.std(x, (0, 2)), lambda x: x.std((0, 2)), F, 1e-5),
    Case("argmax", ((3, 5, 7),), lambda x: ops.argmax(x, 1),
         lambda x: x.argmax(1).astype(np.int32), ("float32", "int8"), ranges={0: (-2, 2)}),
    Case("argmax_flat", ((3, 5),), lambda x: ops.argmax(x),
         lambda x: np.int32(x.argmax()), ("float64", "uint8"), ranges={0: (0, 3)}),
    Case("argmax_keepdims", ((4, 3),), lambda x: ops.argmax(x, 0, keepdims=True),
         lambda x: x.argmax(0)[None].astype(np.int32), ("float32", "bool")),
    Case("argmin", ((3, 5, 7),), lambda x: ops.argmin(x, -1),
         lambda x: x.argmin(-1).astype(np.int32), ("float32", "int16"), ranges={0: (-2, 2)}),
    # elementwise
    Case("cast_f2i", ((3, 5),), lambda x: ops.cast(x, "int8"), lambda x: x.astype(np.int8),
         ("float32", "float64"), ranges={0: (-100, 100)}),
    Case("cast_f2i_wraps", ((9,),), lambda x: ops.cast(x, "int8"),
         lambda x: np.trunc(x).astype(np.int64).astype(np.int8), ("float32", "float64"),
         ranges={0: (-1000, 1000)}),
    Case("cast_f2u_wraps", ((9,),), lambda x: ops.cast(x, "uint16"),
         lambda x: np.trunc(x).astype(np.int64).astype(np.uint16), ("float32", "float64"),
         ranges={0: (-1e5, 1e5)}),
    Case("cast_i2f", ((3, 5),), lambda x: ops.cast(x, np.float64),
         lambda x: x.astype(np.float64), ("int32", "uint8")),
    Case("cast_wrap", ((7,),), lambda x: ops.cast(x, "uint8"), lambda x: x.astype(np.uint8),
         ("int32", "int64"), ranges={0: (-1000, 1000)}),
    Case("cast_bool", ((7,),), lambda x: ops.cast(x, "bool"), lambda x: x.astype(bool),
         ("float32", "int8"), ranges={0: (-1, 2)}),
    Case("cast_from_bool", ((7,),), lambda x: ops.cast(x, "float32"),
         lambda x: x.astype(np.float32), ("bool",)),
    Case("where", ((3, 1), (1, 5), (5,)), lambda c, a, b: ops.where(c, a, b),
         lambda c, a, b: np.where(c, a, b), FI, fixed={0: "bool"}),
    Case("where_scalars", ((3, 4),), lambda x: ops.where(x > 0, x, 0),
         lambda x: np.where(x > 0, x, 0).astype(x.dtype), FI),
    Case("clip", ((4, 5),), lambda x: ops.clip(x, -1, 2), lambda x: np.clip(x, -1, 2), FI),
    Case("clip_tensor_bounds", ((4, 5), (5,)), lambda x, h: ops.clip(x, None, h),
         lambda x, h: np.minimum(x, h), FI),
    Case("clip_wide_bounds", ((5,),), lambda x: ops.clip(x, -1000, 1000.0),
         lambda x: x, ("int8", "float16")),
    Case("clip_lo_above_hi", ((4,),), lambda x: ops.clip(x, 3, 1),
         lambda x: np.clip(x, 3, 1), FI),
    Case("maximum", ((3, 4), (4,)), ops.maximum, np.maximum, ("float64", "int16")),
    Case("minimum", ((3, 4), (3, 1)), ops.minimum, np.minimum, ("float32", "uint8")),
    Case("logical", ((3, 4), (4,)),
         lambda a, b: ops.logical_xor(ops.logical_and(a, b), ops.logical_or(a, ops.logical_not(b))),
         lambda a, b: np.logical_xor(np.logical_and(a, b), np.logical_or(a, np.logical_not(b))),
         ("bool", "int32"), ranges={0: (0, 2), 1: (-1, 2)}),
    # shapes
    Case("reshape", ((3, 10),), lambda x: ops.reshape(x, (5, -1, 2)),
         lambda x: x.reshape(5, -1, 2), FI),
    Case("reshape_rank0", ((1, 1),), lambda x: ops.reshape(x, ()), lambda x: x.reshape(()), FI),
    Case("flatten", ((3, 5, 2),), lambda x: ops.flatten(x), lambda x: x.reshape(-1),
         ("float64", "int8")),
    Case("flatten_batch", ((3, 5, 2, 3),), lambda x: ops.flatten(x, 1, 2),
         lambda x: x.reshape(3, 10, 3), FI),
    Case("transpose", ((3, 5, 7),), lambda x: ops.transpose(x, (2, 0, 1)),
         lambda x: x.transpose(2, 0, 1), FI),
    Case("transpose_default", ((3, 5),), lambda x: ops.transpose(x), lambda x: x.T,
         ("float64", "bool")),
    Case("squeeze", ((3, 1, 5, 1),), lambda x: ops.squeeze(x), lambda x: x.squeeze(), FI),
    Case("squeeze_axis", ((3, 1, 5, 1),), lambda x: ops.squeeze(x, -1),
         lambda x: x.squeeze(-1), FI),
    Case("unsqueeze", ((3, 5),), lambda x: ops.unsqueeze(x, (0, -1)),
         lambda x: np.expand_dims(x, (0, -1)), FI),
    Case("expand_dims", ((3, 5),), lambda x: ops.expand_dims(x, 1),
         lambda x: np.expand_dims(x, 1), ("float64", "uint8")),
    Case("broadcast_to", ((3, 1),), lambda x: ops.broadcast_to(x, (2, 3, 5)),
         lambda x: np.broadcast_to(x, (2, 3, 5)), FI),
    Case("broadcast_scalar", ((),), lambda x: ops.broadcast_to(x, (4, 3)),
         lambda x: np.broadcast_to(x, (4, 3)), ("float32", "bool")),
    # indexing
    Case("getitem_basic", ((7, 5, 3),), lambda x: x[1:6:2, ::-1, 2],
         lambda x: x[1:6:2, ::-1, 2], FI),
    Case("getitem_neg_step", ((9, 4),), lambda x: x[-2:0:-3, None, ..., -1],
         lambda x: x[-2:0:-3, None, ..., -1], ("float64", "int8")),
    Case("getitem_int", ((5, 4),), lambda x: x[-1], lambda x: x[-1], FI),
    Case("getitem_scalar", ((5, 4),), lambda x: x[2, 3], lambda x: x[2, 3], FI),
    Case("getitem_clamped", ((5, 4),), lambda x: x[-100:100, 7:], lambda x: x[-100:100, 7:],
         FI),
    Case("getitem_ellipsis", ((2, 3, 4, 5),), lambda x: x[..., 1:, None],
         lambda x: x[..., 1:, None], FI),
    Case("getitem_tensor", ((6, 3), (4,)), lambda x, i: x[i], lambda x, i: x[i], FI,
         fixed={1: "int32"}, ranges={1: (-6, 6)}),
    Case("slice", ((7, 6, 5),), lambda x: ops.slice_(x, [5, -1], [0, -7], [-2, -1], [0, 2]),
         lambda x: x[5:0:-2, :, -1:-7:-1], FI),
    Case("slice_onnx_ends", ((7, 6),), lambda x: ops.slice_(x, [1], [2**62]),
         lambda x: x[1:], FI),
    Case("flip", ((4, 3, 5),), lambda x: ops.flip(x, (0, 2)), lambda x: np.flip(x, (0, 2)),
         FI),
    Case("gather", ((7, 3), (2, 4)), lambda x, i: ops.gather(x, i),
         lambda x, i: np.take(x, i, 0), FI, fixed={1: "int32"}, ranges={1: (-7, 7)}),
    Case("gather_axis", ((3, 7, 2), (5,)), lambda x, i: ops.gather(x, i, axis=1),
         lambda x, i: np.take(x, i, 1), ("float64", "int8"), fixed={1: "uint8"},
         ranges={1: (0, 7)}),
    Case("gather_last", ((3, 2, 7), (2, 3)), lambda x, i: ops.gather(x, i, axis=-1),
         lambda x, i: np.take(x, i, -1), FI, fixed={1: "int64"}, ranges={1: (-7, 7)}),
    Case("gather_small_indices", ((200, 2), (5,)), lambda x, i: ops.gather(x, i),
         lambda x, i: np.take(x, i, 0), FI, fixed={1: "int8"}, ranges={1: (-100, 100)}),
    Case("gather_clamps", ((5,), (6,)), lambda x, i: ops.gather(x, i),
         lambda x, i: x[np.clip(np.where(i < 0, i + 5, i), 0, 4)], FI, fixed={1: "int32"},
         ranges={1: (-20, 20)}),
    Case("concatenate", ((3, 2, 4), (3, 5, 4), (3, 1, 4)),
         lambda a, b, c: ops.concatenate([a, b, c], 1),
         lambda a, b, c: np.concatenate([a, b, c], 1), ("float32", "bool")),
    Case("concatenate_promote", ((3, 2), (1, 2)), lambda a, b: ops.concatenate([a, b]),
         lambda a, b: np.concatenate([a, b.astype(np.float64)]), ("int8", "float32"),
         fixed={1: "float64"}),
    Case("concatenate_empty_part", ((0, 3), (2, 3)), lambda a, b: ops.concatenate([a, b]),
         lambda a, b: np.concatenate([a, b]), FI),
    Case("stack", ((3, 4), (3, 4)), lambda a, b: ops.stack([a, b], -1),
         lambda a, b: np.stack([a, b], -1), FI),
    # pad, tile, repeat
    Case("pad_constant", ((3, 4),), lambda x: ops.pad(x, ((1, 2), (0, 3))),
         lambda x: np.pad(x, ((1, 2), (0, 3))), FI),
    Case("pad_value", ((3, 4),), lambda x: ops.pad(x, 2, value=-7),
         lambda x: np.pad(x, 2, constant_values=-7), ("float64", "int8")),
    Case("pad_reflect", ((5, 4),), lambda x: ops.pad(x, ((4, 1), (3, 2)), "reflect"),
         lambda x: np.pad(x, ((4, 1), (3, 2)), "reflect"), FI),
    Case("pad_symmetric", ((3, 4, 5),), lambda x: ops.pad(x, (3, 1), "symmetric"),
         lambda x: np.pad(x, (3, 1), "symmetric"), ("float32", "uint8")),
    Case("pad_edge", ((3, 1),), lambda x: ops.pad(x, ((0, 2), (4, 3)), "edge"),
         lambda x: np.pad(x, ((0, 2), (4, 3)), "edge"), ("float64", "bool")),
    Case("tile", ((3, 2),), lambda x: ops.tile(x, (2, 1, 3)), lambda x: np.tile(x, (2, 1, 3)),
         FI),
    Case("tile_short_reps", ((3, 1, 2),), lambda x: ops.tile(x, (4, 2)),
         lambda x: np.tile(x, (4, 2)), ("float32", "int8")),
    Case("tile_zero", ((3, 2),), lambda x: ops.tile(x, (0, 2)), lambda x: np.tile(x, (0, 2)),
         FI),
    Case("repeat", ((3, 2, 5),), lambda x: ops.repeat(x, 3, 1), lambda x: np.repeat(x, 3, 1),
         FI),
    Case("repeat_flat", ((3, 2),), lambda x: ops.repeat(x, 2), lambda x: np.repeat(x, 2),
         ("float64", "bool")),
    # one-hot, cumulative
    Case("one_hot", ((3, 4),), lambda i: ops.one_hot(i, 5),
         lambda i: np_one_hot(i, 5, -1, "float32"), ("int32", "uint8"), ranges={0: (-1, 7)}),
    Case("one_hot_axis", ((3, 4),),
         lambda i: ops.one_hot(i, 6, axis=1, dtype="int8", on_value=3, off_value=-1),
         lambda i: np_one_hot(i, 6, 1, "int8", 3, -1), ("int64", "int8"), ranges={0: (0, 6)}),
    Case("cumsum", ((3, 7),), lambda x: ops.cumsum(x, 1), lambda x: np_cumulative(x, 1),
         FI, 1e-5),
    Case("cumsum_flat", ((3, 4),), lambda x: ops.cumsum(x), lambda x: np_cumulative(x, None),
         ("float64", "bool"), 1e-9),
    Case("cumsum_exclusive_reverse", ((5, 3),),
         lambda x: ops.cumsum(x, 0, exclusive=True, reverse=True),
         lambda x: np_cumulative(x, 0, exclusive=True, reverse=True), FI, 1e-5),
    Case("cumprod", ((3, 6),), lambda x: ops.cumprod(x, -1),
         lambda x: np_cumulative(x, -1, prod=True), ("float64", "int32"), 1e-9,
         ranges={0: (-3, 4)}),
    Case("cumprod_exclusive", ((3, 6),), lambda x: ops.cumprod(x, 1, exclusive=True),
         lambda x: np_cumulative(x, 1, prod=True, exclusive=True), ("float32", "int64"), 1e-5,
         ranges={0: (-3, 4)}),
    Case("cumprod_reverse", ((5,),), lambda x: ops.cumprod(x, 0, reverse=True),
         lambda x: np_cumulative(x, 0, prod=True, reverse=True), ("float32", "int32"), 1e-5,
         ranges={0: (-3, 4)}),
]

RESIZE = [
    # (input shape, sizes, axes, mode, coordinates, rounding)
    ((1, 5, 7, 2), (9, 3), (1, 2), "nearest", "half_pixel", "round_prefer_floor"),
    ((1, 4, 6, 2), (8, 12), (1, 2), "nearest", "asymmetric", "floor"),
    ((3, 7), (5, 11), (0, 1), "nearest", "align_corners", "round_prefer_ceil"),
    ((2, 6), (4, 9), (0, 1), "nearest", "half_pixel", "ceil"),
    ((2, 5, 3), (9, 7), (1, 2), "bilinear", "half_pixel", "round_prefer_floor"),
    ((2, 5, 3), (2, 8), (1, 2), "bilinear", "align_corners", "round_prefer_floor"),
    ((4, 6), (3, 13), (0, 1), "bilinear", "asymmetric", "round_prefer_floor"),
    ((1, 3), (1, 5), (0, 1), "bilinear", "pytorch_half_pixel", "round_prefer_floor"),
    ((1, 6), (4, 1), (0, 1), "nearest", "align_corners", "round_prefer_floor"),
]
for k, (shape, sizes, axes, mode, coords, rounding) in enumerate(RESIZE):
    CASES.append(Case(
        f"resize_{k}_{mode}_{coords}", (shape,),
        lambda x, s=sizes, a=axes, md=mode, c=coords, r=rounding:
            ops.resize(x, s, a, mode=md, coordinates=c, rounding=r),
        lambda x, s=sizes, a=axes, md=mode, c=coords, r=rounding:
            np_resize(x, list(s), list(a), md, c, r),
        ("float32", "int16") if mode == "nearest" else ("float32", "float64"),
        1e-5 if mode == "bilinear" else 0.0))


def make_inputs(case: Case, dtype: str, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    out = {}
    for k, shape in enumerate(case.shapes):
        dt = case.fixed.get(k, dtype)
        lo, hi = case.ranges.get(k, (None, None))
        if np.dtype(dt).kind == "u" and lo is not None:
            lo = max(lo, 0)
        if dt == "float16" and lo is not None:
            lo, hi = max(lo, -6e4), min(hi, 6e4)
        out[f"X{k}"] = random_array(rng, shape, dt, lo, hi)
    return out


def build(case: Case, dtype: str) -> tuple[ops.Tensor, list[ops.Tensor]]:
    xs = [ops.input(f"X{k}", shape, case.fixed.get(k, dtype))
          for k, shape in enumerate(case.shapes)]
    return case.build(*xs), xs


def check(case: Case, got: np.ndarray, arrays: dict[str, np.ndarray]) -> None:
    want = np.asarray(case.ref(*arrays.values()))
    assert got.shape == want.shape, (got.shape, want.shape)
    if case.tol:
        np.testing.assert_allclose(got, want.astype(got.dtype), rtol=case.tol, atol=case.tol)
    else:
        np.testing.assert_array_equal(got, want.astype(got.dtype))


PARAMS = [pytest.param(c, d, id=f"{c.id}-{d}") for c in CASES for d in c.dtypes]


@pytest.mark.parametrize(("case", "dtype"), PARAMS)
def test_op_matches_numpy_in_the_interpreter(case: Case, dtype: str) -> None:
    y, _ = build(case, dtype)
    arrays = make_inputs(case, dtype, zlib.crc32(f"{case.id}-{dtype}".encode()))
    out = run(ops.function({"Y": y}), arrays)["Y"]
    check(case, out, arrays)


def test_every_exported_op_has_a_case_and_a_docstring_with_its_tile() -> None:
    from stripe.ops import array
    covered = " ".join(c.id for c in CASES)
    called = {"getitem": "getitem", "slice_": "slice", "expand_dims": "expand_dims"}
    for name in array.__all__:
        fn = getattr(array, name)
        assert fn.__doc__ and len(fn.__doc__) > 40, name
        assert called.get(name, name).split("_")[0] in covered, name
        if name not in ("stack", "expand_dims"):
            assert "::" in fn.__doc__ or "O[" in fn.__doc__ or "O =" in fn.__doc__, name


# compiled: a representative function per config ------------------------------------------

COMPILED = ["sum_keepdims", "mean", "variance", "argmax", "argmin", "min", "prod", "cast_f2i",
            "where", "clip", "getitem_neg_step", "slice", "gather_axis", "concatenate",
            "pad_reflect", "pad_value", "pad_edge", "transpose", "broadcast_to",
            "tile_short_reps", "repeat", "one_hot_axis", "cumsum_exclusive_reverse",
            "cumprod_exclusive", "squeeze", "unsqueeze", "reshape",
            "resize_0_nearest_half_pixel", "resize_4_bilinear_half_pixel", "any", "logical",
            "maximum", "stack", "flip", "getitem_tensor", "tile_zero", "concatenate_empty_part",
            "resize_2_nearest_align_corners", "cast_bool", "all", "sum_bool"]


CONFIGS = ("cpu_generic", "cpu_avx2", "npu_example")
LONG = settings._current_profile == "long"


def _compiled_function(ids: list[str], dtype: str
                       ) -> tuple[ops.Function, dict[str, np.ndarray], list[Case]]:
    """One function computing the cases ``ids``, with distinct input names."""
    by_id = {c.id: c for c in CASES}
    outs: dict[str, ops.Tensor] = {}
    arrays: dict[str, np.ndarray] = {}
    cases = []
    for k, cid in enumerate(ids):
        case = by_id[cid]
        dt = dtype if dtype in case.dtypes else case.dtypes[0]
        xs = [ops.input(f"In{k}_{j}", shape, case.fixed.get(j, dt))
              for j, shape in enumerate(case.shapes)]
        outs[f"Out{k}"] = case.build(*xs)
        for j, a in make_inputs(case, dt, 1000 + k).items():
            arrays[f"In{k}_{j[1:]}"] = a
        cases.append(case)
    return ops.function(outs), arrays, cases


def _check_compiled(ids: list[str], dtype: str, target: str | None) -> None:
    fn, arrays, cases = _compiled_function(ids, dtype)
    outs = stripe.compile(fn, target=target).run({k: arrays[k] for k in fn.inputs})
    for k, case in enumerate(cases):
        ins = {f"X{j}": arrays[f"In{k}_{j}"] for j in range(len(case.shapes))}
        check(case, outs[f"Out{k}"], ins)


@pytest.mark.parametrize("config", [p for p in runnable_configs() if p.values[0] in CONFIGS])
def test_representative_ops_compile_and_match_numpy(config: str) -> None:
    """Each config compiles a third of the representative ops (the long profile: all of
    them), so that every op goes through one config's passes and C by default."""
    k = CONFIGS.index(config)
    _check_compiled(COMPILED if LONG else COMPILED[k::len(CONFIGS)], "float32", config)


def test_representative_ops_compile_for_the_host_in_a_second_dtype() -> None:
    ids = [c for c in COMPILED if "int32" in {c2.id: c2 for c2 in CASES}[c].dtypes]
    _check_compiled(ids if LONG else ids[::3], "int32", None)


# semantics worth a test of their own ----------------------------------------------------

DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "bfloat16", "float32", "float64")


def _values(dtype: str) -> np.ndarray:
    """Values every dtype holds exactly or rounds the same way: 0..99 and fractions."""
    a = np.array([0, 1, 7.25, 99, 42.5, 3, 0.5], np.float64)
    if dtype == "bool":
        return a.astype(bool)
    if dtype in ("float16", "bfloat16", "float32", "float64"):
        return a.astype(stripe.dtypes.to_dtype(dtype).np)
    return np.floor(a).astype(dtype)


@pytest.mark.parametrize("src", DTYPES)
def test_cast_between_every_pair_of_dtypes(src: str) -> None:
    x = ops.input("X", (7,), src)
    outs = {f"O{k}": ops.cast(x, d) for k, d in enumerate(DTYPES)}
    a = _values(src)
    got = run(ops.function(outs), {"X": a})
    for k, d in enumerate(DTYPES):
        want = a.astype(stripe.dtypes.to_dtype(d).np)
        np.testing.assert_array_equal(got[f"O{k}"], want, err_msg=f"{src} -> {d}")


def test_casts_to_16_bit_and_unsigned_dtypes_compile() -> None:
    x = ops.input("X", (7,), "float32")
    names = ("float16", "bfloat16", "uint16", "uint32", "uint64", "bool")
    fn = ops.function({f"O{k}": ops.cast(x, d) for k, d in enumerate(names)}
                      | {"R": ops.cast(ops.cast(x, "bfloat16"), "float64")})
    a = _values("float32")
    got = stripe.compile(fn).run({"X": a})
    for k, d in enumerate(names):
        np.testing.assert_array_equal(got[f"O{k}"], a.astype(stripe.dtypes.to_dtype(d).np))
    np.testing.assert_array_equal(got["R"], a.astype(ml_dtypes.bfloat16).astype(np.float64))


def test_resize_bilinear_in_float16() -> None:
    x = ops.input("X", (3, 4), "float16")
    a = np.arange(12, dtype=np.float16).reshape(3, 4)
    got = run(ops.function(ops.resize(x, (5, 7), mode="bilinear")), {"X": a})["O"]
    want = np_resize(a.astype(np.float32), [5, 7], [0, 1], "bilinear")
    np.testing.assert_allclose(got.astype(np.float32), want, rtol=2e-3, atol=2e-3)


SWEEP = DTYPES if LONG else ("int16", "uint8", "float16")


@pytest.mark.parametrize("dtype", SWEEP)
def test_every_op_in_other_dtypes_produces_the_dtype_it_promises(dtype: str) -> None:
    """Each case in a dtype it was not written for either refuses it with a typed error or
    lowers and runs, its output of the shape and dtype the Tensor promised (``run``)."""
    xs, outs, arrays = {}, {}, {}
    for k, case in enumerate(CASES):
        if dtype in case.dtypes or (k % 2 and not LONG):
            continue
        ins = [ops.input(f"In{k}_{j}", shape, case.fixed.get(j, dtype))
               for j, shape in enumerate(case.shapes)]
        try:
            outs[f"Out{k}"] = case.build(*ins)
        except (ArgumentError, ArgumentTypeError) as e:
            assert str(e).split(":")[0] in (case.id.split("_")[0], "getitem", "slice_") \
                or ":" in str(e), (case.id, e)
            continue
        xs.update({f"In{k}_{j}": t for j, t in enumerate(ins)})
        for j, a in make_inputs(case, "float32" if dtype == "bfloat16" else dtype, k).items():
            arrays[f"In{k}_{j[1:]}"] = a.astype(stripe.dtypes.to_dtype(
                case.fixed.get(int(j[1:]), dtype)).np)
    fn = ops.function(outs)
    run(fn, {k: v for k, v in arrays.items() if k in fn.inputs})


def test_argmax_takes_the_first_index_on_ties_and_the_first_nan() -> None:
    x = ops.input("X", (4, 5))
    fn = ops.function({"A": ops.argmax(x, 1), "B": ops.argmin(x, 1)})
    a = np.array([[1, 3, 3, 0, 3], [2, 2, 2, 2, 2], [0, np.nan, 5, np.nan, 1],
                  [-np.inf, -np.inf, 0, np.inf, np.inf]], np.float32)
    out = run(fn, {"X": a})
    np.testing.assert_array_equal(out["A"], np.argmax(a, 1))
    np.testing.assert_array_equal(out["B"], np.argmin(a, 1))
    assert out["A"].dtype == np.int32


def test_reductions_of_empty_axes() -> None:
    x = ops.input("X", (3, 0))
    out = run(ops.function({"S": ops.sum(x, 1), "P": ops.prod(x, 1), "A": ops.all(x, 1),
                            "N": ops.any(x, 1), "M": ops.mean(x, 1)}),
              {"X": np.zeros((3, 0), np.float32)})
    np.testing.assert_array_equal(out["S"], [0, 0, 0])
    np.testing.assert_array_equal(out["P"], [1, 1, 1])
    np.testing.assert_array_equal(out["A"], [True] * 3)
    np.testing.assert_array_equal(out["N"], [False] * 3)
    assert np.isnan(out["M"]).all()


def test_mean_of_integers_is_float32_and_float64_stays() -> None:
    assert ops.mean(ops.input("X", (3,), "int64")).dtype == "float32"
    assert ops.mean(ops.input("X", (3,), "float64")).dtype == "float64"
    assert ops.variance(ops.input("X", (3,), "bool")).dtype == "float32"
    assert ops.sum(ops.input("X", (3,), "bool")).dtype == "int32"


def test_empty_slices_and_views_that_change_nothing() -> None:
    x = ops.input("X", (4, 3))
    assert x[:, :] is x and x[...] is x and ops.slice_(x, [0], [10]) is x
    assert ops.transpose(x, (0, 1)) is x and ops.reshape(x, (4, 3)) is x
    assert ops.pad(x, 0) is x and ops.tile(x, 1) is x and ops.squeeze(x) is x
    a = np.arange(12, dtype=np.float32).reshape(4, 3)
    out = run(ops.function({"E": x[3:1], "F": x[:, 5:], "G": x[::-1][1:1]}), {"X": a})
    assert out["E"].shape == (0, 3) and out["F"].shape == (4, 0) and out["G"].shape == (0, 3)


def test_nan_passes_through_clip_and_where() -> None:
    x = ops.input("X", (4,))
    a = np.array([np.nan, -5, 0.5, 9], np.float32)
    out = run(ops.function({"C": ops.clip(x, 0, 1), "W": ops.where(x, 1.0, 2.0)}), {"X": a})
    np.testing.assert_array_equal(out["C"], np.clip(a, 0, 1))
    np.testing.assert_array_equal(out["W"], np.where(a.astype(bool), 1.0, 2.0))


def test_tile_text_is_readable() -> None:
    x = ops.input("X", (7, 5))
    fn = ops.function({"Y": x[1:6:2, ::-1], "P": ops.pad(x, ((1, 0), (0, 0)), "edge"),
                       "S": ops.sum(x, 0, keepdims=True)})
    assert "Y[i0, i1 : 3, 5] = =(X[2 * i0 + 1, 4 - i1]);" in fn.source
    assert "S[0, i1 : 1, 5] = +(X[i0, i1]);" in fn.source
    assert "=(X[0, i1]), i0 < 1 default Pad;" in fn.source


def test_outputs_are_deterministic() -> None:
    def text() -> str:
        x = ops.input("X", (3, 5, 4))
        i = ops.input("I", (2,), "int32")
        return ops.function([ops.argmax(x, 1), ops.gather(x, i, 2), ops.resize(
            x, (7, 2), (1, 2), mode="bilinear"), ops.pad(x, 1, "reflect")]).source
    assert text() == text()


# errors -----------------------------------------------------------------------------------

X = ops.input("X", (3, 4))
I32 = ops.input("I", (2,), "int32")

ERRORS: list[tuple[Callable[[], object], type, str]] = [
    (lambda: ops.sum(X, 2), ArgumentError, "sum: axis 2 is out of range"),
    (lambda: ops.sum(X, (0, -2)), ArgumentError, "sum: axis (0, -2) repeats"),
    (lambda: ops.sum(X, 1.5), ArgumentTypeError, "sum: axis must be an int"),
    (lambda: ops.sum([1, 2]), ArgumentTypeError, "sum: x must be a Tensor"),
    (lambda: ops.mean(X, keepdims=1), ArgumentTypeError, "mean: keepdims must be a bool"),
    (lambda: ops.max(ops.input("E", (3, 0)), 1), ArgumentError, "max: x has shape"),
    (lambda: ops.argmax(X, -3), ArgumentError, "argmax: axis -3 is out of range"),
    (lambda: ops.variance(X, ddof=-1), ArgumentError, "variance: ddof must be >= 0"),
    (lambda: ops.sum(X, dtype="bool"), ArgumentError, "sum: dtype must not be bool"),
    (lambda: ops.sum(X, dtype="complex64"), ArgumentError, "sum: dtype"),
    (lambda: ops.cast(X, 3), ArgumentTypeError, "cast: dtype must be a dtype name"),
    (lambda: ops.cast(X, "float8"), ArgumentError, "cast: dtype"),
    (lambda: X[::0], ArgumentError, "getitem: slice step of axis 0 must not be zero"),
    (lambda: X[5], ArgumentError, "getitem: index 5 is out of range for axis 0"),
    (lambda: X[1, 2, 3], ArgumentError, "getitem: too many indices"),
    (lambda: X[..., ...], ArgumentError, "single ellipsis"),
    (lambda: X["a"], ArgumentTypeError, "getitem: indices must be ints"),
    (lambda: X[1.0:2], ArgumentTypeError, "getitem: slice start must be an int"),
    (lambda: X[True], ArgumentTypeError, "getitem: indices must be ints"),
    (lambda: X[I32, 0], ArgumentTypeError, "a Tensor index must be the whole key"),
    (lambda: ops.slice_(X, [0], [2], [0]), ArgumentError, "slice_: steps[0] must not be zero"),
    (lambda: ops.slice_(X, [0, 1], [2]), ArgumentError, "different lengths"),
    (lambda: ops.slice_(X, [0], [2], axes=[2]), ArgumentError, "slice_: axes 2 is out of range"),
    (lambda: ops.gather(X, X), ArgumentTypeError, "gather: indices must be an integer tensor"),
    (lambda: ops.gather(X, I32, 2), ArgumentError, "gather: axis 2 is out of range"),
    (lambda: ops.gather(ops.input("E", (0, 2)), I32), ArgumentError, "gather: axis 0"),
    (lambda: ops.concatenate([X, ops.input("Y", (3, 5))]), ArgumentError,
     "concatenate: tensors[1] (3, 5) does not match"),
    (lambda: ops.concatenate([]), ArgumentError, "concatenate: tensors is empty"),
    (lambda: ops.concatenate(X), ArgumentTypeError, "concatenate: tensors must be a sequence"),
    (lambda: ops.concatenate([X, 1]), ArgumentTypeError, "concatenate: tensors[1] must be"),
    (lambda: ops.stack([X, I32]), ArgumentError, "stack: tensors[1]"),
    (lambda: ops.pad(X, 1, "wrap"), ArgumentError, "pad: unknown mode 'wrap'"),
    (lambda: ops.pad(X, -1), ArgumentError, "pad: pad_width must be >= 0"),
    (lambda: ops.pad(X, ((1, 1),) * 3), ArgumentError, "pad: pad_width has 3 pairs"),
    (lambda: ops.pad(X, 3, "reflect"), ArgumentError, "pad: mode 'reflect' needs pads smaller"),
    (lambda: ops.pad(X, 5, "symmetric"), ArgumentError, "pad: mode 'symmetric' needs"),
    (lambda: ops.pad(X, 1, "edge", value=2), ArgumentError, "pad: value is only for"),
    (lambda: ops.pad(I32, 1, value=0.5), ArgumentError, "pad: value 0.5 is not a int32"),
    (lambda: ops.pad(X, "1"), ArgumentTypeError, "pad: pad_width must be"),
    (lambda: ops.pad(ops.input("U", (2,), "uint8"), 1, value=-7), ArgumentError,
     "pad: value -7 does not fit uint8 (0..255)"),
    (lambda: ops.pad(X, 1, value="0"), ArgumentTypeError, "pad: value must be a number"),
    (lambda: ops.one_hot(I32, 3, dtype="bool", off_value=2), ArgumentError,
     "one_hot: off_value 2 is not a bool value"),
    (lambda: ops.reshape(X, (5, -1)), ArgumentError, "reshape: cannot infer"),
    (lambda: ops.reshape(X, (5, 2)), ArgumentError, "reshape: shape (5, 2) holds 10"),
    (lambda: ops.reshape(X, (-1, -1)), ArgumentError, "more than one -1"),
    (lambda: ops.transpose(X, (0, 0)), ArgumentError, "transpose: axes (0, 0) is not a perm"),
    (lambda: ops.squeeze(X, 0), ArgumentError, "squeeze: axis 0 of x (3, 4) has size 3"),
    (lambda: ops.unsqueeze(X, 3), ArgumentError, "unsqueeze: axes 3 is out of range"),
    (lambda: ops.broadcast_to(X, (3, 5)), ArgumentError, "broadcast_to: x (3, 4) does not"),
    (lambda: ops.flatten(X, 1, 0), ArgumentError, "flatten: start_axis 1 comes after"),
    (lambda: ops.tile(X, (-1,)), ArgumentError, "tile: reps[0] must be >= 0"),
    (lambda: ops.repeat(X, [1, 2]), ArgumentTypeError, "repeat: repeats must be an int"),
    (lambda: ops.one_hot(X, 3), ArgumentTypeError, "one_hot: indices must be an integer"),
    (lambda: ops.one_hot(I32, 3, axis=2), ArgumentError, "one_hot: axis 2 is out of range"),
    (lambda: ops.one_hot(I32, 3, dtype="int8", on_value=1.5), ArgumentError,
     "one_hot: on_value 1.5 is not a int8 value"),
    (lambda: ops.cumsum(X, 2), ArgumentError, "cumsum: axis 2 is out of range"),
    (lambda: ops.cumprod(X, 0, exclusive="yes"), ArgumentTypeError,
     "cumprod: exclusive must be a bool"),
    (lambda: ops.resize(X, (5,)), ArgumentError, "resize: sizes has 1 entries"),
    (lambda: ops.resize(X, (5, 5), mode="cubic"), ArgumentError, "resize: unknown mode"),
    (lambda: ops.resize(X, (5, 5), coordinates="tf"), ArgumentError,
     "resize: unknown coordinates"),
    (lambda: ops.resize(X, (5, 5), rounding="up"), ArgumentError, "resize: unknown rounding"),
    (lambda: ops.resize(X, (5, 0)), ArgumentError, "resize: sizes[1] must be >= 1"),
    (lambda: ops.resize(X, (5,), (1, 0)), ArgumentError, "resize: 1 sizes for 2 axes"),
    (lambda: ops.resize(X, (5, 5), align_corners=True, coordinates="asymmetric"),
     ArgumentError, "contradicts"),
    (lambda: ops.where(X, X, "a"), ArgumentTypeError, "where: y must be a Tensor or a number"),
    (lambda: ops.where(X, ops.input("Y", (5,)), 0), ArgumentError, "where: shapes"),
    (lambda: ops.clip(X), ArgumentError, "clip: lo and hi are both None"),
    (lambda: ops.maximum(X, ops.input("Y", (2,))), ArgumentError, "maximum: shapes"),
]


@pytest.mark.parametrize(("call", "error", "message"), ERRORS,
                         ids=[m.split(":")[0] + f"-{k}" for k, (_, _, m) in enumerate(ERRORS)])
def test_wrong_arguments_raise_typed_errors_naming_op_and_argument(
        call: Callable[[], object], error: type, message: str) -> None:
    with pytest.raises(error) as info:
        call()
    assert message in str(info.value)


def test_docs_example_prints_what_the_page_shows(capsys: pytest.CaptureFixture[str]) -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "ops_array.md").read_text()
    code = text[text.index("```python\n") + 10:]
    code = code[:code.index("```")]
    shown = text[text.index("```tile\n") + 8:]
    shown = shown[:shown.index("```")]
    exec(compile(code, "ops_array.md", "exec"), {})
    assert capsys.readouterr().out == shown + "\n"


# properties against numpy on drawn shapes and arguments ----------------------------------

PROPERTY = settings(max_examples=400 if LONG else 25, deadline=None, derandomize=not LONG,
                    database=None, suppress_health_check=list(HealthCheck))
shapes = st.lists(st.integers(0, 5), min_size=1, max_size=3).map(tuple)


def _arange(shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    return (np.arange(int(np.prod(shape))) - 3).astype(dtype).reshape(shape)


@st.composite
def _index_keys(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[object, ...]]:
    shape = draw(shapes)
    items: list[object] = []
    axis = 0
    ellipsis = False
    while axis < len(shape) and draw(st.booleans()):
        n = shape[axis]
        kind = draw(st.sampled_from(["int", "slice", "none", "ellipsis"]))
        if kind == "int" and n > 0:
            items.append(draw(st.integers(-n, n - 1)))
            axis += 1
        elif kind == "none":
            items.append(None)
        elif kind == "ellipsis" and not ellipsis:
            items.append(Ellipsis)
            ellipsis = True
            axis = len(shape) - draw(st.integers(0, len(shape) - axis))
        else:
            bound = st.none() | st.integers(-7, 7)
            step = st.none() | st.integers(-3, 3).filter(bool)
            items.append(slice(draw(bound), draw(bound), draw(step)))
            axis += 1
    return shape, tuple(items)


@PROPERTY
@given(_index_keys())
def test_getitem_matches_numpy(case: tuple[tuple[int, ...], tuple[object, ...]]) -> None:
    shape, key = case
    x = ops.input("X", shape)
    a = _arange(shape)
    want = a[key]
    y = x[key]
    assert y.shape == want.shape
    if y is x:
        assert want.shape == a.shape
        return
    np.testing.assert_array_equal(run(ops.function({"Y": y}), {"X": a})["Y"], want)


@PROPERTY
@given(shapes, st.data())
def test_reductions_match_numpy(shape: tuple[int, ...], data: st.DataObject) -> None:
    axes = data.draw(st.none() | st.lists(st.integers(0, len(shape) - 1), unique=True))
    keep = data.draw(st.booleans())
    x = ops.input("X", shape, "int32")
    a = _arange(shape, "int32") * np.int32(7) % np.int32(5)
    ax = None if axes is None else tuple(axes)
    outs = {"S": ops.sum(x, ax, keep), "P": ops.prod(x, ax, keep), "Y": ops.any(x, ax, keep)}
    full = all(shape[d] for d in (range(len(shape)) if ax is None else ax))
    if full:
        outs["M"] = ops.max(x, ax, keep)
    if full and axes is not None and len(axes) == 1:
        outs["A"] = ops.argmin(x, axes[0], keep)
    got = run(ops.function(outs), {"X": a})
    np.testing.assert_array_equal(got["S"], a.sum(ax, keepdims=keep, dtype=np.int32))
    np.testing.assert_array_equal(got["P"], a.prod(ax, keepdims=keep, dtype=np.int32))
    np.testing.assert_array_equal(got["Y"], a.astype(bool).any(ax, keepdims=keep))
    if "M" in got:
        np.testing.assert_array_equal(got["M"], a.max(ax, keepdims=keep))
    if "A" in got:
        np.testing.assert_array_equal(got["A"], a.argmin(axes[0], keepdims=keep))


@PROPERTY
@given(shapes.filter(all), st.data())
def test_pad_matches_numpy(shape: tuple[int, ...], data: st.DataObject) -> None:
    mode = data.draw(st.sampled_from(["constant", "reflect", "symmetric", "edge"]))
    limit = {"constant": 4, "edge": 4, "symmetric": min(shape), "reflect": min(shape) - 1}[mode]
    widths = data.draw(st.lists(st.tuples(st.integers(0, limit), st.integers(0, limit)),
                                min_size=len(shape), max_size=len(shape)))
    value = data.draw(st.integers(-3, 3)) if mode == "constant" else 0
    x = ops.input("X", shape)
    a = _arange(shape)
    y = ops.pad(x, widths, mode, value=value)
    kw = {"constant_values": value} if mode == "constant" else {}
    want = np.pad(a, widths, mode, **kw)
    got = a if y is x else run(ops.function({"Y": y}), {"X": a})["Y"]
    np.testing.assert_array_equal(got, want)


@PROPERTY
@given(shapes, st.data())
def test_shape_ops_match_numpy(shape: tuple[int, ...], data: st.DataObject) -> None:
    rank = len(shape)
    perm = data.draw(st.permutations(range(rank)))
    reps = data.draw(st.lists(st.integers(0, 3), min_size=1, max_size=4))
    rep = data.draw(st.integers(0, 3))
    axis = data.draw(st.integers(-rank, rank - 1))
    other = list(shape)
    other[axis] = data.draw(st.integers(0, 3))
    exclusive = data.draw(st.booleans())
    x = ops.input("X", shape)
    z = ops.input("Z", tuple(other))
    a, b = _arange(shape), _arange(tuple(other)) + 100
    outs = {"T": ops.transpose(x, perm), "L": ops.tile(x, reps), "R": ops.repeat(x, rep, axis),
            "C": ops.concatenate([x, z, x], axis), "F": ops.flip(x, axis),
            "K": ops.cumsum(x, axis, exclusive=exclusive)}
    fn = ops.function(outs)
    got = run(fn, {k: v for k, v in {"X": a, "Z": b}.items() if k in fn.inputs})
    np.testing.assert_array_equal(got["T"], a.transpose(perm))
    np.testing.assert_array_equal(got["L"], np.tile(a, reps))
    np.testing.assert_array_equal(got["R"], np.repeat(a, rep, axis))
    np.testing.assert_array_equal(got["C"], np.concatenate([a, b, a], axis))
    np.testing.assert_array_equal(got["F"], np.flip(a, axis))
    np.testing.assert_array_equal(got["K"], np.cumsum(a, axis) - (a if exclusive else 0))


# PlaidML 0.7 runs the same Tile ---------------------------------------------------------

_PLAIDML_WORKER = r'''
import json, os, sys
import numpy as np
os.environ.setdefault("PLAIDML_EXPERIMENTAL", "1")
os.environ.setdefault("PLAIDML_DEVICE_IDS", "llvm_cpu.0")
import plaidml
ctx = plaidml.Context()
dev = plaidml.Device(ctx, plaidml.devices(ctx, limit=10)[0])
DT = {"float32": plaidml.DType.FLOAT32, "int32": plaidml.DType.INT32}
results = {}
for name, p in json.load(open(sys.argv[1])).items():
    inv = plaidml.Invoker(ctx, plaidml.Function(p["source"]))
    for k, (vals, dt, shape) in p["inputs"].items():
        t = plaidml.Tensor(dev, plaidml.Shape(ctx, DT[dt], *shape))
        with t.mmap_discard(ctx) as view:
            view.copy_from_ndarray(np.array(vals, dt).reshape(shape))
            view.writeback()
        inv.set_input(k, t)
    dt, shape = p["out"]
    out = plaidml.Tensor(dev, plaidml.Shape(ctx, DT[dt], *shape))
    inv.set_output("Y", out)
    inv.invoke()
    res = np.empty(shape, dt)
    with out.mmap_current() as view:
        view.copy_to_ndarray(res)
    results[name] = res.tolist()
json.dump(results, open(sys.argv[2], "w"))
'''


def _plaidml_python() -> Path | None:
    import os
    venv = os.environ.get("STRIPE_BENCH_PEERS_VENV")
    root = Path(venv) if venv else Path.home() / ".cache" / "stripe-bench" / "peers-venv"
    python = root / "bin" / "python"
    return python if python.exists() else None


def _symbolic_declarations(source: str) -> str:
    """PlaidML 0.7 wants names for the sizes of input declarations (``X[D0, D1]``)."""
    import re
    head, rest = source.split(")", 1)
    count = iter(range(10**6))

    def names(m: re.Match[str]) -> str:
        sizes = ", ".join(f"D{next(count)}" for _ in m.group(2).split(","))
        return f"{m.group(1)}[{sizes}]"
    return re.sub(r"([A-Z][A-Za-z0-9_]*)\[([0-9, ]+)\]", names, head) + ")" + rest


def test_plaidml_runs_the_same_tile_with_the_same_results(tmp_path: Path) -> None:
    """The Tile the array ops write is PlaidML 0.7's language: run through PlaidML (the
    optional peers venv of benchmarks/setup_peers.sh), it gives the interpreter's results."""
    import json
    import subprocess
    python = _plaidml_python()
    if python is None:
        pytest.skip("PlaidML 0.7 is not installed (benchmarks/setup_peers.sh)")
    rng = np.random.default_rng(7)
    a = rng.integers(-3, 4, (3, 5, 4)).astype(np.float32)
    idx = np.array([2, -1, 0], np.int32)
    calls: dict[str, Callable[[ops.Tensor, ops.Tensor], ops.Tensor]] = {
        "argmax": lambda x, i: ops.argmax(x, 1),
        "getitem": lambda x, i: x[2:0:-1, ::-2, None, 1],
        "any": lambda x, i: ops.cast(ops.any(x, 1), "int32"),
        "pad_reflect": lambda x, i: ops.pad(x, ((1, 2), (0, 1), (3, 0)), "reflect"),
        "concatenate": lambda x, i: ops.concatenate([x, x[:, :2]], 1),
        "gather": lambda x, i: ops.gather(x, i, 1),
        "one_hot": lambda x, i: ops.one_hot(i, 4),
        "resize": lambda x, i: ops.resize(x, (7, 3), (1, 2), mode="bilinear"),
    }
    if LONG:
        calls |= {
            "argmin": lambda x, i: ops.argmin(x, -1),
            "variance": lambda x, i: ops.variance(x, 2),
            "pad_value": lambda x, i: ops.pad(x, 1, value=2.5),
            "sum": lambda x, i: ops.sum(x, (0, 2), keepdims=True),
            "mean": lambda x, i: ops.mean(x, 1), "prod": lambda x, i: ops.prod(x, 0),
            "pad_edge": lambda x, i: ops.pad(x, ((1, 2), (0, 1), (3, 0)), "edge"),
            "tile": lambda x, i: ops.tile(x, (2, 1, 2)),
            "repeat": lambda x, i: ops.repeat(x, 2, 1),
            "transpose": lambda x, i: ops.transpose(x, (2, 0, 1)),
            "broadcast": lambda x, i: ops.broadcast_to(x[:, :1], (2, 3, 5, 4)),
            "cumsum": lambda x, i: ops.cumsum(x, 1),
            "cumprod": lambda x, i: ops.cumprod(x, 2, exclusive=True),
            "clip": lambda x, i: ops.clip(x, -1, 2),
            "where": lambda x, i: ops.where(x > 0, x, -1.0),
            "nearest": lambda x, i: ops.resize(x, (7, 3), (1, 2)),
        }
    progs, want = {}, {}
    for name, call in calls.items():
        fn = ops.function({"Y": call(ops.input("X", a.shape), ops.input("I", (3,), "int32"))})
        arrays = {k: v for k, v in {"X": a, "I": idx}.items() if k in fn.inputs}
        want[name] = run(fn, arrays)["Y"]
        progs[name] = {"source": _symbolic_declarations(fn.source),
                       "inputs": {k: [v.tolist(), str(v.dtype), list(v.shape)]
                                  for k, v in arrays.items()},
                       "out": [str(want[name].dtype), list(want[name].shape)]}
    (tmp_path / "progs.json").write_text(json.dumps(progs))
    (tmp_path / "worker.py").write_text(_PLAIDML_WORKER)
    subprocess.run([str(python), str(tmp_path / "worker.py"), str(tmp_path / "progs.json"),
                    str(tmp_path / "out.json")], check=True, capture_output=True, timeout=600)
    got = json.loads((tmp_path / "out.json").read_text())
    for name in calls:
        np.testing.assert_allclose(np.array(got[name], want[name].dtype), want[name],
                                   rtol=1e-6, atol=1e-6, err_msg=name)
