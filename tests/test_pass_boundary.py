"""boundary: before/after Stripe text, piece layouts, negative cases, exact cover of the
iteration space, and interpreter and C equivalence."""

from __future__ import annotations

import itertools
import random
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest
from ops_catalog import OPS_BY_NAME, random_inputs
from passcheck import TARGET, c_source, check_pass, run_and_check

from stripe import interpret, lower, parse_ir, print_ir
from stripe.affine import Affine
from stripe.compiler import compile_program
from stripe.ir import Block
from stripe.passes import boundary
from stripe.passes.select import Selection, rewrite
from stripe.passes.transforms.tile import apply_tile


def program(buffers: str, kernels: str) -> str:
    """A ``#program`` whose ``main`` views every buffer whole and runs ``kernels``.

    ``buffers`` has one ``<in|out> <name> <shape>`` per line, e.g. ``in A fp32:I(4):(1)``.
    """
    root, views = [], []
    for line in buffers.strip().splitlines():
        kind, name, shape = line.split(maxsplit=2)
        zeros = ", ".join("0" for _ in shape.split(":")[1].split(","))
        root.append(f"#user {kind} new {name}[{zeros}] {shape}")
        views.append(f"{kind} {name}[{zeros}] {shape}")
    return (f"#program block []:1 ( // prog\n{chr(10).join(root)}\n) {{\n"
            f"0: #main block []:1 ( // main\n{chr(10).join(views)}\n) {{\n{kernels}\n}}\n}}\n")


def executed(block: Block, outer: Mapping[str, int] | None = None,
             levels: tuple[tuple[tuple[str, int], ...], ...] = ()) -> Counter:
    """How often each point runs: for every point of every block below ``block`` that holds
    a non-block statement, the index values of all its levels (brute force)."""
    outer = outer or {}
    out: Counter = Counter()
    for s in block.stmts:
        if not isinstance(s, Block):
            continue
        for local in itertools.product(*(range(i.range) for i in s.idxs)):
            env = {i.name: int(i.affine.eval(outer)) + k for i, k in zip(s.idxs, local)}
            if any(c.eval(env) < 0 for c in s.constraints):
                continue
            here = levels + (tuple(sorted(env.items())),)
            if any(not isinstance(t, Block) for t in s.stmts):
                out[here] += 1
            out += executed(s, env, here)
    return out


def same_points(before: Block, after: Block) -> None:
    """Every point of ``main`` runs as often after the pass as before: none twice, none lost."""
    main_before, main_after = before.stmts[0], after.stmts[0]
    assert isinstance(main_before, Block) and isinstance(main_after, Block)
    assert executed(main_after) == executed(main_before)


def run(before: Block, **options: object) -> Block:
    return run_and_check(boundary.run, before, boundary.Options(**options), also=same_points)


def assert_rewrites(before: str, expected: str, **options: object) -> None:
    check_pass(boundary.run, before, boundary.Options(**options), expected=expected,
               also=same_points)


def assert_unchanged(text: str, **options: object) -> None:
    check_pass(boundary.run, text, boundary.Options(**options), unchanged=True,
               also=same_points)


def summary(root: Block) -> list[str]:
    """One line per kernel of ``main`` (and per block below it): name, indexes,
    constraints, tags added by the pass."""
    out = []
    for path, b in root.walk():
        if path.count("/") < 2:
            continue
        idxs = ", ".join(f"{i.name} = {i.affine}:{i.range}" if i.is_passed_in
                         else f"{i.name}:{i.range}" for i in b.idxs)
        cons = "; ".join(str(c) for c in b.constraints)
        mark = " ".join(sorted(b.tags & {"interior", "boundary"}))
        out.append(f"{b.name} [{idxs}] {{{cons}}} {mark}".rstrip())
    return out


# a padded 1-D convolution: low edge, interior, high edge -------------------------------------

CONV1D_BUFS = """
in I fp32:I(8, 2):(2, 1)
in K fp32:I(3, 2, 2):(4, 2, 1)
out O fp32:I(8, 2):(2, 1)
"""

