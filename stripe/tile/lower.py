"""Lowering a Tile function to a Stripe program (after PlaidML's ``gen_stripe``).

Output (the program contract of ``stripe/ir.py``): a root block ``program`` tagged
``program`` with one allocation per tensor (inputs ``in`` + ``user``, outputs ``out`` +
``user``, then temporaries ``none`` + ``tmp``; packed row-major strides), whose single
statement is the block ``main`` (tagged ``main``) viewing every buffer, whose statements are
the kernels ``kernel_0``, ``kernel_1``, ... in execution order, each tagged ``kernel`` and
carrying its Tile statement in ``comments``:

* a contraction ``O[...] = agg(...)`` gives its initialisation kernel(s) then the contraction
  kernel (tags ``contraction``, ``agg_op_<op>``, ``comb_op_<op>`` or
  ``agg_op_<op>_no_comb_op``). Initialisation, per ``docs/semantics.md``: when every output
  element is provably written, one ``init`` kernel stores the aggregation identity everywhere;
  otherwise a ``zero`` kernel stores 0 everywhere and, if the identity is not 0, an ``init``
  kernel over the contraction's own domain stores the identity with ``min``/``max``
  aggregation. With ``default D`` a ``copy`` kernel copies D into O instead, and the
  contraction aggregates onto it;
* an elementwise statement gives one kernel (tags ``eltwise``, ``eltwise_<top op>``) over the
  output shape, broadcast dimensions read at 0;
* ``reshape``/``gather``/``scatter`` give a kernel (tag ``special``) holding the Special;
* a statement whose value folds to an integer (``Pad = (K - 1) / 2;``) binds a
  dimension-like constant and gives a kernel only where a tensor is needed (an output, a
  contraction operand, a ``default``).

Every kernel of a statement carries its ``[[attribute]]`` tags (``attr_<name>[=<params>]``).
Builtin calls are expanded first (``builtins.expand``). Fractional index expressions are
resolved exactly (:class:`_Fractions`). Rank-0 integer inputs given by value may be named in
sizes and indexes; :func:`lower_specialised` reports the values the program depends on.

Names: buffers and refinements are Tile tensor names (uppercase identifiers; a second view of
the same tensor in one kernel gets a fresh ``<name>_<k>`` that no Tile tensor uses); scalars
are ``$<ref>`` for loads and ``$<output>`` for the result, generated scalars are lowercase
(``$t0``, ``$c0``, ``$x0``, ``$eq``, ``$zero``, ``$identity``), so none can collide.
Contraction kernels use the Tile index names; other kernels use ``i1, i2, ...``.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from typing import Union

from .. import tags as T
from ..affine import Affine
from ..dtypes import DType, promote
from ..errors import LimitError, ShapeError, StripeError, TileError, TypeError_
from ..ir import (
    AggOp,
    Block,
    Constant,
    Index,
    Intrinsic,
    Load,
    LoadIndex,
    RefDir,
    Refinement,
    Special,
    Statement,
    Store,
    TensorShape,
    agg_identity,
)
from ..limits import TileLimitError, check_bytes, fits_int
from ..names import fresh_name
from . import ast as A
from .builtins import expand
from .parser import parse
from .ranges import Plan, infer_ranges
from .shapes import (
    TensorInfo,
    bind_inputs,
    check_tensor,
    eval_size,
    poly_names,
    tensor_bytes,
    to_affine,
)
from .source import resolve
from .typecheck import TConst, TIndex, TNode, TOp, TSpecial, TTensor, check_statement

_AGG = {"+": AggOp.ADD, "*": AggOp.MUL, ">": AggOp.MAX, "<": AggOp.MIN, "=": AggOp.ASSIGN}
_COMB = {"*": "mul", "+": "add", "?": "cond", "==": "cmp_eq"}
_COMB_TAG = {"*": "mul", "+": "add", "?": "cond", "==": "eq"}
_BIND_FNS = ("broadcast", "match")
_TAG_UNSAFE = re.compile(r"[^A-Za-z0-9_.:/+\-]")
Scalar = Union[int, float, bool]


def lower(source: object, inputs: Mapping[str, object] | None = None) -> Block:
    """Tile source and input arrays (or ``(shape, dtype)`` pairs) -> the ``program`` block.

    ``source`` may also be a function built with ``stripe.ops`` (see ``source.resolve``);
    its own input shapes are used when ``inputs`` is None. A rank-0 integer input may be
    given as an int or a rank-0 integer array: its value is then usable as a size or in an
    index expression, and the program is specialised on it (see :func:`lower_specialised`)."""
    return lower_specialised(source, inputs)[0]


def lower_specialised(source: object, inputs: Mapping[str, object] | None = None
                      ) -> tuple[Block, dict[str, int]]:
    """:func:`lower`, and the values of the inputs the program is specialised on: every
    rank-0 integer input whose value was used as a size, in an index expression or in a
    constraint, by name, in signature order. A run with another value for one of them
    computes something else."""
    if isinstance(source, str) and inputs is not None:
        low = _Lowering(expand(parse(source), inputs), inputs)
    else:
        text, given = resolve(source, inputs)
        low = _Lowering(expand(parse(text), given), given)
    block = low.run()
    used = {p.name: low.sizes.used[p.name] for p in low.fn.params if p.name in low.sizes.used}
    if used:  # the program says what it was lowered for: the interpreter and C check it
        block = block.replace(tags=block.tags | {T.keyed(T.SPECIALISED, f"{n}:{v}")
                                                 for n, v in used.items()})
    return block, used


# small builders ------------------------------------------------------------------------------

def _full_shape(info: TensorInfo) -> TensorShape:
    return TensorShape.packed(info.dtype, info.sizes)


def _element_shape(info: TensorInfo) -> TensorShape:
    """A one-element view with the parent's strides."""
    return _full_shape(info).with_sizes([1] * info.rank)


