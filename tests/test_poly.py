"""The polyhedral bridge: sets, block and nested domains, access maps and footprints.

Footprints are checked on hand-built kernels (matmul, convolutions with halos, tiled
programs) and against brute-force enumeration on random nested blocks.
"""

from __future__ import annotations

import itertools
import math

import islpy as isl
import pytest
from irbuild import F32, element, matmul
from test_verify import (
    conv_kernel,
    kernel,
    mac_body,
    nested_passed_in,
    reshape_program,
    tiled_conv,
    tiled_matmul,
)

from stripe import poly
from stripe.affine import Affine
from stripe.ir import AggOp, Block, Index, Load, RefDir, Refinement, TensorShape
from stripe.poly import Box, Space

A = Affine.of


def path_to(prog: Block, *names: str) -> tuple[Block, ...]:
    """The blocks from ``prog`` down through the named sub-blocks."""
    out = [prog]
    for n in names:
        out.append(next(b for b in out[-1].sub_blocks if b.name == n))
    return tuple(out)


# sets over a space ---------------------------------------------------------------------------

def test_sets_bounds_and_implication():
    sp = Space(("x", "y"))
    s = poly.make_set(sp, [A("x") - A("y")], boxes={"x": (0, 9), "y": (2, 5)})
    assert poly.dim_bounds(sp, s, "x") == (2, 9)
    assert poly.affine_bounds(sp, s, A("x") + 2 * A("y")) == (6, 19)
    assert poly.implies(sp, s, A("x") - 2) and not poly.implies(sp, s, A("x") - 3)
    assert not poly.is_empty(s)
    empty = poly.make_set(sp, [A("x") - 20], boxes={"x": (0, 9)})
    assert poly.is_empty(empty)
    assert poly.dim_bounds(sp, empty, "x") is None and poly.sample_point(sp, empty) is None
    p = poly.sample_point(sp, s)
    assert p is not None and 2 <= p["y"] <= 5 and p["y"] <= p["x"] <= 9


def test_sets_interoperate_with_isl_text_and_parameters():
    sp = Space(("i",), ("n",))
    s = poly.make_set(sp, [A("n") - 1 - A("i"), A("i")])
    fixed = s.intersect(isl.Set.read_from_str(isl.DEFAULT_CONTEXT, "[p0] -> { [v0] : p0 = 4 }"))
    assert poly.affine_bounds(sp, fixed, A("i")) == (0, 3)
    with pytest.raises(ValueError, match="unbounded"):
        poly.affine_bounds(sp, s, A("i"))


def test_unknown_names_raise():
    with pytest.raises(KeyError):
        poly.make_set(Space(("x",)), [A("q")])


# one block -----------------------------------------------------------------------------------

def test_block_domain_with_passed_in_indexes():
    inner = kernel(tiled_matmul(), 0).stmts[0]  # M = 2*m, N = 3*n, i < 2, j < 3, k < 3
    space, s = poly.block_domain(inner)
    assert space.dims == ("M", "N", "i", "j", "k")
    assert space.params == ("m@-1", "n@-1")
    at = poly.make_set(space, [A("m@-1") - 2, 2 - A("m@-1"), A("n@-1")])  # m = 2, n = 0
    assert poly.dim_bounds(space, s.intersect(at), "M") == (4, 4)
    assert poly.dim_bounds(space, s.intersect(at), "i") == (0, 0)  # the uneven split
    assert poly.block_domain(inner) is poly.block_domain(inner)


def test_access_maps():
    k = kernel(tiled_conv(), 0)  # A[4x - 1, 4y - 1] size (6, 6), x < 2, y < 2
    am = poly.access_map(k, "A")
    assert am.space.dims == ("x", "y") and am.rank == 2
    expect = ("{ [x, y] -> [a, b] : 0 <= x <= 1 and 0 <= y <= 1 and "
              "4x - 1 <= a <= 4x + 4 and 4y - 1 <= b <= 4y + 4 }")
    assert am.map.is_equal(isl.Map.read_from_str(isl.DEFAULT_CONTEXT, expect))
    elem = poly.access_map(k, "A", whole=False)
    expect = "{ [x, y] -> [4x - 1, 4y - 1] : 0 <= x <= 1 and 0 <= y <= 1 }"
    assert elem.map.is_equal(isl.Map.read_from_str(isl.DEFAULT_CONTEXT, expect))


# nested domains ------------------------------------------------------------------------------