INIT_O = """
0: #init #kernel block [x:8, co:2] ( // init
    out O[x, co] fp32:I(1, 1):(2, 1)
) {
    0: $z = (fp32)0.0
    1: O = store($z)
}"""


def conv1d_kernel(name: str, idxs: str, constraints: str, tags: str = "") -> str:
    return f"""
    1: #contraction #kernel {tags} block [{idxs}] ( // {name}
        {constraints}
        in I[-1 + k + x, ci] fp32:I(1, 1):(2, 1)
        in K[k, ci, co] fp32:I(1, 1, 1):(4, 2, 1)
        out O[x, co]:add fp32:I(1, 1):(2, 1)
    ) {{
        0: $I = load(I)
        1: $K = load(K)
        2: $p = mul:fp32($I, $K)
        3: O = store($p)
    }}"""


def test_padded_conv1d_splits_into_edges_and_a_constraint_free_interior():
    before = program(CONV1D_BUFS, INIT_O + conv1d_kernel(
        "conv", "x:8, co:2, k:3, ci:2", "-1 + k + x >= 0  8 - k - x >= 0"))
    expected = program(CONV1D_BUFS, INIT_O
                       + conv1d_kernel("conv_x_lo", "x:1, co:2, k:3, ci:2",
                                       "-1 + k + x >= 0", "#boundary")
                       + conv1d_kernel("conv_interior", "x = 1:6, co:2, k:3, ci:2", "",
                                       "#interior")
                       + conv1d_kernel("conv_x_hi", "x = 7:1, co:2, k:3, ci:2",
                                       "8 - k - x >= 0", "#boundary"))
    assert_rewrites(before, expected, reqs=("contraction",))


def test_tag_names_are_options():
    before = parse_ir(program(CONV1D_BUFS, INIT_O + conv1d_kernel(
        "conv", "x:8, co:2, k:3, ci:2", "-1 + k + x >= 0  8 - k - x >= 0")))
    after = run(before, reqs=("contraction",), interior_set=("fast", "mid"),
                boundary_set=("edge",))
    assert [sorted(b.tags) for b in after.stmts[0].stmts[1:]] == [  # type: ignore[union-attr]
        ["contraction", "edge", "kernel"], ["contraction", "fast", "kernel", "mid"],
        ["contraction", "edge", "kernel"]]


# a padded 3x3 convolution: the jigsaw ----------------------------------------------------------

CONV2D_BUFS = """
in I fp32:I(5, 6):(6, 1)
in F fp32:I(3, 3):(3, 1)
out O fp32:I(5, 6):(6, 1)
"""

CONV2D = """
0: #kernel block [x:5, y:6] ( // init
    out O[x, y] fp32:I(1, 1):(6, 1)
) {
    0: $z = (fp32)0.0
    1: O = store($z)
}
1: #contraction #kernel block [x:5, y:6, i:3, j:3] ( // conv
    -1 + i + x >= 0
    5 - i - x >= 0
    -1 + j + y >= 0
    6 - j - y >= 0
    in I[-1 + i + x, -1 + j + y] fp32:I(1, 1):(6, 1)
    in F[i, j] fp32:I(1, 1):(3, 1)
    out O[x, y]:add fp32:I(1, 1):(6, 1)
) {
    0: $I = load(I)
    1: $F = load(F)
    2: $p = mul:fp32($I, $F)
    3: O = store($p)
}"""


def conv2d_pieces(**options: object) -> list[str]:
    after = run(parse_ir(program(CONV2D_BUFS, CONV2D)), reqs=("contraction",), **options)
    return summary(after)[1:]  # skip the init kernel