def _out_space(sizes: Sequence[int]) -> tuple[tuple[Index, ...], tuple[Affine, ...]]:
    """Indexes ``i1, i2, ...`` over the dimensions of ``sizes`` larger than 1, and the access
    of a tensor of exactly that shape (size-1 dimensions at 0)."""
    idxs, access = [], []
    for k, size in enumerate(sizes):
        if size > 1:
            idxs.append(Index(f"i{k + 1}", size))
            access.append(Affine.of(f"i{k + 1}"))
        else:
            access.append(Affine())
    return tuple(idxs), tuple(access)


def _broadcast_access(out_access: Sequence[Affine], sizes: Sequence[int]) -> tuple[Affine, ...]:
    """Access of an operand of shape ``sizes`` inside a kernel over the output: dimensions
    right-aligned, size-1 dimensions read at 0."""
    offset = len(out_access) - len(sizes)
    return tuple(Affine() if s == 1 else out_access[offset + k] for k, s in enumerate(sizes))


def _typed(value: int, dtype: DType) -> Scalar:
    if dtype is DType.BOOL:
        return bool(value)
    return float(value) if dtype.is_float else int(value)


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _kernel_tags(*names: str) -> frozenset[str]:
    return frozenset((T.KERNEL, *names))


def _check_plan(plan: Plan, c: A.Contraction) -> None:
    """Every range, coefficient and constant of a contraction's kernel fits 64 bits."""
    affines = [*plan.constraints, *plan.out_access, *(a for acc in plan.in_accesses for a in acc)]
    values = [r for _, r in plan.idxs]
    values += [a.const for a in affines] + [k for a in affines for _, k in a.terms]
    if not all(fits_int(v) for v in values):
        raise TileLimitError("the index ranges or accesses of this contraction overflow "
                             "64-bit integers", c.out.pos.line, c.out.pos.column)


class _Sizes(Mapping[str, int]):
    """The names a size or index expression may use: dimensions and integer constants
    (``dims``), the rank-0 integer inputs whose value was given (``values``) and the integer
    constants computed from those (``derived``: name -> (value, the inputs it reads)).
    Reading one of the latter two records the inputs in ``used``."""

    def __init__(self, dims: dict[str, int], values: dict[str, int],
                 derived: dict[str, tuple[int, tuple[str, ...]]] | None = None) -> None:
        self.dims, self.values = dims, values
        self.derived = {} if derived is None else derived
        self.used: dict[str, int] = {}

    def __getitem__(self, name: str) -> int:
        if name in self.dims:
            return self.dims[name]
        if name in self.derived:
            value, reads = self.derived[name]
            for r in reads:
                self.used[r] = self.values[r]
            return value
        value = self.values[name]
        self.used[name] = value
        return value

    def __contains__(self, name: object) -> bool:
        return name in self.dims or name in self.values or name in self.derived

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter({**self.values, **self.derived, **self.dims})

    def __len__(self) -> int:
        return len({**self.values, **self.derived, **self.dims})


def _names(root: A.Expr) -> set[str]:
    """The upper-case names an expression reads."""
    found: set[str] = set()
    stack: list[A.Expr | A.Poly] = [root]
    while stack:
        node = stack.pop()
        if isinstance(node, A.Name):
            found.add(node.name)
        stack.extend(child for child, _ in A.children(node))
    return found


