"""PlaidML's builtin Tile functions (stripe/tile/builtins.py): each against numpy through the
interpreter, the exact forms PlaidML's op library writes, the errors, and compiled runs."""

from __future__ import annotations

import time

import fuzzing
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import stripe
from stripe.errors import TileError
from stripe.tile import ast as A
from stripe.tile.builtins import BINARY_CALLS, BUILTINS, UNARY_CALLS, expand
from stripe.tile.parser import parse


def lower(src: str, inputs: dict[str, object]) -> stripe.ir.Block:
    """``stripe.lower`` (which expands the builtins right after parsing)."""
    return stripe.lower(src, inputs)


def run(src: str, **arrays: np.ndarray) -> dict[str, np.ndarray]:
    return stripe.interpret(lower(src, arrays), arrays)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


# the exact programs PlaidML 0.7's plaidml/op.py writes
OP_SOFTMAX = """
        function (I[X, Y]) -> (O) {
            O = builtin_softmax(I, X, Y);
        }"""
OP_LOGSOFTMAX = """
        function (I[X, Y]) -> (O) {
            O = builtin_logsoftmax(I, X, Y);
        }"""
OP_BCE = """
            function (O[I0,I1,I2], T[I0,I1,I2]) -> (R) {
                R = builtin_binary_crossentropy(O,T,I0*I1*I2);
            }"""
OP_RELU = "function (X) -> (Y) { Y = relu(X); }"
OP_SIGMOID = "function (I) -> (O) { O = sigmoid(I); }"
OP_SHAPE = "function (I) -> (O) { O = shape(I); }"


# call forms of operators ----------------------------------------------------------------------

@pytest.mark.parametrize("fn", sorted(BINARY_CALLS))
def test_binary_call_form_is_the_operator(fn: str, random_array) -> None:
    op = BINARY_CALLS[fn]
    dtype = "int32" if fn.startswith("bit_") or fn == "mod" else "float32"
    lo = 1 if fn in ("bit_left", "bit_right", "mod", "div") else None
    a = random_array((3, 1, 5), dtype, lo=lo if dtype == "int32" else None, hi=9)
    b = random_array((4, 5), dtype, lo=lo, hi=5 if fn in ("bit_left", "bit_right") else 9)
    if fn == "div" and dtype == "float32":
        b = np.where(np.abs(b) < 0.1, 1.0, b).astype(np.float32)
    got = run(f"function (A[P, Q, R], B[S, R]) -> (O) {{ O = {fn}(A, B); }}", A=a, B=b)["O"]
    want = run(f"function (A[P, Q, R], B[S, R]) -> (O) {{ O = A {op} B; }}", A=a, B=b)["O"]
    assert got.dtype == want.dtype and got.shape == (3, 4, 5)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("fn", sorted(UNARY_CALLS))
def test_unary_call_form_is_the_operator(fn: str, random_array) -> None:
    a = random_array((2, 7), "int32")
    got = run(f"function (A[P, Q]) -> (O) {{ O = {fn}(A); }}", A=a)["O"]
    np.testing.assert_array_equal(got, -a if fn == "neg" else ~a)


def test_call_forms_expand_to_the_operator_nodes() -> None:
    fn = expand(parse("function (A, B, C) -> (O) { O = cond(cmp_lt(A, B), add(A, C), neg(B)); }"))
    expr = fn.stmts[0].expr
    assert isinstance(expr, A.Ternary) and isinstance(expr.cond, A.Binary)
    assert (expr.cond.op, expr.a.op, expr.b.op) == ("<", "+", "-")  # type: ignore[union-attr]
    assert isinstance(expr.b, A.Unary)
    # positions are those of the calls
    assert (expr.pos.line, expr.pos.column) == (1, 33)
    assert (expr.cond.pos.column, expr.a.pos.column) == (38, 52)


def test_cond_ident_reverse_grad_recip(random_array) -> None:
    a = random_array((5, 3), "float32")
    c = random_array((3,), "bool")
    src = """function (A[N, M], C[M]) -> (O, P, Q, R) {
        O = cond(C, A, 0.5); P = ident(A); Q = reverse_grad(A, 3); R = recip(A);
    }"""
    out = run(src, A=a, C=c)
    np.testing.assert_array_equal(out["O"], np.where(c, a, np.float32(0.5)))
    np.testing.assert_array_equal(out["P"], a)
    np.testing.assert_array_equal(out["Q"], a)
    np.testing.assert_allclose(out["R"], 1 / a, rtol=1e-6)


