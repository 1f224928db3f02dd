"""The performance model (stripe.perfmodel, docs/perfmodel.md): its numbers for a small
staged matmul worked out by hand, the bound flipping with bandwidth, double buffering, what
is not modelled, and the model of a real pipeline agreeing with the measured counters."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

import stripe
from stripe import perfmodel
from stripe.compiler import compile_program
from stripe.irparser import parse_ir
from stripe.target import Compute, Memory, Target, Unit

# A 4x8 @ 8x4 float32 matmul in two tiles of 2 rows (t). Each execution of the stage copies
# A's 2x8 rows (64 B) and all of B (128 B) into SRAM, fills the 2x4 C tile (8 ops on the
# VPU), runs 2x4x8 = 64 MACs on the 2 PEs (one row each: PE[m]) and copies the C tile
# (32 B) back to DRAM.
STAGED_MATMUL = """#program
block []:1 ( // program
    #user in new A[0, 0] fp32:I(4, 8):(8, 1)
    #user in new B[0, 0] fp32:I(8, 4):(4, 1)
    #user out new C[0, 0] fp32:I(4, 4):(4, 1)
) {
    0: #main
    block []:1 ( // main
        in A[0, 0] fp32:I(4, 8):(8, 1)
        in B[0, 0] fp32:I(8, 4):(4, 1)
        out C[0, 0] fp32:I(4, 4):(4, 1)
    ) {
        0: #agg_op_add #comb_op_mul #contraction #kernel #scheduled
        block [t:2]:2 ( // mm
            in A[2*t, 0] fp32:I(2, 8):(8, 1)
            in B[0, 0] fp32:I(8, 4):(4, 1)
            out C[2*t, 0] fp32:I(2, 4):(4, 1)
            none new A_s<SRAM>[0, 0] fp32:I(2, 8):(8, 1)
            none new B_s<SRAM>[0, 0] fp32:I(8, 4):(4, 1)
            none new C_s<SRAM>[0, 0] fp32:I(2, 4):(4, 1)
        ) {
            0: #transfer
            block<DMA> [i:2, j:8]:16 ( // in_a
                in A[i, j] fp32:I(1, 1):(8, 1)
                out A_s[i, j] fp32:I(1, 1):(8, 1)
            ) {
                0: $x = load(A)
                1: A_s = store($x)
            }
            1: #transfer
            block<DMA> [i:8, j:4]:32 ( // in_b
                in B[i, j] fp32:I(1, 1):(4, 1)
                out B_s[i, j] fp32:I(1, 1):(4, 1)
            ) {
                0: $x = load(B)
                1: B_s = store($x)
            }
            2: block<VPU> [i:2, j:4]:8 ( // fill
                out C_s[i, j] fp32:I(1, 1):(4, 1)
            ) {
                0: $z = (fp32)0.0
                1: C_s = store($z)
            }
            3: block<PE[m]> [m:2, n:4, k:8]:64 ( // mac
                in A_s[m, k] fp32:I(1, 1):(8, 1)
                in B_s[k, n] fp32:I(1, 1):(4, 1)
                out C_s[m, n]:add fp32:I(1, 1):(4, 1)
            ) {
                0: $a = load(A_s)
                1: $b = load(B_s)
                2: $c = mul:fp32($a, $b)
                3: C_s = store($c)
            }
            4: #transfer
            block<DMA> [i:2, j:4]:8 ( // out_c
                in C_s[i, j] fp32:I(1, 1):(4, 1)
                out C[i, j] fp32:I(1, 1):(4, 1)
            ) {
                0: $x = load(C_s)
                1: C = store($x)
            }
        }
    }
}
"""

DRAM = Memory("DRAM", 1 << 20, bandwidth=8, latency=10, main=True)
SRAM = Memory("SRAM", 4096, bandwidth=32, latency=1)
UNITS = (Unit("PE", count=2, runs=("contraction",), reaches=("SRAM",), macs_per_cycle=4),
         Unit("VPU", runs=("fill",), reaches=("SRAM",), ops_per_cycle=2),
         Unit("DMA", kind="transfer", reaches=("DRAM", "SRAM"), bytes_per_cycle=16))
TARGET = Target("small", (DRAM, SRAM), Compute(units=2, clock_mhz=500), (), UNITS)


def _model(target: Target, text: str = STAGED_MATMUL) -> dict:
    prog = compile_program(parse_ir(text), target=target)
    a = np.arange(32, dtype=np.float32).reshape(4, 8)
    b = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)
    np.testing.assert_allclose(prog(A=a, B=b)["C"], a @ b, rtol=1e-6)
    stats = prog.stats()
    assert "model" in stats
    return stats["model"]


def test_the_model_of_a_staged_matmul_by_hand():
    m = _model(TARGET)
    # work: 2 executions x 64 MACs on 2 PEs of 4 MACs/cycle; 2 x 8 fill ops on 1 VPU of 2
    compute = 2 * 64 / (4 * 2) + 2 * 8 / 2  # 16 + 8
    # traffic: 2 x (64 + 128 + 32) = 448 B through DRAM (and SRAM), 3 transfers each time
    dram = 448 / 8 + 10 * 6  # 56 busy + 60 latency = 116
    sram = 448 / 32 + 1 * 6  # 20
    dma = 448 / 16           # 28
    assert (m["units"]["PE"]["macs"], m["units"]["VPU"]["ops"],
            m["units"]["DMA"]["bytes"]) == (128, 16, 448)
    [stage] = m["stages"]
    assert (stage["name"], stage["kind"], stage["executions"]) == ("mm", "stage", 2)
    assert stage["compute_cycles"] == compute == 24
    assert stage["transfer_cycles"] == max(dram, sram, dma) == 116
    assert stage["cycles"] == m["cycles"] == 24 + 116  # not overlapped: the sum
    assert stage["bound"] == "DRAM"
    assert m["seconds"] == pytest.approx(140 / 500e6)
    assert m["units"]["PE"]["busy_cycles"] == 16
    assert m["units"]["PE"]["utilisation"] == pytest.approx(16 / 140, abs=1e-6)
    assert m["units"]["DMA"]["utilisation"] == pytest.approx(28 / 140, abs=1e-6)
    assert m["memories"]["DRAM"] == {"main": True, "bytes": 448, "transfers": 6, "peak_bytes": 0,
                                     "busy_cycles": 56, "utilisation": 0.4}
    assert m["memories"]["SRAM"]["peak_bytes"] == (16 + 32 + 8) * 4  # A_s, B_s, C_s
    assert m["traffic"] == "measured" and m["not_modelled"] == []


def test_the_bound_flips_from_memory_to_compute_with_bandwidth():
    fast = dataclasses.replace(TARGET, memories=(
        dataclasses.replace(DRAM, bandwidth=64, latency=0),
        dataclasses.replace(SRAM, bandwidth=64, latency=0)))
    fast = dataclasses.replace(fast, unit_decls=UNITS[:2] + (
        dataclasses.replace(UNITS[2], bytes_per_cycle=64),))
    m = _model(fast)
    [stage] = m["stages"]
    assert stage["transfer_cycles"] == 448 / 64 == 7
    assert stage["bound"] == "compute"
    assert m["cycles"] == 24 + 7


def test_a_double_buffered_stage_overlaps_transfers_with_compute():
    text = STAGED_MATMUL.replace("#contraction #kernel #scheduled",
                                 f"#contraction #{perfmodel.OVERLAP_TAG} #kernel #scheduled")
    m = _model(TARGET, text)
    [stage] = m["stages"]
    assert stage["overlapped"] and stage["bound"] == "DRAM"
    # max(24, 116), plus the shorter part of one of the 2 executions (the pipeline's fill)
    assert stage["cycles"] == 116 + 24 / 2 < 24 + 116


def test_what_has_no_numbers_is_reported_not_guessed():
    bare = dataclasses.replace(
        TARGET, memories=(dataclasses.replace(DRAM, bandwidth=0), SRAM),
        unit_decls=(dataclasses.replace(UNITS[0], macs_per_cycle=0),) + UNITS[1:],
        compute=Compute(units=2))
    m = _model(bare)
    assert m["seconds"] is None
    assert m["units"]["PE"]["busy_cycles"] is None and m["units"]["PE"]["utilisation"] is None
    assert m["memories"]["DRAM"]["busy_cycles"] is None
    notes = " | ".join(m["not_modelled"])
    assert "DRAM: no bandwidth given" in notes and "448 B" in notes
    assert "PE: 128 macs with no macs_per_cycle" in notes
    assert "clock_mhz" in notes
    # what is left: the VPU (8) and the SRAM and DMA transfers (max(20, 28))
    assert m["stages"][0]["cycles"] == 8 + 28


def test_work_on_no_declared_unit_is_host_work():
    text = STAGED_MATMUL.replace("block<VPU> [i:2, j:4]", "block [i:2, j:4]")
    m = _model(TARGET, text)
    assert any(n.startswith("host: 16 ops on no declared unit") and "mm" in n
               for n in m["not_modelled"])
    assert m["stages"][0]["compute_cycles"] == 16


def test_work_located_without_a_bank_runs_on_one_instance():
    """The same MACs on ``PE`` (no bank) run on one of the 2 PEs: twice the time, and the
    utilisation (against both PEs) is the same work over the longer program."""
    m = _model(TARGET, STAGED_MATMUL.replace("block<PE[m]>", "block<PE>"))
    assert m["units"]["PE"]["busy_cycles"] == 2 * 64 / 4 == 32
    assert m["cycles"] == 32 + 8 + 116
    assert m["units"]["PE"]["utilisation"] == pytest.approx(16 / 156, abs=1e-6)


def test_a_target_without_units_has_no_model():
    prog = compile_program(parse_ir(STAGED_MATMUL),
                           target=dataclasses.replace(TARGET, unit_decls=()))
    prog(A=np.zeros((4, 8), np.float32), B=np.zeros((8, 4), np.float32))
    assert "model" not in prog.stats() and "SRAM" in prog.stats()


def test_the_model_before_any_call_derives_the_traffic_from_the_ir():
    # (a C text of its own: a module loaded before keeps the counters of its last call)
    prog = compile_program(parse_ir(STAGED_MATMUL.replace("// mm", "// mm_uncalled")),
                           target=TARGET)
    m = prog.stats()["model"]
    assert m["traffic"] == "derived" and m["cycles"] == 140


def test_the_profile_counts_points_under_constraints_exactly():
    """A ragged last tile: 5 rows in tiles of 2 -> the constraint cuts the third tile to one
    row; the IR's counts (isl) are the executed points, as the C code's counters are."""
    text = STAGED_MATMUL.replace("block [t:2]:2 ( // mm", "block [t:3]:3 ( // mm")
    text = text.replace("block<PE[m]> [m:2, n:4, k:8]:64 ( // mac\n",
                        "block<PE[m]> [m:2, n:4, k:8, t = t:1]:64 ( // mac\n"
                        "                4 - 2*t - m >= 0\n")
    prof = perfmodel.profile(parse_ir(text), TARGET)
    [g] = prof.groups
    assert g.work[("PE", "macs")] == (2 + 2 + 1) * 4 * 8


NPU_SMALL = """
target: npu_small
memories:
  - {name: DRAM, size: 1GiB, line: 64, bandwidth: 16, latency: 100, main: true}
  - {name: SRAM, size: 64KiB, line: 64, banks: 2, bandwidth: 64, latency: 2}
