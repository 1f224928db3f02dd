"""schedule: before/after text, dependency graph, the too-big error, interpreter and C equality."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ops_catalog import OPS_BY_NAME
from ops_catalog import random_inputs as catalogue_inputs
from passcheck import TARGET, check_pass, run_and_check

import stripe
from stripe import interpret, parse_ir, print_ir
from stripe.compiler import compile_program
from stripe.config import load_config
from stripe.ir import Block, Location, with_field
from stripe.passes import schedule
from stripe.passes.manager import random_inputs, run_pipeline
from stripe.passes.select import Selection, rewrite

# programs ----------------------------------------------------------------------------------


def _copy(p: int, b: int, m: int) -> str:
    return f"""#transfer block [i:{m}] ( // copy_{p}
                in X[{m * p} + i] fp32:I(1):(1)
                out S{b}[i] fp32:I(1):(1)
            ) {{
                0: $x = load(X)
                1: S{b} = store($x)
            }}"""


def _use(p: int, b: int, m: int) -> str:
    return f"""block [i:{m}] ( // use_{p}
                in S{b}[i] fp32:I(1):(1)
                out Y[{m * p} + i] fp32:I(1):(1)
            ) {{
                0: $s = load(S{b})
                1: $t = mul:fp32($s, $s)
                2: Y = store($t)
            }}"""


def staged(phases: Sequence[int], sizes: Sequence[int], m: int = 4,
           order: Sequence[int] | None = None, copies_first: bool = False) -> str:
    """A program whose kernel ``staged`` runs, per phase ``p``, a copy block (``transfer``)
    filling SRAM buffer ``S<phases[p]>`` (``sizes[b] >= m`` elements) from ``X``, then a
    block writing ``Y`` from it. ``order`` permutes the phases (copy and use stay paired);
    ``copies_first`` puts every copy before every use."""
    n = m * len(phases)
    allocs = "\n".join(f"none new S{b}<SRAM>[0] fp32:I({s}):(1)" for b, s in enumerate(sizes))
    run = list(order if order is not None else range(len(phases)))
    copies = [_copy(p, phases[p], m) for p in run]
    uses = [_use(p, phases[p], m) for p in run]
    stmts = copies + uses if copies_first else [s for pair in zip(copies, uses) for s in pair]
    body = "\n".join(f"{k}: {s}" for k, s in enumerate(stmts))
    return f"""#program
