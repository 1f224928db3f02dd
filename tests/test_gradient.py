"""stripe.gradient: the gradient Tile of every catalogue op with a floating-point input against
central finite differences in float64 (directional derivatives along random directions), in
the interpreter and compiled for cpu_generic and the host's CPU config (a representative
subset by default, every op with ``--hypothesis-profile=long``); the
same check on random Tile programs (hypothesis); ties, zeros, the printed form and the errors.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from conftest import runnable_configs
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from ops_catalog import OPS, OPS_BY_NAME, Op, random_inputs
from test_random_programs import Program, programs

import stripe
from stripe import host
from stripe.cflags import cpu_flags
from stripe.errors import ArgumentError, ArgumentTypeError, TileError
from stripe.gradient import GradientError, gradient

FLOATS = ("float16", "bfloat16", "float32", "float64")
EPS = 1e-6


def as_float64(specs: dict[str, tuple[tuple[int, ...], str]], arrays: dict[str, np.ndarray]
               ) -> dict[str, np.ndarray]:
    """The arrays with every floating-point input converted to float64."""
    return {n: arrays[n].astype(np.float64) if d in FLOATS else arrays[n]
            for n, (_, d) in specs.items()}


def fd_check(source: str, arrays: dict[str, np.ndarray], rng: np.random.Generator,
             run_gradient=None, of: list[str] | None = None) -> None:  # type: ignore[no-untyped-def]
    """The gradient of ``source`` (float64 ``arrays``) along a random direction and a random
    cotangent matches the central finite difference of <C_grad, C>."""
    forward = stripe.lower(source, arrays)
    outs = stripe.interpret(forward, arrays)
    floats = [n for n, a in arrays.items() if a.dtype == np.float64]
    of = of or [o for o, v in outs.items() if v.dtype == np.float64]
    g = gradient(source, wrt=floats, of=of, inputs=arrays)
    cts = {f"{o}_grad": rng.standard_normal(outs[o].shape) for o in of}
    grad_in = {**arrays, **cts}
    if run_gradient is None:
        grads = stripe.interpret(stripe.lower(g, grad_in), grad_in)
    else:
        grads = run_gradient(g, grad_in)
    for n in floats:
        assert grads[f"{n}_grad"].shape == arrays[n].shape
        assert grads[f"{n}_grad"].dtype == arrays[n].dtype
    dirs = {n: rng.standard_normal(arrays[n].shape) for n in floats}

    def f(t: float) -> float:
        moved = {**arrays, **{n: arrays[n] + t * dirs[n] for n in floats}}
        o = stripe.interpret(forward, moved)
        return sum(float(np.sum(o[k] * cts[f"{k}_grad"])) for k in of)

    fd = (f(EPS) - f(-EPS)) / (2 * EPS)
    terms = [grads[f"{n}_grad"] * dirs[n] for n in floats]
    an = sum(float(np.sum(t)) for t in terms)
    scale = 1 + sum(float(np.sum(np.abs(t))) for t in terms)
    assert abs(fd - an) <= 1e-6 * scale, f"finite difference {fd}, gradient {an}\n{g}"


def catalogue_arrays(op: Op) -> dict[str, np.ndarray]:
    return as_float64(dict(op.inputs), random_inputs(op))


def has_float_input(op: Op) -> bool:
    return any(d in FLOATS for _, d in op.inputs.values())


DIFFERENTIABLE = [op for op in OPS if has_float_input(op) and op.name != "logical_ops"]


@pytest.mark.parametrize("op", DIFFERENTIABLE, ids=lambda op: op.name)
def test_catalogue_gradient_matches_finite_differences(op: Op, rng: np.random.Generator) -> None:
    fd_check(op.source, catalogue_arrays(op), rng)


# a representative subset by default (each compiles C); every op in the long profile
COMPILED = ([op.name for op in DIFFERENTIABLE] if settings._current_profile == "long"
            else ["matmul", "conv2d_stride2", "maxpool2x2", "softmax", "prod_rows"])
_HOST = host.choose_config(cpu_flags(), this_cpu=True)


@pytest.mark.parametrize("config", [c for c in runnable_configs()
                                    if c.id in ("cpu_generic", _HOST)])
@pytest.mark.parametrize("name", COMPILED)
def test_compiled_gradient_matches_finite_differences(name: str, config: str,
                                                      rng: np.random.Generator) -> None:
    def run(g: str, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return stripe.compile(g, arrays, target=config)(**arrays)

    fd_check(OPS_BY_NAME[name].source, catalogue_arrays(OPS_BY_NAME[name]), rng, run)


_EXAMPLES = 10 if settings.default.max_examples < 1000 else settings.default.max_examples // 4


@settings(max_examples=_EXAMPLES, deadline=None, derandomize=_EXAMPLES == 10,
          suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), seed=st.integers(0, 2**16))
def test_random_program_gradient(prog: Program, seed: int) -> None:
    rng = np.random.default_rng(seed)
    arrays = {n: rng.standard_normal(s) for n, (s, _) in prog.inputs.items()}
    # a max/min whose winner is not unique has no derivative: keep to unique winners
    out = stripe.interpret(stripe.lower(prog.source, arrays), arrays)["O"]
    assume(np.all(np.isfinite(out)))
    fd_check(prog.source, arrays, rng)


# ties, zeros, types --------------------------------------------------------------------------

def run_gradient(source: str, arrays: dict[str, np.ndarray], **kw: object
                 ) -> dict[str, np.ndarray]:
    g = gradient(source, inputs=arrays, **kw)  # type: ignore[arg-type]
    outs = stripe.interpret(stripe.lower(source, arrays), arrays)
    of = kw.get("of") or list(outs)
    of = [of] if isinstance(of, str) else of
    grad_in = {**arrays, **{f"{o}_grad": np.ones_like(outs[o]) for o in of}}
    return stripe.interpret(stripe.lower(g, grad_in), grad_in)


def test_max_ties_share_the_cotangent_evenly() -> None:
    src = "function (I[N]) -> (O) { O[i : 2] = >(I[2 * i + j]), j < 2; }"
    got = run_gradient(src, {"I": np.array([1.0, 3.0, 3.0, 3.0])})["I_grad"]
    np.testing.assert_array_equal(got, [0.0, 1.0, 0.5, 0.5])
    src = "function (A[N], B[N]) -> (O) { O = max(A, B); }"
    got = run_gradient(src, {"A": np.array([1.0, 2.0]), "B": np.array([1.0, 1.0])})
    np.testing.assert_array_equal(got["A_grad"], [0.5, 1.0])
    np.testing.assert_array_equal(got["B_grad"], [0.5, 0.0])


def test_product_gradient_is_exact_with_zeros() -> None:
    src = "function (I[M, N]) -> (O) { O[m : M] = *(I[m, n]); }"
    x = np.array([[2.0, 3.0, 5.0], [2.0, 0.0, 5.0], [0.0, 3.0, 0.0]])
    got = run_gradient(src, {"I": x})["I_grad"]
    np.testing.assert_array_equal(got, [[15.0, 10.0, 6.0], [0.0, 10.0, 0.0], [0.0, 0.0, 0.0]])


def test_gradient_has_the_input_dtype() -> None:
    src = "function (A[N], B[N]) -> (O) { O = A * B; }"
    arrays = {"A": np.arange(3, dtype=np.float32), "B": np.arange(3, dtype=np.float64)}
    g = gradient(src, inputs=arrays)
    assert "A_grad = float32(" in g
    got = run_gradient(src, arrays)
    assert got["A_grad"].dtype == np.float32 and got["B_grad"].dtype == np.float64
    np.testing.assert_array_equal(got["A_grad"], [0, 1, 2])


def test_unconnected_input_gets_zeros_of_its_type() -> None:
    src = "function (A[N], B[N]) -> (O, P) { O = A * 2.0; P = B; }"
    got = run_gradient(src, {"A": np.ones(3), "B": np.ones(3)}, wrt="B", of="O")
    np.testing.assert_array_equal(got["B_grad"], np.zeros(3))


def test_uses_of_a_tensor_are_summed_and_outputs_used_later_too() -> None:
    src = "function (A[N]) -> (O, P) { O = A * A; P[i : N] = +(O[i] * A[i]); }"
    a = np.array([1.0, 2.0])
    got = run_gradient(src, {"A": a})  # d/dA of sum(A * A) + sum(A * A * A)
    np.testing.assert_array_equal(got["A_grad"], 2 * a + 3 * a * a)


# the printed form and the API ----------------------------------------------------------------

MATMUL_GRADIENT = """\
function (A[M, K], B[K, N], C_grad[M, N]) -> (A_grad, B_grad) {
    A_grad[m, k : M, K] = +(C_grad[m, n] * B[k, n]);
    B_grad[k, n : K, N] = +(A[m, k] * C_grad[m, n]);
}
"""


def test_matmul_gradient_is_two_contractions() -> None:
    assert gradient(OPS_BY_NAME["matmul"].source, wrt=["A", "B"], of="C") == MATMUL_GRADIENT


def test_gradient_without_inputs_works_for_any_shapes(rng: np.random.Generator) -> None:
    src = OPS_BY_NAME["conv2d_stride2"].source
    g = gradient(src)
    assert "match(" in g  # the cotangent's computed sizes are checked when binding
    for shape in ((1, 7, 9, 2), (2, 6, 5, 2)):
        arrays = {"I": rng.standard_normal(shape), "F": rng.standard_normal((3, 3, 2, 3))}
        fd_check(src, arrays, rng)
        out = stripe.interpret(stripe.lower(src, arrays), arrays)["O"]
        bad = {**arrays, "O_grad": np.zeros((out.shape[0], out.shape[1] + 1, *out.shape[2:]))}
        with pytest.raises(stripe.ShapeError):
            stripe.lower(g, bad)


def test_generated_names_never_clash() -> None:
    # the source already uses the names the generator would pick first
    src = """function (A[N], DA_0[N], One_1[N], Ties_2[N]) -> (O) {
        D_3 = A * DA_0 + One_1;
        O[i : 1] = >(D_3[j] * Ties_2[j]);
    }"""
    rng = np.random.default_rng(1)
    fd_check(src, {n: rng.standard_normal(4) for n in ("A", "DA_0", "One_1", "Ties_2")}, rng)


def test_statement_attributes_and_builtins_go_through(rng: np.random.Generator) -> None:
    src = """function (I[X, Y]) -> (O) {
        [[pid(s)]] O = builtin_softmax(I * 2, X, Y) + sigmoid(I) + relu(I);
    }"""
    fd_check(src, {"I": rng.standard_normal((3, 5))}, rng)


def test_non_differentiable_path_is_an_error_naming_the_statement() -> None:
    src = "function (A[N]) -> (O) {\n    T = floor(A);\n    O = T * 2.0;\n}"
    with pytest.raises(GradientError, match=r"line 2, column 5: .*floor\(\).*'T = floor\(A\)'"):
        gradient(src)
    src = "function (A[N], B[N]) -> (O) { O[i : N] = +(A[i] == B[i] ? B[i]); }"
    with pytest.raises(GradientError, match="condition"):
        gradient(src, wrt="A")
    with pytest.raises(GradientError, match=r"'\*' aggregation of a combination"):
        gradient("function (A[N], B[N]) -> (O) { O[i : 1] = *(A[j] * B[j]); }")


def test_argument_errors() -> None:
    src = OPS_BY_NAME["matmul"].source
    with pytest.raises(ArgumentError, match="wrt: 'X' is not an input"):
        gradient(src, wrt="X")
    with pytest.raises(ArgumentError, match="of: 'A' is not an output"):
        gradient(src, of="A")
    with pytest.raises(ArgumentError, match="listed twice"):
        gradient(src, wrt=["A", "A"])
    with pytest.raises(ArgumentTypeError, match="wrt"):
        gradient(src, wrt=3)  # type: ignore[arg-type]
    with pytest.raises(ArgumentError, match="A_grad"):
        gradient("function (A[N], A_grad[N]) -> (O) { O = A + A_grad; }")
    ints = {"A": ((3, 4), "int32"), "B": ((4, 2), "int32")}
    with pytest.raises(ArgumentError, match="wrt: input A is int32"):
        gradient(src, wrt="A", inputs=ints)
    with pytest.raises(ArgumentError, match="no floating-point input"):
        gradient(src, inputs=ints)
    with pytest.raises(ArgumentError, match="of: output O is bool"):
        gradient(OPS_BY_NAME["logical_ops"].source, inputs=dict(OPS_BY_NAME["logical_ops"].inputs))
    with pytest.raises(TileError, match="rank of O is unknown"):
        gradient("function (A, B) -> (O) { O = A * B; }")
    with pytest.raises(stripe.TileSyntaxError):
        gradient("function (A) -> (O) { O = ; }")


def test_integer_inputs_are_left_out_by_default() -> None:
    op = OPS_BY_NAME["cond_contraction"]
    g = gradient(op.source, inputs=dict(op.inputs))
    assert re.search(r"-> \(C_grad\)", g)


def test_op_library_functions(rng: np.random.Generator) -> None:
    """A stripe.ops function is accepted as it is (its own input shapes and dtypes)."""
    from stripe import ops

    x = ops.input("X", (1, 6, 5, 3), "float64")
    w = ops.input("W", (3, 3, 3, 4), "float64")
    b = ops.input("B", (4,), "float64")
    fn = ops.function({"Y": ops.relu(ops.conv(x, w, strides=1, padding="same") + b)})
    g = gradient(fn, wrt=["W", "B"])
    assert g.startswith("function (X[1, 6, 5, 3], W[3, 3, 3, 4], B[4], Y_grad[")
    arrays = {"X": rng.standard_normal((1, 6, 5, 3)), "W": rng.standard_normal((3, 3, 3, 4)),
              "B": rng.standard_normal(4)}
    fd_check(fn.tile_source, arrays, rng)


DOC = Path(__file__).resolve().parent.parent / "docs" / "gradients.md"
DOC_EXAMPLE = re.compile(r"<!-- gradient (\{.*?\}) -->\n```\n(.*?)```\n\ngives\n\n```\n(.*?)```",
                         re.S)


def test_doc_examples_are_the_real_output() -> None:
    examples = DOC_EXAMPLE.findall(DOC.read_text())
    assert len(examples) >= 8
    for kwargs, source, expected in examples:
        assert gradient(source, **json.loads(kwargs)) == expected, source


# every elementwise function, on inputs inside its domain and away from its kinks
UNARY_DOMAINS = {
    "exp": (-2, 2), "log": (0.5, 3), "sqrt": (0.5, 3), "tanh": (-2, 2), "sin": (-3, 3),
    "cos": (-3, 3), "tan": (-1, 1), "asin": (-0.8, 0.8), "acos": (-0.8, 0.8),
    "atan": (-3, 3), "sinh": (-2, 2), "cosh": (-2, 2), "asinh": (-3, 3), "acosh": (1.5, 3),
    "atanh": (-0.8, 0.8), "abs": (0.2, 2), "sigmoid": (-3, 3), "relu": (0.2, 2),
}
EXPRESSIONS = [f"{fn}(A) * B" for fn in UNARY_DOMAINS] + [
    "-abs(A) + A % B", "pow(A, B)", "pow(A, 3) - pow(2.0, B)", "max(A, B) * min(A, 2 * B)",
    "A > B ? A * B : B / A", "as_float(A, 64) * float64(B)", "A / (B + 2.0) - (A - B) * 2",
    "A * (A > 0.5) + floor(A) * B", "reshape(A, N * M)", "exp(-A * B) / (1 + A * A)",
]


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_elementwise_functions(expr: str, rng: np.random.Generator) -> None:
    fn = expr.split("(")[0]
    lo, hi = UNARY_DOMAINS.get(fn, (0.5, 2.0))
    body = f"O = {expr};"
    if "abs(A) + A % B" in expr:
        lo, hi = -2.0, 2.0
    arrays = {"A": rng.uniform(lo, hi, (3, 4)), "B": rng.uniform(0.5, 2.0, (3, 4))}
    if "abs" in expr or "relu" in expr:  # away from the kink at 0
        arrays["A"] = np.where(np.abs(arrays["A"]) < 0.2, 0.5, arrays["A"])
    if "%" in expr:  # away from the jumps of fmod
        arrays["B"] = np.full((3, 4), 0.7)
        arrays["A"] = 0.7 * (np.round(arrays["A"] / 0.7) + rng.uniform(0.2, 0.8, (3, 4)))
    fd_check(f"function (A[N, M], B[N, M]) -> (O) {{ {body} }}", arrays, rng)


def test_gather_and_broadcast_dimensions(rng: np.random.Generator) -> None:
    # gather clamps out-of-range rows (-3 -> 0, 9 -> 4); C is a dimension used as a number
    src = """function (A[R, C], I[K], S[], V[1, C]) -> (O) {
        G = gather(A, I);
        O = G * S + V * C;
    }"""
    arrays = {"A": rng.standard_normal((5, 3)), "I": np.array([0, 4, 4, -3, 9], np.int32),
              "S": np.array(1.5), "V": rng.standard_normal((1, 3))}
    fd_check(src, arrays, rng)


def test_default_tensors(rng: np.random.Generator) -> None:
    """With `default D`, D gets the cotangent where no point writes (`=`), everywhere (`+`)."""
    for src in ("function (I[N], D[M], B[N]) -> (O) { O[2 * i : M] = =(I[i] * B[i]) default D; }",
                "function (I[N], D[M]) -> (O) { O[i + 1 : M] = =(I[i]) default D; }",
                "function (I[N], D[M]) -> (O) { O[2 * i : M] = +(I[i]) default D; }"):
        fd_check(src, {"I": rng.standard_normal(4), "D": rng.standard_normal(9),
                       "B": rng.standard_normal(4)} if "B" in src else
                 {"I": rng.standard_normal(4), "D": rng.standard_normal(9)}, rng)
    with pytest.raises(GradientError, match="'default' with '>'"):
        gradient("function (I[N], D[N]) -> (O) { O[i : N] = >(I[i]) default D; }")


# PlaidML's corpus (tests/golden/plaidml): one entry in ten by default, all in the long profile

def _corpus_params() -> list[object]:
    import zlib

    import test_plaidml_corpus as corpus

    everything = settings._current_profile == "long"
    out = []
    for name in sorted(corpus.ENTRIES):
        if name in corpus.XFAIL or not (everything or zlib.crc32(name.encode()) % 10 == 0):
            continue
        specs = corpus.ENTRIES[name]["inputs"]
        if any(s["dtype"] in FLOATS for s in specs.values()):
            out.append(pytest.param(name, id=name))
    return out


# the entries whose only paths are through floor/ceil/round or a condition
CORPUS_NO_GRADIENT = ("ceiling", "ceiling.Ceiling", "floor", "floor.Floor", "k_round",
                      "k_round.Round", "relu_threshold.Relu")


@pytest.mark.parametrize("name", _corpus_params())
def test_plaidml_corpus_gradient(name: str, rng: np.random.Generator) -> None:
    import test_plaidml_corpus as corpus

    arrays = {k: a.astype(np.float64) if str(a.dtype) in FLOATS else a
              for k, a in corpus._inputs(name).items()}
    source = corpus.ENTRIES[name]["source"]
    outs = stripe.interpret(stripe.lower(source, arrays), arrays)
    of = [o for o, v in outs.items() if v.dtype == np.float64 and np.all(np.isfinite(v))]
    if not of:
        pytest.skip("no finite floating-point output")
    if name in CORPUS_NO_GRADIENT:
        with pytest.raises(GradientError, match="no gradient of"):
            fd_check(source, arrays, rng, of=of)
        return
    fd_check(source, arrays, rng, of=of)


def test_deep_and_long_expressions_stay_linear(rng: np.random.Generator) -> None:
    """Nested 3000 deep (iterative printing, values of big subexpressions kept in
    temporaries) and long chains: the gradient's size grows linearly."""
    sizes = []
    for depth in (1000, 3000):
        src = ("function (A[N], B[N]) -> (O) { O = " + "tanh(" * depth + "A * B"
               + ")" * depth + "; }")
        sizes.append(len(gradient(src)))
    assert sizes[1] < 4 * sizes[0]
    src = "function (A[N], B[N]) -> (O) { O = " + "sin(" * 60 + "A * B" + ")" * 60 + "; }"
    fd_check(src, {"A": rng.standard_normal(3), "B": rng.standard_normal(3)}, rng)
    src = "function (A[N], B[N]) -> (O) { O = " + " + ".join(["A * B"] * 300) + "; }"
    fd_check(src, {"A": rng.standard_normal(3), "B": rng.standard_normal(3)}, rng)


