"""The Tile parser: AST shape, positions, precedence, and human syntax errors."""

from __future__ import annotations

import pytest

from stripe.errors import TileSyntaxError
from stripe.tile import ast as A
from stripe.tile.parser import parse

CONV = """function (I[N, X, Y, CI], F[KX, KY, CI, CO]) -> (O) {
    O[n, x, y, co : N, X, Y, CO] = +(I[n, x + i - 1, y + j - 1, ci] * F[i, j, ci, co]);
}"""


def _rhs(expr_text: str) -> A.Expr:
    fn = parse(f"function (A, B, C, D) -> (R) {{ R = {expr_text}; }}")
    stmt = fn.stmts[0]
    assert isinstance(stmt, A.Assign)
    return stmt.expr


def _show(e: A.Expr | A.Poly) -> str:
    """Fully parenthesised text of an expression or polynomial."""
    if isinstance(e, (A.Num, A.PolyNum)):
        return str(e.value)
    if isinstance(e, (A.Name, A.PolyName)):
        return e.name
    if isinstance(e, A.PolyNeg):
        return f"(-{_show(e.x)})"
    if isinstance(e, A.Unary):
        return f"({e.op}{_show(e.x)})"
    if isinstance(e, (A.Binary, A.PolyBin)):
        return f"({_show(e.a)} {e.op} {_show(e.b)})"
    if isinstance(e, A.Ternary):
        return f"({_show(e.cond)} ? {_show(e.a)} : {_show(e.b)})"
    assert isinstance(e, A.Call)
    return f"{e.fn}({', '.join(_show(a) for a in e.args)})"


# structure and positions --------------------------------------------------------------------

def test_conv_signature_and_contraction():
    fn = parse(CONV)
    assert [p.name for p in fn.params] == ["I", "F"]
    assert [d.name for d in fn.params[0].dims] == ["N", "X", "Y", "CI"]
    assert [o.name for o in fn.outputs] == ["O"]
    (c,) = fn.stmts
    assert isinstance(c, A.Contraction)
    assert c.out.name == "O" and c.agg == "+" and c.comb == "*"
    assert [_show(p) for p in c.out.idxs] == ["n", "x", "y", "co"]
    assert [_show(p) for p in c.sizes] == ["N", "X", "Y", "CO"]
    assert [r.name for r in c.inputs] == ["I", "F"]
    assert [_show(p) for p in c.inputs[0].idxs] == ["n", "((x + i) - 1)", "((y + j) - 1)", "ci"]
    assert c.constraints == () and not c.no_defract and c.default is None


def test_positions_are_one_based_line_and_column():
    fn = parse(CONV)
    c = fn.stmts[0]
    assert fn.params[1].pos == A.Pos(1, 27)
    assert fn.outputs[0].pos == A.Pos(1, 50)
    assert c.pos == A.Pos(2, 5)
    assert c.inputs[0].pos == A.Pos(2, 38)
    minus = c.inputs[0].idxs[1]  # (x + i) - 1: the outer operator is the '-'
    assert isinstance(minus, A.PolyBin) and minus.op == "-" and minus.pos == A.Pos(2, 49)
    assert c.inputs[1].idxs[3].pos == A.Pos(2, 83)


def test_statement_text_is_one_line_without_comments():
    fn = parse("""function (A) -> (B) {
        B = A   // double
            * 2.0;
    }""")
    assert fn.stmts[0].text == "B = A * 2.0"


@pytest.mark.parametrize("decl, dims", [
    ("I", None),
    ("I[]", ()),
    ("I[N, 3]", ("N", 3)),
])
def test_input_declarations(decl: str, dims: tuple | None):
    (p,) = parse(f"function ({decl}) -> (O) {{ O = I; }}").params
    if dims is None:
        assert p.dims is None
    else:
        got = tuple(d.value if isinstance(d, A.PolyNum) else d.name for d in p.dims)
        assert got == dims


