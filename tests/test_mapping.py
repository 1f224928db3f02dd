"""The mapping check (stripe.mapping): a target without host fallback maps every kernel onto
its declared units and memories, or compilation fails naming the block, what is unmapped
and the pass that should have mapped it. Hand-made configs, each missing one thing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import stripe
from stripe.config import ConfigError, list_configs, load_config
from stripe.ir import Block, Constant, DType, Location, Store
from stripe.mapping import MappingError, kernel_kind, unmapped
from stripe.passes.manager import run_pipeline

MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
SUM = "function (A[M, N]) -> (S) { S[m : M] = +(A[m, n]); }"
RELU = "function (A[M, N]) -> (B) { B = relu(A); }"
MAXPOOL = ("function (I[H, W]) -> (O) { O[x, y : H / 2, W / 2] = "
           ">(I[2 * x + i, 2 * y + j]), i < 2, j < 2; }")
MM_INPUTS = {"A": ((8, 6), "float32"), "B": ((6, 5), "float32")}
AB_INPUTS = {"A": ((6, 10), "float32")}

MEMORIES = """
memories:
  - {name: DRAM, size: 1GiB, main: true}
  - {name: SRAM, size: 256KiB}
"""
UNITS = """
units:
  - {name: PE, count: 2, runs: [contraction], reaches: [SRAM]}
  - {name: VPU, runs: [eltwise, reduction, fill, copy], reaches: [SRAM]}
  - {name: DMA, kind: transfer, reaches: [DRAM, SRAM]}
"""
# every kernel tiled, staged in SRAM by DMA, MACs on the PEs, the rest on the VPU
PASSES = """
passes:
  - {name: tile_mac, type: autotile, options: {reqs: [contraction, agg_op_add, comb_op_mul],
     outer_set: [tiles], inner_set: [tile, mac], max_total_size: 65536, tile_whole: true}}
  - {name: tile_rest, type: autotile, options: {reqs: [kernel], exclude: [tiles],
     outer_set: [tiles], inner_set: [tile, vec], max_total_size: 65536, tile_whole: true}}
  - {name: stage, type: cache, options: {reqs: [tile], mem_loc: SRAM, xfer_loc: DMA}}
  - {name: fills, type: assign_unit, options: {reqs: [cache_init], unit: VPU}}
  - {name: split_pes, type: partition_compute, options: {reqs: [mac], unit_name: PE}}
  - {name: pe, type: assign_unit, options: {reqs: [mac], unit: PE}}
  - {name: vpu, type: assign_unit, options: {reqs: [vec], unit: VPU}}