def test_wrong_arity_in_source_is_a_located_error() -> None:
    with pytest.raises(TileError, match="max takes 2 arguments, got 1"):
        gradient("function (X[N]) -> (O) { O = max(X); }")


def test_max_of_a_selection(rng: np.random.Generator) -> None:
    """`>(A == B ? C)`: false points are 0 and can win; C gets the cotangent only where it
    won."""
    src = "function (A[N, M], B[M], C[N, M]) -> (O) { O[i : N] = >(A[i, j] == B[j] ? C[i, j]); }"
    for _ in range(3):
        fd_check(src, {"A": rng.integers(0, 2, (4, 5)).astype(np.int32),
                       "B": rng.integers(0, 2, 5).astype(np.int32),
                       "C": rng.standard_normal((4, 5))}, rng)
    with pytest.raises(GradientError, match=r"'\*' aggregation of a combination '\?'"):
        gradient(src.replace(">(", "*("), wrt="C")


@st.composite
def contractions(draw):  # type: ignore[no-untyped-def]
    """A contraction with any aggregation and combination (and sometimes a default), then an
    elementwise epilogue; the arrays to run it on (float64; the `?` condition on int32 0/1)."""
    from test_random_programs import _access, _single_index

    outs = [f"o{d}" for d in range(draw(st.integers(1, 2)))]
    agg = draw(st.sampled_from(["+", ">", "<", "*", "="]))
    comb = draw(st.sampled_from([None, "*", "+", "?"]))
    reds = [] if agg == "=" else [f"r{d}" for d in range(draw(st.integers(0, 2)))]
    idxs = outs + reds
    names = {None: ["A"], "*": ["A", "B"], "+": ["A", "B"], "?": ["P", "Q", "C"]}[comb]
    accesses = [[_access(draw, idxs) for _ in range(draw(st.integers(1, 2)))] for _ in names]
    alone = {_single_index(a) for acc in accesses for a in acc}
    accesses[-1] += [i for i in idxs if i not in alone]
    shapes = {n: tuple(draw(st.integers(1, 5)) for _ in acc) for n, acc in zip(names, accesses)}
    terms = [f"{n}[{', '.join(acc)}]" for n, acc in zip(names, accesses)]
    body = (f"{terms[0]} == {terms[1]} ? {terms[2]}" if comb == "?"
            else f" {comb} ".join(terms) if comb else terms[0])
    sizes = [draw(st.integers(1, 5)) for _ in outs]
    out_access = ", ".join(outs)
    if agg == "=":  # one write per element: the output access is the plain indexes
        constraint = ""
    else:
        constraint = draw(st.sampled_from(["", f", {idxs[-1]} < 2"]))
    default = draw(st.booleans()) and agg == "+"
    decl = ", ".join(f"{n}[{', '.join(f'{n}{d}' for d in range(len(s)))}]"
                     for n, s in shapes.items())
    if default:
        decl += f", D[{', '.join(f'DD{d}' for d in range(len(sizes)))}]"
        shapes["D"] = tuple(sizes)
    epilogue = draw(st.sampled_from(["O = T;", "O = tanh(T) * 2.0;"]))
    source = (f"function ({decl}) -> (O) {{\n    T[{out_access} : {', '.join(map(str, sizes))}]"
              f" = {agg}({body}){constraint}{' default D' if default else ''};\n"
              f"    {epilogue}\n}}\n")
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    arrays = {n: (rng.integers(0, 2, s).astype(np.int32) if n in "PQ"
                  else rng.standard_normal(s)) for n, s in shapes.items()}
    return source, arrays, agg, comb