def test_padded_conv2d_jigsaw_has_nine_pieces_and_a_constraint_free_interior():
    assert conv2d_pieces() == [
        "conv_x_lo_y_lo [x:1, y:1, i:3, j:3] {-1 + i + x; -1 + j + y} boundary",
        "conv_x_lo [x:1, y = 1:4, i:3, j:3] {-1 + i + x} boundary",
        "conv_x_lo_y_hi [x:1, y = 5:1, i:3, j:3] {-1 + i + x; 6 - j - y} boundary",
        "conv_y_lo [x = 1:3, y:1, i:3, j:3] {-1 + j + y} boundary",
        "conv_interior [x = 1:3, y = 1:4, i:3, j:3] {} interior",
        "conv_y_hi [x = 1:3, y = 5:1, i:3, j:3] {6 - j - y} boundary",
        "conv_x_hi_y_lo [x = 4:1, y:1, i:3, j:3] {5 - i - x; -1 + j + y} boundary",
        "conv_x_hi [x = 4:1, y = 1:4, i:3, j:3] {5 - i - x} boundary",
        "conv_x_hi_y_hi [x = 4:1, y = 5:1, i:3, j:3] {5 - i - x; 6 - j - y} boundary",
    ]


def test_rebase_writes_the_cut_indexes_as_plain_indexes_from_zero():
    # the same points (index values now count from each piece's first value: the exact
    # cover check of run() does not apply; the interpreter's results must still agree)
    before = parse_ir(program(CONV2D_BUFS, CONV2D))
    after = run_and_check(boundary.run, before, boundary.Options(reqs=("contraction",),
                                                                 rebase=True))
    assert summary(after)[1:] == [
        "conv_x_lo_y_lo [x:1, y:1, i:3, j:3] {-1 + i + x; -1 + j + y} boundary",
        "conv_x_lo [x:1, y:4, i:3, j:3] {-1 + i + x} boundary",
        "conv_x_lo_y_hi [x:1, y:1, i:3, j:3] {-1 + i + x; 1 - j - y} boundary",
        "conv_y_lo [x:3, y:1, i:3, j:3] {-1 + j + y} boundary",
        "conv_interior [x:3, y:4, i:3, j:3] {} interior",
        "conv_y_hi [x:3, y:1, i:3, j:3] {1 - j - y} boundary",
        "conv_x_hi_y_lo [x:1, y:1, i:3, j:3] {1 - i - x; -1 + j + y} boundary",
        "conv_x_hi [x:1, y:4, i:3, j:3] {1 - i - x} boundary",
        "conv_x_hi_y_hi [x:1, y:1, i:3, j:3] {1 - i - x; 1 - j - y} boundary",
    ]
    # the offsets moved into the accesses: the interior reads I one row and column in
    [interior] = [b for _, b in after.walk() if b.name == "conv_interior"]
    assert [str(a) for a in interior.ref("I").access][:2] == ["i + x", "j + y"]


def test_over_max_pieces_the_jigsaw_becomes_slabs():
    slabs = [
        "conv_x_lo [x:1, y:6, i:3, j:3] {-1 + i + x; -1 + j + y; 6 - j - y} boundary",
        "conv_y_lo [x = 1:3, y:1, i:3, j:3] {-1 + j + y} boundary",
        "conv_interior [x = 1:3, y = 1:4, i:3, j:3] {} interior",
        "conv_y_hi [x = 1:3, y = 5:1, i:3, j:3] {6 - j - y} boundary",
        "conv_x_hi [x = 4:1, y:6, i:3, j:3] {5 - i - x; -1 + j + y; 6 - j - y} boundary",
    ]
    assert conv2d_pieces(max_pieces=8) == slabs
    assert conv2d_pieces(slabs=True) == slabs


def test_max_pieces_limits_the_cuts():
    assert conv2d_pieces(max_pieces=2) == [
        "conv_x_lo [x:1, y:6, i:3, j:3] {-1 + i + x; 5 - i - x; -1 + j + y; 6 - j - y} boundary",
        "conv_interior [x = 1:4, y:6, i:3, j:3] {5 - i - x; -1 + j + y; 6 - j - y} interior",
    ]


def test_idxs_chooses_the_indexes_to_cut():
    assert conv2d_pieces(idxs=("y",)) == [
        "conv_y_lo [x:5, y:1, i:3, j:3] {-1 + i + x; 5 - i - x; -1 + j + y} boundary",
        "conv_interior [x:5, y = 1:4, i:3, j:3] {-1 + i + x; 5 - i - x} interior",
        "conv_y_hi [x:5, y = 5:1, i:3, j:3] {-1 + i + x; 5 - i - x; 6 - j - y} boundary",
    ]


