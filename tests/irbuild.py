"""Small helpers to build Stripe IR by hand in tests (independent of the Tile front end)."""

from __future__ import annotations

from stripe.affine import Affine
from stripe.dtypes import DType
from stripe.ir import (
    AggOp,
    Block,
    Constant,
    Index,
    Intrinsic,
    Load,
    RefDir,
    Refinement,
    Store,
    TensorShape,
)

F32 = DType.FLOAT32


def aff(x: str | int) -> Affine:
    return Affine.of(x)


def alloc(dir_: RefDir, name: str, sizes: tuple[int, ...], tag: str,
          dtype: DType = F32) -> Refinement:
    return Refinement(dir_, "", name, tuple(aff(0) for _ in sizes),
                      TensorShape.packed(dtype, sizes), tags=frozenset({tag}))


def whole(dir_: RefDir, name: str, sizes: tuple[int, ...], dtype: DType = F32) -> Refinement:
    return Refinement(dir_, name, name, tuple(aff(0) for _ in sizes),
                      TensorShape.packed(dtype, sizes))


def element(dir_: RefDir, name: str, access: list, parent_sizes: tuple[int, ...],
            agg: AggOp = AggOp.ASSIGN, dtype: DType = F32) -> Refinement:
    shape = TensorShape.packed(dtype, parent_sizes).with_sizes([1] * len(parent_sizes))
    return Refinement(dir_, name, name, tuple(aff(a) if not isinstance(a, Affine) else a
                                              for a in access), shape, agg)


def program(inputs: dict, outputs: dict, kernels: list[Block], dtype: DType = F32) -> Block:
    """A #program block with user buffers and a main block holding ``kernels``."""
    refs = [alloc(RefDir.IN, n, s, "user", dtype) for n, s in inputs.items()]
    refs += [alloc(RefDir.OUT, n, s, "user", dtype) for n, s in outputs.items()]
    views = [whole(RefDir.IN, n, s, dtype) for n, s in inputs.items()]
    views += [whole(RefDir.OUT, n, s, dtype) for n, s in outputs.items()]
    main = Block("main", refs=tuple(views), stmts=tuple(kernels), tags=frozenset({"main"}))
    return Block("program", refs=tuple(refs), stmts=(main,), tags=frozenset({"program"}))


def matmul(m: int, k: int, n: int) -> Block:
    zero = Block("kernel_0", idxs=(Index("m", m), Index("n", n)),
                 refs=(element(RefDir.OUT, "C", ["m", "n"], (m, n)),),
                 stmts=(Constant("$z", 0.0, F32), Store("$z", "C")),
                 tags=frozenset({"kernel", "zero"}))
    mm = Block("kernel_1", idxs=(Index("k", k), Index("m", m), Index("n", n)),
               refs=(element(RefDir.IN, "A", ["m", "k"], (m, k)),
                     element(RefDir.IN, "B", ["k", "n"], (k, n)),
                     element(RefDir.OUT, "C", ["m", "n"], (m, n), AggOp.ADD)),
               stmts=(Load("A", "$A"), Load("B", "$B"),
                      Intrinsic("mul", ("$A", "$B"), ("$C",), F32), Store("$C", "C")),
               tags=frozenset({"kernel", "contraction"}))
    return program({"A": (m, k), "B": (k, n)}, {"C": (m, n)}, [zero, mm])