compute: {units: 2, vector_width: 64, clock_mhz: 1000}
units:
  - {name: PE, count: 2, runs: [contraction], reaches: [SRAM], macs_per_cycle: 16}
  - {name: DMA, kind: transfer, reaches: [DRAM, SRAM], bytes_per_cycle: 32}
cflags: [-O2]
passes:
  - {name: tile_sram, type: autotile, options: {reqs: [contraction], outer_set: [sram_tiles],
     inner_set: [sram_tile], max_total_size: 8192, units: 1, only_po2: true}}
  - {name: split_pes, type: partition_compute,
     options: {reqs: [sram_tile], unit_name: PE, inner_set: [pe_share]}}
  - {name: stage, type: cache, options: {reqs: [sram_tile], mem_loc: SRAM, xfer_loc: DMA}}
  - {name: schedule, type: schedule, options: {reqs: [sram_tiles], mem_loc: SRAM,
     xfer_loc: DMA}}
  - {name: place, type: place, options: {reqs: [all], locs: [SRAM]}}
"""


def test_a_compiled_pipeline_models_its_measured_traffic(tmp_path: Path, rng):
    """A 32x48 @ 48x40 matmul through a small NPU pipeline: the model's bytes per memory are
    the measured counters, the IR-derived transfers agree with the measured ones, the MACs
    are the matmul's, and the program's cycles are the sum of its outermost groups."""
    config = tmp_path / "npu_small.yaml"
    config.write_text(NPU_SMALL)
    prog = stripe.compile("function (A[M, K], B[K, N]) -> (C) "
                          "{ C[m, n : M, N] = +(A[m, k] * B[k, n]); }",
                          {"A": ((32, 48), "float32"), "B": ((48, 40), "float32")},
                          target=str(config))
    a = rng.standard_normal((32, 48), dtype=np.float32)
    b = rng.standard_normal((48, 40), dtype=np.float32)
    np.testing.assert_allclose(prog(A=a, B=b)["C"], a @ b, rtol=1e-4, atol=1e-4)
    stats = prog.stats()
    m = stats["model"]
    assert m["units"]["PE"]["macs"] == 32 * 48 * 40
    assert m["memories"]["DRAM"]["bytes"] == (stats["main"]["bytes_in"]
                                              + stats["main"]["bytes_out"])
    assert m["memories"]["SRAM"]["bytes"] == (stats["SRAM"]["bytes_in"]
                                              + stats["SRAM"]["bytes_out"])
    prof = perfmodel.profile(prog.ir, stripe.load_config(str(config)).target)
    assert prof.total("transfers_in", "SRAM") == stats["SRAM"]["transfers"]
    assert prof.total("bytes_in", "SRAM") == stats["SRAM"]["bytes_in"]
    stages = [s for s in m["stages"] if s["kind"] == "stage"]
    assert stages and all(s["bound"] in ("compute", "DRAM", "SRAM", "DMA") for s in stages)
    top = sum(s["cycles"] for s in m["stages"] if s["depth"] == 0)
    assert m["cycles"] == pytest.approx(top)
    pe = m["units"]["PE"]
    assert pe["busy_cycles"] == 32 * 48 * 40 / (16 * 2)
    assert 0 < pe["utilisation"] < 1


def test_perfmodel_md_shows_the_model_of_the_npu_matmul(rng):
    """The example in docs/perfmodel.md is what the model prints for npu_example."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "perfmodel.md").read_text()
    rest = text[text.index("## An example"):]
    start = rest.index("```\n") + 4
    shown = rest[start:rest.index("```", start)]
    prog = stripe.compile("function (A[M, K], B[K, N]) -> (C) "
                          "{ C[m, n : M, N] = +(A[m, k] * B[k, n]); }",
                          {"A": ((64, 96), "float32"), "B": ((96, 80), "float32")},
                          target="npu_example")
    prog(A=rng.standard_normal((64, 96), dtype=np.float32),
         B=rng.standard_normal((96, 80), dtype=np.float32))
    assert perfmodel.format_model(prog.stats()["model"]) + "\n" == shown


