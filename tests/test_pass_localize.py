"""localize: before/after Stripe text, negative cases, interpreter and C equivalence."""

from __future__ import annotations

import numpy as np
from passcheck import TARGET, check_pass

from stripe import interpret, parse_ir, print_ir
from stripe.compiler import compile_program
from stripe.ir import Block
from stripe.passes import localize, scalarize
from stripe.passes.manager import random_inputs


def run(text: str, **options: object) -> tuple[Block, Block]:
    return check_pass(localize.run, text, localize.Options(**options), tol=0)


def assert_rewrites(before: str, expected: str, **options: object) -> Block:
    return check_pass(localize.run, before, localize.Options(**options), expected=expected,
                      tol=0)[1]


def assert_unchanged(text: str, **options: object) -> None:
    check_pass(localize.run, text, localize.Options(**options), unchanged=True, tol=0)


def program(kernels: str, tmp: str = "T fp32:I(4, 3):(3, 1)") -> str:
    """``A`` (4x3 in), ``D`` (4x3 out) and one tmp buffer, viewed whole by ``main``."""
    tmp_root = tmp_view = ""
    if tmp:
        name, shape = tmp.split(maxsplit=1)
        tmp_root = f"#tmp none new {name}[0, 0] {shape}"
        tmp_view = f"inout {name}[0, 0] {shape}"
    return f"""#program block []:1 ( // prog
        #user in new A[0, 0] fp32:I(4, 3):(3, 1)
        #user out new D[0, 0] fp32:I(4, 3):(3, 1)
        {tmp_root}
    ) {{
        0: #main block []:1 ( // main
            in A[0, 0] fp32:I(4, 3):(3, 1)
            out D[0, 0] fp32:I(4, 3):(3, 1)
            {tmp_view}
        ) {{
            {kernels}
        }}
    }}"""


PRODUCER = """
    0: block [j:3] ( // producer
        in A[0, j] fp32:I(1, 1):(3, 1)
        out T[0, {col}] fp32:I(1, 1):({stride}, 1)
    ) {{
        0: $a = load(A)
        1: $t = mul:fp32($a, $a)
        2: T = store($t)
    }}"""

CONSUMER = """
    1: block [j:3] ( // consumer
        in T[0, {col}] fp32:I(1, 1):({stride}, 1)
        out D[0, j] fp32:I(1, 1):(3, 1)
    ) {{
        0: $t = load(T)
        1: $one = (fp32)1.0
        2: $d = add:fp32($t, $one)
        3: D = store($d)
    }}"""


def fused(t_view: str, col: str, stride: int) -> str:
    return f"""
        0: #kernel block [i:4] ( // fused
            in A[i, 0] fp32:I(1, 3):(3, 1)
            {t_view}
            out D[i, 0] fp32:I(1, 3):(3, 1)
        ) {{
            {PRODUCER.format(col=col, stride=stride)}
            {CONSUMER.format(col=col, stride=stride)}
        }}"""


def test_fused_producer_consumer_tmp_moves_into_the_fused_block():
    before = program(fused("inout T[i, 0] fp32:I(1, 3):(3, 1)", "j", 3))
    expected = program(fused("#tmp none new T[0, 0] fp32:I(1, 3):(3, 1)", "j", 3), tmp="")
    assert_rewrites(before, expected)


def test_the_new_buffer_is_shrunk_to_the_footprint_and_restrided():
    # T is 4x5; each row's producer/consumer touch only columns 1..3 of the 5-wide view.
    before = program(fused("inout T[i, 0] fp32:I(1, 5):(5, 1)", "j + 1", 5),
                     tmp="T fp32:I(4, 5):(5, 1)")
    expected = program(fused("#tmp none new T[0, 0] fp32:I(1, 3):(3, 1)", "j", 3), tmp="")
    assert_rewrites(before, expected)


NESTED = """
    0: #kernel block [i:4] ( // k
        in A[i, 0] fp32:I(1, 3):(3, 1)
        {s_decl}
        out D[i, 0] fp32:I(1, 3):(3, 1)
    ) {{
        0: block [j:3] ( // c
            in A[0, j] fp32:I(1, 1):(3, 1)
            {s_view}
            out D[0, j] fp32:I(1, 1):(3, 1)
        ) {{
            0: $a = load(A)
            1: block []:1 ( // g
                {g_view}
            ) {{
                0: $two = (fp32)2.0
                1: S = store($two)
            }}
            2: $s = load(S)
            3: $d = mul:fp32($a, $s)
            4: D = store($d)
        }}
    }}"""