def test_cond_on_a_number_tests_it_against_zero() -> None:
    i = np.array([0.0, 0.5, -1.0], np.float32)
    out = run("function (I[N]) -> (O) { O = cond(I, 1.0, 2.0); }", I=i)
    np.testing.assert_array_equal(out["O"], [2.0, 1.0, 1.0])


# elementwise definitions ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_sigmoid_and_relu(dtype: str, random_array) -> None:
    x = random_array((3, 5, 7), dtype)
    x.flat[:3] = [np.nan, np.inf, -np.inf]
    out = run("function (I[A, B, C]) -> (S, R) { S = sigmoid(I); R = relu(I); }", I=x)
    assert out["S"].dtype == out["R"].dtype == np.dtype(dtype)
    with np.errstate(over="ignore"):
        np.testing.assert_allclose(out["S"], sigmoid(x), rtol=1e-6)
    want = np.where(x < 0, 0, x)  # NaN stays NaN, as in PlaidML's `X < 0.0 ? 0.0 : X`
    np.testing.assert_array_equal(out["R"], want)


def test_op_library_relu_and_sigmoid_of_integers_are_float32() -> None:
    x = np.array([[-2, 3, 0]], np.int32)
    assert run(OP_RELU, X=x)["Y"].tolist() == [[0.0, 3.0, 0.0]]
    assert run(OP_RELU, X=x)["Y"].dtype == np.float32  # PlaidML: `X < 0.0 ? 0.0 : X` is float32
    got = run(OP_SIGMOID, I=x)["O"]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, sigmoid(x.astype(np.float64)), rtol=1e-6)


def test_op_library_binary_crossentropy(random_array) -> None:
    o = random_array((2, 3, 5), "float32", lo=0.05, hi=0.95)
    t = random_array((2, 3, 5), "float32", lo=0.0, hi=1.0)
    got = run(OP_BCE, O=o, T=t)["R"]
    want = -t * np.log(o) - (1 - t) * np.log(1 - o)
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    # PlaidML 0.7 on llvm_cpu gives these for O = [0.2, 0.7, 0.9], T = [0, 1, 0.5]
    got = run("function (O[N], T[N]) -> (R) { R = builtin_binary_crossentropy(O, T, N); }",
              O=np.array([0.2, 0.7, 0.9], np.float32), T=np.array([0, 1, 0.5], np.float32))
    np.testing.assert_allclose(got["R"], [0.22314353, 0.35667497, 1.2039727], rtol=1e-6)


def test_builtin_arguments_used_twice_are_computed_once_when_large(random_array) -> None:
    o = random_array((4, 3), "float32", lo=0.4, hi=0.6)
    t = random_array((4, 3), "float32", lo=0.4, hi=0.6)
    inner = "builtin_binary_crossentropy(O, T, 1)"
    src = ("function (O[N, M], T[N, M]) -> (R) { "
           f"R = builtin_binary_crossentropy({inner}, T, 1); }}")
    fn = expand(parse(src))
    assert [s.name for s in fn.stmts] == ["Arg_1", "R"]  # the inner value, then R
    got = run(src, O=o, T=t)["R"]
    x = -t * np.log(o) - (1 - t) * np.log(1 - o)
    np.testing.assert_allclose(got, -t * np.log(x) - (1 - t) * np.log(1 - x), rtol=1e-5)


# softmax forms --------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(3, 7), (1, 1), (5, 1), (2, 33)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_op_library_softmax_and_logsoftmax(shape: tuple[int, int], dtype: str,
                                           random_array) -> None:
    x = random_array(shape, dtype) * 10
    got = run(OP_SOFTMAX, I=x)["O"]
    assert got.dtype == np.dtype(dtype) and got.shape == shape
    np.testing.assert_allclose(got, softmax(x), rtol=1e-5, atol=1e-7)
    got = run(OP_LOGSOFTMAX, I=x)["O"]
    np.testing.assert_allclose(got, np.log(softmax(x)), rtol=1e-5, atol=1e-5)


