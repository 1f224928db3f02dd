"""Harvest the Tile programs that PlaidML 0.7 composes, with PlaidML's own results.

Run by hand, in a virtual environment with ``plaidml==0.7.0`` (and, for the Keras backend
cases, ``plaidml-keras==0.7.0``), never in the project's own::

    PLAIDML_EXPERIMENTAL=1 PLAIDML_DEVICE_IDS=llvm_cpu.0 \\
        <peers-venv>/bin/python tests/plaidml/harvest.py --out tests/golden/plaidml

For every case below (one ordinary call of an operation of ``plaidml/op.py``, of the Keras
backend, or of the operators of ``plaidml.tile.Value``) the script builds the operation on
placeholders of small, odd shapes and writes:

* one ``composed`` entry: the whole graph as PlaidML's composer serialises it (inputs
  renamed ``X<name>``, ``[[pid(...)]]`` attributes, sizes taken from computed tensors), run
  by PlaidML on seeded random inputs;
* one ``op`` entry per distinct ``Operation.code`` of the graph: the Tile text of that
  operation, run by PlaidML on the values that reach it in the same graph (so that indexes
  stay in range), including PlaidML's scalar constants (rank-0 inputs) and constant tensors.

The corpus is ``index.json`` (each entry's source, inputs and outputs with shapes and
dtypes) and ``arrays.npz`` (inputs ``<entry>/in/<name>``, outputs ``<entry>/out/<name>``).
A case that PlaidML itself refuses or fails on is listed under ``skipped`` with the reason.
The output is deterministic: fixed seeds (CRC-32 of the entry name), sorted keys, and
numpy's zip writer, which stamps no dates.
"""

# ruff: noqa: E741  (tensor names follow Tile: I, O, ...)
from __future__ import annotations

import argparse
import collections
import collections.abc
import io
import json
import os
import pickle
import subprocess
import sys
import tempfile
import traceback
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("PLAIDML_EXPERIMENTAL", "1")
os.environ.setdefault("PLAIDML_DEVICE_IDS", "llvm_cpu.0")

import plaidml  # noqa: E402
import plaidml.op as op  # noqa: E402
import plaidml.tile as tile  # noqa: E402

DT = plaidml.DType
F32 = "float32"

# The scalar constants PlaidML binds (``plaidml.Integer``/``plaidml.Real``) do not keep their
# value on the Python side; remember it so that an ``op`` entry can record it as an input.
for _cls in (plaidml.Integer, plaidml.Real):
    _orig_init = _cls.__init__

    def _init(self: Any, value: Any, _orig: Callable[..., None] = _orig_init) -> None:
        _orig(self, value)
        self.py_value = value

    _cls.__init__ = _init  # type: ignore[method-assign]


def _keras_backend() -> Any:
    """The PlaidML Keras backend, or None when plaidml-keras is not installed. Keras 2.2.4
    still imports ``collections.Iterable`` & co., which Python 3.10 moved to
    ``collections.abc``; the aliases are restored for it."""
    for name in ("Iterable", "Mapping", "Sequence", "MutableMapping", "Callable"):
        if not hasattr(collections, name):
            setattr(collections, name, getattr(collections.abc, name))
    try:
        import plaidml.keras
        plaidml.keras.install_backend()
        import keras.backend as K  # type: ignore[import-not-found]
    except Exception as e:  # noqa: BLE001 - an optional extra
        print(f"no Keras backend ({type(e).__name__}: {e}); its cases are skipped",
              file=sys.stderr)
        return None
    return K


# ------------------------------------------------------------------------------ the cases

class In:
    """A placeholder of a case: name, shape, numpy dtype and the range of its values
    (``lo <= x < hi``; integers are drawn as integers)."""

    def __init__(self, name: str, shape: tuple[int, ...], dtype: str = F32,
                 lo: float = -2.0, hi: float = 2.0) -> None:
        self.name, self.shape, self.dtype, self.lo, self.hi = name, shape, dtype, lo, hi

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        dt = _dtype(self.dtype)
        if dt == np.bool_:
            return rng.integers(0, 2, self.shape).astype(np.bool_)
        if dt.kind in "iu":
            return rng.integers(int(self.lo), int(self.hi), self.shape).astype(dt)
        return rng.uniform(self.lo, self.hi, self.shape).astype(dt)


def _dtype(name: str) -> np.dtype:
    """numpy's dtype of that name; ``bfloat16`` is ml_dtypes'."""
    if name == "bfloat16":
        import ml_dtypes
        return np.dtype(ml_dtypes.bfloat16)
    return np.dtype(name)


Case = tuple[str, list[In], Callable[..., Any]]
AP = op.AutoPadding
NHWC = {"data_format": op.ConvolutionDataFormat.CHANNELS_LAST,
        "kernel_format": op.ConvolutionKernelFormat.CHANNELS_LAST}
CF = op.ConvolutionDataFormat
KF = op.ConvolutionKernelFormat
PF = op.PoolDataFormat


