"""Runs one peer's part of the suite inside the peers venv (see setup_peers.sh).

    <peers-venv>/bin/python -m benchmarks.peer_worker --peer plaidml|tvm --workloads a,b \
        --repeats N --warmup W --budget S --out FILE.json

Needs only numpy and the peer; imports `benchmarks.workloads` for the sources, shapes,
inputs (same seed, so the same data as the main run) and the numpy reference. Every result
is checked against numpy before it is timed, like the main suite. Peers are timed in their
own process (so not interleaved with numpy and stripe), with numpy's time of the same
workload measured alongside in the same process for reference.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

from benchmarks.workloads import Workload, by_name

# --------------------------------------------------------------------------- PlaidML 0.7

def plaidml_builder():  # type: ignore[no-untyped-def]
    """PlaidML 0.7 takes Tile source directly: the very same program as stripe's."""
    os.environ.setdefault("PLAIDML_EXPERIMENTAL", "1")
    os.environ.setdefault("PLAIDML_DEVICE_IDS", "llvm_cpu.0")
    import plaidml

    ctx = plaidml.Context()
    dev = plaidml.Device(ctx, plaidml.devices(ctx, limit=10)[0])

    def build(w: Workload, x: dict[str, np.ndarray]):  # type: ignore[no-untyped-def]
        func = plaidml.Function(w.source)
        tensors = {}
        for name, arr in x.items():
            t = plaidml.Tensor(dev, plaidml.Shape(ctx, plaidml.DType.FLOAT32, *arr.shape))
            with t.mmap_discard(ctx) as view:
                view.copy_from_ndarray(arr)
                view.writeback()
            tensors[name] = t
        ref_shape = w.numpy_fn(**x).shape
        out = plaidml.Tensor(dev, plaidml.Shape(ctx, plaidml.DType.FLOAT32, *ref_shape))
        inv = plaidml.Invoker(ctx, func)
        for name, t in tensors.items():
            inv.set_input(name, t)
        inv.set_output(w.output, out)
        result = np.empty(ref_shape, np.float32)

        def run() -> np.ndarray:
            inv.invoke()
            with out.mmap_current() as view:     # waits for the result
                view.copy_to_ndarray(result)
            return result
        return run
    return build


# --------------------------------------------------------------------------- TVM

def tvm_builder():  # type: ignore[no-untyped-def]
    """TVM (TE + a simple tiled, vectorised, parallel TIR schedule) for the matmul family;
    other workloads are reported as not implemented."""
    import tvm
    from tvm import te

    # TVM 0.27 moved the TIR schedule to tvm.s_tir
    Schedule = tvm.tir.Schedule if hasattr(tvm, "tir") else tvm.s_tir.Schedule

    try:
        target = tvm.target.Target({"kind": "llvm", "mcpu": "haswell"})  # AVX2 + FMA
    except Exception:  # noqa: BLE001 - older TVM: the string form
        target = tvm.target.Target("llvm -mcpu=haswell")

    def matmul_sched(m: int, n: int, k: int, batch: int | None, bias: bool):  # type: ignore[no-untyped-def]
        if batch is None:
            A = te.placeholder((m, k), "float32", name="A")
            B = te.placeholder((k, n), "float32", name="B")
            r = te.reduce_axis((0, k), name="r")
            C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
        else:
            A = te.placeholder((batch, m, k), "float32", name="A")
            B = te.placeholder((batch, k, n), "float32", name="B")
            r = te.reduce_axis((0, k), name="r")
            C = te.compute((batch, m, n),
                           lambda b, i, j: te.sum(A[b, i, r] * B[b, r, j], axis=r), name="C")
        args = [A, B]
        out = C
        if bias:
            Bi = te.placeholder((n,), "float32", name="Bias")
            out = te.compute((m, n), lambda i, j: te.max(C[i, j] + Bi[j], te.const(0, "float32")),
                             name="O")
            args.append(Bi)
        sch = Schedule(te.create_prim_func(args + [out]))
        get_block = getattr(sch, "get_block", None) or sch.get_sblock
        blk = get_block("C")
        loops = sch.get_loops(blk)
        i, j, kk = loops[-3:]
        ti = 16 if m >= 16 else m
        tj = 64 if n >= 64 else n
        io, ii = sch.split(i, [None, ti])
        jo, ji = sch.split(j, [None, tj])
        ko, ki = sch.split(kk, [None, 8 if k % 8 == 0 else 1])
        sch.reorder(io, jo, ko, ii, ki, ji)
        par = [loops[0], io] if batch is not None else [io]
        fused = sch.fuse(*par) if len(par) > 1 else par[0]
        sch.parallel(fused)
        if tj % 8 == 0:
            jv_o, jv = sch.split(ji, [None, 8])
            sch.vectorize(jv)
        sch.decompose_reduction(blk, ko)
        if bias:
            ob = get_block("O")
            oi, oj = sch.get_loops(ob)
            sch.parallel(oi)
        return tvm.compile(sch.mod, target=target)

    def build(w: Workload, x: dict[str, np.ndarray]):  # type: ignore[no-untyped-def]
        dev = tvm.cpu(0)
        if w.name.startswith(("matmul", "fc_")):
            (m, k), (_, n) = w.shapes["A"], w.shapes["B"]
            f = matmul_sched(m, n, k, None, False)
        elif w.name.startswith("bmatmul"):
            (b, m, k), (_, _, n) = w.shapes["A"], w.shapes["B"]
            f = matmul_sched(m, n, k, b, False)
        elif w.name.startswith("gemm_bias_relu"):
            (m, k), (_, n) = w.shapes["A"], w.shapes["B"]
            f = matmul_sched(m, n, k, None, True)
        else:
            raise NotImplementedError(f"no TVM definition of {w.name} yet")
        args = [tvm.runtime.tensor(x[name], dev) if hasattr(tvm.runtime, "tensor")
                else tvm.nd.array(x[name], dev) for name in w.shapes]
        shape = w.numpy_fn(**x).shape
        outarr = np.empty(shape, np.float32)
        out = (tvm.runtime.tensor(outarr, dev) if hasattr(tvm.runtime, "tensor")
               else tvm.nd.array(outarr, dev))

        def run() -> np.ndarray:
            f(*args, out)
            return out.numpy()
        return run
    return build


