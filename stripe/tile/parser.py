"""Tile source -> :class:`stripe.tile.ast.Function`, with human syntax errors.

The grammar is ``grammar.lark`` (LALR(1), basic lexer). Nothing recurses over the input: lark's
LALR parser keeps its own stack and the tree is turned into the AST by lark's non-recursive
transformer, so a long chain ``A + A + ... + A`` costs time linear in its length; after the
AST is built, expressions nested deeper than ``stripe.limits.MAX_EXPR_DEPTH`` and integer
literals that do not fit 64 bits are refused with a located TileError. lark's exceptions are
translated into :class:`stripe.errors.TileSyntaxError` whose message names the offending token
and, when the parser expected only a few things, what it expected (``unexpected ')', expected
']'``); a missing ``;`` is reported right after the statement it should end.
"""

from __future__ import annotations

import dataclasses
import re
from functools import lru_cache
from importlib import resources
from typing import Any

import lark
from lark import Token, Transformer_NonRecursive, v_args
from lark.lexer import PatternStr
from lark.tree import Meta

from ..errors import StripeError, TileError, TileSyntaxError
from ..limits import INT_MAX, TileLimitError, check_depth
from . import ast as A

_REGEX_TERMINALS = {
    "UNAME": "a tensor name",
    "LNAME": "an index or function name",
    "INT": "an integer",
    "FLOAT": "a number",
}
_HINT_LIMIT = 3  # list what was expected only when it is this short
_CLOSERS = ("')'", "']'", "'}'")  # named even in a long list of alternatives
_COMPARISONS = ("<", ">", "<=", ">=", "==", "!=")
_ENTRY_POINTS = ("polynomial", "expression", "contraction")  # PlaidML's, refused


@lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    text = resources.files(__package__).joinpath("grammar.lark").read_text()
    return lark.Lark(text, parser="lalr", lexer="basic", propagate_positions=True,
                     maybe_placeholders=True)


def parse(source: str) -> A.Function:
    """Parse a Tile function. Raises TileSyntaxError (1-based line and column)."""
    if not isinstance(source, str):
        raise TileError(f"Tile source must be a str, got {type(source).__name__}")
    try:
        tree = _parser().parse(source)
    except lark.exceptions.UnexpectedInput as e:
        raise _syntax_error(source, e) from None
    try:
        fn = _Builder(source).transform(tree)
    except lark.exceptions.VisitError as e:
        if isinstance(e.orig_exc, StripeError):
            raise e.orig_exc from None
        raise
    _check_depths(fn)
    return fn


def _int(tok: Token) -> int:
    """An INT token's value; a located TileLimitError past 63 bits (checked on the digits, so
    that a literal of thousands of digits is never converted)."""
    digits = str(tok).lstrip("0") or "0"
    if len(digits) > len(str(INT_MAX)) or int(digits) > INT_MAX:
        shown = digits if len(digits) <= 24 else f"{digits[:10]}...{digits[-6:]}"
        raise TileLimitError(f"integer literal {shown} ({len(digits)} digits) does not fit in "
                             "64 bits (it must be below 2**63)", tok.line, tok.column)
    return int(digits)


def _check_depths(fn: A.Function) -> None:
    """Refuse any expression or polynomial nested deeper than MAX_EXPR_DEPTH."""
    for stmt in fn.stmts:
        if isinstance(stmt, A.Assign):
            _check_depth(stmt.expr, "an expression")
            continue
        refs = (stmt.out, *stmt.inputs)
        for p in [*(p for r in refs for p in r.idxs), *(stmt.sizes or ()),
                  *(x for k in stmt.constraints for x in (k.poly, k.bound))]:
            _check_depth(p, "an index or size expression")


def _check_depth(root: A.Expr | A.Poly, what: str) -> None:
    stack: list[tuple[A.Expr | A.Poly, int]] = [(root, 0)]
    while stack:
        node, depth = stack.pop()
        check_depth(depth, what, node.pos.line, node.pos.column)
        stack.extend((child, depth + nests) for child, nests in A.children(node))


