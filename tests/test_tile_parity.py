"""Tile constructs of PlaidML 0.7: indexes used only in the output, integer constant
statements, max/min in sizes, rank-0 integer inputs bound at call time, == as a contraction's
combination, statement attributes, the composed-program form and fractional indexes. Each
against numpy through the interpreter, and the programs through cpu_generic, the host's
config (cpu_avx2) and npu_example."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import stripe
from stripe import pipeline_cache
from stripe.arrays import ArgumentError
from stripe.codegen.build import missing_cpu_features
from stripe.config import load_config
from stripe.errors import ShapeError, StripeError, TileError
from stripe.ir import Block
from stripe.tile.lower import lower_specialised


@dataclass(frozen=True)
class Case:
    name: str
    source: str
    inputs: dict[str, np.ndarray | int]
    expected: Callable[..., dict[str, np.ndarray]]


_RNG = np.random.default_rng(26)
I5 = _RNG.standard_normal(5).astype(np.float32)
I7 = _RNG.standard_normal(7).astype(np.float32)
F3 = _RNG.standard_normal(3).astype(np.float32)
A4 = np.array([1, 3, 3, 0], np.int32)
B6 = np.array([3, 1, 4, 1, 5, 0], np.int32)
I8 = np.array([-100, 5, 120, 7], np.int8)


def _strided_same_conv(i: np.ndarray, f: np.ndarray, s: int) -> np.ndarray:
    """PlaidML's 'same' padding: Pad = max(0, (X - 1) * S + K - X) / 2, ceil(X / S) outputs."""
    x, k = len(i), len(f)
    pad = max(0, (x - 1) * s + k - x) // 2
    out = np.zeros((x + s - 1) // s, np.float32)
    for o in range(len(out)):
        for j in range(k):
            src = s * o + j - pad
            if 0 <= src < x:
                out[o] += i[src] * f[j]
    return out


def _transposed_conv(o: np.ndarray, k: np.ndarray, size: int) -> np.ndarray:
    """The transpose of a stride-2 'same' 1-D convolution, written out."""
    pad = max(0, ((size + 1) // 2 - 1) * 2 + 3 - size) // 2
    out = np.zeros((o.shape[0], size, k.shape[1]), np.float32)
    for n in range(o.shape[0]):
        for x in range(o.shape[1]):
            for j in range(k.shape[0]):
                dst = 2 * x + j - pad
                if 0 <= dst < size:
                    out[n, dst] += k[j] @ o[n, x]
    return out


CASES = [
    Case("repeat", "function (I[N]) -> (O) { O[i, j : N, 2] = =(I[i]); }", {"I": I5},
         lambda x: {"O": np.repeat(x[:, None], 2, axis=1)}),
    Case("sum_into_one", "function (I[N]) -> (O) { O[s : 1] = +(I[i]); }", {"I": I5},
         lambda x: {"O": np.array([x.sum()], np.float32)}),
    Case("fill", "function (One[]) -> (O) { O[i : 3] = =(One[]); }",
         {"One": np.array(2.5, np.float32)},
         lambda One: {"O": np.full(3, 2.5, np.float32)}),
    Case("output_only_constrained",
         "function (I[N]) -> (O) { O[i, j : N, 5] = =(I[i]), j < 3; }", {"I": I5},
         lambda x: {"O": np.concatenate([np.repeat(x[:, None], 3, 1), np.zeros((5, 2))],
                                        1).astype(np.float32)}),
    Case("output_only_window_sum",
         "function (I[N]) -> (O) { O[i + j : N + 2] = +(I[i]), j < 3; }", {"I": I5},
         lambda x: {"O": np.convolve(x, np.ones(3, np.float32)).astype(np.float32)}),
    Case("output_only_max",
         "function (I[N]) -> (O) { O[j, i : 3, N] = >(I[i]); }", {"I": I5},
         lambda x: {"O": np.tile(x, (3, 1))}),
    Case("constants_same_conv", """
        function (I[X], F[K]) -> (O) {
            S = 2;
            Pad = (max(0, (X - 1) * S + K - X)) / 2;
            O[x : (X + S - 1) / S] = +(I[S * x + k - Pad] * F[k]);
        }""", {"I": I7, "F": F3}, lambda x, F: {"O": _strided_same_conv(x, F, 2)}),
    Case("constant_in_elementwise", """
        function (I[N]) -> (O) { C = N * 2 - 1; O = I + C; }""", {"I": I8.astype(np.int32)},
         lambda x: {"O": x + 7}),
    Case("constant_output", """
        function (I[N]) -> (O, C) { C = N + 1; O = I * C; }""", {"I": I5},
         lambda x: {"O": x * 6, "C": np.array(6, np.int32)}),
    Case("constant_operand", """
        function (I[N]) -> (O) { C = 3; O[i : N] = +(I[i] * C[]); }""", {"I": I5},
         lambda x: {"O": (x * 3).astype(np.float32)}),
    Case("max_min_sizes", """
        function (I[N]) -> (O, P) { O[i : max(N, 7)] = =(I[i]); P[i : min(N, 2)] = =(I[i]); }""",
         {"I": I5}, lambda x: {"O": np.concatenate([x, np.zeros(2, np.float32)]),
                               "P": x[:2]}),
    Case("integer_input_size", "function (I[N], D) -> (O) { O[i : D] = =(I[i]); }",
         {"I": I5, "D": 3}, lambda x, D: {"O": x[:D]}),
    Case("integer_input_index", """
        function (I[N], D[]) -> (O) { O[i : N - D] = =(I[i + D]); }""",
         {"I": I7, "D": np.array(2, np.int64)}, lambda x, D: {"O": x[int(D):]}),
    Case("integer_input_reshape", "function (I, D0) -> (O) { O = reshape(I, D0, 3); }",
         {"I": _RNG.standard_normal((2, 3, 2)).astype(np.float32), "D0": 4},
         lambda x, D0: {"O": x.reshape(D0, 3)}),
    Case("keras_repeat_elements", """
        function (I[N0, N1]) -> (O) {
            O[n0, 3*n1 + k : N0, 3*N1] = =(I[n0, n1]), k < 3 no_defract;
        }""", {"I": _RNG.standard_normal((2, 3)).astype(np.float32)},
         lambda x: {"O": np.repeat(x, 3, axis=1)}),
    Case("keras_tile", """
        function (I[S0, S1]) -> (O) {
            O[t0 * S0 + i0, t1 * S1 + i1 : S0 * 2, S1 * 3] = =(I[i0, i1]),
                t0 < 2, t1 < 3 no_defract;
        }""", {"I": _RNG.standard_normal((2, 3)).astype(np.float32)},
         lambda x: {"O": np.tile(x, (2, 3))}),
    Case("constants_in_literal_positions", """
        function (X[N, M]) -> (Y, J) {
            W = 8; D = 1;
            Y = as_int(X * 10.0, W);
            J = index(X, D);
        }""", {"X": _RNG.standard_normal((2, 3)).astype(np.float32)},
         lambda x: {"Y": (x * 10).astype(np.int8),
                    "J": np.broadcast_to(np.arange(3, dtype=np.int32), (2, 3))}),
    Case("derived_constants", """
        function (O[N, L0, CO], K[LK0, CI, CO], D0) -> (I) {
            Pad0 = (max(0, ((D0 + 2 - 1) / 2 - 1) * 2 + 3 - D0)) / 2;
            I[n, 2*x0 + 1*k0 - Pad0, ci: N, D0, CI] = +(O[n, x0, co]*K[k0, ci, co]);
        }""", {"O": _RNG.standard_normal((1, 4, 2)).astype(np.float32),
               "K": _RNG.standard_normal((3, 3, 2)).astype(np.float32), "D0": 7},
         lambda o, k, d0: {"I": _transposed_conv(o, k, d0)}),
    Case("compare_outer", """
        function (A[N], B[M]) -> (O) { O[i, j : N, M] = =(A[i] == B[j]); }""",
         {"A": A4, "B": B6}, lambda A, B: {"O": np.equal.outer(A, B)}),
    Case("compare_any", """
        function (A[N], B[M]) -> (O) { O[i : N] = >(A[i] == B[j]); }""",
         {"A": A4, "B": B6}, lambda A, B: {"O": np.isin(A, B)}),
    Case("attributes", """
        function (A[N], B[M]) -> (O, P) {
            [[pid(outer, Sum)]] O[i, j : N, M] = +(A[i] * B[j]);
            [[pid(relu_1)]] [[fused]] P = max(O, 0);
        }""", {"A": A4, "B": B6},
         lambda A, B: {"O": np.multiply.outer(A, B), "P": np.maximum(np.multiply.outer(A, B), 0)}),
    Case("composed_form", """
        function (
          X_I_0[X_I_0_0, X_I_0_1],
          X_I_1[X_I_1_0]
        ) -> (
          X_T4
        ) {
          X_T0 = 1;
          X_T1 = max(X_I_0_1, X_I_1_0);
          [[pid(sum)]] X_T2[x0, 0 : X_I_0_0, X_T0] = +(X_I_0[x0, x1]);
          [[pid(pad)]] X_T3[x0, x1 : X_I_0_0, X_T1 + X_T0] = =(X_T2[x0, 0]);
          X_T4 = X_T3 + X_T1;
        }""",
         {"X_I_0": _RNG.standard_normal((2, 3)).astype(np.float32),
          "X_I_1": np.zeros(3, np.float32)},
         lambda X_I_0, X_I_1: {"X_T4": np.repeat(X_I_0.sum(1, keepdims=True), 4, 1) + 3}),
]


def _arrays(case: Case) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, np.int32) if isinstance(v, int) else v
            for k, v in case.inputs.items()}


def _check(case: Case, got: dict[str, np.ndarray]) -> None:
    want = case.expected(*case.inputs.values())
    assert sorted(got) == sorted(want)
    for name, w in want.items():
        w = np.asarray(w)
        assert got[name].shape == w.shape, name
        if w.dtype.kind == "b":
            assert got[name].dtype == np.bool_, name
        np.testing.assert_allclose(got[name], w, rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_interpreted(case: Case):
    prog = stripe.lower(case.source, case.inputs)
    _check(case, stripe.interpret(prog, _arrays(case)))


def _compiled_params() -> list[object]:
    """Each case on one of cpu_generic, the host's config and npu_example (in turn, so each
    config gets a third of the cases) in the default run; on all three with
    ``--hypothesis-profile=long``."""
    everything = settings._current_profile == "long"
    configs = ("cpu_generic", "cpu_avx2", "npu_example")
    out = []
    for k, case in enumerate(CASES):
        for j, name in enumerate(configs):
            if not everything and j != k % len(configs):
                continue
            missing = missing_cpu_features(load_config(name).target.compiler_flags)
            marks = [pytest.mark.skip(reason=f"this CPU lacks {', '.join(missing)}")] \
                if missing else []
            out.append(pytest.param(case, name, marks=marks, id=f"{case.name}-{name}"))
    return out


@pytest.mark.parametrize("case, config", _compiled_params())
def test_compiled(case: Case, config: str):
    prog = stripe.compile(case.source, case.inputs, config)
    _check(case, prog(**_arrays(case)))


# the constructs one by one ---------------------------------------------------------------

def _kernels(block: Block) -> list[Block]:
    return list(block.stmts[0].stmts)


def test_output_only_index_ranges_are_exact():
    """``j`` is bounded by the output size and the constraint, and by nothing else."""
    prog = stripe.lower("function (I[N]) -> (O) { O[i + j : N + 2] = +(I[i]), j < 3; }",
                        {"I": ((5,), "float32")})
    kernel = _kernels(prog)[-1]
    assert [(x.name, x.range) for x in kernel.idxs] == [("i", 5), ("j", 3)]
    # i + j < 7 is implied by the ranges; nothing else is left
    assert kernel.constraints == ()


def test_output_only_index_single_value_disappears():
    prog = stripe.lower("function (I[N]) -> (O) { O[s : 1] = +(I[i]); }",
                        {"I": ((5,), "float32")})
    assert [x.name for x in _kernels(prog)[-1].idxs] == ["i"]


def test_unbounded_index_is_still_refused():
    with pytest.raises(TileError, match="cannot infer a range for index k"):
        stripe.lower("function (I[N]) -> (O) { O[i : N] = +(I[i + k - k2]); }",
                     {"I": ((5,), "float32")})


def test_integer_constant_is_not_a_buffer_unless_needed():
    prog = stripe.lower("function (I[N]) -> (O) { C = N * 2; O = I + C; }",
                        {"I": ((5,), "int8")})
    assert [r.into for r in prog.refs] == ["I", "O"]
    # typed as the integer literal it stands for, as a dimension name is
    for dtype in ("int8", "uint16", "float32"):
        const = stripe.lower("function (I[N]) -> (O) { C = N * 2; O = I + C; }",
                             {"I": ((5,), dtype)})
        literal = stripe.lower("function (I[N]) -> (O) { O = I + 10; }", {"I": ((5,), dtype)})
        assert const.ref("O").dtype == literal.ref("O").dtype
    prog = stripe.lower("function (I[N]) -> (O) { C = 3; O[i : N] = +(I[i] * C[]); }",
                        {"I": ((5,), "float32")})
    assert [r.into for r in prog.refs] == ["I", "O", "C"]


def test_float_constant_stays_a_tensor():
    with pytest.raises(TileError, match="C is a tensor, not a dimension"):
        stripe.lower("function (I[N]) -> (O) { C = 1.5; O[i : C] = =(I[i]); }",
                     {"I": ((5,), "float32")})


def test_constant_assigned_twice_or_over_a_dimension():
    with pytest.raises(TileError, match="assigned twice"):
        stripe.lower("function (I[N]) -> (O) { C = 1; C = 2; O = I; }", {"I": ((5,), "float32")})
    with pytest.raises(TileError, match="dimension name"):
        stripe.lower("function (I[N]) -> (O) { N = 1; O = I; }", {"I": ((5,), "float32")})


def test_constant_division_by_zero_in_a_size():
    with pytest.raises(ShapeError, match="division by zero"):
        stripe.lower("function (I[N]) -> (O) { Z = N - 5; O[i : N / Z] = =(I[i]); }",
                     {"I": ((5,), "float32")})


def test_size_function_with_wrong_arity():
    with pytest.raises(TileError, match="max takes 2 arguments, got 3"):
        stripe.lower("function (I[N]) -> (O) { O[i : max(N, 1, 2)] = =(I[i]); }",
                     {"I": ((5,), "float32")})


def test_integer_input_value_forms():
    src = "function (I[N], D) -> (O) { O[i : D] = =(I[i]); }"
    for value in (3, np.int16(3), np.array(3, np.uint8)):
        prog, used = lower_specialised(src, {"I": ((5,), "float32"), "D": value})
        assert prog.ref("O").shape.sizes == (3,)
        assert used == {"D": 3}
    with pytest.raises(TileError, match="give its value"):
        stripe.lower(src, {"I": ((5,), "float32"), "D": ((), "int32")})
    with pytest.raises(TileError, match="D is a tensor, not a dimension"):
        stripe.lower(src, {"I": ((5,), "float32"), "D": np.array(3.0, np.float32)})


def test_derived_constant_is_a_tensor_in_elementwise_code():
    """A statement over an integer input is a size where one is needed (specialising the
    program) and a tensor computed at run time elsewhere."""
    src = "function (I[N], D) -> (O, P) { E = D + 1; O[i : E] = =(I[i]); P = I * E; }"
    prog, used = lower_specialised(src, {"I": ((5,), "int32"), "D": 2})
    assert used == {"D": 2} and prog.ref("O").shape.sizes == (3,)
    assert "E" in [r.into for r in prog.refs]
    got = stripe.interpret(prog, {"I": np.arange(5, dtype=np.int32),
                                  "D": np.array(2, np.int32)})
    np.testing.assert_array_equal(got["P"], np.arange(5) * 3)
    prog, used = lower_specialised("function (I[N], D) -> (P) { E = D + 1; P = I * E; }",
                                   {"I": ((5,), "int32"), "D": 2})
    assert used == {}


def test_float_value_is_a_rank0_float32_input():
    prog = stripe.lower("function (I[N], S) -> (O) { O = I * S; }",
                        {"I": ((3,), "float32"), "S": 0.5})
    assert prog.ref("S").shape.sizes == () and prog.ref("S").dtype.long_name == "float32"
    got = stripe.interpret(prog, {"I": np.ones(3, np.float32), "S": np.array(3, np.float32)})
    np.testing.assert_array_equal(got["O"], [3, 3, 3])


def test_integer_input_used_only_as_a_tensor_is_not_specialised():
    src = "function (I[N], D) -> (O) { O = I + D; }"
    prog, used = lower_specialised(src, {"I": ((5,), "int32"), "D": 3})
    assert used == {}
    compiled = stripe.compile(src, {"I": ((5,), "int32"), "D": 3}, "cpu_generic")
    got = compiled(I=np.arange(5, dtype=np.int32), D=np.array(7, np.int32))["O"]
    np.testing.assert_array_equal(got, np.arange(5) + 7)


def test_integer_input_specialises_the_program():
    src = "function (I[N], D) -> (O) { O[i : N] = =(I[i + D]); }"
    config = load_config("cpu_generic")
    p2, _ = lower_specialised(src, {"I": ((6,), "float32"), "D": 2})
    p3, _ = lower_specialised(src, {"I": ((6,), "float32"), "D": 3})
    assert pipeline_cache.key(p2, config, True) != pipeline_cache.key(p3, config, True)
    prog = stripe.compile(src, {"I": ((6,), "float32"), "D": 2}, "cpu_generic")
    assert prog.specialised == {"D": 2}
    i = np.arange(6, dtype=np.float32)
    np.testing.assert_array_equal(prog(I=i, D=np.array(2, np.int32))["O"],
                                  [2, 3, 4, 5, 0, 0])
    with pytest.raises(ArgumentError, match="compiled for D = 2"):
        prog(I=i, D=np.array(3, np.int32))
    with pytest.raises(ArgumentError, match="compiled for D = 2"):
        prog.run({"I": i, "D": np.array(5, np.int32)})


def test_compare_combination_is_bool_and_tagged():
    prog = stripe.lower("function (A[N], B[M]) -> (O) { O[i, j : N, M] = =(A[i] == B[j]); }",
                        {"A": ((4,), "int32"), "B": ((6,), "float32")})
    assert prog.ref("O").dtype.long_name == "bool"
    kernel = _kernels(prog)[-1]
    assert "comb_op_eq" in kernel.tags
    with pytest.raises(TileError, match="aggregation '\\+' of bool values"):
        stripe.lower("function (A[N], B[M]) -> (O) { O[i : N] = +(A[i] == B[j]); }",
                     {"A": ((4,), "int32"), "B": ((6,), "int32")})


def test_attributes_become_kernel_tags():
    prog = stripe.lower("""function (A[N]) -> (O, P) {
        [[pid(outer, Sum_2)]] [[fused]] O[i : N] = >(A[i]);
        P = O + 1;
    }""", {"A": ((4,), "float32")})
    kernels = _kernels(prog)
    tagged = [k for k in kernels if "attr_pid=outer:Sum_2" in k.tags]
    assert len(tagged) == len(kernels) - 1 and all("attr_fused" in k.tags for k in tagged)
    assert not any(t.startswith("attr_") for t in kernels[-1].tags)
    text = stripe.print_ir(prog)
    assert stripe.parse_ir(text) == prog


def test_attributes_on_a_materialised_constant():
    prog = stripe.lower("function (A[N]) -> (O) { [[pid(c)]] C = 2; O[i : N] = +(A[i] * C[]); }",
                        {"A": ((4,), "float32")})
    assert "attr_pid=c" in _kernels(prog)[0].tags
    assert "attr_pid=c" not in _kernels(prog)[-1].tags


def test_bind_time_functions():
    src = """function (I[N], J[M]) -> (O) {
        G = broadcast(N, M); A = assert_group_count(N == M); H = match(N, 4);
        O[i : G + A + H] = =(I[i]);
    }"""
    prog = stripe.lower(src, {"I": ((4,), "float32"), "J": ((4,), "float32")})
    assert prog.ref("O").shape.sizes == (9,)
    one = stripe.lower("function (I[N], J[M]) -> (O) { G = broadcast(N, M); O[i : G] = =(I[i]); }",
                       {"I": ((1,), "float32"), "J": ((6,), "float32")})
    assert one.ref("O").shape.sizes == (6,)
    with pytest.raises(ShapeError, match="broadcast: sizes 4 and 3 do not broadcast"):
        stripe.lower(src, {"I": ((4,), "float32"), "J": ((3,), "float32")})
    with pytest.raises(TileError, match="assertion assert_group_count failed"):
        stripe.lower(src.replace("broadcast(N, M)", "N"),
                     {"I": ((4,), "float32"), "J": ((3,), "float32")})
    with pytest.raises(ShapeError, match="match: sizes 5 and 4 differ"):
        stripe.lower(src, {"I": ((5,), "float32"), "J": ((5,), "float32")})
    with pytest.raises(TileError, match="must be integer constant expressions"):
        stripe.lower("function (I[N]) -> (O) { A = assert_ok(I); O = I; }",
                     {"I": ((4,), "float32")})


@pytest.mark.parametrize("source, message, column", [
    ("function (#A) -> (B) { B = #A; }", "unexpected character '#' (PlaidML's #name "
     "identifiers are not supported", 11),
    ("function (A) -> (B) { B[$i : 2] = =(A[$i]); }", "unexpected character '$' (PlaidML's "
     "$name identifiers are not supported", 25),
    ("function (A) -> (B') { B' = A; }", "unexpected character \"'\" (names ending in ' are "
     "not supported)", 19),
    ("polynomial 2 * i + 1;", "PlaidML's 'polynomial' entry point is not supported", 1),
    ("function (A[N]) -> (B) { B[i : N] = +(A[N / i]); }",
     "index expression is not affine: division of an index", 43),
])
def test_refused_plaidml_constructs_are_located(source: str, message: str, column: int):
    with pytest.raises(StripeError) as e:
        stripe.lower(source, {"A": ((4,), "float32")})
    assert e.value.bare_message.startswith(message)
    assert (e.value.line, e.value.column) == (1, column)


# fractional indexes (PlaidML's defract) ---------------------------------------------------

def _fractional_ref(o: np.ndarray, k: np.ndarray, out_size: tuple[int, ...], stride: int,
                    pads: tuple[int, ...]) -> np.ndarray:
    """sum over k, co of O[n, (x + k - P) / S, co] * K[k, ci, co], only where each division
    is exact, written out (any number of spatial dimensions)."""
    n_, *spatial, _ = o.shape
    ci = k.shape[-2]
    out = np.zeros((n_, *out_size, ci), np.float64)
    for n in range(n_):
        for x in np.ndindex(*out_size):
            for kk in np.ndindex(*k.shape[:-2]):
                src = []
                for xd, kd, pd, size in zip(x, kk, pads, spatial):
                    t = xd + kd - pd
                    if t % stride or not 0 <= t // stride < size:
                        break
                    src.append(t // stride)
                else:
                    out[(n, *x)] += k[kk] @ o[(n, *src)]
    return out.astype(np.float32)


@pytest.mark.parametrize("stride, pad, size", [(2, 1, 10), (3, 2, 13), (2, 0, 7)])
def test_fractional_1d_transposed_convolution(stride: int, pad: int, size: int):
    o = _RNG.standard_normal((2, 5, 3)).astype(np.float32)
    k = _RNG.standard_normal((3, 4, 3)).astype(np.float32)
    src = f"""function (O[N, L, CO], K[KL, CI, CO]) -> (I) {{
        I[n, x, ci : N, {size}, CI] = +(O[n, (x + k - {pad}) / {stride}, co] * K[k, ci, co]);
    }}"""
    prog = stripe.lower(src, {"O": o, "K": k})
    got = stripe.interpret(prog, {"O": o, "K": k})["I"]
    np.testing.assert_allclose(got, _fractional_ref(o, k, (size,), stride, (pad,)),
                               rtol=1e-5, atol=1e-5)
    kernel = _kernels(prog)[-1]
    assert "k" not in [x.name for x in kernel.idxs]  # solved for k: no point visited in vain


@pytest.mark.parametrize("config", ["cpu_generic", "cpu_avx2"])
def test_fractional_2d_transposed_convolution(config: str):
    o = _RNG.standard_normal((1, 4, 3, 2)).astype(np.float32)
    k = _RNG.standard_normal((3, 2, 5, 2)).astype(np.float32)
    src = """function (O[N, LX, LY, CO], K[KX, KY, CI, CO]) -> (I) {
        I[n, x, y, ci : N, 9, 7, CI] =
            +(O[n, (x + kx - 1) / 2, (y + ky) / 3, co] * K[kx, ky, ci, co]);
    }"""
    want = _fractional_ref_2d(o, k, (9, 7), (2, 3), (1, 0))
    got = stripe.interpret(stripe.lower(src, {"O": o, "K": k}), {"O": o, "K": k})["I"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    got = stripe.compile(src, {"O": o, "K": k}, config)(O=o, K=k)["I"]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _fractional_ref_2d(o: np.ndarray, k: np.ndarray, size: tuple[int, int],
                       strides: tuple[int, int], pads: tuple[int, int]) -> np.ndarray:
    out = np.zeros((o.shape[0], *size, k.shape[2]), np.float64)
    for n, x, y in np.ndindex(o.shape[0], *size):
        for kx, ky in np.ndindex(*k.shape[:2]):
            tx, ty = x + kx - pads[0], y + ky - pads[1]
            if tx % strides[0] or ty % strides[1]:
                continue
            sx, sy = tx // strides[0], ty // strides[1]
            if 0 <= sx < o.shape[1] and 0 <= sy < o.shape[2]:
                out[n, x, y] += k[kx, ky] @ o[n, sx, sy]
    return out.astype(np.float32)


def test_fractional_forms():
    i = np.arange(1, 9, dtype=np.float32)
    # no index with coefficient +-1: the quotient index keeps an equality constraint
    prog = stripe.lower("function (I[N]) -> (O) { O[i : N] = +(I[(2 * i) / 4]); }", {"I": i})
    np.testing.assert_array_equal(stripe.interpret(prog, {"I": i})["O"],
                                  [i[j // 2] if j % 2 == 0 else 0 for j in range(8)])
    # in the output: only the even x contribute
    prog = stripe.lower("function (I[N]) -> (O) { O[x / 2 : 4] = +(I[x]); }", {"I": i})
    np.testing.assert_array_equal(stripe.interpret(prog, {"I": i})["O"], i[::2])
    # a negative divisor, a nested fraction, and the same division twice
    prog = stripe.lower("function (I[N]) -> (O) { O[x : 8] = +(I[(x - 7) / -2]); }", {"I": i})
    np.testing.assert_array_equal(stripe.interpret(prog, {"I": i})["O"],
                                  [i[(7 - x) // 2] if (x - 7) % 2 == 0 else 0 for x in range(8)])
    prog = stripe.lower("function (I[N]) -> (O) { O[x : 8] = +(I[(x / 2 + 1) / 2]); }",
                        {"I": i})
    np.testing.assert_array_equal(
        stripe.interpret(prog, {"I": i})["O"],
        [i[(x // 2 + 1) // 2] if x % 2 == 0 and (x // 2 + 1) % 2 == 0 else 0 for x in range(8)])
    prog = stripe.lower("function (I[N]) -> (O) { O[x : 8] = +(I[x / 2] * I[x / 2]); }",
                        {"I": i})
    np.testing.assert_array_equal(stripe.interpret(prog, {"I": i})["O"],
                                  [i[x // 2] ** 2 if x % 2 == 0 else 0 for x in range(8)])
    with pytest.raises(TileError, match="division of an index"):
        stripe.lower("function (I[N]) -> (O) { O[x : 8] = +(I[4 / x]); }", {"I": i})


# random contractions against a brute-force reading of the semantics ---------------------

_IDX = ("i", "j", "k")
_BOX = 24  # the brute force enumerates every index over [-_BOX, _BOX]


@st.composite
def _access_dim(draw: st.DrawFn, names: tuple[str, ...]) -> tuple[str, dict[str, int], int, int]:
    """(Tile text, coefficients, offset, divisor) of one access dimension:
    ``(sum c*idx + off) / d`` (d = 1: no division)."""
    coeffs = {n: draw(st.sampled_from((-1, 0, 1, 1, 2))) for n in names}
    off = draw(st.integers(-2, 2))
    d = draw(st.sampled_from((1, 1, 1, 2, 3)))
    terms = [f"{c} * {n}" for n, c in coeffs.items() if c] or ["0"]
    text = " + ".join(terms) + f" + {off}"
    return (f"({text}) / {d}" if d > 1 else text), coeffs, off, d


@st.composite
def _contraction(draw: st.DrawFn) -> tuple[str, dict[str, np.ndarray], list]:
    names = _IDX[:draw(st.integers(1, 3))]
    out_sizes = draw(st.lists(st.integers(1, 4), min_size=1, max_size=2))
    in_sizes = draw(st.lists(st.integers(1, 5), min_size=1, max_size=2))
    out = [draw(_access_dim(names)) for _ in out_sizes]
    ins = [draw(_access_dim(names)) for _ in in_sizes]
    cons = []
    if draw(st.booleans()):
        n = draw(st.sampled_from(names))
        cons.append((n, draw(st.integers(-1, 1)), draw(st.integers(1, 4))))
    agg = draw(st.sampled_from(("+", ">")))
    dims = ", ".join(f"N{k}" for k in range(len(in_sizes)))
    cons_text = "".join(f", {n} + {o} < {b}" for n, o, b in cons)
    src = (f"function (I[{dims}]) -> (O) {{ O[{', '.join(t for t, *_ in out)} : "
           f"{', '.join(map(str, out_sizes))}] = {agg}(I[{', '.join(t for t, *_ in ins)}])"
           f"{cons_text}; }}")
    values = draw(st.lists(st.integers(-9, 9), min_size=int(np.prod(in_sizes)),
                           max_size=int(np.prod(in_sizes))))
    arr = np.array(values, np.float32).reshape(in_sizes)
    return src, {"I": arr}, [names, out, out_sizes, ins, cons, agg]


def _brute_force(spec: list, arr: np.ndarray) -> tuple[np.ndarray, bool]:
    """The contraction by enumerating the box; also whether a contributing point lies on the
    box's edge (then the box may be too small)."""
    names, out, out_sizes, ins, cons, agg = spec
    grid = np.meshgrid(*[np.arange(-_BOX, _BOX + 1)] * len(names), indexing="ij")
    point = {n: g.ravel() for n, g in zip(names, grid)}
    ok = np.ones(point[names[0]].shape, bool)

    def access(dims: list, sizes: list) -> list[np.ndarray]:
        nonlocal ok
        idx = []
        for (_, coeffs, off, d), size in zip(dims, sizes):
            v = sum(c * point[n] for n, c in coeffs.items()) + off
            if not any(coeffs.values()):  # a constant: integer division, truncating
                v = v * 0 + int(off / d) * d
            exact = v % d == 0
            q = np.where(exact, v // d, -1)
            ok &= exact & (q >= 0) & (q < size)
            idx.append(q)
        return idx

    o_idx = access(out, out_sizes)
    i_idx = access(ins, list(arr.shape))
    for n, o, b in cons:
        ok &= (point[n] + o >= 0) & (point[n] + o < b)
    edge = any(bool(np.any(ok & (np.abs(point[n]) == _BOX))) for n in names)
    vals = arr[tuple(np.where(ok, x, 0) for x in i_idx)][ok]
    where = tuple(x[ok] for x in o_idx)
    result = np.zeros(out_sizes, np.float32)
    if agg == "+":
        np.add.at(result, where, vals)
    else:
        hit = np.zeros(out_sizes, bool)
        best = np.full(out_sizes, -np.inf, np.float32)
        np.maximum.at(best, where, vals)
        hit[where] = True
        result = np.where(hit, best, 0).astype(np.float32)
    return result, edge


@settings(max_examples=1000 if settings._current_profile == "long" else 60, deadline=None)
@given(_contraction())
def test_random_contractions_match_brute_force(drawn):
    src, inputs, spec = drawn
    try:
        prog = stripe.lower(src, inputs)
    except TileError as e:
        assume("cannot infer a range" not in e.bare_message)
        raise
    want, edge = _brute_force(spec, inputs["I"])
    assume(not edge)
    got = stripe.interpret(prog, inputs)["O"]
    np.testing.assert_array_equal(got, want, err_msg=src)


def test_size_names_used_before_their_statement():
    with pytest.raises(TileError, match="C is used before it is assigned"):
        stripe.lower("function (I[N]) -> (O) { O[i : N] = =(I[i]), i < C; C = 2; }",
                     {"I": ((4,), "float32")})
    with pytest.raises(TileError, match="T is a tensor, not a dimension"):
        stripe.lower("function (I[N]) -> (O) { T = I * 2; O[i : T] = =(I[i]); }",
                     {"I": ((4,), "float32")})


def test_integer_input_values_through_the_compile_cache():
    """Compiling again for another value gives another program; compiling again for the same
    value (served from the compile cache) keeps the check."""
    src = "function (I[N], D) -> (O) { O[i : N] = =(I[i + D]); }"
    i = np.arange(6, dtype=np.float32)
    for d in (1, 3, 1):
        prog = stripe.compile(src, {"I": i, "D": d}, "cpu_generic")
        assert prog.specialised == {"D": d}
        want = np.concatenate([i[d:], np.zeros(d, np.float32)])
        np.testing.assert_array_equal(prog(I=i, D=np.array(d, np.int32))["O"], want)
        with pytest.raises(ArgumentError, match=f"compiled for D = {d}"):
            prog(I=i, D=np.array(d + 1, np.int32))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_lowering_is_deterministic_and_round_trips(case: Case):
    first = stripe.print_ir(stripe.lower(case.source, case.inputs))
    assert stripe.print_ir(stripe.lower(case.source, case.inputs)) == first
    assert stripe.print_ir(stripe.parse_ir(first)) == first


def test_size_functions():
    src = """function (I[N], J[M]) -> (O) {
        O[i, j, k : add(mul(N, 2), neg(1)), div(M, 2) + mod(M, 4) + ceil(floor(ident(M))),
                    broadcast(N, 1) + match(M, 7) + min(N, M) + sub(M, N)] = =(I[i]);
    }"""
    prog = stripe.lower(src, {"I": ((5,), "float32"), "J": ((7,), "float32")})
    assert prog.ref("O").shape.sizes == (9, 3 + 3 + 7, 5 + 7 + 5 + 2)
    with pytest.raises(ShapeError, match="match: sizes 7 and 6 differ"):
        stripe.lower("function (I[N]) -> (O) { O[i : match(N, 6)] = =(I[i]); }",
                     {"I": ((7,), "float32")})
    with pytest.raises(ShapeError, match="division by zero in mod"):
        stripe.lower("function (I[N]) -> (O) { O[i : mod(N, 0)] = =(I[i]); }",
                     {"I": ((7,), "float32")})
    with pytest.raises(TileError, match="neg takes 1 argument, got 2"):
        stripe.lower("function (I[N]) -> (O) { O[i : neg(N, 0)] = =(I[i]); }",
                     {"I": ((7,), "float32")})


def test_a_lowered_program_carries_its_specialisation_and_checks_it():
    """The values a program was lowered for are tags of the program
    (``specialised=<input>:<value>``): they survive the text form, and the interpreter and
    a program compiled from the block (not only through stripe.compile) refuse another
    value."""
    from stripe.compiler import compile_program
    from stripe.errors import ArgumentError

    src = "function (I[N], D) -> (O) { O[i : D] = =(I[N - 1 - i]); }"
    x = np.arange(7, dtype=np.float32)
    block = stripe.lower(src, {"I": x, "D": 4})
    assert "specialised=D:4" in block.tags
    again = stripe.parse_ir(stripe.print_ir(block))
    assert again.tags == block.tags
    np.testing.assert_array_equal(stripe.interpret(again, {"I": x, "D": np.int32(4)})["O"],
                                  x[::-1][:4])
    prog = compile_program(block)
    assert prog.specialised == {"D": 4}
    np.testing.assert_array_equal(prog(I=x, D=np.array(4, np.int32))["O"], x[::-1][:4])
    for run in (lambda: stripe.interpret(block, {"I": x, "D": np.int32(5)}),
                lambda: prog(I=x, D=np.array(5, np.int32))):
        with pytest.raises(ArgumentError, match="D = 4"):
            run()
    assert not any(t.startswith("specialised") for t in stripe.lower(src.replace(
        "O[i : D]", "O[i : N]").replace(", D)", ")"), {"I": x}).tags)
