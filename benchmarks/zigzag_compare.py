"""Stripe's mappings against ZigZag's best mappings, for ResNet layers on two accelerators.

    .venv/bin/python -m benchmarks.zigzag_compare                 # every layer, both configs
    .venv/bin/python -m benchmarks.zigzag_compare --layers res3 --configs systolic_example

For each ResNet layer (an int8 convolution) and each config (``systolic_example``,
``multilevel_example``), stripe compiles the layer, runs it and reads ``prog.stats()``: the
bytes its DMA moved to and from DRAM (measured by the executed code) and the cycles of the
performance model (``stats()["model"]``, :mod:`stripe.perfmodel`). ZigZag
(``pip install zigzag-dse``, an analytical design-space explorer) gets the same layer and the
same architecture -- the config's memories with their sizes and bandwidths, its MAC array,
which memory holds which operand, the dataflow -- and searches its mappings for the lowest
latency; its DRAM traffic and latency are those of the mapping it finds.

ZigZag runs in its own virtual environment (``$ZIGZAG_PYTHON``, default
``~/.cache/stripe-bench/zigzag-venv/bin/python``), started as a subprocess with this file and
``--zigzag`` (the job on stdin, the results as JSON on stdout), so the project's
environment never imports it. The table is printed as Markdown; ``--out FILE`` also writes
every number as JSON. docs/accelerators.md ("Against ZigZag") holds the results.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ZIGZAG_PYTHON = Path(os.environ.get(
    "ZIGZAG_PYTHON", Path.home() / ".cache/stripe-bench/zigzag-venv/bin/python"))

LAYERS: dict[str, dict[str, int]] = {
    # name: output rows/columns (square, stride 1, "same" padding), input and output
    # channels, kernel size
    "res3_3x3": {"hw": 28, "ci": 128, "co": 128, "k": 3},   # ResNet-18/50 conv3_x
    "res4_1x1": {"hw": 14, "ci": 256, "co": 1024, "k": 1},  # ResNet-50 conv4_x expansion
    "res5_3x3": {"hw": 7, "ci": 512, "co": 512, "k": 3},    # ResNet-18/50 conv5_x
}
CONFIGS = ("systolic_example", "multilevel_example")
SRAM_COST, DRAM_COST = 6.0, 200.0
"""Relative energy of an access to a shared on-chip buffer and to DRAM, a register file's
being 1 (Eyeriss's normalised figures); only ZigZag's ``--opt energy`` reads them."""


def conv_source(k: int) -> str:
    """The Tile source of a stride-1 convolution with "same" padding of a ``k`` x ``k``
    kernel, channels last."""
    p = k // 2
    return (f"function (I[N, H, W, CI], F[KH, KW, CI, CO]) -> (O) {{\n"
            f"  O[n, x, y, co : N, H, W, CO] = "
            f"+(I[n, x + i - {p}, y + j - {p}, ci] * F[i, j, ci, co]);\n}}")


# the stripe side -----------------------------------------------------------------------------


def _reference(inp: Any, filt: Any) -> Any:
    """The int8 convolution as the program defines it (products and sums wrap to int8),
    summed in float64, which holds these sums exactly (below 2**53)."""
    import numpy as np

    k = filt.shape[0]
    p = k // 2
    x = np.pad(inp.astype(np.float64), ((0, 0), (p, p), (p, p), (0, 0)))
    h = inp.shape[1]
    out = np.zeros((h * h, filt.shape[3]))
    for i in range(k):
        for j in range(k):
            out += x[0, i:i + h, j:j + h, :].reshape(h * h, -1) @ filt[i, j].astype(np.float64)
    return out.astype(np.int64).astype(np.int8).reshape(1, h, h, -1)


def _tiles(prog: Any) -> str:
    """The contraction's tiling: the outer block's index ranges and each tile's views."""
    final = prog.trace[-1][1]
    kernel = next(b for _, b in final.walk() if b.name == "kernel_1")
    outer = ", ".join(f"{i.name}:{i.range}" for i in kernel.idxs if not i.is_passed_in)
    views = ", ".join(f"{r.into} " + "x".join(str(s) for s in r.shape.sizes)
                      for r in kernel.refs if not r.is_alloc)
    return f"[{outer}] tiles of {views}"


def run_stripe(config: str, name: str, layer: dict[str, int]) -> dict[str, Any]:
    """Compile and run ``layer`` on ``config``; the measured DRAM traffic, the modelled
    cycles and the tiling."""
    import numpy as np

    import stripe

    hw, ci, co, k = layer["hw"], layer["ci"], layer["co"], layer["k"]
    t = time.perf_counter()
    prog = stripe.compile(conv_source(k), {"I": ((1, hw, hw, ci), "int8"),
                                           "F": ((k, k, ci, co), "int8")}, target=config)
    compile_s = time.perf_counter() - t
    rng = np.random.default_rng(0)
    inp = rng.integers(-128, 128, (1, hw, hw, ci), dtype=np.int8)
    filt = rng.integers(-128, 128, (k, k, ci, co), dtype=np.int8)
    out = prog.run({"I": inp, "F": filt})["O"]
    if not np.array_equal(out, _reference(inp, filt)):
        raise AssertionError(f"{name} on {config}: wrong result")
    stats = prog.stats()
    model = stats.get("model", {})
    main = stats.get("main", {})
    stages = {s["name"]: s for s in model.get("stages", [])}
    conv = stages.get("kernel_1", {})
    return {
        "dram_read": main.get("bytes_out", 0),
        "dram_write": main.get("bytes_in", 0),
        "cycles": model.get("cycles"),
        "conv_cycles": conv.get("cycles"),
        "conv_compute": conv.get("compute_cycles"),
        "conv_transfer": conv.get("transfer_cycles"),
        "conv_bound": conv.get("bound"),
        "fill_cycles": stages.get("kernel_0", {}).get("cycles"),
        "tiles": _tiles(prog),
        "local": {m: v for m, v in stats.items() if m not in ("main", "model", "stencil")},
        "compile_s": round(compile_s, 1),
    }


# the ZigZag side: the same architectures ----------------------------------------------------


def zigzag_architecture(config: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """ZigZag's description of ``config`` (its accelerator and its mapping files): sizes and
    bandwidths come from the config's memories and units; which memory holds which operand
    and which array dimensions it serves is the config's dataflow, written out here."""
    from stripe.config import load_config

    target = load_config(config).target
    mem = {m.name: m for m in target.memories}
    links = {"O": "O", "W": "I2", "I": "I1"}
    if config == "systolic_example":
        mesh = target.unit("MESH")
        side = int(round(mesh.macs_per_cycle ** 0.5))
        memories = {
            # weight-stationary: each cell holds one weight and one partial sum
            "w_reg": _zz_mem(1, 1, ["I2"], [], split=True),
            "o_reg": _zz_mem(4, 4, ["O"], [], split=True),
            "ACC": _zz_mem(mem["ACC"].size, mem["ACC"].bandwidth, ["O"], ["D1", "D2"],
                           cost=SRAM_COST),
            "SPAD": _zz_mem(mem["SPAD"].size, mem["SPAD"].bandwidth, ["I1", "I2"],
                            ["D1", "D2"], cost=SRAM_COST),
            "DRAM": _zz_mem(mem["DRAM"].size, mem["DRAM"].bandwidth, ["I1", "I2", "O"],
                            ["D1", "D2"], cost=DRAM_COST),
        }
        array = {"dimensions": ["D1", "D2"], "sizes": [side, side]}
        # the stencil: 16 output channels (n) by 16 input channels (k) held in the array
        mapping = [{"name": "default", "spatial_mapping": {"D1": [f"K, {side}"],
                                                           "D2": [f"C, {side}"]},
                    "memory_operand_links": links}]
    elif config == "multilevel_example":
        pe = target.unit("PE")
        memories = {
            # one private buffer per PE for all three operands, serving its MAC lanes (the
            # config's bandwidth is all PEs' buffers together, one bank each)
            "PEBUF": _zz_mem(mem["PEBUF"].size, mem["PEBUF"].bandwidth // mem["PEBUF"].banks,
                             ["I1", "I2", "O"], ["D2"]),
            "GLB": _zz_mem(mem["GLB"].size, mem["GLB"].bandwidth, ["I1", "I2", "O"],
                           ["D1", "D2"], cost=SRAM_COST),
            "DRAM": _zz_mem(mem["DRAM"].size, mem["DRAM"].bandwidth, ["I1", "I2", "O"],
                            ["D1", "D2"], cost=DRAM_COST),
        }
        array = {"dimensions": ["D1", "D2"], "sizes": [pe.count, pe.macs_per_cycle]}
        # partition_compute shares output indexes among the PEs; the lanes of a PE are not
        # tied to a dimension, so ZigZag may choose them
        mapping = [{"name": "default",
                    "spatial_mapping_hint": {"D1": ["K", "OX", "OY"],
                                             "D2": ["C", "K", "OX", "OY", "FX", "FY"]},
                    "memory_operand_links": links}]
    else:
        raise ValueError(f"no ZigZag description of {config!r}")
    acc = {"name": config, "memories": memories,
           "operational_array": {"unit_energy": 1, "unit_area": 1, **array}}
    return acc, mapping


def _zz_mem(size: int, bandwidth: int, operands: list[str], served: list[str],
            split: bool = False, cost: float = 1.0) -> dict[str, Any]:
    """A ZigZag memory of ``size`` bytes delivering ``bandwidth`` bytes per cycle, each
    access costing ``cost`` (relative energy: only ZigZag's energy objective reads it)."""
    def port(name: str, kind: str, alloc: list[str]) -> dict[str, Any]:
        return {"name": name, "type": kind, "bandwidth_min": bandwidth * 8,
                "bandwidth_max": bandwidth * 8, "allocation": alloc}

    reads, writes = [], []
    for op in operands:
        reads += [f"{op}, tl"] + ([f"{op}, th"] if op == "O" else [])
        writes += [f"{op}, fh"] + ([f"{op}, fl"] if op == "O" else [])
    ports = ([port("r_port_1", "read", reads), port("w_port_1", "write", writes)] if split
             else [port("rw_port_1", "read_write", reads + writes)])
    return {"size": size * 8, "r_cost": cost, "w_cost": cost, "area": 0, "latency": 1,
            "operands": operands, "ports": ports, "served_dimensions": served}


def zigzag_layer(name: str, layer: dict[str, int]) -> dict[str, Any]:
    """ZigZag's workload entry of ``layer``: int8 inputs and weights, int32 partial sums,
    int8 outputs."""
    hw, ci, co, k = layer["hw"], layer["ci"], layer["co"], layer["k"]
    p = k // 2
    return {"id": 0, "name": name, "operator_type": "Conv",
            "equation": "O[b][k][oy][ox]+=W[k][c][fy][fx]*I[b][c][iy][ix]",
            "dimension_relations": ["ix=1*ox+1*fx", "iy=1*oy+1*fy"],
            "loop_dims": ["B", "K", "C", "OY", "OX", "FY", "FX"],
            "loop_sizes": [1, co, ci, hw, hw, k, k],
            "operand_precision": {"W": 8, "I": 8, "O": 32, "O_final": 8},
            "operand_source": {"I": 0},
            "pr_loop_dims": ["IX", "IY"], "pr_loop_sizes": [hw + 2 * p, hw + 2 * p],
            "padding": [[p, p], [p, p]]}


def run_zigzag(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Run ``jobs`` (accelerator, mapping, layer) in ZigZag's environment."""
    if not ZIGZAG_PYTHON.exists():
        raise SystemExit(f"ZigZag's python not found at {ZIGZAG_PYTHON}: python3 -m venv "
                         f"{ZIGZAG_PYTHON.parent.parent} && {ZIGZAG_PYTHON.parent}/pip "
                         f"install zigzag-dse six (or set ZIGZAG_PYTHON)")
    done = subprocess.run([str(ZIGZAG_PYTHON), __file__, "--zigzag"], input=json.dumps(jobs),
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"ZigZag failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def _zigzag_worker() -> None:
    """In ZigZag's environment: read the jobs from stdin, print the results as JSON."""
    import logging

    import yaml
    from zigzag.api import get_hardware_performance_zigzag
    from zigzag.hardware.architecture.memory_port import DataDirection

    logging.disable(logging.WARNING)
    results = []
    for job in json.loads(sys.stdin.read()):
        with tempfile.TemporaryDirectory() as tmp:
            acc_path, map_path = Path(tmp, "acc.yaml"), Path(tmp, "map.yaml")
            acc_path.write_text(yaml.safe_dump(job["accelerator"], sort_keys=False))
            map_path.write_text(yaml.safe_dump(job["mapping"], sort_keys=False))
            t = time.perf_counter()
            _, latency, cmes = get_hardware_performance_zigzag(
                [job["layer"]], str(acc_path), str(map_path), opt=job.get("opt", "latency"),
                dump_folder=str(Path(tmp, "out")), loma_show_progress_bar=False)
            cme = cmes[0][1][0][0]
            top = {str(op): accesses[-1] for op, accesses in cme.memory_word_access.items()}
            # ZigZag counts the accesses of a memory in words of its port's width
            word = job["accelerator"]["memories"]["DRAM"]["ports"][0]["bandwidth_max"]
            reads = sum(top[op].get(DataDirection.RD_OUT_TO_LOW) for op in top) * word // 8
            writes = sum(top[op].get(DataDirection.WR_IN_BY_LOW) for op in top) * word // 8
            results.append({
                "cycles": float(latency), "ideal_cycles": float(cme.ideal_cycle),
                "utilisation": float(cme.mac_utilization1),
                "dram_read": int(reads), "dram_write": int(writes),
                "temporal": str(cme.temporal_mapping), "spatial": str(cme.spatial_mapping),
                "seconds": round(time.perf_counter() - t, 1)})
    print(json.dumps(results))


# the comparison -------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", nargs="*", default=list(LAYERS), choices=list(LAYERS))
    parser.add_argument("--configs", nargs="*", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--out", type=Path, help="also write the numbers as JSON here")
    parser.add_argument("--opt", choices=("latency", "energy"), default="latency",
                        help="what ZigZag's mapping search minimises (energy: with DRAM "
                             "accesses 200 times a register file's, on-chip buffers 6)")
    parser.add_argument("--zigzag", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.zigzag:
        _zigzag_worker()
        return 0
    pairs = [(c, n) for c in args.configs for n in args.layers]
    jobs = []
    for config, name in pairs:
        acc, mapping = zigzag_architecture(config)
        jobs.append({"accelerator": acc, "mapping": mapping, "opt": args.opt,
                     "layer": zigzag_layer(name, LAYERS[name])})
    zz = run_zigzag(jobs)
    rows = []
    for (config, name), z in zip(pairs, zz):
        s = run_stripe(config, name, LAYERS[name])
        rows.append({"config": config, "layer": name, "stripe": s, "zigzag": z})
        print(f"{config} {name}: stripe {s['cycles']} cycles, "
              f"{s['dram_read'] + s['dram_write']} B; zigzag {z['cycles']} cycles, "
              f"{z['dram_read'] + z['dram_write']} B", file=sys.stderr, flush=True)
    print("| config | layer | DRAM read / write, stripe (KiB) | DRAM read / write, ZigZag (KiB) "
          "| cycles, stripe | cycles, ZigZag | ZigZag's ideal cycles |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        s, z = r["stripe"], r["zigzag"]
        print(f"| {r['config']} | {r['layer']} | {s['dram_read'] / 1024:.0f} / "
              f"{s['dram_write'] / 1024:.0f} | {z['dram_read'] / 1024:.0f} / "
              f"{z['dram_write'] / 1024:.0f} | {s['cycles']:.0f} | {z['cycles']:.0f} | "
              f"{z['ideal_cycles']:.0f} |")
    for r in rows:
        print(f"\n{r['config']} {r['layer']}: stripe {r['stripe']['tiles']}; "
              f"ZigZag temporal {r['zigzag']['temporal']}, spatial {r['zigzag']['spatial']}")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