def test_a_buffer_travels_down_as_far_as_it_is_private():
    before = program(NESTED.format(s_decl="#s none new S[0] fp32:I(3):(1)",
                                   s_view="inout S[j] fp32:I(1):(1)",
                                   g_view="out S[0] fp32:I(1):(1)"), tmp="")
    # S moves from k into c (each point of c touches its own element); c then uses S itself
    # as well as through g, so it stays in c, now a single element: scalarize takes over.
    expected = program(NESTED.format(s_decl="",
                                      s_view="#s none new S[0] fp32:I(1):(1)",
                                      g_view="out S[0] fp32:I(1):(1)"), tmp="")
    after = assert_rewrites(before, expected)
    assert scalarize.run(after, scalarize.Options(), TARGET) is after  # g still stores into it


def test_separate_producer_and_consumer_kernels_keep_the_tmp():
    assert_unchanged(program("""
        0: #kernel block [i:4, j:3] ( // producer
            in A[i, j] fp32:I(1, 1):(3, 1)
            out T[i, j] fp32:I(1, 1):(3, 1)
        ) {
            0: $a = load(A)
            1: T = store($a)
        }
        1: #kernel block [i:4, j:3] ( // consumer
            in T[i, j] fp32:I(1, 1):(3, 1)
            out D[i, j] fp32:I(1, 1):(3, 1)
        ) {
            0: $t = load(T)
            1: D = store($t)
        }"""))


def test_points_that_share_elements_keep_the_buffer():
    # Every point (i, k) of the kernel accumulates into row i: points communicate.
    assert_unchanged(program("""
        0: #kernel block [i:4, k:3] ( // k
            in A[i, k] fp32:I(1, 1):(3, 1)
            inout T[i, 0]:add fp32:I(1, 3):(3, 1)
            out D[i, k] fp32:I(1, 1):(3, 1)
        ) {
            0: $a = load(A)
            1: T = store($a)
            2: $t = load(T)
            3: D = store($t)
        }"""))


def test_disjointness_sees_strides_and_passed_in_indexes():
    # Tiles of 2 columns: x0 = 2*x passes the tile origin; each (x, i) touches one element.
    text = program("""
        0: #kernel block [x:2] ( // tiles
            in A[0, 2*x] fp32:I(4, 2):(3, 1)
            inout T[0, 2*x] fp32:I(4, 2):(3, 1)
            out D[0, 2*x] fp32:I(4, 2):(3, 1)
        ) {
            0: block [r:4, i:2, x0 = 2*x:1] ( // tile
                2 - i - x0 >= 0
                in A[r, i] fp32:I(1, 1):(3, 1)
                inout T[r, i] fp32:I(1, 1):(3, 1)
                out D[r, i] fp32:I(1, 1):(3, 1)
            ) {
                0: $a = load(A)
                1: T = store($a)
                2: $t = load(T)
                3: $d = add:fp32($t, $a)
                4: D = store($d)
            }
        }""")
    _, after = run(text)
    main = after.sub_blocks[0]
    assert not after.has_ref("T") and not main.has_ref("T")
    # T went all the way down: each point of `tile` has its own single element.
    tile = main.sub_blocks[0].sub_blocks[0]
    assert "none new T[0, 0] fp32:I(1, 1):(1, 1)" in print_ir(tile)


def test_left_alone_when_the_parent_uses_it_or_a_child_views_it_twice():
    assert_unchanged(program("""
        0: #kernel block [i:4] ( // k
            in A[i, 0] fp32:I(1, 3):(3, 1)
            none new S[0] fp32:I(3):(1)
            out D[i, 0] fp32:I(1, 3):(3, 1)
        ) {
            0: $a = load(A)
            1: S = store($a)
            2: block [j:3] ( // c
                in S[j] fp32:I(1):(1)
                out D[0, j] fp32:I(1, 1):(3, 1)
            ) {
                0: $s = load(S)
                1: D = store($s)
            }
        }""", tmp=""))
    assert_unchanged(program("""
        0: #kernel block [i:4] ( // k
            in A[i, 0] fp32:I(1, 3):(3, 1)
            none new S[0] fp32:I(3):(1)
            out D[i, 0] fp32:I(1, 3):(3, 1)
        ) {
            0: block [j:3] ( // c
                in A[0, j] fp32:I(1, 1):(3, 1)
                out S1 = S[j] fp32:I(1):(1)
                in S2 = S[j] fp32:I(1):(1)
                out D[0, j] fp32:I(1, 1):(3, 1)
            ) {
                0: $a = load(A)
                1: S1 = store($a)
                2: $s = load(S2)
                3: D = store($s)
            }
        }""", tmp=""))