@settings(max_examples=_EXAMPLES * 2, deadline=None, derandomize=_EXAMPLES == 10,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(case=contractions())
def test_random_contraction_gradient(case) -> None:  # type: ignore[no-untyped-def]
    source, arrays, agg, comb = case
    rng = np.random.default_rng(0)
    try:
        out = stripe.interpret(stripe.lower(source, arrays), arrays)["O"]
    except TileError:
        assume(False)  # an index without a finite range: not a program
    assume(np.all(np.isfinite(out)))
    if agg == "*" and comb is not None:
        with pytest.raises(GradientError, match="aggregation of a combination"):
            gradient(source, inputs=arrays)
        return
    fd_check(source, arrays, rng)


def test_scatter(rng: np.random.Generator) -> None:
    """Rows scattered twice add up; out-of-range rows (-1, 7) are skipped, so get nothing."""
    for a_shape, l_shape in (((5, 3), (4, 3)), ((5,), (4,))):
        src = (f"function (A[{', '.join(['K', 'M'][:len(a_shape)])}], I[K], "
               f"L[{', '.join(['R', 'M'][:len(l_shape)])}]) -> (O) {{ O = scatter(A, I, L); }}")
        fd_check(src, {"A": rng.standard_normal(a_shape), "I": np.array([0, 3, 3, -1, 7], np.int32),
                       "L": np.zeros(l_shape)}, rng)


def test_second_order(rng: np.random.Generator) -> None:
    """The gradient is Tile, so it has a gradient (a Hessian-vector product) once its outputs
    are renamed; without renaming the names clash, a clear error."""
    src = "function (A[N], B[N]) -> (O) { O = tanh(A * B) * exp(A); }"
    g1 = gradient(src)
    with pytest.raises(ArgumentError, match="already uses the name A_grad"):
        gradient(g1)
    renamed = g1.replace("A_grad", "GA").replace("B_grad", "GB")
    arrays = {"A": rng.standard_normal(4), "B": rng.standard_normal(4),
              "O_grad": rng.standard_normal(4)}
    fd_check(renamed, arrays, rng)


def test_exported_from_stripe() -> None:
    assert stripe.gradient is gradient and stripe.GradientError is GradientError


def test_default_wrt_leaves_out_inputs_without_a_gradient_path() -> None:
    """Without `inputs`, element types are unknown: the default wrt leaves out the inputs the
    outputs depend on only through conditions or integer operations; asked for, they are an
    error; if nothing is left, the error stands."""
    src = OPS_BY_NAME["cond_contraction"].source
    assert "-> (C_grad)" in gradient(src)
    with pytest.raises(GradientError, match="only through the condition of '\\?'"):
        gradient(src, wrt=["A", "C"])
    with pytest.raises(GradientError, match="floor"):
        gradient("function (A[N]) -> (O) { O = floor(A); }")


# PlaidML's own automatic derivatives (the corpus's grad_* entries, from op.gradients): the
# forward part of each program, differentiated here, must give PlaidML's stored results
PLAIDML_GRADIENTS = {  # entry: (forward result, cotangent everywhere, {input: PlaidML output})
    "grad_conv_relu": ("X_T19", 1.0, {"XI": "XY0", "XK": "XY1"}),
    "grad_matmul_tanh": ("X_T5", 1.0, {"XA": "XY0", "XB": "XY1"}),
    "grad_max_pool": ("X_T10", 3.0, {"XI": "XY0"}),
}


@pytest.mark.parametrize("name", sorted(PLAIDML_GRADIENTS))
def test_plaidml_gradients_agree(name: str) -> None:
    import test_plaidml_corpus as corpus

    result, ct, wanted = PLAIDML_GRADIENTS[name]
    source = corpus.ENTRIES[name]["source"]
    head, body = source.split("{", 1)
    head = re.sub(r"->\s*\([^)]*\)", f"-> ({result})", head)
    lines = []
    for line in body.splitlines():
        lines.append(line)
        if re.match(rf"\s*(\[\[[^]]*\]\]\s*)?{result}\b", line):
            break
    forward = head + "{" + "\n".join(lines) + "\n}\n"
    arrays = corpus._inputs(name)
    out = stripe.interpret(stripe.lower(forward, arrays), arrays)[result]
    g = gradient(forward, wrt=list(wanted), of=result, inputs=arrays)
    grad_in = {**arrays, f"{result}_grad": np.full(out.shape, ct, out.dtype)}
    got = stripe.interpret(stripe.lower(g, grad_in), grad_in)
    expected = corpus._expected(name)
    for inp, plaidml_out in wanted.items():
        np.testing.assert_allclose(got[f"{inp}_grad"], expected[plaidml_out], rtol=1e-4,
                                   atol=1e-5, err_msg=f"{name}: {inp}")


def test_reverse_grad_reverses_and_scales_the_gradient():
    """PlaidML's ``reverse_grad(x, s)``: the value of x forward, ``-s`` times the incoming
    gradient backward (its definition in PlaidML's builtins)."""
    import numpy as np

    import stripe

    src = "function (X[N], S[]) -> (Y) { Y = reverse_grad(X, S) * X; }"
    x = np.array([1.0, -2.0, 3.5], np.float64)
    s, dy = np.array(3.0), np.array([1.0, 2.0, -1.0])
    arrays = {"X": x, "S": s, "Y_grad": dy}
    g = stripe.gradient(src, wrt=["X"], of="Y")
    got = stripe.interpret(stripe.lower(g, arrays), arrays)["X_grad"]
    np.testing.assert_allclose(got, dy * x - s * dy * x)
    forward = stripe.interpret(stripe.lower(src, {"X": x, "S": s}), {"X": x, "S": s})["Y"]
    np.testing.assert_allclose(forward, x * x)