def _substitute(root: A.Expr, values: Mapping[str, int]) -> A.Expr:
    """``root`` with every name of ``values`` replaced by its integer literal (an iterative
    rebuild: any depth; unchanged subtrees are kept)."""
    work: list[tuple[A.Expr, bool]] = [(root, False)]
    done: list[A.Expr] = []
    while work:
        node, entered = work.pop()
        kids = [child for child, _ in A.children(node)]
        if not entered and kids:
            work.append((node, True))
            work.extend((k, False) for k in reversed(kids))  # type: ignore[misc]
            continue
        if isinstance(node, A.Name) and node.name in values:
            done.append(A.Num(values[node.name], node.pos))
            continue
        if not kids:
            done.append(node)
            continue
        new = done[len(done) - len(kids):]
        del done[len(done) - len(kids):]
        if all(a is b for a, b in zip(new, kids)):
            done.append(node)
        elif isinstance(node, A.Call):
            done.append(dataclasses.replace(node, args=tuple(new)))
        elif isinstance(node, A.Unary):
            done.append(dataclasses.replace(node, x=new[0]))
        elif isinstance(node, A.Binary):
            done.append(dataclasses.replace(node, a=new[0], b=new[1]))
        else:  # Ternary
            done.append(dataclasses.replace(node, cond=new[0], a=new[1], b=new[2]))
    (result,) = done
    return result


def _attribute_tags(attrs: Sequence[A.Attribute]) -> tuple[str, ...]:
    """Kernel tags for statement attributes: ``[[name]]`` -> ``attr_name``,
    ``[[name(a, b)]]`` -> ``attr_name=a:b`` (characters a tag cannot hold become ``_``; the
    prefix keeps them apart from the tags passes and back ends read)."""
    tags = []
    for a in attrs:
        tag = "attr_" + _TAG_UNSAFE.sub("_", a.name)
        if a.params:
            tag += "=" + ":".join(_TAG_UNSAFE.sub("_", p) for p in a.params)
        tags.append(tag)
    return tuple(tags)


class _Fractions:
    """PlaidML's fractional index expressions (``I[(x + k - P) / S]``, after its ``defract``):
    a point of the index space contributes only where each division is exact.

    Each distinct division ``a / d`` becomes a fresh index ``q`` (``q0``, ``q1``, ... that no
    index of the contraction uses) standing for the exact quotient, so ``a == d * q``. That
    equality is then solved for an index ``v`` of ``a`` with coefficient +-1 (preferably one
    the output does not use): ``v`` is replaced by ``+-(d * q - (a - +-v))`` everywhere and
    disappears, which maps the points where the division is exact one to one onto the new
    index space (no point is visited in vain). When ``a`` has no such index, ``q`` stays with
    the constraint ``0 <= a - d * q < 1``. Range inference then treats ``q`` as any index."""

    def __init__(self, taken: set[str]) -> None:
        self.taken = taken
        self.found: list[tuple[str, Affine, int, A.Pos]] = []
        self.names: dict[tuple[Affine, int], str] = {}

    def add(self, a: Affine, d: int, pos: A.Pos) -> Affine:
        """The index standing for ``a / d`` (``d`` > 0); the same one for the same division."""
        if d == 1:
            return a
        key = (a, d)
        if key not in self.names:
            k = len(self.found)
            while f"q{k}" in self.taken:
                k += 1
            name = f"q{k}"
            self.taken.add(name)
            self.names[key] = name
            self.found.append((name, a, d, pos))
        return Affine.of(self.names[key])

    def defract(self, order: list[str], first_use: dict[str, A.Pos],
                out: tuple[Affine, ...], ins: list[tuple[Affine, ...]],
                user: list[tuple[Affine, int]]
                ) -> tuple[list[str], tuple[Affine, ...], list[tuple[Affine, ...]],
                           list[tuple[Affine, int]]]:
        """The index order, accesses and user constraints with the divisions resolved."""
        order = list(order)
        subst: dict[str, Affine] = {}
        extra: list[tuple[Affine, int]] = []
        out_names = {n for a in out for n, _ in a.terms}
        for q, a, d, pos in self.found:
            a = a.substitute(subst)
            first_use[q] = pos
            unit = [n for n, k in a.terms if abs(k) == 1 and n not in self.names.values()]
            unit = unit or [n for n, k in a.terms if abs(k) == 1]
            pick = [n for n in unit if n not in out_names] or unit
            if not pick:
                extra.append((a - d * Affine.of(q), 1))
                order.append(q)
                continue
            v = max(pick, key=lambda n: order.index(n) if n in order else -1)
            sign = a.coeff(v)
            value = (d * Affine.of(q) - (a - sign * Affine.of(v))) * sign
            subst = {n: e.substitute({v: value}) for n, e in subst.items()}
            subst[v] = value
            if v in order:
                order[order.index(v)] = q
            else:
                order.append(q)
        order = [n for n in order if n not in subst]

        def fix(access: tuple[Affine, ...]) -> tuple[Affine, ...]:
            return tuple(a.substitute(subst) for a in access)

        return (order, fix(out), [fix(a) for a in ins],
                [(p.substitute(subst), b) for p, b in [*user, *extra]])


# the lowering --------------------------------------------------------------------------------