# Two levels of local memory: each outer stage copies 4 floats of X from DRAM into a global
# buffer (GB), runs an inner stage twice (copy 2 floats into a PE buffer (PB), square them
# on the PE, copy them back to GB), then copies the 4 results to Y in DRAM.
NESTED = """#program
block []:1 ( // program
    #user in new X[0] fp32:I(8):(1)
    #user out new Y[0] fp32:I(8):(1)
) {
    0: #main
    block []:1 ( // main
        in X[0] fp32:I(8):(1)
        out Y[0] fp32:I(8):(1)
    ) {
        0: #eltwise #kernel #scheduled
        block [t:2]:2 ( // outer
            in X[4*t] fp32:I(4):(1)
            out Y[4*t] fp32:I(4):(1)
            none new G<GB>[0] fp32:I(4):(1)
            none new H<GB>[0] fp32:I(4):(1)
        ) {
            0: #transfer
            block<DMA> [i:4]:4 ( // x_to_g
                in X[i] fp32:I(1):(1)
                out G[i] fp32:I(1):(1)
            ) {
                0: $x = load(X)
                1: G = store($x)
            }
            1: #scheduled
            block [u:2]:2 ( // inner
                in G[2*u] fp32:I(2):(1)
                out H[2*u] fp32:I(2):(1)
                none new P<PB>[0] fp32:I(2):(1)
                none new Q<PB>[0] fp32:I(2):(1)
            ) {
                0: #transfer
                block<DMA> [i:2]:2 ( // g_to_p
                    in G[i] fp32:I(1):(1)
                    out P[i] fp32:I(1):(1)
                ) {
                    0: $x = load(G)
                    1: P = store($x)
                }
                1: block<PE> [i:2]:2 ( // square
                    in P[i] fp32:I(1):(1)
                    out Q[i] fp32:I(1):(1)
                ) {
                    0: $p = load(P)
                    1: $q = mul:fp32($p, $p)
                    2: Q = store($q)
                }
                2: #transfer
                block<DMA> [i:2]:2 ( // q_to_h
                    in Q[i] fp32:I(1):(1)
                    out H[i] fp32:I(1):(1)
                ) {
                    0: $x = load(Q)
                    1: H = store($x)
                }
            }
            2: #transfer
            block<DMA> [i:4]:4 ( // h_to_y
                in H[i] fp32:I(1):(1)
                out Y[i] fp32:I(1):(1)
            ) {
                0: $x = load(H)
                1: Y = store($x)
            }
        }
    }
}
"""


