"""The deterministic text form of the Stripe IR (close to PlaidML's printer).

``print_ir(block)`` gives text that :func:`stripe.irparser.parse_ir` reads back into an equal
tree. The form (see ``docs/ir.md`` for an annotated example)::

    #agg_op_add #comb_op_mul #contraction #kernel
    block [i:4, j:5, k:3]:60 ( // kernel_0
        // C[i, j : 4, 5] = +(A[i, k] * B[k, j])
        #contraction in A[i, k] fp32:I(1, 1):(3, 1):4 B
        #contraction in B[k, j] fp32:I(1, 1):(5, 1):4 B
        out C[i, j]:add fp32:I(1, 1):(5, 1):4 B
    ) {
        0: $A = load(A)
        1: $B = load(B)
        2: $C = mul:fp32($A, $B)
        3: C = store($C)
    }

Rules that make the text parseable for every tree:

* Names (refs, indexes, scalars, locations, intrinsics, specials) are printed bare when they are
  identifiers (``$`` allowed in front) and not a keyword of the form; otherwise as a JSON
  string (``"a b"``). Tags are printed ``#tag`` when made of ``[A-Za-z0-9_.=:/+-]``, else
  ``#"..."``. Tags are sorted; everything else is printed in stored order.
* Comment text (block name after ``( //`` and ``//`` comment lines) is printed raw when it is
  printable, does not start with ``"`` and has no trailing whitespace; otherwise as a JSON
  string. A multi-line comment is one ``//`` line per line.
* Derived facts (the product of the index ranges after ``]``, byte sizes after the shape)
  are for the reader; the parser skips them.
"""

from __future__ import annotations

import json
import math
import re
from numbers import Integral

import numpy as np

from .affine import Affine
from .ir import (
    AggOp,
    Block,
    Constant,
    Index,
    Intrinsic,
    Load,
    LoadIndex,
    Location,
    Refinement,
    Special,
    Statement,
    Store,
    TensorShape,
)

INDENT = "    "

# Words that the parser reads as keywords where a name could also stand: names equal to one of
# them are quoted.
KEYWORDS = frozenset({
    "block", "const", "fresh", "new", "load", "store", "index", "none", "in", "out", "inout",
})
NAME_RE = re.compile(r"\$?[A-Za-z_][A-Za-z0-9_]*")
TAG_RE = re.compile(r"[A-Za-z0-9_.=:/+\-]+")


# atoms ----------------------------------------------------------------------------------------

def quote(text: str) -> str:
    """A JSON string literal (ASCII only, so the text form is plain ASCII)."""
    return json.dumps(text, ensure_ascii=True)


def fmt_name(name: str) -> str:
    if NAME_RE.fullmatch(name) and name not in KEYWORDS:
        return name
    return quote(name)


def fmt_tag(tag: str) -> str:
    return "#" + (tag if TAG_RE.fullmatch(tag) else quote(tag))


def fmt_tags(tags: frozenset[str]) -> str:
    """Sorted ``#tag`` words followed by a space, or nothing."""
    return "".join(fmt_tag(t) + " " for t in sorted(tags))


def fmt_comment_text(text: str) -> str:
    if text.isprintable() and not text.startswith('"') and text == text.rstrip():
        return text
    return quote(text)


def fmt_comment(text: str) -> str:
    """A ``//`` comment holding ``text`` (one line), as the parser reads it back."""
    return "//" + (" " + fmt_comment_text(text) if text else "")


def fmt_affine(aff: Affine) -> str:
    """PlaidML order, constant first: ``-1 + 2*i + x``."""
    parts: list[str] = []
    if aff.const != 0 or not aff.terms:
        parts.append(str(aff.const))
    for name, coeff in aff.terms:
        body = fmt_name(name) if abs(coeff) == 1 else f"{abs(coeff)}*{fmt_name(name)}"
        if not parts:
            parts.append(body if coeff > 0 else "-" + body)
        else:
            parts.append(("+ " if coeff > 0 else "- ") + body)
    return " ".join(parts)