class _Lowering:
    def __init__(self, fn: A.Function, inputs: Mapping[str, object]) -> None:
        self.fn = fn
        self.dims, self.tensors, values = bind_inputs(fn, inputs)
        self.sizes = _Sizes(self.dims, values)  # what size and index expressions may name
        self.consts: dict[str, tuple[A.Assign, TConst]] = {}  # integer constant statements
        self.stmt_tags: tuple[str, ...] = ()  # of the statement being lowered
        self.outputs = self._check_outputs()
        self.targets = {s.out.name if isinstance(s, A.Contraction) else s.name
                        for s in fn.stmts}
        self.tile_names = set(self.tensors) | self.targets
        self.assigned: dict[str, A.Pos] = {}
        self.kernels: list[Block] = []
        self.total_bytes = 0  # of every buffer so far: inputs, outputs, temporaries
        for p in fn.params:
            self._count_bytes(self.tensors[p.name], p.pos)

    def run(self) -> Block:
        for stmt in self.fn.stmts:
            self.stmt_tags = _attribute_tags(stmt.attrs)
            if isinstance(stmt, A.Contraction):
                self._contraction(stmt)
            else:
                self._assignment(stmt)
        for out in self.fn.outputs:
            if out.name not in self.assigned:
                raise TileError(f"output {out.name} is never assigned", out.pos.line,
                                out.pos.column)
        return self._program()

    # names --------------------------------------------------------------------------------
    def _check_outputs(self) -> list[str]:
        names: list[str] = []
        for out in self.fn.outputs:
            if out.name in names:
                raise TileError(f"output {out.name} is listed twice", out.pos.line,
                                out.pos.column)
            if out.name in self.tensors:
                raise TileError(f"output {out.name} is also an input; return a copy instead "
                                f"(e.g. O = {out.name};)", out.pos.line, out.pos.column)
            if out.name in self.dims:
                raise TileError(f"output {out.name} is a dimension name", out.pos.line,
                                out.pos.column)
            names.append(out.name)
        return names

    def _lookup(self, n: A.Name) -> TensorInfo | None:
        """The tensor called ``n`` (None for a dimension name or an integer constant, which
        are integers)."""
        if n.name in self.consts:
            return None
        if n.name in self.tensors:
            return self.tensors[n.name]
        if n.name in self.dims:
            return None
        if n.name in self.targets:
            raise TileError(f"tensor {n.name} is used before it is assigned", n.pos.line,
                            n.pos.column)
        raise TileError(f"unknown name {n.name}", n.pos.line, n.pos.column)

    def _lookup_size(self, n: A.Name) -> TensorInfo | None:
        """``_lookup`` where a size is expected: an integer input with a given value, or a
        constant computed from such inputs, is its value (None), not a tensor."""
        if n.name in self.sizes.values or n.name in self.sizes.derived:
            return None
        return self._lookup(n)

    def _tensor(self, name: str, pos: A.Pos) -> TensorInfo:
        if name in self.consts:
            return self._materialise(name)
        info = self._lookup(A.Name(name, pos))
        if info is None:
            raise TileError(f"{name} is a dimension, not a tensor", pos.line, pos.column)
        return info

    def _check_target(self, name: str, pos: A.Pos) -> None:
        if name in self.assigned:
            first = self.assigned[name]
            raise TileError(f"{name} is assigned twice (first at line {first.line})",
                            pos.line, pos.column)
        if name in self.tensors:
            raise TileError(f"cannot assign to input {name}", pos.line, pos.column)
        if name in self.dims:
            raise TileError(f"{name} is a dimension name; choose another tensor name",
                            pos.line, pos.column)

    def _define(self, name: str, dtype: DType, sizes: tuple[int, ...], pos: A.Pos) -> TensorInfo:
        role = "out" if name in self.outputs else "tmp"
        info = TensorInfo(name, dtype, sizes, role, pos)
        check_tensor(name, sizes, dtype, pos)
        self._count_bytes(info, pos)
        self.tensors[name] = info
        self.assigned[name] = pos
        return info

    def _count_bytes(self, info: TensorInfo, pos: A.Pos) -> None:
        """Add a buffer to the program's total; a located TileLimitError past the limit."""
        self.total_bytes += tensor_bytes(info.sizes, info.dtype)
        try:
            check_bytes(self.total_bytes, f"the buffers of the program (inputs, outputs and "
                                          f"temporaries, up to {info.name})")
        except LimitError as e:
            raise TileLimitError(str(e), pos.line, pos.column) from None

    def _fresh_ref(self, name: str, used: set[str]) -> str:
        """``name`` for a kernel's first view of it, else ``name_2``, ``name_3``, ... that no
        view of the kernel (``used``) and no Tile tensor takes."""
        if name not in used:
            return name
        return fresh_name(name, used | self.tile_names, start=2, bare=False)

    def _add_kernel(self, text: str, tags: frozenset[str], idxs: Sequence[Index] = (),
                    constraints: Sequence[Affine] = (), refs: Sequence[Refinement] = (),
                    stmts: Sequence[Statement] = ()) -> None:
        self.kernels.append(Block(
            name=f"kernel_{len(self.kernels)}", comments=text, idxs=tuple(idxs),
            constraints=tuple(constraints), refs=tuple(refs), stmts=tuple(stmts),
            tags=tags | frozenset(self.stmt_tags)))

    # contractions -------------------------------------------------------------------------
    def _contraction(self, c: A.Contraction) -> None:
        out_name = c.out.name
        self._check_target(out_name, c.out.pos)
        if c.sizes is None and c.out.idxs:
            raise TileError(f"contraction output needs its sizes, as in {out_name}[i, j : N, M]",
                            c.out.pos.line, c.out.pos.column)
        sizes = tuple(self._size(p, "an output size") for p in (c.sizes or ()))
        if len(sizes) != len(c.out.idxs):
            raise ShapeError(f"{out_name} has {_count(len(c.out.idxs), 'index', 'indexes')} but "
                             f"{_count(len(sizes), 'size', 'sizes')}",
                             c.out.pos.line, c.out.pos.column)
        ins = [self._tensor(r.name, r.pos) for r in c.inputs]
        for r, info in zip(c.inputs, ins):
            if len(r.idxs) != info.rank:
                count = _count(len(r.idxs), "index", "indexes")
                raise ShapeError(f"{r.name} has rank {info.rank} but is indexed with {count}",
                                 r.pos.line, r.pos.column)
        dtype = self._contraction_dtype(c, ins)
        check_tensor(out_name, sizes, dtype, c.out.pos)  # before the sizes reach isl
        default = self._default(c, sizes)
        order, first_use = self._index_order(c)
        fractions = _Fractions(set(order))

        def affines(ref: A.TensorRef) -> tuple[Affine, ...]:
            return tuple(to_affine(p, self.sizes, self.tensors, fractions.add, self.targets)
                         for p in ref.idxs)

        out_access = affines(c.out)
        in_accesses = [affines(r) for r in c.inputs]
        user = [(to_affine(k.poly, self.sizes, self.tensors, fractions.add, self.targets),
                 self._size(k.bound, "a constraint bound")) for k in c.constraints]
        if fractions.found:
            order, out_access, in_accesses, user = fractions.defract(
                order, first_use, out_access, in_accesses, user)
        plan = infer_ranges(order, out_access, sizes,
                            [(a, info.sizes) for a, info in zip(in_accesses, ins)],
                            user, first_use)
        _check_plan(plan, c)
        out = self._define(out_name, dtype, sizes, c.out.pos)
        if out.elem_count == 0:
            return
        agg = _AGG[c.agg]
        self._init_kernels(c, out, agg, plan, default)
        if not plan.empty:
            self._contraction_kernel(c, out, ins, agg, plan)

    def _size(self, p: A.Poly, what: str) -> int:
        value = eval_size(p, self.sizes, self.tensors, what, self.targets)
        if value < 0:
            pos = p.pos
            raise ShapeError(f"{what} evaluates to {value}", pos.line, pos.column)
        return value

    @staticmethod
    def _contraction_dtype(c: A.Contraction, ins: Sequence[TensorInfo]) -> DType:
        if c.comb is None:
            dtype = ins[0].dtype
        elif c.comb == "==":
            dtype = DType.BOOL
        elif c.comb == "?":
            dtype = ins[2].dtype
        else:
            dtype = promote(ins[0].dtype, ins[1].dtype)
        if dtype is DType.BOOL and c.agg in "+*":
            raise TypeError_(f"aggregation '{c.agg}' of bool values; convert with as_int first",
                             c.out.pos.line, c.out.pos.column)
        return dtype

    def _default(self, c: A.Contraction, sizes: tuple[int, ...]) -> TensorInfo | None:
        if c.default is None:
            return None
        info = self._tensor(c.default.name, c.default.pos)
        if info.sizes != sizes:
            raise ShapeError(f"default {info.name} has shape {info.sizes} but {c.out.name} has "
                             f"shape {sizes}", c.default.pos.line, c.default.pos.column)
        return info

    @staticmethod
    def _index_order(c: A.Contraction) -> tuple[list[str], dict[str, A.Pos]]:
        """Index names in first-use order (output, inputs, constraints), each with its first
        use. An index used only in the output ranges over what the output's size (and the
        constraints) allow, as in PlaidML."""
        first_use: dict[str, A.Pos] = {}
        polys: list[A.Poly] = [*c.out.idxs, *(p for r in c.inputs for p in r.idxs),
                               *(k.poly for k in c.constraints)]
        for p in polys:
            for n in poly_names(p):
                if n.is_index:
                    first_use.setdefault(n.name, n.pos)
        return list(first_use), first_use

    def _init_kernels(self, c: A.Contraction, out: TensorInfo, agg: AggOp, plan: Plan,
                      default: TensorInfo | None) -> None:
        idxs, access = _out_space(out.sizes)
        if default is not None:
            src = _broadcast_access(access, default.sizes)
            self._add_kernel(c.text, _kernel_tags(T.COPY), idxs, refs=(
                Refinement(RefDir.IN, default.name, default.name, src, _element_shape(default)),
                Refinement(RefDir.OUT, out.name, out.name, access, _element_shape(out)),
            ), stmts=(Load(default.name, f"${default.name}"), Store(f"${default.name}", out.name)))
            return
        identity = agg_identity(agg, out.dtype)
        if plan.covers_output:
            self._fill(c.text, out, identity, "$identity", T.INIT)
            return
        self._fill(c.text, out, _typed(0, out.dtype), "$zero", T.ZERO)
        if identity == 0 or plan.empty:
            return
        # the identity where the contraction writes; min/max force it over the zero
        force = AggOp.MIN if identity < 0 else AggOp.MAX
        self._add_kernel(
            c.text, _kernel_tags(T.INIT), [Index(n, r) for n, r in plan.idxs], plan.constraints,
            refs=(Refinement(RefDir.OUT, out.name, out.name, plan.out_access,
                             _element_shape(out), agg_op=force),),
            stmts=(Constant("$identity", identity, out.dtype), Store("$identity", out.name)))

    def _fill(self, text: str, out: TensorInfo, value: Scalar, scalar: str, tag: str) -> None:
        idxs, access = _out_space(out.sizes)
        self._add_kernel(text, _kernel_tags(tag), idxs, refs=(
            Refinement(RefDir.OUT, out.name, out.name, access, _element_shape(out)),),
            stmts=(Constant(scalar, value, out.dtype), Store(scalar, out.name)))

    def _contraction_kernel(self, c: A.Contraction, out: TensorInfo,
                            ins: Sequence[TensorInfo], agg: AggOp, plan: Plan) -> None:
        refs: list[Refinement] = []
        stmts: list[Statement] = []
        local_of: dict[tuple[str, tuple[Affine, ...]], str] = {}
        used: set[str] = {out.name}
        scalars: list[str] = []
        for info, access in zip(ins, plan.in_accesses):
            key = (info.name, access)
            if key not in local_of:
                local = self._fresh_ref(info.name, used)
                used.add(local)
                local_of[key] = local
                refs.append(Refinement(RefDir.IN, info.name, local, access, _element_shape(info),
                                       tags=frozenset({T.CONTRACTION})))
                stmts.append(Load(local, f"${local}"))
            scalars.append(f"${local_of[key]}")
        refs.append(Refinement(RefDir.OUT, out.name, out.name, plan.out_access,
                               _element_shape(out), agg_op=agg))
        result = f"${out.name}"
        agg_tag = T.agg_op_tag(agg.value)
        if c.comb is None:
            result = scalars[0]
            comb_tag = f"{agg_tag}_no_comb_op"
        elif c.comb == "?":
            stmts += [Intrinsic("cmp_eq", tuple(scalars[:2]), ("$eq",), DType.BOOL),
                      Constant("$zero", _typed(0, out.dtype), out.dtype),
                      Intrinsic("cond", ("$eq", scalars[2], "$zero"), (result,), out.dtype)]
            comb_tag = T.comb_op_tag("cond")
        else:
            stmts.append(Intrinsic(_COMB[c.comb], tuple(scalars), (result,), out.dtype))
            comb_tag = T.comb_op_tag(_COMB_TAG[c.comb])
        stmts.append(Store(result, out.name))
        self._add_kernel(c.text, _kernel_tags(T.CONTRACTION, agg_tag, comb_tag),
                         [Index(n, r) for n, r in plan.idxs], plan.constraints, refs, stmts)

    # elementwise statements and specials --------------------------------------------------
    def _assignment(self, s: A.Assign) -> None:
        self._check_target(s.name, s.pos)
        names = _names(s.expr)
        if self.consts and not names.isdisjoint(self.consts):
            # constants are integer literals in elementwise code, literal positions included
            # (a cast's width, index()'s dimension)
            s = dataclasses.replace(s, expr=_substitute(s.expr, {
                n: self.dims[n] for n in names if n in self.consts}))
        if isinstance(s.expr, A.Call) and (s.expr.fn in _BIND_FNS
                                           or s.expr.fn.startswith("assert_")):
            node: TNode | TSpecial = self._bind_time_call(s.expr)
        elif isinstance(s.expr, A.Call) and s.expr.fn == "reshape":
            # its sizes may name integer inputs whose value is given (PlaidML's Reshape)
            node = check_statement(s.expr, self._lookup_size, self.sizes)  # type: ignore[arg-type]
        else:
            node = check_statement(s.expr, self._lookup, self.dims)
        if isinstance(node, TConst) and node.dtype.is_int:
            # an integer constant: a dimension-like name, a tensor only where one is needed
            self.dims[s.name] = int(node.value)
            self.consts[s.name] = (s, node)
            self.assigned[s.name] = s.pos
            if s.name in self.outputs:
                self._materialise(s.name)
            return
        if not names.isdisjoint(self.sizes.values) or not names.isdisjoint(self.sizes.derived):
            self._derived_constant(s)
        self._emit_assignment(s, node)

    def _derived_constant(self, s: A.Assign) -> None:
        """A statement over integer inputs with given values (``Pad = (D - 1) / 2``) that
        folds to an integer when they are read as their values: its value is usable as a
        size (specialising the program on those inputs), while elementwise code reads the
        tensor the statement writes at run time."""
        probe = _Sizes(self.dims, self.sizes.values, self.sizes.derived)
        try:
            node = check_statement(s.expr, self._lookup_size, probe)  # type: ignore[arg-type]
        except StripeError:
            return  # not a constant; the statement's own typing reports real errors
        if isinstance(node, TConst) and node.dtype.is_int:
            self.sizes.derived[s.name] = (int(node.value), tuple(probe.used))

    def _bind_time_call(self, e: A.Call) -> TConst:
        """PlaidML's bind-time functions of integer constants: ``broadcast(a, b)`` (the
        broadcast of two sizes), ``match(a, b)`` (two sizes that must be equal) and
        ``assert_<what>(c)`` (a located TileError when ``c`` is 0; its value otherwise)."""
        args = [self._const_arg(a, e) for a in e.args]
        want = 1 if e.fn.startswith("assert_") else 2
        if len(args) != want:
            raise TileError(f"{e.fn} takes {want} argument{'s' if want > 1 else ''}, got "
                            f"{len(args)}", e.pos.line, e.pos.column)
        if e.fn.startswith("assert_"):
            if args[0] == 0:
                raise TileError(f"assertion {e.fn} failed", e.pos.line, e.pos.column)
            value = args[0]
        elif e.fn == "match" or 1 in args:
            if e.fn == "match" and args[0] != args[1]:
                raise ShapeError(f"match: sizes {args[0]} and {args[1]} differ", e.pos.line,
                                 e.pos.column)
            value = args[1] if args[0] == 1 else args[0]
        elif args[0] != args[1]:
            raise ShapeError(f"broadcast: sizes {args[0]} and {args[1]} do not broadcast",
                             e.pos.line, e.pos.column)
        else:
            value = args[0]
        return TConst(value, DType.INT32 if -2**31 <= value < 2**31 else DType.INT64)

    def _const_arg(self, a: A.Expr, call: A.Call) -> int:
        node = check_statement(a, self._lookup, self.dims)
        if not isinstance(node, TConst) or not (node.dtype.is_int or node.dtype is DType.BOOL):
            raise TileError(f"the arguments of {call.fn} must be integer constant expressions "
                            "(literals, dimensions and integer constants)", a.pos.line,
                            a.pos.column)
        return int(node.value)

    def _materialise(self, name: str) -> TensorInfo:
        """The rank-0 tensor of the integer constant ``name``, emitted on first need (an
        output, a contraction operand, a ``default``)."""
        if name not in self.tensors:
            s, node = self.consts[name]
            saved, self.stmt_tags = self.stmt_tags, _attribute_tags(s.attrs)
            self._emit_assignment(s, node)
            self.stmt_tags = saved
        return self.tensors[name]

    def _emit_assignment(self, s: A.Assign, node: TNode | TSpecial) -> None:
        out = self._define(s.name, node.dtype, tuple(node.shape), s.pos)
        if out.elem_count == 0:
            return
        if isinstance(node, TSpecial):
            self._special_kernel(s, node, out)
        else:
            _Eltwise(self, s, node, out).emit()

    def _special_kernel(self, s: A.Assign, node: TSpecial, out: TensorInfo) -> None:
        if node.name == "gather" and self.tensors[node.inputs[0]].sizes[0] == 0:
            raise ShapeError(f"gather from {node.inputs[0]}, which is empty", s.pos.line,
                             s.pos.column)
        refs = []
        for name in dict.fromkeys(node.inputs):
            info = self.tensors[name]
            refs.append(Refinement(RefDir.IN, name, name, (Affine(),) * info.rank,
                                   _full_shape(info)))
        refs.append(Refinement(RefDir.OUT, out.name, out.name, (Affine(),) * out.rank,
                               _full_shape(out)))
        self._add_kernel(s.text, _kernel_tags(T.SPECIAL), refs=refs,
                         stmts=(Special(node.name, node.inputs, (out.name,)),))

    # the program --------------------------------------------------------------------------
    def _program(self) -> Block:
        reads: set[str] = set()
        writes: set[str] = set()
        for k in self.kernels:
            for r in k.refs:
                (reads if r.dir.reads else writes).add(r.from_)
        allocs, views = [], []
        for info in self._buffers():
            zero = (Affine(),) * info.rank
            shape = _full_shape(info)
            if info.role == "in":
                alloc_dir, tag, view_dir = RefDir.IN, T.USER, RefDir.IN
            else:
                alloc_dir = RefDir.OUT if info.role == "out" else RefDir.NONE
                tag = T.USER if info.role == "out" else T.TMP
                view_dir = RefDir.INOUT if info.name in reads else RefDir.OUT
            allocs.append(Refinement(alloc_dir, "", info.name, zero, shape,
                                     tags=frozenset({tag})))
            views.append(Refinement(view_dir, info.name, info.name, zero, shape))
        main = Block(name=T.MAIN, refs=tuple(views), stmts=tuple(self.kernels),
                     tags=frozenset({T.MAIN}))
        return Block(name=T.PROGRAM, refs=tuple(allocs), stmts=(main,),
                     tags=frozenset({T.PROGRAM}))

    def _buffers(self) -> list[TensorInfo]:
        """Inputs and outputs in signature order, then temporaries in assignment order."""
        ins = [self.tensors[p.name] for p in self.fn.params]
        outs = [self.tensors[name] for name in self.outputs]
        tmps = [self.tensors[name] for name in self.assigned
                if name not in self.outputs and name in self.tensors]
        return ins + outs + tmps