# AST construction ---------------------------------------------------------------------------

def _pos(x: Token | object) -> A.Pos:
    return A.Pos(x.line, x.column)  # type: ignore[attr-defined]


_COMMENT = re.compile(r"//[^\n]*")


def _statement_text(source: str, meta: Meta) -> str:
    raw = source[meta.start_pos:meta.end_pos]
    return " ".join(_COMMENT.sub(" ", raw).split())


@v_args(meta=True)
class _Builder(Transformer_NonRecursive[Token, Any]):
    def __init__(self, source: str) -> None:
        super().__init__()
        self._source = source

    # function and signature
    def start(self, meta: Meta, children: list[Any]) -> Any:
        params = tuple(c for c in children if isinstance(c, A.Param))
        outputs = tuple(c for c in children if isinstance(c, A.Name))
        stmts = tuple(c for c in children if isinstance(c, (A.Contraction, A.Assign)))
        return A.Function(params, outputs, stmts, A.Pos(meta.line, meta.column))

    def param_any(self, meta: Meta, children: list[Any]) -> Any:
        return A.Param(str(children[0]), None, _pos(children[0]))

    def param_scalar(self, meta: Meta, children: list[Any]) -> Any:
        return A.Param(str(children[0]), (), _pos(children[0]))

    def param_dims(self, meta: Meta, children: list[Any]) -> Any:
        dims: list[A.PolyName | A.PolyNum] = []
        for t in children[1:]:
            if t.type == "INT":
                dims.append(A.PolyNum(_int(t), _pos(t)))
            else:
                dims.append(A.PolyName(str(t), _pos(t)))
        return A.Param(str(children[0]), tuple(dims), _pos(children[0]))

    def stmt(self, meta: Meta, children: list[Any]) -> Any:
        *attrs, stmt = children
        return dataclasses.replace(stmt, attrs=tuple(attrs)) if attrs else stmt

    def attribute(self, meta: Meta, children: list[Any]) -> Any:
        name, *params = children
        return A.Attribute(str(name), tuple(str(p) for p in params if p is not None),
                           _pos(name))

    def output(self, meta: Meta, children: list[Any]) -> Any:
        return A.Name(str(children[0]), _pos(children[0]))

    # contractions
    def contraction(self, meta: Meta, children: list[Any]) -> Any:
        (out, sizes), agg, (comb, inputs), *flags = children
        constraints = tuple(f for f in flags if isinstance(f, A.Constraint))
        defaults = [f for f in flags if isinstance(f, A.Name)]
        if len(defaults) > 1:
            raise _flag_error(self._source, defaults[1].pos, "'default' given twice")
        return A.Contraction(
            out=out, sizes=sizes, agg=agg, comb=comb, inputs=inputs, constraints=constraints,
            no_defract=any(f == "no_defract" for f in flags),
            default=defaults[0] if defaults else None,
            pos=out.pos, text=_statement_text(self._source, meta))

    def out_nosizes(self, meta: Meta, children: list[Any]) -> Any:
        name, polys = children
        return A.TensorRef(str(name), polys or (), _pos(name)), None

    def out_sizes(self, meta: Meta, children: list[Any]) -> Any:
        name, polys, sizes = children
        return A.TensorRef(str(name), polys or (), _pos(name)), sizes or ()

    def agg(self, meta: Meta, children: list[Any]) -> Any:
        return str(children[0])

    def comb_single(self, meta: Meta, children: list[Any]) -> Any:
        return None, tuple(children)

    def comb_mul(self, meta: Meta, children: list[Any]) -> Any:
        return "*", tuple(children)

    def comb_add(self, meta: Meta, children: list[Any]) -> Any:
        return "+", tuple(children)

    def comb_eq(self, meta: Meta, children: list[Any]) -> Any:
        return "==", tuple(children)

    def comb_cond(self, meta: Meta, children: list[Any]) -> Any:
        return "?", tuple(children)

    def tref(self, meta: Meta, children: list[Any]) -> Any:
        name, polys = children
        return A.TensorRef(str(name), polys or (), _pos(name))

    def constraint(self, meta: Meta, children: list[Any]) -> Any:
        poly, bound = children
        return A.Constraint(poly, bound, A.Pos(meta.line, meta.column))

    def no_defract(self, meta: Meta, children: list[Any]) -> Any:
        return "no_defract"

    def default(self, meta: Meta, children: list[Any]) -> Any:
        return A.Name(str(children[0]), _pos(children[0]))

    def polys(self, meta: Meta, children: list[Any]) -> Any:
        return tuple(children)

    # polynomials
    def poly(self, meta: Meta, children: list[Any]) -> Any:
        a, op, b = children
        return A.PolyBin(str(op), a, b, _pos(op))

    pterm = poly

    def pnum(self, meta: Meta, children: list[Any]) -> Any:
        return A.PolyNum(_int(children[0]), _pos(children[0]))

    def pname(self, meta: Meta, children: list[Any]) -> Any:
        return A.PolyName(str(children[0]), _pos(children[0]))

    def pscaled(self, meta: Meta, children: list[Any]) -> Any:
        k, name = children
        return A.PolyBin("*", A.PolyNum(_int(k), _pos(k)), A.PolyName(str(name), _pos(name)),
                         _pos(k))

    def pcall(self, meta: Meta, children: list[Any]) -> Any:
        fn, *args = children
        return A.PolyCall(str(fn), tuple(args), _pos(fn))

    def pneg(self, meta: Meta, children: list[Any]) -> Any:
        return A.PolyNeg(children[0], A.Pos(meta.line, meta.column))

    # elementwise statements
    def assignment(self, meta: Meta, children: list[Any]) -> Any:
        name, expr = children
        return A.Assign(str(name), expr, _pos(name), _statement_text(self._source, meta))

    def ternary(self, meta: Meta, children: list[Any]) -> Any:
        c, a, b = children
        return A.Ternary(c, a, b, A.Pos(meta.line, meta.column))

    def _binary(self, meta: Meta, children: list[Any]) -> Any:
        a, op, b = children
        return A.Binary(str(op), a, b, _pos(op))

    lor = land = bor = bxor = band = eq = rel = shift = add = mul = _binary

    def unary(self, meta: Meta, children: list[Any]) -> Any:
        op, x = children
        return A.Unary(str(op), x, _pos(op))

    def num(self, meta: Meta, children: list[Any]) -> Any:
        t = children[0]
        return A.Num(_int(t) if t.type == "INT" else float(t), _pos(t))

    def name(self, meta: Meta, children: list[Any]) -> Any:
        return A.Name(str(children[0]), _pos(children[0]))

    def call(self, meta: Meta, children: list[Any]) -> Any:
        fn, *args = children
        return A.Call(str(fn), tuple(a for a in args if a is not None), _pos(fn))


