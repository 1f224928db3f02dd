"""Runs one peer's part of the suite inside the peers venv (see setup_peers.sh).

    <peers-venv>/bin/python -m benchmarks.peer_worker --peer plaidml|tvm|torch|ort --workloads a,b \
        --repeats N --warmup W --budget S --out FILE.json
    <peers-venv>/bin/python -m benchmarks.peer_worker --peer plaidml|tvm|torch|ort --serve

``--serve`` (what the suite uses): the peer stays loaded and answers requests, one JSON
object per line on stdin, so that the suite can time it in turns with stripe (see
`benchmarks.peers.PeerServer`): ``{"cmd": "prepare", "workload": name}`` builds and checks
a workload; ``{"cmd": "time", "workload": name, "n": k, "warm_s": s}`` runs it untimed for
at least s seconds (at least once; none if ``"warm": false``) and then k timed calls (the
answer has their times and the process's CPU time over them, all threads);
``{"cmd": "prepare_model", "key": k, "path": model.onnx, "inputs": x.npz, "ref": ref.npz,
"save": out.npz, "tol": 1e-3}`` loads a whole ONNX model (ONNX Runtime, or PyTorch through
onnx2torch), runs it once on the saved inputs, saves its outputs (``save``) or compares them
with ``ref`` (the largest absolute difference over the largest absolute reference value,
against ``tol``), and keeps it for ``time`` requests under ``key`` (see
`benchmarks/models.py`); ``{"cmd": "quit"}``. Each answer is one line on stdout starting
with ``REPLY_MARK`` (the peers print their own lines there too).

ONNX Runtime (``ort``) runs in the suite's own venv when onnxruntime imports there (it is in
the project's ``test`` extra), else in the peers venv (`benchmarks.peers.peer_python`).

Needs only numpy and the peer; imports `benchmarks.workloads` for the sources, shapes,
inputs (same seed, so the same data as the main run) and the numpy reference. Every result
is checked against numpy before it is timed, like the main suite. Peers are timed in their
own process (so not interleaved with numpy and stripe), with numpy's time of the same
workload measured alongside in the same process for reference.
"""

# ruff: noqa: E741  (tensor names follow Tile: I, F, O, ...)
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

from benchmarks.timing import warm
from benchmarks.workloads import Workload, by_name

REPLY_MARK = "@@stripe-peer@@ "

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

def _tvm_thread_env() -> None:
    """TVM's runtime sizes its thread pool from TVM_NUM_THREADS (else OMP_NUM_THREADS, else
    its own guess, which is 1 on a 2-core machine here). run.py passes TVM_NUM_THREADS =
    OMP_NUM_THREADS; this makes a direct run of the worker do the same. With
    OMP_WAIT_POLICY=PASSIVE (``run.py --omp-wait-policy PASSIVE``) TVM's idle workers go to
    sleep at once instead of spinning (TVM_THREAD_POOL_SPIN_COUNT=0), like stripe's OpenMP threads.
    Set before tvm is imported; explicit values in the environment win."""
    os.environ.setdefault("TVM_NUM_THREADS", os.environ.get("OMP_NUM_THREADS", "1"))
    if os.environ.get("OMP_WAIT_POLICY", "").upper() == "PASSIVE":
        os.environ.setdefault("TVM_THREAD_POOL_SPIN_COUNT", "0")


def _divisor(n: int, at_most: int) -> int:
    """The largest divisor of n that is <= at_most (tile sizes that need no tail)."""
    return max(d for d in range(1, min(n, at_most) + 1) if n % d == 0)