def test_a_second_run_excluding_the_pieces_does_nothing():
    once = run(parse_ir(program(CONV2D_BUFS, CONV2D)), reqs=("contraction",))
    again = boundary.run(once, boundary.Options(reqs=("contraction",),
                                                exclude=("interior", "boundary")), TARGET)
    assert again is once


def test_boundary_pieces_can_be_split_again_along_the_reduction_indexes():
    # x = 0 never runs i = 0: a second pass over the boundary pieces removes their guards
    once = run(parse_ir(program(CONV2D_BUFS, CONV2D)), reqs=("contraction",), max_pieces=3,
               idxs=("x",))
    twice = run(once, reqs=("boundary",), idxs=("i",), boundary_set=("edge",))
    assert summary(twice)[1:] == [
        "conv_x_lo_interior [x:1, y:6, i = 1:2, j:3] {-1 + j + y; 6 - j - y} boundary interior",
        "conv_interior [x = 1:3, y:6, i:3, j:3] {-1 + j + y; 6 - j - y} interior",
        "conv_x_hi_interior [x = 4:1, y:6, i:2, j:3] {-1 + j + y; 6 - j - y} boundary interior",
    ]


# empty pieces are dropped, identical neighbours merged ------------------------------------------

def test_empty_pieces_go_and_equal_neighbours_merge():
    # x = y = 0 never runs; at x = 0 the first constraint needs y >= 1, which the y cut gives
    text = program("""
        in A fp32:I(8, 8):(8, 1)
        out O fp32:I(8, 8):(8, 1)
        """, """
        0: #kernel block [x:8, y:8, i:2] ( // k
            -1 + x + y >= 0
            -1 + i + y >= 0
            in A[x, y] fp32:I(1, 1):(8, 1)
            out O[x, y]:add fp32:I(1, 1):(8, 1)
        ) {
            0: $a = load(A)
            1: O = store($a)
        }""")
    after = run(parse_ir(text), reqs=("kernel",))
    assert summary(after) == [
        "k_interior [x:8, y = 1:7, i:2] {} interior",
        "k_y_lo [x = 1:7, y:1, i:2] {-1 + i + y} boundary",
    ]


# a tiled matmul whose last column of tiles overflows ---------------------------------------

TILED_BUFS = """
in A fp32:I(8, 6):(6, 1)
in B fp32:I(6, 10):(10, 1)
out C fp32:I(8, 10):(10, 1)
"""

TILED_INIT = """
0: #init #kernel block [i:8, j:10] ( // init
    out C[i, j] fp32:I(1, 1):(10, 1)
) {
    0: $z = (fp32)0.0
    1: C = store($z)
}"""


def tiled(name: str, outer: str, tags: str, inner: str, inner_name: str = "k_inner",
          inner_tags: str = "", constraint: str = "9 - j - x >= 0") -> str:
    return f"""
    1: #contraction #kernel {tags} block [{outer}] ( // {name}
        in A[4*i, 0] fp32:I(4, 6):(6, 1)
        in B[0, 4*j] fp32:I(6, 4):(10, 1)
        out C[4*i, 4*j]:add fp32:I(4, 4):(10, 1)
    ) {{
        0: #inner {inner_tags} block [{inner}] ( // {inner_name}
            {constraint}
            in A[i, k] fp32:I(1, 1):(6, 1)
            in B[k, j] fp32:I(1, 1):(10, 1)
            out C[i, j]:add fp32:I(1, 1):(10, 1)
        ) {{
            0: $A = load(A)
            1: $B = load(B)
            2: $C = mul:fp32($A, $B)
            3: C = store($C)
        }}
    }}"""


TILED = program(TILED_BUFS, TILED_INIT + tiled("k", "i:2, j:3", "",
                                               "i:4, j:4, k:6, x = 4*j:1"))