def test_a_nested_stage_is_the_compute_of_its_parent():
    """By hand: the inner stage runs 4 times: 8 squares on the PE (8 cycles) against 64 B
    through GB at 8 B/cycle (8 cycles): 16. The outer stage's compute is those 16 cycles,
    its transfers 64 B of DRAM at 2 B/cycle (32, the bound) and its own 64 B of GB (8). The
    GB's measured 128 B are shared as the IR moves them: 64 B each. The DMA gives no rate:
    it adds no limit and no note."""
    target = Target("two_levels", (Memory("DRAM", 1 << 20, bandwidth=2, main=True),
                                   Memory("GB", 1024, bandwidth=8),
                                   Memory("PB", 64, bandwidth=16)),
                    Compute(clock_mhz=100), (),
                    (Unit("PE", runs=("eltwise",), reaches=("PB",), ops_per_cycle=1),
                     Unit("DMA", kind="transfer", reaches=("DRAM", "GB", "PB"))))
    prog = compile_program(parse_ir(NESTED), target=target)
    x = np.arange(8, dtype=np.float32)
    np.testing.assert_array_equal(prog(X=x)["Y"], x * x)
    m = prog.stats()["model"]
    outer, inner = m["stages"]
    assert (inner["name"], inner["depth"], inner["executions"]) == ("inner", 1, 4)
    assert (inner["compute_cycles"], inner["transfer_cycles"], inner["cycles"]) == (8, 8, 16)
    assert (outer["compute_cycles"], outer["transfer_cycles"], outer["cycles"]) == (16, 32, 48)
    assert outer["bound"] == "DRAM" and m["cycles"] == 48
    assert m["memories"]["GB"]["bytes"] == 128 and m["memories"]["GB"]["busy_cycles"] == 16
    assert m["memories"]["GB"]["transfers"] == 2 * 2 + 4 * 2
    assert m["units"]["DMA"]["utilisation"] is None and m["not_modelled"] == []