def test_no_inputs_and_several_outputs():
    fn = parse("function () -> (A, B) { A = 1.5; B = 2; }")
    assert fn.params == () and [o.name for o in fn.outputs] == ["A", "B"]
    assert len(fn.stmts) == 2


@pytest.mark.parametrize("tail, constraints, no_defract, default", [
    ("", [], False, None),
    (", j < 2", ["j < 2"], False, None),
    (", j < 2, k < N / 2", ["j < 2", "k < (N / 2)"], False, None),
    (", j < 2 no_defract", ["j < 2"], True, None),
    (", j < 2, no_defract", ["j < 2"], True, None),
    (" default D", [], False, "D"),
    (", j < 2 no_defract default D", ["j < 2"], True, "D"),
])
def test_contraction_tail(tail: str, constraints: list[str], no_defract: bool,
                          default: str | None):
    fn = parse(f"function (I, D) -> (O) {{ O[i : N] = >(I[2 * i + j]){tail}; }}")
    c = fn.stmts[0]
    assert [f"{_show(k.poly)} < {_show(k.bound)}" for k in c.constraints] == constraints
    assert c.no_defract is no_defract
    assert (c.default.name if c.default else None) == default


@pytest.mark.parametrize("agg", ["+", "*", ">", "<", "="])
def test_aggregations(agg: str):
    c = parse(f"function (I) -> (O) {{ O[i : N] = {agg}(I[i]); }}").stmts[0]
    assert c.agg == agg and c.comb is None


@pytest.mark.parametrize("body, comb, names", [
    ("A[i] * B[i]", "*", ["A", "B"]),
    ("A[i] + B[i]", "+", ["A", "B"]),
    ("A[i] == B[j] ? C[j]", "?", ["A", "B", "C"]),
])
def test_combinations(body: str, comb: str, names: list[str]):
    c = parse(f"function (A, B, C) -> (O) {{ O[i : N] = +({body}); }}").stmts[0]
    assert c.comb == comb and [r.name for r in c.inputs] == names


def test_scalar_output_forms():
    for spec in ("O[]", "O[:]"):
        c = parse(f"function (I) -> (O) {{ {spec} = +(I[i]); }}").stmts[0]
        assert c.out.idxs == () and c.sizes in ((), None)


@pytest.mark.parametrize("text, shown", [
    ("2 * x + i", "((2 * x) + i)"),
    ("2x + i", "((2 * x) + i)"),
    ("x + k - 1", "((x + k) - 1)"),
    ("-x", "(-x)"),
    ("N - 1 - x", "((N - 1) - x)"),
    ("(x + 1) * 3", "((x + 1) * 3)"),
    ("X / 2", "(X / 2)"),
])
def test_index_polynomials(text: str, shown: str):
    c = parse(f"function (I) -> (O) {{ O[x : N] = +(I[{text}]); }}").stmts[0]
    assert _show(c.inputs[0].idxs[0]) == shown


# expression precedence -------------------------------------------------------------------------

@pytest.mark.parametrize("text, shown", [
    ("A + B * C", "(A + (B * C))"),
    ("A - B - C", "((A - B) - C)"),
    ("A / B % C", "((A / B) % C)"),
    ("-A * B", "((-A) * B)"),
    ("!A && B", "((!A) && B)"),
    ("~A | B", "((~A) | B)"),
    ("A << 1 + 2", "(A << (1 + 2))"),
    ("A < B == C < D", "((A < B) == (C < D))"),
    ("A & B == C", "(A & (B == C))"),
    ("A | B ^ C & D", "(A | (B ^ (C & D)))"),
    ("A && B || C && D", "((A && B) || (C && D))"),
    ("A > 0 ? B : C", "((A > 0) ? B : C)"),
    ("A ? B : C ? D : 1", "(A ? B : (C ? D : 1))"),
    ("(A + B) * C", "((A + B) * C)"),
    ("max(A, B * 2.5) + exp(-C)", "(max(A, (B * 2.5)) + exp((-C)))"),
    ("as_float(A, 64)", "as_float(A, 64)"),
    ("1e-3 * A", "(0.001 * A)"),
])
def test_precedence(text: str, shown: str):
    assert _show(_rhs(text)) == shown