# --------------------------------------------------------------------------- driver

def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", required=True, choices=["plaidml", "tvm"])
    ap.add_argument("--workloads", required=True)
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--budget", type=float, default=10.0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    res: dict = {"peer": args.peer, "threads": threads, "workloads": {}}
    try:
        builder = plaidml_builder() if args.peer == "plaidml" else tvm_builder()
    except Exception as e:  # noqa: BLE001
        res["error"] = f"{type(e).__name__}: {e}"
        print(f"  [{args.peer}] not measured: {res['error']}", flush=True)
        with open(args.out, "w") as f:
            json.dump(res, f)
        return 0
    for name in args.workloads.split(","):
        w = by_name()[name]
        x = w.inputs()
        ref = w.numpy_fn(**x)
        entry: dict = {}
        try:
            t0 = time.perf_counter()
            run = builder(w, x)
            entry["compile_s"] = time.perf_counter() - t0
            t0 = time.perf_counter()
            out = run()
            first = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001
            msg = (str(e).splitlines() or [""])[0]
            entry["check"] = f"FAILED {type(e).__name__}: {msg}"
            res["workloads"][name] = entry
            with open(args.out, "w") as f:
                json.dump(res, f)
            print(f"  [{args.peer} {threads}T] {name}: {entry['check']}", flush=True)
            continue
        atol = w.atol_rel * float(np.abs(ref).max() or 1.0)
        ok = out.shape == ref.shape and bool(np.allclose(out, ref, rtol=w.rtol, atol=atol))
        err = float(np.abs(out.astype(np.float64) - ref).max()) if ok else float("nan")
        entry["check"] = ("ok" if ok else "FAILED") + f" max abs err {err:.3g}"
        if ok:
            repeats = max(3, min(args.repeats, int(args.budget / max(first, 1e-9))))
            for _ in range(0 if first > 1.0 else args.warmup):
                run()
            samples = []
            for _ in range(repeats):
                t0 = time.perf_counter()
                run()
                samples.append(time.perf_counter() - t0)
            med = statistics.median(samples)
            entry.update(median_s=med, min_s=min(samples), samples_s=samples, repeats=repeats,
                         gflops=w.flops / med / 1e9)
        res["workloads"][name] = entry
        with open(args.out, "w") as f:          # after every workload: a crash keeps these
            json.dump(res, f)
        print(f"  [{args.peer} {threads}T] {name}: " +
              (f"{entry['median_s'] * 1e3:.2f} ms" if "median_s" in entry else entry["check"]),
              flush=True)
    with open(args.out, "w") as f:
        json.dump(res, f)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