# syntax errors ------------------------------------------------------------------------------

def _source_line(source: str, line: int) -> str:
    lines = source.splitlines()
    return lines[line - 1] if 0 < line <= len(lines) else ""


def _flag_error(source: str, pos: A.Pos, message: str) -> TileSyntaxError:
    return TileSyntaxError(message, pos.line, pos.column, _source_line(source, pos.line))


def _describe_expected(name: str) -> str | None:
    if name in _REGEX_TERMINALS:
        return _REGEX_TERMINALS[name]
    for t in _parser().terminals:
        if t.name == name and isinstance(t.pattern, PatternStr):
            return f"'{t.pattern.value}'"
    return None  # $END and the like


def _describe_token(tok: Token) -> str:
    if tok.type == "$END":
        return "end of input"
    if tok.type in ("UNAME", "LNAME"):
        return f"name '{tok}'"
    if tok.type in ("INT", "FLOAT"):
        return f"number {tok}"
    return f"'{tok}'"


def _join_alternatives(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " or " + items[-1]


def _previous_token(source: str, before: int) -> Token | None:
    """The last token that ends at or before character offset ``before``."""
    prev = None
    try:
        for tok in _parser().lex(source):
            if tok.end_pos is None or tok.end_pos > before:
                break
            prev = tok
    except lark.exceptions.UnexpectedCharacters:
        pass
    return prev


def _syntax_error(source: str, e: lark.exceptions.UnexpectedInput) -> TileSyntaxError:
    if isinstance(e, lark.exceptions.UnexpectedCharacters):
        ch = source[e.pos_in_stream] if e.pos_in_stream < len(source) else ""
        message = f"unexpected character {ch!r}"
        if ch in "#$" and re.match(r"[A-Za-z]", source[e.pos_in_stream + 1:][:1]):
            message += (f" (PlaidML's {ch}name identifiers are not supported: write the name "
                        "without it, upper case for a tensor or size, lower case for an index)")
        elif ch == "'":
            message += " (names ending in ' are not supported)"
        return TileSyntaxError(message, e.line, e.column, _source_line(source, e.line))
    if isinstance(e, lark.exceptions.UnexpectedToken):
        return _unexpected_token(source, e)
    # UnexpectedEOF (not raised by LALR, kept for safety)
    lines = source.splitlines() or [""]
    return TileSyntaxError("unexpected end of input", len(lines), len(lines[-1]) + 1, lines[-1])


def _accepted(e: lark.exceptions.UnexpectedToken) -> set[str]:
    """Terminals the parser would really accept here (LALR lookaheads over-approximate)."""
    if e.interactive_parser is not None:
        try:
            return set(e.interactive_parser.accepts())
        except lark.exceptions.LarkError:
            pass
    return set(e.expected)


def _unexpected_token(source: str, e: lark.exceptions.UnexpectedToken) -> TileSyntaxError:
    tok: Token = e.token
    expected = _accepted(e)
    at_end = tok.type == "$END"
    start = len(source) if at_end else tok.start_pos
    prev = _previous_token(source, start)
    if at_end:
        lines = source.splitlines() or [""]
        line, column = len(lines), len(lines[-1]) + 1
    else:
        line, column = tok.line, tok.column

    if prev is None and str(tok) in _ENTRY_POINTS:
        return TileSyntaxError(f"PlaidML's '{tok}' entry point is not supported: write a "
                               "whole function, 'function (...) -> (...) { ... }'",
                               line, column, _source_line(source, line))
    if "SEMICOLON" in expected and str(tok) in _COMPARISONS and tok.type != "$END":
        return TileSyntaxError("comparisons cannot be chained; use parentheses",
                               line, column, _source_line(source, line))
    if "SEMICOLON" in expected and tok.type != "SEMICOLON" and prev is not None:
        # point just after the statement that lacks its ';'
        return TileSyntaxError("expected ';' after statement", prev.end_line, prev.end_column,
                               _source_line(source, prev.end_line))
    if expected == {"LPAR"} and prev is not None and prev.type == "LNAME":
        return TileSyntaxError(
            f"'{prev}' is not a tensor: tensor names start with an uppercase letter "
            "(lowercase names are indexes and functions)",
            prev.line, prev.column, _source_line(source, prev.line))

    message = f"unexpected {_describe_token(tok)}"
    names = sorted(d for d in (_describe_expected(x) for x in expected)
                   if d is not None and d != "'[['")  # attributes: not worth suggesting
    if "FLOAT" in expected:
        message += ", expected an expression"
    elif {"INT", "LNAME", "LPAR"} <= expected:
        message += ", expected an index or size expression"
    elif names and len(names) <= _HINT_LIMIT:
        message += f", expected {_join_alternatives(names)}"
    elif [n for n in names if n in _CLOSERS]:
        message += f", expected {_join_alternatives([n for n in names if n in _CLOSERS])}"
    if tok.type == "LNAME" and "UNAME" in expected:
        message += " (tensor and dimension names start with an uppercase letter)"
    elif tok.type == "UNAME" and "LNAME" in expected and "UNAME" not in expected:
        message += " (index and function names start with a lowercase letter)"
    return TileSyntaxError(message, line, column, _source_line(source, line))