def test_softmax_statements_and_kernel_comments() -> None:
    fn = expand(parse(OP_SOFTMAX))
    assert [s.text for s in fn.stmts] == [
        "Softmax_M_1[i, 0 : X, 1] = >(I[i, j])",
        "Softmax_E_2 = exp(I - Softmax_M_1)",
        "Softmax_N_3[i, 0 : X, 1] = +(Softmax_E_2[i, j])",
        "O = builtin_softmax(I, X, Y)",  # the user's statement, now O = E / N
    ]
    prog = lower(OP_SOFTMAX, {"I": ((2, 3), "float32")})
    comments = [k.comments for k in prog.stmts[0].stmts]  # type: ignore[union-attr]
    assert any("Softmax_M_1[i, 0 : X, 1] = >(I[i, j])" in c for c in comments)


def test_inserted_statements_carry_the_attributes_of_their_statement() -> None:
    src = "function (I[X, Y]) -> (O, P) { [[pid(Softmax)]] O = builtin_softmax(I, X, Y); P = O; }"
    prog = lower(src, {"I": ((2, 3), "float32")})
    kernels = prog.stmts[0].stmts  # type: ignore[union-attr]
    tagged = [k for k in kernels if "attr_pid=Softmax" in k.tags]  # type: ignore[union-attr]
    assert len(tagged) == len(kernels) - 1 >= 4  # all but P's copy


def test_softmax_inside_an_expression_and_of_an_expression(random_array) -> None:
    x = random_array((4, 6), "float32")
    src = "function (I[X, Y]) -> (O) { O = 2 * builtin_softmax(I * 3, X, Y) + 1; }"
    got = run(src, I=x)["O"]
    np.testing.assert_allclose(got, 2 * softmax(3 * x) + 1, rtol=1e-5)


def test_fresh_names_avoid_the_functions_names(random_array) -> None:
    x = random_array((2, 5), "float32")
    src = """function (I[X, Y], Softmax_M_1[X]) -> (O, Softmax_E_2) {
        Softmax_E_2 = Softmax_M_1 + 1;
        O = builtin_softmax(I, X, Y);
    }"""
    fn = expand(parse(src))
    names = [s.name if isinstance(s, A.Assign) else s.out.name for s in fn.stmts]
    assert names == ["Softmax_E_2", "Softmax_M_2", "Softmax_E_3", "Softmax_N_4", "O"]
    out = run(src, I=x, Softmax_M_1=np.ones(2, np.float32))
    np.testing.assert_allclose(out["O"], softmax(x), rtol=1e-6)
    np.testing.assert_array_equal(out["Softmax_E_2"], [2.0, 2.0])


# shape and simple_reduce ---------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 4), (7,), (1, 5), ()])
def test_op_library_shape_of_an_input_without_dimensions(shape: tuple[int, ...]) -> None:
    got = run(OP_SHAPE, I=np.zeros(shape, np.float32))["O"]
    assert got.dtype == np.int32 and got.shape == (len(shape),)
    assert got.tolist() == list(shape)


def test_shape_of_declared_inputs_and_temporaries() -> None:
    src = """function (I[A, B], J[3, C]) -> (S1, S2, S3, S4, S5) {
        T[i, j : A + 1, 2 * B] = +(I[i, j]);
        E = exp(I) + 1;
        R = reshape(I, B, A, 1);
        S1 = shape(I); S2 = shape(J); S3 = shape(T); S4 = shape(E * 2); S5 = shape(R);
    }"""
    out = run(src, I=np.zeros((2, 5), np.float32), J=np.zeros((3, 4), np.float32))
    assert out["S1"].tolist() == [2, 5] and out["S2"].tolist() == [3, 4]
    assert out["S3"].tolist() == [3, 10] and out["S4"].tolist() == [2, 5]
    assert out["S5"].tolist() == [5, 2, 1]


@pytest.mark.parametrize("a,b", [((3, 1), (4,)), ((0, 1), (1,)), ((2, 0), (1, 1)), ((1,), (5,)),
                                 ((1, 1), (1,))])
