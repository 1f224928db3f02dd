"""Design-space exploration (stripe.explore, ``stripe explore``, docs/explore.md): a 2x2
study end to end, the cached rows, the parameter paths and their errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from stripe import explore as ex
from stripe.cli import main
from stripe.config import load_config

MATMUL = "function (A[M, K], B[K, N]) -> (C) { C[m, n : M, N] = +(A[m, k] * B[k, n]); }"
INPUTS = {"A": ((16, 24), "float32"), "B": ((24, 8), "float32")}

SMALL = """
target: small_npu
memories:
  - {name: DRAM, size: 1GiB, line: 64, bandwidth: 8, latency: 20, main: true}
  - {name: SRAM, size: 16KiB, line: 64, bandwidth: 32, latency: 1}
compute: {units: 2, vector_width: 32, clock_mhz: 500}
units:
  - {name: PE, count: 2, runs: [contraction], reaches: [SRAM], macs_per_cycle: 8}
  - {name: DMA, kind: transfer, reaches: [DRAM, SRAM], bytes_per_cycle: 16}
cflags: [-O1]
passes:
  - {name: tile_sram, type: autotile, options: {reqs: [contraction], outer_set: [sram_tiles],
     inner_set: [sram_tile], max_total_size: 2048, units: 1, only_po2: true}}
  - {name: split_pes, type: partition_compute,
     options: {reqs: [sram_tile], unit_name: PE, inner_set: [pe_share]}}
  - {name: stage, type: cache, options: {reqs: [sram_tile], mem_loc: SRAM, xfer_loc: DMA}}
  - {name: schedule, type: schedule, options: {reqs: [sram_tiles], mem_loc: SRAM,
     xfer_loc: DMA}}
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "small_npu.yaml"
    path.write_text(SMALL)
    return path