def test_tiled_matmul_full_tiles_lose_the_overflow_constraint():
    expected = program(TILED_BUFS, TILED_INIT
                       + tiled("k_interior", "i:2, j:2", "#interior",
                               "i:4, j:4, k:6, x = 4*j:1", constraint="")
                       + tiled("k_j_hi", "i:2, j = 2:1", "#boundary",
                               "i:4, j:4, k:6, x = 4*j:1"))
    assert_rewrites(TILED, expected, reqs=("contraction",))


def test_nested_split_shrinks_the_overflowing_tile():
    # the pass visits parents first, then the pieces' children: in the last column of tiles
    # the inner block's high edge never runs, so only its constraint-free interior is left
    expected = program(TILED_BUFS, TILED_INIT
                       + tiled("k_interior", "i:2, j:2", "#interior",
                               "i:4, j:4, k:6, x = 4*j:1", constraint="")
                       + tiled("k_j_hi", "i:2, j = 2:1", "#boundary",
                               "i:4, j:2, k:6, x = 4*j:1", "k_inner_interior", "#interior",
                               constraint=""))
    assert_rewrites(TILED, expected)


def test_inner_block_alone_is_split_in_the_context_of_its_ancestors():
    after = run(parse_ir(TILED), reqs=("inner",), min_interior_fraction=0.5)
    assert summary(after)[1:] == [
        "k [i:2, j:3] {}",
        "k_inner_interior [i:4, j:2, k:6, x = 4*j:1] {} interior",
        "k_inner_j_hi [i:4, j = 2:2, k:6, x = 4*j:1] {9 - j - x} boundary",
    ]


# negative cases -------------------------------------------------------------------------------

def test_no_constraints_no_change():
    assert_unchanged(program(TILED_BUFS, TILED_INIT + tiled(
        "k", "i:2, j:2", "", "i:4, j:4, k:6, x = 4*j:1", constraint="")))


def test_constraints_nowhere_implied_no_change():
    # the constraint depends only on the child's reduction index: no range of the outer
    # block's indexes makes it true
    assert_unchanged(program("""
        in A fp32:I(8, 4):(4, 1)
        out O fp32:I(8):(1)
        """, """
        0: #kernel block [x:8] ( // k
            in A[x, 0] fp32:I(1, 4):(4, 1)
            out O[x]:max fp32:I(1):(1)
        ) {
            0: block [r:4] ( // red
                1 - r >= 0
                in A[0, r] fp32:I(1, 1):(4, 1)
                out O[0]:max fp32:I(1):(1)
            ) {
                0: $a = load(A)
                1: O = store($a)
            }
        }"""), reqs=("kernel",))


def test_a_small_interior_does_not_pay_off():
    assert_unchanged(program(CONV2D_BUFS, CONV2D), reqs=("contraction",),
                     min_interior_fraction=0.5)


def test_excluded_indexes_and_unselected_blocks_no_change():
    assert_unchanged(program(CONV2D_BUFS, CONV2D), reqs=("contraction",), idxs=("i", "j"),
                     min_interior_fraction=0.5)
    assert_unchanged(program(CONV2D_BUFS, CONV2D), reqs=("contraction",), exclude=("kernel",))
    assert_unchanged(program(CONV2D_BUFS, CONV2D), reqs=("nothing",))


def test_options_are_checked():
    with pytest.raises(ValueError, match="max_pieces must be >= 2"):
        boundary.Options(max_pieces=1)
    with pytest.raises(ValueError, match=r"min_interior_fraction must be in \[0, 1\]"):
        boundary.Options(min_interior_fraction=1.5)


# random constraints: the pieces run every point exactly once ---------------------------------

def random_constraint(rng: random.Random, names: list[str]) -> str:
    terms = {n: rng.choice([-2, -1, -1, 0, 1, 1, 2]) for n in names}
    return f"{Affine.from_dict(terms, rng.randint(-6, 12))} >= 0"


