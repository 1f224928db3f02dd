"""Parser for the Stripe text form written by :mod:`stripe.printer`.

A regular-expression lexer and a hand-written recursive-descent parser. Nothing in the text is
ever evaluated: string literals are decoded with ``json.loads``, numbers with ``int`` and
``float``. Every malformed input raises :class:`stripe.errors.IRParseError` with the line and
column (1-based) of the offending token.

Grammar (tokens are separated by any whitespace; ``//`` comments run to the end of the line)::

    program    := tag* block EOF
    block      := 'block' location? '[' (index (',' index)*)? ']' (':' INT)?
                  '(' COMMENT-on-the-same-line? COMMENT* constraint* refinement* ')'
                  '{' statement* '}'
    index      := tag* name (':' int | '=' affine ':' int)
    constraint := affine '>=' '0'
    refinement := tag* dir 'const'? 'fresh'? 'new'? name ('=' name)? location? ('@' int)?
                  '[' (affine (',' affine)*)? ']' (':' aggop)? shape
    shape      := dtype ':' 'I' ints ':' ints (':' int NAME)?
    location   := '<' name? ('[' affine ']')? '>'
    statement  := INT ':' tag* (block | simple)
    simple     := name '=' 'load' '(' name ')'
                | name '=' 'store' '(' name ')'
                | name '=' 'index' '(' affine ')'
                | name '=' '(' dtype ')' literal
                | (name (',' name)* '=')? name ':' dtype '(' names ')'          (intrinsic)
                | (name (',' name)* '=')? name '(' names ')' ('params' '(' literals ')')?
    name       := NAME | STRING
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import NoReturn, Union

from .affine import Affine
from .dtypes import DType
from .errors import IRParseError
from .ir import (
    AggOp,
    Block,
    Constant,
    Index,
    Intrinsic,
    Load,
    LoadIndex,
    Location,
    RefDir,
    Refinement,
    Special,
    Statement,
    Store,
    TensorDim,
    TensorShape,
)
from .limits import MAX_BLOCK_DEPTH, fits_int

MAX_DEPTH = MAX_BLOCK_DEPTH  # nested blocks; deeper text is refused, never overflows the stack
LITERAL_DIGITS = 40  # digits of an integer literal (a constant's value, a special's parameter)

_TOKEN_RE = re.compile(r"""
    (?P<ws>[ \t\r\n\f\v]+)
  | (?P<comment>//[^\n]*)
  | (?P<tag>\#(?:"(?:[^"\\\n]|\\.)*"|[A-Za-z0-9_.=:/+\-]+))
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<float>\d+\.\d*(?:[eE][-+]?\d+)?|\d+[eE][-+]?\d+)
  | (?P<int>0[xX][0-9a-fA-F]+|\d+)
  | (?P<name>\$?[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>>=|[\[\](){}<>,:=@*+\-])
""", re.VERBOSE)

_DTYPES = {d.value: d for d in DType}
_DIRS = {d.value: d for d in RefDir}
_AGGS = {a.value: a for a in AggOp}
_UNITS = frozenset({"B", "KiB", "MiB", "GiB"})
Literal = Union[bool, int, float, str]


@dataclass(frozen=True)
class Token:
    kind: str  # ws-free token kinds: comment tag string float int name op eof
    text: str
    line: int
    col: int

    def describe(self) -> str:
        return "end of input" if self.kind == "eof" else repr(self.text)


def tokenize(text: str) -> list[Token]:
    tokens: list[Token] = []
    pos, line, line_start = 0, 1, 0
    while pos < len(text):
        m = _TOKEN_RE.match(text, pos)
        if m is None:
            raise IRParseError(f"unexpected character {text[pos]!r}", line, pos - line_start + 1)
        kind = m.lastgroup or ""
        if kind != "ws":
            tokens.append(Token(kind, m.group(), line, pos - line_start + 1))
        newlines = m.group().count("\n")
        if newlines:
            line += newlines
            line_start = m.start() + m.group().rindex("\n") + 1
        pos = m.end()
    tokens.append(Token("eof", "", line, pos - line_start + 1))
    return tokens


def decode_string(tok: Token, body: str) -> str:
    try:
        value = json.loads(body)
    except ValueError as e:
        raise IRParseError(f"bad string literal {body}: {e}", tok.line, tok.col) from None
    if not isinstance(value, str):
        raise IRParseError(f"bad string literal {body}", tok.line, tok.col)
    return value


def decode_int(tok: Token, negative: bool = False, *, literal: bool = False) -> int:
    """An ``int`` token's value (negated if ``negative``), checked on its digits before they
    are converted: IRParseError unless it fits a signed 64-bit integer, or, for a
    ``literal`` (a constant's value or a special's parameter, which the verifier checks
    against 64 bits), unless it has at most LITERAL_DIGITS digits."""
    text = tok.text
    hexa = text[:2] in ("0x", "0X")
    digits = (text[2:] if hexa else text).lstrip("0") or "0"
    shown = text if len(text) <= 24 else f"{text[:10]}...{text[-6:]}"
    if literal:
        if len(digits) > LITERAL_DIGITS:
            raise IRParseError(f"bad integer {shown}: more than {LITERAL_DIGITS} digits",
                               tok.line, tok.col)
        value = int(digits, 16 if hexa else 10)
        return -value if negative else value
    if len(digits) <= (16 if hexa else 19):
        value = int(digits, 16 if hexa else 10)
        value = -value if negative else value
        if fits_int(value):
            return value
    raise IRParseError(f"bad integer {'-' if negative else ''}{shown}: it does not fit in 64 "
                       "bits (|value| must be below 2**63)", tok.line, tok.col)


def comment_text(tok: Token) -> str:
    """The text of a ``//`` comment token: raw, or a JSON string if it starts with a quote."""
    body = tok.text[2:]
    if body.startswith(" "):
        body = body[1:]
    body = body.rstrip()
    return decode_string(tok, body) if body.startswith('"') else body


class Parser:
    def __init__(self, text: str) -> None:
        self.toks = tokenize(text)
        self.pos = 0
        self.depth = 0

    # token helpers ----------------------------------------------------------------------------
    @property
    def tok(self) -> Token:
        return self.toks[self.pos]

    def peek(self, ahead: int = 1) -> Token:
        return self.toks[min(self.pos + ahead, len(self.toks) - 1)]

    def advance(self) -> Token:
        tok = self.tok
        if tok.kind != "eof":
            self.pos += 1
        return tok

    def fail(self, message: str, tok: Token | None = None) -> NoReturn:
        """Syntax error at the current token (naming what was found) or at ``tok``."""
        if tok is None:
            tok = self.tok
            message = f"{message}, found {tok.describe()}"
        raise IRParseError(message, tok.line, tok.col)

    def at(self, text: str) -> bool:
        return self.tok.kind in ("op", "name") and self.tok.text == text

    def accept(self, text: str) -> bool:
        if self.at(text):
            self.advance()
            return True
        return False

    def expect(self, text: str, what: str = "") -> Token:
        if not self.at(text):
            self.fail(f"expected {text!r}" + (f" {what}" if what else ""))
        return self.advance()

    # atoms ------------------------------------------------------------------------------------
    def at_name(self) -> bool:
        return self.tok.kind in ("name", "string")

    def name(self, what: str = "a name") -> str:
        tok = self.tok
        if tok.kind == "name":
            return self.advance().text
        if tok.kind == "string":
            return decode_string(self.advance(), tok.text)
        self.fail(f"expected {what}")

    def int_(self, what: str = "an integer") -> int:
        neg = self.accept("-")
        if self.tok.kind != "int":
            self.fail(f"expected {what}")
        return decode_int(self.advance(), neg)

    def ints(self) -> tuple[int, ...]:
        self.expect("(")
        values: list[int] = []
        while not self.at(")"):
            if values:
                self.expect(",", "or ')'")
            values.append(self.int_())
        self.advance()
        return tuple(values)

    def tags(self) -> frozenset[str]:
        found: list[str] = []
        while self.tok.kind == "tag":
            tok = self.advance()
            body = tok.text[1:]
            found.append(decode_string(tok, body) if body.startswith('"') else body)
        return frozenset(found)

    def dtype(self) -> DType:
        tok = self.tok
        if tok.kind != "name" or tok.text not in _DTYPES:
            self.fail(f"expected a dtype ({', '.join(_DTYPES)})")
        self.advance()
        return _DTYPES[tok.text]

    def literal(self) -> Literal:
        """bool, int, float (``inf``, ``nan`` included, optionally negated) or string."""
        tok = self.tok
        if tok.kind == "string":
            return decode_string(self.advance(), tok.text)
        if tok.kind == "name" and tok.text in ("true", "false"):
            return self.advance().text == "true"
        neg = self.accept("-")
        tok = self.tok
        value: int | float
        if tok.kind == "int":
            value = decode_int(tok, neg, literal=True)
        elif tok.kind == "float" or (tok.kind == "name" and tok.text in ("inf", "nan")):
            value = -float(tok.text) if neg else float(tok.text)
        else:
            self.fail("expected a number, 'true', 'false' or a string")
        self.advance()
        return value

    # affines ----------------------------------------------------------------------------------
    def affine_term(self, sign: int) -> Affine:
        """``INT``, ``INT '*' name`` or ``name``, times ``sign`` (+1 or -1; applied to the
        digits, so that ``-9223372036854775808`` is read as the 64-bit integer it is)."""
        if self.tok.kind == "int":
            coeff = decode_int(self.advance(), sign < 0)
            if not self.accept("*"):
                return Affine((), coeff)
            return Affine(((self.name("an index name"), coeff),))
        if self.at_name():
            return Affine(((self.name(), sign),))
        self.fail("expected an affine term (integer or index name)")

    def affine(self) -> Affine:
        """``term (('+' | '-') term)*``; the sum's coefficients and constant must fit 64 bits."""
        start = self.tok
        terms: dict[str, int] = {}
        const = 0
        sign = -1 if self.accept("-") else 1
        while True:
            term = self.affine_term(sign)
            const += term.const
            for n, k in term.terms:
                terms[n] = terms.get(n, 0) + k
            if not (self.at("+") or self.at("-")):
                break
            sign = 1 if self.advance().text == "+" else -1
        if not fits_int(const) or not all(fits_int(k) for k in terms.values()):
            self.fail("this affine's coefficients or constant do not fit in 64 bits", start)
        return Affine.from_dict(terms, const)

    def location(self) -> Location:
        if not self.accept("<"):
            return Location()
        name = self.name("a location name") if self.at_name() else ""
        bank = Affine()
        if self.accept("["):
            bank = self.affine()
            self.expect("]", "after the bank affine")
        self.expect(">", "to close the location")
        return Location(name, bank)

    # block header -----------------------------------------------------------------------------
    def index(self) -> Index:
        tags = self.tags()
        name = self.name("an index name")
        affine = Affine()
        if self.accept("="):
            affine = self.affine()
        self.expect(":", "before the index range")
        return Index(name, self.int_("an index range"), affine, tags)

    def index_list(self) -> tuple[Index, ...]:
        self.expect("[", "to open the index list")
        idxs: list[Index] = []
        while not self.at("]"):
            if idxs:
                self.expect(",", "or ']'")
            idxs.append(self.index())
        self.advance()
        return tuple(idxs)

    def shape(self) -> TensorShape:
        dtype = self.dtype()
        self.expect(":")
        self.expect("I", "(interior shape)")
        sizes = self.ints()
        self.expect(":")
        strides_tok = self.tok
        strides = self.ints()
        if len(sizes) != len(strides):
            self.fail(f"{len(sizes)} sizes but {len(strides)} strides", strides_tok)
        shape = TensorShape(dtype, tuple(TensorDim(s, t) for s, t in zip(sizes, strides)))
        if not fits_int(shape.byte_size) or not fits_int(shape.elem_count):
            self.fail("this shape's element count or byte size does not fit in 64 bits",
                      strides_tok)
        if self.accept(":"):  # derived byte size: ignored
            self.int_("a byte size")
            if self.tok.kind != "name" or self.tok.text not in _UNITS:
                self.fail("expected a byte unit (B, KiB, MiB, GiB)")
            self.advance()
        return shape

    def ref_names(self, is_alloc: bool) -> tuple[str, str]:
        """``into`` and ``from_``: ``new X`` (allocation), ``X`` (view of X), ``X = Y``."""
        into = self.name("a refinement name")
        if is_alloc:
            return into, ""
        return into, self.name("the parent buffer name") if self.accept("=") else into

    def refinement(self) -> Refinement:
        tags = self.tags()
        if self.tok.kind != "name" or self.tok.text not in _DIRS:
            self.fail("expected a refinement direction (none, in, out, inout)")
        direction = _DIRS[self.advance().text]
        is_const = self.accept("const")
        fresh = self.accept("fresh")
        into, from_ = self.ref_names(self.accept("new"))
        location = self.location()
        offset = self.int_("a byte offset") if self.accept("@") else 0
        access = self.affine_list()
        agg = AggOp.ASSIGN
        if self.accept(":"):
            if self.tok.kind != "name" or self.tok.text not in _AGGS:
                self.fail(f"expected an aggregation op ({', '.join(_AGGS)})")
            agg = _AGGS[self.advance().text]
        return Refinement(direction, from_, into, access, self.shape(), agg, location, offset,
                          is_const, tags, fresh)

    def affine_list(self) -> tuple[Affine, ...]:
        self.expect("[", "to open the access list")
        access: list[Affine] = []
        while not self.at("]"):
            if access:
                self.expect(",", "or ']'")
            access.append(self.affine())
        self.advance()
        return tuple(access)

    def at_refinement(self) -> bool:
        return self.tok.kind == "tag" or (self.tok.kind == "name" and self.tok.text in _DIRS)

    def header_body(self, open_paren: Token) -> tuple[str, str, list[Affine], list[Refinement]]:
        name = ""
        if self.tok.kind == "comment" and self.tok.line == open_paren.line:
            name = comment_text(self.advance())
        comments: list[str] = []
        while self.tok.kind == "comment":
            comments.append(comment_text(self.advance()))
        constraints: list[Affine] = []
        while not self.at(")") and not self.at_refinement():
            constraints.append(self.affine())
            self.expect(">=", "after a constraint affine")
            if self.int_("0") != 0:
                self.fail("a constraint compares with 0", self.toks[self.pos - 1])
        refs: list[Refinement] = []
        while not self.at(")"):
            refs.append(self.refinement())
        self.advance()
        return name, "\n".join(comments), constraints, refs

    # blocks and statements --------------------------------------------------------------------
    def block(self, tags: frozenset[str]) -> Block:
        start = self.expect("block")
        if self.depth >= MAX_DEPTH:
            self.fail(f"blocks nested deeper than {MAX_DEPTH}", start)
        location = self.location()
        idxs = self.index_list()
        points = 1
        for idx in idxs:
            points *= max(idx.range, 0)
        if not fits_int(points):
            self.fail("this block's index ranges multiply past 64 bits (the product is "
                      "printed after them and must fit)", start)
        if self.accept(":"):  # derived range product: ignored
            self.int_("the range product")
        open_paren = self.expect("(", "to open the block header")
        name, comments, constraints, refs = self.header_body(open_paren)
        self.expect("{", "to open the statement list")
        self.depth += 1
        stmts: list[Statement] = []
        while not self.at("}"):
            stmts.append(self.statement())
        self.depth -= 1
        self.advance()
        return Block(name, comments, idxs, tuple(constraints), tuple(refs), tuple(stmts), tags,
                     location)

    def statement(self) -> Statement:
        if self.tok.kind != "int":
            self.fail("expected a statement number or '}'")
        self.advance()
        self.expect(":", "after the statement number")
        tags = self.tags()
        if self.at("block"):
            return self.block(tags)
        outputs = self.outputs()
        if self.tok.kind == "name" and self.tok.text in ("load", "store", "index"):
            return self.keyword_stmt(outputs, tags)
        if self.at("("):
            return self.constant(outputs, tags)
        return self.call(outputs, tags)

    def outputs(self) -> tuple[str, ...]:
        """``a, b =`` before a statement's right-hand side (empty if there is none)."""
        if not (self.at_name() and self.peek().text in ("=", ",")
                and self.peek().kind == "op"):
            return ()
        names = [self.name()]
        while self.accept(","):
            names.append(self.name("an output name"))
        self.expect("=", "after the outputs")
        return tuple(names)

    def single_output(self, outputs: tuple[str, ...], what: str, tok: Token) -> str:
        if len(outputs) != 1:
            self.fail(f"{what} needs exactly one name on the left of '='", tok)
        return outputs[0]

    def keyword_stmt(self, outputs: tuple[str, ...], tags: frozenset[str]) -> Statement:
        word = self.advance().text
        into = self.single_output(outputs, f"'{word}'", self.toks[self.pos - 1])
        self.expect("(", f"after '{word}'")
        stmt: Statement
        if word == "index":
            stmt = LoadIndex(self.affine(), into, tags)
        elif word == "load":
            stmt = Load(self.name("a refinement name"), into, tags)
        else:
            stmt = Store(self.name("a scalar name"), into, tags)
        self.expect(")", f"to close '{word}'")
        return stmt

    def constant(self, outputs: tuple[str, ...], tags: frozenset[str]) -> Constant:
        name = self.single_output(outputs, "a constant", self.tok)
        self.expect("(")
        dtype = self.dtype()
        self.expect(")", "after the constant's dtype")
        value = self.literal()
        if isinstance(value, str):
            self.fail("a constant is a number or a bool", self.toks[self.pos - 1])
        return Constant(name, value, dtype, tags)

    def call(self, outputs: tuple[str, ...], tags: frozenset[str]) -> Statement:
        if not self.at_name():
            self.fail("expected a statement (load, store, index, constant, intrinsic, special)")
        name = self.name()
        dtype = self.dtype() if self.accept(":") else None
        args = self.name_list()
        if dtype is not None:
            return Intrinsic(name, args, outputs, dtype, tags)
        params: tuple[Literal, ...] = ()
        if self.accept("params"):
            params = self.literal_list()
        return Special(name, args, outputs, params, tags)  # type: ignore[arg-type]

    def name_list(self) -> tuple[str, ...]:
        self.expect("(", "to open the argument list")
        names: list[str] = []
        while not self.at(")"):
            if names:
                self.expect(",", "or ')'")
            names.append(self.name("an argument name"))
        self.advance()
        return tuple(names)

    def literal_list(self) -> tuple[Literal, ...]:
        self.expect("(", "after 'params'")
        values: list[Literal] = []
        while not self.at(")"):
            if values:
                self.expect(",", "or ')'")
            values.append(self.literal())
        self.advance()
        return tuple(values)

    def program(self) -> Block:
        block = self.block(self.tags())
        if self.tok.kind != "eof":
            self.fail("expected end of input after the root block")
        return block


def parse_ir(text: str) -> Block:
    """The block that ``text`` (as written by :func:`stripe.print_ir`) describes. Raises
    IRParseError (line and column) on malformed text, TypeError if ``text`` is not a str."""
    if not isinstance(text, str):
        raise TypeError(f"parse_ir: text must be a str, got {type(text).__name__}")
    return Parser(text).program()


__all__ = ["parse_ir"]