block []:1 ( // program
    #user in new X[0] fp32:I({n}):(1)
    #user out new Y[0] fp32:I({n}):(1)
) {{
    0: #main
    block []:1 ( // main
        in X[0] fp32:I({n}):(1)
        out Y[0] fp32:I({n}):(1)
    ) {{
        0: #kernel
        block []:1 ( // staged
            in X[0] fp32:I({n}):(1)
            out Y[0] fp32:I({n}):(1)
            {allocs}
        ) {{
            {body}
        }}
    }}
}}"""


def run(text: str, **options: object) -> tuple[Block, Block]:
    return check_pass(schedule.run, text, schedule.Options(**options), tol=0)


def kernel_text(block: Block) -> str:
    return print_ir(block.stmts[0].stmts[0])


# before/after ------------------------------------------------------------------------------

def test_copy_ins_move_next_to_their_users_to_fit() -> None:
    # Original order: copy_0, copy_1, use_0, use_1 -- both 1 KiB buffers live at once.
    before, after = run(staged([0, 1], [256, 256], m=256, copies_first=True), mem_KiB=1)
    assert [s.name for s in before.stmts[0].stmts[0].stmts] == [
        "copy_0", "copy_1", "use_0", "use_1"]
    assert kernel_text(after) == EXPECTED_TWO_TILES


EXPECTED_TWO_TILES = """#kernel #scheduled #working_set_SRAM=1024
block []:1 ( // staged
    in X[0] fp32:I(512):(1):2 KiB
    out Y[0] fp32:I(512):(1):2 KiB
    none new S0<SRAM>[0] fp32:I(256):(1):1 KiB
    none new S1<SRAM>[0] fp32:I(256):(1):1 KiB
) {
    0: #transfer
    block<DMA> [i:256]:256 ( // copy_0
        in X[i] fp32:I(1):(1):4 B
        out S0[i] fp32:I(1):(1):4 B
    ) {
        0: $x = load(X)
        1: S0 = store($x)
    }
    1: #deps=0
    block [i:256]:256 ( // use_0
        in S0[i] fp32:I(1):(1):4 B
        out Y[i] fp32:I(1):(1):4 B
    ) {
        0: $s = load(S0)
        1: $t = mul:fp32($s, $s)
        2: Y = store($t)
    }
    2: #transfer
    block<DMA> [i:256]:256 ( // copy_1
        in X[256 + i] fp32:I(1):(1):4 B
        out S1[i] fp32:I(1):(1):4 B
    ) {
        0: $x = load(X)
        1: S1 = store($x)
    }
    3: #deps=2
    block [i:256]:256 ( // use_1
        in S1[i] fp32:I(1):(1):4 B
        out Y[256 + i] fp32:I(1):(1):4 B
    ) {
        0: $s = load(S1)
        1: $t = mul:fp32($s, $s)
        2: Y = store($t)
    }
}
"""


def test_a_reused_buffer_keeps_its_order_and_records_the_dependencies() -> None:
    # S0 is filled twice: write-after-read and write-after-write edges keep the phases.
    _, after = run(staged([0, 0], [4]), xfer_loc="DMA0")
    kernel = after.stmts[0].stmts[0]
    assert [s.name for s in kernel.stmts] == ["copy_0", "use_0", "copy_1", "use_1"]
    assert [sorted(s.tags) for s in kernel.stmts] == [
        ["transfer"], ["deps=0"], ["deps=1", "transfer"], ["deps=2"]]
    assert kernel.stmts[0].location.name == "DMA0"
    assert "working_set_SRAM=16" in kernel.tags


def test_the_original_order_is_kept_when_it_is_already_best() -> None:
    _, after = run(staged([0, 1], [4, 4]))
    assert [s.name for s in after.stmts[0].stmts[0].stmts] == [
        "copy_0", "use_0", "copy_1", "use_1"]


def test_alignment_rounds_the_counted_sizes() -> None:
    _, after = run(staged([0], [3 + 1]), alignment=64)
    assert "working_set_SRAM=64" in after.stmts[0].stmts[0].tags


# negative cases ----------------------------------------------------------------------------


def test_blocks_without_managed_memory_are_left_alone() -> None:
    text = staged([0, 1], [4, 4]).replace("<SRAM>", "")
    before, after = run(text)
    assert after is before


def test_other_memories_and_unselected_blocks_are_left_alone() -> None:
    before, after = run(staged([0, 1], [4, 4]), mem_loc="L1")
    assert after is before
    before, after = run(staged([0, 1], [4, 4]), reqs=("contraction",))
    assert after is before


def test_running_twice_changes_nothing_more() -> None:
    _, once = run(staged([0, 1, 0], [4, 8]), mem_KiB=1)
    twice = schedule.run(once, schedule.Options(mem_KiB=1), TARGET)
    assert twice == once


# the dependency graph ----------------------------------------------------------------------

HALVES = """block []:1 ( // k
    in X[0] fp32:I(8):(1)
    out Y[0] fp32:I(8):(1)
    none new S<SRAM>[0] fp32:I(8):(1)
) {
    0: block [i:4] ( // low
        in X[i] fp32:I(1):(1)
        out S[i] fp32:I(1):(1)
    ) { 0: $x = load(X) 1: S = store($x) }
    1: block [i:4] ( // high
        in X[4 + i] fp32:I(1):(1)
        out S[4 + i] fp32:I(1):(1)
    ) { 0: $x = load(X) 1: S = store($x) }
    2: block [i:OVERLAP] ( // all
        in S[i] fp32:I(1):(1)
        out Y[i] fp32:I(1):(1)
    ) { 0: $s = load(S) 1: Y = store($s) }
}"""


def test_writes_to_disjoint_boxes_of_one_buffer_do_not_depend() -> None:
    g = schedule.dependency_graph(parse_ir(HALVES.replace("OVERLAP", "8")))
    assert sorted(g.edges) == [(0, 2), (1, 2)]
    g = schedule.dependency_graph(parse_ir(HALVES.replace("OVERLAP", "4")))
    assert sorted(g.edges) == [(0, 2)]


def test_scalar_uses_depend_on_their_definitions() -> None:
    block = parse_ir("""block []:1 ( // k
        in X[0] fp32:I(1):(1)
        out Y[0] fp32:I(1):(1)
    ) { 0: $x = load(X) 1: $c = (fp32)2.0 2: $y = mul:fp32($x, $c) 3: Y = store($y) }""")
    assert sorted(schedule.dependency_graph(block).edges) == [(0, 2), (1, 2), (2, 3)]


# failure -----------------------------------------------------------------------------------


def test_a_working_set_that_cannot_fit_names_the_block_and_the_sizes() -> None:
    with pytest.raises(schedule.WorkingSetError) as e:
        run(staged([0], [512]), mem_KiB=1)
    assert str(e.value) == ("block program/main/staged: working set 2 KiB (2048 B) of SRAM "
                            "exceeds mem_KiB 1 (at statement 0)")
    assert (e.value.path, e.value.needed, e.value.limit_kib) == ("program/main/staged", 2048, 1)


def test_nested_allocations_count_in_the_parent_working_set() -> None:
    inner = "block [i:256] ( // use_0\n none new T<SRAM>[0] fp32:I(256):(1)"
    text = staged([0], [256], m=256).replace("block [i:256] ( // use_0", inner)
    with pytest.raises(schedule.WorkingSetError, match="working set 2 KiB"):
        run(text, mem_KiB=1)


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="alignment"):
        schedule.Options(alignment=0)
    with pytest.raises(ValueError, match="mem_loc"):
        schedule.Options(mem_loc="")


# equivalence -------------------------------------------------------------------------------

phases_st = st.lists(st.integers(0, 2), min_size=1, max_size=5)


@settings(max_examples=25, deadline=None)
@given(phases=phases_st, data=st.data())
def test_random_staged_programs_keep_their_results(phases: list[int], data: st.DataObject) -> None:
    sizes = data.draw(st.lists(st.integers(4, 300), min_size=3, max_size=3))
    order = data.draw(st.permutations(range(len(phases))))
    before, after = run(staged(phases, sizes, order=order))
    kernel = after.stmts[0].stmts[0]
    peak = int(next(t for t in kernel.tags if t.startswith("working_set_SRAM=")).split("=")[1])
    original = schedule.Budget("SRAM", 1, 0).profile(
        before.stmts[0].stmts[0], range(2 * len(phases)))[0]
    assert peak <= original
    seen: set[str] = set()
    for s in kernel.stmts:  # every use follows its own copy
        assert s.name.startswith("copy") or s.name.replace("use", "copy") in seen
        seen.add(s.name)


def test_c_back_end_agrees_after_scheduling() -> None:
    before, after = run(staged([0, 1, 0, 2], [4, 8, 6], order=[1, 3, 0, 2]), mem_KiB=1)
    inputs = random_inputs(before)
    want = interpret(before, inputs)["Y"]
    np.testing.assert_allclose(compile_program(after)(**inputs)["Y"], want, rtol=1e-6)


# catalogue programs ------------------------------------------------------------------------

STAGED_OPS = ("avgpool2x2", "global_avgpool", "softmax", "layer_norm", "concat",
              "float64_chain")
"""Catalogue ops that keep allocations inside their kernels after the full_pool config."""


def _to_sram(block: Block, site: object) -> Block:
    refs = tuple(with_field(r, location=Location("SRAM")) if r.is_alloc else r
                 for r in block.refs)
    return block.replace(refs=refs)


def in_sram(op_name: str) -> Block:
    """The op through ``examples/full_pool``, its inner allocations labelled ``SRAM`` (a
    location is a label: the program computes the same)."""
    op = OPS_BY_NAME[op_name]
    program = stripe.lower(op.source, op.input_specs())
    program, _ = run_pipeline(program, load_config("examples/full_pool"))
    main = program.stmts[0]
    assert isinstance(main, Block)
    return program.replace(stmts=(rewrite(main, Selection(), _to_sram),))


@pytest.mark.parametrize("name", STAGED_OPS)
def test_catalogue_programs_keep_their_results(name: str) -> None:
    before = in_sram(name)
    after = run_and_check(schedule.run, before, schedule.Options(mem_KiB=64),
                          catalogue_inputs(OPS_BY_NAME[name]), tol=0)
    assert after is not before