def _conv_tile(oy: int, co: int) -> tuple[int, int]:
    """The convolution's register tile: ty output columns x tco output channels, tco = 16
    or 8 (2 or 1 AVX2 vectors), both dividing the output (no tails), as many accumulators
    as fit (at most 12 ymm, the rest hold the filter vectors and the broadcast input: the
    16 registers overflow into spills beyond that, which a 7 x 16 tile does)."""
    best = (0, 1, 1)
    for tco in (16, 8):
        if co % tco:
            continue
        lanes = tco // 8
        ty = _divisor(oy, 12 // lanes)
        best = max(best, (ty * lanes, tco, ty))
    if best[0] == 0:                    # channels not a multiple of 8: scalar tile
        return _divisor(oy, 8), 1
    return best[2], best[1]


def tvm_builder():  # type: ignore[no-untyped-def]
    """TVM: a TE definition of every workload + a simple hand-written TIR schedule (tiled,
    vectorised 8 lanes = AVX2, parallel outer loop); see the README."""
    _tvm_thread_env()
    import tvm
    from tvm import te, topi

    # TVM 0.27 moved the TIR schedule to tvm.s_tir
    Schedule = tvm.tir.Schedule if hasattr(tvm, "tir") else tvm.s_tir.Schedule
    f32 = "float32"

    try:
        target = tvm.target.Target({"kind": "llvm", "mcpu": "haswell"})  # AVX2 + FMA
    except Exception:  # noqa: BLE001 - older TVM: the string form
        target = tvm.target.Target("llvm -mcpu=haswell")

    def schedule(tensors):  # type: ignore[no-untyped-def]
        sch = Schedule(te.create_prim_func(tensors))
        get_block = getattr(sch, "get_block", None) or sch.get_sblock
        return sch, get_block

    def extent(sch, loop) -> int:  # type: ignore[no-untyped-def]
        return int(sch.get(loop).extent)

    def vectorize_inner(sch, loop, lanes: int = 8):  # type: ignore[no-untyped-def]
        """Split `lanes` off `loop` and vectorise them (if they divide it); the outer part."""
        if extent(sch, loop) % lanes:
            return loop
        outer, inner = sch.split(loop, [None, lanes])
        sch.vectorize(inner)
        return outer

    # ---- matmul family: tile 16 x 64, k by 8, vectorise 8 lanes, parallel outer rows
    def matmul_sched(m: int, n: int, k: int, batch: int | None, bias: bool):  # type: ignore[no-untyped-def]
        if batch is None:
            A = te.placeholder((m, k), f32, name="A")
            B = te.placeholder((k, n), f32, name="B")
            r = te.reduce_axis((0, k), name="r")
            C = te.compute((m, n), lambda i, j: te.sum(A[i, r] * B[r, j], axis=r), name="C")
        else:
            A = te.placeholder((batch, m, k), f32, name="A")
            B = te.placeholder((batch, k, n), f32, name="B")
            r = te.reduce_axis((0, k), name="r")
            C = te.compute((batch, m, n),
                           lambda b, i, j: te.sum(A[b, i, r] * B[b, r, j], axis=r), name="C")
        args = [A, B]
        out = C
        if bias:
            Bi = te.placeholder((n,), f32, name="Bias")
            out = te.compute((m, n), lambda i, j: te.max(C[i, j] + Bi[j], te.const(0, f32)),
                             name="O")
            args.append(Bi)
        sch, get_block = schedule(args + [out])
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
        return sch

    # ---- convolutions, NHWC x (KX, KY, CI, CO): a ty x tco register tile of the output
    # (ty output columns x tco output channels, tco vectorised; see _conv_tile) accumulated
    # in a local buffer, the reduction around it (window rows, window columns unrolled,
    # input channels), parallel over (output-channel tile, output row). Padding is its own
    # stage, and so is the filter repacked as [CO/16, KX, KY, CI, 16] (once per call, like
    # BLAS packs B; read in F's order): read in place, the filter's channels sit CO*4 bytes
    # apart from one input channel to the next, a stride at which the 512-channel layers
    # thrash the caches.
    def conv_sched(n: int, x: int, y: int, ci: int, co: int, kx: int, ky: int,
                   stride: int, pad: int):  # type: ignore[no-untyped-def]
        I = te.placeholder((n, x, y, ci), f32, name="I")
        F = te.placeholder((kx, ky, ci, co), f32, name="F")
        if pad:
            P = te.compute(
                (n, x + 2 * pad, y + 2 * pad, ci),
                lambda b, i, j, c: te.if_then_else(
                    te.all(i >= pad, i < x + pad, j >= pad, j < y + pad),
                    I[b, i - pad, j - pad, c], te.const(0, f32)), name="P")
        else:
            P = I
        ox = (x + 2 * pad - kx) // stride + 1
        oy = (y + 2 * pad - ky) // stride + 1
        ty, tco = _conv_tile(oy, co)
        tp = 16 if co % 16 == 0 else tco    # packed channel block, a multiple of tco
        Fp = te.compute((co // tp, kx, ky, ci, tp),
                        lambda o, i, j, c, v: F[i, j, c, o * tp + v], name="Fp")
        ri = te.reduce_axis((0, kx), name="ri")
        rj = te.reduce_axis((0, ky), name="rj")
        rc = te.reduce_axis((0, ci), name="rc")
        O = te.compute(
            (n, ox, oy, co),
            lambda b, i, j, c: te.sum(P[b, i * stride + ri, j * stride + rj, rc]
                                      * Fp[c // tp, ri, rj, rc, c % tp],
                                      axis=[ri, rj, rc]), name="O")
        sch, get_block = schedule([I, F, O])
        blk = get_block("O")
        b, i, j, c, li, lj, lc = sch.get_loops(blk)
        jo, ji = sch.split(j, [None, ty])
        co_o, co_m, co_i = sch.split(c, [None, tp // tco, tco])
        sch.reorder(b, co_o, co_m, i, jo, li, lj, lc, ji, co_i)
        sch.parallel(sch.fuse(b, co_o, co_m, i))
        if tco % 8 == 0:
            sch.vectorize(co_i)
        sch.unroll(ji)
        sch.unroll(lj)
        if ci <= 4:                     # the stem's 3 input channels
            sch.unroll(lc)
        acc = sch.cache_write(blk, 0, "local")
        sch.reverse_compute_at(acc, jo)
        vectorize_inner(sch, sch.get_loops(acc)[-1])
        sch.decompose_reduction(blk, li)
        po, pi, pj, pc, pv = sch.get_loops(get_block("Fp"))
        sch.reorder(pi, pj, pc, po, pv)             # read F in order
        sch.parallel(sch.fuse(pi, pj))
        vectorize_inner(sch, pv)
        if pad:
            pl = sch.get_loops(get_block("P"))
            sch.parallel(sch.fuse(pl[0], pl[1]))
            vectorize_inner(sch, pl[3])
        return sch

    # ---- depthwise 3x3 pad 1: ty columns x tc channels (vectorised) per tile, the 3x3
    # window unrolled, parallel over output rows.
    def dwconv_sched(n: int, x: int, y: int, c: int, kx: int, ky: int):  # type: ignore[no-untyped-def]
        I = te.placeholder((n, x, y, c), f32, name="I")
        F = te.placeholder((kx, ky, c), f32, name="F")
        px, py = (kx - 1) // 2, (ky - 1) // 2
        P = te.compute(
            (n, x + 2 * px, y + 2 * py, c),
            lambda b, i, j, k: te.if_then_else(
                te.all(i >= px, i < x + px, j >= py, j < y + py),
                I[b, i - px, j - py, k], te.const(0, f32)), name="P")
        ri = te.reduce_axis((0, kx), name="ri")
        rj = te.reduce_axis((0, ky), name="rj")
        O = te.compute((n, x, y, c),
                       lambda b, i, j, k: te.sum(P[b, i + ri, j + rj, k] * F[ri, rj, k],
                                                 axis=[ri, rj]), name="O")
        sch, get_block = schedule([I, F, O])
        blk = get_block("O")
        b, i, j, k, li, lj = sch.get_loops(blk)
        tc = 16 if c % 16 == 0 else _divisor(c, 8)
        ty = _divisor(y, 4)
        jo, ji = sch.split(j, [None, ty])
        ko, ki = sch.split(k, [None, tc])
        sch.reorder(b, i, jo, ko, li, lj, ji, ki)
        sch.parallel(sch.fuse(b, i))
        if tc % 8 == 0:
            sch.vectorize(ki)
        sch.unroll(li)
        sch.unroll(lj)
        sch.unroll(ji)
        acc = sch.cache_write(blk, 0, "local")
        sch.reverse_compute_at(acc, ko)
        vectorize_inner(sch, sch.get_loops(acc)[-1])
        sch.decompose_reduction(blk, li)
        pl = sch.get_loops(get_block("P"))
        sch.parallel(sch.fuse(pl[0], pl[1]))
        vectorize_inner(sch, pl[3])
        return sch

    # exp and tanh: TVM's LLVM lowering of te.exp / te.tanh calls libm's scalar expf (tanh:
    # two expf and a division), one lane at a time even in a vectorised loop; topi.fast_exp
    # and topi.fast_tanh are TVM's own branch-free polynomial versions (what its FastMath
    # pass substitutes), which vectorise, like stripe's vmath. STRIPE_BENCH_TVM_FAST_MATH=0
    # selects te.exp / te.tanh.
    fast_math = os.environ.get("STRIPE_BENCH_TVM_FAST_MATH", "1") != "0"

    def math1(t, fn: str):  # type: ignore[no-untyped-def]
        if fast_math:
            return {"exp": topi.fast_exp, "tanh": topi.fast_tanh}[fn](t)
        f = {"exp": te.exp, "tanh": te.tanh}[fn]
        return te.compute(t.shape, lambda *i: f(t(*i)), name=fn.upper())

    # ---- row-wise (softmax, layer norm): every stage computed inside the parallel loop
    # over rows; row reductions rfactor-ed into 8 partial results (vectorised), elementwise
    # stages vectorised 8 lanes.
    def rows_sched(tensors, out: str, stages: list[str], reductions: list[str],
                   inline: tuple[str, ...] = ()):  # type: ignore[no-untyped-def]
        sch, get_block = schedule(tensors)
        for name in inline:
            sch.compute_inline(get_block(name))
        rfs = {}
        for name in reductions:             # rfactor needs the block's own loop nest
            r = sch.get_loops(get_block(name))[-1]
            _, r8 = sch.split(r, [None, 8])
            rfs[name] = sch.rfactor(r8, 0)
        row, col = sch.get_loops(get_block(out))
        vectorize_inner(sch, col)
        for name in reversed(stages):       # consumers first
            sch.compute_at(get_block(name), row)
            if name in rfs:
                sch.compute_at(rfs[name], row)
        sch.parallel(row)
        for name in stages:
            if name in rfs:                 # (row, lane, k/8) -> (row, k/8, lane)
                rf = rfs[name]
                _, lane, ko = sch.get_loops(rf)
                sch.reorder(ko, lane)
                sch.vectorize(lane)
                sch.decompose_reduction(rf, ko)
            elif name not in reductions:
                loops = sch.get_loops(get_block(name))
                if len(loops) > 1:          # a row of values, not one per row
                    vectorize_inner(sch, loops[-1])
        return sch

    # ---- rows of dot products: parallel over the rows, each row's reduction rfactor-ed into
    # 8 partial sums (vectorised), as the row reductions above
    def gemv_sched(ns: int, ks: int):  # type: ignore[no-untyped-def]
        W = te.placeholder((ns, ks), f32, name="W")
        X = te.placeholder((ks,), f32, name="X")
        r = te.reduce_axis((0, ks), name="r")
        O = te.compute((ns,), lambda n: te.sum(W[n, r] * X[r], axis=r), name="O")
        sch, get_block = schedule([W, X, O])
        blk = get_block("O")
        _, r8 = sch.split(sch.get_loops(blk)[-1], [None, 8])
        rf = sch.rfactor(r8, 0)
        row = sch.get_loops(blk)[0]
        sch.compute_at(rf, row)
        sch.parallel(row)
        _, lane, ko = sch.get_loops(rf)
        sch.reorder(ko, lane)
        sch.vectorize(lane)
        sch.decompose_reduction(rf, ko)
        return sch

    def softmax_sched(xs: int, ys: int):  # type: ignore[no-untyped-def]
        I = te.placeholder((xs, ys), f32, name="I")
        k = te.reduce_axis((0, ys), name="k")
        M = te.compute((xs,), lambda x: te.max(I[x, k], axis=k), name="M")
        D = te.compute((xs, ys), lambda x, y: I[x, y] - M[x], name="D")
        E = math1(D, "exp")
        k2 = te.reduce_axis((0, ys), name="k2")
        S = te.compute((xs,), lambda x: te.sum(E[x, k2], axis=k2), name="S")
        O = te.compute((xs, ys), lambda x, y: E[x, y] / S[x], name="O")
        return rows_sched([I, O], "O", ["M", E.op.name, "S"], ["M", "S"], inline=("D",))

    def layernorm_sched(ns: int, cs: int):  # type: ignore[no-untyped-def]
        X = te.placeholder((ns, cs), f32, name="X")
        G = te.placeholder((cs,), f32, name="G")
        Bi = te.placeholder((cs,), f32, name="Bias")
        k = te.reduce_axis((0, cs), name="k")
        S = te.compute((ns,), lambda n: te.sum(X[n, k], axis=k), name="S")
        Mu = te.compute((ns,), lambda n: S[n] / te.const(cs, f32), name="Mu")
        k2 = te.reduce_axis((0, cs), name="k2")
        V = te.compute((ns,), lambda n: te.sum((X[n, k2] - Mu[n]) * (X[n, k2] - Mu[n]),
                                               axis=k2), name="V")
        R = te.compute((ns,), lambda n: te.sqrt(V[n] / te.const(cs, f32)
                                                + te.const(1e-5, f32)), name="R")
        O = te.compute((ns, cs), lambda n, c: (X[n, c] - Mu[n]) / R[n] * G[c] + Bi[c],
                       name="O")
        return rows_sched([X, G, Bi, O], "O", ["S", "Mu", "V", "R"], ["S", "V"])

    # ---- elementwise tanh(A*B+C): parallel rows, 8 lanes
    def tanh_sched(ns: int, ms: int):  # type: ignore[no-untyped-def]
        A = te.placeholder((ns, ms), f32, name="A")
        B = te.placeholder((ns, ms), f32, name="B")
        C = te.placeholder((ns, ms), f32, name="C")
        T = te.compute((ns, ms), lambda i, j: A[i, j] * B[i, j] + C[i, j], name="T")
        O = math1(T, "tanh")
        sch, get_block = schedule([A, B, C, O])
        sch.compute_inline(get_block("T"))
        i, j = sch.get_loops(get_block(O.op.name))
        sch.parallel(i)
        vectorize_inner(sch, j)
        return sch

    def make_schedule(w: Workload):  # type: ignore[no-untyped-def]
        s = w.shapes
        if w.name.startswith(("matmul", "fc_")):
            (m, k), (_, n) = s["A"], s["B"]
            return matmul_sched(m, n, k, None, False)
        if w.name.startswith("bmatmul"):
            (b, m, k), (_, _, n) = s["A"], s["B"]
            return matmul_sched(m, n, k, b, False)
        if w.name.startswith("gemm_bias_relu"):
            (m, k), (_, n) = s["A"], s["B"]
            return matmul_sched(m, n, k, None, True)
        if w.name.startswith("conv_stem"):          # valid, stride 2 (see workloads.py)
            (n, x, y, ci), (kx, ky, _, co) = s["I"], s["F"]
            return conv_sched(n, x, y, ci, co, kx, ky, 2, 0)
        if w.name.startswith("conv_"):              # 3x3, pad 1, stride 1
            (n, x, y, ci), (kx, ky, _, co) = s["I"], s["F"]
            return conv_sched(n, x, y, ci, co, kx, ky, 1, 1)
        if w.name.startswith("dwconv"):             # 3x3, pad 1
            (n, x, y, c), (kx, ky, _) = s["I"], s["F"]
            return dwconv_sched(n, x, y, c, kx, ky)
        if w.name.startswith("gemv"):
            return gemv_sched(*s["W"])
        if w.name.startswith("softmax"):
            return softmax_sched(*s["I"])
        if w.name.startswith("layernorm"):
            return layernorm_sched(*s["X"])
        if w.name.startswith("tanh_chain"):
            return tanh_sched(*s["A"])
        raise NotImplementedError(f"no TVM definition of {w.name}")

    def tensor(arr: np.ndarray, dev):  # type: ignore[no-untyped-def]
        return (tvm.runtime.tensor(arr, dev) if hasattr(tvm.runtime, "tensor")
                else tvm.nd.array(arr, dev))

    def build(w: Workload, x: dict[str, np.ndarray]):  # type: ignore[no-untyped-def]
        dev = tvm.cpu(0)
        f = tvm.compile(make_schedule(w).mod, target=target)
        args = [tensor(x[name], dev) for name in w.shapes]
        shape = w.numpy_fn(**x).shape
        out = tensor(np.empty(shape, np.float32), dev)
        try:                # a zero-copy numpy view of the output: no copy in the timing
            view = np.from_dlpack(out)
        except Exception:  # noqa: BLE001 - older numpy/TVM: copy
            view = None

        def run() -> np.ndarray:
            f(*args, out)
            return view if view is not None else out.numpy()
        return run

    build.schedule = make_schedule  # type: ignore[attr-defined]  # for inspection
    build.info = {  # type: ignore[attr-defined]
        "tvm": tvm.__version__, "target": str(target),
        "runtime_threads": int(tvm.runtime.num_threads()),
        "TVM_NUM_THREADS": os.environ.get("TVM_NUM_THREADS"),
        "TVM_THREAD_POOL_SPIN_COUNT": os.environ.get("TVM_THREAD_POOL_SPIN_COUNT"),
        "exp_tanh": "topi.fast_exp/fast_tanh" if fast_math else "te.exp/te.tanh (libm)"}
    return build


# --------------------------------------------------------------------------- PyTorch

def torch_builder():  # type: ignore[no-untyped-def]
    """PyTorch on the CPU (its default kernels, oneDNN/MKL where the wheel has them), as
    many threads as the run's thread count (``STRIPE_PEER_THREADS``, else the CPUs the
    process may use): the matmuls, the 3x3
    convolutions (channels-last, so the NHWC arrays are read in place) and their weight
    gradients by autograd (the forward is run once; each call is one ``backward`` of the
    given cotangent, which computes only the weight's gradient)."""
    import torch

    torch.set_num_threads(int(os.environ.get("STRIPE_PEER_THREADS")
                              or len(os.sched_getaffinity(0))))
    torch.set_grad_enabled(True)
    nchw = (0, 3, 1, 2)                         # an NHWC array as an NCHW channels-last view

    def build(w: Workload, x: dict[str, np.ndarray]):  # type: ignore[no-untyped-def]
        t = {k: torch.from_numpy(v) for k, v in x.items()}
        if w.name.startswith(("matmul", "fc_")):
            a, b = t["A"], t["B"]
            return lambda: torch.matmul(a, b).numpy()
        if w.name.startswith("conv_") and not w.name.startswith("conv_stem"):
            inp, f = t["I"].permute(*nchw), t["F"].permute(3, 2, 0, 1)   # HWIO -> OIHW
            return lambda: torch.nn.functional.conv2d(inp, f, padding=1).permute(
                0, 2, 3, 1).numpy()
        if w.name.startswith("wgrad_matmul"):
            b = t["B"].clone().requires_grad_(True)
            out = torch.matmul(t["A"], b)
            grad = t["O_grad"]

            def run() -> np.ndarray:
                b.grad = None
                out.backward(grad, retain_graph=True)
                return b.grad.numpy()
            return run
        if w.name.startswith("wgrad_conv"):
            f = t["F"].permute(3, 2, 0, 1).contiguous().requires_grad_(True)
            out = torch.nn.functional.conv2d(t["I"].permute(*nchw), f, padding=1)
            grad = t["O_grad"].permute(*nchw)

            def run() -> np.ndarray:
                f.grad = None
                out.backward(grad, retain_graph=True)
                return f.grad.permute(2, 3, 1, 0).numpy()      # OIHW -> HWIO
            return run
        raise NotImplementedError(f"no PyTorch definition of {w.name}")

    def model(path: str, feeds: dict[str, np.ndarray]):  # type: ignore[no-untyped-def]
        """A whole ONNX model converted by onnx2torch (a torch.fx module of torch.nn
        layers holding the model's weights), run in eval mode under inference_mode."""
        import onnx

        onnx2torch = _import_onnx2torch()
        proto = onnx.load(path)
        names = [o.name for o in proto.graph.output]
        order = [i.name for i in proto.graph.input if i.name in feeds]
        module = onnx2torch.convert(proto).eval()
        args = [torch.from_numpy(feeds[k]) for k in order]

        def run() -> dict[str, np.ndarray]:
            with torch.inference_mode():
                out = module(*args)
            outs = out if isinstance(out, (tuple, list)) else [out]
            return {n: o.numpy() for n, o in zip(names, outs)}
        return run

    build.model = model  # type: ignore[attr-defined]
    build.info = {"torch": torch.__version__,  # type: ignore[attr-defined]
                  "threads": torch.get_num_threads()}
    return build


# --------------------------------------------------------------------------- ONNX Runtime

def _peer_threads() -> int:
    return int(os.environ.get("STRIPE_PEER_THREADS") or len(os.sched_getaffinity(0)))


def ort_session(model: object, threads: int,
                profile: str | None = None):  # type: ignore[no-untyped-def]
    """An ONNX Runtime session as a user makes one for latency: the default CPU provider,
    every graph optimisation (ORT_ENABLE_ALL, its default), ``threads`` intra-op threads
    (the process is pinned to as many CPUs), one inter-op thread, sequential execution.
    ``model`` is a path or an ``onnx.ModelProto``; ``profile``: ORT's profiler on, its
    file starting with that prefix."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if profile:
        so.enable_profiling = True
        so.profile_file_prefix = profile
    data = model if isinstance(model, str) else model.SerializeToString()  # type: ignore
    return ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def ort_bound_run(sess, feeds: dict[str, np.ndarray]):  # type: ignore[no-untyped-def]
    """A call of ``sess`` on ``feeds`` through an I/O binding: the inputs read in place and
    the outputs written into arrays allocated once (as stripe's ``out=`` and the other
    peers' preallocated tensors), so no call allocates or copies. Returns ``run() ->
    {output name: array}``."""
    first = sess.run(None, feeds)
    names = [o.name for o in sess.get_outputs()]
    outs = {n: np.empty_like(a) for n, a in zip(names, first)}
    binding = sess.io_binding()
    for name, arr in feeds.items():
        binding.bind_cpu_input(name, arr)
    for name, arr in outs.items():
        binding.bind_output(name, "cpu", 0, arr.dtype, list(arr.shape), arr.ctypes.data)

    def run() -> dict[str, np.ndarray]:
        sess.run_with_iobinding(binding)
        return outs
    return run


# Inputs of each workload that are a layer's parameters: ONNX Runtime gets them as
# initializers (constants of the model, as a network holds its weights), which lets it
# pre-pack them once when the session is made; stripe and the other peers receive them as
# arguments of every call.
ORT_WEIGHTS = {"fc_": ("B",), "gemv": ("W",), "conv_": ("F",), "dwconv": ("F",),
               "gemm_bias_relu": ("B", "Bias"), "layernorm": ("G", "Bias")}

_NCHW = (0, 3, 1, 2)    # NHWC -> NCHW


def _to_nhwc(o: np.ndarray) -> np.ndarray:
    return o.transpose(0, 2, 3, 1)


def _checked_output(run, out):  # type: ignore[no-untyped-def]
    """``out`` in the workload's layout (``run.post``, set by the ONNX Runtime builder)."""
    post = getattr(run, "post", None)
    return post(out) if post is not None else out


def ort_graph(w: Workload, x: dict[str, np.ndarray]):  # type: ignore[no-untyped-def]
    """The workload as a small ONNX model in ONNX's own layout: ``(model, feeds, post)``.
    ``feeds`` are the graph's inputs (NCHW copies of the NHWC arrays for the
    convolutions, made once, outside the timing), ``post`` turns the graph's output back
    into the workload's layout for the check only. MatMul for the matmuls (``fc_*``,
    ``gemv`` with their weights as initializers), one Conv for the convolutions (NCHW, the
    filter an OIHW initializer; ``group=C`` for the depthwise one), Gemm + Relu,
    Softmax, LayerNormalization, Mul + Add + Tanh. The weight gradients have no inference
    operator: NotImplementedError."""
    from onnx import TensorProto, helper, numpy_helper

    name = w.name
    weights = next((v for k, v in ORT_WEIGHTS.items() if name.startswith(k)), ())
    if name.startswith("conv_stem"):
        weights = ("F",)
    nodes, inits, feeds = [], [], {}
    post = None

    def arg(k: str, arr: np.ndarray) -> str:
        arr = np.ascontiguousarray(arr, np.float32)
        if k in weights:
            inits.append(numpy_helper.from_array(arr, k))
        else:
            feeds[k] = arr
        return k

    if name.startswith(("matmul", "fc_", "bmatmul")):
        nodes.append(helper.make_node("MatMul", [arg("A", x["A"]), arg("B", x["B"])], ["O"]))
    elif name.startswith("gemv"):
        nodes.append(helper.make_node("MatMul", [arg("W", x["W"]), arg("X", x["X"])], ["O"]))
    elif name.startswith(("conv_", "dwconv")):
        f = x["F"]
        if name.startswith("dwconv"):                    # (KX, KY, C) -> (C, 1, KX, KY)
            kern, group = f.transpose(2, 0, 1)[:, None], f.shape[2]
        else:                                            # HWIO -> OIHW
            kern, group = f.transpose(3, 2, 0, 1), 1
        stem = name.startswith("conv_stem")
        nodes.append(helper.make_node(
            "Conv", [arg("I", x["I"].transpose(*_NCHW)), arg("F", kern)], ["O"],
            kernel_shape=list(kern.shape[2:]), group=group,
            strides=[2, 2] if stem else [1, 1], pads=[0] * 4 if stem else [1] * 4))
        post = _to_nhwc
    elif name.startswith("gemm_bias_relu"):
        nodes += [helper.make_node("Gemm", [arg("A", x["A"]), arg("B", x["B"]),
                                            arg("Bias", x["Bias"])], ["C"]),
                  helper.make_node("Relu", ["C"], ["O"])]
    elif name.startswith("softmax"):
        nodes.append(helper.make_node("Softmax", [arg("I", x["I"])], ["O"], axis=-1))
    elif name.startswith("layernorm"):
        nodes.append(helper.make_node(
            "LayerNormalization", [arg("X", x["X"]), arg("G", x["G"]), arg("Bias", x["Bias"])],
            ["O"], axis=-1, epsilon=1e-5))
    elif name.startswith("tanh_chain"):
        nodes += [helper.make_node("Mul", [arg("A", x["A"]), arg("B", x["B"])], ["T1"]),
                  helper.make_node("Add", ["T1", arg("C", x["C"])], ["T2"]),
                  helper.make_node("Tanh", ["T2"], ["O"])]
    else:
        raise NotImplementedError(f"no ONNX Runtime definition of {name}")
    ins = [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(a.shape))
           for k, a in feeds.items()]
    outs = [helper.make_tensor_value_info("O", TensorProto.FLOAT, None)]
    graph = helper.make_graph(nodes, name, ins, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, feeds, post


def _load_npz(path: str) -> dict[str, np.ndarray]:
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def ort_builder():  # type: ignore[no-untyped-def]
    """ONNX Runtime's default CPU provider (MLAS), ``STRIPE_PEER_THREADS`` intra-op threads
    (else the CPUs the process may use), one inter-op thread; each workload as the small
    model of :func:`ort_graph`, called through an I/O binding (:func:`ort_bound_run`)."""
    import onnxruntime as ort

    threads = _peer_threads()

    def build(w: Workload, x: dict[str, np.ndarray]):  # type: ignore[no-untyped-def]
        model, feeds, post = ort_graph(w, x)
        call = ort_bound_run(ort_session(model, threads), feeds)

        def run() -> np.ndarray:
            return call()["O"]
        run.post = post  # type: ignore[attr-defined]
        return run

    def model(path: str, feeds: dict[str, np.ndarray]):  # type: ignore[no-untyped-def]
        return ort_bound_run(ort_session(path, threads), feeds)

    build.model = model  # type: ignore[attr-defined]
    build.info = {"onnxruntime": ort.__version__,  # type: ignore[attr-defined]
                  "providers": ["CPUExecutionProvider"], "intra_op_num_threads": threads,
                  "inter_op_num_threads": 1, "graph_optimization_level": "ORT_ENABLE_ALL"}
    return build


def _import_onnx2torch():  # type: ignore[no-untyped-def]
    """onnx2torch imports torchvision for its NonMaxSuppression and RoiAlign converters
    only; where torchvision is not installed (no wheel matches the installed torch), a
    stand-in module lets the other converters load, and a model using those two operators
    fails to convert."""
    import types

    try:
        import torchvision  # noqa: F401
    except ImportError:
        tv = types.ModuleType("torchvision")
        tv.ops = types.ModuleType("torchvision.ops")  # type: ignore[attr-defined]

        def missing(*_a: object, **_k: object) -> None:
            raise NotImplementedError("torchvision is not installed")
        tv.ops.roi_align = tv.ops.nms = tv.ops.box_convert = missing  # type: ignore
        sys.modules.setdefault("torchvision", tv)
        sys.modules.setdefault("torchvision.ops", tv.ops)  # type: ignore[attr-defined]
    import onnx2torch

    return onnx2torch


# --------------------------------------------------------------------------- driver

def _message(e: Exception) -> str:
    """One line saying what failed: TVM's errors (ScheduleError, TVMError) can start with a
    traceback or a banner and end with the message that matters."""
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    msg = next((ln for ln in reversed(lines) if ln.startswith(("Error message:", "Check failed"))),
               None)
    if msg is None:
        msg = next((ln for ln in lines if not ln.startswith(("Traceback", "File "))),
                   lines[0] if lines else "")
    return msg[:300]


def _reply(obj: dict) -> None:
    print(REPLY_MARK + json.dumps(obj), flush=True)


def relative_error(got: dict[str, np.ndarray], want: dict[str, np.ndarray]) -> float:
    """The largest ``max|got - want| / max|want|`` over the outputs (``want``'s names);
    infinite when an output is missing or has another shape."""
    worst = 0.0
    for k, ref in want.items():
        out = got.get(k)
        if out is None or out.shape != ref.shape:
            return float("inf")
        scale = float(np.abs(ref).max()) or 1.0
        diff = float(np.abs(out.astype(np.float64) - ref).max()) if ref.size else 0.0
        worst = max(worst, diff / scale)
    return worst


def prepare_model(builder, req: dict):  # type: ignore[no-untyped-def]
    """Answer a ``prepare_model`` request (module docstring): ``(reply, run or None)``."""
    make = getattr(builder, "model", None)
    if make is None:
        return {"check": "FAILED: this peer runs no whole models"}, None
    feeds = _load_npz(req["inputs"])
    try:
        t0 = time.perf_counter()
        run = make(req["path"], feeds)
        compile_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        out = run()
        first = time.perf_counter() - t0
    except Exception as e:  # noqa: BLE001
        return {"check": f"FAILED {type(e).__name__}: {_message(e)}"}, None
    reply = {"compile_s": compile_s, "first_s": first}
    if req.get("save"):
        np.savez(req["save"], **out)
    if req.get("ref"):
        err = relative_error(out, _load_npz(req["ref"]))
        ok = err < float(req.get("tol", 1e-3))
        reply.update(check=("ok" if ok else "FAILED") + f" relative error {err:.3g}", err=err)
        return reply, (run if ok else None)
    reply["check"] = "reference"
    return reply, run


def serve(peer: str) -> int:
    """Answer the suite's requests (see the module docstring) until ``quit`` or EOF."""
    try:
        builder = BUILDERS[peer]()
    except Exception as e:  # noqa: BLE001
        _reply({"error": f"{type(e).__name__}: {e}"})
        return 0
    _reply({"ready": True, "info": getattr(builder, "info", None)})
    runs = {}
    for line in iter(sys.stdin.readline, ""):
        req = json.loads(line)
        if req["cmd"] == "quit":
            break
        name = req.get("workload") or req.get("key")
        if req["cmd"] == "prepare":
            w = by_name()[name]
            x = w.inputs()
            ref = w.numpy_fn(**x)
            try:
                t0 = time.perf_counter()
                run = builder(w, x)
                compile_s = time.perf_counter() - t0
                t0 = time.perf_counter()
                out = run()
                first = time.perf_counter() - t0
                out = _checked_output(run, out)
            except Exception as e:  # noqa: BLE001
                _reply({"check": f"FAILED {type(e).__name__}: {_message(e)}"})
                continue
            atol = w.atol_rel * float(np.abs(ref).max() or 1.0)
            ok = out.shape == ref.shape and bool(np.allclose(out, ref, rtol=w.rtol, atol=atol))
            err = float(np.abs(out.astype(np.float64) - ref).max()) if ok else float("nan")
            if ok:
                runs[name] = run
            _reply({"check": ("ok" if ok else "FAILED") + f" max abs err {err:.3g}",
                    "compile_s": compile_s, "first_s": first})
        elif req["cmd"] == "prepare_model":
            reply, run = prepare_model(builder, req)
            if run is not None:
                runs[req["key"]] = run
            _reply(reply)
        elif req["cmd"] == "time":
            run = runs[name]
            if req.get("warm", True):
                # untimed calls for at least warm_s seconds (at least one), as run.py warms
                # its own systems after a pause
                warm(run, float(req.get("warm_s", 0.0)))
            samples = []
            c0 = time.process_time()            # CPU time of every thread of this process
            for _ in range(int(req["n"])):
                t0 = time.perf_counter()
                run()
                samples.append(time.perf_counter() - t0)
            _reply({"samples_s": samples, "cpu_s": time.process_time() - c0})
    return 0


BUILDERS = {"plaidml": plaidml_builder, "tvm": tvm_builder, "torch": torch_builder,
            "ort": ort_builder}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--peer", required=True, choices=sorted(BUILDERS))
    ap.add_argument("--workloads", default="")
    ap.add_argument("--serve", action="store_true",
                    help="answer the suite's requests on stdin (module docstring)")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--budget", type=float, default=10.0)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    if args.serve:
        return serve(args.peer)
    if not (args.workloads and args.out):
        ap.error("--workloads and --out are required without --serve")
    threads = int(os.environ.get("OMP_NUM_THREADS", "1"))
    res: dict = {"peer": args.peer, "threads": threads, "workloads": {}}
    try:
        builder = BUILDERS[args.peer]()
    except Exception as e:  # noqa: BLE001
        res["error"] = f"{type(e).__name__}: {e}"
        print(f"  [{args.peer}] not measured: {res['error']}", flush=True)
        with open(args.out, "w") as f:
            json.dump(res, f)
        return 0
    info = getattr(builder, "info", None)
    if info:
        res["info"] = info
        rt = info.get("runtime_threads")
        if rt is not None and rt != threads:
            print(f"  [{args.peer}] WARNING: runtime uses {rt} threads, OMP_NUM_THREADS={threads}",
                  flush=True)
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
            out = _checked_output(run, out)
        except Exception as e:  # noqa: BLE001
            msg = _message(e)
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