def test_shape_of_broadcast_temporaries(a: tuple[int, ...], b: tuple[int, ...]) -> None:
    src = """function (A, B) -> (S, T) {
        E = A * 2 + B;
        S = shape(E);
        T = shape(exp(E) - A);
    }"""
    want = list(np.broadcast_shapes(a, b))
    out = run(src, A=np.zeros(a, np.float32), B=np.zeros(b, np.float32))
    assert out["S"].tolist() == want and out["T"].tolist() == want


def test_shape_of_specials() -> None:
    src = """function (A[N, M], I[K]) -> (S1, S2, S3) {
        G = gather(A, I); X = index(G, 1); R = reshape(A, M * N);
        S1 = shape(G); S2 = shape(X); S3 = shape(R);
    }"""
    out = run(src, A=np.zeros((4, 3), np.float32), I=np.zeros(5, np.int32))
    assert out["S1"].tolist() == [5, 3] and out["S2"].tolist() == [5, 3]
    assert out["S3"].tolist() == [12]


@pytest.mark.parametrize("sizes,axes", [("1, B", (0,)), ("A, 1", (1,)), ("1, 1", (0, 1)),
                                        ("B", (0,)), ("1", (0, 1)), ("A, B", ())])
def test_simple_reduce(sizes: str, axes: tuple[int, ...], random_array) -> None:
    x = random_array((3, 5), "float32")
    got = run(f"function (I[A, B]) -> (O) {{ O = simple_reduce(I, {sizes}); }}", I=x)["O"]
    n = len(sizes.split(","))
    want = x.sum(axis=axes, keepdims=True) if axes else x
    want = want.reshape(want.shape[2 - n:])
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_simple_reduce_with_named_sizes_decided_at_binding(random_array) -> None:
    # S is bound by another input: 1 sums the dimension, B keeps it
    src = "function (I[A, B], W[S]) -> (O) { O = simple_reduce(I, S); }"
    x = random_array((3, 5), "float32")
    got = run(src, I=x, W=np.zeros(1, np.float32))["O"]
    np.testing.assert_allclose(got, x.sum(axis=(0, 1)).reshape(1), rtol=1e-6)
    got = run(src, I=x, W=np.zeros(5, np.float32))["O"]
    np.testing.assert_allclose(got, x.sum(axis=0), rtol=1e-6)
    # PlaidML 0.7 gives [[3, 5, 7]] for arange(6).reshape(2, 3) reduced to (1, M)
    got = run("function (I[N, M]) -> (O) { O = simple_reduce(I, 1, M); }",
              I=np.arange(6, dtype=np.float32).reshape(2, 3))["O"]
    assert got.tolist() == [[3.0, 5.0, 7.0]]


def test_simple_reduce_of_plaidmls_gradient_of_mean(random_array) -> None:
    # the derivative PlaidML's op.gradients composes for a mean over axis 1 (a size given
    # by the constant statement X_T0 = 1)
    src = """function (XX[X_X_0, X_X_1, X_X_2]) -> (XY0) {
        X_T0 = 1;
        [[pid(Mean)]] X_T1[x0, sx1, x2 : X_X_0, X_T0, X_X_2] = +(XX[x0, x1, x2]);
        [[pid(Mean)]] X_T2 = div(X_T1, X_X_1);
        X_T3 = sub(XX, X_T2);
        X_T14 = neg(X_T3);
        X_T15 = simple_reduce(X_T14, X_X_0, X_T0, X_X_2);
        XY0 = ident(X_T15);
    }"""
    x = random_array((2, 3, 5), "float32")
    got = run(src, XX=x)["XY0"]
    np.testing.assert_allclose(got, -(x - x.mean(1, keepdims=True)).sum(1, keepdims=True),
                               atol=1e-5)


@pytest.mark.parametrize("s", [1, 4])
def test_simple_reduce_of_a_broadcast_with_a_size_known_at_binding(s: int, random_array) -> None:
    # X's first size is N or K (equal): the sum keeps it for S == 4 and sums it for S == 1
    src = """function (A[N, M], B[K, M], W[S]) -> (O) {
        X = A + B;
        O = simple_reduce(X, S, M);
    }"""
    a, b = random_array((4, 3), "float32"), random_array((4, 3), "float32")
    got = run(src, A=a, B=b, W=np.zeros(s, np.float32))["O"]
    want = (a + b).sum(0, keepdims=True) if s == 1 else a + b
    np.testing.assert_allclose(got, want, rtol=1e-6)


