"""place: before/after text, nested blocks, the too-big error, a placement property test."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ops_catalog import OPS_BY_NAME
from ops_catalog import random_inputs as catalogue_inputs
from passcheck import TARGET, check_pass
from test_pass_schedule import in_sram, staged

from stripe import interpret, parse_ir, print_ir, verify
from stripe.compiler import compile_program
from stripe.ir import Block
from stripe.passes import place, schedule
from stripe.passes.manager import random_inputs
from stripe.passes.transforms.placement import align_up


def run(text: str, **options: object) -> tuple[Block, Block]:
    return check_pass(place.run, text, place.Options(**options), tol=0)


def offsets(block: Block) -> dict[str, int]:
    return {b.name: b.offset for b in place.placement_report(block).buffers}


# before/after ------------------------------------------------------------------------------

EXPECTED = """#kernel #peak_SRAM=80
block []:1 ( // staged
    in X[0] fp32:I(16):(1):64 B
    out Y[0] fp32:I(16):(1):64 B
    none new S0<SRAM>[0] fp32:I(6):(1):24 B
    none new S1<SRAM>@0x40[0] fp32:I(4):(1):16 B
    none new S2<SRAM>[0] fp32:I(8):(1):32 B
) {"""


def test_buffers_live_at_once_get_disjoint_aligned_addresses() -> None:
    # S0 lives over phases 0..2, S1 over phase 1, S2 over phase 3 only: S2 reuses S0's bytes.
    _, after = run(staged([0, 1, 0, 2], [6, 4, 8]), alignment=64)
    text = print_ir(after.stmts[0].stmts[0])
    assert text.startswith(EXPECTED), text
    report = place.placement_report(after)
    assert report.peaks == {"SRAM": 80}
    assert str(report).splitlines()[1:] == [
        "SRAM            0       24  program/main/staged/S0",
        "SRAM           64       16  program/main/staged/S1",
        "SRAM            0       32  program/main/staged/S2",
        "peak SRAM: 80 B",
    ]


def test_without_alignment_buffers_pack_tightly() -> None:
    _, after = run(staged([0, 1, 0, 2], [6, 4, 8]))
    assert offsets(after) == {"S0": 0, "S1": 24, "S2": 0}
    assert "peak_SRAM=40" in after.stmts[0].stmts[0].tags


NESTED = """block []:1 ( // outer
    in X[0] fp32:I(4):(1)
    out Y[0] fp32:I(4):(1)
    none new A<SRAM>[0] fp32:I(4):(1)
    none new B<SRAM>[0] fp32:I(4):(1)
) {
    0: block [i:4] ( // fill
        in X[i] fp32:I(1):(1)
        out A[i] fp32:I(1):(1)
    ) { 0: $x = load(X) 1: A = store($x) }
    1: block []:1 ( // inner
        in A[0] fp32:I(4):(1)
        out Y[0] fp32:I(4):(1)
        none new T<SRAM>[0] fp32:I(4):(1)
    ) {
        0: block [i:4] ( // t
            in A[i] fp32:I(1):(1)
            out T[i] fp32:I(1):(1)
        ) { 0: $a = load(A) 1: T = store($a) }
        1: block [i:4] ( // y
            in T[i] fp32:I(1):(1)
            out Y[i] fp32:I(1):(1)
        ) { 0: $t = load(T) 1: Y = store($t) }
    }
    2: block [i:4] ( // b
        in X[i] fp32:I(1):(1)
        out B[i] fp32:I(1):(1)
    ) { 0: $x = load(X) 1: B = store($x) }
}"""


def test_a_child_avoids_the_parent_buffers_live_around_it() -> None:
    after = place.run(parse_ir(NESTED), place.Options(), TARGET)
    verify(after)
    # A is live over statements 0..1, so T (inside statement 1) goes above it; B (statement
    # 2 only) reuses A's bytes.
    assert offsets(after) == {"A": 0, "B": 0, "T": 16}
    assert "peak_SRAM=32" in after.tags
    assert "peak_SRAM=32" in after.stmts[1].tags


# negative cases ----------------------------------------------------------------------------


def test_programs_without_local_buffers_are_left_alone() -> None:
    before, after = run(staged([0, 1], [4, 4]).replace("<SRAM>", ""))
    assert after is before


def test_other_memories_and_unselected_blocks_are_left_alone() -> None:
    before, after = run(staged([0, 1], [4, 4]), locs=("L1",))
    assert after is before
    before, after = run(staged([0, 1], [4, 4]), exclude=("kernel",))
    assert after is before


def test_placing_twice_changes_nothing_more() -> None:
    _, once = run(staged([0, 1, 0, 2], [6, 4, 8]), alignment=32)
    assert place.run(once, place.Options(alignment=32), TARGET) is once


# failure -----------------------------------------------------------------------------------


def test_buffers_that_do_not_fit_name_the_block_and_the_sizes() -> None:
    with pytest.raises(place.PlacementError) as e:
        run(staged([0, 1], [256, 200], copies_first=True), mem_KiB=1)
    assert str(e.value) == ("block program/main/staged: SRAM buffers need 1824 B (1.78125 KiB), "
                            "more than mem_KiB 1 (buffer S1 at offset 1024)")
    assert (e.value.loc, e.value.end, e.value.limit) == ("SRAM", 1824, 1024)


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="alignment"):
        place.Options(alignment=0)
    with pytest.raises(ValueError, match="locs"):
        place.Options(locs=("",))


# properties --------------------------------------------------------------------------------

items_st = st.lists(st.tuples(st.integers(0, 300), st.integers(0, 9), st.integers(0, 9)),
                    min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(raw=items_st, alignment=st.sampled_from([1, 4, 16, 64]))
def test_first_fit_never_overlaps_live_buffers(raw: list[tuple[int, int, int]],
                                               alignment: int) -> None:
    items = [place.Item(f"b{k}", size, min(a, b), max(a, b))
             for k, (size, a, b) in enumerate(raw)]
    busy = [(0, 40)] if raw[0][0] % 2 else []
    at = place.first_fit(items, alignment, busy)
    for x in items:
        assert at[x.name] % alignment == 0
        if x.size:
            assert all(at[x.name] >= end or at[x.name] + x.size <= start for start, end in busy)
        for y in items:
            if x is not y and x.meets(y) and x.size and y.size:
                assert at[x.name] + x.size <= at[y.name] or at[y.name] + y.size <= at[x.name]
    # it fits: the peak is at most the sum of the sizes live at once, plus alignment slack
    bound = align_up(max([e for _, e in busy] + [0]), alignment)
    bound += sum(align_up(x.size, alignment) for x in items)
    assert max(at[x.name] + x.size for x in items) <= bound


@settings(max_examples=20, deadline=None)
@given(phases=st.lists(st.integers(0, 3), min_size=1, max_size=6),
       sizes=st.lists(st.integers(4, 40), min_size=4, max_size=4),
       alignment=st.sampled_from([1, 8, 64]))
def test_placed_programs_keep_results_and_live_buffers_never_share_bytes(
        phases: list[int], sizes: list[int], alignment: int) -> None:
    _, after = run(staged(phases, sizes), alignment=alignment, mem_KiB=1)
    kernel = after.stmts[0].stmts[0]
    refs = {r.into: r for r in kernel.refs if r.is_alloc}
    # first and last statement viewing each buffer, counted here independently
    spans: dict[str, tuple[int, int]] = {}
    for name in refs:
        users = [k for k, s in enumerate(kernel.stmts) if any(r.from_ == name for r in s.refs)]
        spans[name] = (min(users), max(users)) if users else (0, len(kernel.stmts) - 1)
    for a, ra in refs.items():
        assert ra.offset % alignment == 0 and ra.offset + ra.shape.byte_size <= 1024
        for b, rb in refs.items():
            if a < b and spans[a][0] <= spans[b][1] and spans[b][0] <= spans[a][1]:
                assert (ra.offset + ra.shape.byte_size <= rb.offset
                        or rb.offset + rb.shape.byte_size <= ra.offset)


def test_schedule_then_place_through_the_c_back_end() -> None:
    text = staged([0, 1, 2, 0], [8, 8, 8], copies_first=True)
    before = parse_ir(text)
    scheduled = schedule.run(before, schedule.Options(mem_KiB=1), TARGET)
    after = place.run(scheduled, place.Options(alignment=16, mem_KiB=1), TARGET)
    verify(after)
    # scheduled: one 32-byte buffer live at a time; in the original order all three are
    assert place.placement_report(after).peaks == {"SRAM": 32}
    unscheduled = place.run(before, place.Options(alignment=16, mem_KiB=1), TARGET)
    assert place.placement_report(unscheduled).peaks == {"SRAM": 96}
    inputs = random_inputs(before)
    want = interpret(before, inputs)["Y"]
    np.testing.assert_array_equal(interpret(after, inputs)["Y"], want)
    np.testing.assert_allclose(compile_program(after)(**inputs)["Y"], want, rtol=1e-6)


@pytest.mark.parametrize("name", ["softmax", "layer_norm", "concat"])
def test_catalogue_programs_keep_their_results_after_schedule_and_place(name: str) -> None:
    before = in_sram(name)
    scheduled = schedule.run(before, schedule.Options(mem_KiB=64), TARGET)
    after = place.run(scheduled, place.Options(alignment=64, mem_KiB=64), TARGET)
    assert after is not scheduled
    verify(after)
    assert place.placement_report(after).peaks["SRAM"] > 0
    inputs = catalogue_inputs(OPS_BY_NAME[name])
    want = interpret(before, inputs)
    got = interpret(after, inputs)
    compiled = compile_program(after)(**inputs)
    for out in want:
        np.testing.assert_array_equal(got[out], want[out], err_msg=out)
        np.testing.assert_allclose(compiled[out], want[out], rtol=1e-5, atol=1e-6)