def random_kernel(rng: random.Random) -> str:
    """A block over ``x, y, i`` with random constraints, half the time holding a child with
    random constraints over its own index and the parent's ``x`` and ``y``."""
    cons = "\n".join(random_constraint(rng, ["x", "y", "i"]) for _ in range(rng.randint(0, 3)))
    body = "0: $c = (fp32)1.0\n1: O = store($c)"
    if rng.random() < 0.5:
        inner = "\n".join(random_constraint(rng, ["k", "x0", "y"])
                          for _ in range(rng.randint(1, 3)))
        body = f"""0: #inner block [k:{rng.randint(1, 4)}, x0 = x:1, y = y:1] ( // in
            {inner}
            out O[0, 0]:add fp32:I(1, 1):(8, 1)
        ) {{ {body} }}"""
    ranges = [rng.randint(1, 7) for _ in range(3)]
    return program("out O fp32:I(8, 8):(8, 1)", f"""
        0: #kernel block [x:{ranges[0]}, y:{ranges[1]}, i:{ranges[2]}] ( // k
            {cons}
            out O[x, y]:add fp32:I(1, 1):(8, 1)
        ) {{ {body} }}""")


def test_random_constraints_every_point_runs_exactly_once():
    rng = random.Random(4)
    split = 0
    for _ in range(80):
        before = parse_ir(random_kernel(rng))
        options = {"reqs": (rng.choice(["kernel", "all"]),),
                   "max_pieces": rng.choice([2, 3, 5, 9, 27]), "slabs": rng.random() < 0.3,
                   "min_interior_fraction": rng.choice([0.0, 0.25])}
        split += run(before, **options) is not before
    assert split >= 20  # the generator does exercise the pass


# catalogue programs: interpreter and C ---------------------------------------------------------

def tile_contractions(program_: Block, sizes: Mapping[str, int]) -> Block:
    def fn(b: Block, site) -> Block:  # type: ignore[no-untyped-def]
        if "contraction" not in b.tags:
            return b
        return apply_tile(b, {n: t for n, t in sizes.items() if b.has_idx(n)},
                                   ancestors=site.ancestors, inner_set=("inner",))
    return rewrite(program_, Selection(), fn)


CASES = [  # (op, tile sizes or None, pass options)
    ("conv1d_same", None, {"reqs": ("contraction",)}),
    ("conv2d", None, {"reqs": ("contraction",)}),
    ("conv2d_stride2", None, {"reqs": ("contraction",)}),
    ("depthwise_conv2d", None, {"reqs": ("contraction",), "slabs": True}),
    ("conv1d_transpose_stride2", None, {"reqs": ("contraction",)}),
    ("cumsum", None, {"reqs": ("contraction",), "min_interior_fraction": 0.0}),
    ("matmul", {"m": 4, "n": 3}, {"reqs": ("contraction",)}),
    ("matmul", {"m": 4, "n": 3}, {}),
    ("conv2d", {"x": 4, "y": 5}, {}),
    ("conv1d_same", {"x": 8}, {"reqs": ("inner",)}),
    ("depthwise_conv2d", {"x": 4, "y": 4}, {"min_interior_fraction": 0.0}),
    # rebase: the pieces' cut indexes count from 0, their offsets moved into the accesses
    # (and, for the tiled programs, into the inner blocks' passed-in affines)
    ("conv2d", None, {"reqs": ("contraction",), "rebase": True}),
    ("conv2d_stride2", None, {"reqs": ("contraction",), "rebase": True}),
    ("conv1d_transpose_stride2", None, {"reqs": ("contraction",), "rebase": True}),
    ("depthwise_conv2d", None, {"reqs": ("contraction",), "rebase": True}),
    ("matmul", {"m": 4, "n": 3}, {"rebase": True}),
    ("conv2d", {"x": 4, "y": 5}, {"rebase": True}),
]


def case_program(name: str, sizes: Mapping[str, int] | None) -> Block:
    op = OPS_BY_NAME[name]
    prog = lower(op.source, op.input_specs())
    return tile_contractions(prog, sizes) if sizes else prog


@pytest.mark.parametrize("name, sizes, options", CASES,
                         ids=[f"{n}-{'tiled' if s else 'flat'}-{k}" for k, (n, s, _)
                              in enumerate(CASES)])
