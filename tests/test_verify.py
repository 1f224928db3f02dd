"""The IR verifier: hand-built valid programs pass; each kind of broken IR fails with a
message that names the block path and the problem."""

from __future__ import annotations

import dataclasses
import time

import pytest
from irbuild import F32, alloc, element, matmul, program, whole

from stripe.affine import Affine
from stripe.dtypes import DType
from stripe.errors import VerifyError
from stripe.ir import (
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
    Store,
    TensorShape,
)
from stripe.verify import verify

A = Affine.of


def view(dir_: RefDir, name: str, access: list, sizes: tuple[int, ...],
         parent_sizes: tuple[int, ...], agg: AggOp = AggOp.ASSIGN) -> Refinement:
    """A view of ``name`` (same name in the parent) at ``access`` with interior ``sizes``."""
    shape = TensorShape.packed(F32, parent_sizes).with_sizes(sizes)
    return Refinement(dir_, name, name, tuple(A(a) for a in access), shape, agg)


def mac_body() -> tuple:
    """``C += A * B`` on element 0 of views A, B, C."""
    return (Load("A", "$a"), Load("B", "$b"), Intrinsic("mul", ("$a", "$b"), ("$c",), F32),
            Store("$c", "C"))


def tiled_matmul(m: int = 5, k: int = 3, n: int = 7, tm: int = 2, tn: int = 3) -> Block:
    """C[m, n] += A[m, k] * B[k, n], tiled tm x tn with uneven splits: the inner block gets
    the tile origins passed in (``M = tm*m``) and a constraint removes the overflow."""
    inner = Block(
        "inner",
        idxs=(Index("M", 1, tm * A("m")), Index("N", 1, tn * A("n")), Index("i", tm),
              Index("j", tn), Index("k", k)),
        constraints=((m - 1) - A("M") - A("i"), (n - 1) - A("N") - A("j")),
        refs=(element(RefDir.IN, "A", ["i", "k"], (m, k)),
              element(RefDir.IN, "B", ["k", "j"], (k, n)),
              element(RefDir.OUT, "C", ["i", "j"], (m, n), AggOp.ADD)),
        stmts=mac_body())
    outer = Block(
        "kernel_0", idxs=(Index("m", -(-m // tm)), Index("n", -(-n // tn))),
        refs=(view(RefDir.IN, "A", [tm * A("m"), 0], (tm, k), (m, k)),
              view(RefDir.IN, "B", [0, tn * A("n")], (k, tn), (k, n)),
              view(RefDir.OUT, "C", [tm * A("m"), tn * A("n")], (tm, tn), (m, n), AggOp.ADD)),
        stmts=(inner,), tags=frozenset({"kernel"}))
    return program({"A": (m, k), "B": (k, n)}, {"C": (m, n)}, [outer])


def conv_kernel(x: int = 6, y: int = 7) -> Block:
    """An untiled 'same' 3x3 convolution O[x, y] += I[x + i - 1, y + j - 1] * F[i, j]."""
    return Block(
        "kernel_0", idxs=(Index("x", x), Index("y", y), Index("i", 3), Index("j", 3)),
        constraints=(A("x") + A("i") - 1, (x - 1) - A("x") - A("i") + 1,
                     A("y") + A("j") - 1, (y - 1) - A("y") - A("j") + 1),
        refs=(element(RefDir.IN, "A", [A("x") + A("i") - 1, A("y") + A("j") - 1], (x, y)),
              element(RefDir.IN, "B", ["i", "j"], (3, 3)),
              element(RefDir.OUT, "C", ["x", "y"], (x, y), AggOp.ADD)),
        stmts=mac_body(), tags=frozenset({"kernel"}))


def conv_program(kernel: Block, x: int = 6, y: int = 7) -> Block:
    return program({"A": (x, y), "B": (3, 3)}, {"C": (x, y)}, [kernel])


def tiled_conv(x: int = 6, y: int = 7, t: int = 4, *, halo_constraints: bool = True,
               overflow_constraints: bool = True) -> Block:
    """The convolution of :func:`conv_kernel` tiled t x t, as in the paper's Figure 5b: the
    tile's input view starts one element before the tile (``A[t*x - 1, t*y - 1]``, size
    ``t + 2``) and overflows at the borders; constraints on the passed-in tile origins keep
    the actual accesses inside."""
    X, Y = A("X"), A("Y")  # noqa: N806 - tile origins, named as passed in
    halo = (X + A("x") + A("i") - 1, x - X - A("x") - A("i"),
            Y + A("y") + A("j") - 1, y - Y - A("y") - A("j"))
    overflow = ((x - 1) - X - A("x"), (y - 1) - Y - A("y"))
    inner = Block(
        "inner",
        idxs=(Index("X", 1, t * A("x")), Index("Y", 1, t * A("y")), Index("x", t),
              Index("y", t), Index("i", 3), Index("j", 3)),
        constraints=(halo if halo_constraints else ()) + (overflow if overflow_constraints
                                                          else ()),
        refs=(element(RefDir.IN, "A", [A("x") + A("i"), A("y") + A("j")], (x, y)),
              element(RefDir.IN, "B", ["i", "j"], (3, 3)),
              element(RefDir.OUT, "C", ["x", "y"], (x, y), AggOp.ADD)),
        stmts=mac_body())
    outer = Block(
        "kernel_0", idxs=(Index("x", -(-x // t)), Index("y", -(-y // t))),
        refs=(view(RefDir.IN, "A", [t * A("x") - 1, t * A("y") - 1], (t + 2, t + 2), (x, y)),
              whole(RefDir.IN, "B", (3, 3)),
              view(RefDir.OUT, "C", [t * A("x"), t * A("y")], (t, t), (x, y), AggOp.ADD)),
        stmts=(inner,), tags=frozenset({"kernel"}))
    return conv_program(outer, x, y)


def nested_passed_in(size: int = 9) -> Block:
    """Three levels of passed-in indexes: a in [0, 4), b in [2a, 2a + 2), c = b + 1; the
    innermost block loads X[c] (up to 8) and stores Y[a]."""
    inner = Block("inner", idxs=(Index("c", 1, A("b") + 1),),
                  refs=(element(RefDir.IN, "X", ["c"], (size,)),),
                  stmts=(Load("X", "$x"),))
    middle = Block("middle", idxs=(Index("b", 2, 2 * A("a")),),
                   refs=(whole(RefDir.IN, "X", (size,)),), stmts=(inner,))
    kernel = Block("kernel_0", idxs=(Index("a", 4),),
                   refs=(whole(RefDir.IN, "X", (size,)),
                         element(RefDir.OUT, "Y", ["a"], (4,))),
                   stmts=(middle, Constant("$z", 0.0, F32), Store("$z", "Y")))
    return program({"X": (size,)}, {"Y": (4,)}, [kernel])


def reshape_program(dst: tuple[int, ...] = (3, 4)) -> Block:
    """A kernel reshaping A (12) into B (3, 4); ``dst`` is the size of the kernel's B view."""
    out = view(RefDir.OUT, "B", [0, 0], dst, (3, 4))
    kernel = Block("kernel_0", refs=(whole(RefDir.IN, "A", (12,)), out),
                   stmts=(Special("reshape", ("A",), ("B",)),), tags=frozenset({"kernel"}))
    return program({"A": (12,)}, {"B": (3, 4)}, [kernel])


def with_kernel(prog: Block, pos: int, kernel: Block) -> Block:
    """``prog`` with kernel ``pos`` of its main block replaced."""
    main = prog.stmts[0]
    stmts = main.stmts[:pos] + (kernel,) + main.stmts[pos + 1:]
    return prog.replace(stmts=(main.replace(stmts=stmts),))


def kernel(prog: Block, pos: int) -> Block:
    return prog.stmts[0].stmts[pos]


def fails(prog: Block, message: str) -> None:
    with pytest.raises(VerifyError) as e:
        verify(prog)
    assert str(e.value) == message


def fails_with(prog: Block, path: str, start: str) -> VerifyError:
    with pytest.raises(VerifyError) as e:
        verify(prog)
    assert e.value.path == path
    assert e.value.bare_message.startswith(start), e.value.bare_message
    return e.value


# valid programs ------------------------------------------------------------------------------

@pytest.mark.parametrize("build", [
    lambda: matmul(3, 4, 5), tiled_matmul, lambda: tiled_matmul(8, 4, 9, 4, 3),
    lambda: conv_program(conv_kernel()), tiled_conv, lambda: tiled_conv(8, 8, 4),
    lambda: tiled_conv(5, 9, 3), nested_passed_in, reshape_program,
], ids=["matmul", "tiled_matmul", "tiled_matmul_even", "conv", "tiled_conv",
        "tiled_conv_even", "tiled_conv_3", "nested_passed_in", "reshape"])
def test_valid_programs_pass(build):
    verify(build())


def test_any_block_can_be_verified_its_refs_being_the_buffers():
    verify(kernel(matmul(3, 4, 5), 1))
    verify(kernel(tiled_conv(), 0))


def test_local_allocation_and_index_scalar():
    k = Block("kernel_0", idxs=(Index("i", 4),),
              refs=(element(RefDir.OUT, "C", ["i"], (4,)),
                    Refinement(RefDir.NONE, "", "T", (A(0),),
                               TensorShape.packed(DType.INT64, (1,)))),
              stmts=(LoadIndex(2 * A("i"), "$i"), Store("$i", "T"), Load("T", "$t"),
                     Intrinsic("cast", ("$t",), ("$c",), F32), Store("$c", "C")))
    verify(program({}, {"C": (4,)}, [k]))


def test_empty_domain_touches_nothing():
    k = kernel(matmul(3, 4, 5), 1)
    bad = k.replace(refs=(element(RefDir.IN, "A", [A("m") + 100, "k"], (3, 4)),) + k.refs[1:],
                    constraints=(A("m") - 10,))
    verify(with_kernel(matmul(3, 4, 5), 1, bad))


# names ---------------------------------------------------------------------------------------

def test_load_from_undeclared_refinement():
    k = kernel(matmul(3, 4, 5), 1)
    broken = k.replace(stmts=(Load("Q", "$a"),) + k.stmts[1:])
    fails(with_kernel(matmul(3, 4, 5), 1, broken),
          "program/main/kernel_1: load from undeclared refinement 'Q'")


def test_store_into_undeclared_refinement():
    k = kernel(matmul(3, 4, 5), 0)
    fails(with_kernel(matmul(3, 4, 5), 0, k.replace(stmts=(Constant("$z", 0.0, F32),
                                                           Store("$z", "D")))),
          "program/main/kernel_0: store into undeclared refinement 'D'")


def test_duplicate_index():
    k = kernel(matmul(3, 4, 5), 1)
    fails(with_kernel(matmul(3, 4, 5), 1, k.replace(idxs=k.idxs + (Index("m", 2),))),
          "program/main/kernel_1: index 'm' declared twice")


def test_index_range_must_be_positive():
    k = kernel(matmul(3, 4, 5), 1)
    fails(with_kernel(matmul(3, 4, 5), 1, k.replace(idxs=k.idxs + (Index("z", 0),))),
          "program/main/kernel_1: index 'z' has range 0 (must be >= 1)")


def test_passed_in_index_uses_unknown_parent_index():
    prog = tiled_matmul()
    inner = kernel(prog, 0).stmts[0]
    bad = inner.replace(idxs=(Index("M", 1, 2 * A("q")),) + inner.idxs[1:])
    fails(with_kernel(prog, 0, kernel(prog, 0).replace(stmts=(bad,))),
          "program/main/kernel_0/inner: passed-in index 'M = 2*q' uses 'q', "
          "which is not an index of the parent block")


def test_passed_in_index_at_the_root():
    fails(Block("top", idxs=(Index("i", 2, A("x")),)),
          "top: passed-in index 'i = x' uses 'x', which is not an index of a parent "
          "(this block is the root)")


def test_constraint_uses_unknown_index():
    k = kernel(matmul(3, 4, 5), 1)
    fails(with_kernel(matmul(3, 4, 5), 1, k.replace(constraints=(A("m") - A("w"),))),
          "program/main/kernel_1: constraint 'm - w >= 0' uses 'w', "
          "which is not an index of this block")


def test_access_uses_unknown_index():
    k = kernel(matmul(3, 4, 5), 1)
    refs = (element(RefDir.IN, "A", ["m", "w"], (3, 4)),) + k.refs[1:]
    fails(with_kernel(matmul(3, 4, 5), 1, k.replace(refs=refs)),
          "program/main/kernel_1: access 'w' of refinement 'A' uses 'w', "
          "which is not an index of this block")


def test_duplicate_refinement():
    k = kernel(matmul(3, 4, 5), 1)
    fails(with_kernel(matmul(3, 4, 5), 1, k.replace(refs=k.refs + k.refs[:1])),
          "program/main/kernel_1: refinement 'A' declared twice")


def test_negative_size():
    k = kernel(matmul(3, 4, 5), 1)
    refs = (view(RefDir.IN, "A", ["m", "k"], (1, -1), (3, 4)),) + k.refs[1:]
    fails(with_kernel(matmul(3, 4, 5), 1, k.replace(refs=refs)),
          "program/main/kernel_1: refinement 'A' has size -1 in dimension 1")


def test_access_rank_must_match_shape_rank():
    k = kernel(matmul(3, 4, 5), 1)
    a = k.refs[0]
    refs = (Refinement(a.dir, "A", "A", (A("m"),), a.shape),) + k.refs[1:]
    fails(with_kernel(matmul(3, 4, 5), 1, k.replace(refs=refs)),
          "program/main/kernel_1: refinement 'A' has 1 access affines for rank 2")


def test_allocation_access_must_be_zero():
    root = Block("top", refs=(Refinement(RefDir.NONE, "", "T", (A(1),),
                                         TensorShape.packed(F32, (4,))),))
    fails(root, "top: allocation 'T' has a non-zero access")


def test_view_of_missing_parent_refinement():
    k = kernel(matmul(3, 4, 5), 1)
    refs = (Refinement(RefDir.IN, "Z", "A", k.refs[0].access, k.refs[0].shape),) + k.refs[1:]
    fails(with_kernel(matmul(3, 4, 5), 1, k.replace(refs=refs)),
          "program/main/kernel_1: refinement 'A' views 'Z', "
          "which is not a refinement of the parent block")


@pytest.mark.parametrize("shape, message", [
    (TensorShape.packed(F32, (3, 4, 1)).with_sizes((1, 1, 1)), "has rank 3, its parent 2"),
    (TensorShape.packed(DType.INT8, (3, 4)).with_sizes((1, 1)),
     "has dtype i8, its parent fp32"),
    (TensorShape.packed(F32, (4, 3)).with_sizes((1, 1)),
     "has strides (3, 1), its parent (4, 1)"),
])
def test_view_shape_must_match_parent(shape, message):
    k = kernel(matmul(3, 4, 5), 1)
    a = k.refs[0]
    access = a.access + (A(0),) * (shape.rank - len(a.access))
    refs = (Refinement(a.dir, "A", "A", access, shape),) + k.refs[1:]
    fails(with_kernel(matmul(3, 4, 5), 1, k.replace(refs=refs)),
          f"program/main/kernel_1: view 'A' of 'A' {message}")


def test_load_from_write_only_refinement():
    k = kernel(matmul(3, 4, 5), 1)
    stmts = (Load("C", "$x"),) + k.stmts
    fails(with_kernel(matmul(3, 4, 5), 1, k.replace(stmts=stmts)),
          "program/main/kernel_1: load from refinement 'C' with dir out (not readable)")


def test_store_into_read_only_refinement():
    k = kernel(matmul(3, 4, 5), 1)
    stmts = k.stmts[:3] + (Store("$C", "A"),)
    fails(with_kernel(matmul(3, 4, 5), 1, k.replace(stmts=stmts)),
          "program/main/kernel_1: store into refinement 'A' with dir in (not writable)")


def test_unknown_intrinsic():
    k = kernel(matmul(3, 4, 5), 1)
    stmts = k.stmts[:2] + (Intrinsic("fma", ("$a", "$b"), ("$c",), F32),) + k.stmts[3:]
    fails(with_kernel(matmul(3, 4, 5), 1, k.replace(stmts=stmts)),
          "program/main/kernel_1: unknown intrinsic 'fma'")


def test_intrinsic_arity():
    k = kernel(matmul(3, 4, 5), 1)
    stmts = k.stmts[:2] + (Intrinsic("mul", ("$a",), ("$c",), F32),) + k.stmts[3:]
    fails(with_kernel(matmul(3, 4, 5), 1, k.replace(stmts=stmts)),
          "program/main/kernel_1: intrinsic 'mul' takes 2 inputs, got 1")


def test_intrinsic_has_one_output():
    k = kernel(matmul(3, 4, 5), 1)
    stmts = k.stmts[:2] + (Intrinsic("mul", ("$a", "$b"), ("$c", "$d"), F32),) + k.stmts[3:]
    fails(with_kernel(matmul(3, 4, 5), 1, k.replace(stmts=stmts)),
          "program/main/kernel_1: intrinsic 'mul' has 2 outputs (must be 1)")


def test_scalar_used_before_definition():
    k = kernel(matmul(3, 4, 5), 1)
    stmts = (Load("A", "$a"), Intrinsic("mul", ("$a", "$b"), ("$c",), F32), Load("B", "$b"),
             Store("$c", "C"))
    fails(with_kernel(matmul(3, 4, 5), 1, k.replace(stmts=stmts)),
          "program/main/kernel_1: scalar '$b' used before it is defined")


def test_store_of_undefined_scalar():
    k = kernel(matmul(3, 4, 5), 0)
    fails(with_kernel(matmul(3, 4, 5), 0, k.replace(stmts=(Store("$q", "C"),))),
          "program/main/kernel_0: scalar '$q' used before it is defined")


def test_scalar_assigned_twice():
    k = kernel(matmul(3, 4, 5), 1)
    stmts = (Load("A", "$a"), Load("B", "$a")) + k.stmts[2:]
    fails(with_kernel(matmul(3, 4, 5), 1, k.replace(stmts=stmts)),
          "program/main/kernel_1: scalar '$a' assigned twice")


def test_scalar_name_needs_dollar():
    k = kernel(matmul(3, 4, 5), 0)
    fails(with_kernel(matmul(3, 4, 5), 0, k.replace(stmts=(Constant("z", 0.0, F32),))),
          "program/main/kernel_0: scalar name 'z' does not start with '$'")


def test_scalars_do_not_cross_blocks():
    prog = tiled_matmul()
    outer = kernel(prog, 0)
    inner = outer.stmts[0]
    outer2 = outer.replace(stmts=(Constant("$one", 1.0, F32),
                                  inner.replace(stmts=(Store("$one", "C"),))))
    fails(with_kernel(prog, 0, outer2),
          "program/main/kernel_0/inner: scalar '$one' used before it is defined")


def test_index_scalar_uses_unknown_index():
    k = kernel(matmul(3, 4, 5), 0)
    fails(with_kernel(matmul(3, 4, 5), 0, k.replace(stmts=(LoadIndex(A("q"), "$q"),))),
          "program/main/kernel_0: index(q) uses 'q', which is not an index of this block")


def test_unknown_special():
    k = kernel(reshape_program(), 0)
    fails(with_kernel(reshape_program(), 0, k.replace(stmts=(Special("sort", ("A",), ("B",)),))),
          "program/main/kernel_0: unknown special 'sort'")


def test_special_arity():
    k = kernel(reshape_program(), 0)
    stmts = (Special("gather", ("A",), ("B",)),)
    fails(with_kernel(reshape_program(), 0, k.replace(stmts=stmts)),
          "program/main/kernel_0: special 'gather' takes 2 inputs and 1 outputs, got 1 and 1")


def test_special_on_undeclared_or_read_only_refinement():
    k = kernel(reshape_program(), 0)
    fails(with_kernel(reshape_program(), 0,
                      k.replace(stmts=(Special("reshape", ("Q",), ("B",)),))),
          "program/main/kernel_0: special 'reshape' input undeclared refinement 'Q'")
    fails(with_kernel(reshape_program(), 0,
                      k.replace(stmts=(Special("reshape", ("B",), ("A",)),))),
          "program/main/kernel_0: special 'reshape' input refinement 'B' with dir out "
          "(not readable)")


def test_unnamed_blocks_are_shown_by_position():
    prog = matmul(3, 4, 5)
    k = kernel(prog, 1).replace(name="", stmts=(Load("Q", "$a"),))
    fails(with_kernel(prog, 1, k), "program/main/#1: load from undeclared refinement 'Q'")


# bounds --------------------------------------------------------------------------------------

def test_access_past_the_end():
    k = kernel(matmul(3, 4, 5), 1)
    refs = (element(RefDir.IN, "A", [A("m") + 1, "k"], (3, 4)),) + k.refs[1:]
    e = fails_with(with_kernel(matmul(3, 4, 5), 1, k.replace(refs=refs)),
                   "program/main/kernel_1", "load from 'A' leaves refinement 'A' of program/main")
    assert "dimension 0 reaches 3, outside [0, 3)" in str(e)
    assert "e.g. at kernel_1[k=" in str(e) and "m=2" in str(e)


def test_negative_access():
    k = kernel(matmul(3, 4, 5), 0)
    refs = (element(RefDir.OUT, "C", ["m", A("n") - 2], (3, 5)),)
    e = fails_with(with_kernel(matmul(3, 4, 5), 0, k.replace(refs=refs)),
                   "program/main/kernel_0", "store into 'C' leaves refinement 'C'")
    assert "dimension 1 reaches -2, outside [0, 5)" in str(e)
    assert "n=0" in str(e)


def test_main_view_out_of_the_program_buffer():
    prog = matmul(3, 4, 5)
    main = prog.stmts[0]
    refs = (view(RefDir.IN, "A", [1, 0], (3, 4), (3, 4)),) + main.refs[1:]
    fails_with(prog.replace(stmts=(main.replace(refs=refs),)), "program/main/kernel_1",
               "load from 'A' leaves refinement 'A' of program: dimension 0 reaches 3")


def test_unused_overflowing_view_is_fine():
    prog = matmul(3, 4, 5)
    main = prog.stmts[0]
    refs = main.refs + (Refinement(RefDir.IN, "A", "A2", (A(2), A(-5)),
                                   TensorShape.packed(F32, (3, 4))),)
    verify(prog.replace(stmts=(main.replace(refs=refs),)))


def test_tiled_conv_without_halo_constraints_fails():
    e = fails_with(tiled_conv(halo_constraints=False), "program/main/kernel_0/inner",
                   "load from 'A' leaves refinement 'A' of program/main: dimension 0 reaches -1")
    assert "e.g. at kernel_0[x=0, y=" in str(e) and "inner[X=0" in str(e)


def test_tiled_matmul_without_overflow_constraint_fails():
    prog = tiled_matmul()
    outer = kernel(prog, 0)
    inner = outer.stmts[0].replace(constraints=outer.stmts[0].constraints[1:])
    e = fails_with(with_kernel(prog, 0, outer.replace(stmts=(inner,))),
                   "program/main/kernel_0/inner", "load from 'A' leaves refinement 'A'")
    assert "dimension 0 reaches 5, outside [0, 5)" in str(e)


def test_inner_access_leaves_its_tile_view():
    prog = tiled_matmul()
    outer = kernel(prog, 0)
    inner = outer.stmts[0]
    refs = (element(RefDir.IN, "A", [A("i") + 1, "k"], (5, 3)),) + inner.refs[1:]
    inner = inner.replace(refs=refs, constraints=(3 - A("M") - A("i"),) + inner.constraints[1:])
    fails_with(with_kernel(prog, 0, outer.replace(stmts=(inner,))),
               "program/main/kernel_0/inner",
               "load from 'A' leaves refinement 'A' of program/main/kernel_0: "
               "dimension 0 reaches 2, outside [0, 2)")


def test_nested_passed_in_indexes():
    verify(nested_passed_in(9))
    e = fails_with(nested_passed_in(8), "program/main/kernel_0/middle/inner",
                   "load from 'X' leaves refinement 'X'")
    assert "reaches 8, outside [0, 8)" in str(e)
    assert "kernel_0[a=3] middle[b=7] inner[c=8]" in str(e)


def test_load_from_empty_view():
    k = kernel(matmul(3, 4, 5), 1)
    refs = (view(RefDir.IN, "A", ["m", "k"], (1, 0), (3, 4)),) + k.refs[1:]
    fails_with(with_kernel(matmul(3, 4, 5), 1, k.replace(refs=refs)), "program/main/kernel_1",
               "load from 'A' leaves refinement 'A' of program/main/kernel_1: "
               "dimension 1 reaches 0, outside [0, 0)")


def test_special_box_must_fit():
    fails_with(reshape_program((3, 5)), "program/main/kernel_0",
               "special 'reshape' on 'B' leaves refinement 'B' of program/main: "
               "dimension 1 reaches 4, outside [0, 4)")


# speed ---------------------------------------------------------------------------------------

def _many_kernels(n: int) -> Block:
    """``n`` convolution kernels, half of them tiled, each with its own buffers."""
    kernels, prog_refs, main_refs = [], [], []
    for k in range(n):
        x, y = 6 + k % 3, 7
        kern = conv_kernel(x, y) if k % 2 else kernel(tiled_conv(x, y), 0)
        for name, sizes in (("A", (x, y)), ("B", (3, 3)), ("C", (x, y))):
            dir_ = RefDir.OUT if name == "C" else RefDir.IN
            prog_refs.append(alloc(dir_, f"{name}{k}", sizes, "user"))
            main_refs.append(whole(dir_, f"{name}{k}", sizes))
        refs = tuple(dataclasses.replace(r, from_=f"{r.from_}{k}") for r in kern.refs)
        kernels.append(kern.replace(name=f"kernel_{k}", refs=refs))
    main = Block("main", refs=tuple(main_refs), stmts=tuple(kernels))
    return Block("program", refs=tuple(prog_refs), stmts=(main,))


def test_a_hundred_kernels_verify_quickly():
    import importlib
    verify_module = importlib.import_module("stripe.verify")
    caches = (verify_module._subtree_problem, verify_module._chain_violation)
    prog = _many_kernels(100)
    before = [c.cache_info().misses for c in caches]
    start = time.perf_counter()
    verify(prog)
    first = time.perf_counter() - start
    fresh = [c.cache_info().misses - b for c, b in zip(caches, before)]
    # a pass that changes one kernel: the others are not re-checked (counted, not timed)
    main = prog.stmts[0]
    changed = main.stmts[0].replace(comments="changed")
    prog2 = prog.replace(stmts=(main.replace(stmts=(changed,) + main.stmts[1:]),))
    before = [c.cache_info().misses for c in caches]
    verify(prog2)
    again = [c.cache_info().misses - b for c, b in zip(caches, before)]
    assert first < 5.0, first
    assert fresh[0] >= 100 and all(a <= max(f // 20, 3) for a, f in zip(again, fresh)), \
        (fresh, again)


def test_negative_stride():
    prog = matmul(3, 4, 5)
    a = prog.refs[0]
    flipped = a.shape.with_sizes(a.shape.sizes)
    flipped = type(flipped)(flipped.dtype, (flipped.dims[0], type(flipped.dims[1])(4, -1)))
    fails(prog.replace(refs=(a.__class__(**{**a.__dict__, "shape": flipped}),) + prog.refs[1:]),
          "program: refinement 'A' has negative stride -1 in dimension 1")