def test_nested_domain_of_a_tiled_matmul():
    path = path_to(tiled_matmul(), "main", "kernel_0", "inner")
    nest = poly.nested_domain(path)
    assert "M@3" in nest.space.dims and "m@2" in nest.space.dims and nest.space.params == ()
    # the row each inner point works on, over the whole nest: exactly the 5 rows of A
    assert poly.bounds_in(path, A("M") + A("i")) == (0, 4)
    assert nest.interval(nest.expr(3, A("M") + A("i"))) == (0, 5)  # the box ignores the split
    assert poly.implied_in(path, 4 - A("M") - A("i"))
    assert not poly.implied_in(path, 3 - A("M") - A("i"))
    assert not poly.domain_is_empty(path)
    assert poly.nested_domain(path) is nest  # memoised by levels


def test_nested_domain_sample_and_levels():
    path = path_to(nested_passed_in(), "main", "kernel_0", "middle", "inner")
    nest = poly.nested_domain(path)
    point = nest.sample([nest.expr(4, A("c")) - 8])
    assert point is not None
    assert nest.level_values(point)[2:] == [{"a": 3}, {"b": 7}, {"c": 8}]


def test_empty_nested_domain():
    prog = tiled_matmul()
    outer = kernel(prog, 0)
    inner = outer.stmts[0].replace(constraints=(A("i") - 5,))
    path = (prog, prog.stmts[0], outer, inner)
    assert poly.domain_is_empty(path)
    assert poly.bounds_in(path, A("i")) is None


def test_parent_indexes_of_the_outermost_block_are_free():
    inner = kernel(tiled_matmul(), 0).stmts[0]
    assert poly.bounds_in([inner], A("i")) == (0, 1)
    with pytest.raises(ValueError, match="unbounded"):
        poly.bounds_in([inner], A("M"))


def test_redundant_constraints():
    uneven = path_to(tiled_matmul(5, 3, 7, 2, 3), "main", "kernel_0", "inner")
    assert not poly.constraint_is_redundant(uneven, 0)
    even = path_to(tiled_matmul(8, 3, 9, 4, 3), "main", "kernel_0", "inner")
    assert poly.constraint_is_redundant(even, 0) and poly.constraint_is_redundant(even, 1)
    conv = conv_kernel()
    assert not any(poly.constraint_is_redundant([conv], k) for k in range(4))
    doubled = conv.replace(constraints=conv.constraints + conv.constraints[:1])
    assert poly.constraint_is_redundant([doubled], 0)
    assert poly.constraint_is_redundant([doubled], 4)


# footprints ----------------------------------------------------------------------------------

def test_touches_follow_views_down():
    prog = tiled_conv()
    k = kernel(prog, 0)
    (t,) = poly.touches(k, "A")
    assert [b.name for b in t.path] == ["kernel_0", "inner"]
    assert [r.into for r in t.refs] == ["A", "A"] and t.extent == (1, 1)
    (t,) = poly.touches(prog.stmts[0], "C")  # load and store of C are one touch
    assert len(t.path) == 3
    (t,) = poly.touches(kernel(reshape_program(), 0), "B")
    assert t.extent == (3, 4)
    assert poly.touches(k, "B")[0].path[-1].name == "inner"


def test_access_sum_along_a_chain():
    path = path_to(tiled_conv(), "main", "kernel_0", "inner")
    nest = poly.nested_domain(path)
    (t,) = poly.touches(path[0], "A")
    coords = poly.access_sum(nest, t.refs, 2)  # in main's view: kernel view + inner access
    assert coords[0] == 4 * A("x@2") - 1 + A("x@3") + A("i@3")


def test_footprint_of_whole_blocks():
    mm = matmul(3, 4, 5)
    assert poly.footprint(kernel(mm, 1), "A") == Box((0, 0), (3, 4))
    prog = tiled_conv()
    k = kernel(prog, 0)
    ctx = (prog, prog.stmts[0])
    # the tile views overflow at the borders, but what is touched is exactly the image
    assert poly.footprint(k, "A", ancestors=ctx) == Box((0, 0), (6, 7))
    assert poly.footprint(k, "A", ancestors=ctx, local=True) == Box((0, 0), (6, 6))
    assert poly.footprint(k, "C", ancestors=ctx) == Box((0, 0), (6, 7))
    assert poly.footprint(prog, "B") == Box((0, 0), (3, 3))  # an allocation: own coordinates
    assert poly.footprint(kernel(reshape_program(), 0), "B") == Box((0, 0), (3, 4))


