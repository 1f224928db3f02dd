"""stripe.arrays: arrays on 64-byte boundaries, and the outputs Program.run allocates."""

from __future__ import annotations

import numpy as np
import pytest

import stripe
from stripe.arrays import ArgumentError, ArgumentTypeError, aligned, empty, is_aligned, zeros
from stripe.errors import LimitError


@pytest.mark.parametrize("shape", [(), 0, 7, (3, 5), (1000, 3), (2, 0, 4), (33, 17, 5)])
@pytest.mark.parametrize("dtype", ["float32", "float64", "int8", "int32", "uint16"])
def test_empty_and_zeros_start_on_a_cache_line(shape, dtype):
    for make in (empty, zeros):
        a = make(shape, dtype)
        want = (shape,) if isinstance(shape, int) else shape
        assert a.shape == want and a.dtype == np.dtype(dtype) and a.flags.c_contiguous
        assert a.flags.writeable and is_aligned(a)
        assert a.size == 0 or a.ctypes.data % 64 == 0
    assert not zeros(shape, dtype).any()


def test_many_arrays_are_all_aligned_and_do_not_overlap():
    arrays = [empty((k, 3), np.float32) for k in range(1, 60)]
    for k, a in enumerate(arrays):
        a.fill(k)
    for k, a in enumerate(arrays):
        assert a.ctypes.data % 64 == 0 and (a == k).all()


def test_other_alignments():
    for alignment in (4, 16, 128, 4096, np.int64(32)):
        assert empty(100, np.float32, alignment).ctypes.data % alignment == 0
    assert empty(3, np.int8, 2**30).ctypes.data % 2**30 == 0  # reserved, not touched
    for bad in (0, 3, 48, -64, 2, 2**31, 2**64):  # 2 < the item size of float32
        with pytest.raises(ArgumentError, match="alignment must be a power of two"):
            empty(10, np.float32, bad)
    for bad in (64.0, 1.5, float("nan"), True, None, "64"):
        with pytest.raises(ArgumentTypeError, match="alignment must be an integer"):
            empty(10, np.float32, bad)


@pytest.mark.parametrize("shape, error, message", [
    (None, ArgumentTypeError, "shape must be an integer or a sequence"),
    ("3", ArgumentTypeError, "shape must be an integer or a sequence"),
    (2.0, ArgumentTypeError, "shape must be an integer or a sequence"),
    (float("nan"), ArgumentTypeError, "shape must be an integer or a sequence"),
    ({3: 4}, ArgumentTypeError, "shape must be an integer or a sequence"),
    ((3, 2.5), ArgumentTypeError, "shape must hold integers"),
    ((3, None), ArgumentTypeError, "shape must hold integers"),
    ((True, 2), ArgumentTypeError, "shape must hold integers"),
    ([[3]], ArgumentTypeError, "shape must hold integers"),
    (-1, ArgumentError, "shape must hold sizes of at least 0"),
    ((3, -1), ArgumentError, "shape must hold sizes of at least 0"),
    ((1,) * 65, ArgumentError, "65 dimensions"),
])
def test_bad_shapes_are_refused_naming_the_shape(shape, error, message):
    for make in (empty, zeros):
        with pytest.raises(error, match=message):
            make(shape)


@pytest.mark.parametrize("dtype, error", [
    ("float33", ArgumentTypeError), ("", ArgumentTypeError), (3.5, ArgumentTypeError),
    (object, ArgumentError), ("V0", ArgumentError), ("U0", ArgumentError),
    ([("a", "f4"), ("b", "O")], ArgumentError),
])
def test_bad_dtypes_are_refused_naming_the_dtype(dtype, error):
    with pytest.raises(error, match="dtype"):
        empty(3, dtype)


def test_the_argument_errors_are_stripe_errors_and_builtin_ones():
    """Callers may catch them as StripeError or as the builtin TypeError/ValueError."""
    with pytest.raises(TypeError):
        empty(None)
    with pytest.raises(ValueError):
        empty(-1)
    for error in (ArgumentError, ArgumentTypeError):
        assert issubclass(error, stripe.StripeError)


def test_sequences_and_numpy_integers_are_shapes():
    assert empty([2, 3]).shape == (2, 3)
    assert empty(range(1, 4)).shape == (1, 2, 3)
    assert empty(np.array([4, 5])).shape == (4, 5)
    assert empty((np.int32(2), np.uint8(3))).shape == (2, 3)
    assert empty(np.int64(7)).shape == (7,)
    assert empty(3, None).dtype == np.float64  # numpy's default, as in numpy.empty


@pytest.mark.parametrize("shape", [2**62, (2**40, 2**40), (2**31, 2**31, 2**31)])
def test_huge_shapes_are_refused_before_allocating(shape):
    with pytest.raises(LimitError, match="STRIPE_MAX_BYTES"):
        empty(shape)


@pytest.mark.parametrize("shape", [(2**62, 0), (0, 2**63), (2**70, 0), (2**40, 2**40, 0)])
def test_empty_shapes_past_64_bits_are_refused(shape):
    """No elements, but numpy refuses sizes whose product (0 left out) passes 64 bits."""
    with pytest.raises(LimitError, match="does not fit in 64 bits"):
        empty(shape)
    assert empty((2**40, 0)).shape == (2**40, 0)  # numpy takes this one


def test_the_memory_limit_counts_the_items_and_the_alignment(monkeypatch):
    monkeypatch.setenv("STRIPE_MAX_BYTES", "4KiB")
    assert empty(1008).nbytes == 4032  # 4032 + 64 bytes: exactly the limit
    with pytest.raises(LimitError, match="4096 bytes"):
        empty(1009)
    with pytest.raises(LimitError):
        empty(1, np.float32, 8192)
    with pytest.raises(LimitError):
        zeros((2, 600), np.float64)