def test_dsp_example_double_buffers_and_the_model_credits_the_overlap(tmp_path: Path, rng):
    """dsp_example's schedule double-buffers its tiles (the tag the schedule pass sets is
    the one the model reads); the same config without double buffering moves the same
    bytes and does the same work, and the model charges it the sum instead."""
    from stripe.passes import schedule

    assert perfmodel.OVERLAP_TAG == schedule.DOUBLE_BUFFERED
    serial = tmp_path / "dsp_serial.yaml"
    serial.write_text("target: dsp_serial\nextends: dsp_example\npasses:\n"
                      "  - {name: schedule, options: {double_buffer: false}}\n")
    src = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
    a = rng.standard_normal((64, 48), dtype=np.float32)
    b = rng.standard_normal((48, 40), dtype=np.float32)
    models = []
    for target in ("dsp_example", str(serial)):
        prog = stripe.compile(src, {"A": a, "B": b}, target=target)
        np.testing.assert_allclose(prog(A=a, B=b)["C"], a @ b, rtol=1e-4, atol=1e-4)
        stats = prog.stats()
        models.append(stats["model"])
        # the IR's count of the transfers into the TCM is the measured one
        assert prog._profile.total("transfers_in", "TCM") == stats["TCM"]["transfers"]
    overlapped, plain = models
    def work(m):
        return {n: {k: v for k, v in u.items() if k != "utilisation"}
                for n, u in m["units"].items()}

    assert work(overlapped) == work(plain)
    assert overlapped["memories"]["DDR"]["bytes"] == plain["memories"]["DDR"]["bytes"]
    [db] = [s for s in overlapped["stages"] if s["overlapped"]]
    [sq] = [s for s in plain["stages"] if s["name"] == db["name"]]
    assert not sq["overlapped"]
    c, t = db["compute_cycles"], db["transfer_cycles"]
    assert db["cycles"] == pytest.approx(max(c, t) + min(c, t) / db["executions"], abs=1e-3)
    assert sq["cycles"] == pytest.approx(sq["compute_cycles"] + sq["transfer_cycles"],
                                         abs=1e-3)
    assert db["cycles"] < sq["cycles"] and overlapped["cycles"] < plain["cycles"]