def test_footprint_none_when_nothing_is_touched():
    k = kernel(matmul(3, 4, 5), 1)
    assert poly.footprint(k.replace(stmts=()), "A") is None
    empty = k.replace(constraints=(A("m") - 9,))
    assert poly.footprint(empty, "A") is None


def test_footprint_with_free_parent_index_is_unbounded():
    inner = path_to(nested_passed_in(), "main", "kernel_0", "middle", "inner")[-1]
    with pytest.raises(ValueError, match="unbounded"):
        poly.footprint(inner, "X")
    assert poly.footprint(inner, "X", local=True) == Box((0,), (1,))


def test_footprints_are_memoised():
    k = kernel(matmul(3, 4, 5), 1)
    assert poly.footprint(k, "A") is poly.footprint(k, "A")
    assert poly.tile_footprint(k, "A", {"m": 2}) is poly.tile_footprint(k, "A", {"m": 2})


def test_conv_tile_touches_its_halo():
    valid = Block(  # O[x, y] += I[x + i, y + j] * F[i, j], no padding
        "conv", idxs=(Index("x", 8), Index("y", 8), Index("i", 3), Index("j", 3)),
        refs=(element(RefDir.IN, "A", [A("x") + A("i"), A("y") + A("j")], (10, 10)),
              element(RefDir.IN, "B", ["i", "j"], (3, 3)),
              element(RefDir.OUT, "C", ["x", "y"], (8, 8), AggOp.ADD)),
        stmts=mac_body())
    assert poly.tile_footprint(valid, "A", {"x": 4, "y": 4}) == Box((0, 0), (6, 6))
    assert poly.tile_footprint(valid, "B", {"x": 4, "y": 4}) == Box((0, 0), (3, 3))
    same = conv_kernel(16, 16)  # padded: I[x + i - 1, ...], constraints at the borders
    assert poly.tile_footprint(same, "A", {"x": 4, "y": 4}) == Box((0, 0), (6, 6))
    assert poly.tile_footprint(same, "C", {"x": 4, "y": 4}) == Box((0, 0), (4, 4))
    assert poly.tile_footprint(same, "A", {"x": 4, "y": 2, "i": 1}) == Box((0, 0), (4, 4))


def test_tile_footprint_strides_signs_and_overflow():
    def one_ref(access: Affine, rng: int = 16) -> Block:
        return Block("k", idxs=(Index("x", rng), Index("i", 3)),
                     refs=(element(RefDir.IN, "A", [access], (64,)),), stmts=(Load("A", "$a"),))

    assert poly.tile_footprint(one_ref(2 * A("x") + A("i")), "A", {"x": 4}) == Box((0,), (9,))
    flipped = one_ref(15 - A("x"))
    assert poly.tile_footprint(flipped, "A", {"x": 4, "i": 1}) == Box((-3,), (4,))
    assert poly.tile_footprint(one_ref(A("x"), 5), "A", {"x": 8}) == Box((0,), (5,))
    with pytest.raises(ValueError, match="unknown"):
        poly.tile_footprint(flipped, "A", {"z": 2})
    with pytest.raises(ValueError, match=">= 1"):
        poly.tile_footprint(flipped, "A", {"x": 0})


def test_tile_footprint_of_matmul_reduction_split():
    k = kernel(matmul(6, 8, 5), 1)
    assert poly.tile_footprint(k, "A", {"m": 2, "k": 4}) == Box((0, 0), (2, 4))
    assert poly.tile_footprint(k, "C", {"m": 2, "n": 3}) == Box((0, 0), (2, 3))


def test_tile_footprint_of_an_already_tiled_kernel():
    prog = tiled_conv(12, 12, 4)
    k = kernel(prog, 0)  # 3x3 tiles of 4x4; tile the tiles 2x1: 8x4 outputs + halo
    box = poly.tile_footprint(k, "A", {"x": 2, "y": 1}, ancestors=(prog, prog.stmts[0]))
    assert box == Box((0, 0), (10, 6))


# brute force ---------------------------------------------------------------------------------

def _points(path: list[Block], parent: dict[str, int] | None = None):
    """Every point of the nested domain, as a list of {index: value} per level."""
    block, rest = path[0], path[1:]
    for local in itertools.product(*(range(i.range) for i in block.idxs)):
        vals = {i.name: i.affine.eval(parent or {}) + v for i, v in zip(block.idxs, local)}
        if all(c.eval(vals) >= 0 for c in block.constraints):
            if rest:
                for below in _points(rest, vals):
                    yield [vals] + below
            else:
                yield [vals]