def test_a_2x2_study_end_to_end(config: Path, tmp_path: Path, capsys: pytest.CaptureFixture):
    """``stripe explore`` over DRAM bandwidth x PE throughput: four rows in the order of the
    values, a table, a CSV, a plot and the variant configs; the traffic does not depend on
    the two parameters, the cycles do, and the bound moves from DRAM to compute."""
    (tmp_path / "mm.tile").write_text(MATMUL)
    out = tmp_path / "out"
    argv = ["explore", str(config), str(tmp_path / "mm.tile"), "-i", "A=16x24",
            "-i", "B=24x8", "--set", "memories.DRAM.bandwidth=8,512",
            "--set", "units.PE.macs_per_cycle=1,8", "--out", str(out), "--jobs", "2"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    table = (out / "explore.md").read_text()
    assert table in printed
    lines = table.splitlines()
    assert lines[0].startswith("| memories.DRAM.bandwidth | units.PE.macs_per_cycle | cycles |")
    assert [line.split(" | ")[:2] for line in lines[2:]] == [
        ["| 8", "1"], ["| 8", "8"], ["| 512", "1"], ["| 512", "8"]]
    csv_rows = [r.split(",") for r in (out / "explore.csv").read_text().splitlines()]
    head = csv_rows[0]
    rows = [dict(zip(head, r)) for r in csv_rows[1:]]
    assert len(rows) == 4 and "error" not in head
    cycles = [float(r["cycles"]) for r in rows]
    assert len({r["dram_bytes"] for r in rows}) == 1 and int(rows[0]["dram_bytes"]) > 0
    assert cycles[1] < cycles[0] and cycles[3] < cycles[2]    # more MACs per cycle
    assert cycles[2] < cycles[0] and cycles[3] < cycles[1]    # more DRAM bandwidth
    assert rows[1]["bound"] == "DRAM" and rows[2]["bound"] == "compute"
    # 16x24x8 MACs on 2 PEs of 1 MAC per cycle: at least that many cycles
    assert cycles[2] >= 16 * 24 * 8 / 2
    assert (out / "explore.png").stat().st_size > 1000
    variants = sorted((out / "configs").iterdir())
    assert len(variants) == 4
    text = variants[1].read_text()
    assert "extends: " + str(config) in text and "{name: PE, macs_per_cycle: 8}" in text
    assert load_config(variants[1]).target.unit("PE").macs_per_cycle == 8


def test_rows_are_cached_and_the_table_is_deterministic(config: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch):
    sets = ["memories.SRAM.bandwidth=16,64", "units.DMA.bytes_per_cycle=4,16"]
    first = ex.explore(str(config), MATMUL, INPUTS, sets, out_dir=tmp_path / "a", jobs=1,
                       plot=False)

    def no_compile(job):  # a second study of the same variants compiles nothing
        raise AssertionError("compiled again")

    monkeypatch.setattr(ex, "_measure", no_compile)
    second = ex.explore(str(config), MATMUL, INPUTS, sets, out_dir=tmp_path / "b", jobs=1,
                        plot=False)
    assert ex.table_text(first) == ex.table_text(second)
    assert (tmp_path / "a" / "explore.csv").read_bytes() == \
        (tmp_path / "b" / "explore.csv").read_bytes()
    assert not (tmp_path / "b" / "explore.png").exists()
    dma = [r["DMA_util"] for r in first.rows]
    assert dma[0] > dma[1] and dma[2] > dma[3]  # a faster DMA is busy for less of the time


@pytest.mark.parametrize("bad, message", [
    ("memory.SRAM.size=1KiB", "'memory' is not a parameter; valid paths: memories.<memory>"),
    ("memories.L2.size=1KiB", "no memory 'L2' in the config; valid memories: DRAM, SRAM"),
    ("memories.SRAM.colour=1", "valid keys: bandwidth, banks, latency, line, main, size"),
    ("units.VPU.count=2", "no unit 'VPU' in the config; valid units: PE, DMA"),
    ("units.PE.speed=2", "valid keys: bytes_per_cycle, count, kind"),
    ("compute.cores=2", "expected compute.<key>; valid keys: units, vector_width"),
    ("passes.tile.options.max_total_size=1", "no pass entry 'tile' in small_npu; valid "
                                             "entries: tile_sram, split_pes, stage, schedule"),
    ("passes.tile_sram.max_total_size=1", "expected passes.tile_sram.options.<key>"),
    ("passes.tile_sram.options.max_size=1", "valid keys: "),
    ("compute.units", "expected PATH=VALUE,VALUE"),
    ("compute.units=", "expected one or more values"),
    ("compute.units=2,,4", "expected one or more values"),
    ("compute.units=2,2", "a value is given twice"),
    ("compute..units=2", "an empty part in the path"),
    ("compute.units=[1", "is not YAML"),
])
def test_bad_set_paths_are_refused_with_the_valid_choices(config: Path, bad: str,
                                                          message: str):
    with pytest.raises(ex.ExploreError) as info:
        ex.explore(str(config), MATMUL, INPUTS, [bad], jobs=1)
    assert message in str(info.value)


def test_a_value_the_config_refuses_names_the_variant(config: Path):
    with pytest.raises(ex.ExploreError) as info:
        ex.explore(str(config), MATMUL, INPUTS, ["memories.SRAM.size=8KiB,lots"], jobs=1)
    text = str(info.value)
    assert "memories.SRAM.size=lots is not a valid config" in text and "size" in text


def test_more_misuse_is_refused(config: Path, capsys: pytest.CaptureFixture):
    with pytest.raises(ex.ExploreError, match="given twice"):
        ex.explore(str(config), MATMUL, INPUTS, ["compute.units=1,2",
                                                 "compute.units+units.PE.count=1,2"])
    with pytest.raises(TypeError, match="inputs must map each input name"):
        ex.explore(str(config), MATMUL, {"A": 3}, ["compute.units=1"])
    with pytest.raises(ex.ExploreError, match="at least one --set"):
        ex.explore(str(config), MATMUL, INPUTS, [])
    with pytest.raises(ex.ExploreError, match="not 'host'"):
        ex.explore("host", MATMUL, INPUTS, ["compute.units=1"])
    with pytest.raises(ex.ExploreError, match="combinations: at most"):
        ex.explore(str(config), MATMUL, INPUTS,
                   [f"memories.SRAM.latency={','.join(map(str, range(1, 70)))}",
                    f"memories.DRAM.latency={','.join(map(str, range(1, 70)))}"])
    # the command line: exit status 2 and one line naming the problem
    assert main(["explore", str(config), "x.tile", "--set", "cache.size=1"]) == 2
    assert "stripe: error: cannot read 'x.tile'" in capsys.readouterr().err


def test_tied_paths_take_the_same_value(config: Path):
    base = load_config(config)
    axis = ex.parse_set("compute.units+units.PE.count=1,[2]")
    assert axis.paths == (("compute", "units"), ("units", "PE", "count"))
    assert axis.values == (1, [2]) and axis.texts == ("1", "[2]")
    text = ex.variant_text(str(config), base, [(("compute", "units"), 4),
                                               (("units", "PE", "count"), 4),
                                               (("passes", "tile_sram", "options",
                                                 "max_total_size"), 4096)])
    assert "compute: {units: 4}" in text
    assert "- {name: PE, count: 4}" in text
    assert "options: {max_total_size: 4096}" in text


def test_a_variant_that_does_not_compile_gets_an_error_row(config: Path):
    """An SRAM of 1 KiB cannot hold the 2 KiB tiles that the tile budget allows: that row
    says why (the schedule pass's working-set error); the other row has its numbers."""
    study = ex.explore(str(config), MATMUL, INPUTS, ["memories.SRAM.size=1KiB,16KiB"],
                       jobs=1, plot=False)
    small, large = study.rows
    assert "working set" in small["error"] and "exceeds" in small["error"]
    assert small.get("cycles") is None and large["cycles"] > 0 and "error" not in large
    assert study.columns[-1] == "error"
    assert "| 1KiB | " in ex.table_text(study)


def test_explore_md_shows_a_real_variant_config():
    """The variant in docs/explore.md is what variant_text writes for those settings."""
    text = (Path(__file__).resolve().parent.parent / "docs" / "explore.md").read_text()
    rest = text[text.index("## What runs"):]
    start = rest.index("```yaml\n") + len("```yaml\n")
    shown = rest[start:rest.index("```", start)]
    base = load_config("npu_example")
    assert ex.variant_text("npu_example", base, [(("memories", "SRAM", "bandwidth"), 32),
                                                 (("units", "PE", "macs_per_cycle"), 64)]
                           ) == shown