# bind-time functions are the lowering's ---------------------------------------------------

def test_bind_time_functions_pass_through() -> None:
    src = """function (I[N, G], K[C]) -> (O) {
        Assert = assert_group_count(G == 3);
        B = broadcast(N, C);
        O = sigmoid(I) + B;
    }"""
    fn = expand(parse(src))
    assert fn.stmts[0] == parse(src).stmts[0] and fn.stmts[1] == parse(src).stmts[1]
    x = np.zeros((2, 3), np.float32)
    got = stripe.interpret(stripe.lower(src, {"I": x, "K": np.zeros(1, np.float32)}),
                           {"I": x, "K": np.zeros(1, np.float32)})
    np.testing.assert_allclose(got["O"], 0.5 + 2)


# errors ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("call,message", [
    ("add(I)", "add takes 2 arguments, got 1"),
    ("neg(I, I)", "neg takes 1 argument, got 2"),
    ("cond(I, I)", "cond takes 3 arguments, got 2"),
    ("sigmoid()", "sigmoid takes 1 argument, got 0"),
    ("builtin_softmax(I, N)", "builtin_softmax takes 3 arguments, got 2"),
    ("builtin_binary_crossentropy(I, I)", "builtin_binary_crossentropy takes 3 arguments"),
    ("shape(I, I)", "shape takes 1 argument, got 2"),
    ("simple_reduce()", "simple_reduce takes a tensor and the sizes"),
    ("1 + prng_step(I, 3)", "prng_step: PlaidML's random number generator"),
    ("prng_value(I)", "prng_value: PlaidML's random number generator"),
    ("element(I, 0)", "element: tuple values"),
    ("builtin_softmax(I, 1.5, N)", "argument 2 of builtin_softmax must be a size"),
    ("simple_reduce(I, I * 1.0)", "argument 2 of simple_reduce must be a size"),
    ("simple_reduce(I, 1, 1, 1)", "simple_reduce: 3 sizes for I of rank 2"),
    ("builtin_softmax(J, N, N)", "builtin_softmax: its first argument must have rank 2"),
])
def test_errors_name_the_function_and_its_place(call: str, message: str) -> None:
    src = f"function (I[N, M], J[N]) -> (O) {{\n  O = {call};\n}}"
    with pytest.raises(TileError, match=message.replace("(", r"\(").replace("*", r"\*")) as e:
        lower(src, {"I": ((2, 3), "float32"), "J": ((2,), "float32")})
    assert e.value.line == 2 and e.value.column >= 7


def test_shape_needs_a_rank() -> None:
    with pytest.raises(TileError, match=r"shape: the rank of I is not known") as e:
        expand(parse(OP_SHAPE))
    assert (e.value.line, e.value.column) == (1, 27)


def test_shape_of_a_missing_input_is_the_binders_error() -> None:
    with pytest.raises(TileError, match="input I is missing from inputs"):
        lower(OP_SHAPE, {})


def test_unknown_functions_keep_their_error() -> None:
    with pytest.raises(TileError, match="unknown function 'frobnicate'"):
        lower("function (I[N]) -> (O) { O = sigmoid(frobnicate(I)); }",
              {"I": ((3,), "float32")})


def test_later_errors_point_at_the_call() -> None:
    # Q is no dimension: the generated contraction's size is the user's argument
    src = "function (I[X, Y]) -> (O) {\n    O = builtin_softmax(I, Q, Y);\n}"
    with pytest.raises(TileError) as e:
        lower(src, {"I": ((2, 3), "float32")})
    assert (e.value.line, e.value.column) == (2, 28)


def test_specials_take_an_expanded_builtin_as_a_tensor(random_array) -> None:
    x = random_array((2, 3), "float32")
    got = run("function (I[A, B]) -> (O) { O = reshape(sigmoid(I), 6); }", I=x)["O"]
    np.testing.assert_allclose(got, sigmoid(x).reshape(6), rtol=1e-6)


# properties of the rewrite --------------------------------------------------------------------