"""


def config(tmp_path: Path, *, memories: str = MEMORIES, units: str = UNITS,
           passes: str = PASSES, fallback: str = "false") -> Path:
    path = tmp_path / "accel.yaml"
    path.write_text(f"target: accel\n{memories}\ncompute: {{units: 2, host_fallback: "
                    f"{fallback}}}\n{units}\n{passes}")
    return path


def refused(path: Path, source: str = MATMUL,
            inputs: dict | None = None) -> MappingError:
    with pytest.raises(MappingError) as e:
        stripe.compile(source, inputs or MM_INPUTS, target=str(path))
    return e.value


def test_the_complete_config_maps_and_runs(tmp_path: Path):
    path = config(tmp_path)
    rng = np.random.default_rng(3)
    a = rng.standard_normal((8, 6)).astype(np.float32)
    b = rng.standard_normal((6, 5)).astype(np.float32)
    prog = stripe.compile(MATMUL, {"A": a, "B": b}, target=str(path))
    assert unmapped(prog.ir, load_config(path).target) == []
    np.testing.assert_allclose(prog(A=a, B=b)["C"], a @ b, rtol=1e-5, atol=1e-5)
    assert prog.stats()["SRAM"]["bytes_in"] == (8 * 6 + 6 * 5) * 4
    for source in (SUM, RELU):
        prog = stripe.compile(source, AB_INPUTS, target=str(path))
        assert unmapped(prog.ir, load_config(path).target) == []


def test_a_config_that_forgets_the_dma(tmp_path: Path):
    units = UNITS.replace("  - {name: DMA, kind: transfer, reaches: [DRAM, SRAM]}\n", "")
    e = refused(config(tmp_path, units=units))
    assert isinstance(e, stripe.CompileError)
    assert "a transfer block runs on 'DMA', which is not a declared unit" in e.what
    assert e.path.startswith("program/main/kernel_") and "cache_" in e.path
    assert "target accel has no host fallback" in str(e)
    # no declared transfer unit: no pass can be named, and the message says so
    assert e.passes == () and "no pass of the pipeline names a unit" in str(e)


def test_a_memory_no_unit_reaches(tmp_path: Path):
    """Without the staging pass the PEs would read DRAM, which they do not reach."""
    passes = "\n".join(line for line in PASSES.splitlines() if "name: stage" not in line)
    e = refused(config(tmp_path, passes=passes))
    assert "accesses 'C' in DRAM, which VPU does not reach (it reaches SRAM)" in e.what
    # the passes that name SRAM (none left) are the ones that should have staged it
    assert e.passes == () and "no pass of the pipeline names SRAM" in str(e)
    assert "more unmapped" in str(e) and len(e.problems) >= 2


def test_a_memory_no_unit_reaches_names_the_staging_pass(tmp_path: Path):
    """The staging pass is there but selects nothing: the error names it."""
    e = refused(config(tmp_path, passes=PASSES.replace("reqs: [tile], mem_loc",
                                                       "reqs: [nothing], mem_loc")))
    assert "in DRAM, which" in e.what
    assert "pass 'stage' (passes[2], type cache)" in e.passes


def test_a_kernel_kind_the_unit_does_not_run(tmp_path: Path):
    units = UNITS.replace("runs: [eltwise, reduction, fill, copy]", "runs: [eltwise, fill, copy]")
    e = refused(config(tmp_path, units=units), SUM, AB_INPUTS)
    assert "a reduction kernel runs on VPU, which runs eltwise, fill, copy" in e.what
    # no unit runs reductions, so no pass can be blamed by unit name
    assert e.passes == ()


def test_a_kernel_on_no_unit_names_the_pass_that_should_have_placed_it(tmp_path: Path):
    passes = PASSES.replace("{reqs: [mac], unit: PE}", "{reqs: [nothing], unit: PE}")
    passes = passes.replace("{reqs: [mac], unit_name: PE}", "{reqs: [nothing], unit_name: PE}")
    e = refused(config(tmp_path, passes=passes))
    assert "a contraction kernel runs on no unit (units that run it: PE)" in e.what
    assert e.passes == ("pass 'split_pes' (passes[4], type partition_compute)",
                        "pass 'pe' (passes[5], type assign_unit)")


def test_a_transfer_on_a_compute_unit(tmp_path: Path):
    passes = PASSES.replace("xfer_loc: DMA", "xfer_loc: VPU")
    e = refused(config(tmp_path, passes=passes))
    assert "a transfer block runs on VPU, a compute unit, not a transfer unit" in e.what


def test_no_main_memory_is_refused_when_the_config_loads(tmp_path: Path):
    memories = MEMORIES.replace(", main: true", "")
    with pytest.raises(ConfigError) as e:
        load_config(config(tmp_path, memories=memories))
    assert "no memory is marked 'main: true'" in str(e.value) and e.value.line is not None


def test_with_host_fallback_nothing_is_checked(tmp_path: Path):
    path = config(tmp_path, passes="passes: []", fallback="true")
    prog = stripe.compile(MATMUL, MM_INPUTS, target=str(path))
    assert unmapped(prog.ir, load_config(path).target)  # unmapped, and allowed


def test_the_check_runs_at_the_end_of_run_pipeline(tmp_path: Path):
    path = config(tmp_path, passes="passes: []")
    with pytest.raises(MappingError) as e:
        run_pipeline(stripe.lower(MATMUL, MM_INPUTS), load_config(path))
    assert e.value.path == "program/main/kernel_0"
    assert "a fill kernel runs on no unit (units that run it: VPU)" in e.value.what


@pytest.mark.parametrize("source, inputs, kinds", [
    (MATMUL, MM_INPUTS, ["fill", "contraction"]),
    (SUM, AB_INPUTS, ["fill", "reduction"]),
    (RELU, AB_INPUTS, ["eltwise"]),
    (MAXPOOL, {"I": ((6, 8), "float32")}, ["fill", "reduction"]),
])
def test_kernel_kinds(source: str, inputs: dict, kinds: list[str]):
    main = stripe.lower(source, inputs).stmts[0]
    assert [kernel_kind(k) for k in main.sub_blocks] == kinds


def test_the_cpu_configs_keep_their_host_fallback():
    for name in list_configs():
        if name.startswith("cpu_"):
            assert load_config(name).target.compute.host_fallback is True


def test_a_start_block_is_checked_as_part_of_the_block_it_starts(tmp_path: Path):
    """start_fresh puts a block that stores the identity before a block with fresh views;
    the C back end runs it inside that block's loops, so it runs on that block's unit."""
    path = config(tmp_path)
    target = load_config(path).target
    prog = stripe.compile(MATMUL, MM_INPUTS, target=str(path))
    main = prog.ir.stmts[0]
    kernel = main.sub_blocks[1]
    k, out = next((k, s) for k, s in enumerate(kernel.stmts)
                  if isinstance(s, Block) and "cache_out" in s.tags)
    start = Block(name=f"{out.name}_fresh", idxs=out.idxs,
                  refs=tuple(r for r in out.refs if r.dir.writes),
                  stmts=(Constant("$zero", 0.0, DType.FLOAT32), Store("$zero", "C")),
                  tags=frozenset({"fresh_start"}))

    def with_start(before: Block) -> Block:
        stmts = kernel.stmts[:k] + (start, before) + kernel.stmts[k + 1:]
        new_main = main.replace(stmts=(main.stmts[0], kernel.replace(stmts=stmts)))
        return prog.ir.replace(stmts=(new_main,))

    assert unmapped(with_start(out), target) == []  # on the DMA, as a transfer
    # before a block on no unit, it is unmapped as that block is
    problems = unmapped(with_start(out.replace(location=Location())), target)
    assert [p.path.rsplit("/", 1)[1] for p in problems] == [start.name, out.name]
    assert all("a transfer block runs on no unit" in p.what for p in problems)


def test_a_unit_instance_past_the_count(tmp_path: Path):
    """Shares on more PEs than the config declares (num_parts 4, PE count 2)."""
    passes = PASSES.replace("{reqs: [mac], unit_name: PE}", "{reqs: [mac], unit_name: PE, "
                                                            "num_parts: 4}")
    e = refused(config(tmp_path, passes=passes))
    assert "a contraction kernel runs on PE[3], but PE has 2 instances" in e.what
    assert "pass 'split_pes' (passes[4], type partition_compute)" in e.passes