def test_catalogue_programs_keep_their_results(name: str, sizes: Mapping[str, int] | None,
                                               options: dict[str, object]) -> None:
    before = case_program(name, sizes)
    after = run_and_check(boundary.run, before, boundary.Options(**options),
                          random_inputs(OPS_BY_NAME[name]))
    assert after is not before
    assert any("interior" in b.tags for _, b in after.walk())


@pytest.mark.parametrize("name, sizes, rebase", [("conv2d", None, False),
                                                 ("matmul", {"m": 4, "n": 3}, False),
                                                 ("conv2d", None, True),
                                                 ("conv2d", {"x": 4, "y": 5}, True)])
def test_c_back_end_matches_the_interpreter(name: str, sizes: Mapping[str, int] | None,
                                            rebase: bool) -> None:
    before = case_program(name, sizes)
    after = boundary.run(before, boundary.Options(reqs=("contraction",), rebase=rebase), TARGET)
    inputs = random_inputs(OPS_BY_NAME[name])
    want, got = interpret(before, inputs), compile_program(after)(**inputs)
    for out in want:
        np.testing.assert_allclose(got[out], want[out], rtol=1e-4, atol=1e-4, err_msg=out)


def c_block(source: str, name: str) -> str:
    """The C text of the block named ``name`` (from its opening brace to the matching one)."""
    lines = source.splitlines()
    start = next(k for k, line in enumerate(lines) if line.endswith(f"/* block {name} */"))
    indent = len(lines[start]) - len(lines[start].lstrip())
    end = next(k for k in range(start + 1, len(lines))
               if lines[k] == " " * indent + "}")
    return "\n".join(lines[start:end + 1])


def test_emitted_c_of_the_interior_has_no_guard():
    op = OPS_BY_NAME["conv2d"]
    before = lower(op.source, op.input_specs())
    after = boundary.run(before, boundary.Options(reqs=("contraction",)), TARGET)
    source = c_source(after)

    def tested(text: str) -> bool:  # a guard, or a loop bound computed from outer values
        return any(s in text for s in ("if (", "stripe_imin(", "stripe_imax("))

    assert tested(c_block(c_source(before), "kernel_1"))
    assert tested(c_block(source, "kernel_1_x_lo"))
    interior = c_block(source, "kernel_1_interior")
    assert "for (" in interior and not tested(interior)


# the documentation shows real output ---------------------------------------------------------

DOCS = Path(__file__).resolve().parent.parent / "docs"


def doc_blocks(heading: str) -> list[str]:
    """The ``stripe`` code blocks under ``heading`` in the boundary docs (its own page, or
    the section of passes.md once merged), up to the next heading."""
    for page in ("pass_boundary.md", "passes.md"):
        path = DOCS / page
        if path.exists() and heading in path.read_text():
            rest = path.read_text().split(heading, 1)[1].split("\n#### ", 1)[0]
            return [b.split("```", 1)[0] for b in rest.split("```stripe\n")[1:]]
    pytest.skip(f"no '{heading}' in the docs")


def test_docs_examples_are_pass_output():
    before = parse_ir(program(CONV1D_BUFS, INIT_O + conv1d_kernel(
        "conv", "x:8, co:2, k:3, ci:2", "-1 + k + x >= 0  8 - k - x >= 0")))
    shown_before, shown_after = doc_blocks("#### Example: a padded 1-D convolution")
    assert kernels_text(before) == shown_before
    after = boundary.run(before, boundary.Options(reqs=("contraction",)), TARGET)
    assert kernels_text(after) == shown_after
    (shown_tiled,) = doc_blocks("#### Example: an uneven tiling")
    assert kernels_text(boundary.run(parse_ir(TILED), boundary.Options(), TARGET)) == shown_tiled


def kernels_text(root: Block) -> str:
    """The printed kernels of ``main`` after the first (the init kernel)."""
    main = root.stmts[0]
    assert isinstance(main, Block)
    return "\n".join(print_ir(s) for s in main.sub_blocks[1:])
