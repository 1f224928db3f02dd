"""The program's temporaries share one allocation by liveness (``plan_temporaries`` in
``codegen/c_runtime.py``): buffers whose live ranges over ``main``'s statements do not meet
share bytes, every buffer starts on a 64-byte boundary, and ``prog.stats()["main"]`` reports
the arena (``tmp_bytes``) and the peak of main memory (``peak_bytes``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stripe
from stripe.codegen.c_runtime import plan_temporaries
from stripe.compiler import compile_program
from stripe.ir import Block, RefDir
from stripe.irparser import parse_ir

LONG = settings._current_profile == "long"


def _tmps(program: Block) -> dict[str, int]:
    """The program's tmp buffers and their bytes."""
    return {r.into: max(r.shape.span, 1) * r.dtype.itemsize for r in program.refs
            if r.is_alloc and r.dir is RefDir.NONE}


def _check_plan(program: Block) -> None:
    """Every two buffers that one statement of main touches, or whose live ranges meet,
    have disjoint bytes; offsets are aligned; the arena is no larger than the buffers apart."""
    sizes = _tmps(program)
    plan = plan_temporaries(program, sizes)
    main = plan.seq
    uses = []
    for s in main.stmts:
        names = {v.from_ for v in s.refs} if isinstance(s, Block) else set()
        uses.append({n for n in names if n in sizes})
    live = {}
    for n in sizes:
        at = [k for k, u in enumerate(uses) if n in u]
        live[n] = (min(at), max(at)) if at else (-1, -1)
    for n, off in plan.offsets.items():
        assert off % 64 == 0 and off + sizes[n] <= plan.total
    for a in sizes:
        for b in sizes:
            if a >= b:
                continue
            (la, ha), (lb, hb) = live[a], live[b]
            if la <= hb and lb <= ha:
                oa, ob = plan.offsets[a], plan.offsets[b]
                assert oa + sizes[a] <= ob or ob + sizes[b] <= oa, (a, b, plan.offsets)
    assert plan.total <= max(plan.unshared, 64)


CHAIN = """function (X[N, M]) -> (O) {
    A = X * 2.0;
    B = A + 1.0;
    C = B * B;
    D = C - A;
    O = D + 3.0;
}"""


def test_a_chain_shares_buffers_and_reports_its_peak(cache, random_array):
    # A is read again by D after B and C were written: A stays live across them, while B
    # and D (or C and the buffers before) may share bytes
    shape = (13, 7)  # 364 bytes a buffer: not a multiple of 64
    program = stripe.lower(CHAIN, {"X": (shape, "float32")})
    _check_plan(program)
    prog = stripe.compile(CHAIN, {"X": (shape, "float32")}, target="none")
    x = random_array(shape)
    a = x * 2
    c = (a + 1) * (a + 1)
    np.testing.assert_allclose(prog(X=x)["O"], c - a + 3, rtol=1e-6)
    sizes = _tmps(program)
    plan = plan_temporaries(program, sizes)
    assert plan.unshared == 4 * 384  # A, B, C, D, each rounded up to 6 lines
    assert plan.total < plan.unshared
    stats = prog.stats()["main"]
    assert stats["tmp_bytes"] == plan.total
    assert stats["peak_bytes"] >= plan.total
    # A lives from its kernel to D's, so it shares bytes with none of B, C, D
    offsets = plan.offsets
    for other in ("B", "C", "D"):
        assert abs(offsets["A"] - offsets[other]) >= 384


def test_the_emitted_c_is_deterministic(cache):
    a = stripe.compile(CHAIN, {"X": ((5, 3), "float32")}, target="none").c_source
    b = stripe.compile(CHAIN, {"X": ((5, 3), "float32")}, target="none").c_source
    assert a == b and "shared by liveness" in a


SHARED_ZERO = """
#program
block []:1 ( // program
    #user in new X[0] fp32:I(8):(1)
    #user out new Y[0] fp32:I(8):(1)
    #user out new Z[0] fp32:I(8):(1)
    #tmp none new U[0] fp32:I(8):(1)
    #tmp none new T[0] fp32:I(8):(1)
) {
    0: #main
    block []:1 ( // main
        in X[0] fp32:I(8):(1)
        out Y[0] fp32:I(8):(1)
        out Z[0] fp32:I(8):(1)
        inout U[0] fp32:I(8):(1)
        inout T[0] fp32:I(8):(1)
    ) {
        0: block [i:8]:8 ( // fill_u
            out U[i] fp32:I(1):(1)
        ) {
            0: $x = (fp32)7.0
            1: U = store($x)
        }
        1: block [i:8]:8 ( // use_u
            in X[i] fp32:I(1):(1)
            in U[i] fp32:I(1):(1)
            out Y[i] fp32:I(1):(1)
        ) {
            0: $x = load(X)
            1: $u = load(U)
            2: $y = add:fp32($x, $u)
            3: Y = store($y)
        }
        2: block [i:5]:5 ( // fill_t
            out T[i] fp32:I(1):(1)
        ) {
            0: $x = (fp32)1.5
            1: T = store($x)
        }
        3: block [i:8]:8 ( // use_t
            in X[i] fp32:I(1):(1)
            in T[i] fp32:I(1):(1)
            out Z[i] fp32:I(1):(1)
        ) {
            0: $x = load(X)
            1: $t = load(T)
            2: $z = add:fp32($x, $t)
            3: Z = store($z)
        }
    }
}
"""


