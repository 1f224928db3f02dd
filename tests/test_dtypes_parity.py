"""The dtypes float16, bfloat16, uint16, uint32 and uint64, PlaidML's promotion rules, casts
with widths and the math intrinsics, checked against numpy (and ml_dtypes for bfloat16)
through the interpreter and the C back end (docs/dtypes.md, docs/semantics.md)."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import pytest
from conftest import runnable_configs
from hypothesis import settings

import stripe
from stripe import interpret, parse_ir
from stripe.compiler import compile_program
from stripe.dtypes import DType, promote, promote_all, to_dtype
from stripe.intrinsics import INTRINSICS_TABLE
from stripe.target import HOST
from stripe.tile import lower
from stripe.verify import verify

BF16 = np.dtype(ml_dtypes.bfloat16)
NEW = (DType.UINT16, DType.UINT32, DType.UINT64, DType.FLOAT16, DType.BFLOAT16)
N = 64


# every shipped config (cpu_avx512 skipped on a CPU without AVX-512); the example configs,
# which differ from the others only in their pass lists, in the `long` profile
CONFIGS = [c for c in runnable_configs()
           if settings._current_profile == "long" or "examples/" not in str(c.values[0])]


# PlaidML's promotion ------------------------------------------------------------------------

@pytest.mark.parametrize("a, b, want", [
    ("int32", "float32", "float32"),      # a float wins whatever the widths
    ("float32", "int64", "float32"),
    ("uint64", "float16", "float16"),
    ("int8", "int16", "int16"),           # the wider wins
    ("float32", "float64", "float64"),
    ("float16", "float32", "float32"),
    ("int32", "uint32", "int32"),         # equal widths: the first operand's type
    ("uint32", "int32", "uint32"),
    ("uint8", "int8", "uint8"),
    ("bool", "int8", "bool"),             # bool counts 8 bits
    ("bool", "int16", "int16"),
    ("float16", "bfloat16", "float32"),   # neither 16-bit float holds the other
    ("bfloat16", "float16", "float32"),
    ("uint16", "int16", "uint16"),
])
def test_promotion_table(a: str, b: str, want: str) -> None:
    assert promote(to_dtype(a), to_dtype(b)) is to_dtype(want)


def test_promotion_folds_left_and_is_idempotent() -> None:
    for a in DType:
        assert promote(a, a) is a
        for b in DType:
            assert promote_all([a, b]) is promote(a, b)
            got = promote(a, b)
            assert got in (a, b) or {a, b} == {DType.FLOAT16, DType.BFLOAT16}


def test_scalar_int32_input_keeps_a_float32_tensor_float32() -> None:
    src = "function (A[N], S) -> (O) { O = A * S + 1; }"
    a = np.linspace(-2, 2, 7, dtype=np.float32)
    s = np.array(3, np.int32)
    block = lower(src, {"A": a, "S": s})
    out = interpret(block, {"A": a, "S": s})["O"]
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, a * np.float32(3) + np.float32(1))


@pytest.mark.parametrize("dtype, expr, want", [
    ("int8", "A + 1", "int32"), ("uint16", "A * 2", "int32"), ("float16", "A * 0.5", "float32"),
    ("float16", "A + 1", "float16"), ("bfloat16", "A - A", "bfloat16"),
    ("uint64", "A + 1", "uint64"), ("uint32", "A - 1", "uint32"),
    ("float64", "A * 0.1", "float64"), ("int64", "A * 0.5", "float32"),
])
def test_literal_types(dtype: str, expr: str, want: str) -> None:
    block = lower(f"function (A[N]) -> (O) {{ O = {expr}; }}", {"A": ((3,), dtype)})
    assert block.ref("O").dtype is to_dtype(want)


def test_a_literal_converted_to_an_unsigned_operation_wraps() -> None:
    a = np.array([0, 5, 2**32 - 1], np.uint32)
    out = interpret(lower("function (A[N]) -> (O) { O = A + -1; }", {"A": a}), {"A": a})["O"]
    np.testing.assert_array_equal(out, a - np.uint32(1))  # numpy's uint32 arithmetic wraps


# every intrinsic on the new dtypes, numpy column against C column --------------------------

Case = tuple[str, list[DType], DType]


def _ir(cases: list[Case]) -> tuple[str, list[tuple[str, int]]]:
    """One kernel per case ``(intrinsic, input dtypes, result dtype)``, computing row ``r``
    of the output ``O_<result>``: ``O_t[r, i] = name:t(X<j>_<input j's dtype>[i]...)``. The
    inputs are shared by every kernel (a few buffers, so that the C's overlap tests stay
    few); returns the text and, per case, its output's name and row."""
    inputs = sorted({(j, t) for _, ins, _ in cases for j, t in enumerate(ins)},
                    key=lambda x: (x[0], x[1].value))
    rows: dict[DType, int] = {}
    where = []
    for _, _, dtype in cases:
        where.append((f"O_{dtype.value}", rows.get(dtype, 0)))
        rows[dtype] = rows.get(dtype, 0) + 1
    refs, main_refs, kernels = [], [], []
    for j, t in inputs:
        refs.append(f"    #user in new X{j}_{t.value}[0] {t.value}:I({N}):(1)")
        main_refs.append(f"        in X{j}_{t.value}[0] {t.value}:I({N}):(1)")
    for t, count in rows.items():
        refs.append(f"    #user out new O_{t.value}[0, 0] {t.value}:I({count}, {N}):({N}, 1)")
        main_refs.append(f"        out O_{t.value}[0, 0] {t.value}:I({count}, {N}):({N}, 1)")
    for k, ((name, ins, dtype), (out, row)) in enumerate(zip(cases, where)):
        body = [f"            in X{j}_{t.value}[i] {t.value}:I(1):(1)" for j, t in enumerate(ins)]
        body.append(f"            out {out}[{row}, i] {dtype.value}:I(1, 1):({N}, 1)")
        loads = [f"$a{j} = load(X{j}_{t.value})" for j, t in enumerate(ins)]
        args = ", ".join(f"$a{j}" for j in range(len(ins)))
        stmts = loads + [f"$r = {name}:{dtype.value}({args})", f"{out} = store($r)"]
        kernels.append(f"        {k}: #kernel\n        block [i:{N}]:{N} ( // k{k}\n"
                       + "\n".join(body) + "\n        ) {\n"
                       + "\n".join(f"            {n}: {x}" for n, x in enumerate(stmts))
                       + "\n        }")
    text = ("#program\nblock []:1 ( // program\n" + "\n".join(refs) + "\n) {\n"
            "    0: #main\n    block []:1 ( // main\n" + "\n".join(main_refs) + "\n    ) {\n"
            + "\n".join(kernels) + "\n    }\n}\n")
    return text, where


FLOAT_EDGES = (np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 2.5, -2.5, 65504.0,
               65520.0, 6e-8, 3e-8, 1e-40, 3.4e38, 1e30, -300.0, 0.1, 255.9, 4e9, 2e19)


def _values(dtype: DType, rng: np.random.Generator, edges: bool) -> np.ndarray:
    """Inputs of ``dtype``: random (floats of either sign, some in [-1, 1] for asin and the
    like; integers over the type's range and small ones for shifts and powers), or drawn
    from the edge values (NaN, infinities, the 16-bit limits, the integer limits, widths)."""
    if dtype.is_float:
        x = rng.choice(np.array(FLOAT_EDGES), N) if edges else rng.standard_normal(N) * 3
        with np.errstate(over="ignore"):  # edges beyond the type's range become infinities
            return x.astype(np.float32).astype(dtype.np)
    info = np.iinfo(dtype.np)
    if edges:
        pool = [int(info.min), int(info.max), int(info.max) - 1, 0, 1, 2, 3, 7,
                dtype.bits - 1, dtype.bits, dtype.bits + 1, int(info.max) // 2 + 1]
        return np.array(rng.choice(np.array(pool, dtype=object), N), dtype=dtype.np)
    small = rng.integers(0, dtype.bits + 2, N)
    big = rng.integers(0, min(int(info.max), 2**62), N, dtype=np.int64)
    return np.where(rng.integers(0, 2, N) == 1, small, big).astype(dtype.np)


@pytest.mark.parametrize("edges", [False, True])
@pytest.mark.parametrize("dtype", NEW, ids=[d.value for d in NEW])
def test_every_intrinsic_on_the_new_dtypes(dtype: DType, edges: bool) -> None:
    """Every row of the intrinsics table on ``dtype`` (result and inputs), in one program:
    the interpreter (numpy column) and the C (C column) agree bit for bit, but for float
    math functions, which libm and numpy may round differently (a few ulps of float32)."""
    rng = np.random.default_rng(sum(map(ord, dtype.value)) + edges)
    cases: list[Case] = []
    for name, info in INTRINSICS_TABLE.items():
        if info.result == "integer" and dtype.is_float:
            continue
        if info.result == "bool" and not name.startswith("cmp_"):
            continue
        result = DType.BOOL if info.result == "bool" else dtype
        ins = [DType.BOOL if name == "cond" and j == 0 else dtype for j in range(info.arity)]
        cases.append((name, ins, result))
    text, where = _ir(cases)
    arrays = {f"X{j}_{dtype.value}": _values(dtype, rng, edges) for j in range(3)}
    arrays["X0_bool"] = rng.integers(0, 2, N).astype(bool)
    program = parse_ir(text)
    verify(program)
    with np.errstate(all="ignore"):
        want = interpret(program, arrays)
    got = compile_program(program, target=HOST)(**arrays)
    for (name, _, result), (out, row) in zip(cases, where):
        g, w = got[out][row], want[out][row]
        assert g.dtype == w.dtype == result.np, name
        if not result.is_float and INTRINSICS_TABLE[name].result == "float":
            # a math function on integers: libm's and numpy's doubles may differ by an ulp,
            # which truncation (tanh(20) = 0.99...9 or 1) can turn into one unit
            diff = np.abs(g.astype(np.float64) - w.astype(np.float64))
            assert (diff <= 1).all() and (diff > 0).mean() < 0.1, f"{name}:{result.value}"
            continue
        if not result.is_float:
            np.testing.assert_array_equal(g, w, err_msg=f"{name}:{result.value}")
            continue
        g32, w32 = g.astype(np.float32), w.astype(np.float32)
        np.testing.assert_array_equal(np.isnan(g32), np.isnan(w32), err_msg=name)
        # libm and numpy may differ by a few float32 ulps (exp, pow, ...), which rounding
        # to 16 bits may turn into one 16-bit step
        tol = 1e-3 if result is DType.FLOAT16 else 8e-3 if result.is_half else 2e-6
        np.testing.assert_allclose(g32, w32, rtol=tol, atol=1e-30, equal_nan=True,
                                   err_msg=f"{name}:{result.value}")


# conversions: every pair of dtypes --------------------------------------------------------

def _source_values(src: DType) -> np.ndarray:
    if src.is_float:
        vals = np.array(FLOAT_EDGES + (-65520.0, 1.5, 2049.0, 3.0e-5, 1.00390625, 1.01171875,
                                       -7.5, 2.0**63, 2.0**64, -2.0**31, 2.0**31 - 0.5),
                        dtype=np.float64)
        with np.errstate(over="ignore"):
            return vals.astype(np.float32).astype(src.np) if src.is_half else \
                vals.astype(src.np)
    if src is DType.BOOL:
        return np.array([0, 1] * 20, bool)
    info = np.iinfo(src.np)
    vals = [int(info.min), int(info.max), 0, 1, 2, 255, 256, 65535, 65536, 2049, 2**24 + 1,
            2**31 - 1, 2**31, 2**53 + 1, -1, -129, -32769, 2**63 - 1]
    return np.array([v for v in vals if info.min <= v <= info.max] * 2, dtype=src.np)


def _reference(x: np.ndarray, dst: DType) -> np.ndarray:
    """The conversion rules of docs/semantics.md, written against numpy directly."""
    src = x.astype(np.float32) if x.dtype in (np.float16, BF16) else x
    if dst.is_half:
        with np.errstate(over="ignore"):
            return src.astype(np.float32).astype(dst.np)  # through float32
    if src.dtype.kind == "f" and dst.is_int:  # to int64 (saturating), then wrapped
        out = []
        for v in src.astype(np.float64):
            t = 0 if np.isnan(v) else min(max(int(np.trunc(v)) if np.isfinite(v) else
                                              int(np.sign(v)) * 2**64, -2**63), 2**64 - 1)
            if dst is not DType.UINT64 or t < 2**63:
                t = min(t, 2**63 - 1)
            out.append(t % 2**dst.bits if dst.is_unsigned else
                       (t + 2**(dst.bits - 1)) % 2**dst.bits - 2**(dst.bits - 1))
        return np.array(out, dtype=object).astype(dst.np)
    return src.astype(dst.np)


def test_every_conversion_matches_numpy() -> None:
    """``cast`` between every pair of the 13 dtypes: the interpreter and the C both give
    numpy's (and ml_dtypes') conversion, floats into integers through int64 (PlaidML's
    rule), rounding to 16-bit floats through float32."""
    cases: list[Case] = [("cast", [src], dst) for src in DType for dst in DType]
    text, where = _ir(cases)
    arrays = {f"X0_{src.value}": np.resize(_source_values(src), N) for src in DType}
    program = parse_ir(text)
    with np.errstate(all="ignore"):
        want = interpret(program, arrays)
    got = compile_program(program, target=HOST)(**arrays)
    for (_, (src,), dst), (name, row) in zip(cases, where):
        ref = _reference(arrays[f"X0_{src.value}"], dst)
        for label, out in (("interpreter", want[name][row]), ("C", got[name][row])):
            assert out.dtype == dst.np
            if dst.is_float:
                a, b = out.astype(np.float64), ref.astype(np.float64)
                np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
                np.testing.assert_array_equal(np.where(np.isnan(a), 0, a),
                                              np.where(np.isnan(b), 0, b),
                                              err_msg=f"{label}: {src} -> {dst}")
            else:
                np.testing.assert_array_equal(out, ref, err_msg=f"{label}: {src} -> {dst}")


# 16-bit floats bit for bit, with and without F16C -----------------------------------------

def _f16c_config(tmp_path: Path) -> str:
    path = tmp_path / "cpu_f16c.yaml"
    path.write_text("target: cpu_f16c\nextends: cpu_avx2\n"
                    "cflags: [-O3, -mavx2, -mfma, -mf16c]\n")
    return str(path)


def _all_bits(dtype: DType) -> np.ndarray:
    return np.arange(65536, dtype=np.uint32).astype(np.uint16).view(dtype.np)


def _f32_samples(rng: np.random.Generator) -> np.ndarray:
    """float32 values around every 16-bit rounding boundary: random bit patterns (every
    exponent, NaNs, denormals), halfway points and their neighbours."""
    bits = rng.integers(0, 2**32, 20000, dtype=np.uint64).astype(np.uint32)
    f16 = _all_bits(DType.FLOAT16).astype(np.float32)
    f16 = f16[np.isfinite(f16)]
    mid = ((f16[:-1].astype(np.float64) + f16[1:]) / 2).astype(np.float32)
    near = np.concatenate([mid, np.nextafter(mid, np.float32(np.inf)),
                           np.nextafter(mid, np.float32(-np.inf))])
    return np.concatenate([bits.view(np.float32), near, np.float32([65504, 65519.99, 65520,
                                                                    -65520, 2.0**-25])])


@pytest.mark.parametrize("f16c", [False, True])
def test_half_floats_round_to_nearest_even_as_numpy(f16c: bool, tmp_path: Path,
                                                    rng: np.random.Generator) -> None:
    """Every float16 and bfloat16 bit pattern widens exactly; float32 values at and around
    every rounding boundary round to numpy's float16 and ml_dtypes' bfloat16 (bits equal,
    NaN as NaN), in software and, where the flags enable it, with F16C."""
    if f16c and "f16c" not in Path("/proc/cpuinfo").read_text():
        pytest.skip("this CPU lacks F16C")
    target = _f16c_config(tmp_path) if f16c else "cpu_generic"
    src = ("function (F[N], H[M], B[M]) -> (OH, OB, WH, WB) { OH = as_float(F, 16); "
           "OB = bfloat16(F); WH = as_float(H, 32); WB = float32(B); }")
    f = _f32_samples(rng)
    h, b = _all_bits(DType.FLOAT16), _all_bits(DType.BFLOAT16)
    ins = {"F": f, "H": h, "B": b}
    prog = stripe.compile(src, ins, target)
    got = prog(**ins)
    with np.errstate(all="ignore"):
        want = {"OH": f.astype(np.float16), "OB": f.astype(BF16),
                "WH": h.astype(np.float32), "WB": b.astype(np.float32)}
    interp = interpret(lower(src, ins), ins)
    for out in want:
        for label, res in (("C", got[out]), ("interpreter", interp[out])):
            w = want[out]
            nan = np.isnan(w.astype(np.float32))
            np.testing.assert_array_equal(np.isnan(res.astype(np.float32)), nan,
                                          err_msg=f"{label} {out}")
            bits = np.uint16 if res.itemsize == 2 else np.uint32
            np.testing.assert_array_equal(res.view(bits)[~nan], w.view(bits)[~nan],
                                          err_msg=f"{label} {out} (f16c={f16c})")


# Tile programs on every shipped config ------------------------------------------------------

def _program_source() -> str:
    """For each new dtype ``t`` (suffix ``k``), an elementwise program with an int32 scalar
    and a matmul accumulating in ``t``, all in one function (one compile per config)."""
    params, outs, body = ["S"], [], []
    for k in range(len(NEW)):
        params += [f"A{k}[N, M]", f"B{k}[N, M]", f"X{k}[P, K]", f"Y{k}[K, Q]"]
        outs += [f"O{k}", f"C{k}", f"R{k}", f"Z{k}"]
        body += [f"O{k} = A{k} * B{k} + A{k} / (B{k} * B{k} + 1) - S;",
                 f"C{k} = A{k} > B{k} ? A{k} : B{k};",
                 f"R{k} = round(A{k}) + abs(B{k});",
                 f"Z{k}[p, q : P, Q] = +(X{k}[p, j] * Y{k}[j, q]);"]
    return (f"function ({', '.join(params)}) -> ({', '.join(outs)}) {{\n    "
            + "\n    ".join(body) + "\n}")


def _array(dtype: DType, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if dtype.is_float:
        return (rng.standard_normal(shape) * 4).astype(np.float32).astype(dtype.np)
    return rng.integers(0, np.iinfo(dtype.np).max, shape, dtype=np.uint64,
                        endpoint=True).astype(dtype.np)


def _c_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.where(b == 0, 0, a // np.where(b == 0, 1, b)).astype(a.dtype)


def _expected(dtype: DType, a: np.ndarray, b: np.ndarray, x: np.ndarray, y: np.ndarray
              ) -> dict[str, np.ndarray]:
    """numpy's results under the rules of docs/dtypes.md: 16-bit floats computed in float32
    and rounded where stored (the matmul at every partial sum); the unsigned types wrapping,
    each operation in the type PlaidML's promotion gives it."""
    if dtype.is_float:
        a32, b32 = a.astype(np.float32), b.astype(np.float32)
        o = (a32 * b32 + a32 / (b32 * b32 + 1) - 3).astype(dtype.np)
        t = np.trunc(a32)
        r = (np.where(np.abs(a32 - t) >= 0.5, t + np.sign(a32), t) + np.abs(b32))
        z = np.zeros((x.shape[0], y.shape[1]), dtype.np)
        for j in range(x.shape[1]):  # each store rounds
            z = (z.astype(np.float32) + np.outer(x[:, j].astype(np.float32),
                                                 y[j].astype(np.float32))).astype(dtype.np)
        return {"O": o, "C": np.where(a32 > b32, a, b), "R": r.astype(dtype.np), "Z": z}
    wide = promote(dtype, DType.INT32)  # the type of B * B + 1 and what follows
    with np.errstate(all="ignore"):
        den = (b * b).astype(wide.np) + wide.np.type(1)
        q = _c_div(a.astype(wide.np), den)
        o = ((a * b).astype(wide.np) + q - wide.np.type(3)).astype(wide.np)
        return {"O": o, "C": np.maximum(a, b), "R": a + b, "Z": x @ y}


def _close(got: np.ndarray, want: np.ndarray, what: str, steps: float = 1.0) -> None:
    """Equal, or for a 16-bit float within ``steps`` of its grid's spacing (the C may fuse
    ``a * b + c`` into one multiply-add, one float32 rounding less: docs/semantics.md)."""
    assert got.dtype == want.dtype, what
    if got.dtype not in (np.float16, BF16):
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    g, w = got.astype(np.float32), want.astype(np.float32)
    bits = 10 if got.dtype == np.float16 else 7
    step = np.maximum(np.abs(w), 2.0**-14) * 2.0**-bits
    np.testing.assert_array_less(np.abs(g - w), steps * step + 1e-30, err_msg=what)


@pytest.mark.parametrize("config", CONFIGS)
def test_programs_on_every_config(config: str, rng: np.random.Generator) -> None:
    """For every new dtype: elementwise arithmetic with an int32 scalar, a select, round and
    abs, and a matmul accumulating in the dtype. The interpreter gives numpy's results
    (exactly), every shipped config's C the interpreter's (exactly for the integers)."""
    src = _program_source()
    ins: dict[str, np.ndarray] = {"S": np.array(3, np.int32)}
    for k, dtype in enumerate(NEW):
        ins[f"A{k}"], ins[f"B{k}"] = _array(dtype, (5, 37), rng), _array(dtype, (5, 37), rng)
        ins[f"X{k}"], ins[f"Y{k}"] = _array(dtype, (6, 19), rng), _array(dtype, (19, 10), rng)
    interp = interpret(lower(src, ins), ins)
    got = stripe.compile(src, ins, config)(**ins)
    for k, dtype in enumerate(NEW):
        want = _expected(dtype, ins[f"A{k}"], ins[f"B{k}"], ins[f"X{k}"], ins[f"Y{k}"])
        for name, w in want.items():
            out = f"{name}{k}"
            np.testing.assert_array_equal(interp[out], w, err_msg=f"interpreter {out}")
            if name == "Z" and dtype.is_half:  # tiling may regroup the rounded sum
                x, y = ins[f"X{k}"].astype(np.float32), ins[f"Y{k}"].astype(np.float32)
                bits = 10 if dtype is DType.FLOAT16 else 7
                bound = (np.abs(x) @ np.abs(y)) * 2.0**-bits * x.shape[1]
                np.testing.assert_array_less(
                    np.abs(got[out].astype(np.float32) - w.astype(np.float32)), bound + 1e-6,
                    err_msg=f"C {out} on {config}")
            else:
                _close(got[out], interp[out], f"C {out} on {config}")


def test_uint64_arithmetic_wraps_as_numpy(rng: np.random.Generator) -> None:
    src = """function (A[N], B[N]) -> (S, D, P, Q, M, L, H, E) {
        S = A + B; D = A - B; P = A * B; Q = A / B; M = A % B; L = A << as_uint(3, 64);
        H = A >> as_uint(63, 64); E = A < B; }"""
    a = rng.integers(0, 2**64, 50, dtype=np.uint64)
    b = rng.integers(0, 2**64, 50, dtype=np.uint64)
    b[:5] = 0
    b[5:10] = np.uint64(2**64 - 1)
    ins = {"A": a, "B": b}
    with np.errstate(all="ignore"):
        want = {"S": a + b, "D": a - b, "P": a * b,
                "Q": np.where(b == 0, 0, a // np.where(b == 0, 1, b)).astype(np.uint64),
                "M": np.where(b == 0, 0, a % np.where(b == 0, 1, b)).astype(np.uint64),
                "L": a << np.uint64(3), "H": a >> np.uint64(63), "E": a < b}
    interp = interpret(lower(src, ins), ins)
    got = stripe.compile(src, ins, "cpu_avx2")(**ins)
    for k, w in want.items():
        np.testing.assert_array_equal(interp[k], w, err_msg=f"interpreter {k}")
        np.testing.assert_array_equal(got[k], w, err_msg=f"C {k}")


def test_mixed_sign_comparisons_are_exact() -> None:
    """``uint64`` against ``int64`` compares the values, not their bits or a double."""
    src = "function (A[N], B[N]) -> (L, E, G) { L = A < B; E = A == B; G = A >= B; }"
    a = np.array([-1, 0, 2**63 - 1, -2**63, 5, 2**53 + 1], np.int64)
    b = np.array([2**64 - 1, 0, 2**63, 0, 5, 2**53], np.uint64)
    ins = {"A": a, "B": b}
    want = {"L": np.array([True, False, True, True, False, False]),
            "E": np.array([False, True, False, False, True, False]),
            "G": np.array([False, True, False, False, True, True])}
    interp = interpret(lower(src, ins), ins)
    got = stripe.compile(src, ins, "cpu_generic")(**ins)
    for k, w in want.items():
        np.testing.assert_array_equal(interp[k], w, err_msg=f"interpreter {k}")
        np.testing.assert_array_equal(got[k], w, err_msg=f"C {k}")


@pytest.mark.parametrize("fn, bits, dtype", [
    ("as_float", 16, "float16"), ("as_float", 32, "float32"), ("as_float", 64, "float64"),
    ("as_int", 8, "int8"), ("as_int", 16, "int16"), ("as_int", 32, "int32"),
    ("as_int", 64, "int64"), ("as_uint", 8, "uint8"), ("as_uint", 16, "uint16"),
    ("as_uint", 32, "uint32"), ("as_uint", 64, "uint64"), ("as_bool", 1, "bool"),
])
def test_casts_with_widths(fn: str, bits: int, dtype: str) -> None:
    x = np.array([-3.7, -0.5, 0.0, 2.5, 70000.0, 1e20, np.nan], np.float32)
    src = f"function (X[N]) -> (O, T) {{ O = {fn}(X, {bits}); T = {dtype}(X); }}"
    interp = interpret(lower(src, {"X": x}), {"X": x})
    got = stripe.compile(src, {"X": x}, "cpu_generic")(X=x)
    ref = _reference(x, to_dtype(dtype))
    for out in (interp["O"], interp["T"], got["O"], got["T"]):
        assert out.dtype == to_dtype(dtype).np
        np.testing.assert_array_equal(out.astype(np.float64), ref.astype(np.float64))


def test_round_is_c_round_not_numpy_round() -> None:
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49999997, -0.4, 1e30, np.inf],
                 np.float32)
    src = "function (X[N]) -> (O) { O = round(X); }"
    want = np.array([-3, -2, -1, 1, 2, 3, 0, -0.0, 1e30, np.inf], np.float32)
    for config in ("cpu_generic", "cpu_avx2"):
        np.testing.assert_array_equal(stripe.compile(src, {"X": x}, config)(X=x)["O"], want)
    np.testing.assert_array_equal(interpret(lower(src, {"X": x}), {"X": x})["O"], want)
    folded = lower("function (X[N]) -> (O) { O = round(2.5) + round(-0.5) + X; }", {"X": x})
    np.testing.assert_array_equal(interpret(folded, {"X": x})["O"], x + np.float32(3 - 1))


@pytest.mark.parametrize("fn, np_fn, lo, hi", [
    ("tan", np.tan, -1.5, 1.5), ("asin", np.arcsin, -1, 1), ("acos", np.arccos, -1, 1),
    ("atan", np.arctan, -10, 10), ("sinh", np.sinh, -5, 5), ("cosh", np.cosh, -5, 5),
    ("asinh", np.arcsinh, -10, 10), ("acosh", np.arccosh, 1, 10),
    ("atanh", np.arctanh, -0.99, 0.99),
])
def test_math_functions_against_numpy(fn: str, np_fn: np.ufunc, lo: float, hi: float,
                                      rng: np.random.Generator) -> None:
    x64 = rng.uniform(lo, hi, 200)
    for dtype in (np.float32, np.float64, np.float16):
        x = x64.astype(dtype)
        src = f"function (X[N]) -> (O) {{ O = {fn}(X); }}"
        got = stripe.compile(src, {"X": x}, "cpu_avx2")(X=x)["O"]
        want = np_fn(x.astype(np.float64)).astype(dtype)
        tol = {np.float32: 1e-6, np.float64: 1e-14, np.float16: 1e-3}[dtype]
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=f"{fn} {dtype}")