class _Eltwise:
    """One kernel computing an elementwise statement's typed tree at every output point."""

    def __init__(self, low: _Lowering, s: A.Assign, node: TNode, out: TensorInfo) -> None:
        self.low, self.s, self.node, self.out = low, s, node, out
        self.idxs, self.access = _out_space(out.sizes)
        self.refs: list[Refinement] = []
        self.loads: list[Statement] = []  # all loads first, then the computation
        self.stmts: list[Statement] = []
        self.memo: dict[object, str] = {}
        self.counters = {"t": 0, "c": 0, "x": 0}

    def _fresh(self, prefix: str) -> str:
        k = self.counters[prefix]
        self.counters[prefix] = k + 1
        return f"${prefix}{k}"

    def emit(self) -> None:
        result = self._scalar(self.node, top=True)
        self.stmts.append(Store(result, self.out.name))
        self.refs.append(Refinement(RefDir.OUT, self.out.name, self.out.name, self.access,
                                    _element_shape(self.out)))
        node = self.node
        if isinstance(node, TOp):
            top = node.op
        elif isinstance(node, TIndex):
            top = "index"
        else:
            top = "assign"
        extra = (T.COPY,) if isinstance(node, TTensor) else ()
        self.low._add_kernel(self.s.text, _kernel_tags(T.ELTWISE, T.eltwise_tag(top), *extra),
                             self.idxs, refs=self.refs, stmts=self.loads + self.stmts)

    def _scalar(self, root: TNode, top: bool = False) -> str:
        """The scalar holding ``root``'s value, emitting the statements that compute it (an
        iterative post-order walk; equal subtrees share one scalar)."""
        work: list[tuple[TNode, bool]] = [(root, False)]
        names: list[str] = []  # the scalars of the operands computed so far
        while work:
            node, entered = work.pop()
            if isinstance(node, TOp) and not entered:
                work.append((node, True))
                work.extend((a, False) for a in reversed(node.args))
                continue
            args: tuple[str, ...] = ()
            if isinstance(node, TOp):
                args = tuple(names[len(names) - len(node.args):])
                del names[len(names) - len(node.args):]
            names.append(self._emit(node, args, top and node is root))
        return names[0]

    def _emit(self, node: TNode, args: tuple[str, ...], top: bool) -> str:
        """The scalar of one node whose operands are the scalars ``args``."""
        key = _memo_key(node, args)
        if key in self.memo:
            return self.memo[key]
        if isinstance(node, TTensor):
            info = self.low.tensors[node.name]
            access = _broadcast_access(self.access, info.sizes)
            self.refs.append(Refinement(RefDir.IN, info.name, info.name, access,
                                        _element_shape(info)))
            name = f"${info.name}"
            self.loads.append(Load(info.name, name))
        elif isinstance(node, TConst):
            name = f"${self.out.name}" if top else self._fresh("c")
            self.stmts.append(Constant(name, node.value, node.dtype))
        elif isinstance(node, TIndex):
            name = f"${self.out.name}" if top else self._fresh("x")
            self.stmts.append(LoadIndex(_broadcast_access(self.access, node.shape)[node.dim],
                                        name))
        else:
            name = f"${self.out.name}" if top else self._fresh("t")
            self.stmts.append(Intrinsic(node.op, args, (name,), node.dtype))
        self.memo[key] = name
        return name


def _memo_key(node: TNode, args: tuple[str, ...]) -> object:
    """A flat key equal for equal nodes: an operation is known by its operands' scalars, so
    no key holds a subtree; a constant by its value's type and bits (``0.0`` and ``-0.0``
    differ, and so do ``1``, ``1.0`` and ``True``)."""
    if isinstance(node, TConst):
        value = node.value
        bits = float(value).hex() if isinstance(value, float) else value
        return ("const", type(value), bits, node.dtype)
    if isinstance(node, TOp):
        return ("op", node.op, args, node.dtype, node.shape)
    return node
