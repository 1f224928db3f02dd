"""The Tile abstract syntax tree: frozen dataclasses, every node with its source position.

Polynomials (``Poly*``) are the index expressions of contractions and the size expressions
(output sizes, constraint bounds, ``reshape`` sizes); a ``PolyName`` is an index when its name
starts with a lowercase letter and a dimension size when it starts with an uppercase one.
Expressions (``Num``, ``Name``, ``Call``, ``Unary``, ``Binary``, ``Ternary``) are the right-hand
sides of elementwise statements.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True)
class Pos:
    line: int
    column: int


# polynomials -------------------------------------------------------------------------------

@dataclass(frozen=True)
class PolyNum:
    value: int
    pos: Pos


@dataclass(frozen=True)
class PolyName:
    name: str
    pos: Pos

    @property
    def is_index(self) -> bool:
        return self.name[0].islower()


@dataclass(frozen=True)
class PolyNeg:
    x: Poly
    pos: Pos


@dataclass(frozen=True)
class PolyBin:
    op: str  # + - * /
    a: Poly
    b: Poly
    pos: Pos  # the operator


@dataclass(frozen=True)
class PolyCall:
    """``max(a, b)`` or ``min(a, b)`` in a size expression (a constant in an index)."""

    fn: str
    args: tuple[Poly, ...]
    pos: Pos


Poly = Union[PolyNum, PolyName, PolyNeg, PolyBin, PolyCall]


# expressions -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Num:
    value: Union[int, float]
    pos: Pos


@dataclass(frozen=True)
class Name:
    name: str
    pos: Pos


@dataclass(frozen=True)
class Call:
    fn: str
    args: tuple[Expr, ...]
    pos: Pos


@dataclass(frozen=True)
class Unary:
    op: str  # - ! ~
    x: Expr
    pos: Pos


@dataclass(frozen=True)
class Binary:
    op: str
    a: Expr
    b: Expr
    pos: Pos  # the operator


@dataclass(frozen=True)
class Ternary:
    cond: Expr
    a: Expr
    b: Expr
    pos: Pos


Expr = Union[Num, Name, Call, Unary, Binary, Ternary]


# statements --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Attribute:
    """``[[name(param, ...)]]`` before a statement (PlaidML's statement attributes)."""

    name: str
    params: tuple[str, ...]
    pos: Pos


@dataclass(frozen=True)
class TensorRef:
    """``name[idxs]`` in a contraction."""

    name: str
    idxs: tuple[Poly, ...]
    pos: Pos


@dataclass(frozen=True)
class Constraint:
    """``poly < bound``, meaning ``0 <= poly < bound`` (PlaidML's range constraint)."""

    poly: Poly
    bound: Poly
    pos: Pos


@dataclass(frozen=True)
class Contraction:
    out: TensorRef
    sizes: tuple[Poly, ...] | None  # None when written without ``:``
    agg: str  # + * > < =
    comb: str | None  # None (one input), "*", "+", "==" or "?" (A == B ? C)
    inputs: tuple[TensorRef, ...]
    constraints: tuple[Constraint, ...]
    no_defract: bool
    default: Name | None
    pos: Pos
    text: str  # the statement's source, one line
    attrs: tuple[Attribute, ...] = ()


@dataclass(frozen=True)
class Assign:
    name: str
    expr: Expr
    pos: Pos
    text: str
    attrs: tuple[Attribute, ...] = ()


Statement = Union[Contraction, Assign]


@dataclass(frozen=True)
class Param:
    """An input: ``dims`` is None for ``I`` (any shape); entries are dimension names or ints."""

    name: str
    dims: tuple[Union[PolyName, PolyNum], ...] | None
    pos: Pos


@dataclass(frozen=True)
class Function:
    params: tuple[Param, ...]
    outputs: tuple[Name, ...]
    stmts: tuple[Statement, ...]
    pos: Pos


def children(node: Expr | Poly) -> tuple[tuple[Expr | Poly, int], ...]:
    """The subexpressions of ``node``, each with 1 if it nests one level deeper than ``node``
    and 0 if it continues a chain: the left operand of a binary operator and the ``else``
    branch of a ternary continue chains (``A + B + C``, ``c1 ? x : c2 ? y : z``), so a
    chain of any length counts as one level of nesting."""
    if isinstance(node, (Binary, PolyBin)):
        return ((node.a, 0), (node.b, 1))
    if isinstance(node, Ternary):
        return ((node.cond, 1), (node.a, 1), (node.b, 0))
    if isinstance(node, (Unary, PolyNeg)):
        return ((node.x, 1),)
    if isinstance(node, (Call, PolyCall)):
        return tuple((a, 1) for a in node.args)
    return ()