def _accelerator_configs() -> list[str]:
    return [name for name in stripe.list_configs()
            if not stripe.load_config(name).target.compute.host_fallback]


def _catalogue_ops() -> list[str]:
    """Reductions with elementwise steps and pooling by default (the matmul test below has
    a contraction); the whole catalogue in the long profile."""
    from hypothesis import settings
    from ops_catalog import OPS

    if settings._current_profile == "long":
        return [op.name for op in OPS]
    return ["softmax", "maxpool2x2"]


@pytest.mark.parametrize("name", _accelerator_configs())
def test_every_accelerator_config_models_all_of_the_catalogue(name: str):
    """On a config without host fallback every kernel runs on a unit, so the model prices
    all of it (nothing on the host), and the traffic the IR derives is the measured one."""
    from ops_catalog import OPS_BY_NAME, random_inputs

    for op_name in _catalogue_ops():
        op = OPS_BY_NAME[op_name]
        prog = stripe.compile(op.source, op.inputs, target=name)
        prog(**random_inputs(op))
        stats = prog.stats()
        m = stats["model"]
        assert not [n for n in m["not_modelled"] if n.startswith("host")], (op_name, m)
        for memory, row in stats.items():
            if memory in ("model", "stencil"):
                continue
            for what in ("bytes_in", "bytes_out"):
                assert prog._profile.total(what, memory) == row.get(what, 0), \
                    (op_name, memory, what)
            assert prog._profile.total("transfers_in", memory) == row.get("transfers", 0), \
                (op_name, memory)
        assert m["cycles"] > 0 and m["seconds"] > 0, op_name


@pytest.mark.parametrize("name", _accelerator_configs())
def test_every_accelerator_config_prices_the_macs_of_a_matmul(name: str, rng):
    prog = stripe.compile("function (A[M, K], B[K, N]) -> (C) "
                          "{ C[m, n : M, N] = +(A[m, k] * B[k, n]); }",
                          {"A": ((20, 36), "float32"), "B": ((36, 28), "float32")},
                          target=name)
    prog(A=rng.standard_normal((20, 36), dtype=np.float32),
         B=rng.standard_normal((36, 28), dtype=np.float32))
    m = prog.stats()["model"]
    assert sum(u.get("macs", 0) for u in m["units"].values()) == 20 * 36 * 28
    assert all(u["utilisation"] is None or 0 <= u["utilisation"] <= 1
               for u in m["units"].values())