def test_a_shared_buffer_read_before_it_is_wholly_written_starts_at_zero(cache, rng):
    # T takes U's bytes (U is dead after use_u); T's last three elements are read without
    # being written: in C they read zeros (T is cleared where it starts to live, after U's
    # 7.0s were stored there), as an unshared buffer would
    program = parse_ir(SHARED_ZERO)
    plan = plan_temporaries(program, _tmps(program))
    assert plan.offsets["T"] == plan.offsets["U"] and plan.total == 64
    prog = compile_program(program)
    assert "memset(" in prog.c_source
    x = rng.standard_normal(8).astype(np.float32)
    out = prog(X=x)
    np.testing.assert_array_equal(out["Y"], x + 7)
    t = np.where(np.arange(8) < 5, 1.5, 0.0).astype(np.float32)
    np.testing.assert_array_equal(out["Z"], x + t)
    assert prog.stats()["main"]["tmp_bytes"] == 64


def test_a_convolution_network_on_cpu_avx2_shares_its_activations(cache, random_array):
    # pad copies, packed tiles and fused epilogues: the arena is smaller than the buffers
    # apart and the result matches numpy
    src = """function (I[N, X, Y, C], F[3, 3, C, D], G[3, 3, D, D]) -> (O) {
        A[n, x, y, d : N, X, Y, D] = +(I[n, x + i - 1, y + j - 1, c] * F[i, j, c, d]);
        R = max(A, 0.0);
        B[n, x, y, d : N, X, Y, D] = +(R[n, x + i - 1, y + j - 1, c] * G[i, j, c, d]);
        S = max(B + R, 0.0);
        E[n, x, y, d : N, X, Y, D] = +(S[n, x + i - 1, y + j - 1, c] * G[i, j, c, d]);
        O = E + S;
    }"""
    shapes = {"I": (1, 11, 9, 5), "F": (3, 3, 5, 24), "G": (3, 3, 24, 24)}
    arrays = {k: random_array(v) for k, v in shapes.items()}
    prog = stripe.compile(src, arrays, target="cpu_avx2")
    _check_plan(prog.ir)
    ref = stripe.compile(src, arrays, target="none")
    want = ref(**arrays)["O"]
    np.testing.assert_allclose(prog(**arrays)["O"], want, rtol=1e-4,
                               atol=1e-5 * float(np.abs(want).max()))
    sizes = _tmps(prog.ir)
    plan = plan_temporaries(prog.ir, sizes)
    assert plan.total < plan.unshared
    assert prog.stats()["main"]["tmp_bytes"] == plan.total


OPS = ("+", "-", "*")


@st.composite
def _chains(draw):
    """A Tile function of ``X`` with 2 to 8 intermediates, each combining one or two earlier
    values (so that values are read long after they are written), and its numpy meaning."""
    n = draw(st.integers(2, 8))
    lines, names = [], ["X"]
    for k in range(n):
        a = draw(st.sampled_from(names))
        b = draw(st.sampled_from(names))
        op = draw(st.sampled_from(OPS))
        lines.append((f"T{k}", a, op, b))
        names.append(f"T{k}")
    last = draw(st.sampled_from(names[1:]))
    shape = (draw(st.integers(1, 9)), draw(st.integers(1, 23)))
    return lines, last, shape


@settings(max_examples=400 if LONG else 6, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_chains())
def test_random_chains_are_right_with_shared_buffers(cache, chain):
    lines, last, shape = chain
    body = "".join(f"    {t} = {a} {op} {b};\n" for t, a, op, b in lines)
    src = f"function (X[N, M]) -> (O) {{\n{body}    O = {last} * 0.5;\n}}"
    inputs = {"X": (shape, "float32")}
    _check_plan(stripe.lower(src, inputs))
    x = np.linspace(-2, 2, shape[0] * shape[1], dtype=np.float32).reshape(shape)
    values = {"X": x}
    for t, a, op, b in lines:
        values[t] = {"+": np.add, "-": np.subtract, "*": np.multiply}[op](values[a], values[b])
    got = stripe.compile(src, inputs, target="none")(X=x)["O"]
    np.testing.assert_allclose(got, values[last] * 0.5, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", [1, 3])
def test_plan_of_untouched_and_single_buffers(n):
    # a program whose only tmp buffer is used by one statement, and the plan of a buffer no
    # statement touches: it still lies inside the arena
    program = stripe.lower(CHAIN, {"X": ((n, 2), "float32")})
    sizes = _tmps(program)
    sizes["unused"] = 1000
    plan = plan_temporaries(program, sizes)
    assert "unused" not in plan.first
    assert plan.offsets["unused"] + 1000 <= plan.total
