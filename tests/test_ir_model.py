"""The IR data model: immutability, structural equality, helpers."""

import dataclasses

import pytest

from stripe.affine import Affine
from stripe.dtypes import DType, to_dtype
from stripe.errors import StripeError
from stripe.ir import Block, Index, Load, RefDir, Refinement, TensorShape


def _ref(into: str) -> Refinement:
    return Refinement(RefDir.IN, into, into, (Affine.of("i"),),
                      TensorShape.packed(DType.FLOAT32, (1,)))


def test_nodes_are_frozen_values():
    b = Block(name="k", idxs=(Index("i", 4),), refs=(_ref("A"),), stmts=(Load("A", "$A"),))
    with pytest.raises(dataclasses.FrozenInstanceError):
        b.name = "other"  # type: ignore[misc]
    twin = Block(name="k", idxs=(Index("i", 4),), refs=(_ref("A"),), stmts=(Load("A", "$A"),))
    assert b == twin and hash(b) == hash(twin)
    assert b != b.replace(name="other")


def test_replace_returns_same_object_when_unchanged():
    b = Block(name="k", idxs=(Index("i", 4),))
    assert b.replace(name="k") is b
    assert b.replace(idxs=(Index("i", 4),)) is b


def test_lookups_and_walk():
    inner = Block(name="inner", refs=(_ref("A"),))
    outer = Block(name="outer", idxs=(Index("i", 3), Index("j", 5)), stmts=(inner,))
    assert outer.range_product == 15
    assert outer.idx("j").range == 5 and not outer.has_idx("k")
    assert inner.ref("A").dir is RefDir.IN
    assert [p for p, _ in outer.walk()] == ["outer", "outer/inner"]


def test_packed_shape_is_row_major():
    s = TensorShape.packed(DType.INT8, (3, 4, 5))
    assert s.strides == (20, 5, 1) and s.span == 60 and s.byte_size == 60
    assert TensorShape.packed(DType.FLOAT32, (3, 0)).byte_size == 0


def test_shapes_take_new_sizes_or_new_strides():
    s = TensorShape.packed(DType.FLOAT32, (3, 4))
    assert s.with_strides((5, 1)).strides == (5, 1) and s.with_strides((5, 1)).sizes == (3, 4)
    assert s.with_sizes((2, 2)).strides == (4, 1) and s.with_sizes((2, 2)).sizes == (2, 2)
    assert s.with_strides(s.strides) == s


def test_dtype_names():
    assert to_dtype("float32") is DType.FLOAT32 is to_dtype("fp32")
    assert to_dtype(bool) is DType.BOOL
    assert to_dtype("float16") is DType.FLOAT16 is to_dtype("fp16")
    assert to_dtype("bfloat16") is DType.BFLOAT16 is to_dtype("bf16")
    assert to_dtype("uint64") is DType.UINT64 is to_dtype("u64")
    with pytest.raises(StripeError, match="unknown dtype 'complex64'; valid: bfloat16, bool"):
        to_dtype("complex64")