def test_literal_kinds():
    e = _rhs("2 + 2.0")
    assert isinstance(e.a.value, int) and isinstance(e.b.value, float)


def test_operator_positions():
    e = _rhs("A +  B")  # R = A +  B: the "+" is at column 38
    assert isinstance(e, A.Binary) and e.pos == A.Pos(1, 38)


# syntax errors ---------------------------------------------------------------------------------

def _syntax_error(source: str) -> TileSyntaxError:
    with pytest.raises(TileSyntaxError) as info:
        parse(source)
    return info.value


@pytest.mark.parametrize("source, message, line, column", [
    ("function (A) -> (B) { B = A }", "expected ';' after statement", 1, 28),
    ("function (A) -> (B) {\n  B = A\n  C = B;\n}", "expected ';' after statement", 2, 8),
    ("function (A) -> (B) { B[i : N] = +(A[i]) }", "expected ';' after statement", 1, 41),
    ("function (A) -> (B) { B = A +; }", "unexpected ';', expected an expression", 1, 30),
    ("function (A) -> (B) { B = (A; }", "unexpected ';', expected ')'", 1, 29),
    ("function (A) -> (B) { B = A; ) }", "unexpected ')', expected '}' or a tensor name", 1, 30),
    ("function (A) -> (B) { B[i : N = +(A[i]); }", "unexpected '=', expected ']'", 1, 31),
    ("function (A) -> (B) { B[i : N] = +(A[i] * ); }", "unexpected ')', expected a tensor name",
     1, 43),
    ("function (A) -> (B) { B[i : N] = +(A[i]), ; }",
     "unexpected ';', expected an index or size expression", 1, 43),
    ("function (A) -> B { B = A; }", "unexpected name 'B', expected '('", 1, 17),
    ("function (A) -> (B) { B = A @ 2; }", "unexpected character '@'", 1, 29),
    ("function (A) -> (B) { B = A;", "unexpected end of input, expected '}' or a tensor name",
     1, 29),
    ("function (A) -> (B) { B = A < A < A; }", "comparisons cannot be chained; use parentheses",
     1, 33),
    ("func (A) -> (B) { B = A; }", "unexpected name 'func', expected 'function'", 1, 1),
])
def test_syntax_error_messages(source: str, message: str, line: int, column: int):
    e = _syntax_error(source)
    assert (e.bare_message, e.line, e.column) == (message, line, column)


def test_lowercase_tensor_names_are_explained():
    e = _syntax_error("function (a) -> (B) { B = A; }")
    assert e.bare_message.startswith("unexpected name 'a'")
    assert "tensor and dimension names start with an uppercase letter" in e.bare_message
    e = _syntax_error("function (A) -> (B) { B = a + 1; }")
    assert e.bare_message.startswith("'a' is not a tensor")
    assert (e.line, e.column) == (1, 27)


def test_syntax_error_shows_source_line_and_caret():
    e = _syntax_error("function (A) -> (B) {\n  B = A + );\n}")
    assert e.source_line == "  B = A + );"
    assert str(e).splitlines() == [
        "line 2, column 11: unexpected ')', expected an expression",
        "      B = A + );",
        "              ^",
    ]


@pytest.mark.parametrize("source", [
    "function (A) -> (B) { B = A }",
    "function (A) -> (B) { B[i : N] = +(A[i] * ); }",
    "function (A) -> (B) { B = A +; }",
    "function (A -> (B) { B = A; }",
    "function (A) -> (B) { B[i : N] = ?(A[i]); }",
])
def test_syntax_errors_never_dump_lark_internals(source: str):
    text = str(_syntax_error(source))
    for leak in ("Expected one of", "__ANON", "RPAR", "SEMICOLON", "Token(", "LNAME", "UNAME"):
        assert leak not in text


def test_default_given_twice():
    e = _syntax_error("function (I, D) -> (O) { O[i : N] = +(I[i]) default D default D; }")
    assert e.bare_message == "'default' given twice"