def op_cases() -> list[Case]:
    """Ordinary calls of every operation of ``plaidml/op.py`` and of ``tile.Value``."""
    x35 = [In("X", (3, 5))]
    x235 = [In("X", (2, 3, 5))]
    pos = [In("X", (3, 5), lo=0.1, hi=3.0)]
    nhwc = In("I", (1, 7, 6, 3))
    k2 = In("K", (3, 3, 3, 4))
    cases: list[Case] = [
        ("all", [In("X", (3, 5), "int32", 0, 3)], lambda X: op.all(X, axis=[1])),
        ("any_keepdims", [In("X", (3, 5), "int32", 0, 2)],
         lambda X: op.any(X, axis=[0], keepdims=True)),
        ("argmax_last", x235, lambda X: op.argmax(X)),
        ("argmax_axis0", x35, lambda X: op.argmax(X, axis=0)),
        ("average_pool_1d_valid", [In("I", (2, 3, 9))],
         lambda I: op.average_pool(I, (3,), (2,), padding=AP.VALID)),
        ("average_pool_2d_same_nxc", [In("I", (1, 7, 6, 2))],
         lambda I: op.average_pool(I, (3, 3), (2, 2), padding=AP.SAME_UPPER,
                                   data_format=PF.NXC)),
        ("average_pool_2d_explicit", [In("I", (1, 2, 7, 5))],
         lambda I: op.average_pool(I, (2, 3), (1, 2), pads=(1, 1), padding=AP.EXPLICIT)),
        ("binary_crossentropy", [In("T", (3, 5), lo=0, hi=1), In("O", (3, 5), lo=0.05, hi=0.95)],
         lambda T, O: op.binary_crossentropy(T, O, 1e-7)),
        ("cast_int32", x35, lambda X: op.cast(X, DT.INT32)),
        ("cast_float16", x35, lambda X: op.cast(X, DT.FLOAT16)),
        ("cast_uint8", [In("X", (3, 5), lo=0, hi=200)], lambda X: op.cast(X, DT.UINT8)),
        ("cast_int8_from_int32", [In("X", (3, 5), "int32", -100, 100)],
         lambda X: op.cast(X, DT.INT8)),
        ("cast_float64", x35, lambda X: op.cast(X, DT.FLOAT64)),
        ("cast_bool", [In("X", (3, 5), "int32", 0, 2)], lambda X: op.cast(X, DT.BOOLEAN)),
        ("ceiling", x35, lambda X: op.ceiling(X)),
        ("clip", x35, lambda X: op.clip(X, -0.5, 0.7)),
        ("concatenate_axis1", [In("A", (2, 3)), In("B", (2, 4)), In("C", (2, 1))],
         lambda A, B, C: op.concatenate([A, B, C], axis=1)),
        ("concatenate_axis0", [In("A", (2, 3, 2)), In("B", (3, 3, 2))],
         lambda A, B: op.concatenate([A, B], axis=0)),
        ("conv1d_valid", [In("I", (1, 9, 3)), In("K", (3, 3, 2))],
         lambda I, K: op.convolution(I, K, **NHWC, padding=AP.VALID)),
        ("conv1d_dilated", [In("I", (2, 11, 2)), In("K", (3, 2, 3))],
         lambda I, K: op.convolution(I, K, **NHWC, padding=AP.VALID, dilation_rate=(2,))),
        ("conv2d_same", [nhwc, k2],
         lambda I, K: op.convolution(I, K, **NHWC, padding=AP.SAME_UPPER)),
        ("conv2d_same_lower_strided", [nhwc, k2],
         lambda I, K: op.convolution(I, K, **NHWC, strides=(2, 2), padding=AP.SAME_LOWER)),
        ("conv2d_explicit", [nhwc, In("K", (2, 3, 3, 2))],
         lambda I, K: op.convolution(I, K, **NHWC, pads=(1, 0, 2, 1), padding=AP.EXPLICIT)),
        ("conv2d_nchw", [In("I", (1, 3, 7, 6)), In("K", (4, 3, 3, 3))],
         lambda I, K: op.convolution(I, K, padding=AP.VALID, data_format=CF.CHANNELS_FIRST,
                                     kernel_format=KF.CHANNELS_FIRST)),
        ("conv2d_dilated_strided", [In("I", (1, 9, 8, 2)), In("K", (3, 2, 2, 3))],
         lambda I, K: op.convolution(I, K, **NHWC, strides=(2, 1), dilation_rate=(2, 2),
                                     padding=AP.VALID)),
        ("conv2d_grouped", [In("I", (1, 5, 6, 4)), In("K", (3, 3, 2, 6))],
         lambda I, K: op.convolution(I, K, **NHWC, padding=AP.VALID, group=2,
                                     grouping=op.ConvolutionGrouping.EXPLICIT,
                                     group_format=op.GroupedChannelFormat.FullOutGroupIn)),
        ("conv2d_depthwise", [In("I", (1, 5, 6, 3)), In("K", (3, 3, 3, 1))],
         lambda I, K: op.convolution(I, K, **NHWC, padding=AP.SAME_UPPER,
                                     grouping=op.ConvolutionGrouping.MAX,
                                     group_format=op.GroupedChannelFormat.GroupGroupOut)),
        ("conv3d_same", [In("I", (1, 5, 4, 6, 2)), In("K", (3, 2, 3, 2, 3))],
         lambda I, K: op.convolution(I, K, **NHWC, strides=(2, 1, 2), padding=AP.SAME_UPPER)),
        ("conv_transpose2d", [In("I", (1, 4, 3, 2)), In("K", (3, 3, 3, 2))],
         lambda I, K: op.convolution_transpose(
             I, K, (1, 9, 7, 3), (2, 2), AP.VALID, CF.CHANNELS_LAST, KF.CHANNELS_LAST)),
        ("cos", x35, lambda X: op.cos(X)),
        ("cumulative_sum", x35, lambda X: op.cumulative_sum(X, axis=1)),
        ("cumulative_prod", [In("X", (3, 5), lo=0.5, hi=1.5)],
         lambda X: op.cumulative_prod(X, axis=0)),
        ("dot_2d", [In("A", (3, 5)), In("B", (5, 4))], lambda A, B: op.dot(A, B)),
        ("dot_3d", [In("A", (2, 3, 5)), In("B", (5, 4))], lambda A, B: op.dot(A, B)),
        ("elu", x35, lambda X: op.elu(X, alpha=0.7)),
        ("equal", [In("A", (3, 5), "int32", 0, 3), In("B", (3, 5), "int32", 0, 3)],
         lambda A, B: op.equal(A, B)),
        ("exp", x35, lambda X: op.exp(X)),
        ("flatten", x235, lambda X: op.flatten(X)),
        ("floor", x35, lambda X: op.floor(X)),
        ("gather", [In("V", (5, 3)), In("I", (4,), "int32", 0, 5)],
         lambda V, I: op.gather(V, I)),
        ("gather_2d_index", [In("V", (6, 2, 3)), In("I", (2, 3), "int32", 0, 6)],
         lambda V, I: op.gather(V, I)),
        ("gemm", [In("A", (3, 5)), In("B", (5, 4)), In("C", (4,))],
         lambda A, B, C: op.gemm(A, B, C, alpha=0.5, beta=2.0)),
        ("gemm_trans", [In("A", (5, 3)), In("B", (4, 5)), In("C", (3, 4))],
         lambda A, B, C: op.gemm(A, B, C, transA=True, transB=True)),
        ("hardmax", x35, lambda X: op.hardmax(X)),
        ("identity", x35, lambda X: op.identity(X)),
        ("ismax", x35, lambda X: op.ismax(X, axes=(1,))),
        ("log", pos, lambda X: op.log(X)),
        ("log_softmax", x35, lambda X: op.log_softmax(X, axis=1)),
        ("log_softmax_3d", x235, lambda X: op.log_softmax(X, axis=1)),
        ("matmul_2d", [In("A", (3, 5)), In("B", (5, 4))], lambda A, B: op.matmul(A, B)),
        ("matmul_batched", [In("A", (2, 3, 5)), In("B", (2, 5, 4))],
         lambda A, B: op.matmul(A, B)),
        ("max_reduce_keepdims", x235, lambda X: op.max_reduce(X, axes=(1,), keepdims=True)),
        ("max_reduce_all", x235, lambda X: op.max_reduce(X)),
        ("max_pool_2d_valid", [In("I", (1, 2, 7, 6))],
         lambda I: op.max_pool(I, (2, 2), (2, 2), padding=AP.VALID)),
        ("max_pool_2d_same_nxc", [In("I", (2, 5, 7, 3))],
         lambda I: op.max_pool(I, (3, 3), (2, 2), padding=AP.SAME_UPPER, data_format=PF.NXC)),
        ("max_pool_1d_explicit", [In("I", (1, 2, 8))],
         lambda I: op.max_pool(I, (3,), (1,), pads=(1, 2), padding=AP.EXPLICIT)),
        ("mean_axes", x235, lambda X: op.mean(X, axes=(0, 2))),
        ("mean_keepdims", x235, lambda X: op.mean(X, axes=(1,), keepdims=True)),
        ("min_reduce", x235, lambda X: op.min_reduce(X, axes=(2,))),
        ("not_equal", [In("A", (3, 5), "int32", 0, 3), In("B", (5,), "int32", 0, 3)],
         lambda A, B: op.not_equal(A, B)),
        ("pow", pos, lambda X: op.pow(X, 1.5)),
        ("prod_keepdims", [In("X", (3, 5), lo=0.5, hi=1.5)],
         lambda X: op.prod(X, axes=(1,), keepdims=True)),
        ("relu", x35, lambda X: op.relu(X)),
        ("relu_alpha_max", x35, lambda X: op.relu(X, alpha=0.1, max_value=1.0)),
        ("relu_threshold", x35, lambda X: op.relu(X, threshold=0.5)),
        ("reshape", x235, lambda X: op.reshape(X, (5, 6))),
        ("reshape_infer", x235, lambda X: op.reshape(X, (3, -1))),
        ("sigmoid", x35, lambda X: op.sigmoid(X)),
        ("sin", x35, lambda X: op.sin(X)),
        ("slice_tensor", x235, lambda X: op.slice_tensor(X, axes=[1, 2], starts=[1, 0],
                                                         ends=[3, 4])),
        ("softmax", x35, lambda X: op.softmax(X, axis=1)),
        ("softmax_axis0", x235, lambda X: op.softmax(X, axis=0)),
        ("sqrt", pos, lambda X: op.sqrt(X)),
        ("squeeze", [In("X", (3, 1, 5))], lambda X: op.squeeze(X, [1])),
        ("summation_keepdims", x235, lambda X: op.summation(X, axes=(0, 2), keepdims=True)),
        ("summation_int", [In("X", (3, 5), "int32", -9, 9)],
         lambda X: op.summation(X, axes=(1,))),
        ("tanh", x35, lambda X: op.tanh(X)),
        ("unsqueeze", x35, lambda X: op.unsqueeze(X, [0])),
        ("variance", x235, lambda X: op.variance(X, axes=(1,))),
        ("variance_keepdims", x235, lambda X: op.variance(X, axes=(0, 2), keepdims=True)),
        ("extract_image_patches", [In("I", (1, 5, 6, 2))],
         lambda I: op.extract_image_patches(I, (1, 2, 3, 1), (1, 2, 2, 1))),
        ("reflection_padding", [In("I", (1, 4, 5, 2))],
         lambda I: op.reflection_padding(I, [0, (1, 2), 1, 0])),
        # the operators and helpers of tile.Value
        ("value_arith", [In("A", (3, 5)), In("B", (5,))],
         lambda A, B: (A + B) * 2.0 - A / (B * B + 1.0)),
        ("value_neg_abs", x35, lambda X: abs(-X)),
        ("value_compare", [In("A", (3, 5)), In("B", (3, 5))], lambda A, B: A < B),
        ("value_int_ops", [In("A", (3, 5), "int32", -20, 20), In("B", (3, 5), "int32", 1, 5)],
         lambda A, B: (A >> 1) + (A & B) - (A | B) + (A ^ B)),
        ("value_floordiv", [In("A", (3, 5), "int32", -20, 20), In("B", (3, 5), "int32", 1, 5)],
         lambda A, B: A // B),
        ("value_maximum", [In("A", (3, 5)), In("B", (3, 5))],
         lambda A, B: tile.maximum(A, B) - tile.minimum(A, 0.0)),
        ("value_slice", [In("X", (5, 7))], lambda X: X[1:4, ::2]),
        ("value_slice_negative", [In("X", (5, 7))], lambda X: X[::-1, -3]),
        ("value_mixed_int_float", [In("A", (3, 5)), In("N", (3, 5), "int32", -3, 3)],
         lambda A, N: A * N),
        ("shape_of", x235, lambda X: op.shape_of(X)),
        # more calls: padding modes, ranks and layouts not covered above
        ("average_pool_2d_same_lower", [In("I", (1, 2, 6, 7))],
         lambda I: op.average_pool(I, (3, 2), (2, 3), padding=AP.SAME_LOWER)),
        ("max_pool_3d_same", [In("I", (1, 5, 4, 5, 2))],
         lambda I: op.max_pool(I, (2, 3, 2), (2, 2, 1), padding=AP.SAME_UPPER,
                               data_format=PF.NXC)),
        ("conv1d_same_strided", [In("I", (2, 10, 3)), In("K", (4, 3, 2))],
         lambda I, K: op.convolution(I, K, **NHWC, strides=(3,), padding=AP.SAME_UPPER)),
        ("conv2d_nchw_grouped", [In("I", (1, 4, 6, 5)), In("K", (6, 2, 3, 2))],
         lambda I, K: op.convolution(I, K, padding=AP.SAME_UPPER, group=2,
                                     data_format=CF.CHANNELS_FIRST,
                                     kernel_format=KF.CHANNELS_FIRST,
                                     grouping=op.ConvolutionGrouping.EXPLICIT,
                                     group_format=op.GroupedChannelFormat.FullOutGroupIn)),
        ("conv_transpose1d", [In("I", (1, 5, 2)), In("K", (3, 3, 2))],
         lambda I, K: op.convolution_transpose(
             I, K, (1, 11, 3), (2,), AP.VALID, CF.CHANNELS_LAST, KF.CHANNELS_LAST)),
        ("conv2d_winograd_same", [In("I", (1, 7, 9, 5)), In("K", (3, 3, 5, 6))],
         lambda I, K: op.convolution(I, K, **NHWC, padding=AP.SAME_UPPER)),
        ("conv2d_winograd_valid", [In("I", (2, 8, 7, 6)), In("K", (3, 3, 6, 5))],
         lambda I, K: op.convolution(I, K, **NHWC, padding=AP.VALID)),
        ("slice_tensor_negative", x235,
         lambda X: op.slice_tensor(X, axes=[2], starts=[-4], ends=[-1])),
        ("cumulative_sum_3d", x235, lambda X: op.cumulative_sum(X, axis=2)),
        ("pow_tensor", [In("X", (3, 5), lo=0.5, hi=2.0), In("P", (3, 5), lo=-1.0, hi=2.0)],
         lambda X, P: op.pow(X, P)),
        ("mean_int", [In("X", (3, 5), "int32", -9, 9)], lambda X: op.mean(X, axes=(1,))),
        ("prod_int", [In("X", (3, 4), "int32", -3, 4)], lambda X: op.prod(X, axes=(0,))),
        ("max_reduce_int8", [In("X", (3, 5), "int8", -100, 100)],
         lambda X: op.max_reduce(X, axes=(1,))),
        ("gemm_no_broadcast", [In("A", (3, 5)), In("B", (5, 4)), In("C", (3, 4))],
         lambda A, B, C: op.gemm(A, B, C, broadcast=False)),
        ("matmul_broadcast", [In("A", (2, 1, 3, 5)), In("B", (3, 5, 4))],
         lambda A, B: op.matmul(A, B)),
        ("concatenate_int", [In("A", (2, 3), "int32", -5, 5), In("B", (2, 2), "int32", -5, 5)],
         lambda A, B: op.concatenate([A, B], axis=-1)),
        ("gather_int", [In("V", (5,), "int32", -9, 9), In("I", (2, 2), "int32", 0, 5)],
         lambda V, I: op.gather(V, I)),
        ("value_scalar_int", [In("A", (3, 5))], lambda A: A * 2 + 1),
        ("value_rank0_int_input", [In("A", (3, 5)), In("N", (), "int32", 1, 5)],
         lambda A, N: A * N),
        ("value_rank0_float_input", [In("A", (2, 3), "int32", -5, 5), In("S", ())],
         lambda A, S: A + S),
    ]
    cases += dtype_cases()
    cases += gradient_cases()
    return cases


def gradient_cases() -> list[Case]:
    """PlaidML's automatic derivatives (``op.gradients``): the Tile of the backward graph."""
    def loss_conv(I: Any, K: Any) -> Any:
        return op.summation(op.relu(op.convolution(I, K, **NHWC, strides=(2, 1),
                                                   padding=AP.SAME_UPPER)))

    return [
        ("grad_conv_relu", [In("I", (1, 6, 5, 2)), In("K", (3, 3, 2, 3))],
         lambda I, K: op.gradients(loss_conv(I, K), [I, K])),
        ("grad_matmul_tanh", [In("A", (3, 5)), In("B", (5, 4))],
         lambda A, B: op.gradients(op.summation(op.tanh(op.matmul(A, B))), [A, B])),
        ("grad_softmax_log", [In("X", (3, 5))],
         lambda X: op.gradients(op.summation(op.log(op.softmax(X, axis=1))
                                             * op.exp(X)), [X])),
        ("grad_max_pool", [In("I", (1, 2, 6, 5))],
         lambda I: op.gradients(op.summation(op.max_pool(I, (2, 2), (2, 2),
                                                         padding=AP.VALID) * 3.0), [I])),
        ("grad_mean_variance", [In("X", (2, 3, 5))],
         lambda X: op.gradients(op.summation(op.variance(X, axes=(1,))), [X])),
    ]


def dtype_cases() -> list[Case]:
    """Element types other than float32/int32: arithmetic, promotion, reductions, casts."""
    cases: list[Case] = []
    ranges = {"int8": (-60, 60), "int16": (-300, 300), "int64": (-10**6, 10**6),
              "uint8": (0, 120), "uint16": (0, 30000), "uint32": (0, 10**6),
              "uint64": (0, 10**6), "float16": (-4, 4), "bfloat16": (-4, 4),
              "float64": (-4, 4), "bool": (0, 2)}
    for dt, (lo, hi) in ranges.items():
        a, b = In("A", (3, 5), dt, lo, hi), In("B", (5,), dt, lo, hi)
        if dt != "bool":
            cases.append((f"dt_{dt}_add_mul", [a, b], lambda A, B: A + B * B))
            cases.append((f"dt_{dt}_sum", [a], lambda A: op.summation(A, axes=(1,))))
            cases.append((f"dt_{dt}_max_keepdims", [a],
                          lambda A: op.max_reduce(A, axes=(0,), keepdims=True)))
        cases.append((f"dt_{dt}_compare", [a, b], lambda A, B: A < B))
        cases.append((f"dt_{dt}_with_float32", [a, In("F", (5,))], lambda A, F: A * F))
        cases.append((f"dt_{dt}_with_int32", [a, In("I", (3, 1), "int32", 0, 9)],
                      lambda A, I: A + I))
        cases.append((f"dt_{dt}_to_float32", [a], lambda A: op.cast(A, DT.FLOAT32)))
    for dt in ("float16", "bfloat16", "float64"):
        cases.append((f"dt_{dt}_exp_tanh", [In("A", (3, 5), dt, -3, 3)],
                      lambda A: op.exp(A) - op.tanh(A)))
        cases.append((f"dt_{dt}_softmax", [In("A", (3, 5), dt, -3, 3)],
                      lambda A: op.softmax(A, axis=1)))
        cases.append((f"dt_{dt}_matmul", [In("A", (3, 5), dt), In("B", (5, 4), dt)],
                      lambda A, B: op.matmul(A, B)))
    for target in (DT.INT8, DT.INT16, DT.INT64, DT.UINT16, DT.UINT32, DT.UINT64,
                   DT.BFLOAT16):
        nm = target.name.lower()
        cases.append((f"cast_{nm}", [In("X", (3, 5), lo=-1000, hi=1000)],
                      lambda X, t=target: op.cast(X, t)))
    cases.append(("cast_uint8_wraps", [In("X", (3, 5), "int32", -300, 300)],
                  lambda X: op.cast(X, DT.UINT8)))
    cases.append(("cast_int8_from_float_negative", [In("X", (3, 5), lo=-100, hi=100)],
                  lambda X: op.cast(X, DT.INT8)))
    return cases


def keras_cases(K: Any) -> list[Case]:
    """Ordinary calls of the PlaidML Keras backend's own operations."""
    x35 = [In("X", (3, 5))]
    x235 = [In("X", (2, 3, 5))]
    return [
        ("k_argmin", x235, lambda X: K.argmin(X, axis=1)),
        ("k_batch_dot", [In("A", (2, 3, 4)), In("B", (2, 4, 5))],
         lambda A, B: K.batch_dot(A, B, axes=(2, 1))),
        ("k_batch_flatten", x235, lambda X: K.batch_flatten(X)),
        ("k_batch_normalization", [In("X", (2, 3, 5)), In("M", (5,)), In("V", (5,), lo=0.5),
                                   In("B", (5,)), In("G", (5,))],
         lambda X, M, V, B, G: K.batch_normalization(X, M, V, B, G, epsilon=1e-3)),
        ("k_bias_add", [In("X", (1, 4, 3, 2)), In("B", (2,))], lambda X, B: K.bias_add(X, B)),
        ("k_categorical_crossentropy", [In("T", (3, 5), lo=0, hi=1),
                                        In("O", (3, 5), lo=0.05, hi=1)],
         lambda T, O: K.categorical_crossentropy(T, O)),
        ("k_conv2d_same", [In("I", (1, 7, 6, 3)), In("W", (3, 3, 3, 4))],
         lambda I, W: K.conv2d(I, W, strides=(2, 2), padding="same")),
        ("k_conv2d_channels_first", [In("I", (1, 3, 7, 6)), In("W", (3, 2, 3, 2))],
         lambda I, W: K.conv2d(I, W, padding="valid", data_format="channels_first",
                                dilation_rate=(2, 1))),
        ("k_conv1d_causal", [In("I", (1, 9, 2)), In("W", (3, 2, 3))],
         lambda I, W: K.conv1d(I, W, padding="causal")),
        ("k_conv2d_transpose", [In("I", (1, 4, 3, 2)), In("W", (3, 3, 3, 2))],
         lambda I, W: K.conv2d_transpose(I, W, (1, 8, 6, 3), strides=(2, 2),
                                          padding="same")),
        ("k_depthwise_conv2d", [In("I", (1, 5, 6, 3)), In("W", (3, 3, 3, 2))],
         lambda I, W: K.depthwise_conv2d(I, W, padding="same")),
        ("k_separable_conv2d", [In("I", (1, 5, 6, 3)), In("D", (3, 3, 3, 1)),
                                In("P", (1, 1, 3, 4))],
         lambda I, D, P: K.separable_conv2d(I, D, P, padding="valid")),
        ("k_elu", x35, lambda X: K.elu(X, 0.5)),
        ("k_equal", [In("A", (3, 5), "int32", 0, 3), In("B", (3, 5), "int32", 0, 3)],
         lambda A, B: K.equal(A, B)),
        ("k_greater_equal", [In("A", (3, 5)), In("B", (3, 5))],
         lambda A, B: K.greater_equal(A, B)),
        ("k_hard_sigmoid", x35, lambda X: K.hard_sigmoid(X)),
        ("k_l2_normalize", x35, lambda X: K.l2_normalize(X, axis=1)),
        ("k_logsumexp", x235, lambda X: K.logsumexp(X, axis=1, keepdims=True)),
        ("k_max_keepdims", x235, lambda X: K.max(X, axis=2, keepdims=True)),
        ("k_min", x235, lambda X: K.min(X, axis=0)),
        ("k_mean", x235, lambda X: K.mean(X, axis=-1)),
        ("k_one_hot", [In("I", (2, 3), "int32", 0, 4)], lambda I: K.one_hot(I, 4)),
        ("k_permute_dimensions", x235, lambda X: K.permute_dimensions(X, (2, 0, 1))),
        ("k_pool2d_avg_same", [In("I", (1, 7, 5, 2))],
         lambda I: K.pool2d(I, (3, 2), strides=(2, 2), padding="same", pool_mode="avg")),
        ("k_pool2d_max_valid", [In("I", (2, 7, 5, 3))],
         lambda I: K.pool2d(I, (2, 2), strides=(1, 2), padding="valid", pool_mode="max")),
        ("k_pool3d_max", [In("I", (1, 4, 5, 4, 2))],
         lambda I: K.pool3d(I, (2, 2, 2), strides=(2, 2, 2), padding="valid")),
        ("k_prod", [In("X", (3, 5), lo=0.5, hi=1.5)], lambda X: K.prod(X, axis=1)),
        ("k_repeat", [In("X", (2, 3))], lambda X: K.repeat(X, 4)),
        ("k_repeat_elements", x235, lambda X: K.repeat_elements(X, 2, axis=1)),
        ("k_resize_images_nearest", [In("I", (1, 3, 4, 2))],
         lambda I: K.resize_images(I, 2, 3, "channels_last")),
        ("k_resize_images_bilinear", [In("I", (1, 3, 4, 2))],
         lambda I: K.resize_images(I, 2, 2, "channels_last", interpolation="bilinear")),
        ("k_reverse", x235, lambda X: K.reverse(X, axes=(0, 2))),
        ("k_round", x35, lambda X: K.round(X)),
        ("k_sign", x35, lambda X: K.sign(X)),
        ("k_softmax", x235, lambda X: K.softmax(X)),
        ("k_softplus", x35, lambda X: K.softplus(X)),
        ("k_softsign", x35, lambda X: K.softsign(X)),
        ("k_sparse_categorical_crossentropy", [In("T", (3,), "int32", 0, 5),
                                               In("O", (3, 5), lo=0.05, hi=1)],
         lambda T, O: K.sparse_categorical_crossentropy(T, O)),
        ("k_spatial_2d_padding", [In("I", (1, 3, 4, 2))],
         lambda I: K.spatial_2d_padding(I, ((1, 2), (0, 1)))),
        ("k_spatial_3d_padding", [In("I", (1, 2, 3, 2, 1))],
         lambda I: K.spatial_3d_padding(I, ((1, 0), (0, 1), (1, 1)))),
        ("k_square", x35, lambda X: K.square(X)),
        ("k_squeeze", [In("X", (3, 1, 5))], lambda X: K.squeeze(X, 1)),
        ("k_stack", [In("A", (2, 3)), In("B", (2, 3))], lambda A, B: K.stack([A, B], axis=1)),
        ("k_std", x235, lambda X: K.std(X, axis=1)),
        ("k_sum", x235, lambda X: K.sum(X, axis=(0, 2))),
        ("k_switch", [In("C", (3, 5), "bool"), In("A", (3, 5)), In("B", (3, 5))],
         lambda C, A, B: K.switch(C, A, B)),
        ("k_temporal_padding", [In("I", (2, 3, 2))], lambda I: K.temporal_padding(I, (2, 1))),
        ("k_tile", [In("X", (2, 3))], lambda X: K.tile(X, (2, 3))),
        ("k_transpose", x35, lambda X: K.transpose(X)),
        ("k_var_keepdims", x235, lambda X: K.var(X, axis=2, keepdims=True)),
        ("k_expand_dims", x35, lambda X: K.expand_dims(X, 1)),
        ("k_arange", [], lambda: K.arange(2, 11, 3)),
        ("k_eye", [], lambda: K.eye(4)),
        ("k_ones_like", x35, lambda X: K.ones_like(X)),
        ("k_normalize_batch_in_training", [In("X", (2, 4, 3)), In("G", (3,)), In("B", (3,))],
         lambda X, G, B: K.normalize_batch_in_training(X, G, B, [0, 1])),
        ("k_conv3d", [In("I", (1, 4, 5, 3, 2)), In("W", (2, 3, 2, 2, 3))],
         lambda I, W: K.conv3d(I, W, strides=(1, 2, 1), padding="same")),
        ("k_conv3d_transpose", [In("I", (1, 2, 3, 2, 2)), In("W", (2, 2, 2, 3, 2))],
         lambda I, W: K.conv3d_transpose(I, W, (1, 4, 6, 4, 3), strides=(2, 2, 2),
                                         padding="valid")),
        ("k_pool3d_avg_same", [In("I", (1, 3, 5, 4, 2))],
         lambda I: K.pool3d(I, (2, 2, 3), strides=(2, 1, 2), padding="same",
                            pool_mode="avg")),
        ("k_resize_volumes", [In("I", (1, 2, 3, 2, 2))],
         lambda I: K.resize_volumes(I, 2, 1, 3, "channels_last")),
        ("k_dot_3d", [In("A", (2, 3, 4)), In("B", (5, 4, 3))], lambda A, B: K.dot(A, B)),
        ("k_relu_alpha_max", x35, lambda X: K.relu(X, alpha=0.2, max_value=1.5)),
        ("k_cumsum", x235, lambda X: K.cumsum(X, axis=1)),
        ("k_gather", [In("V", (5, 2)), In("I", (3,), "int32", 0, 5)],
         lambda V, I: K.gather(V, I)),
        ("k_concatenate", [In("A", (2, 3)), In("B", (2, 2))],
         lambda A, B: K.concatenate([A, B], axis=-1)),
        ("k_cast_float16", x35, lambda X: K.cast(X, "float16")),
    ]


# ------------------------------------------------------------------------------ running

class Skip(Exception):
    """A case or an operation that PlaidML does not run (the reason is the message)."""


class Runner:
    """One PlaidML device; runs functions on numpy inputs."""

    def __init__(self, K: Any = None) -> None:
        if K is not None:     # the Keras backend's constants live on its own device
            self.ctx, self.dev = K._ctx, K._device()
        else:
            self.ctx = plaidml.Context()
            self.dev = plaidml.Device(self.ctx, plaidml.devices(self.ctx, limit=10)[0])

    def tensor(self, arr: np.ndarray) -> Any:
        pml = tile.convert_np_dtype_to_pml(arr.dtype.name)
        t = plaidml.Tensor(self.dev, plaidml.Shape(self.ctx, pml, *arr.shape))
        with t.mmap_discard(self.ctx) as view:
            view.copy_from_ndarray(np.ascontiguousarray(arr))
            view.writeback()
        return t

    def read(self, t: Any) -> np.ndarray:
        shape = t.shape
        dims = tuple(d.size for d in shape.dimensions)
        arr = np.zeros(dims, _dtype(tile.convert_pml_dtype_to_np(shape.dtype)))
        with t.mmap_current() as view:
            view.copy_to_ndarray(arr)
        return arr

    def invoke(self, func: Any, inputs: dict[str, Any],
               outputs: list[str]) -> dict[str, np.ndarray]:
        """Run ``func`` with ``inputs`` (numpy arrays or PlaidML variables)."""
        inv = plaidml.Invoker(self.ctx, func)
        for name, v in inputs.items():
            inv.set_input(name, self.tensor(v) if isinstance(v, np.ndarray) else v)
        result = {}
        for name in outputs:
            shape = inv.get_output_shape(name)
            dims = tuple(d.size for d in shape.dimensions)
            t = plaidml.Tensor(self.dev, plaidml.Shape(self.ctx, shape.dtype, *dims))
            inv.set_output(name, t)
            result[name] = t
        inv.invoke()
        return {name: self.read(t) for name, t in result.items()}


def _np_dtype(pml: Any) -> str:
    return str(np.dtype(tile.convert_pml_dtype_to_np(pml)))


def _graph_ops(outputs: list[Any]) -> list[Any]:
    """The operations that compute ``outputs``, inputs before users."""
    order: list[Any] = []
    seen: set[int] = set()

    def visit(value: Any) -> None:
        src = getattr(value, "source", None)
        if src is None:
            return
        o = src.op
        if id(o) in seen:
            return
        seen.add(id(o))
        for v in o.inputs.values():
            visit(v)
        order.append(o)

    for v in outputs:
        visit(v)
    return order


def _header_names(code: str) -> tuple[list[str], list[str]]:
    """The input and output names of a Tile function's header."""
    head = code[code.index("(") + 1:]
    ins_text, rest = head.split("->", 1)
    ins_text = ins_text.rsplit(")", 1)[0]
    outs_text = rest[rest.index("(") + 1:rest.index(")")]
    names, depth, cur = [], 0, ""
    for ch in ins_text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            names.append(cur)
            cur = ""
            continue
        if depth == 0 and ch != "]":
            cur += ch
    names.append(cur)
    ins = [n.strip() for n in names if n.strip()]
    outs = [n.strip() for n in outs_text.split(",") if n.strip()]
    return ins, outs


def _spec(arr: np.ndarray, const: bool = False) -> dict[str, Any]:
    d: dict[str, Any] = {"shape": list(arr.shape), "dtype": str(arr.dtype)}
    if const:
        d["const"] = True
    return d


class Corpus:
    """Entries (index rows), their arrays by key, and the skipped programs."""

    def __init__(self) -> None:
        self.entries: list[dict[str, Any]] = []
        self.arrays: dict[str, np.ndarray] = {}
        self.skipped: list[dict[str, str]] = []
        self.codes: set[str] = set()   # keys of the op entries so far (duplicates dropped)

    def merge(self, part: Corpus) -> None:
        """Add the entries of one case; an ``op`` entry whose code and input shapes, dtypes
        and constants another case already gave is dropped, a repeated name numbered."""
        self.skipped += part.skipped
        names = {e["name"] for e in self.entries}
        for e in part.entries:
            if e["kind"] == "op":
                consts = {k: part.arrays[f"{e['name']}/in/{k}"].tolist()
                          for k, v in e["inputs"].items() if v.get("const")}
                key = json.dumps([e["source"], e["inputs"], consts], sort_keys=True)
                if key in self.codes:
                    continue
                self.codes.add(key)
            name, k = e["name"], 2
            while name in names:
                name, k = f"{e['name']}{k}", k + 1
            names.add(name)
            prefix = e["name"] + "/"
            for key_, arr in part.arrays.items():
                if key_.startswith(prefix):
                    self.arrays[name + "/" + key_[len(prefix):]] = arr
            self.entries.append(dict(e, name=name))

    def add(self, name: str, kind: str, case: str, source: str,
            inputs: dict[str, np.ndarray], consts: set[str],
            outputs: dict[str, np.ndarray]) -> None:
        self.entries.append({
            "name": name, "kind": kind, "case": case, "source": source,
            "inputs": {k: _spec(v, k in consts) for k, v in inputs.items()},
            "outputs": {k: _spec(v) for k, v in outputs.items()},
        })
        for k, v in inputs.items():
            self.arrays[f"{name}/in/{k}"] = v
        for k, v in outputs.items():
            self.arrays[f"{name}/out/{k}"] = v


def harvest_case(run: Runner, corpus: Corpus, case: Case) -> None:
    name, ins, fn = case
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    data = {i.name: i.draw(rng) for i in ins}
    holders = {i.name: tile.Value.from_dimensions(
        i.shape, tile.convert_np_dtype_to_pml(i.dtype), name=i.name) for i in ins}
    try:
        out = fn(**holders)
    except Exception as e:  # noqa: BLE001 - PlaidML's op library refuses the call
        raise Skip(f"building the operation: {type(e).__name__}: {e}") from e
    outs = {"Y": out} if not isinstance(out, (tuple, list)) else {
        f"Y{k}": v for k, v in enumerate(out)}

    # the composed whole graph
    try:
        func = tile.compose(run.ctx, run.dev, [(k, v) for k, v in holders.items()],
                            list(outs.items()), name=name)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "f.tpb")
            func.save(path)
            with zipfile.ZipFile(path) as z:
                code = z.read("code").decode()
        hdr_in, hdr_out = _header_names(code)
        given = {"X" + k: v for k, v in data.items()}
        consts = _composer_constants(run, [n for n in hdr_in if n not in given], outs)
        result = run.invoke(func, dict(data), list(outs))
        corpus.add(name, "composed", name, code, {**given, **consts}, set(consts),
                   {"X" + k: v for k, v in result.items()})
    except Skip as e:
        corpus.skipped.append({"name": name, "kind": "composed", "reason": str(e)})
    except Exception as e:  # noqa: BLE001
        corpus.skipped.append({"name": name, "kind": "composed",
                               "reason": f"PlaidML fails: {type(e).__name__}: {e}"[:500]})

    # each operation of the graph, on the values that reach it
    values: dict[tuple[int, str], np.ndarray] = {}
    by_var = {id(h.var): k for k, h in holders.items()}
    for o in _graph_ops(list(outs.values())):
        label = f"{name}.{o.name.replace('/', '_')}"
        if not o.code:
            if isinstance(o, tile._NDArray):
                values[(id(o), "O")] = np.asarray(o._value)
                continue
            corpus.skipped.append({"name": label, "kind": "op", "reason": (
                f"{type(o).__name__} has no Tile code of its own (the composer writes it "
                f"into the composed entry)")})
            return
        op_in: dict[str, Any] = {}
        arrays: dict[str, np.ndarray] = {}
        consts: set[str] = set()
        try:
            for k, v in o.inputs.items():
                if v.source is not None:
                    arr = values[(id(v.source.op), v.source.output_name)]
                    op_in[k] = arrays[k] = arr
                elif id(v.var) in by_var:
                    op_in[k] = arrays[k] = data[by_var[id(v.var)]]
                elif isinstance(v.var, plaidml.Tensor):
                    arrays[k] = run.read(v.var)
                    op_in[k] = v.var
                    consts.add(k)
                elif isinstance(v.var, (plaidml.Integer, plaidml.Real, int, float)):
                    py = getattr(v.var, "py_value", v.var)
                    is_int = isinstance(v.var, (plaidml.Integer, int))
                    arrays[k] = np.array(py, np.int32 if is_int else np.float32)
                    op_in[k] = v.var
                    consts.add(k)
                else:
                    raise Skip(f"input {k} is a {type(v.var).__name__}")
            func = plaidml.Function(o.code)
            result = run.invoke(func, op_in, list(o.outputs))
        except Skip as e:
            corpus.skipped.append({"name": label, "kind": "op", "reason": str(e)})
            return
        except Exception as e:  # noqa: BLE001
            corpus.skipped.append({"name": label, "kind": "op",
                                   "reason": f"PlaidML fails: {type(e).__name__}: {e}"[:500]})
            return
        for k, arr in result.items():
            values[(id(o), k)] = arr
        corpus.add(_unique(label, corpus), "op", name, o.code, arrays, consts, result)