def test_is_aligned_and_aligned_check_their_arguments():
    a = np.zeros(10, np.float32)
    with pytest.raises(ArgumentTypeError, match="a must be a numpy array"):
        is_aligned([1, 2])
    for bad in (0, -64, 1.5, None):
        with pytest.raises(ArgumentError, match="alignment must be a positive integer"):
            is_aligned(a, bad)
    assert is_aligned(empty(10), np.int32(64)) and is_aligned(a, 4)
    for bad in (0, 3, 2.0):
        with pytest.raises((ArgumentError, ArgumentTypeError), match="alignment"):
            aligned(a, bad)
    for bad in (None, object(), [[1], [1, 2]], {"a": 1}):
        with pytest.raises((ArgumentError, ArgumentTypeError), match="dtype|a: cannot make"):
            aligned(bad)
    assert is_aligned(aligned(range(5)))


def test_aligned_copies_only_what_it_must():
    a = empty((40, 7))
    assert aligned(a) is a
    raw = np.zeros(1000, np.float32)
    off = raw[1:801].reshape(40, 20)  # 4 bytes past whatever numpy's boundary was
    assert not is_aligned(off)
    got = aligned(off)
    assert got is not off and is_aligned(got) and np.array_equal(got, off)
    strided = np.arange(60.0).reshape(6, 10)[:, ::2]
    got = aligned(strided)
    assert got.flags.c_contiguous and is_aligned(got) and np.array_equal(got, strided)
    assert is_aligned(aligned([[1, 2], [3, 4]]))


def test_run_returns_its_outputs_on_cache_lines_and_reads_unaligned_inputs():
    src = "function (A[N], B[N]) -> (C, D) { C = A + B; D = A * B; }"
    prog = stripe.compile(src, {"A": ((1001,), "float32"), "B": ((1001,), "float32")},
                          target="cpu_avx2")
    rng = np.random.default_rng(3)
    raw = rng.standard_normal(2 * 1001 + 8).astype(np.float32)
    for shift in range(4):  # inputs 0, 4, 8, 12 bytes past numpy's placement
        a, b = raw[shift:shift + 1001], raw[1001 + 2 * shift:2002 + 2 * shift]
        got = prog.run({"A": a, "B": b})
        assert all(is_aligned(v) for v in got.values())
        np.testing.assert_array_equal(got["C"], a + b)
        np.testing.assert_array_equal(got["D"], a * b)


def _past_a_line(v: np.ndarray, shift: int, copy: bool = True) -> np.ndarray:
    """An array like ``v`` whose data starts ``shift`` bytes past a 64-byte boundary: a
    copy of ``v``, or (``copy=False``) all bytes 0xFF, NaN where a program fails to write."""
    raw = empty(v.nbytes + 64, np.uint8)
    raw.fill(0xFF)
    out = raw[shift:shift + v.nbytes].view(v.dtype).reshape(v.shape)
    if copy:
        out[...] = v
    return out


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "matmul", "matvec", "conv2d",
                                  "depthwise_conv2d", "tanh_fma", "sum_all"])
def test_results_do_not_depend_on_where_the_arrays_are(name):
    """The same bits from inputs (and outputs) on a cache line and 4, 16 or 36 bytes past
    one: only the cost of the accesses changes, not the arithmetic."""
    from ops_catalog import OPS_BY_NAME, random_inputs

    op = OPS_BY_NAME[name]
    arrays = random_inputs(op)
    prog = stripe.compile(op.source, op.input_specs(), target="cpu_avx2")
    want = prog.run({k: aligned(v) for k, v in arrays.items()})
    for shift in (4, 16, 36):
        placed = {k: _past_a_line(v, shift) for k, v in arrays.items()}
        outs = {k: _past_a_line(v, shift, copy=False) for k, v in want.items()}
        got = prog.run(placed, out=outs)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_elementwise_rows_start_their_vector_loop_on_a_boundary(dtype):
    """A long elementwise row is split where the output reaches a vector boundary (every
    head length from 0 to a vector's worth of elements, and an output not even on an
    element boundary): the same bits as on aligned arrays, and close to numpy."""
    src = "function (A[N, M], B[N, M], C[N, M]) -> (O) { O = tanh(A * B + C); }"
    shape = (5, 1001)
    prog = stripe.compile(src, {k: (shape, dtype) for k in "ABC"}, target="cpu_avx2")
    assert "on a 32-byte boundary" in prog.c_source
    rng = np.random.default_rng(7)
    arrays = {k: rng.standard_normal(shape).astype(dtype) for k in "ABC"}
    want = prog.run({k: aligned(v) for k, v in arrays.items()})["O"]
    np.testing.assert_allclose(want, np.tanh(arrays["A"] * arrays["B"] + arrays["C"]),
                               rtol=1e-5, atol=1e-6)
    item = np.dtype(dtype).itemsize
    for shift in [k * item for k in range(32 // item + 1)] + [3]:
        placed = {k: _past_a_line(v, shift) for k, v in arrays.items()}
        out = _past_a_line(want, shift, copy=False)
        np.testing.assert_array_equal(prog.run(placed, out={"O": out})["O"], want)


def test_short_rows_and_integer_rows_are_not_split():
    short = stripe.compile("function (A[N, M]) -> (O) { O = A * 2.0; }",
                           {"A": ((100, 63), "float32")}, target="cpu_avx2")
    ints = stripe.compile("function (A[N, M]) -> (O) { O = A * 2; }",
                          {"A": ((4, 1000), "int32")}, target="cpu_avx2")
    for prog in (short, ints):
        assert "-byte boundary" not in prog.c_source