@pytest.mark.parametrize("shape", [(1, 6, 7, 2), (2, 5, 3, 3)])
def test_points_are_counted_exactly_group_by_group(shape):
    """count_points splits a nest's dimensions into groups no constraint links; its count
    is isl's count of the whole set (a padded convolution: x with i, y with j)."""
    from stripe import poly

    conv = (Path(__file__).resolve().parent.parent / "examples" / "conv2d.tile").read_text()
    program = stripe.lower(conv, {"I": (shape, "float32"), "F": ((3, 3, shape[3], 4),
                                                                  "float32")})
    checked = 0
    for _, block in program.walk():
        for kernel in block.sub_blocks:
            if kernel.constraints:
                path = (program, block, kernel)
                nest = poly.nested_domain(path)
                assert perfmodel.count_points(nest) == int(nest.set.count_val().to_python())
                checked += 1
    n, x, y, c = shape
    assert checked == 1
    prof = perfmodel.profile(program, TARGET)
    taps = (3 * x - 2) * (3 * y - 2)  # (x, i) pairs inside the image, times (y, j) pairs
    assert sum(g.work.get(("", "macs"), 0) for g in prof.groups) == n * taps * c * 4


def test_stripe_run_stats_prints_the_model(tmp_path: Path, capsys: pytest.CaptureFixture):
    from stripe.cli import main

    config = tmp_path / "npu_small.yaml"
    config.write_text(NPU_SMALL)
    tile = tmp_path / "mm.tile"
    tile.write_text("function (A[M, K], B[K, N]) -> (C) "
                    "{ C[m, n : M, N] = +(A[m, k] * B[k, n]); }")
    assert main(["run", str(tile), "-i", "A=32x48", "-i", "B=48x40", "--target", str(config),
                 "--stats", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    counters, model = out.split("\nmodel: ")
    assert "SRAM" in counters and "bytes_in" in counters
    assert " cycles, " in model and "us at 1000 MHz (traffic measured)" in model
    lines = model.splitlines()
    assert any(line.startswith("PE ") and line.rstrip().endswith("%") for line in lines)
    stage_head = next(k for k, line in enumerate(lines) if line.startswith("stage"))
    assert lines[stage_head].split() == ["stage", "runs", "compute", "transfers", "cycles",
                                         "bound"]
    assert lines[stage_head + 1].endswith("not modelled")  # zeroing C on the host (fallback)
    assert lines[stage_head + 2].split()[-1] in ("compute", "DRAM", "SRAM", "DMA")
    assert lines[-1].startswith("not modelled: host: ")


@pytest.mark.parametrize("tag", ["", "#unit ", "#thread ", "#lane "])
def test_transfers_issued_at_once_by_concurrent_units_wait_once(tag: str):
    """The inner stage's 4 executions (2 per outer one) each copy into and out of the PE
    buffer: 8 transfers touch GB. Untagged they wait for GB's latency (5) one after another;
    when ``u`` numbers concurrent units or threads, the 2 executions of one outer point
    issue theirs at once: 4 waits."""
    target = Target("two_levels", (Memory("DRAM", 1 << 20, bandwidth=2, main=True),
                                   Memory("GB", 1024, bandwidth=8, latency=5),
                                   Memory("PB", 64, bandwidth=16, latency=3)),
                    Compute(clock_mhz=100), (),
                    (Unit("PE", count=2, runs=("eltwise",), reaches=("PB",), ops_per_cycle=1),
                     Unit("DMA", kind="transfer", reaches=("DRAM", "GB", "PB"))))
    text = NESTED.replace("block [u:2]:2 ( // inner", f"block [{tag}u:2]:2 ( // inner")
    prof = perfmodel.profile(parse_ir(text), target)
    waits = 8 if not tag else 4
    assert prof.groups[1].waits == {"GB": waits, "PB": waits}
    assert prof.groups[1].transfers == {"GB": 8, "PB": 8}  # reported: every transfer
    m = perfmodel.model(prof, target, {})
    inner = m["stages"][1]
    assert inner["transfer_cycles"] == max(64 / 8 + 5 * waits, 64 / 16 + 3 * waits)