def _composer_constants(run: Runner, names: list[str],
                        outs: dict[str, Any]) -> dict[str, np.ndarray]:
    """The values of the composed function's inputs ``names`` (``X_I_<k>``): the constant
    tensors of the graph, which the composer binds itself under names that do not say which
    tensor each is. Recorded only where that cannot matter: one constant tensor, or several
    equal ones; otherwise the composed form is skipped."""
    if not names:
        return {}
    tensors: dict[int, np.ndarray] = {}
    for o in _graph_ops(list(outs.values())):
        if isinstance(o, tile._NDArray):
            tensors.setdefault(id(o), np.asarray(o._value))
        for v in o.inputs.values():
            if v.source is None and isinstance(v.var, plaidml.Tensor):
                tensors.setdefault(id(v.var), run.read(v.var))
    arrays = list(tensors.values())
    if not arrays:
        raise Skip(f"the composed function's inputs {names} are constant tensors the composer "
                   f"binds itself, with no operation between them and the outputs")
    same = all(a.shape == arrays[0].shape and a.dtype == arrays[0].dtype
               and np.array_equal(a, arrays[0]) for a in arrays)
    if len(arrays) != len(names) or not same:
        raise Skip(f"the composed function has inputs {names} (constant tensors the composer "
                   f"binds itself); the graph has {len(arrays)} constant tensors, not all "
                   f"equal, so which is which is unknown")
    return dict(zip(names, arrays))