def test_selection_and_ref_reqs():
    text = program(fused("inout T[i, 0] fp32:I(1, 3):(3, 1)", "j", 3))
    assert_unchanged(text, ref_reqs=("other",))
    assert_unchanged(text, reqs=("kernel",))  # main holds T, and main is not selected
    _, after = run(text, ref_reqs=("tmp",), reqs=("main",))
    assert not after.has_ref("T")


def test_user_buffers_and_root_allocations_never_move():
    # D is used by one kernel only, but the caller sees it.
    assert_unchanged(program("""
        0: #kernel block [i:4, j:3] ( // k
            in A[i, j] fp32:I(1, 1):(3, 1)
            out D[i, j] fp32:I(1, 1):(3, 1)
        ) {
            0: $a = load(A)
            1: D = store($a)
        }""", tmp=""))
    assert_unchanged("""block []:1 ( // root
        in new A[0] fp32:I(4):(1)
        out new O[0] fp32:I(4):(1)
        none new S[0] fp32:I(4):(1)
    ) {
        0: block [i:4] ( // k
            in A[i] fp32:I(1):(1)
            inout S[i] fp32:I(1):(1)
            out O[i] fp32:I(1):(1)
        ) {
            0: $a = load(A)
            1: S = store($a)
            2: $s = load(S)
            3: O = store($s)
        }
    }""")


def test_localized_program_compiles_to_the_same_results():
    before = parse_ir(program(fused("inout T[i, 0] fp32:I(1, 3):(3, 1)", "j", 3)))
    after = localize.run(before, localize.Options(), TARGET)
    assert after is not before
    inputs = random_inputs(before)
    got = compile_program(after)(**inputs)
    np.testing.assert_allclose(got["D"], interpret(before, inputs)["D"], rtol=1e-6)


def test_several_buffers_move_into_one_child_and_shared_ones_stay():
    """A fused chain: every tmp moves into the one fused block that uses it (in declaration
    order, each move seeing the child as the previous one left it); with max_views the chain
    is cut in pieces, and a tmp that links two pieces stays in the root."""
    from benchmarks.compile_time import chain
    from stripe import lower
    from stripe.passes import fuse

    program = lower(*chain(9, side=4))
    arrays = random_inputs(program)
    want = interpret(program, arrays)["O"]
    tmps = {f"T{k}" for k in range(1, 9)}
    for max_views, linked in ((0, set()), (4, None)):
        fused = fuse.run(program, fuse.Options(max_views=max_views), TARGET)
        after = localize.run(fused, localize.Options(), TARGET)
        [main] = after.sub_blocks
        stayed = {r.into for r in after.refs} - {"A", "B", "O"}
        moved = {r.into for s in main.sub_blocks for r in s.refs if r.is_alloc}
        assert stayed | moved == tmps and not stayed & moved
        # a tmp stays exactly when two of main's blocks view it
        viewers = {t: sum(any(v.from_ == t for v in s.refs) for s in main.sub_blocks)
                   for t in tmps}
        assert stayed == {t for t in tmps if viewers[t] > 1}
        if linked is not None:
            assert stayed == linked
        else:
            assert stayed and len(main.sub_blocks) > 1
        np.testing.assert_array_equal(interpret(after, arrays)["O"], want)


def test_a_tmp_that_main_views_twice_stays():
    """Only a root tmp that main views exactly once counts as main's own buffer."""
    before = program(fused("inout T[i, 0] fp32:I(1, 3):(3, 1)", "j", 3)).replace(
        "inout T[0, 0] fp32:I(4, 3):(3, 1)",
        "inout T[0, 0] fp32:I(4, 3):(3, 1)\n            in U = T[0, 0] fp32:I(4, 3):(3, 1)")
    assert "in U = T" in before
    assert_unchanged(before)


def test_the_clock_is_consulted_for_every_buffer(monkeypatch):
    """The compile-time budget can stop the pass inside one block: ``check_time`` runs with
    the block's path for every buffer it tries to move."""
    from benchmarks.compile_time import chain
    from stripe import lower

    paths: list[str] = []
    monkeypatch.setattr(localize, "check_time", paths.append)
    localize.run(lower(*chain(30, side=4)), localize.Options(), TARGET)
    assert paths.count("program/main") >= 29  # main's views of the 29 tmps