def test_kept_builtins_stay_calls() -> None:
    fn = expand(parse("function (I) -> (O) { O = reverse_grad(sigmoid(I), 2) + neg(I); }"),
                keep={"reverse_grad"})
    expr = fn.stmts[0].expr
    assert isinstance(expr, A.Binary) and isinstance(expr.a, A.Call)
    assert expr.a.fn == "reverse_grad" and isinstance(expr.a.args[0], A.Binary)
    with pytest.raises(TileError, match="reverse_grad takes 2 arguments, got 1"):
        expand(parse("function (I) -> (O) { O = reverse_grad(I); }"), keep={"reverse_grad"})


def test_no_builtin_is_the_identity_and_expansion_is_deterministic() -> None:
    fn = parse("function (I[N]) -> (O) { O = exp(I) + max(I, 0); }")
    assert expand(fn) is fn
    fn = parse(OP_SOFTMAX)
    assert expand(fn) == expand(fn)
    expanded = expand(fn)
    assert expand(expanded) is expanded


def test_deep_nesting_and_long_programs_expand_in_linear_time() -> None:
    deep = "I"
    for _ in range(3000):
        deep = f"neg({deep})"
    fn = expand(parse(f"function (I[N]) -> (O) {{ O = {deep}; }}"))
    assert isinstance(fn.stmts[0].expr, A.Unary)

    def seconds(n: int) -> float:
        terms = " + ".join(["sigmoid(I)", "builtin_binary_crossentropy(I, I, 1)"] * n)
        body = "\n".join(f"O{k} = builtin_softmax(I, N, M) + {terms};" for k in range(n))
        src = f"function (I[N, M]) -> ({', '.join(f'O{k}' for k in range(n))}) {{ {body} }}"
        fn = parse(src)
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            expand(fn)
            best = min(best, time.process_time() - start)
        return best

    small, large = seconds(10), seconds(40)  # 16x the calls
    assert large < 40 * max(small, 1e-3)  # quadratic would be ~256x


def test_nested_builtins_stay_linear_in_size() -> None:
    def size(depth: int) -> int:
        expr = "I"
        for _ in range(depth):
            expr = f"builtin_binary_crossentropy({expr}, relu(I), 1)"
        fn = expand(parse(f"function (I[N]) -> (O) {{ O = {expr}; }}"))
        return sum(len(s.text) for s in fn.stmts)

    assert size(40) < 5 * size(10)


# call forms and operators lower to the same program ------------------------------------------

def _expressions() -> st.SearchStrategy[tuple[str, str]]:
    """Pairs (operator form, call form) of a random numeric expression over A, B, C."""
    leaf = st.sampled_from(["A", "B", "C", "2", "0.5"]).map(lambda x: (x, x))

    def extend(sub: st.SearchStrategy[tuple[str, str]]) -> st.SearchStrategy[tuple[str, str]]:
        arith = st.tuples(st.sampled_from(["add", "sub", "mul", "div"]), sub, sub).map(
            lambda t: (f"({t[1][0]} {BINARY_CALLS[t[0]]} {t[2][0]})",
                       f"{t[0]}({t[1][1]}, {t[2][1]})"))
        neg = sub.map(lambda x: (f"(-{x[0]})", f"neg({x[1]})"))
        compare = st.tuples(st.sampled_from([k for k in BINARY_CALLS if k.startswith("cmp_")]),
                            sub, sub, sub, sub).map(
            lambda t: (f"(({t[1][0]} {BINARY_CALLS[t[0]]} {t[2][0]}) ? {t[3][0]} : {t[4][0]})",
                       f"cond({t[0]}({t[1][1]}, {t[2][1]}), {t[3][1]}, {t[4][1]})"))
        ident = sub.map(lambda x: (x[0], f"ident({x[1]})"))
        return st.one_of(arith, neg, compare, ident)

    return st.recursive(leaf, extend, max_leaves=12)


def _program_text(src: str, inputs: dict[str, object]) -> str:
    try:
        text = stripe.print_ir(stripe.lower(src, inputs))
    except TileError as e:
        return f"error: {e.bare_message}"
    return "\n".join(line for line in text.splitlines() if "//" not in line)