def _unique(label: str, corpus: Corpus) -> str:
    """``label``, or ``label2``, ``label3``, ... if the corpus has an entry of that name."""
    names = {e["name"] for e in corpus.entries}
    k, out = 2, label
    while out in names:
        out, k = f"{label}{k}", k + 1
    return out


def _storable(arr: np.ndarray) -> np.ndarray:
    """npz keeps numpy's own dtypes only: a bfloat16 array is stored as its uint16 bits (the
    index says bfloat16)."""
    return arr.view(np.uint16) if arr.dtype.name == "bfloat16" else arr


def write(corpus: Corpus, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    index = {
        "plaidml": getattr(plaidml, "__version__", "0.7.0"),
        "entries": sorted(corpus.entries, key=lambda e: e["name"]),
        "skipped": sorted(corpus.skipped, key=lambda e: (e["name"], e["kind"])),
    }
    (out / "index.json").write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    buf = io.BytesIO()
    np.savez_compressed(buf, **{k: _storable(corpus.arrays[k]) for k in sorted(corpus.arrays)})
    (out / "arrays.npz").write_bytes(buf.getvalue())


def _worker(start: int, names: list[str], tmp: Path) -> None:
    """Harvest the cases ``names[start:]`` one by one: ``<k>.started`` before case k,
    ``<k>.pkl`` (its part of the corpus) after it. PlaidML aborts the process on some
    programs; the parent then records the case as skipped and starts a new worker."""
    K = _keras_backend()
    table = {c[0]: c for c in op_cases() + (keras_cases(K) if K is not None else [])}
    run = Runner(K)
    for k in range(start, len(names)):
        (tmp / f"{k}.started").touch()
        part = Corpus()
        try:
            harvest_case(run, part, table[names[k]])
        except Skip as e:
            part.skipped.append({"name": names[k], "kind": "case", "reason": str(e)})
        except Exception as e:  # noqa: BLE001
            traceback.print_exc()
            part.skipped.append({"name": names[k], "kind": "case",
                                 "reason": f"{type(e).__name__}: {e}"[:500]})
        with open(tmp / f"{k}.tmp", "wb") as f:
            pickle.dump((part.entries, part.arrays, part.skipped), f)
        os.replace(tmp / f"{k}.tmp", tmp / f"{k}.pkl")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True,
                    help="directory for index.json and arrays.npz (tests/golden/plaidml)")
    ap.add_argument("--only", default="", help="comma-separated case names (default: all)")
    ap.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tmp", type=Path, default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker is not None:
        _worker(args.worker, args.only.split(","), args.tmp)
        return 0
    K = _keras_backend()
    names = [c[0] for c in op_cases() + (keras_cases(K) if K is not None else [])]
    if args.only:
        want = set(args.only.split(","))
        names = [n for n in names if n in want]
    corpus = Corpus()
    with tempfile.TemporaryDirectory() as tmp_:
        tmp = Path(tmp_)
        k = 0
        while k < len(names):
            rc = subprocess.run([sys.executable, __file__, "--out", str(args.out),
                                 "--worker", str(k), "--tmp", tmp_, "--only", ",".join(names)],
                                check=False).returncode
            while (tmp / f"{k}.pkl").exists():
                with open(tmp / f"{k}.pkl", "rb") as f:
                    entries, arrays, skipped = pickle.load(f)
                part = Corpus()
                part.entries, part.arrays, part.skipped = entries, arrays, skipped
                corpus.merge(part)
                k += 1
            if k < len(names):
                reason = f"PlaidML aborts the process (exit status {rc})"
                corpus.skipped.append({"name": names[k], "kind": "case", "reason": reason})
                print(f"{names[k]}: {reason}", file=sys.stderr)
                k += 1
    write(corpus, args.out)
    print(f"{len(corpus.entries)} entries, {len(corpus.skipped)} skipped -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