def fmt_literal(value: object) -> str:
    """A constant value or special param: bool, int, float (repr, exact) or string."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, Integral):
        return str(int(value))
    if isinstance(value, str):
        return quote(value)
    f = float(value)  # type: ignore[arg-type]
    return "nan" if math.isnan(f) else repr(f)


def fmt_int_tuple(values: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(v) for v in values) + ")"


def fmt_bytes(n: int) -> str:
    """Exact byte count in the largest binary unit that divides it (``10 KiB``, ``4 B``)."""
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def fmt_location(loc: Location) -> str:
    if loc.is_default:
        return ""
    bank = "" if loc.bank.is_zero else f"[{fmt_affine(loc.bank)}]"
    name = fmt_name(loc.name) if loc.name else ""
    return f"<{name}{bank}>"


def fmt_offset(offset: int) -> str:
    if offset == 0:
        return ""
    return f"@-0x{-offset:x}" if offset < 0 else f"@0x{offset:x}"


def fmt_shape(shape: TensorShape) -> str:
    byte_size = fmt_bytes(shape.byte_size)
    return (f"{shape.dtype.value}:I{fmt_int_tuple(shape.sizes)}"
            f":{fmt_int_tuple(shape.strides)}:{byte_size}")


# nodes ----------------------------------------------------------------------------------------

def fmt_index(idx: Index) -> str:
    head = fmt_tags(idx.tags) + fmt_name(idx.name)
    if idx.affine.is_zero:
        return f"{head}:{idx.range}"
    return f"{head} = {fmt_affine(idx.affine)}:{idx.range}"


def fmt_refinement(ref: Refinement) -> str:
    """``#tags dir [const] [fresh] [new] into[ = from]<loc>@offset[access][:agg] shape``."""
    words = [fmt_tags(ref.tags) + ref.dir.value]
    if ref.is_const:
        words.append("const")
    if ref.fresh:
        words.append("fresh")
    if ref.is_alloc:
        words.append("new")
    name = fmt_name(ref.into)
    if ref.from_ and ref.from_ != ref.into:
        name += " = " + fmt_name(ref.from_)
    access = "[" + ", ".join(fmt_affine(a) for a in ref.access) + "]"
    agg = "" if ref.agg_op is AggOp.ASSIGN else ":" + ref.agg_op.value
    words.append(name + fmt_location(ref.location) + fmt_offset(ref.offset) + access + agg)
    words.append(fmt_shape(ref.shape))
    return " ".join(words)


def fmt_call(name: str, args: tuple[str, ...]) -> str:
    return f"{name}(" + ", ".join(fmt_name(a) for a in args) + ")"


def fmt_outputs(outputs: tuple[str, ...]) -> str:
    return ", ".join(fmt_name(o) for o in outputs) + " = " if outputs else ""


def fmt_simple_stmt(stmt: Statement) -> str:
    """One line for a statement that is not a block (without position and tags)."""
    if isinstance(stmt, Load):
        return f"{fmt_name(stmt.into)} = load({fmt_name(stmt.from_)})"
    if isinstance(stmt, Store):
        return f"{fmt_name(stmt.into)} = store({fmt_name(stmt.from_)})"
    if isinstance(stmt, LoadIndex):
        return f"{fmt_name(stmt.into)} = index({fmt_affine(stmt.from_)})"
    if isinstance(stmt, Constant):
        return f"{fmt_name(stmt.name)} = ({stmt.dtype.value}){fmt_literal(stmt.value)}"
    if isinstance(stmt, Intrinsic):
        call = fmt_call(f"{fmt_name(stmt.name)}:{stmt.dtype.value}", stmt.inputs)
        return fmt_outputs(stmt.outputs) + call
    if isinstance(stmt, Special):
        params = ""
        if stmt.params:
            params = " params(" + ", ".join(fmt_literal(p) for p in stmt.params) + ")"
        return fmt_outputs(stmt.outputs) + fmt_call(fmt_name(stmt.name), stmt.inputs) + params
    raise TypeError(f"not a Stripe statement: {type(stmt).__name__}")


def block_lines(block: Block, indent: str) -> list[str]:
    """From the ``block`` keyword to the closing brace (the caller prints the tags)."""
    inner = indent + INDENT
    idxs = ", ".join(fmt_index(i) for i in block.idxs)
    head = f"{indent}block{fmt_location(block.location)} [{idxs}]:{block.range_product} ("
    if block.name:
        head += " " + fmt_comment(block.name)
    lines = [head]
    if block.comments:
        lines += [inner + fmt_comment(c) for c in block.comments.split("\n")]
    lines += [f"{inner}{fmt_affine(c)} >= 0" for c in block.constraints]
    lines += [inner + fmt_refinement(r) for r in block.refs]
    lines.append(indent + ") {")
    for pos, stmt in enumerate(block.stmts):
        lines += stmt_lines(pos, stmt, inner)
    lines.append(indent + "}")
    return lines


def stmt_lines(pos: int, stmt: Statement, indent: str) -> list[str]:
    prefix = f"{indent}{pos}: "
    if not isinstance(stmt, Block):
        return [prefix + fmt_tags(stmt.tags) + fmt_simple_stmt(stmt)]
    body = block_lines(stmt, indent)
    if not stmt.tags:
        return [prefix + body[0][len(indent):]] + body[1:]
    return [prefix + fmt_tags(stmt.tags).rstrip()] + body


def print_ir(block: Block) -> str:
    """The text form of ``block`` (and everything inside it), ending with a newline."""
    lines = [fmt_tags(block.tags).rstrip()] if block.tags else []
    lines += block_lines(block, "")
    return "\n".join(lines) + "\n"


__all__ = ["print_ir"]