@fuzzing.fuzz_settings(60)
@given(_expressions())
def test_call_forms_lower_like_the_operators(pair: tuple[str, str]) -> None:
    inputs = {"A": ((3, 4), "float32"), "B": ((4,), "float64"), "C": ((3, 1), "int32")}
    head = "function (A[N, M], B[M], C[N, 1]) -> (O) { O = "
    assert _program_text(f"{head}{pair[1]}; }}", inputs) == \
        _program_text(f"{head}{pair[0]}; }}", inputs)


def _any_calls() -> st.SearchStrategy[str]:
    """Random expressions calling builtins with any arguments (right or wrong)."""
    leaf = st.sampled_from(["A", "B", "N", "1", "2", "0.5", "Q"])
    names = sorted(BUILTINS) + ["exp", "reshape", "index", "max"]

    def extend(sub: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        call = st.tuples(st.sampled_from(names), st.lists(sub, max_size=4)).map(
            lambda t: f"{t[0]}({', '.join(t[1])})")
        binary = st.tuples(sub, st.sampled_from(["+", "*", "<"]), sub).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})")
        return st.one_of(call, binary)

    return st.recursive(leaf, extend, max_leaves=8)


@fuzzing.fuzz_settings(80)
@given(_any_calls())
def test_any_use_of_builtins_lowers_or_raises_a_located_error(expr: str) -> None:
    src = f"function (A[N, M], B[M]) -> (O) {{\n  O = {expr};\n}}"
    try:
        stripe.lower(src, {"A": ((3, 4), "float32"), "B": ((4,), "int32")})
    except stripe.StripeError as e:
        assert e.line is not None and e.line >= 1, str(e)


# programs PlaidML 0.7's tile.compose writes for a whole graph ---------------------------------

# op.softmax(op.relu(x) + op.sigmoid(x) * 2), op.binary_crossentropy(t, op.sigmoid(x), 1e-7),
# tile.shape_of(x), with x and t of shape (3, 5)
COMPOSED_1 = """function (
  XX[X_X_0, X_X_1],
  XT[X_T_0, X_T_1]
) -> (
  XY,
  XZ,
  XS
) {
  [[pid(Relu)]] X_T0 = relu(XX);
  X_T1 = 2;
  [[pid(Sigmoid)]] X_T2 = sigmoid(XX);
  [[pid(Mul)]] X_T3 = mul(X_T2, X_T1);
  [[pid(Add)]] X_T4 = add(X_T0, X_T3);
  [[pid(Softmax)]] X_T5 = builtin_softmax(X_T4, X_X_0, X_X_1);
  XY = ident(X_T5);
  X_T6 = 0.9999999;
  X_T7 = 1e-7;
  X_T8 = cmp_lt(X_T7, X_T2);
  [[pid(ClipMin)]] X_T9 = cond(X_T8, X_T2, X_T7);
  X_T10 = cmp_lt(X_T9, X_T6);
  [[pid(ClipMax)]] X_T11 = cond(X_T10, X_T9, X_T6);
  X_T12 = mul(X_T_0, X_T_1);
  [[pid(BinaryCrossentropy)]] X_T13 = builtin_binary_crossentropy(X_T11, XT, X_T12);
  XZ = ident(X_T13);
  [[pid(ShapeOf)]] X_T14 = shape(XX);
  XS = ident(X_T14);
}
"""

# op.log_softmax(x, axis=2), op.relu(x, alpha=0.1, max_value=2.0), Keras' reverse_gradient(x,
# 0.5), op.softmax(x, axis=1), with x of shape (2, 3, 4)
COMPOSED_2 = """function (
  XX[X_X_0, X_X_1, X_X_2]
) -> (
  XY,
  XZ,
  XW,
  XV
) {
  X_T0 = 4;
  X_T1 = 3;
  X_T2 = 2;
  X_T3 = 6;
  [[pid(Reshape)]] X_T4 = reshape(XX, X_T3, X_T0);
  [[pid(LogSoftmax)]] X_T5 = builtin_logsoftmax(X_T4, X_T3, X_T0);
  [[pid(Reshape)]] X_T6 = reshape(X_T5, X_T2, X_T1, X_T0);
  XY = ident(X_T6);
  X_T7 = 2.0;
  X_T8 = 0.0;
  X_T9 = cmp_lt(XX, X_T8);
  X_T10 = 0.1;
  X_T11 = mul(X_T10, XX);
  [[pid(Relu)]] X_T12 = cond(X_T9, X_T11, XX);
  X_T13 = cmp_lt(X_T12, X_T7);
  [[pid(Relu)]] X_T14 = cond(X_T13, X_T12, X_T7);
  XZ = ident(X_T14);
  X_T15 = 0.5;
  [[pid(ReverseGradient)]] X_T16 = reverse_grad(XX, X_T15);
  XW = ident(X_T16);
  X_T17 = 12;
  [[pid(Reshape)]] X_T18 = reshape(XX, X_T2, X_T17);
  [[pid(Softmax)]] X_T19 = builtin_softmax(X_T18, X_T2, X_T17);
  [[pid(Reshape)]] X_T20 = reshape(X_T19, X_T2, X_T1, X_T0);
  XV = ident(X_T20);
}
"""