def _random_affine(rng, names: list[str], lo: int = -2, hi: int = 2, const: int = 2) -> Affine:
    return Affine.from_dict({n: int(rng.integers(lo, hi + 1)) for n in names},
                            int(rng.integers(-const, const + 1)))


def _random_nest(rng) -> Block:
    """An outer block over a, b (maybe constrained) holding an inner block with a passed-in
    index p (an affine of a, b) and its own q; the inner block loads a view of a view."""
    outer_idxs = tuple(Index(n, int(rng.integers(1, 6))) for n in ("a", "b"))
    inner_idxs = (Index("p", int(rng.integers(1, 4)), _random_affine(rng, ["a", "b"], -1, 2)),
                  Index("q", int(rng.integers(1, 4))))
    shape = TensorShape.packed(F32, (20, 20))
    inner = Block("inner", idxs=inner_idxs,
                  constraints=(_random_affine(rng, ["p", "q"], -1, 1, 4),),
                  refs=(Refinement(RefDir.IN, "R", "R", (_random_affine(rng, ["p", "q"]),
                                                         _random_affine(rng, ["q"])),
                                   shape.with_sizes((1, 1))),),
                  stmts=(Load("R", "$r"),))
    return Block("outer", idxs=outer_idxs,
                 constraints=(_random_affine(rng, ["a", "b"], -1, 1, 5),),
                 refs=(Refinement(RefDir.IN, "R", "R", (_random_affine(rng, ["a", "b"]),
                                                        _random_affine(rng, ["a"])),
                                  shape.with_sizes((4, 4))),),
                 stmts=(inner,))


def _brute_box(coords: list[tuple[int, ...]]) -> Box | None:
    if not coords:
        return None
    return Box.from_bounds([(min(c), max(c)) for c in zip(*coords)])


def _touched(outer: Block, point: list[dict[str, int]], tile: dict[str, int] | None):
    inner = outer.stmts[0]
    top, below = point
    acc = outer.ref("R").access
    if tile is None:
        base = [a.eval(top) for a in acc]
    else:  # relative to the tile origin
        origin = {n: tile[n] * (v // tile[n]) for n, v in top.items()}
        base = [a.eval(top) - a.eval(origin) for a in acc]
    return tuple(b + a.eval(below) for b, a in zip(base, inner.ref("R").access))


def test_footprints_match_brute_force(rng):
    for _ in range(40):
        outer = _random_nest(rng)
        points = list(_points([outer, outer.stmts[0]]))
        assert poly.domain_is_empty([outer, outer.stmts[0]]) == (not points)
        assert poly.footprint(outer, "R") == _brute_box([_touched(outer, p, None)
                                                         for p in points])
        tile = {i.name: int(rng.integers(1, i.range + 2)) for i in outer.idxs}
        got = poly.tile_footprint(outer, "R", tile)
        assert got == _brute_box([_touched(outer, p, tile) for p in points]), (outer, tile)


def test_tiled_conv_program_views_cover_the_tile_footprint():
    # the hand-tiled program's views are exactly what tile_footprint asks for
    conv = conv_kernel(6, 7)
    box = poly.tile_footprint(conv, "A", {"x": 4, "y": 4})
    outer = kernel(tiled_conv(6, 7, 4), 0)
    view_a = outer.ref("A")
    origin = [a.substitute({"x": 4 * A("x"), "y": 4 * A("y"), "i": 0, "j": 0})
              for a in conv.ref("A").access]
    assert [o + lo for o, lo in zip(origin, box.lo)] == list(view_a.access)
    assert box.extent == view_a.shape.sizes
    assert math.prod(box.extent) == box.elem_count == 36


WRITER = """
block [i:{n}]:{n} ( // w
    {dir} T[i] fp32:I(1):(1)
) {
    0: $x = (fp32)1.0
    1: {body}
}
"""


@pytest.mark.parametrize("n, dir_, body, want", [
    (8, "out", "T = store($x)", True),            # every element, stored
    (7, "out", "T = store($x)", False),           # the last element is left
    (8, "out T[i]:add", None, False),             # an aggregating store reads the old value
    (8, "inout", "T = store($x)", False),         # a view that may read
])
def test_writes_every_element(n, dir_, body, want):
    from stripe.irparser import parse_ir
    text = WRITER.replace("{n}", str(n))
    if body is None:  # the aggregation sits on the view
        text = text.replace("{dir} T[i]", dir_).replace("{body}", "T = store($x)")
    else:
        text = text.replace("{dir}", dir_).replace("{body}", body)
    block = parse_ir(text)
    assert poly.writes_every_element(block, "T", (8,)) is want