def test_composed_programs_of_plaidmls_front_end(random_array) -> None:
    x = random_array((3, 5), "float32")
    t = random_array((3, 5), "float32", lo=0.0, hi=1.0)
    out = run(COMPOSED_1, XX=x, XT=t)
    s = sigmoid(x.astype(np.float64))
    np.testing.assert_allclose(out["XY"], softmax(np.maximum(x, 0) + 2 * s), rtol=1e-5)
    c = np.clip(s, 1e-7, 0.9999999)
    np.testing.assert_allclose(out["XZ"], -t * np.log(c) - (1 - t) * np.log(1 - c), rtol=1e-5)
    assert out["XS"].tolist() == [3, 5] and out["XS"].dtype == np.int32

    x = random_array((2, 3, 4), "float32")
    out = run(COMPOSED_2, XX=x)
    want = np.log(softmax(x.reshape(6, 4))).reshape(2, 3, 4)
    np.testing.assert_allclose(out["XY"], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out["XZ"], np.minimum(np.where(x < 0, 0.1 * x, x), 2.0))
    np.testing.assert_array_equal(out["XW"], x)
    np.testing.assert_allclose(out["XV"], softmax(x.reshape(2, 12)).reshape(2, 3, 4), rtol=1e-5)


# compiled --------------------------------------------------------------------------------------

COMPILED = """function (I[X, Y], T[X, Y], C[Y]) -> (S, L, B, E, H) {
    S = builtin_softmax(I, X, Y);
    L = builtin_logsoftmax(I, X, Y);
    B = builtin_binary_crossentropy(sigmoid(I), T, X * Y);
    E = add(relu(I), cond(C, mul(I, 2), sub(I, 1))) + bit_and(as_int(T * 8, 32), 5);
    H = shape(I);
}"""


@pytest.mark.parametrize("config", ["cpu_generic", "cpu_avx2", "npu_example"])
def test_compiled_builtins_match_numpy_and_the_interpreter(config: str, random_array) -> None:
    from stripe.codegen.build import missing_cpu_features
    from stripe.compiler import compile_program
    from stripe.config import load_config
    from stripe.passes.manager import run_pipeline

    cfg = load_config(config)
    if missing_cpu_features(cfg.cflags):
        pytest.skip(f"this CPU lacks {missing_cpu_features(cfg.cflags)}")
    i = random_array((5, 11), "float32")
    t = random_array((5, 11), "float32", lo=0.0, hi=1.0)
    c = random_array((11,), "bool")
    arrays = {"I": i, "T": t, "C": c}
    program = lower(COMPILED, arrays)
    final, trace = run_pipeline(program, cfg)
    got = compile_program(final, trace, target=cfg.target, decided=True)(**arrays)
    interpreted = stripe.interpret(program, arrays)
    s = sigmoid(i.astype(np.float64))
    want = {
        "S": softmax(i), "L": np.log(softmax(i)),
        "B": -t * np.log(s) - (1 - t) * np.log(1 - s),
        "E": np.maximum(i, 0) + np.where(c, i * 2, i - 1) + ((t * 8).astype(np.int32) & 5),
        "H": np.array([5, 11], np.int32),
    }
    for name, value in want.items():
        np.testing.assert_allclose(got[name], value, rtol=2e-5, atol=2e-6, err_msg=name)
        np.testing.assert_allclose(got[name], interpreted[name], rtol=2e-6, atol=1e-6,
                                   err_msg=name)
